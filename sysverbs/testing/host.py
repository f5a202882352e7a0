"""A fake host on disk: :func:`materialize` writes a host description below a
directory and returns a :class:`FakeHost`; the bundled fixture hosts by name."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from ..ground.errors import UnknownFixtureError, WrongTypeError
from . import umockdev as recording
from .umockdev import Recording, TreeEntry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .builder import HostBuilder

__all__ = ["FakeHost", "Host", "Source", "materialize", "fixture_names", "fixture_path",
           "load_fixture", "as_recording", "FIXTURE_DIR", "FIXTURE_SUFFIX"]

#: What :func:`materialize` accepts: a :class:`~sysverbs.testing.HostBuilder`, a
#: :class:`~sysverbs.recording.Recording`, the name of a bundled fixture or the path
#: of a recording file.
Source = Union["HostBuilder", Recording, str, "os.PathLike[str]"]

FIXTURE_SUFFIX = ".umockdev"
FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures"




@dataclass(frozen=True, init=False)
class FakeHost:
    """A host written to disk: ``sysfs`` stands for /sys, ``dev`` for /dev/infiniband,
    :attr:`proc` for /proc.

    ``get_device_list()`` lists it with sysverbs (``providers="builtin"`` unless you
    say otherwise, so the test machine's rdma-core does not matter).
    """

    root: Path
    sysfs: Path
    dev: Path
    dev_nodes: tuple[str, ...]
    # The recording given, or None: read from root/host.umockdev when first asked for.
    _recording: Optional[Recording] = field(repr=False, compare=False)

    def __init__(self, root: Path, sysfs: Path, dev: Path, dev_nodes: tuple[str, ...],
                 recording: Optional[Recording] = None) -> None:
        object.__setattr__(self, "root", root)
        object.__setattr__(self, "sysfs", sysfs)
        object.__setattr__(self, "dev", dev)
        object.__setattr__(self, "dev_nodes", dev_nodes)
        object.__setattr__(self, "_recording", recording)

    @property
    def recording(self) -> Recording:
        """What was written (not compared: hosts compare by their paths).  A host made
        without one (:func:`sysverbs.testing.cache.cached_fixture`'s) reads
        ``root/host.umockdev`` when first asked: parsing a big fixture takes longer
        than listing its tree; no such file, no records."""
        rec = self._recording
        if rec is None:
            path = self.root / "host.umockdev"
            rec = recording.load(path) if path.is_file() else Recording(())
            object.__setattr__(self, "_recording", rec)
        return rec

    @property
    def proc(self) -> Path:
        """``root/proc``: what stands for ``/proc`` (the NVIDIA driver's GPU files of
        :meth:`HostBuilder.gpu`, any :meth:`HostBuilder.proc_file`; see
        :func:`sysverbs.recording.proc_file`)."""
        return self.root / "proc"

    def options(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for :func:`sysverbs.get_device_list` on this host."""
        # source="sysfs": with "auto", a host with RDMA netlink would list its real devices.
        opts: dict[str, Any] = {"sysfs_path": str(self.sysfs), "dev_dir": str(self.dev),
                                "providers": "builtin", "source": "sysfs"}
        opts.update(overrides)
        return opts

    def get_device_list(self, **overrides: Any) -> Any:
        """``sysverbs.get_device_list(**self.options(**overrides))``."""
        from ..engine.api import get_device_list

        return get_device_list(**self.options(**overrides))

    def recording_file(self) -> Path:
        """The host's recording, written once to ``root/host.umockdev``."""
        path = self.root / "host.umockdev"
        if not path.exists():
            path.write_text(recording.dumps(self.recording), encoding="utf-8",
                            errors="surrogateescape")
        return path

    def umockdev_command(self, argv: Sequence[str]) -> list[str]:
        """``umockdev-run -d <recording> -- argv``: run ``argv`` with this host as its
        /sys and /dev (libibverbs, pyudev and sysverbs all see it; leave SYSFS_PATH
        unset)."""
        return recording.umockdev_run_command(self.recording_file(), argv)




def as_recording(source: Source) -> Recording:
    """The :class:`Recording` of any :data:`Source`."""
    if isinstance(source, Recording):
        return source
    if not isinstance(source, (str, os.PathLike)):  # a HostBuilder
        if not callable(getattr(source, "build", None)):
            raise WrongTypeError("a host is a HostBuilder, a Recording, a fixture name or a "
                                 f"recording file, not {type(source).__name__}")
        return source.build()
    text = os.fspath(source)
    if isinstance(source, str) and "/" not in text and not os.path.exists(text):
        return load_fixture(text)
    return recording.load(text)


def materialize(source: Source, root: Union[str, os.PathLike[str]], *,
                entries: Iterable[TreeEntry] = ()) -> FakeHost:
    """Write a host below ``root`` and return its paths: a :class:`HostBuilder`, a
    :class:`Recording`, the name of a bundled fixture or the path of a recording file.

    ``root`` is created if needed; it may already hold another materialized recording
    (like loading several files into one umockdev testbed), but a device, link or node
    that exists already is an error.  ``root/sys``, ``root/sys/class`` and
    ``root/dev/infiniband`` always exist afterwards.  ``entries``: paths that no
    device record holds (:class:`~sysverbs.recording.TreeEntry`: a broken or partial
    host), written after the records.  See :mod:`sysverbs.recording` for what is
    written.

    >>> import tempfile
    >>> from sysverbs.recording import TreeEntry
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     host = materialize(Recording(()), tmp, entries=[
    ...         TreeEntry("sys/class/infiniband_verbs/abi_version", b"6"),
    ...         TreeEntry("sys/class/infiniband_verbs/uverbs0", link="../../devices/gone")])
    ...     sorted(p.name for p in (host.sysfs / "class/infiniband_verbs").iterdir())
    ['abi_version', 'uverbs0']
    """
    rec = as_recording(source)
    nodes = recording.write_tree(rec, root, entries)
    path = Path(root)
    return FakeHost(path, path / "sys", path / "dev" / "infiniband", nodes, rec)


#: The name :mod:`sysverbs.recording` gives a materialized host.
Host = FakeHost


# ------------------------------------------------------------------------ fixtures


def fixture_names() -> list[str]:
    """Names of the bundled fixtures (``sysverbs/fixtures/<name>.umockdev``), sorted."""
    if not FIXTURE_DIR.is_dir():
        return []
    return sorted(p.name[: -len(FIXTURE_SUFFIX)] for p in FIXTURE_DIR.iterdir()
                  if p.name.endswith(FIXTURE_SUFFIX) and p.is_file())


def fixture_path(name: str) -> Path:
    """Path of bundled fixture ``name`` (with or without the ``.umockdev`` suffix)."""
    if not isinstance(name, str):
        raise WrongTypeError(f"a fixture name is a str, not {type(name).__name__}")
    stem = name[: -len(FIXTURE_SUFFIX)] if name.endswith(FIXTURE_SUFFIX) else name
    if stem not in fixture_names():
        have = ", ".join(fixture_names())
        raise UnknownFixtureError(f"no bundled fixture {name!r} (have: {have})")
    return FIXTURE_DIR / (stem + FIXTURE_SUFFIX)




def load_fixture(name: str) -> Recording:
    """A bundled fixture host by name."""
    return recording.load(fixture_path(name))

"""A fake host on disk: :class:`FakeHost`, the paths of a host description written
below a directory, and :func:`write_host`, which writes one (what
:func:`sysverbs.testing.materialize` does once it has a :class:`Recording`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from . import umockdev as recording
from .umockdev import Recording, TreeEntry

__all__ = ["FakeHost", "write_host"]


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
        :func:`sysverbs.testing.umockdev.proc_file`)."""
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


def write_host(rec: Recording, root: Union[str, os.PathLike[str]],
               entries: Iterable[TreeEntry] = ()) -> FakeHost:
    """Write ``rec`` below ``root``, then ``entries``, and return the host's paths (see
    :func:`sysverbs.testing.materialize`)."""
    nodes = recording.write_tree(rec, root, entries)
    path = Path(root)
    return FakeHost(path, path / "sys", path / "dev" / "infiniband", nodes, rec)

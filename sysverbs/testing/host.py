"""A fake host on disk: :func:`materialize` writes a host description below a
directory and returns a :class:`FakeHost`; the bundled fixture hosts by name."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Union

from ..ground.errors import UnknownFixtureError, WrongTypeError
from . import umockdev as recording
from .fakehost import FakeHost, write_host
from .umockdev import Recording, TreeEntry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .builder import HostBuilder

__all__ = ["FakeHost", "Source", "materialize", "fixture_names", "fixture_path",
           "load_fixture", "as_recording", "FIXTURE_DIR", "FIXTURE_SUFFIX"]

#: What :func:`materialize` accepts: a :class:`~sysverbs.testing.HostBuilder`, a
#: :class:`~sysverbs.testing.umockdev.Recording`, the name of a bundled fixture or the path
#: of a recording file.
Source = Union["HostBuilder", Recording, str, "os.PathLike[str]"]

FIXTURE_SUFFIX = ".umockdev"
FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures"


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
    device record holds (:class:`~sysverbs.testing.umockdev.TreeEntry`: a broken or partial
    host), written after the records.  See :mod:`sysverbs.testing.umockdev` for what
    is written.

    >>> import tempfile
    >>> from sysverbs.testing.umockdev import TreeEntry
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     host = materialize(Recording(()), tmp, entries=[
    ...         TreeEntry("sys/class/infiniband_verbs/abi_version", b"6"),
    ...         TreeEntry("sys/class/infiniband_verbs/uverbs0", link="../../devices/gone")])
    ...     sorted(p.name for p in (host.sysfs / "class/infiniband_verbs").iterdir())
    ['abi_version', 'uverbs0']
    """
    return write_host(as_recording(source), root, entries)


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

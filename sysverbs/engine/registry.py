"""Which source a call reads: the registry of sources (sysfs, netlink, udev) and
libibverbs' order of trying them.

A source turns the options of a call (a :class:`~sysverbs.sources.base.LibraryKey`)
into a :class:`~sysverbs.sources.base.Scan`.  ``source="auto"`` follows libibverbs:
each source in :data:`AUTO_ORDER` is tried and the first that does not raise
:class:`~sysverbs.errors.SourceUnavailable` is used.
"""


from __future__ import annotations

from ..ground.errors import SourceUnavailable
from ..sources.base import Scan
from ..sources.sysfs import scan_sysfs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..sources.base import LibraryKey

    SourceFunc = Callable[[LibraryKey], Scan]

__all__ = ["register", "scan", "names", "AUTO_ORDER"]

_SOURCES: dict[str, SourceFunc] = {}
#: Sources tried in turn by ``source="auto"`` (netlink goes first once registered).
AUTO_ORDER: list[str] = []


def register(name: str, func: SourceFunc, *, auto_position: int | None = None) -> None:
    """Register a source; ``auto_position`` inserts it into :data:`AUTO_ORDER`."""
    _SOURCES[name] = func
    if auto_position is not None and name not in AUTO_ORDER:
        AUTO_ORDER.insert(auto_position, name)


def names() -> tuple[str, ...]:
    """Every accepted ``source=`` value."""
    return ("auto", *_SOURCES)


def scan(key: LibraryKey) -> Scan:
    """Run the source the key names (``auto``: the first available in AUTO_ORDER)."""
    if key.source != "auto":
        return _SOURCES[key.source](key)
    last: SourceUnavailable | None = None
    for name in AUTO_ORDER:
        try:
            return _SOURCES[name](key)
        except SourceUnavailable as e:
            last = e
    raise last or SourceUnavailable("no source available")


def _sysfs(key: LibraryKey) -> Scan:
    # abi_version and node_type are read later, only for records that are matched
    # (not for devices that survive from an earlier call).
    return Scan(scan_sysfs(key.sysfs_root, key.dev_dir, lazy=True))


def _netlink(key: LibraryKey) -> Scan:
    from ..sources.netlink import scan_netlink

    return scan_netlink(key)


def _udev(key: LibraryKey) -> Scan:
    from ..sources.udev import scan_udev

    return scan_udev(key)


register("sysfs", _sysfs, auto_position=0)
register("netlink", _netlink, auto_position=0)  # libibverbs asks netlink first
register("udev", _udev)

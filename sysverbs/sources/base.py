"""What every source shares: the options of a call (:class:`LibraryKey`), what a
source returns (:class:`Scan`) and how it says it cannot be used here
(:class:`~sysverbs.ground.errors.SourceUnavailable`)."""

from __future__ import annotations

from ..ground.errors import SourceUnavailable
from ..ground.records import RecordTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..ground.records import DeviceRecord

__all__ = ["LibraryKey", "Scan", "SourceUnavailable"]


class LibraryKey(RecordTuple, tuple[str, bytes, bytes, bytes, str, int, "tuple[str, ...]"]):
    """The options that make one emulated libibverbs instance."""

    __slots__ = ()
    _fields = ("source", "sysfs_root", "dev_dir", "config_dir", "providers", "release",
               "static")

    def __new__(cls, source: str, sysfs_root: bytes, dev_dir: bytes, config_dir: bytes,
                providers: str, release: int, static: tuple[str, ...] = ()) -> LibraryKey:
        return tuple.__new__(cls, (source, sysfs_root, dev_dir, config_dir, providers, release,
                                   static))

    @property
    def source(self) -> str:
        return self[0]

    @property
    def sysfs_root(self) -> bytes:
        return self[1]

    @property
    def dev_dir(self) -> bytes:
        return self[2]

    @property
    def config_dir(self) -> bytes:
        return self[3]

    @property
    def providers(self) -> str:
        """"installed", "builtin" or "static"."""
        return self[4]

    @property
    def release(self) -> int:
        return self[5]

    @property
    def static(self) -> tuple[str, ...]:
        """With ``providers="static"``: the providers linked in, in link order."""
        return self[6]


class Scan:
    """The candidates of one enumeration."""

    __slots__ = ("records", "netlink")

    def __init__(self, records: list[DeviceRecord], netlink: bool = False) -> None:
        self.records = records
        self.netlink = netlink  # the kernel answered GET_CHARDEV (docs/behaviour.md)

    def __repr__(self) -> str:
        return f"Scan({self.records!r}, netlink={self.netlink})"

"""What every source shares: the options of a call (:class:`LibraryKey`), what a
source returns (:class:`Scan`) and how it says it cannot be used here
(:class:`~sysverbs.errors.SourceUnavailable`)."""

from __future__ import annotations

from .._core.typing_light import NamedTuple
from ..errors import SourceUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._core.records import DeviceRecord

__all__ = ["LibraryKey", "Scan", "SourceUnavailable"]


class LibraryKey(NamedTuple):
    """The options that make one emulated libibverbs instance."""

    source: str
    sysfs_root: bytes
    dev_dir: bytes
    config_dir: bytes
    providers: str  # "installed" or "builtin"
    release: int



class Scan:
    """The candidates of one enumeration."""

    __slots__ = ("records", "netlink")

    def __init__(self, records: list[DeviceRecord], netlink: bool = False) -> None:
        self.records = records
        self.netlink = netlink  # the kernel answered GET_CHARDEV (docs/behaviour.md)

    def __repr__(self) -> str:
        return f"Scan({self.records!r}, netlink={self.netlink})"

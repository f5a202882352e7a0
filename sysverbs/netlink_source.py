"""The RDMA netlink source (spec 1.12): not implemented yet, so ``auto`` uses sysfs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .sources import Scan, SourceUnavailable

if TYPE_CHECKING:
    from .devlist import LibraryKey

__all__ = ["scan_netlink"]


def scan_netlink(key: LibraryKey) -> Scan:
    """Enumerate over RDMA netlink; raises SourceUnavailable when it cannot."""
    raise SourceUnavailable("the netlink source is not implemented yet")

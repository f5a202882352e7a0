"""The udev source (pyudev): not implemented yet."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .sources import Scan, SourceUnavailable

if TYPE_CHECKING:
    from .devlist import LibraryKey

__all__ = ["scan_udev"]


def scan_udev(key: LibraryKey) -> Scan:
    """Enumerate through pyudev; raises SourceUnavailable when it cannot."""
    raise SourceUnavailable("the udev source is not implemented yet")

"""Where device records come from: a registry of sources (sysfs, netlink, udev).

A source turns the options of a call (a :class:`~sysverbs.devlist.LibraryKey`)
into a :class:`Scan`: the candidate records in libibverbs' temporary-list order
(reverse readdir order for sysfs, reverse dump order for netlink) and whether a
netlink GET_CHARDEV reply was accepted (then libibverbs forces the global ABI to 6;
identity is by kernel index whenever records carry one).
Every source produces the same :class:`~sysverbs.records.DeviceRecord` objects,
and every attribute value is read by :func:`sysverbs.sysfs_read.read_sysfs_file`.

``source="auto"`` follows libibverbs: each source in :data:`AUTO_ORDER` is tried
and the first that does not raise :class:`SourceUnavailable` is used.
"""

from __future__ import annotations

import errno
import os

from .errors import SourceUnavailable
from .sysfs_source import scan_sysfs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .devlist import LibraryKey
    from .netlink_socket import Transport
    from .records import DeviceRecord

    SourceFunc = Callable[["LibraryKey"], "Scan"]

__all__ = [
    "Scan",
    "SourceUnavailable",
    "register",
    "scan",
    "names",
    "open_netlink",
    "AUTO_ORDER",
    "NETLINK_RDMA",
]

#: The netlink protocol of the RDMA subsystem.
NETLINK_RDMA = 20


class Scan:
    """The candidates of one enumeration."""

    __slots__ = ("records", "netlink")

    def __init__(self, records: list[DeviceRecord], netlink: bool = False) -> None:
        self.records = records
        self.netlink = netlink  # the kernel answered over RDMA netlink (spec 1.12)

    def __repr__(self) -> str:
        return f"Scan({self.records!r}, netlink={self.netlink})"


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


def open_netlink() -> Transport:
    """A ``NETLINK_RDMA`` socket set up as ``rdmanl_socket_alloc`` does (a
    :class:`~sysverbs.netlink_socket.SocketTransport`), or :class:`SourceUnavailable`
    with the socket's errno where libibverbs falls back to sysfs.

    On a host without RDMA netlink (most containers, CI) the ``socket()`` call is all
    that happens: the netlink modules are imported only once it succeeded.  Tests
    replace this function with a fake kernel.
    """
    import _socket

    try:
        family = getattr(_socket, "AF_NETLINK", None)
        if family is None:
            raise OSError(errno.EAFNOSUPPORT, "AF_NETLINK is not supported here")
        sock = _socket.socket(family, _socket.SOCK_RAW, NETLINK_RDMA)
        from .netlink_socket import SocketTransport

        return SocketTransport(sock)
    except OSError as e:
        err = e.errno or errno.EPROTONOSUPPORT
        raise SourceUnavailable(f"no RDMA netlink socket: {os.strerror(err)}", err) from None


def _netlink(key: LibraryKey) -> Scan:
    transport = open_netlink()  # a global looked up at each call: tests replace it
    from .netlink_source import scan_transport

    return scan_transport(key, transport)


def _udev(key: LibraryKey) -> Scan:
    from .udev_source import scan_udev

    return scan_udev(key)


register("sysfs", _sysfs, auto_position=0)
register("netlink", _netlink, auto_position=0)  # libibverbs asks netlink first
register("udev", _udev)

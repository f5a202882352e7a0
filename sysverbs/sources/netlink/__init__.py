"""The RDMA netlink source: libibverbs' ``ibdev_nl.c: find_sysfs_devs_nl``.

:func:`scan_netlink` is the source; :func:`open_netlink` the one place that opens
the socket (tests replace it with a fake kernel).  The modules:
:mod:`~sysverbs.sources.netlink.socket` (the transport),
:mod:`~sysverbs.sources.netlink.wire` (libnl's messages),
:mod:`~sysverbs.sources.netlink.scan` (the device dump) and
:mod:`~sysverbs.sources.netlink.queries` (copy-on-fork, the rdma_cm ABI).

On a host without RDMA netlink (most containers, CI) the ``socket()`` call is all
that happens: the other modules are imported only once it succeeded.
"""

from __future__ import annotations

import errno
import os

from ...ground.errors import SourceUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..base import LibraryKey, Scan
    from .socket import Transport

__all__ = ["NETLINK_RDMA", "open_netlink", "scan_netlink"]

#: The netlink protocol of the RDMA subsystem.
NETLINK_RDMA = 20


def open_netlink() -> Transport:
    """A ``NETLINK_RDMA`` socket set up as ``rdma_nl.c: rdmanl_socket_alloc`` does (a
    :class:`~sysverbs.sources.netlink.socket.SocketTransport`), or
    :class:`~sysverbs.ground.errors.SourceUnavailable` with the socket's errno where
    libibverbs falls back to sysfs."""
    import _socket

    try:
        family = getattr(_socket, "AF_NETLINK", None)
        if family is None:
            raise OSError(errno.EAFNOSUPPORT, "AF_NETLINK is not supported here")
        sock = _socket.socket(family, _socket.SOCK_RAW, NETLINK_RDMA)
        from ...ground import inputs
        from .socket import SocketTransport

        inputs.opaque("RDMA netlink's answers")  # not recorded: no later scrape reuses them

        return SocketTransport(sock)
    except OSError as e:
        from ...ground import inputs

        inputs.opaque("whether RDMA netlink answers")  # a module loaded later would
        err = e.errno or errno.EPROTONOSUPPORT
        raise SourceUnavailable(f"no RDMA netlink socket: {os.strerror(err)}", err) from None


def scan_netlink(key: LibraryKey) -> Scan:
    """Enumerate over RDMA netlink; raises SourceUnavailable where libibverbs falls back.

    ``Scan.netlink`` is True when a ``GET_CHARDEV`` reply was accepted, which is
    what forces libibverbs' global ABI to 6; otherwise the class ``abi_version``
    is checked as in sysfs mode.
    """
    transport = open_netlink()  # a global looked up at each call: tests replace it
    from .scan import scan_transport

    return scan_transport(key, transport)

"""The ``NETLINK_RDMA`` socket, apart from the rest of the netlink source.

``source="auto"`` tries netlink first, as libibverbs does; on a host without RDMA
netlink (most containers, CI) opening the socket is all that happens, so it is
kept out of :mod:`sysverbs.netlink_source`, whose import would cost more than
the attempt.  Tests replace :class:`SocketTransport` here with a fake kernel.
"""

from __future__ import annotations

import errno
import os

from .sources import SourceUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .devlist import LibraryKey
    from .sources import Scan

__all__ = [
    "NETLINK_RDMA",
    "SOCKET_BUFFER",
    "RECV_BUFFER",
    "RECV_TIMEOUT",
    "NetlinkFailure",
    "Transport",
    "SocketTransport",
    "open_transport_or_unavailable",
    "scan_netlink",
]

NETLINK_RDMA = 20
#: libnl's socket buffer sizes (``nl_socket_set_buffer_size(sk, 0, 0)``) and
#: receive buffer (four pages).
SOCKET_BUFFER = 32768
RECV_BUFFER = 4 * (os.sysconf("SC_PAGESIZE") if hasattr(os, "sysconf") else 4096)
#: Seconds to wait for one datagram (libibverbs would wait forever).
RECV_TIMEOUT = 2.0

class NetlinkFailure(Exception):
    """A request failed the way libibverbs treats as failure (``errno`` says why)."""

    def __init__(self, why: str, err: int) -> None:
        super().__init__(why)
        self.errno = err


# -- transport ---------------------------------------------------------------------------


class Transport:
    """A connected netlink socket: what libnl's ``nl_send``/``nl_recv`` talk to.

    Any object with these three methods will do (tests pass fakes)."""

    def send(self, data: bytes) -> None:
        """Send one request; raises OSError."""
        raise NotImplementedError

    def recv(self) -> bytes:
        """One datagram; raises OSError (a timeout too) or NetlinkFailure (truncated)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the socket."""
        raise NotImplementedError


class SocketTransport(Transport):
    """The real ``NETLINK_RDMA`` socket, set up as ``rdmanl_socket_alloc`` does."""

    def __init__(self) -> None:
        import _socket

        af_netlink = getattr(_socket, "AF_NETLINK", None)
        if af_netlink is None:
            raise OSError(errno.EAFNOSUPPORT, "AF_NETLINK is not supported here")
        sock = _socket.socket(af_netlink, _socket.SOCK_RAW, NETLINK_RDMA)
        try:
            sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_SNDBUF, SOCKET_BUFFER)
            sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF, SOCKET_BUFFER)
            sock.bind((0, 0))
            name = sock.getsockname()
            self.port = int(name[0]) if isinstance(name, tuple) else 0
            sock.settimeout(RECV_TIMEOUT)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._trunc = int(getattr(_socket, "MSG_TRUNC", 0x20))

    def send(self, data: bytes) -> None:
        self._sock.sendto(data, (0, 0))

    def recv(self) -> bytes:
        data, _anc, flags, _addr = self._sock.recvmsg(RECV_BUFFER)
        if flags & self._trunc:
            raise NetlinkFailure("a netlink datagram was longer than the buffer", errno.EMSGSIZE)
        return data

    def close(self) -> None:
        self._sock.close()


def open_transport_or_unavailable() -> SocketTransport:
    """A new :class:`SocketTransport`; :class:`SourceUnavailable` (with the socket's
    errno) where libibverbs would fall back to sysfs."""
    try:
        # Looked up in the module at call time, so a test's fake kernel is used.
        transport: SocketTransport = globals()["SocketTransport"]()
    except OSError as e:
        err = e.errno or errno.EPROTONOSUPPORT
        raise SourceUnavailable(f"no RDMA netlink socket: {os.strerror(err)}", err) from None
    return transport


def scan_netlink(key: LibraryKey) -> Scan:
    """Enumerate over RDMA netlink; raises SourceUnavailable where libibverbs falls back.

    ``Scan.netlink`` is True when a ``GET_CHARDEV`` reply was accepted, which is
    what forces libibverbs' global ABI to 6; otherwise the class ``abi_version``
    is checked as in sysfs mode.  (:mod:`sysverbs.netlink_source` is imported only
    once the socket is open.)
    """
    transport = open_transport_or_unavailable()
    try:
        from .netlink_source import scan_with

        return scan_with(transport, key.sysfs_root, key.dev_dir, transport.port)
    finally:
        transport.close()

"""The ``NETLINK_RDMA`` transport: what libnl's socket calls do for libibverbs.

:func:`sysverbs.sources.netlink.open_netlink` creates the socket and wraps it in a
:class:`SocketTransport`; tests put a fake kernel (any :class:`Transport`) there.
"""

from __future__ import annotations

import errno
import os

from ...ground.errors import NetlinkFailure

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _socket import socket

__all__ = [
    "SOCKET_BUFFER",
    "RECV_BUFFER",
    "RECV_TIMEOUT",
    "Transport",
    "SocketTransport",
]
#: libnl's socket buffer sizes (``nl_socket_set_buffer_size(sk, 0, 0)``) and
#: receive buffer (four pages).
SOCKET_BUFFER = 32768
RECV_BUFFER = 4 * (os.sysconf("SC_PAGESIZE") if hasattr(os, "sysconf") else 4096)
#: Seconds to wait for one datagram (libibverbs would wait forever).
RECV_TIMEOUT = 2.0

# -- transport ---------------------------------------------------------------------------


class Transport:
    """A connected netlink socket: what libnl's ``nl_send``/``nl_recv`` talk to.

    Any object with these three methods and ``port`` will do (tests pass fakes)."""

    #: The socket's netlink port id (libnl's local port), 0 when unknown.
    port = 0

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
    """An open ``NETLINK_RDMA`` socket, set up as ``rdmanl_socket_alloc`` does
    (closed again if that fails, with the OSError)."""

    def __init__(self, sock: socket) -> None:
        import _socket

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

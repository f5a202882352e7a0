"""Every interface's IP addresses from the kernel, through rtnetlink (what ``getifaddrs``
uses): the netdevs' addresses ``sysverbs env`` needs for NCCL_SOCKET_IFNAME."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # no typing at run time (rank/environment.py says why)
if TYPE_CHECKING:
    from typing import Any, Optional

__all__ = ["interface_addresses"]


def interface_addresses() -> Optional[dict[str, tuple[str, ...]]]:
    """Every interface's IP addresses, from the kernel (rtnetlink ``RTM_GETADDR`` dump,
    what ``getifaddrs`` uses), named by the kernel's ``RTM_GETLINK`` dump of the same
    network namespace (``/sys/class/net`` shows the namespace that mounted ``/sys``,
    not always this process's); None when rtnetlink cannot be used."""
    import _socket

    try:
        sock = _socket.socket(16, _socket.SOCK_RAW | _socket.SOCK_CLOEXEC, 0)  # NETLINK_ROUTE
    except (OSError, AttributeError):
        return None
    out: dict[int, list[str]] = {}
    try:
        sock.settimeout(2.0)
        sock.bind((0, 0))
        addrs = _dump(sock, 22, 1, bytes(8))  # RTM_GETADDR, ifaddrmsg (AF_UNSPEC)
        links = _dump(sock, 18, 2, bytes(16))  # RTM_GETLINK, ifinfomsg
    except OSError:
        return None
    finally:
        sock.close()
    if addrs is None:
        return None
    import struct

    for mtype, data, off, end in addrs:
        if mtype == 20 and end - off >= 8:  # RTM_NEWADDR
            family, _plen, _fl, _scope, index = struct.unpack_from("=BBBBI", data, off)
            attrs = _rtattrs(data, off + 8, end)
            raw = attrs.get(2) or attrs.get(1)  # IFA_LOCAL, else IFA_ADDRESS
            if raw is not None and family in (2, 10):
                out.setdefault(index, []).append(_socket.inet_ntop(family, raw))
    by_index: dict[int, str] = {}
    for mtype, data, off, end in links or ():
        if mtype == 16 and end - off >= 16:  # RTM_NEWLINK: IFLA_IFNAME
            index = struct.unpack_from("=i", data, off + 4)[0]
            name = _rtattrs(data, off + 16, end).get(3)
            if name is not None:
                by_index[index] = os.fsdecode(name.split(b"\0", 1)[0])
    if links is None:
        by_index = _interface_names()
    names: dict[str, tuple[str, ...]] = {}
    for index, found in out.items():
        if index in by_index:
            names[by_index[index]] = tuple(found)
    return names


def _dump(sock: Any, request: int, seq: int, body: bytes
          ) -> Optional[list[tuple[int, bytes, int, int]]]:
    """The messages of one rtnetlink dump: (type, buffer, payload start, end); None when
    the kernel answers an error or a malformed message."""
    import struct

    sock.sendto(struct.pack("=IHHII", 16 + len(body), request, 0x301, seq, 0) + body, (0, 0))
    got: list[tuple[int, bytes, int, int]] = []
    while True:
        data = sock.recv(65536)
        off = 0
        while off + 16 <= len(data):
            length, mtype, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, off)
            if length < 16:
                return None
            if mtype == 3:  # NLMSG_DONE
                return got
            if mtype == 2:  # NLMSG_ERROR
                return None
            got.append((mtype, data, off + 16, min(off + length, len(data))))
            off += (length + 3) & ~3


def _interface_names() -> dict[int, str]:
    """Interface index -> name of the live host, from ``/sys/class/net/*/ifindex`` (what
    ``if_indextoname`` answers; PyPy's socket module has no ``if_indextoname``)."""
    from ..devices.attributes import read_text

    names: dict[int, str] = {}
    try:
        entries = os.listdir(b"/sys/class/net")
    except OSError:
        return names
    for entry in entries:
        text = read_text(b"/sys/class/net/" + entry + b"/ifindex")
        if text is not None and text.strip().isdigit():
            names.setdefault(int(text.strip()), os.fsdecode(entry))
    return names


def _rtattrs(data: bytes, off: int, end: int) -> dict[int, bytes]:
    import struct

    attrs: dict[int, bytes] = {}
    while off + 4 <= end:
        length, kind = struct.unpack_from("=HH", data, off)
        if length < 4:
            break
        attrs.setdefault(kind, data[off + 4:off + length])
        off += (length + 3) & ~3
    return attrs

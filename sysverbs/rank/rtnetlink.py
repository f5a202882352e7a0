"""Every interface's IP addresses from the kernel, through rtnetlink (what ``getifaddrs``
uses): the netdevs' addresses ``sysverbs env`` needs for NCCL_SOCKET_IFNAME."""

from __future__ import annotations

import os
from typing import Optional

__all__ = ["interface_addresses"]


def interface_addresses() -> Optional[dict[str, tuple[str, ...]]]:
    """Every interface's IP addresses, from the kernel (rtnetlink ``RTM_GETADDR`` dump,
    what ``getifaddrs`` uses); None when rtnetlink cannot be used."""
    import _socket
    import struct

    try:
        sock = _socket.socket(16, _socket.SOCK_RAW | _socket.SOCK_CLOEXEC, 0)  # NETLINK_ROUTE
    except (OSError, AttributeError):
        return None
    out: dict[int, list[str]] = {}
    try:
        sock.settimeout(2.0)
        sock.bind((0, 0))
        # nlmsghdr (RTM_GETADDR=22, NLM_F_REQUEST|NLM_F_DUMP) + ifaddrmsg (AF_UNSPEC)
        sock.sendto(struct.pack("=IHHII", 24, 22, 0x301, 1, 0) + bytes(8), (0, 0))
        done = False
        while not done:
            data = sock.recv(65536)
            off = 0
            while off + 16 <= len(data):
                length, mtype, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, off)
                if length < 16:
                    return None
                if mtype == 3:  # NLMSG_DONE
                    done = True
                    break
                if mtype == 2:  # NLMSG_ERROR
                    return None
                if mtype == 20 and length >= 24:  # RTM_NEWADDR
                    family, _plen, _fl, _scope, index = struct.unpack_from("=BBBBI", data,
                                                                           off + 16)
                    attrs = _rtattrs(data, off + 24, off + length)
                    raw = attrs.get(2) or attrs.get(1)  # IFA_LOCAL, else IFA_ADDRESS
                    if raw is not None and family in (2, 10):
                        text = _socket.inet_ntop(family, raw)
                        out.setdefault(index, []).append(text)
                off += (length + 3) & ~3
    except OSError:
        return None
    finally:
        sock.close()
    names: dict[str, tuple[str, ...]] = {}
    by_index = _interface_names()
    for index, addrs in out.items():
        if index in by_index:
            names[by_index[index]] = tuple(addrs)
    return names


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

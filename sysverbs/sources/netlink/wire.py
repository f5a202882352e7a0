"""RDMA netlink messages as libnl-3 builds and reads them for libibverbs
(``util/rdma_nl.c``; the constants of ``include/uapi/rdma/rdma_netlink.h``,
``linux/netlink.h`` and libnl's ``netlink/errno.h``).

Malformed bytes never raise: :func:`parse_attrs` returns None, :func:`recvmsgs` and
:func:`request` report libnl's outcome.  A string attribute without a terminating
NUL ends at the end of its message (where C would read past it).
"""

from __future__ import annotations

import errno
import struct

from ...ground.errors import NetlinkFailure

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

    from .socket import Transport

    Callback = Callable[[bytes], int]

# -- constants (include/uapi/rdma/rdma_netlink.h, linux/netlink.h, libnl-3) ------------
RDMA_NL_NLDEV = 5
RDMA_NLDEV_CMD_GET = 1
RDMA_NLDEV_CMD_SYS_GET = 6
RDMA_NLDEV_CMD_GET_CHARDEV = 15
TYPE_GET = (RDMA_NL_NLDEV << 10) + RDMA_NLDEV_CMD_GET
TYPE_SYS_GET = (RDMA_NL_NLDEV << 10) + RDMA_NLDEV_CMD_SYS_GET
TYPE_GET_CHARDEV = (RDMA_NL_NLDEV << 10) + RDMA_NLDEV_CMD_GET_CHARDEV

ATTR_DEV_INDEX = 1
ATTR_DEV_NAME = 2
ATTR_PORT_INDEX = 3
ATTR_NODE_GUID = 6
ATTR_DEV_NODE_TYPE = 14
ATTR_CHARDEV_TYPE = 69
ATTR_CHARDEV_NAME = 70
ATTR_CHARDEV_ABI = 71
ATTR_CHARDEV = 72
ATTR_UVERBS_DRIVER_ID = 73
ATTR_COPY_ON_FORK = 93

#: libibverbs' ``rdmanl_policy`` as libnl applies it: the minimum payload length of
#: each attribute that has a policy.  The string attributes have none, because
#: ``NLA_NUL_STRING`` is an enum in libnl-3 and the ``#ifdef`` guarding them is false.
POLICY_MINLEN = {
    ATTR_CHARDEV: 8,
    ATTR_CHARDEV_ABI: 8,
    ATTR_DEV_INDEX: 4,
    ATTR_DEV_NODE_TYPE: 1,
    ATTR_NODE_GUID: 8,
    ATTR_UVERBS_DRIVER_ID: 4,
    ATTR_PORT_INDEX: 4,
    ATTR_COPY_ON_FORK: 1,
}
_NLA_TYPE_MASK = 0x3FFF

NLMSG_NOOP = 1
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLMSG_OVERRUN = 4
NLM_F_REQUEST = 0x1
NLM_F_MULTI = 0x2
NLM_F_DUMP_INTR = 0x10
NLM_F_DUMP = 0x300
NLMSG_HDRLEN = 16
NLMSGERR_LEN = NLMSG_HDRLEN + 20

# libnl callback results and error codes (netlink/handlers.h, netlink/errno.h).
NL_OK = 0
NL_SKIP = 1
NL_STOP = 2
NLE_RANGE = 8
NLE_MSG_OVERFLOW = 17
NLE_MSG_TRUNC = 18
NLE_PARSE_ERR = 30
NLE_DUMP_INTR = 33
NLE_RECV = 1000  # any nl_recv() failure (its exact code does not matter)

_U32 = struct.Struct("=I")
_U64 = struct.Struct("=Q")
_I32 = struct.Struct("=i")
_HDR = struct.Struct("=IHHII")
_NLA = struct.Struct("=HH")

_U32 = struct.Struct("=I")
_U64 = struct.Struct("=Q")
_I32 = struct.Struct("=i")
_HDR = struct.Struct("=IHHII")
_NLA = struct.Struct("=HH")

#: The attributes every ``GET_CHARDEV`` reply must carry.
CHARDEV_REQUIRED = (ATTR_CHARDEV, ATTR_CHARDEV_ABI, ATTR_CHARDEV_NAME)


# -- messages ----------------------------------------------------------------------------


def _align(n: int) -> int:
    return (n + 3) & ~3


def nlmsg(msg_type: int, flags: int, seq: int, port: int, payload: bytes = b"") -> bytes:
    """One request message (``NLM_F_REQUEST`` added), as ``nlmsg_alloc_simple`` makes it."""
    length = NLMSG_HDRLEN + len(payload)
    return _HDR.pack(length, msg_type, flags | NLM_F_REQUEST, seq, port) + payload


def _nla(attr_type: int, data: bytes) -> bytes:
    raw = _NLA.pack(4 + len(data), attr_type) + data
    return raw + b"\0" * (_align(len(raw)) - len(raw))


def dump_request(seq: int, port: int = 0) -> bytes:
    """``nl_send_simple(RDMA_NLDEV_CMD_GET, NLM_F_DUMP)``."""
    return nlmsg(TYPE_GET, NLM_F_DUMP, seq, port)


def chardev_request(ibdev_idx: int, seq: int, port: int = 0, name: bytes = b"uverbs") -> bytes:
    """``rdmanl_get_chardev``: ``DEV_INDEX`` (unless the index is -1), ``CHARDEV_TYPE``."""
    payload = b""
    if ibdev_idx != -1:
        payload += _nla(ATTR_DEV_INDEX, _U32.pack(ibdev_idx & 0xFFFFFFFF))
    payload += _nla(ATTR_CHARDEV_TYPE, name + b"\0")
    return nlmsg(TYPE_GET_CHARDEV, 0, seq, port, payload)


class Attrs:
    """``nlmsg_parse`` with libibverbs' policy: the last attribute of each type wins.

    Holds the message (zero-padded to 4 bytes, as libnl's copy is) and, per type,
    the offset and length of the payload.
    """

    __slots__ = ("msg", "table")

    def __init__(self, msg: bytes, table: dict[int, tuple[int, int]]) -> None:
        self.msg = msg
        self.table = table

    def __contains__(self, attr_type: int) -> bool:
        return attr_type in self.table

    def u8(self, attr_type: int) -> int:
        off, _ = self.table[attr_type]
        return self.msg[off]

    def u32(self, attr_type: int) -> int:
        off, _ = self.table[attr_type]
        return int(_U32.unpack_from(self.msg, off)[0])

    def u64(self, attr_type: int) -> int:
        off, _ = self.table[attr_type]
        return int(_U64.unpack_from(self.msg, off)[0])

    def string(self, attr_type: int) -> bytes:
        """``nla_get_string``: the C string at the payload (see the module notes)."""
        off, _ = self.table[attr_type]
        end = self.msg.find(b"\0", off)
        return self.msg[off:] if end < 0 else self.msg[off:end]


def parse_attrs(msg: bytes) -> Optional[Attrs]:
    """``nlmsg_parse(hdr, 0, tb, maxtype, rdmanl_policy)``; None is ``-NLE_RANGE``.

    ``msg`` is one netlink message (header included, at least 16 bytes, its
    ``nlmsg_len`` taken from the header).  Attributes are walked as libnl does: the
    walk stops silently at one that is shorter than its header or longer than what
    is left; each type keeps its last occurrence; a type with a policy whose payload
    is shorter than the minimum fails the whole parse.
    """
    if len(msg) < NLMSG_HDRLEN:
        return None
    length = min(_HDR.unpack_from(msg, 0)[0], len(msg))
    if length < NLMSG_HDRLEN:
        return None
    padded = msg[:length] + b"\0" * (_align(length) - length)
    table: dict[int, tuple[int, int]] = {}
    off = NLMSG_HDRLEN
    rem = length - NLMSG_HDRLEN
    while rem >= 4:
        nla_len, nla_type = _NLA.unpack_from(padded, off)
        if nla_len < 4 or nla_len > rem:
            break
        kind = nla_type & _NLA_TYPE_MASK
        minlen = POLICY_MINLEN.get(kind)
        if minlen is not None and nla_len - 4 < minlen:
            return None
        table[kind] = (off + 4, nla_len - 4)
        step = _align(nla_len)
        off += step
        rem -= step
    return Attrs(padded, table)


def recvmsgs(transport: Transport, valid: Callback) -> tuple[int, bool]:
    """libnl's ``nl_recvmsgs`` with rdma_nl.c's error callback: (result, an error seen).

    ``result`` is what ``nl_recvmsgs`` returns: 0 or a negative libnl error (a
    positive callback result ends the reading and is reported as 0).  The second
    value is the ``failed`` flag ``rdmanl_saw_err_cb`` sets on any ``NLMSG_ERROR``
    with a non-zero error.
    """
    failed = False
    multipart = False
    interrupted = False
    nrecv = 0
    err = 0
    while True:
        try:
            data = transport.recv()
        except (OSError, NetlinkFailure):
            return -NLE_RECV, failed
        n = len(data)
        if n == 0:
            return 0, failed
        off = 0
        stop = False
        while n >= NLMSG_HDRLEN:
            length, msg_type, flags, _seq, _port = _HDR.unpack_from(data, off)
            if length < NLMSG_HDRLEN or length > n:
                break
            nrecv += 1
            msg = data[off : off + length]
            # (libnl checks no sequence numbers here: auto-ack is off)
            if flags & NLM_F_MULTI:
                multipart = True
            if flags & NLM_F_DUMP_INTR:
                interrupted = True
            if msg_type == NLMSG_DONE:
                multipart = False
            elif msg_type == NLMSG_NOOP:
                pass
            elif msg_type == NLMSG_OVERRUN:
                err = -NLE_MSG_OVERFLOW
                stop = True
            elif msg_type == NLMSG_ERROR:
                if length < NLMSGERR_LEN:
                    err = -NLE_MSG_TRUNC
                    stop = True
                elif _I32.unpack_from(msg, NLMSG_HDRLEN)[0] != 0:
                    failed = True
            else:
                result = valid(msg)
                if result == NL_STOP:
                    err = 0
                    stop = True
                    multipart = False
                elif result not in (NL_OK, NL_SKIP):
                    err = result
                    stop = True
            if stop:
                break
            step = _align(length)
            off += step
            n -= step
        if stop or not multipart:
            break
    if interrupted:
        err = -NLE_DUMP_INTR
    if not err:
        err = nrecv
    return (0 if err > 0 else err), failed


def send_request(transport: Transport, data: bytes, valid: Callback) -> Optional[NetlinkFailure]:
    """Send, read one reply with :func:`recvmsgs`; None on success (``ret == 0 && !failed``)."""
    try:
        transport.send(data)
    except OSError as e:
        return NetlinkFailure(f"sending a netlink request failed: {e}", e.errno or errno.EIO)
    result, failed = recvmsgs(transport, valid)
    if result == -NLE_RECV:
        return NetlinkFailure("receiving a netlink reply failed or timed out", errno.EIO)
    if result < 0:
        return NetlinkFailure(f"malformed netlink reply (libnl error {-result})", errno.EBADMSG)
    if failed:
        return NetlinkFailure("the kernel answered with an error", errno.EINVAL)
    return None

"""The RDMA netlink source: libibverbs' ``find_sysfs_devs_nl`` (spec 1.4, 1.12).

On a host whose kernel has RDMA support libibverbs does not walk sysfs: it asks
the kernel over ``NETLINK_RDMA`` (``libibverbs/ibdev_nl.c`` and
``util/rdma_nl.c``, through libnl-3).  This module does the same in pure Python,
including libnl's message handling where it decides what libibverbs sees:

1. Open the socket (``socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA)``, 32 KiB
   buffers, bind).  Failure: libibverbs falls back to sysfs, so this raises
   :class:`~sysverbs.sources.SourceUnavailable`.
2. ``RDMA_NLDEV_CMD_GET`` dump.  Each device message must carry ``DEV_NAME``,
   ``DEV_NODE_TYPE``, ``DEV_INDEX``, ``NODE_GUID`` and ``PORT_INDEX``; the record
   gets the kernel index, the node GUID (pre-cached: ``node_guid`` is never read),
   the node type and ``ibdev_path = <S>/class/infiniband/<name>``, and is
   *prepended* to the temporary list (so that list is in reverse dump order).
   A send or receive error, an ``NLMSG_ERROR`` reply, a truncated error message,
   ``NLMSG_OVERRUN``, an interrupted dump or an attribute shorter than its type
   (libnl's policy check) fails the dump: ``SourceUnavailable`` (libibverbs
   falls back to sysfs).  A device message without a required attribute, with a
   name of 64 bytes or more, or whose ``ibdev_path`` would be 256 bytes or more
   makes libnl's callback return a *positive* error: libnl then stops reading
   that reply and reports success, so the devices before it are kept, the rest
   of the reply is dropped (and anything still queued is read by the next
   request), exactly as libibverbs does.
3. For each record, in temporary-list order: ``RDMA_NLDEV_CMD_GET_CHARDEV``
   (``DEV_INDEX``, ``CHARDEV_TYPE "uverbs"``) on the same socket.  The reply
   needs ``CHARDEV``, ``CHARDEV_ABI`` and ``CHARDEV_NAME``; it gives the uverbs
   name, the char device number (decoded from ``huge_encode_dev``), the
   per-device ABI (low 32 bits) and ``UVERBS_DRIVER_ID`` (else 0), and forces
   the global ABI to 6 (:attr:`Scan.netlink`).  If that fails, or leaves the
   name empty, the first non-dot entry of ``<ibdev_path>/device/infiniband_verbs/``
   is used instead (``dev``, ``abi_version`` and the mtime of ``ibdev_path``, read
   as in sysfs mode).  If both fail, the device is skipped.
4. ``stat("<dev_dir>/<uverbs name>")``: a device without its node is skipped.

Replies are read with libnl's rules: a 16 KiB receive buffer (a longer datagram
is an error), no sequence-number check (auto-ack is off), every message in a
datagram processed, multipart replies read until ``NLMSG_DONE``.  Malformed
bytes never raise anything but the outcomes above.  libibverbs blocks forever
on a kernel that never answers; here each receive times out after
:data:`RECV_TIMEOUT` seconds and counts as a receive error.

Defined here where libibverbs has undefined behaviour: a string attribute
without a terminating NUL ends at the end of its message (C reads past it).
"""

from __future__ import annotations

import errno
import os
import struct
import time

from . import sources
from .cparse import scan_u_u, strtoul, to_int32
from .netlink_socket import RECV_TIMEOUT, NetlinkFailure, SocketTransport, Transport
from .node_types import node_type_number
from .records import DeviceRecord
from .sources import Scan, SourceUnavailable
from .sysfs_read import ABI_SIZE, DEV_SIZE, NAME_MAX_IBV, PATH_MAX_IBV, read_sysfs_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

    from .devlist import LibraryKey


    Callback = Callable[[bytes], int]

__all__ = [
    "scan_netlink",
    "scan_transport",
    "scan_with",
    "Transport",
    "SocketTransport",
    "NetlinkFailure",
    "parse_attrs",
    "recvmsgs",
    "dump_request",
    "chardev_request",
    "query_copy_on_fork",
    "chardev_abi",
    "RECV_TIMEOUT",
]

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
_NLMSG_HDRLEN = 16
_NLMSGERR_LEN = _NLMSG_HDRLEN + 20

# libnl callback results and error codes (netlink/handlers.h, netlink/errno.h).
NL_OK = 0
NL_SKIP = 1
NL_STOP = 2
NLE_RANGE = 8
NLE_MSG_OVERFLOW = 17
NLE_MSG_TRUNC = 18
NLE_PARSE_ERR = 30
NLE_DUMP_INTR = 33
_NLE_RECV = 1000  # any nl_recv() failure (its exact code does not matter)

_U32 = struct.Struct("=I")
_U64 = struct.Struct("=Q")
_I32 = struct.Struct("=i")
_HDR = struct.Struct("=IHHII")
_NLA = struct.Struct("=HH")

RDMA_CDEV_DIR_DEFAULT = b"/dev/infiniband"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


# -- messages ----------------------------------------------------------------------------


def _align(n: int) -> int:
    return (n + 3) & ~3


def _nlmsg(msg_type: int, flags: int, seq: int, port: int, payload: bytes = b"") -> bytes:
    length = _NLMSG_HDRLEN + len(payload)
    return _HDR.pack(length, msg_type, flags | NLM_F_REQUEST, seq, port) + payload


def _nla(attr_type: int, data: bytes) -> bytes:
    raw = _NLA.pack(4 + len(data), attr_type) + data
    return raw + b"\0" * (_align(len(raw)) - len(raw))


def dump_request(seq: int, port: int = 0) -> bytes:
    """``nl_send_simple(RDMA_NLDEV_CMD_GET, NLM_F_DUMP)``."""
    return _nlmsg(TYPE_GET, NLM_F_DUMP, seq, port)


def chardev_request(ibdev_idx: int, seq: int, port: int = 0, name: bytes = b"uverbs") -> bytes:
    """``rdmanl_get_chardev``: ``DEV_INDEX`` (unless the index is -1), ``CHARDEV_TYPE``."""
    payload = b""
    if ibdev_idx != -1:
        payload += _nla(ATTR_DEV_INDEX, _U32.pack(ibdev_idx & 0xFFFFFFFF))
    payload += _nla(ATTR_CHARDEV_TYPE, name + b"\0")
    return _nlmsg(TYPE_GET_CHARDEV, 0, seq, port, payload)


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
    if len(msg) < _NLMSG_HDRLEN:
        return None
    length = min(_HDR.unpack_from(msg, 0)[0], len(msg))
    if length < _NLMSG_HDRLEN:
        return None
    padded = msg[:length] + b"\0" * (_align(length) - length)
    table: dict[int, tuple[int, int]] = {}
    off = _NLMSG_HDRLEN
    rem = length - _NLMSG_HDRLEN
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
            return -_NLE_RECV, failed
        n = len(data)
        if n == 0:
            return 0, failed
        off = 0
        stop = False
        while n >= _NLMSG_HDRLEN:
            length, msg_type, flags, _seq, _port = _HDR.unpack_from(data, off)
            if length < _NLMSG_HDRLEN or length > n:
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
                if length < _NLMSGERR_LEN:
                    err = -NLE_MSG_TRUNC
                    stop = True
                elif _I32.unpack_from(msg, _NLMSG_HDRLEN)[0] != 0:
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


# -- libibverbs' callbacks and requests ------------------------------------------------


class _State:
    __slots__ = ("root", "records", "abi_forced", "seq", "port")

    def __init__(self, root: bytes, port: int) -> None:
        self.root = root
        self.records: list[DeviceRecord] = []
        self.abi_forced = False
        self.seq = int(time.time()) & 0xFFFFFFFF
        self.port = port

    def next_seq(self) -> int:
        seq = self.seq
        self.seq = (seq + 1) & 0xFFFFFFFF
        return seq


_DUMP_REQUIRED = (
    ATTR_DEV_NAME,
    ATTR_DEV_NODE_TYPE,
    ATTR_DEV_INDEX,
    ATTR_NODE_GUID,
    ATTR_PORT_INDEX,
)
_CHARDEV_REQUIRED = (ATTR_CHARDEV, ATTR_CHARDEV_ABI, ATTR_CHARDEV_NAME)


def _dump_cb(state: _State, msg: bytes) -> int:
    """``find_sysfs_devs_nl_cb``."""
    tb = parse_attrs(msg)
    if tb is None:
        return -NLE_RANGE
    if any(a not in tb for a in _DUMP_REQUIRED):
        return NLE_PARSE_ERR
    name = tb.string(ATTR_DEV_NAME)
    if len(name) >= NAME_MAX_IBV:
        return NLE_PARSE_ERR
    ibdev_path = state.root + b"/class/infiniband/" + name
    if len(ibdev_path) >= PATH_MAX_IBV:
        return NLE_PARSE_ERR
    rec = DeviceRecord(
        dev_name=b"",
        ibdev_name=name,
        ibdev_path=ibdev_path,
        sysfs_root=state.root,
        cdev=(0, 0),
        abi_ver=0,
        node_type=node_type_number(tb.u8(ATTR_DEV_NODE_TYPE)),
        time_created_ns=0,
        ibdev_idx=to_int32(tb.u32(ATTR_DEV_INDEX)),
        driver_id=0,
        node_guid=tb.u64(ATTR_NODE_GUID),
    )
    state.records.insert(0, rec)  # list_add: the temporary list is in reverse dump order
    return NL_OK


def _chardev_cb(state: _State, rec: DeviceRecord, msg: bytes) -> int:
    """``find_uverbs_nl_cb``."""
    tb = parse_attrs(msg)
    if tb is None:
        return -NLE_RANGE
    if any(a not in tb for a in _CHARDEV_REQUIRED):
        return NLE_PARSE_ERR
    state.abi_forced = True  # "abi_ver = 6" in libibverbs, before anything else can fail
    rec.abi_ver = tb.u64(ATTR_CHARDEV_ABI) & 0xFFFFFFFF
    rec.driver_id = tb.u32(ATTR_UVERBS_DRIVER_ID) if ATTR_UVERBS_DRIVER_ID in tb else 0
    cdev64 = tb.u64(ATTR_CHARDEV)
    rec.cdev = ((cdev64 & 0xFFF00) >> 8, (cdev64 & 0xFF) | ((cdev64 >> 12) & 0xFFF00))
    name = tb.string(ATTR_CHARDEV_NAME)
    rec.dev_name = name[: NAME_MAX_IBV - 1]  # snprintf truncates, then the check fails
    if len(name) >= NAME_MAX_IBV:
        return NLE_PARSE_ERR
    return NL_OK


def _request(transport: Transport, data: bytes, valid: Callback) -> Optional[NetlinkFailure]:
    """Send, read one reply with :func:`recvmsgs`; None on success (``ret == 0 && !failed``)."""
    try:
        transport.send(data)
    except OSError as e:
        return NetlinkFailure(f"sending a netlink request failed: {e}", e.errno or errno.EIO)
    result, failed = recvmsgs(transport, valid)
    if result == -_NLE_RECV:
        return NetlinkFailure("receiving a netlink reply failed or timed out", errno.EIO)
    if result < 0:
        return NetlinkFailure(f"malformed netlink reply (libnl error {-result})", errno.EBADMSG)
    if failed:
        return NetlinkFailure("the kernel answered with an error", errno.EINVAL)
    return None


def _find_uverbs_nl(transport: Transport, state: _State, rec: DeviceRecord) -> bool:
    def cb(msg: bytes) -> int:
        return _chardev_cb(state, rec, msg)

    request = chardev_request(rec.ibdev_idx, state.next_seq(), state.port)
    if _request(transport, request, cb) is not None:
        return False
    return bool(rec.dev_name)


def _setup_sysfs_uverbs(uv_fd: int, name: bytes, rec: DeviceRecord) -> bool:
    """``setup_sysfs_uverbs``: name, ibdev mtime, ``dev`` and ``abi_version``."""
    if len(name) >= NAME_MAX_IBV:
        return False
    rec.dev_name = name
    try:
        st = os.stat(rec.ibdev_path)
    except (OSError, ValueError):
        return False
    rec.time_created_ns = st.st_mtime_ns
    dev = read_sysfs_file(b"dev", DEV_SIZE, dir_fd=uv_fd)
    # An empty dev file is undefined behaviour in libibverbs (an uninitialised stack
    # buffer is parsed); as in the sysfs source it fails.
    if not dev:
        return False
    cdev = scan_u_u(dev)
    if cdev is None:
        return False
    rec.cdev = cdev
    abi = read_sysfs_file(b"abi_version", ABI_SIZE, dir_fd=uv_fd)
    if abi:
        rec.abi_ver = strtoul(abi) & 0xFFFFFFFF
    return True


def _find_uverbs_sysfs(rec: DeviceRecord) -> bool:
    """``find_uverbs_sysfs``: the first non-dot entry of ``device/infiniband_verbs``."""
    path = rec.ibdev_path + b"/device/infiniband_verbs"
    if len(path) >= PATH_MAX_IBV:
        return False
    try:
        dir_fd = os.open(path, _DIR_FLAGS)
    except (OSError, ValueError):
        return False
    try:
        try:
            names = os.listdir(dir_fd)
        except OSError:
            return False
        for entry in names:
            name = os.fsencode(entry)
            if name.startswith(b"."):
                continue
            try:
                uv_fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except (OSError, ValueError):
                return False
            try:
                return _setup_sysfs_uverbs(uv_fd, name, rec)
            finally:
                os.close(uv_fd)
        return False
    finally:
        os.close(dir_fd)


def _access(dev_dir: bytes, name: bytes) -> bool:
    """``try_access_device``: ``stat`` of the uverbs node (any file type)."""
    try:
        os.stat(dev_dir + b"/" + name)
    except (OSError, ValueError):
        return False
    return True


def scan_with(
    transport: Transport,
    sysfs_root: bytes,
    dev_dir: bytes = RDMA_CDEV_DIR_DEFAULT,
    port: int = 0,
) -> Scan:
    """``find_sysfs_devs_nl`` over an open transport (the socket is not closed here).

    Raises :class:`SourceUnavailable` where libibverbs falls back to sysfs.
    """
    state = _State(sysfs_root, port)

    def dump_cb(msg: bytes) -> int:
        return _dump_cb(state, msg)

    failure = _request(transport, dump_request(state.next_seq(), port), dump_cb)
    if failure is not None:
        raise SourceUnavailable(f"RDMA netlink device dump: {failure}", failure.errno)
    kept: list[DeviceRecord] = []
    for rec in state.records:
        if not _find_uverbs_nl(transport, state, rec) and not _find_uverbs_sysfs(rec):
            continue
        if _access(dev_dir, rec.dev_name):
            kept.append(rec)
    return Scan(kept, netlink=state.abi_forced)


def scan_transport(key: LibraryKey, transport: Transport) -> Scan:
    """:func:`scan_with` for the options of a call; closes the transport."""
    try:
        return scan_with(transport, key.sysfs_root, key.dev_dir, transport.port)
    finally:
        transport.close()


def scan_netlink(key: LibraryKey) -> Scan:
    """Enumerate over RDMA netlink; raises SourceUnavailable where libibverbs falls back.

    ``Scan.netlink`` is True when a ``GET_CHARDEV`` reply was accepted, which is
    what forces libibverbs' global ABI to 6; otherwise the class ``abi_version``
    is checked as in sysfs mode.
    """
    return scan_transport(key, sources.open_netlink())


# -- the other two netlink questions rdma-core asks ----------------------------------------


def _open_transport() -> Optional[Transport]:
    try:
        return sources.open_netlink()
    except SourceUnavailable:
        return None


def query_copy_on_fork(transport: Optional[Transport] = None) -> bool:
    """``get_copy_on_fork`` (libibverbs, used by ``ibv_is_fork_initialized``).

    ``RDMA_NLDEV_CMD_SYS_GET``; the answer is ``RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK``
    (0 when the kernel does not send it).  No socket, a failed request or a reply
    that does not parse: False.  (A successful request without any reply message
    leaves libibverbs' answer uninitialised; it is False here.)
    """
    own = transport is None
    t = _open_transport() if transport is None else transport
    if t is None:
        return False
    answer = [0]

    def cb(msg: bytes) -> int:
        tb = parse_attrs(msg)
        if tb is None:
            return -NLE_RANGE
        answer[0] = tb.u8(ATTR_COPY_ON_FORK) if ATTR_COPY_ON_FORK in tb else 0
        return NL_OK

    try:
        port = getattr(t, "port", 0)
        request = _nlmsg(TYPE_SYS_GET, 0, int(time.time()) & 0xFFFFFFFF, port)
        if _request(t, request, cb) is not None:
            return False
        return bool(answer[0])
    finally:
        if own:
            t.close()


def chardev_abi(name: str, transport: Optional[Transport] = None) -> int:
    """librdmacm's ``check_abi_version_nl``: the ABI of char device ``name`` (``rdma_cm``).

    ``RDMA_NLDEV_CMD_GET_CHARDEV`` without a device index; the reply needs
    ``CHARDEV``, ``CHARDEV_ABI`` and ``CHARDEV_NAME`` (a name of 64 bytes or more
    is refused); the ABI is the low 32 bits as a C ``int``.  Returns -1 where
    librdmacm falls back to sysfs (no socket, an error, no usable reply, or an
    ABI that reads as -1).
    """
    own = transport is None
    t = _open_transport() if transport is None else transport
    if t is None:
        return -1
    abi = [-1]

    def cb(msg: bytes) -> int:
        tb = parse_attrs(msg)
        if tb is None:
            return -NLE_RANGE
        if any(a not in tb for a in _CHARDEV_REQUIRED):
            return NLE_PARSE_ERR
        if len(tb.string(ATTR_CHARDEV_NAME)) >= NAME_MAX_IBV:
            return NLE_PARSE_ERR
        abi[0] = to_int32(tb.u64(ATTR_CHARDEV_ABI))
        return NL_OK

    try:
        port = getattr(t, "port", 0)
        request = chardev_request(-1, int(time.time()) & 0xFFFFFFFF, port, name.encode())
        if _request(t, request, cb) is not None:
            return -1
        return abi[0]
    finally:
        if own:
            t.close()

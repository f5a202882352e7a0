"""The RDMA netlink source: libibverbs' ``ibdev_nl.c: find_sysfs_devs_nl``
(docs/behaviour.md: Sources).

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

import os
import time

from ...ground.errors import SourceUnavailable
from ...ground.records import DeviceRecord, node_type_number
from ...ground.sysfs_read import (
    ABI_SIZE,
    DEV_SIZE,
    NAME_MAX_IBV,
    PATH_MAX_IBV,
    read_sysfs_file,
    scan_u_u,
    strtoul,
    to_int32,
)
from ..base import Scan
from .wire import (
    ATTR_CHARDEV,
    ATTR_CHARDEV_ABI,
    ATTR_CHARDEV_NAME,
    ATTR_DEV_INDEX,
    ATTR_DEV_NAME,
    ATTR_DEV_NODE_TYPE,
    ATTR_NODE_GUID,
    ATTR_PORT_INDEX,
    ATTR_UVERBS_DRIVER_ID,
    CHARDEV_REQUIRED,
    NL_OK,
    NLE_PARSE_ERR,
    NLE_RANGE,
    chardev_request,
    dump_request,
    parse_attrs,
    send_request,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..base import LibraryKey
    from .socket import Transport

__all__ = ["scan_with", "scan_transport"]

RDMA_CDEV_DIR_DEFAULT = b"/dev/infiniband"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

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
    if any(a not in tb for a in CHARDEV_REQUIRED):
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


def _find_uverbs_nl(transport: Transport, state: _State, rec: DeviceRecord) -> bool:
    def cb(msg: bytes) -> int:
        return _chardev_cb(state, rec, msg)

    request = chardev_request(rec.ibdev_idx, state.next_seq(), state.port)
    if send_request(transport, request, cb) is not None:
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

    failure = send_request(transport, dump_request(state.next_seq(), port), dump_cb)
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

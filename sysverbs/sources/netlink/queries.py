"""The other two netlink questions rdma-core asks: libibverbs' ``get_copy_on_fork``
and librdmacm's ``check_abi_version_nl``."""

from __future__ import annotations

import time

from ...ground.errors import SourceUnavailable
from ...ground.sysfs_read import NAME_MAX_IBV, to_int32
from .wire import (
    ATTR_CHARDEV_ABI,
    ATTR_CHARDEV_NAME,
    ATTR_COPY_ON_FORK,
    CHARDEV_REQUIRED,
    NL_OK,
    NLE_PARSE_ERR,
    NLE_RANGE,
    TYPE_SYS_GET,
    chardev_request,
    nlmsg,
    parse_attrs,
    send_request,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from .socket import Transport

__all__ = ["query_copy_on_fork", "chardev_abi"]


def _open_transport() -> Optional[Transport]:
    from . import open_netlink  # looked up at each call: tests replace it

    try:
        return open_netlink()
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
        request = nlmsg(TYPE_SYS_GET, 0, int(time.time()) & 0xFFFFFFFF, port)
        if send_request(t, request, cb) is not None:
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
        if any(a not in tb for a in CHARDEV_REQUIRED):
            return NLE_PARSE_ERR
        if len(tb.string(ATTR_CHARDEV_NAME)) >= NAME_MAX_IBV:
            return NLE_PARSE_ERR
        abi[0] = to_int32(tb.u64(ATTR_CHARDEV_ABI))
        return NL_OK

    try:
        port = getattr(t, "port", 0)
        request = chardev_request(-1, int(time.time()) & 0xFFFFFFFF, port, name.encode())
        if send_request(t, request, cb) is not None:
            return -1
        return abi[0]
    finally:
        if own:
            t.close()

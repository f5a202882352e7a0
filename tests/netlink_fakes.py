"""RDMA netlink messages built by hand, and a fake kernel that answers them.

The fake kernel (:class:`FakeKernel`) answers like Linux' RDMA netlink does: one
device per dump datagram, the next dump datagram queued only after one is read,
``NLMSG_DONE`` on its own, GET_CHARDEV answered at once, errors as
``NLMSG_ERROR``.  Used by tests/test_netlink.py and tests/test_netlink_fuzz.py.
"""

from __future__ import annotations

import errno
import struct
from collections import deque
from typing import Any, Callable, Optional

from sysverbs.sources.netlink import wire

RXE = 14
SIW = 18
MANA = 20

# -- message builders -------------------------------------------------------------------------


def attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def u8(kind: int, v: int) -> bytes:
    return attr(kind, bytes([v]))


def u32(kind: int, v: int) -> bytes:
    return attr(kind, struct.pack("=I", v))


def u64(kind: int, v: int) -> bytes:
    return attr(kind, struct.pack("=Q", v))


def string(kind: int, v: bytes) -> bytes:
    return attr(kind, v + b"\0")


def msg(kind: int, payload: bytes = b"", flags: int = 0, seq: int = 0) -> bytes:
    return struct.pack("=IHHII", 16 + len(payload), kind, flags, seq, 0) + payload


def done() -> bytes:
    return msg(wire.NLMSG_DONE, struct.pack("=i", 0), wire.NLM_F_MULTI)


def error(code: int) -> bytes:
    return msg(wire.NLMSG_ERROR, struct.pack("=i", code) + msg(0)[:16])


def dev_msg(
    index: int,
    name: bytes,
    guid: int = 0x0002C903000A0B0C,
    node_type: int = 1,
    ports: int = 1,
    drop: tuple[int, ...] = (),
) -> bytes:
    parts = {
        wire.ATTR_DEV_INDEX: u32(wire.ATTR_DEV_INDEX, index),
        wire.ATTR_DEV_NAME: string(wire.ATTR_DEV_NAME, name),
        wire.ATTR_PORT_INDEX: u32(wire.ATTR_PORT_INDEX, ports),
        4: u64(4, 0x1234),  # CAP_FLAGS: no policy, ignored
        wire.ATTR_NODE_GUID: u64(wire.ATTR_NODE_GUID, guid),
        7: u64(7, guid),  # SYS_IMAGE_GUID
        wire.ATTR_DEV_NODE_TYPE: u8(wire.ATTR_DEV_NODE_TYPE, node_type),
        67: string(67, b"roce"),  # DEV_PROTOCOL
    }
    payload = b"".join(v for k, v in parts.items() if k not in drop)
    return msg(wire.TYPE_GET, payload, wire.NLM_F_MULTI)


def huge_encode_dev(major: int, minor: int) -> int:
    return (minor & 0xFF) | (major << 8) | ((minor & ~0xFF) << 12)


def chardev_msg(
    uverbs: bytes,
    cdev: tuple[int, int] = (231, 192),
    abi: int = 2,
    driver_id: Optional[int] = RXE,
    drop: tuple[int, ...] = (),
) -> bytes:
    parts = {}
    if driver_id is not None:
        parts[wire.ATTR_UVERBS_DRIVER_ID] = u32(wire.ATTR_UVERBS_DRIVER_ID, driver_id)
    parts[0] = attr(0, b"")  # a PAD attribute, as the kernel puts before u64s
    parts[wire.ATTR_CHARDEV] = u64(wire.ATTR_CHARDEV, huge_encode_dev(*cdev))
    parts[wire.ATTR_CHARDEV_ABI] = u64(wire.ATTR_CHARDEV_ABI, abi)
    parts[wire.ATTR_CHARDEV_NAME] = string(wire.ATTR_CHARDEV_NAME, uverbs)
    payload = b"".join(v for k, v in parts.items() if k not in drop)
    return msg(wire.TYPE_GET_CHARDEV, payload)


# -- a fake kernel ----------------------------------------------------------------------------


class Dev:
    def __init__(
        self,
        index: int,
        name: str,
        uverbs: Optional[str] = None,
        *,
        guid: int = 0x0002C903000A0B0C,
        node_type: int = 1,
        abi: int = 2,
        driver_id: Optional[int] = RXE,
        cdev: tuple[int, int] = (231, 192),
    ) -> None:
        self.index = index
        self.name = name.encode()
        self.uverbs = (uverbs if uverbs is not None else f"uverbs{index}").encode()
        self.guid = guid
        self.node_type = node_type
        self.abi = abi
        self.driver_id = driver_id
        self.cdev = cdev


class FakeKernel:
    """A Transport that answers as Linux' RDMA netlink does (see the module notes)."""

    def __init__(self, devs: list[Dev], **hooks: Any) -> None:
        self.devs = devs
        self.queue: deque[bytes] = deque()
        self.pending: deque[bytes] = deque()
        self.sent: list[bytes] = []
        self.port = 4242
        self.closed = False
        self.dump_hook: Callable[[int, bytes], bytes] = hooks.get("dump", lambda i, m: m)
        self.chardev_hook: Callable[[Dev, bytes], bytes] = hooks.get("chardev", lambda d, m: m)
        self.dump_error: Optional[int] = hooks.get("dump_error")
        self.chardev_error: Optional[int] = hooks.get("chardev_error")

    def send(self, data: bytes) -> None:
        self.sent.append(data)
        length, kind, flags, seq, _ = struct.unpack_from("=IHHII", data)
        assert length == len(data) and flags & wire.NLM_F_REQUEST
        if kind == wire.TYPE_GET:
            assert flags & wire.NLM_F_DUMP == wire.NLM_F_DUMP
            if self.dump_error is not None:
                self.queue.append(error(self.dump_error))
                return
            chunks = [
                self.dump_hook(i, dev_msg(d.index, d.name, d.guid, d.node_type))
                for i, d in enumerate(sorted(self.devs, key=lambda d: d.index))
            ]
            chunks.append(done())
            self.queue.append(chunks[0])  # the first chunk comes with the request
            self.pending.extend(chunks[1:])
        elif kind == wire.TYPE_GET_CHARDEV:
            tb = wire.parse_attrs(data)
            assert tb is not None and tb.string(wire.ATTR_CHARDEV_TYPE) == b"uverbs"
            dev = None
            if wire.ATTR_DEV_INDEX in tb:
                dev = next((d for d in self.devs if d.index == tb.u32(wire.ATTR_DEV_INDEX)), None)
            if dev is None or self.chardev_error is not None:
                self.queue.append(error(self.chardev_error or -errno.EINVAL))
                return
            reply = chardev_msg(dev.uverbs, dev.cdev, dev.abi, dev.driver_id)
            self.queue.append(self.chardev_hook(dev, reply))
        else:
            self.queue.append(error(-errno.EOPNOTSUPP))

    def recv(self) -> bytes:
        if not self.queue:
            raise TimeoutError("timed out")
        data = self.queue.popleft()
        if self.pending:  # the kernel builds the next dump datagram after a read
            self.queue.append(self.pending.popleft())
        return data

    def close(self) -> None:
        self.closed = True


# -- libnl's receive loop: replayed datagrams -------------------------------------------


class Script:
    """A Transport replaying datagrams."""

    def __init__(self, *datagrams: bytes | Exception) -> None:
        self.items = list(datagrams)
        self.reads = 0

    def send(self, data: bytes) -> None:
        pass

    def recv(self) -> bytes:
        self.reads += 1
        if not self.items:
            raise TimeoutError("timed out")
        item = self.items.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        pass

"""The RDMA netlink source without a kernel: hand-made replies and a fake kernel.

The fake kernel is tests/netlink_fakes.py's; it answers as Linux' RDMA netlink does: one
device per dump datagram, the next dump datagram queued only after one is read,
``NLMSG_DONE`` on its own, GET_CHARDEV answered at once, errors as
``NLMSG_ERROR``.  The real thing is compared with libibverbs in ``tests/kernel``.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

import sysverbs
from sysverbs.ground.enums import NodeType
from sysverbs.ground.errors import NetlinkFailure, SourceUnavailable
from sysverbs.sources import netlink
from sysverbs.sources.base import LibraryKey, Scan
from sysverbs.sources.netlink import queries, wire
from sysverbs.sources.netlink import scan as nlscan
from tests.netlink_fakes import (
    MANA,
    RXE,
    SIW,
    Dev,
    FakeKernel,
    Script,
    attr,
    chardev_msg,
    dev_msg,
    done,
    error,
    msg,
    string,
    u8,
    u32,
)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(sysfs root, /dev/infiniband) with nodes uverbs0..uverbs9."""
    root = tmp_path / "sys"
    dev = tmp_path / "dev"
    root.mkdir()
    dev.mkdir()
    for i in range(10):
        (dev / f"uverbs{i}").touch()
    yield root, dev


def scan(kernel: FakeKernel, host: tuple[Path, Path]) -> Scan:
    root, dev = host
    return nlscan.scan_with(kernel, os.fsencode(root), os.fsencode(dev))


def summary(s: Scan) -> list[tuple[str, int, str]]:
    return [(r.ibdev_name.decode(), r.ibdev_idx, r.dev_name.decode()) for r in s.records]


# -- the parser --------------------------------------------------------------------------------


def test_parse_attrs_last_wins_and_flags_masked() -> None:
    m = msg(wire.TYPE_GET, u32(1, 5) + u32(1 | 0x8000, 7) + string(2, b"mlx5_0"))
    tb = wire.parse_attrs(m)
    assert tb is not None and tb.u32(1) == 7 and tb.string(2) == b"mlx5_0"


def test_parse_attrs_policy_too_short_fails() -> None:
    assert wire.parse_attrs(msg(wire.TYPE_GET, attr(wire.ATTR_NODE_GUID, b"1234567"))) is None
    assert wire.parse_attrs(msg(wire.TYPE_GET, attr(wire.ATTR_DEV_NODE_TYPE, b""))) is None
    # an attribute without a policy may be any length; a longer one is fine
    tb = wire.parse_attrs(msg(wire.TYPE_GET, attr(4, b"") + attr(wire.ATTR_DEV_INDEX, b"12345")))
    assert tb is not None and tb.u32(wire.ATTR_DEV_INDEX) == int.from_bytes(b"1234", "little")


def test_parse_attrs_walk_stops_silently() -> None:
    good = u32(wire.ATTR_DEV_INDEX, 3)
    # an attribute longer than what is left ends the walk; the earlier ones count
    bad = struct.pack("=HH", 200, wire.ATTR_NODE_GUID) + b"\0" * 8
    tb = wire.parse_attrs(msg(wire.TYPE_GET, good + bad))
    assert tb is not None and wire.ATTR_NODE_GUID not in tb and tb.u32(wire.ATTR_DEV_INDEX) == 3
    # an attribute shorter than its header too (and its policy is never checked)
    tb = wire.parse_attrs(msg(wire.TYPE_GET, good + struct.pack("=HH", 2, wire.ATTR_NODE_GUID)))
    assert tb is not None and wire.ATTR_NODE_GUID not in tb


def test_parse_attrs_short_header() -> None:
    assert wire.parse_attrs(b"") is None
    assert wire.parse_attrs(b"\x08\0\0\0" + b"\0" * 12) is None  # nlmsg_len < 16
    tb = wire.parse_attrs(msg(wire.TYPE_GET))
    assert tb is not None and not tb.table


def test_string_without_nul_runs_on() -> None:
    # no NUL inside the attribute: C reads on into the next bytes of the message
    m = msg(wire.TYPE_GET, attr(2, b"abcd") + u32(1, 0x00636261))
    tb = wire.parse_attrs(m)
    assert tb is not None and tb.string(2) == b"abcd\x08"


def test_requests() -> None:
    assert wire.dump_request(7, 99) == struct.pack("=IHHII", 16, 5121, 0x301, 7, 99)
    body = u32(1, 3) + string(69, b"uverbs")
    head = struct.pack("=IHHII", 16 + len(body), 5135, 1, 8, 99)
    assert wire.chardev_request(3, 8, 99) == head + body
    # index -1 ((int) of 0xffffffff): no DEV_INDEX attribute at all
    tb = wire.parse_attrs(wire.chardev_request(-1, 1))
    assert tb is not None and wire.ATTR_DEV_INDEX not in tb and tb.string(69) == b"uverbs"


# -- libnl's receive loop ----------------------------------------------------------------------


def collect(results: list[int]) -> tuple[list[bytes], Callable[[bytes], int]]:
    seen: list[bytes] = []

    def cb(m: bytes) -> int:
        seen.append(m)
        return results.pop(0) if results else wire.NL_OK

    return seen, cb


def test_recvmsgs_multipart_until_done() -> None:
    t = Script(dev_msg(0, b"a"), dev_msg(1, b"b") + done(), dev_msg(9, b"never"))
    seen, cb = collect([])
    assert wire.recvmsgs(t, cb) == (0, False)
    assert len(seen) == 2 and t.reads == 2


def test_recvmsgs_single_reply_stops() -> None:
    t = Script(chardev_msg(b"uverbs0"), chardev_msg(b"uverbs1"))
    seen, cb = collect([])
    assert wire.recvmsgs(t, cb) == (0, False)
    assert t.reads == 1 and len(seen) == 1


def test_recvmsgs_error_sets_failed_and_goes_on() -> None:
    t = Script(dev_msg(0, b"a") + error(-errno.EPERM) + dev_msg(1, b"b") + done())
    seen, cb = collect([])
    assert wire.recvmsgs(t, cb) == (0, True)
    assert len(seen) == 2
    # an ACK (error 0) is nothing
    assert wire.recvmsgs(Script(error(0)), cb) == (0, False)


@pytest.mark.parametrize(
    "datagram",
    [
        msg(wire.NLMSG_ERROR, b"\xff\xff\xff\xff"),  # truncated error message
        msg(wire.NLMSG_OVERRUN),
        msg(wire.TYPE_GET, b"", wire.NLM_F_MULTI | wire.NLM_F_DUMP_INTR) + done(),  # interrupted
    ],
)
def test_recvmsgs_errors(datagram: bytes) -> None:
    seen, cb = collect([])
    result, _ = wire.recvmsgs(Script(datagram), cb)
    assert result < 0


def test_recvmsgs_callback_results() -> None:
    two = dev_msg(0, b"a") + dev_msg(1, b"b") + done()
    # a positive (libnl error) result ends reading and is reported as success
    seen, cb = collect([wire.NLE_PARSE_ERR])
    assert wire.recvmsgs(Script(two), cb) == (0, False) and len(seen) == 1
    # a negative one is an error
    seen, cb = collect([-wire.NLE_RANGE])
    assert wire.recvmsgs(Script(two), cb)[0] < 0
    # NL_SKIP goes on, NL_STOP stops without error
    seen, cb = collect([wire.NL_SKIP])
    assert wire.recvmsgs(Script(two), cb) == (0, False) and len(seen) == 2
    seen, cb = collect([wire.NL_STOP])
    assert wire.recvmsgs(Script(two), cb) == (0, False) and len(seen) == 1


def test_recvmsgs_transport_failures() -> None:
    seen, cb = collect([])
    assert wire.recvmsgs(Script(OSError(errno.ENOBUFS, "x")), cb)[0] < 0
    assert wire.recvmsgs(Script(), cb)[0] < 0  # timeout
    assert wire.recvmsgs(Script(NetlinkFailure("trunc", errno.EMSGSIZE)), cb)[0] < 0
    assert wire.recvmsgs(Script(b""), cb) == (0, False)  # EOF: nothing, success
    # trailing bytes that are no message are ignored; a bad length ends the datagram
    assert wire.recvmsgs(Script(done() + b"\x01\x02"), cb) == (0, False)
    bad = struct.pack("=IHHII", 1000, wire.TYPE_GET, 0, 0, 0)
    assert wire.recvmsgs(Script(bad), cb) == (0, False) and not seen


# -- find_sysfs_devs_nl -------------------------------------------------------------------------


def test_scan_order_and_fields(host: tuple[Path, Path]) -> None:
    devs = [
        Dev(2, "mm2", "uverbs2", guid=0x1122334455667788),
        Dev(0, "qq0", "uverbs0", node_type=4, cdev=(231, 300)),
        Dev(3, "aa1", "uverbs1", node_type=9, abi=(1 << 32) | 2, driver_id=None),
    ]
    kernel = FakeKernel(devs)
    s = scan(kernel, host)
    # temporary list: reverse dump (= reverse index) order
    assert summary(s) == [("aa1", 3, "uverbs1"), ("mm2", 2, "uverbs2"), ("qq0", 0, "uverbs0")]
    assert s.netlink is True
    aa1, mm2, qq0 = s.records
    root = os.fsencode(host[0])
    assert mm2.ibdev_path == root + b"/class/infiniband/mm2" and mm2.sysfs_root == root
    assert mm2.node_guid == 0x1122334455667788 and mm2.driver_id == RXE
    assert qq0.node_type == NodeType.RNIC and aa1.node_type == NodeType.UNKNOWN
    assert qq0.cdev == (231, 300) and aa1.abi_ver == 2 and aa1.driver_id == 0
    assert mm2.time_created_ns == 0
    # requests: the dump, then one GET_CHARDEV per device in temporary-list order
    idx = [wire.parse_attrs(m).u32(1) for m in kernel.sent[1:]]  # type: ignore[union-attr]
    assert idx == [3, 2, 0]


def test_zero_devices_is_a_result(host: tuple[Path, Path]) -> None:
    s = scan(FakeKernel([]), host)
    assert s.records == [] and s.netlink is False


def test_missing_dev_node_drops_the_device(host: tuple[Path, Path]) -> None:
    os.unlink(host[1] / "uverbs1")
    os.chmod(host[1] / "uverbs2", 0)  # stat still works: kept
    s = scan(FakeKernel([Dev(1, "a"), Dev(2, "b")]), host)
    assert summary(s) == [("b", 2, "uverbs2")]


def test_index_beyond_int_max(host: tuple[Path, Path]) -> None:
    kernel = FakeKernel([Dev(0xFFFFFFFF, "x", "uverbs0")])
    s = scan(kernel, host)
    # (int)0xffffffff is -1: the GET_CHARDEV request then has no index (fails here)
    assert s.records == []
    tb = wire.parse_attrs(kernel.sent[1])
    assert tb is not None and wire.ATTR_DEV_INDEX not in tb
    s = scan(FakeKernel([Dev(0x80000000, "y", "uverbs0")]), host)
    assert [r.ibdev_idx for r in s.records] == [-0x80000000]


def test_dump_failures_fall_back(host: tuple[Path, Path]) -> None:
    with pytest.raises(SourceUnavailable) as e:
        scan(FakeKernel([Dev(0, "a")], dump_error=-errno.EPERM), host)
    assert e.value.errno == errno.EINVAL
    # an attribute shorter than its policy: nlmsg_parse fails, the dump fails
    short = FakeKernel(
        [Dev(0, "a")],
        dump=lambda i, m: msg(wire.TYPE_GET, attr(wire.ATTR_DEV_INDEX, b"\1\0"), wire.NLM_F_MULTI),
    )
    with pytest.raises(SourceUnavailable):
        scan(short, host)


def test_dump_message_without_required_attribute_cuts_the_dump(host: tuple[Path, Path]) -> None:
    # libnl stops at the bad message and reports success: devices before it are kept;
    # the rest of the dump is still queued and read by the GET_CHARDEV requests.
    devs = [Dev(0, "a"), Dev(1, "b"), Dev(2, "c"), Dev(3, "d")]

    def hook(i: int, m: bytes) -> bytes:
        return dev_msg(2, b"c", drop=(wire.ATTR_PORT_INDEX,)) if i == 2 else m

    s = scan(FakeKernel(devs, dump=hook), host)
    # b's GET_CHARDEV reads d's dump message (no CHARDEV: fails, no sysfs fallback);
    # a's reads b's reply: a gets b's uverbs name.
    assert summary(s) == [("a", 0, "uverbs1")]
    assert s.netlink is True


@pytest.mark.parametrize("cut", [0, 1])
def test_long_sysfs_path_cuts_the_dump(tmp_path: Path, cut: int) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(4):
        (dev / f"uverbs{i}").touch()
    names = ["ab", "abcdef", "x", "y"] if cut else ["abcdef", "x", "y", "z"]
    root = b"/r" + b"o" * (256 - 18 - 6 - 2)  # room for names of up to 5 bytes
    kernel = FakeKernel([Dev(i, n) for i, n in enumerate(names)])
    s = nlscan.scan_with(kernel, root, os.fsencode(dev))
    if cut:
        # "ab" was read; its GET_CHARDEV gets "x"'s dump message: no chardev, and
        # the sysfs fallback path is too long: dropped.
        assert s.records == [] and s.netlink is False
    else:
        assert s.records == []


def test_chardev_name_too_long_is_truncated(host: tuple[Path, Path]) -> None:
    long_name = b"u" * 70
    os.close(os.open(host[1] / ("u" * 63), os.O_CREAT | os.O_WRONLY))
    kernel = FakeKernel(
        [Dev(0, "a")], chardev=lambda d, m: chardev_msg(long_name, abi=1, driver_id=SIW)
    )
    s = scan(kernel, host)
    assert summary(s) == [("a", 0, "u" * 63)] and s.records[0].driver_id == SIW


def make_fallback(root: Path, ibdev: str, entries: dict[str, Any]) -> None:
    """<root>/class/infiniband/<ibdev>/device/infiniband_verbs/<entry>/{dev,abi_version}."""
    base = root / "class/infiniband" / ibdev / "device/infiniband_verbs"
    base.mkdir(parents=True)
    for name, files in entries.items():
        if files is None:
            (base / name).write_text("not a directory")
            continue
        (base / name).mkdir()
        for fname, content in files.items():
            (base / name / fname).write_bytes(content)


def test_chardev_failure_uses_sysfs(host: tuple[Path, Path]) -> None:
    root, _ = host
    make_fallback(root, "a", {"uverbs4": {"dev": b"231:196\n", "abi_version": b"1\n"}})
    make_fallback(root, "b", {".x": {}, "uverbs5": {"dev": b"231:197\n"}})
    make_fallback(root, "c", {"uverbs6": None})
    make_fallback(root, "d", {"uverbs7": {"dev": b"junk\n", "abi_version": b"1\n"}})
    make_fallback(root, "e", {"uverbs42": {"dev": b"1:2\n", "abi_version": b"1\n"}})
    make_fallback(root, "f", {})
    os.utime(root / "class/infiniband/a", ns=(1, 1234567890123456789))
    devs = [Dev(i, n) for i, n in enumerate("abcdefg")]
    s = scan(FakeKernel(devs, chardev_error=-errno.EOPNOTSUPP), host)
    assert summary(s) == [("b", 1, "uverbs5"), ("a", 0, "uverbs4")]
    b, a = s.records
    assert a.cdev == (231, 196) and a.abi_ver == 1 and a.driver_id == 0
    assert a.time_created_ns == 1234567890123456789
    assert b.abi_ver == 0  # no abi_version: unchanged from 0
    assert s.netlink is False  # no reply accepted: the global ABI is not forced


def test_empty_chardev_name_falls_back_keeping_the_driver_id(host: tuple[Path, Path]) -> None:
    root, _ = host
    make_fallback(root, "a", {"uverbs3": {"dev": b"231:195\n"}})
    kernel = FakeKernel([Dev(0, "a")], chardev=lambda d, m: chardev_msg(b"", abi=7, driver_id=MANA))
    s = scan(kernel, host)
    (a,) = s.records
    assert (a.dev_name, a.driver_id, a.abi_ver, a.cdev) == (b"uverbs3", MANA, 7, (231, 195))
    assert s.netlink is True


def test_chardev_reply_without_attributes_falls_back(host: tuple[Path, Path]) -> None:
    kernel = FakeKernel(
        [Dev(0, "a")], chardev=lambda d, m: chardev_msg(b"uverbs0", drop=(wire.ATTR_CHARDEV,))
    )
    s = scan(kernel, host)
    assert s.records == [] and s.netlink is False


def _no_rdma_netlink(monkeypatch: pytest.MonkeyPatch, err: int = errno.EPROTONOSUPPORT) -> None:
    """socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA) fails with ``err`` (as on a kernel
    without RDMA netlink); other sockets are created as usual."""
    import _socket

    real = _socket.socket

    def refuse(*args: Any, **kw: Any) -> Any:
        if args[:3] == (_socket.AF_NETLINK, _socket.SOCK_RAW, netlink.NETLINK_RDMA):
            raise OSError(err, os.strerror(err))
        return real(*args, **kw)

    monkeypatch.setattr(_socket, "socket", refuse)


@pytest.mark.parametrize("err", [errno.EPROTONOSUPPORT, errno.EACCES])
def test_no_socket_here_is_unavailable(monkeypatch: pytest.MonkeyPatch, err: int) -> None:
    _no_rdma_netlink(monkeypatch, err)
    key = LibraryKey("netlink", b"/sys", b"/dev/infiniband", b"/etc/x", "builtin", 44)
    with pytest.raises(SourceUnavailable) as e:
        netlink.scan_netlink(key)
    assert e.value.errno == err


# -- copy-on-fork and the rdma_cm ABI ------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expect"),
    [
        (msg(wire.TYPE_SYS_GET, u8(50, 0) + u8(wire.ATTR_COPY_ON_FORK, 1)), True),
        (msg(wire.TYPE_SYS_GET, u8(wire.ATTR_COPY_ON_FORK, 0)), False),
        (msg(wire.TYPE_SYS_GET, u8(50, 1)), False),  # older kernels: no attribute
        (msg(wire.TYPE_SYS_GET, attr(wire.ATTR_COPY_ON_FORK, b"")), False),  # too short
        (error(-errno.EOPNOTSUPP), False),
    ],
)
def test_copy_on_fork(reply: bytes, expect: bool) -> None:
    sent: list[bytes] = []

    class T(Script):
        def send(self, data: bytes) -> None:
            sent.append(data)

    assert queries.query_copy_on_fork(T(reply)) is expect
    length, kind, flags, _, _ = struct.unpack_from("=IHHII", sent[0])
    assert (length, kind, flags) == (16, wire.TYPE_SYS_GET, wire.NLM_F_REQUEST)


@pytest.mark.parametrize(
    ("reply", "expect"),
    [
        (chardev_msg(b"rdma_cm", (10, 59), abi=4, driver_id=None), 4),
        (chardev_msg(b"rdma_cm", abi=(7 << 32) | 3), 3),
        (chardev_msg(b"rdma_cm", abi=0xFFFFFFFF), -1),  # reads as -1: not an answer
        (chardev_msg(b"rdma_cm", abi=0xFFFFFFFE), -2),
        (chardev_msg(b"r" * 64, abi=4), -1),
        (chardev_msg(b"rdma_cm", abi=4, drop=(wire.ATTR_CHARDEV_NAME,)), -1),
        (error(-errno.ENOENT), -1),
    ],
)
def test_chardev_abi(reply: bytes, expect: int) -> None:
    sent: list[bytes] = []

    class T(Script):
        def send(self, data: bytes) -> None:
            sent.append(data)

    assert queries.chardev_abi("rdma_cm", T(reply)) == expect
    tb = wire.parse_attrs(sent[0])
    assert tb is not None and wire.ATTR_DEV_INDEX not in tb
    assert tb.string(wire.ATTR_CHARDEV_TYPE) == b"rdma_cm"


def test_no_netlink_answers_for_fork_and_rdma_cm(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_rdma_netlink(monkeypatch)
    assert queries.query_copy_on_fork() is False
    assert queries.chardev_abi("rdma_cm") == -1


# -- through the public API ----------------------------------------------------------------------


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> FakeKernel:
    k = FakeKernel([])
    monkeypatch.setattr(netlink, "open_netlink", lambda: k)
    return k


def listing(host: tuple[Path, Path], **kw: Any) -> sysverbs.DeviceList:
    root, dev = host
    return sysverbs.get_device_list(
        sysfs_path=root, dev_dir=dev, providers="builtin", rdma_core="44", **kw
    )


def test_api_netlink_mode(kernel: FakeKernel, host: tuple[Path, Path]) -> None:
    kernel.devs = [
        Dev(5, "mlx5_3", "uverbs3", driver_id=1, abi=1),
        Dev(1, "siw0", "uverbs1", driver_id=SIW, abi=1, node_type=4),
        Dev(2, "rocep1s0", "uverbs2", driver_id=None, guid=0xAB),
    ]
    devs = listing(host, source="netlink")
    # dump (index) order; siw found by driver id; no class ABI file needed (forced 6);
    # a device without a driver id and no sysfs match is dropped
    assert [(d.name, sysverbs.get_device_index(d), d.provider) for d in devs] == [
        ("siw0", 1, "siw"),
        ("mlx5_3", 5, "mlx5"),
    ]
    assert sysverbs.get_device_guid(devs[0]) == 0x0002C903000A0B0C
    assert devs[0].node_type is sysverbs.NodeType.RNIC


def test_api_identity_by_index(kernel: FakeKernel, host: tuple[Path, Path]) -> None:
    kernel.devs = [Dev(0, "rxe_a", "uverbs0"), Dev(1, "rxe_b", "uverbs1")]
    first = listing(host, source="netlink")
    kernel.devs = [Dev(0, "renamed", "uverbs0"), Dev(1, "rxe_b", "uverbs1"), Dev(2, "n", "uverbs2")]
    second = listing(host, source="netlink")
    assert [d.name for d in second] == ["n", "rxe_a", "rxe_b"]  # old name kept
    assert second[1] is first[0] and second[2] is first[1]
    kernel.devs = [Dev(3, "rxe_a", "uverbs0"), Dev(1, "rxe_b", "uverbs1")]  # re-added
    third = listing(host, source="netlink")
    assert [d.name for d in third] == ["rxe_a", "rxe_b"] and third[0] is not first[0]


def test_api_auto_falls_back_only_without_netlink(
    kernel: FakeKernel, host: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # netlink works with zero devices: that is the answer, sysfs is not read
    assert listing(host, source="auto") == []
    kernel.dump_error = -errno.EINVAL
    with pytest.raises(OSError) as e:  # falls back to sysfs: no class dir there
        listing(host, source="auto")
    assert e.value.errno == errno.ENOSYS
    with pytest.raises(OSError) as e:
        listing(host, source="netlink")
    assert e.value.errno == errno.EINVAL


def test_api_class_abi_checked_when_no_chardev_reply(
    kernel: FakeKernel, host: tuple[Path, Path]
) -> None:
    root, _ = host
    kernel.devs = [Dev(0, "rxe0", "uverbs0")]
    kernel.chardev_error = -errno.EOPNOTSUPP
    make_fallback(root, "rxe0", {"uverbs0": {"dev": b"231:192\n", "abi_version": b"2\n"}})
    with pytest.raises(OSError) as e:  # no class/infiniband_verbs/abi_version
        listing(host, source="netlink")
    assert e.value.errno == errno.ENOSYS
    (root / "class/infiniband_verbs").mkdir()
    (root / "class/infiniband_verbs/abi_version").write_text("6\n")
    (d,) = listing(host, source="netlink")
    assert (d.name, d.dev_name, sysverbs.get_device_index(d)) == ("rxe0", "uverbs0", 0)


def test_api_netlink_unavailable_here() -> None:
    # this test host has no RDMA netlink (as CI): asked by name, netlink is an OSError
    try:
        netlink.open_netlink().close()
    except SourceUnavailable:
        pass
    else:
        pytest.skip("this host has RDMA netlink")
    with pytest.raises(OSError) as e:
        sysverbs.get_device_list(source="netlink", sysfs_path="/nonexistent")
    assert e.value.errno == errno.EPROTONOSUPPORT

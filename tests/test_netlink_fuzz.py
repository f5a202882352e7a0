"""The RDMA netlink source under garbage: random and mutated kernel replies."""

from __future__ import annotations

import errno
import os

from hypothesis import event, example, given
from hypothesis import strategies as st

from sysverbs.ground.errors import SourceUnavailable
from sysverbs.sources.netlink import scan as nlscan
from sysverbs.sources.netlink import wire
from tests.conftest import fast_tmpdir
from tests.fuzz.profiles import fuzz_settings
from tests.netlink_fakes import Dev, FakeKernel, Script, chardev_msg, dev_msg, done, error, msg


@fuzz_settings(ci=300, deep=3000)
@given(st.binary(max_size=300))
def test_parse_attrs_never_raises(data: bytes) -> None:
    tb = wire.parse_attrs(data)
    if tb is not None:
        for kind in list(tb.table):
            tb.string(kind)
            if kind in wire.POLICY_MINLEN:
                {1: tb.u8, 4: tb.u32, 8: tb.u64}[wire.POLICY_MINLEN[kind]](kind)


#: Well-formed replies the garbage is mixed with: three dump parts (devices b, c, d;
#: the dump's last datagram, device a and NLMSG_DONE, is always sent) and chardev
#: replies naming uverbs0..3 (nodes that exist in the test's dev dir).
_DUMP_PARTS = {dev_msg(i, name): name for i, name in ((1, b"b"), (2, b"c"), (3, b"d"))}
_CHARDEV_REPLIES = {chardev_msg(f"uverbs{i}".encode()): f"uverbs{i}".encode()
                    for i in range(4)}
#: Dump parts that fail the dump: an NLMSG_ERROR with an errno, and one too short for
#: its header (libnl: NLE_MSG_TRUNC).
_FAILING = (error(-errno.EPERM), msg(wire.NLMSG_ERROR, b"\x01"))


@fuzz_settings(ci=200, deep=2000)
@given(st.lists(st.one_of(st.binary(max_size=200), st.sampled_from(sorted(_DUMP_PARTS)),
                          st.sampled_from(_FAILING)), max_size=6),
       st.lists(st.one_of(st.binary(max_size=120), st.sampled_from(sorted(_CHARDEV_REPLIES))),
                max_size=6))
@example(dump=[dev_msg(1, b"b")], chardev=[chardev_msg(b"uverbs3"), chardev_msg(b"uverbs0")])
@example(dump=[dev_msg(1, b"b"), _FAILING[0]], chardev=[])
def test_garbage_replies_never_crash(dump: list[bytes], chardev: list[bytes]) -> None:
    """Garbage among the kernel's replies gives a Scan or SourceUnavailable, never
    another exception; and which one, and what the Scan holds, follow from the
    replies (the explicit examples reach both: a scan with two devices, a dump that
    fails)."""
    class Garbage(Script):
        def __init__(self) -> None:
            super().__init__(*dump, dev_msg(0, b"a") + done(), *chardev)

    first_bad = next((d for d in dump if d not in _DUMP_PARTS), None)
    valid_dump = first_bad is None
    try:
        with fast_tmpdir("sv-nl-") as dev:
            for name in _CHARDEV_REPLIES.values():
                (dev / os.fsdecode(name)).touch()
            s = nlscan.scan_with(Garbage(), b"/nonexistent", os.fsencode(dev))
    except SourceUnavailable as e:
        event("SourceUnavailable")
        # only a dump part that is not one of the well-formed messages can fail it
        assert not valid_dump, dump
        assert e.errno and str(e).startswith("RDMA netlink device dump: ")
        return
    # an error or truncated message read before any other garbage fails the dump
    assert first_bad not in _FAILING, dump
    sent = [_DUMP_PARTS[d] for d in dump if d in _DUMP_PARTS] + [b"a"]
    assert all(r.ibdev_name in sent and r.dev_name in _CHARDEV_REPLIES.values()
               for r in s.records)
    if valid_dump and len(set(sent)) == len(sent) and all(c in _CHARDEV_REPLIES
                                                          for c in chardev):
        # libibverbs prepends each dumped device to its list (list_add in
        # find_sysfs_devs_nl_cb), so the devices go in reverse dump order; each one's
        # GET_CHARDEV reads the next reply; a device with no reply left times out and
        # the sysfs fallback (/nonexistent) drops it.
        want = [(n, _CHARDEV_REPLIES[c]) for n, c in zip(sent[::-1], chardev)]
        assert [(r.ibdev_name, r.dev_name) for r in s.records] == want
        event(f"exact: {len(want)} devices")
    else:
        event(f"garbage: {len(s.records)} devices")


@fuzz_settings(ci=200, deep=2000)
@given(st.data())
def test_mutated_kernel_replies_never_crash(data: st.DataObject) -> None:
    def mutate(m: bytes) -> bytes:
        if not data.draw(st.booleans()):
            return m
        cut = data.draw(st.integers(0, len(m)))
        pos = data.draw(st.integers(0, max(0, len(m) - 1)))
        b = bytearray(m[:cut] if data.draw(st.booleans()) else m)
        if b and pos < len(b):
            b[pos] = data.draw(st.integers(0, 255))
        return bytes(b)

    kernel = FakeKernel(
        [Dev(i, f"rxe{i}") for i in range(3)],
        dump=lambda i, m: mutate(m),
        chardev=lambda d, m: mutate(m),
    )
    try:
        s = nlscan.scan_with(kernel, b"/nonexistent", b"/dev/null/x")
    except SourceUnavailable:
        return
    assert s.records == []  # no /dev node anywhere

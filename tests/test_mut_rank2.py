"""The rank/ modules' edges that `make mutation` found untested (issue 41): lint.py's
fix search, messages and table notes; gid.py's C integers (against glibc's strtoll), IPv6
ranges, runs of zero entries and verdict wording; ib.py's device table and Using line.
Pure functions on small hand-written hosts and tables: no subprocess.
"""

from __future__ import annotations

import ctypes
import errno
import ipaddress
import socket
from pathlib import Path

import pytest

from sysverbs.ground.errors import WrongTypeError
from sysverbs.ground.sysfs_read import ReadOnce
from sysverbs.rank.gid import (
    AF_INET,
    AF_INET6,
    GidEntry,
    GidTable,
    env_range,
    gid_verdict,
    nccl_gid_index,
    read_gid_table,
)
from sysverbs.rank.ib import IbDevice, IbPort, host_ports, no_device_list_note, select_ib
from sysverbs.rank.lint import gid_warnings, lint_hca
from sysverbs.testing import HostBuilder

PCI = "/sys/devices/pci0000:00/0000:00:01.0/"


def ib_host(*specs: tuple[str, int, bool, str]) -> list[IbPort]:
    """Ports (device, port, active, link layer), each NIC on a bus of its own."""
    return [IbPort(d, p, a, ll, f"{PCI}0000:{16 + i:02x}:00.{p - 1}")
            for i, (d, p, a, ll) in enumerate(specs)]


#: six InfiniBand NICs, mlx5_3's port down (tests/test_nccl.py's HOST)
SIX = ib_host(*[(f"mlx5_{i}", 1, i != 3, "InfiniBand") for i in (0, 1, 2, 3, 10, 11)])
ALL_SIX = "=mlx5_0,mlx5_1,mlx5_2,mlx5_10,mlx5_11"


# ----------------------------------------------------------------------------- lint.py


def test_where_names_the_host_in_every_message() -> None:
    """``nccl check --fixture`` names the fixture where a message says "this host"."""
    r = lint_hca("=mlx5_9", SIX, {}, where="fixture demo")
    assert [w.message for w in r.warnings] == [
        "'mlx5_9' matches no device on fixture demo (mlx5_0, mlx5_1, mlx5_2, mlx5_3, "
        "mlx5_10, mlx5_11) (no fix: it means no device of fixture demo that NCCL can use)",
        "NCCL would use no IB device (it prints 'NET/IB : No device found.' and falls back "
        "to sockets)"]
    with pytest.raises(WrongTypeError, match="where must be a str, not int"):
        lint_hca("=mlx5_9", SIX, {}, where=5)  # type: ignore[arg-type]


def test_table_full_names_what_is_not_read_and_the_overflow() -> None:
    """33 device ports: NCCL reads 32 (16 before 2.18.5); a device read last whose ports
    go past the table's end overflows it (ncclIbDevs)."""
    singles = [(f"d{i}", 1, True, "InfiniBand") for i in range(31)]
    both = ib_host(*singles, ("d31", 1, True, "InfiniBand"), ("d31", 2, True, "InfiniBand"),
                   ("d32", 1, True, "InfiniBand"))
    tail = "; which of them are meant is not known, so no fix is given"
    overflow = ("the ports of the last device it reads go past the end of its table "
                "(ncclIbDevs: memory NCCL does not own)")
    assert [tuple(w) for w in lint_hca("", both, {}).warnings] == [
        ("table-full", "", "NCCL keeps at most 32 device ports: it does not read d32; "
         + overflow + tail, "")]
    only_overflow = lint_hca("", both[:-1], {}).warnings
    assert [w.message for w in only_overflow] == [
        "NCCL keeps at most 32 device ports: " + overflow + tail]
    unread = lint_hca("", ib_host(*singles[:17]), {}, nccl_version="2.18.3").warnings
    assert [w.message for w in unread] == [
        "NCCL keeps at most 16 device ports: it does not read d16" + tail]


def test_trailing_empty_rail_fields_are_dropped_from_the_fix() -> None:
    """2.30.7's ``name:port:rail:plane``: an empty field after the rail is not written."""
    assert lint_hca("mlx5_2::1::1\t", SIX, {}).fix == "mlx5_2::1"


def test_the_exact_list_of_the_ports_meant() -> None:
    """Before 2.30.7 ``m:1:2`` is port 1 of every device starting with m: no spelling of
    the entry works (the space is part of the name), the exact list of the ports does;
    with 2.30.7's rail field no fix rewrites the rail."""
    r = lint_hca(" m:1:2", SIX, {}, nccl_version="2.26.2")
    assert r.fix == ALL_SIX and r.meant == (
        ("mlx5_0", 1), ("mlx5_1", 1), ("mlx5_2", 1), ("mlx5_10", 1), ("mlx5_11", 1))
    r = lint_hca(" m:1:2", SIX, {}, nccl_version="2.30.7")
    assert r.fix == "" and r.warnings[0].message.endswith(
        "(no fix: no value selects exactly that)")


def test_no_fix_when_nccl_already_uses_what_was_meant() -> None:
    """``^^``: a misplaced ``^`` excludes the name "^", which is no device: NCCL uses every
    port, as meant."""
    r = lint_hca("^^", SIX, {})
    assert (r.fix, [w.code for w in r.warnings]) == ("", ["misplaced-modifier", "no-match"])
    assert r.warnings[0].message.endswith(
        "(no fix: NCCL already uses what was meant on this host)")


def test_a_list_of_eight_names_is_whole() -> None:
    """Messages name at most eight devices: eight are all named, with no count."""
    eight = ib_host(*[(f"d{i}", 1, True, "InfiniBand") for i in range(8)])
    assert lint_hca("=zz", eight, {}).warnings[0].message.startswith(
        "'zz' matches no device on this host (d0, d1, d2, d3, d4, d5, d6, d7) (no fix")


def test_a_collision_names_the_longer_names() -> None:
    assert lint_hca("mlx5_1", SIX, {}).warnings[0].message.startswith(
        "'mlx5_1' is a prefix: it also matches mlx5_10, mlx5_11 (meant: mlx5_1:1;")


def test_ports_past_the_table_are_meant_in_port_order() -> None:
    """The ports meant that NCCL's table has no room for come last, each device's in
    port order (whatever order a set gives them)."""
    full = ib_host(*[(f"d{i}", 1, True, "InfiniBand") for i in range(32)],
                   *[("dx", p, True, "InfiniBand") for p in range(1, 9)])
    assert lint_hca("=dx", full, {}).meant == tuple(("dx", p) for p in range(1, 9))


def test_a_caret_inside_a_name_is_part_of_it() -> None:
    """Only a ``^`` or ``=`` before an entry is that entry's: ``m^`` means the name
    "m^" (no device), not "all but m"."""
    r = lint_hca("m^", SIX, {})
    assert (r.meant, r.fix) == ((), "")


def test_an_entrys_equals_sign_is_kept_in_the_fix() -> None:
    """``,=mlx5_1``: the "=" written before the entry asks for an exact name, and the
    fix keeps it even where the name is no prefix of another."""
    three = ib_host(*[(f"mlx5_{i}", 1, True, "InfiniBand") for i in range(3)])
    r = lint_hca(",=mlx5_1", three, {})
    assert (r.fix, r.meant) == ("=mlx5_1", (("mlx5_1", 1),))


def test_entries_after_one_that_matches_nothing_are_checked() -> None:
    """``mlx5_0_dma`` (NCCL's Data Direct name, no verbs name) and ``mlx5_9`` match no
    device; the entry after each is still looked at."""
    r = lint_hca("mlx5_0_dma,mlx5_9,mlx5_3:1", SIX, {})
    assert [(w.code, w.entry) for w in r.warnings] == [
        ("dma-name", "mlx5_0_dma"), ("no-match", "mlx5_9"), ("port-inactive", "mlx5_3:1"),
        ("selects-none", "mlx5_0_dma,mlx5_9,mlx5_3:1")]


def test_a_fix_of_as_many_entries_as_nccl_reads() -> None:
    """32 names split by spaces: the fix lists all 32, as many as NCCL reads."""
    host = ib_host(*[(f"d{i}", 1, True, "InfiniBand") for i in range(32)])
    r = lint_hca(" ".join(f"d{i}" for i in range(32)), host, {})
    assert r.fix == "=" + ",".join(f"d{i}" for i in range(32))


def test_no_gid_verdict_when_the_ib_transport_fails() -> None:
    """A plane ID NCCL refuses (bit 14) stops its IB transport: no GID is used, none is
    judged; with a plane it accepts, the link-local GID is."""
    table = GidTable("r0", 1, "Ethernet", 2, (GidEntry(0, "fe80::1", "RoCE v2"),))
    ports = [IbPort("r0", 1, True, "Ethernet", f"{PCI}0000:10:00.0", gids=table)]
    for value, codes in (("r0:1::16384", []), ("r0:1::1", ["gid-link-local"])):
        env = {"NCCL_IB_HCA": value}
        sel = select_ib(ports, env, nccl_version="2.30.7")
        assert bool(sel.failure) == (not codes)
        assert [w.code for w in gid_warnings(sel, ports, env)] == codes


# ----------------------------------------------------------------------------- gid.py

LL = "fe80::202:c9ff:fe00:1"
_LIBC = ctypes.CDLL(None)
_LIBC.strtoll.restype = ctypes.c_longlong
_LIBC.strtoll.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]


def gid_table(length: int, *entries: tuple[int, str, str]) -> GidTable:
    return GidTable("mlx5_0", 1, "Ethernet", length,
                    tuple(GidEntry(i, g, t) for i, g, t in entries))


@pytest.mark.parametrize("text", ["40", "0x20", "017", "4294967297", "2147483647",
                                  "4611686018427387904", "4", "3"])
def test_a_forced_gid_index_is_strtoll_in_a_c_int(text: str) -> None:
    """NCCL_IB_GID_INDEX as ncclLoadParam reads it: glibc's strtoll(text, NULL, 0) stored
    in an int (4294967297 wraps to 1); past the table it is NCCL's lookup that fails."""
    want = ctypes.c_int(_LIBC.strtoll(text.encode(), None, 0)).value
    c = nccl_gid_index(gid_table(4, (0, LL, "RoCE v2")), {"NCCL_IB_GID_INDEX": text})
    assert (c.index, c.rule) == (want, f"set by NCCL_IB_GID_INDEX={text}")
    assert c.error == (None if want < 4 else
                       f"index {want} is outside the GID table (length 4)")


def test_a_range_mask_that_overflows_is_minus_one() -> None:
    """strtol's LONG_MAX for a mask past range, in an int, is -1: no range at all."""
    text = "99999999999999999999"
    assert ctypes.c_int(_LIBC.strtoll(text.encode(), None, 10)).value == -1
    assert env_range({"NCCL_IB_ADDR_RANGE": "10.0.0.0/" + text}, AF_INET) == (167772160, -1)
    assert socket.inet_pton(socket.AF_INET, "10.0.0.0") == bytes([10, 0, 0, 0])


def test_range_masks_past_the_address() -> None:
    assert env_range({"NCCL_IB_ADDR_RANGE": "2001:db8::/128"}, AF_INET6) == (
        int(ipaddress.IPv6Address("2001:db8::")), 128)
    assert env_range({"NCCL_IB_ADDR_RANGE": "2001:db8::/129"}, AF_INET6) is None


def test_a_range_is_cut_at_127_bytes() -> None:
    """envIbAddrRange copies the value into char[128]: the 128th byte is dropped."""
    head = "10.0.0.0/" + "0" * 117
    assert env_range({"NCCL_IB_ADDR_RANGE": head + "16"}, AF_INET) == (167772160, 1)
    assert env_range({"NCCL_IB_ADDR_RANGE": head[:-1] + "16"}, AF_INET) == (167772160, 16)


def test_an_ipv6_range_takes_the_gid_inside_it() -> None:
    """AF_INET6 with NCCL_IB_ADDR_RANGE: the GID outside the /32 is skipped, the one
    inside taken; a link-local one is skipped as validGid says."""
    t = gid_table(4, (0, LL, "RoCE v2"), (1, "2001:db9::1", "RoCE v2"),
                  (2, "2001:db8::2", "RoCE v2"), (3, LL, "RoCE v2"))
    c = nccl_gid_index(t, {"NCCL_IB_ADDR_FAMILY": "AF_INET6",
                           "NCCL_IB_ADDR_RANGE": "2001:db8::/32"})
    assert c.index == 2
    assert [str(s) for s in c.steps] == [
        "1: skipped: outside NCCL_IB_ADDR_RANGE",
        "2: taken: RoCE v2 as NCCL_IB_ROCE_VERSION_NUM wants, the current choice (0) is not "
        "valid",
        "3: skipped: link-local (fe80::/64; validGid)"]


def test_runs_of_zero_entries_around_the_gid_taken() -> None:
    c = nccl_gid_index(gid_table(8, (0, LL, "IB/RoCE v1"), (3, "::ffff:10.1.2.3", "RoCE v2")),
                       {})
    assert [str(s) for s in c.steps] == [
        "1-2: skipped: zero GID (unused entries)",
        "3: taken: AF_INET, the wanted family, after a GID of family AF_INET6 (taken without "
        "a version check)",
        "4-7: skipped: zero GID (unused entries)"]


@pytest.mark.parametrize(("gid", "rule", "what"), [
    (LL, "RoCE: no index 1..3 qualified, index 0 stays", "a link-local GID"),
    ("::", "RoCE: no index 1..3 qualified, index 0 stays", "an empty GID"),
])
def test_the_link_local_verdict_names_the_gid(gid: str, rule: str, what: str) -> None:
    c = nccl_gid_index(gid_table(4, (0, gid, "RoCE v2")), {})
    verdict = gid_verdict(c)
    assert c.rule == rule and verdict is not None
    assert verdict.message.startswith(
        f"on mlx5_0:1 NCCL would use GID index 0 ({gid}), {what}: the port has no valid "
        "AF_INET RoCE v2 GID")


@pytest.mark.parametrize(("type_text", "got"), [
    ("RoCE v1", "RoCE v1"), ("<EINVAL>", "RoCE of unknown version")])
def test_an_unsuitable_gid_names_its_version(type_text: str, got: str) -> None:
    verdict = gid_verdict(nccl_gid_index(gid_table(2, (0, "2001:db8::1", type_text)), {}))
    assert verdict is not None and verdict.message.startswith(
        "on mlx5_0:1 NCCL would use GID index 0 (2001:db8::1), a GID of AF_INET6, "
        f"{got}, not AF_INET RoCE v2 (RoCE: no index 1..1 qualified, index 0 stays)")


@pytest.mark.parametrize("flid", [0x1234, 0x1235, 1])
def test_a_routable_flid_gid_is_taken(flid: int) -> None:
    """On InfiniBand NCCL takes index 1 when its GID has a FLID (bytes 4-5): any
    non-zero one, odd ones too; the port's GID then suits (no verdict)."""
    gid = f"fe80:0000:{flid:04x}:0000:0002:c903:0000:0001"
    t = GidTable("mlx5_0", 1, "InfiniBand", 128, (GidEntry(0, LL), GidEntry(1, gid)))
    c = nccl_gid_index(t, {})
    assert [str(s) for s in c.steps] == [
        f"1: taken: FLID {flid:#x} (NCCL_IB_ROUTABLE_FLID_GID_INDEX default 1)"]
    assert c.index == 1 and c.suitable and gid_verdict(c) is None


def test_read_gid_table_past_bad_entries(tmp_path: Path) -> None:
    """A GID file that does not parse is skipped like a zero one, and the entries after
    it are read (``::1`` too); a types file is read as NCCL reads it, 15 bytes, up to a
    NUL; a read
    that fails with EINVAL (the kernel's answer for an unused entry), one that fails
    otherwise and an open that fails are told apart (NCCL goes on after the first
    only)."""
    attrs = {"ports/1/gids/0": ipaddress.IPv6Address(LL).exploded,
             "ports/1/gid_attrs/types/0": "RoCE v2", "ports/1/gids/1": "zz"}
    for i, gid in ((2, "::ffff:10.0.0.7"), (3, "::1"), (4, "::2"), (5, "::3"), (6, "::4")):
        attrs[f"ports/1/gids/{i}"] = ipaddress.IPv6Address(gid).exploded
        attrs[f"ports/1/gid_attrs/types/{i}"] = "RoCE v2 and more" if i == 2 else "RoCE v2\0junk"
        attrs[f"ports/1/gid_attrs/ndevs/{i}"] = "n" * (60 + i)  # 64 bytes do not fit
    host = HostBuilder().rxe(name="rxe0", netdev="v0", ib_attrs=attrs).materialize(tmp_path)
    types = f"{host.sysfs}/class/infiniband/rxe0/ports/1/gid_attrs/types/"
    memo = ReadOnce()
    memo.files[memo.key(types + "4")] = (-errno.EINVAL, 15)
    memo.files[memo.key(types + "5")] = (-errno.EIO, 15)
    memo.files[memo.key(types + "6")] = (errno.EPERM, 15)  # the open fails
    with memo:
        t = read_gid_table("rxe0", 1, sysfs_path=str(host.sysfs))
    assert [(e.index, str(e.gid), e.type_text) for e in t.entries] == [
        (0, LL, "RoCE v2"), (2, "::ffff:a00:7", "RoCE v2 and mor"), (3, "::1", "RoCE v2"),
        (4, "::2", "<EINVAL>"), (5, "::3", "<error>"), (6, "::4", "<missing>")]
    assert [e.ndev for e in t.entries[1:3]] == ["n" * 62, "n" * 63]
    assert t.entries[3].ndev is None


def test_strtoll_against_glibc() -> None:
    """NCCL_IB_ROCE_VERSION_NUM as ncclLoadParam reads it: glibc's strtoll (base 0) in an
    int, the default 2 where strtoll sets ERANGE; the scan's rule names it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.strtoll.restype = ctypes.c_longlong
    libc.strtoll.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    t = gid_table(2, (0, LL, "RoCE v2"), (1, "::ffff:10.1.2.3", "RoCE v2"))
    for text in ("12x3", " -0x1f", "0xg", "0x", "9223372036854775807", "9223372036854775808",
                 "-9223372036854775808", "-9223372036854775809", "077", "4294967298",
                 "2147483648", "2147483647"):
        ctypes.set_errno(0)
        value = libc.strtoll(text.encode(), None, 0)
        erange = ctypes.get_errno() == errno.ERANGE
        c = nccl_gid_index(t, {"NCCL_IB_ROCE_VERSION_NUM": text})
        assert c.roce_version == (2 if erange else ctypes.c_int(value).value), text
        why = (f"NCCL_IB_ROCE_VERSION_NUM={text!r} out of range: default 2" if erange
               else f"NCCL_IB_ROCE_VERSION_NUM={text}")
        assert c.rule == f"RoCE: the scan's last choice (AF_INET, {why})", text


def test_ranges_as_inet_pton_reads_them() -> None:
    """NCCL_IB_ADDR_RANGE's address is inet_pton's: what it refuses is no range."""
    for text, family in (("zz", AF_INET6), ("1::2::3", AF_INET6), ("10.0.0", AF_INET),
                         ("010.0.0.1", AF_INET), ("255.1.2.3", AF_INET), ("fe80::1", AF_INET6)):
        try:
            socket.inet_pton(socket.AF_INET if family == AF_INET else socket.AF_INET6, text)
            valid = True
        except OSError:
            valid = False
        assert (env_range({"NCCL_IB_ADDR_RANGE": text + "/8"}, family) is not None) is valid


def test_an_address_range_of_one_host() -> None:
    """A /32 AF_INET range keeps exactly that address (its last bit too), a /1 half of
    all; a /32 AF_INET6 range compares 32 bits, not 33."""
    t = gid_table(4, (0, LL, "RoCE v2"), (1, "::ffff:10.1.2.2", "RoCE v2"),
                  (2, "::ffff:10.1.2.3", "RoCE v2"))
    assert nccl_gid_index(t, {"NCCL_IB_ADDR_RANGE": "10.1.2.3/32"}).index == 2
    assert nccl_gid_index(t, {"NCCL_IB_ADDR_RANGE": "10.1.2.2/32"}).index == 1
    assert nccl_gid_index(t, {"NCCL_IB_ADDR_RANGE": "128.0.0.0/1"}).index == 0
    assert nccl_gid_index(t, {"NCCL_IB_ADDR_RANGE": "0.0.0.0/1"}).index == 1
    t6 = gid_table(2, (0, LL, "RoCE v2"), (1, "2001:db8:8000::1", "RoCE v2"))
    assert nccl_gid_index(t6, {"NCCL_IB_ADDR_FAMILY": AF_INET6,
                               "NCCL_IB_ADDR_RANGE": "2001:db8::/32"}).index == 1


def test_index_one_is_weighed_alone() -> None:
    """The entry at index 1 is a step of its own; the zero entries after it one run;
    a zero GID taken (AF_INET6 wanted, after an IPv4 one) starts the next run."""
    c = nccl_gid_index(gid_table(4, (0, LL, "IB/RoCE v1"), (1, LL, "RoCE v2")), {})
    assert [str(s) for s in c.steps] == ["1: skipped: AF_INET6, not AF_INET",
                                         "2-3: skipped: zero GID (unused entries)"]
    c = nccl_gid_index(gid_table(4, (0, "::ffff:10.1.2.3", "RoCE v2")),
                       {"NCCL_IB_ADDR_FAMILY": AF_INET6})
    assert [str(s) for s in c.steps] == [
        "1: taken: AF_INET6, the wanted family, after a GID of family AF_INET (taken without "
        "a version check)",
        "2-3: skipped: zero GID (unused entries)"]


def test_lookups_that_fail() -> None:
    """A types file that cannot be opened fails NCCL's scan at the candidate (skipped,
    the choice before it kept); a negative routable-FLID index fails ibv_query_gid on
    InfiniBand (index 0 shown)."""
    t = gid_table(3, (0, LL, "IB/RoCE v1"), (1, "::ffff:10.1.2.3", "IB/RoCE v1"),
                  (2, "::ffff:10.1.2.4", "<missing>"))
    c = nccl_gid_index(t, {})
    missing = "open failed in ncclIbRoceGetVersionNum (no gid_attrs/types file)"
    assert (c.index, c.rule, c.error) == (1, "RoCE scan failed", missing)
    assert str(c.steps[-1]) == f"2: skipped: {missing}"
    assert c.explain().splitlines()[0] == (
        f"mlx5_0:1: GID index 1 (::ffff:10.1.2.3): RoCE scan failed; NCCL fails: {missing}")
    assert not c.suitable and gid_verdict(c) == (
        "gid-lookup-fails", f"NCCL's GID lookup fails on mlx5_0:1: {missing}: every RoCE "
        "connection of the port fails")
    ib = GidTable("mlx5_0", 1, "InfiniBand", 128, (GidEntry(0, LL),))
    c = nccl_gid_index(ib, {"NCCL_IB_ROUTABLE_FLID_GID_INDEX": "-1"})
    assert (c.index, c.rule, c.error) == (
        0, "InfiniBand: NCCL_IB_ROUTABLE_FLID_GID_INDEX=-1",
        "ibv_query_gid fails on a negative index")


@pytest.mark.parametrize(("env", "steps", "rule"), [
    ({}, ["1: skipped: no FLID (NCCL_IB_ROUTABLE_FLID_GID_INDEX default 1)"],
     "InfiniBand: GID 0 (no routable FLID GID)"),
    ({"NCCL_IB_ROUTABLE_FLID_GID_INDEX": "0"},
     ["0: skipped: no FLID (NCCL_IB_ROUTABLE_FLID_GID_INDEX=0)"],
     "InfiniBand: GID 0 (no routable FLID GID)"),
    ({"NCCL_IB_ROUTABLE_FLID_GID_INDEX": "2"}, [], "InfiniBand: GID 0 (no routable FLID GID)"),
])
def test_infiniband_without_a_flid(env: dict[str, str], steps: list[str], rule: str) -> None:
    """Index 0 is a FLID index like any other; one at the table's length is not looked
    at (ibv_query_gid would fail): GID 0, no error."""
    t = GidTable("mlx5_0", 1, "InfiniBand", 2, (GidEntry(0, LL), GidEntry(1, "fe80::1:2")))
    c = nccl_gid_index(t, env)
    assert ([str(x) for x in c.steps], c.rule, c.index, c.error) == (steps, rule, 0, None)


def test_why_a_gid_of_the_family_is_skipped() -> None:
    """After a valid RoCE v2 choice, another v2 GID is skipped as the same version, a
    v1 one as not the version wanted."""
    t = gid_table(3, (0, "::ffff:10.1.2.3", "RoCE v2"), (1, "::ffff:10.1.2.4", "RoCE v2"),
                  (2, "::ffff:10.1.2.5", "IB/RoCE v1"))
    assert [str(x) for x in nccl_gid_index(t, {}).steps] == [
        "1: skipped: RoCE v2, as the current choice (0)",
        "2: skipped: RoCE v1, not v2 (NCCL_IB_ROCE_VERSION_NUM default 2)"]


# ----------------------------------------------------------------------------- ib.py


def test_a_ports_state_text() -> None:
    p = IbPort("mlx5_0", 1, False, "InfiniBand", "", state="1: DOWN")
    assert (p.state, p.gids, p.opens, p.sys_image_guid) == ("1: DOWN", None, True, 0)


def test_a_device_without_rail_or_plane() -> None:
    """IbDevice's rail and plane default to -1 (none): the label has neither."""
    d = IbDevice(0, "mlx5_0", 1, "IB", "")
    assert (d.rail, d.plane, d.label()) == (-1, -1, "[0]mlx5_0:1/IB")
    assert IbDevice(2, "mlx5_1", 1, "RoCE", "", -1, 3).label() == "[2]mlx5_1:1::3/RoCE"


def test_the_merged_using_line_is_2_20_to_2_23() -> None:
    """ncclIbInit merges the ports of one NIC from 2.20.0 on (V_MERGED_IN_INIT): 2.20 to
    2.23 print them as one ``[0]={...}``; 2.19 each alone, and from 2.24.0 the topology
    merges them after the Using line, which lists each port."""
    ports = [IbPort("mlx5_0", p, True, "InfiniBand", f"{PCI}0000:10:00.0") for p in (1, 2)]
    merged = "NET/IB : Using [0]={[0] mlx5_0:1/IB, [1] mlx5_0:2/IB} [RO]; OOB e"
    alone = "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_0:2/IB [RO]; OOB e"
    for version, line in (("2.19.4", alone), ("2.20.0", merged), ("2.23.4", merged),
                          ("2.24.0", alone)):
        assert select_ib(ports, {}, nccl_version=version).using_line("e") == line, version


def test_a_using_line_before_2_20_is_cut_at_1022_bytes() -> None:
    """char line[1024] (2048 from 2.20), and before 2.24 snprintf is given one byte
    less: 1022 bytes of devices, then 2046, then 2047."""
    many = [IbPort(f"mlx5_{'x' * 40}{i}", 1, True, "InfiniBand", f"{PCI}0000:{i:02x}:00.0")
            for i in range(32)]
    head, tail = len("NET/IB : Using"), len(" [RO]; OOB e")
    line = select_ib(many, {}, nccl_version="2.19.3").using_line("e")
    assert len(line) == head + 1022 + tail
    line = select_ib(many, {}, nccl_version="2.23.4").using_line("e")
    assert line.endswith(f"[31]mlx5_{'x' * 40}31:1/IB [RO]; OOB e")
    longer = [p._replace(device=p.device.replace("x" * 40, "x" * 60)) for p in many]
    for version, room in (("2.23.4", 2046), ("2.24.0", 2047)):
        line = select_ib(longer, {}, nccl_version=version).using_line("e")
        assert len(line) == head + room + tail, version


@pytest.mark.parametrize(("paths", "order"), [
    # strtol clamps at LONG_MAX: three such keys are equal, the sort keeps table order
    ((("a", "ffffffffffffffff"), ("b", "8000000000000000"), ("c", "7fffffffffffffff")),
     "abc"),
    ((("a", "ffffffffffffffff"), ("d", "4000000000000001")), "da"),
    # the hex digits stop at the first other character: 2z1 is 2, before 3
    ((("b", "3"), ("a", "2z1")), "ab"),
    # no hex digit at all is strtol("") = 0: a tie with 0, kept in table order
    ((("b", "0"), ("c", "1"), ("a", "zz")), "bac"),
    # LONG_MAX itself is not clamped below
    ((("a", "7fffffffffffffff"), ("b", "7ffffffffffffffe")), "ba"),
])
def test_pci_path_keys_as_strtol_reads_them(paths: tuple[tuple[str, str], ...],
                                            order: str) -> None:
    """NCCL_IB_DEVICE_PCI_ORDER (busIdToInt64) reads the last component with strtol."""
    ports = [IbPort(d, 1, True, "InfiniBand", f"/x/{path}") for d, path in paths]
    assert "".join(d.device for d in select_ib(ports, {}).devices) == order


def test_a_missing_sys_image_guid_is_zero(tmp_path: Path) -> None:
    host = HostBuilder().rxe(name="rxe0", netdev="v0").materialize(tmp_path)
    (host.sysfs / "class/infiniband/rxe0/sys_image_guid").unlink()
    assert [p.sys_image_guid for p in host_ports(**host.options())] == [0]


def test_merged_nics_vfs_and_their_order() -> None:
    """Since 2.24 the ports of one NIC are merged, a VF (device 01) with its PF
    (NCCL_IB_MERGE_VFS=1); the virtual devices come in the order of their first port."""
    pf_vf = [IbPort(f"mlx5_{i}", 1, True, "InfiniBand", f"{PCI}0000:10:0{i}.0") for i in (0, 1)]
    assert select_ib(pf_vf, {}).virtual_names() == ["mlx5_0+mlx5_1"]
    assert select_ib(pf_vf, {"NCCL_IB_MERGE_VFS": "0"}).virtual_names() == ["mlx5_0", "mlx5_1"]
    ports = [IbPort(f"mlx5_{i}", 1, True, "InfiniBand", f"{PCI}0000:{bus}:00.{fn}")
             for i, bus, fn in ((0, 10, 0), (1, 20, 0), (2, 20, 1), (3, 10, 1))]
    sel = select_ib(ports, {"NCCL_IB_DEVICE_PCI_ORDER": "0"})
    assert sel.virtual_names() == ["mlx5_0+mlx5_3", "mlx5_1+mlx5_2"]


def test_no_device_list_without_an_errno() -> None:
    assert no_device_list_note(OSError("no errno")) == (
        "ibv_get_device_list fails here (Success): NCCL counts no IB device")

"""``sysverbs.rank.environment`` and ``sysverbs.rank.gid``: NCCL's GID index rule and the
environment for a rank, on fixture hosts and built trees.

The real counterparts are elsewhere: the kernel lab's ``roce`` scenario
(tests/kernel/scenario_roce.py: ``ibv_devinfo -v``, ``ibv_rc_pingpong`` and
``ucx_info`` under a real kernel) and, here, ``sh`` itself (the exports are sourced
by a real shell) and ``ip addr`` (the rtnetlink address dump).
"""

from __future__ import annotations

import doctest
import importlib
import ipaddress
import json
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

import pytest

from sysverbs import cli
from sysverbs.rank import environment
from sysverbs.rank.environment import Netdev, Nic, predict, rank_environment
from sysverbs.rank.gid import (
    TYPE_EINVAL,
    TYPE_MISSING,
    GidEntry,
    GidTable,
    nccl_gid_index,
    read_gid_table,
    strtoll,
)
from sysverbs.testing import HostBuilder
from tests.conftest import require

V1, V2 = "IB/RoCE v1", "RoCE v2"
LL = "fe80::202:c9ff:fe00:1"
V4 = "::ffff:10.1.2.3"


def table(entries: Sequence[tuple[int, str, Optional[str]]], length: Optional[int] = None,
          link_layer: str = "Ethernet", device: str = "mlx5_0") -> GidTable:
    es = tuple(GidEntry(i, g, t) for i, g, t in entries)
    n = length if length is not None else max(i for i, _, _ in entries) + 1
    return GidTable(device, 1, link_layer, n, es)


#: mlx5 with one IPv4 address: the four-entry layout (NCCL #769: "only index 3 worked").
MLX5 = [(0, LL, V1), (1, LL, V2), (2, V4, V1), (3, V4, V2)]


def test_doctests() -> None:
    result = doctest.testmod(importlib.import_module('sysverbs.rank.gid'))
    assert result.attempted and result.failed == 0, 'sysverbs.rank.gid'
    result = doctest.testmod(importlib.import_module('sysverbs.rank.environment'))
    assert result.attempted and result.failed == 0, 'sysverbs.rank.environment'


# ----------------------------------------------------------------------------- the rule


def test_mlx5_layout_picks_ipv4_roce_v2() -> None:
    c = nccl_gid_index(table(MLX5, 256), {})
    assert (c.index, c.suitable, c.version) == (3, True, 2)
    assert [s.taken for s in c.steps][:3] == [False, True, True]
    assert "wanted family" in c.steps[1].why


def test_roce_version_1_wanted() -> None:
    c = nccl_gid_index(table(MLX5), {"NCCL_IB_ROCE_VERSION_NUM": "1"})
    assert c.index == 2 and c.suitable


def test_macvlan_table_not_starting_at_zero() -> None:
    # NCCL PR #1427: the pod's entries start at 4; 0..3 read as zero GIDs.
    c = nccl_gid_index(table([(4, LL, V1), (5, LL, V2), (6, V4, V1), (7, V4, V2)], 16), {})
    assert (c.index, c.suitable) == (7, True)
    assert c.steps[0].why.startswith("zero GID")


def test_first_gid_of_the_family_is_taken_without_a_version_check() -> None:
    # ncclUpdateGidIndex's first branch: an IPv4 RoCE v1 GID replaces the IPv6 index 0,
    # and with no v2 GID after it, stays: NCCL would use RoCE v1.
    c = nccl_gid_index(table([(0, LL, V1), (1, LL, V2), (2, V4, V1)]), {})
    assert (c.index, c.version, c.suitable) == (2, 1, False)


def test_ipv6_only_bnxt_re_falls_back_to_index_0() -> None:
    # uccl PR #803: bnxt_re with only IPv6 GIDs; AF_INET (the default) finds nothing.
    t = table([(0, LL, V1), (1, LL, V2), (2, "fd00::5", V1), (3, "fd00::5", V2)])
    c = nccl_gid_index(t, {})
    assert (c.index, c.suitable) == (0, False)
    assert "no index" in c.rule
    c6 = nccl_gid_index(t, {"NCCL_IB_ADDR_FAMILY": "AF_INET6"})
    assert (c6.index, c6.suitable) == (3, True)
    # only the exact spelling counts (envIbAddrFamily)
    assert nccl_gid_index(t, {"NCCL_IB_ADDR_FAMILY": "inet6"}).index == 0


def test_link_local_ipv6_is_skipped_for_af_inet6() -> None:
    t = table([(0, V4, V2), (1, LL, V2), (2, "fd00::5", V1), (3, "fd00::5", V2)])
    c = nccl_gid_index(t, {"NCCL_IB_ADDR_FAMILY": "AF_INET6"})
    # index 1 (link-local) is taken first: another family than index 0's, unchecked
    assert [s.taken for s in c.steps] == [True, False, True]
    assert c.index == 3


def test_addr_range() -> None:
    t = table([(0, LL, V1), (1, "::ffff:10.1.2.3", V2), (2, "::ffff:192.168.1.5", V2)])
    assert nccl_gid_index(t, {}).index == 1
    assert nccl_gid_index(t, {"NCCL_IB_ADDR_RANGE": "192.168.0.0/16"}).index == 2
    c = nccl_gid_index(t, {"NCCL_IB_ADDR_RANGE": "172.16.0.0/12"})
    assert c.index == 0 and "outside NCCL_IB_ADDR_RANGE" in c.steps[1].why
    # the mask is read by strtol(.., 10): "010" is 10 bits, not octal 8
    t2 = table([(0, LL, V1), (1, "::ffff:10.1.2.3", V2), (2, "::ffff:10.100.0.1", V2)])
    assert nccl_gid_index(t2, {"NCCL_IB_ADDR_RANGE": "10.64.0.0/010"}).index == 2
    assert nccl_gid_index(t2, {"NCCL_IB_ADDR_RANGE": "10.64.0.0/8"}).index == 1
    # no mask, a bad address or a mask too long: no range at all
    for bad in ("192.168.0.0", "192.168.0/16", "192.168.0.0/33"):
        assert nccl_gid_index(t, {"NCCL_IB_ADDR_RANGE": bad}).index == 1, bad


def test_gid_index_from_the_environment() -> None:
    t = table(MLX5)
    assert nccl_gid_index(t, {"NCCL_IB_GID_INDEX": "1"}).index == 1
    assert nccl_gid_index(t, {"NCCL_IB_GID_INDEX": "0x2"}).index == 2
    # strtoll without digits is 0 (no errno): NCCL uses index 0
    assert nccl_gid_index(t, {"NCCL_IB_GID_INDEX": "abc"}).index == 0
    # an empty value or -1: NCCL scans
    assert nccl_gid_index(t, {"NCCL_IB_GID_INDEX": ""}).index == 3
    assert nccl_gid_index(t, {"NCCL_IB_GID_INDEX": "-1"}).index == 3
    c = nccl_gid_index(t, {"NCCL_IB_GID_INDEX": "7"})
    assert c.index == 7 and c.error and "outside" in c.error


def test_strtoll() -> None:
    assert [strtoll(s) for s in ("  12", "+7", "-0x10", "0777", "9z", "", "0x")] == \
        [12, 7, -16, 511, 9, 0, 0]
    assert strtoll("9223372036854775808") is None
    assert strtoll("-9223372036854775808") == -(1 << 63)


def test_infiniband_flid_rule() -> None:
    flid = "fe80:0000:1234:0000:0002:c903:0000:0001"
    t = table([(0, LL, V1), (1, flid, V1)], 128, link_layer="InfiniBand")
    c = nccl_gid_index(t, {})
    assert c.index == 1
    assert c.rule == "InfiniBand: routable FLID GID at NCCL_IB_ROUTABLE_FLID_GID_INDEX default 1"
    assert nccl_gid_index(t, {"NCCL_IB_ROUTABLE_FLID_GID_INDEX": "2"}).index == 0
    no_flid = table([(0, LL, V1), (1, "fe80::1:2", V1)], 128, link_layer="InfiniBand")
    assert nccl_gid_index(no_flid, {}).index == 0
    # NCCL_IB_GID_INDEX does not apply to InfiniBand ports
    assert nccl_gid_index(no_flid, {"NCCL_IB_GID_INDEX": "1"}).index == 0


def test_type_file_errors() -> None:
    missing = table([(0, LL, V1), (1, V4, TYPE_MISSING)])
    c = nccl_gid_index(missing, {})
    # the first IPv4 GID is taken without reading its type; a second one reads both
    assert c.index == 1 and c.error is None
    missing2 = table([(0, LL, V1), (1, V4, V1), (2, V4, TYPE_MISSING)])
    c2 = nccl_gid_index(missing2, {})
    assert c2.error and "open failed" in c2.error
    einval = table([(0, LL, V1), (1, V4, V1), (2, V4, TYPE_EINVAL), (3, V4, V2)])
    assert nccl_gid_index(einval, {}).index == 3


# ----------------------------------------------------------------------------- sysfs


def gid_attrs(gids: Mapping[int, tuple[str, Optional[str]]], ndev: str, length: int = 8
              ) -> dict[str, Optional[str]]:
    """``ib_attrs`` for a GID table: ``{index: (gid, type)}``, the rest zero."""
    out: dict[str, Optional[str]] = {}
    for i in range(length):
        g, t = gids.get(i, ("::", None))
        out[f"ports/1/gids/{i}"] = ipaddress.IPv6Address(g).exploded
        out[f"ports/1/gid_attrs/types/{i}"] = t
        out[f"ports/1/gid_attrs/ndevs/{i}"] = ndev if t is not None else None
    return out


def test_read_gid_table_of_a_built_tree(tmp_path: Path) -> None:
    b = HostBuilder().rxe(name="rxe0", netdev="v0", ib_attrs=gid_attrs(
        {4: (LL, V2), 6: ("::ffff:10.0.0.7", V2)}, "v0"))
    host = b.materialize(tmp_path)
    t = read_gid_table("rxe0", 1, sysfs_path=str(host.sysfs))
    assert (t.length, t.link_layer) == (8, "Ethernet")
    assert [(e.index, e.type_text, e.ndev) for e in t.entries] == \
        [(0, TYPE_MISSING, None), (4, V2, "v0"), (6, V2, "v0")]
    assert nccl_gid_index(t, {}).index == 6


def test_fixture_bnxt_re_has_only_link_local_gids(tmp_path: Path) -> None:
    import sysverbs

    opts = _fixture(tmp_path, "bnxt_re")
    env = rank_environment(environ={}, **opts)
    # No GPU: every ACTIVE port, in libibverbs' order (the tree's readdir order, which
    # depends on the filesystem; tests/test_oracle_core.py checks it against libibverbs).
    order = [d.name for d in sysverbs.get_device_list(source="sysfs", **opts)]
    assert sorted(order) == ["bnxt_re0", "bnxt_re1"]
    ports = ",".join(f"{name}:1" for name in order)
    assert env.exports() == {"NCCL_IB_HCA": "=" + ports, "UCX_NET_DEVICES": ports}
    assert len(env.warnings) == 2 and all("[nccl check: gid-link-local]" in w and "may work "
                                          "between hosts on one L2 segment" in w
                                          for w in env.warnings)


def _fixture(tmp_path: Path, name: str) -> dict[str, str]:
    from sysverbs import testing

    host = testing.materialize(testing.fixture_path(name), tmp_path)
    return {"sysfs_path": str(host.sysfs), "dev_dir": str(host.dev)}


def test_infiniband_host(tmp_path: Path) -> None:
    opts = _fixture(tmp_path, "dgx-demo")
    env = rank_environment(environ={}, list_options={"providers": "builtin"}, **opts)
    hca = env.exports()["NCCL_IB_HCA"]
    assert hca.startswith("=")
    assert all(re.fullmatch(r"[a-z0-9_]+:\d", e) for e in hca[1:].split(","))
    assert env.exports()["UCX_NET_DEVICES"] == hca[1:]
    gid = {v.name: v for v in env.variables}["NCCL_IB_GID_INDEX"]
    assert gid.value is None
    one = rank_environment(environ={}, local_rank=1, list_options={"providers": "builtin"}, **opts)
    assert one.exports()["NCCL_IB_HCA"] == "=" + hca[1:].split(",")[1]


def test_unknown_device(tmp_path: Path) -> None:
    with pytest.raises(LookupError):
        rank_environment(["mlx5_9"], environ={}, **_fixture(tmp_path, "mlx5-cx7"))


def _roce_host(tmp_path: Path, layouts: Sequence[Mapping[int, tuple[str, Optional[str]]]]
               ) -> dict[str, str]:
    b = HostBuilder()
    for i, layout in enumerate(layouts):
        b.rxe(name=f"rxe{i}", netdev=f"v{i}", ib_attrs=gid_attrs(layout, f"v{i}"))
    host = b.materialize(tmp_path)
    return {"sysfs_path": str(host.sysfs), "dev_dir": str(host.dev)}


def test_one_index_for_all(tmp_path: Path) -> None:
    layout = {0: (LL, V2), 1: ("::ffff:10.0.0.1", V2), 2: ("fd00::1", V2)}
    env = rank_environment(["rxe0:1", ("rxe1", 1, "Ethernet", ("v1",))], environ={},
                           **_roce_host(tmp_path, [layout, layout]))
    assert env.exports() == {"NCCL_IB_HCA": "=rxe0:1,rxe1:1", "UCX_NET_DEVICES": "rxe0:1,rxe1:1",
                             "NCCL_IB_GID_INDEX": "1"}
    assert not env.warnings


def test_indexes_differ_warns(tmp_path: Path) -> None:
    a = {0: (LL, V2), 1: ("::ffff:10.0.0.1", V2)}
    b = {0: (LL, V2), 1: ("fd00::1", V2), 2: ("::ffff:10.0.0.2", V2)}
    env = rank_environment(["rxe0", "rxe1"], environ={"NCCL_IB_GID_INDEX": "1"},
                           **_roce_host(tmp_path, [a, b]))
    assert "NCCL_IB_GID_INDEX" not in env.exports()
    assert any("NCCL takes one" in w and "rxe0:1 -> 1" in w and "rxe1:1 -> 2" in w
               for w in env.warnings)
    gid = {v.name: v for v in env.variables}["NCCL_IB_GID_INDEX"]
    assert "unset NCCL_IB_GID_INDEX=1" in gid.reason


def test_ipv6_only_sets_the_family(tmp_path: Path) -> None:
    v6 = {0: (LL, V1), 1: (LL, V2), 2: ("fd00::1", V1), 3: ("fd00::1", V2)}
    env = rank_environment(["rxe0"], environ={}, **_roce_host(tmp_path, [v6]))
    assert env.exports()["NCCL_IB_ADDR_FAMILY"] == "AF_INET6"
    assert env.exports()["NCCL_IB_GID_INDEX"] == "3"
    # a user's family is left as it is: then it is a warning
    env2 = rank_environment(["rxe0"], environ={"NCCL_IB_ADDR_FAMILY": "AF_INET"},
                            **_roce_host(tmp_path / "b", [v6]))
    assert "NCCL_IB_ADDR_FAMILY" not in env2.exports() and env2.warnings


def test_socket_ifname() -> None:
    def nic(name: str, *netdevs: Netdev) -> Nic:
        return Nic(name, 1, "InfiniBand", "ACTIVE", netdevs)

    up = predict([nic("mlx5_0", Netdev("ib0", True, ("10.0.0.1", "fe80::1"))),
                  nic("mlx5_1", Netdev("ib1", True, ("fe80::2",)))], {})
    sock = {v.name: v for v in up.variables}["NCCL_SOCKET_IFNAME"]
    assert sock.value == "=ib0" and "ib1 has no usable address" in sock.reason
    v6 = predict([nic("mlx5_0", Netdev("ib0", True, ("10.0.0.1", "fd00::1")))],
                 {"NCCL_SOCKET_FAMILY": "AF_INET6"})
    assert v6.exports()["NCCL_SOCKET_IFNAME"] == "=ib0"
    down = predict([nic("mlx5_0", Netdev("ib0", False, ("10.0.0.1",)))], {})
    assert "NCCL_SOCKET_IFNAME" not in down.exports()
    unknown = predict([nic("mlx5_0", Netdev("ib0"))], {})
    assert "unknown" in {v.name: v for v in unknown.variables}["NCCL_SOCKET_IFNAME"].reason


def test_addresses_given(tmp_path: Path) -> None:
    layout = {0: (LL, V2), 1: ("::ffff:10.0.0.1", V2)}
    env = rank_environment(["rxe0"], environ={}, addresses={"v0": ["10.0.0.1"]},
                           **_roce_host(tmp_path, [layout]))
    # the built tree's netdev is up (its operstate): running, its address known
    assert env.exports()["NCCL_SOCKET_IFNAME"] == "=v0"


# ----------------------------------------------------------------------------- output


def _sample() -> environment.RankEnvironment:
    nics = [Nic("mlx5_0", 1, "Ethernet", "ACTIVE", (Netdev("eth 0", True, ("10.0.0.1",)),),
                table(MLX5, 8))]
    return predict(nics, {})


def test_sh_output_sourced_by_a_real_shell() -> None:
    sh = shutil.which("sh")
    if sh is None:
        require("sh is not installed", "a POSIX shell")
    env = _sample()
    script = env.render("sh") + 'printf "%s\\0" "$NCCL_IB_HCA" "$UCX_NET_DEVICES" ' \
        '"$NCCL_SOCKET_IFNAME" "$NCCL_IB_GID_INDEX"\n'
    out = subprocess.run([str(sh), "-c", script], capture_output=True, check=True, env={})
    assert out.stdout.split(b"\0")[:-1] == [v.encode() for v in env.exports().values()]
    assert env.exports()["NCCL_SOCKET_IFNAME"] == "=eth 0"


def test_dotenv_and_json() -> None:
    env = _sample()
    lines = [ln for ln in env.render("dotenv").splitlines() if not ln.startswith("#")]
    assert lines == ["NCCL_IB_HCA==mlx5_0:1", "UCX_NET_DEVICES=mlx5_0:1",
                     'NCCL_SOCKET_IFNAME="=eth 0"', "NCCL_IB_GID_INDEX=3"]
    doc = json.loads(env.render("json"))
    assert doc["schema"] == "sysverbs.env/1"
    assert [v["name"] for v in doc["variables"]] == list(env.exports())
    assert all(v["reason"] for v in doc["variables"])
    assert doc["gid_index"][0]["index"] == 3 and doc["gid_index"][0]["gid"] == "::ffff:10.1.2.3"
    with pytest.raises(ValueError):
        env.render("yaml")


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    opts = _roce_host(tmp_path, [{0: (LL, V2), 1: ("::ffff:10.0.0.1", V2)}])
    rc = cli.main(["env", "--sysfs-path", opts["sysfs_path"], "--dev-dir", opts["dev_dir"],
                   "--source", "sysfs", "--providers", "builtin", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and [n["device"] for n in doc["nics"]] == ["rxe0"]
    assert cli.main(["env", "--fixture", "mlx5-cx7", "--device", "nosuch"]) == 1
    assert "no RDMA device 'nosuch'" in capsys.readouterr().err
    assert cli.main(["env", "--fixture", "mlx5-cx7", "--format", "dotenv",
                     "--device", "mlx5_0:1"]) == 0
    assert "NCCL_IB_HCA==mlx5_0:1\n" in capsys.readouterr().out


# ----------------------------------------------------------------------------- rtnetlink


def test_interface_addresses_match_ip_addr() -> None:
    ip = shutil.which("ip")
    if ip is None:
        require("ip is not installed (apt-get install iproute2)", "iproute2's ip")
    got = environment.interface_addresses()
    assert got is not None
    out = subprocess.run([str(ip), "-o", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    want: dict[str, set[str]] = {}
    for line in out.splitlines():
        m = re.match(r"\d+: (\S+?)(?:@\S+)?\s+inet6? (\S+?)/", line)
        if m:
            want.setdefault(m.group(1), set()).add(m.group(2))
    assert {k: set(v) for k, v in got.items()} == want


# ----------------------------------------------------------------------------- runs

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.fuzz.profiles import fuzz_settings  # noqa: E402

_GIDS = st.sampled_from(["::", LL, "fe80::", V4, "::ffff:192.168.1.5", "fd00::5",
                         "ff0e::ffff:10.0.0.1", "2001:db8::1"])
_TYPES = st.sampled_from([V1, V2, TYPE_EINVAL, "junk", None])
_ENVS = st.fixed_dictionaries({}, optional={
    "NCCL_IB_ADDR_FAMILY": st.sampled_from(["AF_INET", "AF_INET6", "x"]),
    "NCCL_IB_ROCE_VERSION_NUM": st.sampled_from(["1", "2", "3"]),
    "NCCL_IB_ADDR_RANGE": st.sampled_from(["10.0.0.0/8", "192.168.0.0/16", "::/0",
                                           "fd00::/8", "0.0.0.0/0"]),
})


# The expected indexes below follow NCCL's ncclIbGetGidIndex and ncclUpdateGidIndex
# (NVIDIA/nccl v2.30.7-1, src/transport/net_ib/connect.cc; the same code at master
# 5067397c), read by hand.  For RoCE the scan starts at index 0 and weighs each
# candidate 1..gid_tbl_len-1 against the current choice:
#   (a) the candidate's family (AF_INET for ::ffff:a.b.c.d and ff0e::ffff:a.b.c.d,
#       else AF_INET6) differs from the current one's, is NCCL_IB_ADDR_FAMILY's
#       (default AF_INET) and is inside NCCL_IB_ADDR_RANGE: taken, no version read;
#   (b) else a candidate of another family than wanted, not validGid (zero, or
#       fe80::/64) or outside the range is skipped;
#   (c) else both types files are read (ncclIbRoceGetVersionNum; open fails: NCCL
#       fails; read EINVAL or an unknown text: no version) and the candidate is taken
#       when it is NCCL_IB_ROCE_VERSION_NUM (default 2) and the current one is
#       another version or not validGid.
# NCCL_IB_GID_INDEX >= 0 is used as it is.  InfiniBand: the GID at
# NCCL_IB_ROUTABLE_FLID_GID_INDEX (default 1) when its FLID (bytes 4-5) is not 0,
# else 0.  Entries not listed are zero GIDs (their types file: EINVAL).
V4B = "::ffff:10.1.2.4"
GID_CASES: list[tuple[str, list[tuple[int, str, Optional[str]]], int, dict[str, str], int,
                      bool]] = [
    # 1 LL: AF_INET6, not wanted (b); 2 (a) family change; 3 (c) v2 after v1; the
    # zero entries 4..255 are AF_INET6 (b)
    ("mlx5-ipv4", MLX5, 256, {}, 3, False),
    # as above, 3 is v2, not the wanted v1 (c)
    ("mlx5-ipv4-want-v1", MLX5, 8, {"NCCL_IB_ROCE_VERSION_NUM": "1"}, 2, False),
    # forced: no scan
    ("forced", MLX5, 8, {"NCCL_IB_GID_INDEX": "1"}, 1, False),
    # two addresses: 2 (a), 3 (c) v2 after v1; 4 is v1 (c); 5 is v2 like 3, and 3
    # is valid (c): the first address's v2 GID stays
    ("two-ipv4", [*MLX5, (4, V4B, V1), (5, V4B, V2)], 8, {}, 3, False),
    # AF_INET6 wanted, index 0 IPv4: zero 1 is AF_INET6, another family than 0's (a):
    # taken; zero 2 is the same family as 1, not valid (b); 3 fd00::5 valid, and the
    # current (zero) GID is not valid, 3 is v2 (c): taken
    ("zero-taken-then-fd00", [(0, V4, V2), (3, "fd00::5", V2)], 4,
     {"NCCL_IB_ADDR_FAMILY": "AF_INET6"}, 3, False),
    # the same without index 3: the zero GID at 1 is NCCL's answer
    ("zero-taken", [(0, V4, V2)], 4, {"NCCL_IB_ADDR_FAMILY": "AF_INET6"}, 1, False),
    # IPv6 only, AF_INET wanted: every candidate is (b): 0 stays
    ("ipv6-only", [(0, LL, V1), (1, LL, V2), (2, "fd00::5", V1), (3, "fd00::5", V2)], 4,
     {}, 0, False),
    # range 192.168/16: 1 (10.1.2.3) is outside (b); 2 is inside, another family (a)
    ("range", [(0, LL, V1), (1, V4, V2), (2, "::ffff:192.168.1.5", V2)], 3,
     {"NCCL_IB_ADDR_RANGE": "192.168.0.0/16"}, 2, False),
    # 1 (a); 2's types file reads EINVAL: no version, not v2 (c); 3 v2 after v1 (c)
    ("einval", [(0, LL, V1), (1, V4, V1), (2, V4, TYPE_EINVAL), (3, V4, V2)], 4, {}, 3,
     False),
    # 1 (a); 2 reaches (c) and its types file cannot be opened: NCCL fails, at 1
    ("missing-type", [(0, LL, V1), (1, V4, V1), (2, V4, TYPE_MISSING)], 4, {}, 1, True),
    # the macvlan pod (NCCL PR #1427): 0..3 zero, 4 LL and 5 LL (b); 6 (a); 7 (c)
    ("macvlan", [(4, LL, V1), (5, LL, V2), (6, V4, V1), (7, V4, V2)], 16, {}, 7, False),
]
IB_CASES = [
    # FLID 0x1234 in bytes 4-5 of index 1: index 1
    ("ib-flid", [(0, LL, V1), (1, "fe80:0000:1234:0000:0002:c903:0000:0001", V1)], {}, 1),
    # no FLID at index 1: 0
    ("ib-no-flid", [(0, LL, V1), (1, "fe80::1:2", V1)], {}, 0),
    # NCCL_IB_GID_INDEX is not read for InfiniBand
    ("ib-forced-ignored", [(0, LL, V1), (1, "fe80::1:2", V1)], {"NCCL_IB_GID_INDEX": "1"}, 0),
]


@pytest.mark.parametrize(("entries", "length", "env", "index", "fails"),
                         [c[1:] for c in GID_CASES], ids=[c[0] for c in GID_CASES])
def test_gid_index_hand_derived_from_nccl(entries: list[tuple[int, str, Optional[str]]],
                                          length: int, env: dict[str, str], index: int,
                                          fails: bool) -> None:
    got = nccl_gid_index(table(entries, length), env)
    assert (got.index, got.error is not None) == (index, fails)


@pytest.mark.parametrize(("entries", "env", "index"), [c[1:] for c in IB_CASES],
                         ids=[c[0] for c in IB_CASES])
def test_infiniband_gid_index_hand_derived_from_nccl(
        entries: list[tuple[int, str, Optional[str]]], env: dict[str, str], index: int) -> None:
    assert nccl_gid_index(table(entries, 128, link_layer="InfiniBand"), env).index == index


def _nccl_scan(gids: Mapping[int, str], versions: Mapping[int, Optional[int]], length: int,
               env: Mapping[str, str]) -> int:
    """ncclIbGetGidIndex's RoCE scan, written out here from NCCL's C (v2.30.7-1,
    connect.cc: getGidAddrFamily, configuredGid, linkLocalGid, envIbAddrRange,
    matchGidAddrPrefix, ncclUpdateGidIndex) on 32-bit words as NCCL reads them; it
    shares no code with sysverbs.rank.gid.  ``versions``: what
    ncclIbRoceGetVersionNum leaves (None: read EINVAL or an unknown text; an
    uninitialised current version is taken as unequal to any candidate's)."""
    def words(i: int) -> list[int]:
        v = int(ipaddress.IPv6Address(gids.get(i, "::")))
        return [(v >> (96 - 32 * k)) & 0xFFFFFFFF for k in range(4)]

    def family(w: list[int]) -> int:
        mapped = w[0] | w[1] == 0 and w[2] == 0xFFFF
        return 4 if mapped or (w[0] == 0xFF0E0000 and w[1] == 0 and w[2] == 0xFFFF) else 6

    def valid(w: list[int]) -> bool:
        trailer = w[1] | w[2] | w[3]
        configured = not (w[0] | trailer == 0 or (w[0] == 0xFE800000 and trailer == 0))
        return configured and not (w[0] == 0xFE800000 and w[1] == 0)

    usr = 6 if env.get("NCCL_IB_ADDR_FAMILY") == "AF_INET6" else 4
    rver = int(env.get("NCCL_IB_ROCE_VERSION_NUM", "2"))
    base: Optional[list[int]] = None
    plen = 0
    addr, slash, mask = env.get("NCCL_IB_ADDR_RANGE", "").partition("/")
    if slash:
        try:
            net = int(ipaddress.IPv4Address(addr) if usr == 4 else ipaddress.IPv6Address(addr))
        except ValueError:
            net = -1
        if net >= 0 and int(mask) <= (32 if usr == 4 else 128):
            plen = int(mask)
            base = [0, 0, 0, net] if usr == 4 else \
                [(net >> (96 - 32 * k)) & 0xFFFFFFFF for k in range(4)]

    def match(w: list[int]) -> bool:
        left, i = plen, 0
        while base is not None and left > 0:
            bits = min(left, 32)
            m = (0xFFFFFFFF << (32 - bits)) & 0xFFFFFFFF
            k = 3 if usr == 4 else i
            if (base[k] ^ w[k]) & m:
                return False
            left, i = (0 if usr == 4 else left - bits), i + 1
        return True

    cur = 0
    for cand in range(1, length):
        g, c = words(cur), words(cand)
        if family(c) != family(g) and family(c) == usr and match(c):
            cur = cand
        elif family(c) == usr and valid(c) and match(c):
            vg, vc = versions.get(cur), versions.get(cand)
            if (vg != vc or not valid(g)) and vc == rver:
                cur = cand
    return cur


@fuzz_settings(ci=300, deep=3000)
@given(st.dictionaries(st.integers(0, 40), st.tuples(_GIDS, _TYPES), max_size=12),
       st.integers(1, 48), _ENVS)
def test_zero_runs_are_weighed_as_each_index(entries: dict[int, tuple[str, Optional[str]]],
                                             length: int, env: dict[str, str]) -> None:
    """The scan's shortcut over runs of zero entries gives what NCCL's loop, weighing
    every index one by one (:func:`_nccl_scan`, transliterated from the C), gives, on
    any table: every type, family and range."""
    present = {i: (g, ty) for i, (g, ty) in entries.items() if int(ipaddress.IPv6Address(g))}
    t = GidTable("d", 1, "Ethernet", length,
                 tuple(GidEntry(i, g, ty if ty is not None else TYPE_EINVAL)
                       for i, (g, ty) in present.items()))
    versions = {i: {V1: 1, V2: 2}.get(ty or "") for i, (_, ty) in present.items()}
    got = nccl_gid_index(t, env)
    assert (got.index, got.error) == (_nccl_scan({i: g for i, (g, _) in present.items()},
                                                 versions, length, env), None)


def test_benchmark_runs() -> None:
    """benchmarks/bench_env.py runs end to end on a tiny host (no time is asserted)."""
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_env.py"
    out = subprocess.run([sys.executable, str(script), "--nics", "2", "--gids", "8",
                          "--rounds", "3"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| (a) predict |" in out.stdout and "target: predict <= 5.0 ms" in out.stdout


#: NCCL_IB_HCA for each local rank, derived by hand from each fixture's PCI tree and
#: docs/placement.md's rule (the ports at the nearest class; GPUs whose ports overlap
#: share them out, as many each, by PCI address; fewer ports than GPUs: round-robin).
#: Every NIC has one port.
#: * gpu-dgx-a100 (the real DGX A100's DEVPATHs): each pair of GPUs and pair of NICs
#:   hangs below one two-level switch, every GPU-NIC pair of it PXB (the even GPU 9
#:   hops from both NICs, the odd one 5 from the first): one rail each, GPU2k mlx5_2k
#:   and GPU2k+1 mlx5_2k+1, as NCCL's ncclTopoGetLocalNet chooses.
#:   mlx5_8/9 (the storage card) are SYS to every GPU.
#: * gpu-hgx-h100: GPUi and mlx5_i below one switch, PIX (as in sgl-project/sglang#30401).
#: * gpu-pcie-2socket: one dual-port card (mlx5_0 21:00.0, mlx5_1 21:00.1) on NUMA 0;
#:   GPU0/1 are NODE to both, GPU2/3 SYS: two ports for four GPUs, GPU0 and GPU1 take
#:   one each by address, then GPU2 and GPU3 in the same turn.
PLACED_HCA = {
    # mlx5_2 and mlx5_6 are InfiniBand, the others RoCE: every rank uses RoCE
    "gpu-dgx-a100": [f"=mlx5_{i}:1" for i in (0, 1, 3, 3, 4, 5, 7, 7)],
    "gpu-hgx-h100": [f"=mlx5_{i}:1" for i in range(8)],
    "gpu-pcie-2socket": ["=mlx5_0:1", "=mlx5_1:1", "=mlx5_0:1", "=mlx5_1:1"],
}


@pytest.mark.parametrize("fixture", sorted(PLACED_HCA))
def test_without_nics_placement_chooses(ftmp: Path, fixture: str) -> None:
    """Without NICs, a rank on a GPU host gets the NICs placement assigns to its GPU,
    with ports and '=' (and the reason names the rank's GPU)."""
    from sysverbs import testing

    host = testing.materialize(testing.fixture_path(fixture), ftmp)
    roots = {"sysfs_path": str(host.sysfs), "dev_dir": str(host.dev)}
    for rank, want in enumerate(PLACED_HCA[fixture]):
        env = rank_environment(environ={"LOCAL_RANK": str(rank)}, proc_path=str(host.proc),
                               list_options={"providers": "builtin"}, **roots)
        exports = env.exports()
        assert exports["NCCL_IB_HCA"] == want, rank
        assert exports["UCX_NET_DEVICES"] == want[1:]
        assert any(note.startswith(f"placement: LOCAL_RANK={rank} -> GPU{rank} ")
                   for note in env.notes), env.notes


def test_without_gpus_every_usable_port(tmp_path: Path) -> None:
    env = rank_environment(environ={}, list_options={"providers": "builtin"},
                           **_fixture(tmp_path, "mlx5-cx7"))
    assert any(note.startswith("no GPU on this host, so no placement") for note in env.notes)

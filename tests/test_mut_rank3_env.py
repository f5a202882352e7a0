"""rank/environment.py by value (issue 41: the survivors of its mutation run; the
launch.py part is tests/test_mut_rank3.py).

IFF_RUNNING of this host's interfaces against the kernel's own flags (SIOCGIFFLAGS), the
``sh`` output sourced by a real shell; the rest on small built trees and pure
:func:`predict` calls: the netdevs' state and addresses under another root, the NIC
arguments, a port's state text, the IPoIB netdev of a port whose subnet prefix is not
fe80::, the entry limits, the bootstrap addresses, the IPv6 family rule, the variables
the user set, placement on one GPU and on a rank given, one link layer."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sysverbs.ground.errors import NotFoundError, UsageError, WrongTypeError
from sysverbs.rank import environment
from sysverbs.rank.environment import (
    Netdev,
    Nic,
    RankEnvironment,
    Variable,
    predict,
    rank_environment,
    read_nics,
)
from sysverbs.testing import HostBuilder
from tests.conftest import require
from tests.test_environment import LL, MLX5, V1, V2, gid_attrs, table

IFF_RUNNING, SIOCGIFFLAGS = 0x40, 0x8913  # <linux/if.h>, <linux/sockios.h>
GUID = "b859:9f03:00a2:0001"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """mlx5_0 (InfiniBand, IPoIB ib0, a subnet prefix with its last bit set), rxe0 on v0
    (up, running), rxe1 on v1 (up, dormant; its port 2 DOWN), rxe2 on v2 (down) whose
    ports are ARMED and ACTIVE_DEFER."""
    v4 = {0: (LL, V2), 1: ("::ffff:10.0.0.1", V2)}
    b = HostBuilder().mlx5(link_layer="InfiniBand", netdev="ib0")
    for i in range(3):
        attrs: dict[str, Any] = gid_attrs(v4, f"v{i}")
        if i == 1:  # a second port, DOWN
            attrs.update({"ports/2/state": "1: DOWN", "ports/2/link_layer": "Ethernet",
                          "ports/2/gids/0": "0000:0000:0000:0000:0000:0000:0000:0000"})
        if i == 2:  # neither port ACTIVE
            attrs.update({"ports/1/state": "3: ARMED", "ports/2/state": "5: ACTIVE_DEFER",
                          "ports/2/link_layer": "Ethernet",
                          "ports/2/gids/0": "0000:0000:0000:0000:0000:0000:0000:0000"})
        b.rxe(name=f"rxe{i}", netdev=f"v{i}", ib_attrs=attrs)
    host = b.materialize(tmp_path_factory.mktemp("env"))
    net = host.sysfs / "class" / "net"
    for name, oper in (("v0", "up"), ("v1", "dormant"), ("v2", "down")):
        (net / name / "operstate").write_text(oper + "\n")
    (net / "ib0" / "type").write_text("32\n")
    (net / "ib0" / "address").write_text(
        "00:00:10:49:fe:80:00:00:00:00:00:01:" + ":".join(
            GUID.replace(":", "")[i:i + 2] for i in range(0, 16, 2)) + "\n")
    ib = host.sysfs / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "gids" / "0"
    ib.write_text(f"fe80:0000:0000:0001:{GUID}\n")
    return {"sysfs_path": str(host.sysfs), "dev_dir": str(host.dev)}


def test_running_is_the_kernels_iff_running() -> None:
    """_net_state against SIOCGIFFLAGS on every interface of this host."""
    names = sorted(os.listdir("/sys/class/net"))
    if not names:
        require("no network interface", "the kernel's interfaces")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in names:
            req = struct.pack("16sH14x", name.encode(), 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
            assert environment._net_state(b"/sys", name) is bool(flags & IFF_RUNNING), name


def test_netdevs_under_another_root(tree: dict[str, str]) -> None:
    """Without addresses nothing is known of the netdevs (neither the live host's
    addresses nor the tree's state); with them, IFF_RUNNING from the tree's files."""
    alone = read_nics(["rxe0"], **tree)
    assert alone[0].netdevs == (Netdev("v0", None, None),)
    given = read_nics(["rxe0", "rxe1", "rxe2:1"], addresses={"v0": ["10.0.0.1"]}, **tree)
    assert [n.netdevs for n in given] == [
        (Netdev("v0", True, ("10.0.0.1",)),), (Netdev("v1", False, ()),),
        (Netdev("v2", False, ()),)]
    assert [n.state for n in given] == ["ACTIVE", "ACTIVE", "ARMED"]
    # no ACTIVE port: the first one, named; ACTIVE_DEFER (5) is not ACTIVE (4)
    assert [(n.port, n.state) for n in read_nics(["rxe2", ("rxe2", 2)], **tree)] == [
        (1, "ARMED"), (2, "ACTIVE_DEFER")]
    ib = read_nics(["mlx5_0"], **tree)[0]
    assert [d.name for d in ib.netdevs] == ["ib0"]  # by the GID's last 64 bits alone


def test_nic_arguments(tree: dict[str, str]) -> None:
    assert [(n.device, n.port, n.state) for n in read_nics(
        [("rxe0", None), ("rxe1",), ("rxe1", 2)], **tree)] == [
        ("rxe0", 1, "ACTIVE"), ("rxe1", 1, "ACTIVE"), ("rxe1", 2, "DOWN")]
    for bad in (5, b"rxe0", (), (7, 1)):
        with pytest.raises(WrongTypeError, match="a NIC is a name or a"):
            read_nics([bad], **tree)  # type: ignore[list-item]
    with pytest.raises(NotFoundError, match="no RDMA device 'rxe0:x' in "):
        read_nics(["rxe0:x"], **tree)
    with pytest.raises(NotFoundError, match="no RDMA device ':1' in "):
        read_nics([":1"], **tree)


def test_an_armed_port_is_a_warning(tree: dict[str, str]) -> None:
    env = rank_environment(["rxe2:1"], environ={}, **tree)
    assert env.warnings[0] == "rxe2:1 is ARMED, not ACTIVE: NCCL skips it"


def test_the_variables_the_user_set(tree: dict[str, str]) -> None:
    user = {"NCCL_IB_HCA": "=rxe0:1", "UCX_NET_DEVICES": "other"}
    plain = rank_environment(["rxe0"], environ=user, **tree)
    assert plain.exports()["NCCL_IB_HCA"] == "=rxe0:1"  # not kept unless asked
    assert plain.exports()["UCX_NET_DEVICES"] == "rxe0:1"
    kept = rank_environment(["rxe0"], environ=user, keep_set=True, **tree)
    why = {v.name: v for v in kept.variables}
    assert why["NCCL_IB_HCA"] == Variable("NCCL_IB_HCA", None, "already set to '=rxe0:1' in "
                                          "the environment: kept, as sysverbs run keeps it")
    assert why["UCX_NET_DEVICES"].value is None
    said = [n for n in kept.notes if " is already set to " in n]
    assert said == ["UCX_NET_DEVICES is already set to 'other': kept (sysverbs env would "
                    "write 'rxe0:1'; unset it to take that)"]


def test_no_nic_is_not_checked(tree: dict[str, str]) -> None:
    env = rank_environment([], environ={"NCCL_IB_HCA": "mlx5_9"}, **tree)
    assert env.warnings == () and env.nics == ()
    assert not any(n.startswith("NCCL_IB_HCA") for n in env.notes), env.notes


def test_one_link_layer_only_when_placement_chooses(tree: dict[str, str]) -> None:
    auto = rank_environment(environ={}, list_options={"providers": "builtin"}, **tree)
    assert sorted(n.device for n in auto.nics) == ["rxe0", "rxe1"]  # libibverbs' order
    assert any(n.startswith("Ethernet ports only (NCCL cannot mix") and "mlx5_0:1" in n
               for n in auto.notes), auto.notes
    one = [rank_environment(environ={}, local_rank=r, list_options={"providers": "builtin"},
                            **tree).nics for r in (0, 4)]
    assert len(one[0]) == 1 and one[1] == one[0]  # rank 4 of 2 ports: the first
    rr = "ACTIVE InfiniBand/Ethernet port of the usable devices, local rank 4 takes one of "
    assert any(rr + "them round-robin" in n for n in rank_environment(
        environ={}, local_rank=4, **tree).notes)
    assert not any("round-robin" in n for n in auto.notes), auto.notes
    named = rank_environment(["mlx5_0", "rxe0"], environ={}, **tree)
    assert [n.device for n in named.nics] == ["mlx5_0", "rxe0"]
    assert not any("ports only" in n for n in named.notes)


def test_entry_limits_notes_and_names() -> None:
    def nics(n: int) -> list[Nic]:
        return [Nic(f"m{i}", 1, "InfiniBand", "ACTIVE") for i in range(n)]

    assert predict(nics(32), {}).warnings == ()
    assert predict(nics(33), {}).warnings == ("33 NICs: NCCL reads only the first 32 "
                                              "entries of NCCL_IB_HCA",)
    assert predict([Nic("x" * 63, 1, "InfiniBand")], {}).warnings == ()
    assert predict([Nic("x" * 64, 1, "InfiniBand")], {}).warnings == (
        "a device name is longer than 63 characters: NCCL cuts it",)
    assert predict(nics(64), {}).warnings == ("64 NICs: NCCL reads only the first 32 "
                                              "entries of NCCL_IB_HCA",)
    assert predict(nics(65), {}).warnings[1] == ("65 NICs: UCX accepts at most 64 entries "
                                                 "in UCX_NET_DEVICES")
    odd = predict([Nic("a,b", 1, "InfiniBand", "ACTIVE", note="an SR-IOV VF"),
                   Nic("m0", 1, "InfiniBand", "DOWN"), Nic("m1", 1, "InfiniBand")], {})
    assert odd.notes == ("a,b:1: an SR-IOV VF",)
    assert odd.warnings == ("m0:1 is DOWN, not ACTIVE: NCCL skips it",
                            "'a,b' cannot be written in a device list (',' and ':' separate "
                            "entries and fields): left out")
    assert odd.exports()["NCCL_IB_HCA"] == "=m0:1,m1:1"


def test_bootstrap_addresses() -> None:
    def ifname(addresses: tuple[str, ...], family: str = "", *more: Netdev) -> Variable:
        env = {"NCCL_SOCKET_FAMILY": family} if family else {}
        netdevs = (Netdev("ib0", True, addresses), *more) if addresses else more
        nic = Nic("m0", 1, "InfiniBand", "ACTIVE", netdevs)
        return {v.name: v for v in predict([nic], env).variables}["NCCL_SOCKET_IFNAME"]

    assert ifname(("10.0.0.1",), "AF_INET").value == "=ib0"
    assert ifname(("10.0.0.1",), "AF_INET6").reason == (
        "no netdev of the chosen NICs carries an address NCCL can bootstrap over (ib0 has no "
        "usable address (10.0.0.1)); NCCL picks its own interface")
    assert ifname((), "", Netdev("ib1", True, ())).reason == (
        "no netdev of the chosen NICs carries an address NCCL can bootstrap over (ib1 has no "
        "usable address); NCCL picks its own interface")
    assert ifname(()).reason == "the chosen NICs have no netdev"
    many = ifname((), "", Netdev("a"), Netdev("b", False, ("10.0.0.2",)),
                  Netdev("c", True, ("fe80::1",)), Netdev("d", True, ("10.0.0.4",)))
    assert many.value == "=d"  # each netdev weighed, whatever the ones before
    up = Netdev("ib0", True, ("10.0.0.1",))
    both = predict([Nic("m0", 1, "InfiniBand", "ACTIVE", (up,)),
                    Nic("m1", 1, "InfiniBand", "ACTIVE", (up, Netdev("a,b", True, ("10.0.0.2",))))],
                   {})
    assert both.exports()["NCCL_SOCKET_IFNAME"] == "=ib0"  # once; no name with a comma
    assert many.reason.endswith(": b is not running; c has no usable address (fe80::1); d "
                                "(m0:1) has 10.0.0.4")
    assert ifname(("2001:db8::1%ib0",)).value == "=ib0"  # a zone index is no part of it
    bad = ifname(("not-an-address",))
    assert bad.value is None and "ib0 has no usable address (not-an-address)" in bad.reason


def test_the_ipv6_family_needs_an_ipv6_roce_v2_gid() -> None:
    """RoCE v1 wanted, only IPv6 v1 GIDs: NCCL_IB_ADDR_FAMILY is not set (the rule asks
    for a v2 GID of that family); a link-local only port warns."""
    v1 = Nic("m0", 1, "Ethernet", "ACTIVE", (), table([(0, LL, V1), (1, "2001:db8::1", V1)]))
    env = predict([v1], {"NCCL_IB_ROCE_VERSION_NUM": "1"})
    assert "NCCL_IB_ADDR_FAMILY" not in env.exports()
    v6 = Nic("m0", 1, "Ethernet", "ACTIVE", (), table([(0, LL, V2), (1, "2001:db8::1", V2)]))
    why = {v.name: v for v in predict([v6], {}).variables}
    assert why["NCCL_IB_ADDR_FAMILY"].reason.startswith(
        "mlx5_0:1 have no usable IPv4 RoCE v2 GID (NCCL's default family is AF_INET)")
    ll = predict([Nic("m0", 1, "Ethernet", "ACTIVE", (), table([(0, LL, V2)]))], {})
    assert len(ll.warnings) == 1 and ll.warnings[0].startswith(
        "on mlx5_0:1 NCCL would use GID index 0 (fe80::202:c9ff:fe00:1), a link-local GID")


def test_sh_and_json_output() -> None:
    sh = shutil.which("sh")
    if sh is None:
        require("sh is not installed", "a POSIX shell")
    values = {"A": "=x", "B": "x=", "C": "a b", "D": "it's", "E": "", "F": "plain:1,2"}
    env = RankEnvironment((), tuple(Variable(k, v, "why") for k, v in values.items()))
    text = env.render("sh")
    assert text.startswith("# sysverbs env for none\n")
    assert [ln for ln in text.splitlines() if ln.startswith("export")] == [
        "export A='=x'", "export B=x=", "export C='a b'", "export D='it'\\''s'",
        "export E=''", "export F=plain:1,2"]
    out = subprocess.run([sh, "-c", text + 'printf "%s\\0" "$A" "$B" "$C" "$D" "$E" "$F"'],
                         capture_output=True, check=True, env={})
    assert out.stdout.split(b"\0")[:-1] == [v.encode() for v in values.values()]
    assert env.render("json").startswith('{\n  "schema": "sysverbs.env/1",\n  "nics": []')
    assert json.loads(env.render("json"))["variables"][0] == {"name": "A", "value": "=x",
                                                              "reason": "why"}


def test_placement_on_one_gpu_and_a_rank_given(tmp_path: Path) -> None:
    from sysverbs.testing.builder_grace import dgx_station_gb300
    from tests.test_launch import two_node_host

    root = dgx_station_gb300().materialize(tmp_path / "gb").root
    one = rank_environment(environ={}, sysfs_path=str(root / "sys"),
                           proc_path=str(root / "proc"))
    assert one.exports()["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1" and one.gpu == 0
    assert any(n.startswith("placement: rank 0 (given) -> GPU0 ") for n in one.notes)
    ranked = rank_environment(environ={}, local_rank=0, sysfs_path=str(root / "sys"),
                              proc_path=str(root / "proc"))
    assert ranked.exports()["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"  # both: no round-robin
    _, h = two_node_host(tmp_path / "two")
    got = rank_environment(environ={}, local_rank=2, sysfs_path=str(h.sysfs))
    assert got.gpu == 2 and got.exports()["NCCL_IB_HCA"] == "=mlx5_0:1"
    with pytest.raises(UsageError, match="^this host has 3 GPUs and no local rank"):
        rank_environment(environ={}, sysfs_path=str(h.sysfs))


def test_the_gid_index_the_user_set() -> None:
    nic = Nic("m0", 1, "Ethernet", "ACTIVE", (), table(MLX5))
    for user, said in (("5", True), ("3", False)):
        why = {v.name: v for v in predict([nic], {"NCCL_IB_GID_INDEX": user}).variables}
        assert why["NCCL_IB_GID_INDEX"].value == "3"
        assert why["NCCL_IB_GID_INDEX"].reason.endswith(
            f"(replaces NCCL_IB_GID_INDEX={user} from the environment)") is said


def test_a_roce_port_without_gid_netdevs_takes_the_functions(tmp_path: Path) -> None:
    """No GID names a netdev yet: the PCI function's netdev (the topology's answer)."""
    host = HostBuilder().mlx5(link_layer="Ethernet", netdev="eth5").materialize(tmp_path)
    got = read_nics(["mlx5_0"], sysfs_path=str(host.sysfs))
    assert [d.name for d in got[0].netdevs] == ["eth5"]


def test_the_notes_of_another_root(tree: dict[str, str], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """NCCL's config file under conf_root, the addresses unknown, the check not run for
    want of device nodes, or for a failed read (its strerror)."""
    from sysverbs.rank import nccl

    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nccl.conf").write_text("NCCL_IB_TIMEOUT=20\n")
    roots = {"sysfs_path": tree["sysfs_path"]}
    env = rank_environment(["rxe0"], environ={}, conf_root=str(tmp_path), **roots)
    assert env.notes[:2] == (
        "NCCL_IB_TIMEOUT comes from NCCL's config file /etc/nccl.conf",
        "another sysfs root: the netdevs' addresses are unknown")
    assert env.notes[-1] == ("NCCL_IB_HCA not checked against NCCL's rules: libibverbs "
                             "lists no device under this root (no device has its node under "
                             "the dev dir)")
    known = rank_environment(["rxe0"], environ={}, addresses={}, **roots)
    assert "another sysfs root: the netdevs' addresses are unknown" not in known.notes

    def failed(**kw: Any) -> Any:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(nccl, "host_ports", failed)
    env = rank_environment(["rxe0"], environ={}, **roots)
    assert env.notes[-1].endswith("no device under this root (Input/output error)")


def test_two_gpus_and_no_rank(tmp_path: Path) -> None:
    from tests.test_launch import two_node_host

    _, h = two_node_host(tmp_path, gpus=(0, 1))
    with pytest.raises(UsageError) as e:
        rank_environment(environ={}, sysfs_path=str(h.sysfs))
    assert str(e.value).startswith("this host has 2 GPUs and no local rank (none of "
                                   "LOCAL_RANK, ")


LIVE = r"""
import json, sys
from sysverbs.rank.environment import read_nics
print(json.dumps([[d.name, d.running, d.addresses] for d in read_nics(["rxe0"])[0].netdevs]))
"""


def test_the_live_hosts_addresses(tmp_path: Path) -> None:
    """On the live host (a tree mounted on /sys in a mount namespace of its own, so that
    rxe0 is this host's), a netdev's addresses are the kernel's (rtnetlink), as ``ip``
    lists them."""
    for tool in ("unshare", "mount", "ip"):
        if shutil.which(tool) is None:
            require(f"{tool} not found", tool)
    if os.geteuid() != 0:
        require("needs root to mount a tree on /sys", "a live RDMA device")
    ip = subprocess.run(["ip", "-o", "addr", "show", "dev", "lo"], capture_output=True,
                        text=True, check=True).stdout.split()
    want = sorted(a.split("/")[0] for a, b in zip(ip[1:], ip) if b in ("inet", "inet6"))
    host = HostBuilder().rxe(name="rxe0", netdev="v0", ib_attrs={
        "parent": "lo", "ports/1/gid_attrs/ndevs/0": "lo"}).materialize(tmp_path)
    r = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$0" /sys && exec "$1" -c '
                        '"$2"', str(host.sysfs), sys.executable, LIVE], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if r.returncode != 0 and "mount" in r.stderr:
        require(f"cannot mount on /sys: {r.stderr.strip()}", "a live RDMA device")
    assert r.returncode == 0, r.stderr
    [[name, running, addresses]] = json.loads(r.stdout)
    assert name == "lo" and sorted(addresses) == want != []


def test_a_vlans_gid_names_its_netdev(tmp_path: Path) -> None:
    """A RoCE port's netdevs are its GIDs' (a VLAN's too), then its parent's."""
    attrs: dict[str, Any] = gid_attrs({0: (LL, V2), 1: ("::ffff:10.0.5.1", V2)}, "v0")
    attrs["ports/1/gid_attrs/ndevs/1"] = "v0.5"
    host = HostBuilder().rxe(name="rxe0", netdev="v0", ib_attrs=attrs).materialize(tmp_path)
    got = read_nics(["rxe0"], sysfs_path=str(host.sysfs))
    assert [d.name for d in got[0].netdevs] == ["v0", "v0.5"]


def test_the_live_hosts_nccl_conf(tree: dict[str, str], tmp_path: Path) -> None:
    """On the live host NCCL's config files are read ($NCCL_CONF_FILE here); under
    another root without conf_root, this host's are not that host's."""
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_IB_TIMEOUT=20\n")
    env = {"NCCL_CONF_FILE": str(conf)}
    said = f"NCCL_IB_TIMEOUT comes from NCCL's config file {conf}"
    assert said in rank_environment([], environ=env).notes
    assert said not in rank_environment(["rxe0"], environ=env, **tree).notes


def test_a_tree_is_listed_from_sysfs_whatever_the_kernel(
        tree: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel whose RDMA netlink lists rxe0 only (tests/netlink_fakes.py): under
    another root the devices and nccl check's ports are the tree's (source sysfs)."""
    from sysverbs.sources import netlink
    from tests.netlink_fakes import Dev, FakeKernel

    monkeypatch.setattr(netlink, "open_netlink", lambda: FakeKernel([Dev(0, "rxe0")]))
    auto = rank_environment(environ={}, list_options={"providers": "builtin"}, **tree)
    assert sorted(n.device for n in auto.nics) == ["rxe0", "rxe1"]
    assert rank_environment(["rxe1"], environ={}, **tree).warnings == ()

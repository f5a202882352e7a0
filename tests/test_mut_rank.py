"""rank/'s verdicts' edges (issue 41: the mutants of ``make mutation``): whynot.py's
device views, on a bundled fixture and small hand-made hosts.  Pure functions: no
subprocess.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from sysverbs.ground.errors import UsageError
from sysverbs.model import HostModel
from sysverbs.placement import Assignment, NicChoice
from sysverbs.rank.addrgid import RocePort, address_gid_findings, roce_ports
from sysverbs.rank.gdr import (
    GRACE_ROOT_PORTS,
    GdrFacts,
    GdrSupport,
    gdr_level,
    gdr_pairs,
    gdr_support,
)
from sysverbs.rank.hca import HcaEntry, parse_hca, socket_interface
from sysverbs.rank.predict import DeviceView, PortView
from sysverbs.rank.whynot import device_views
from sysverbs.testing.cache import fixture_tree

# ------------------------------------------------------------------ rank/whynot.py


def _diag(name: str, *errors: str, management: bool = False, provider: Optional[str] = "mlx5",
          usable: bool = True) -> Any:
    reasons = [SimpleNamespace(code="w", severity="warning")]
    reasons += [SimpleNamespace(code=e, severity="error") for e in errors]
    return SimpleNamespace(name=name, management=management, provider=provider, listed=True,
                           usable=usable, reasons=reasons)


def test_device_views_of_a_bluefield() -> None:
    """InfiniBand ports count one GID, RoCE ports their non-zero GIDs; a management
    device is left out; the first error is the device's."""
    host = HostModel(fixture_tree("bluefield3").host_root).placement
    views = device_views(host, [_diag("mlx5_5"), _diag("mlx5_6", "e1", "e2", usable=False),
                                _diag("mlx5_11", management=True),
                                _diag("mlx5_12", provider=None)])
    assert views == [
        DeviceView("mlx5_5", "mlx5", True, True, "CA", "",
                   (PortView("mlx5_5", 1, "ACTIVE", "InfiniBand", 1),)),
        DeviceView("mlx5_6", "mlx5", True, False, "CA", "e1",
                   (PortView("mlx5_6", 1, "ACTIVE", "Ethernet", 2, ("enp41s0f1np1",)),)),
        DeviceView("mlx5_12", "", True, True, "CA", "",
                   (PortView("mlx5_12", 1, "ACTIVE", "Ethernet", 2, ("enp170s0f1np1",)),))]


def test_a_device_dropped_for_a_warning_has_that_warning_as_its_error() -> None:
    """No error reason, yet not usable (libibverbs drops it for a warning, e.g.
    netns_exclusive): the view's error is that first reason's code; a usable device with
    the same warning has none."""
    host = HostModel(fixture_tree("bluefield3").host_root).placement
    dropped, kept = device_views(host, [_diag("mlx5_5", usable=False), _diag("mlx5_6")])
    assert (dropped.error, kept.error) == ("w", "")


def test_device_views_of_what_sysfs_lacks(tmp_path: Path) -> None:
    """A port without state or link layer, a RoCE port whose GID table cannot be read (0
    GIDs), a device the host does not have (no port), a node type text with colons."""
    d = tmp_path / "class" / "infiniband"
    (d / "x0").mkdir(parents=True)
    (d / "x0" / "node_type").write_text("1: a: b\n")
    ports = [SimpleNamespace(port=1, state=None, link_layer=None, netdevs=()),
             SimpleNamespace(port=2, state="DOWN", link_layer="Ethernet", netdevs=()),
             SimpleNamespace(port=3, state="ACTIVE", link_layer="InfiniBand", netdevs=())]
    nic = SimpleNamespace(name="x0", ports=ports)
    gone = SimpleNamespace(name="z0", ports=ports[1:2])  # no sysfs directory: no GID
    host = SimpleNamespace(sysfs_path=str(tmp_path), nics=[nic, gone],
                           nic={"x0": nic, "z0": gone}.get)
    views = device_views(host, [_diag("x0"), _diag("y0"), _diag("z0")])  # type: ignore[arg-type]
    assert views == [
        DeviceView("x0", "mlx5", True, True, "a: b", "",
                   (PortView("x0", 1, "", "", 1), PortView("x0", 2, "DOWN", "Ethernet", 0),
                    PortView("x0", 3, "ACTIVE", "InfiniBand", 1))),
        DeviceView("y0", "mlx5", True, True, "", "", ()),
        DeviceView("z0", "mlx5", True, True, "", "", (PortView("z0", 2, "DOWN", "Ethernet", 0),))]


# ------------------------------------------------------------------ rank/addrgid.py

_FIX = ("rdma_cm (and UCX's rdmacm, libfabric's verbs provider) cannot resolve these "
        "addresses to this device; NCCL still picks a GID by index. Give the RoCE netdev "
        "(or a VLAN/macvlan on it) the address the job uses, or run the job in the "
        "namespace that has it (hostNetwork, or a CNI that moves the RoCE netdev or VF in)")


def test_a_port_without_its_address_is_named() -> None:
    """Both netdevs' addresses, IPv4 as its ``::ffff:`` GID, IPv6 as is; loopback, a
    scoped link-local address and a text that is no address are not shown; a GID text
    that is no address is skipped."""
    port = RocePort("mlx5_3", 2, ("bond0", "bond0.7"), ("junk", "::ffff:10.0.0.9"))
    found = address_gid_findings([port], {
        "bond0": ("10.0.0.1", "::1", "fe80::1%bond0"), "bond0.7": ("2001:db8::5", "x"),
        "eth9": ("10.0.0.9",)})
    assert [f.as_dict() for f in found] == [{
        "code": "no_rdma_gid_for_address", "device": "mlx5_3", "port": 2,
        "addresses": ["10.0.0.1", "2001:db8::5"],
        "message": "mlx5_3 port 2: its netdev bond0, bond0.7 has 10.0.0.1, 2001:db8::5, and "
                   "no GID of the port carries any of them: " + _FIX}]
    assert address_gid_findings([port], {"bond0.7": ("10.0.0.9",)}) == []
    assert address_gid_findings([port._replace(gids=("::ffff:10.0.0.1",))],
                                {"bond0": ("10.0.0.1", "2001:db8::5")}) == []


def test_a_namespace_without_a_roce_netdev() -> None:
    """A pod: its addresses in interface order, the ports that have GIDs in name order;
    one port's GID carrying one address is enough; a port without GIDs is not named."""
    ports = [RocePort("mlx5_1", 1, ("ens2",), ("::ffff:10.1.0.1",)),
             RocePort("mlx5_0", 1, ("ens1",), ("2001:db8::1",)),
             RocePort("mlx5_9", 1, ("ens9",), ())]
    found = address_gid_findings(ports, {"net1": ("10.244.0.8",), "eth0": ("10.244.0.7",),
                                         "lo": ("127.0.0.1",)})
    assert [f.as_dict() for f in found] == [{
        "code": "no_rdma_gid_for_address", "device": None, "port": None,
        "addresses": ["10.244.0.7", "10.244.0.8"],
        "message": "no RoCE netdev is in this network namespace, and no GID of mlx5_0:1, "
                   "mlx5_1:1 carries its addresses (10.244.0.7, 10.244.0.8): " + _FIX}]
    assert address_gid_findings(ports, {"eth0": ("10.244.0.7", "2001:db8::1")}) == []
    assert address_gid_findings(ports, {"eth0": ("fe80::2",)}) == []
    assert address_gid_findings(ports[2:], {"eth0": ("10.244.0.7",)}) == []
    # a RoCE netdev here whose port has no GID: the namespace is still judged
    assert [f.port for f in address_gid_findings(ports, {"ens9": ("10.2.0.1",)})] == [None]


def test_a_namespace_address_with_its_scope() -> None:
    """An IPv6 address as rtnetlink may give it, with ``%scope``: the address counts."""
    port = RocePort("mlx5_0", 1, ("eth1",), ("2001:db8::5",))
    assert address_gid_findings([port], {"eth1": ("2001:db8::5%eth1",)}) == []
    found = address_gid_findings([port], {"eth1": ("2001:db8::6%eth1",)})
    assert [f.addresses for f in found] == [("2001:db8::6%eth1",)]


def test_every_port_of_the_namespace_is_judged() -> None:
    """The first port carries its address, the second does not: the second is named."""
    ports = [RocePort("mlx5_0", 1, ("eth0",), ("::ffff:10.0.0.1",)),
             RocePort("mlx5_1", 1, ("eth1",), ("::ffff:10.0.1.1",))]
    found = address_gid_findings(ports, {"eth0": ("10.0.0.1",), "eth1": ("10.0.1.2",)})
    assert [(f.device, f.addresses) for f in found] == [("mlx5_1", ("10.0.1.2",))]


def test_roce_ports_from_sysfs(tmp_path: Path) -> None:
    """Ethernet ports only, after an InfiniBand one; a device without its sysfs directory
    has an empty GID table; zero GIDs left out, the others as text."""
    gids = tmp_path / "class" / "infiniband" / "r0" / "ports" / "2" / "gids"
    gids.mkdir(parents=True)
    for i, text in enumerate(("fe80:0000:0000:0000:0000:0000:0000:0001",
                              "0000:0000:0000:0000:0000:0000:0000:0000",
                              "0000:0000:0000:0000:0000:ffff:0a00:0001")):
        (gids / str(i)).write_text(text + "\n")

    def port(n: int, layer: str) -> SimpleNamespace:
        return SimpleNamespace(port=n, link_layer=layer, netdevs=(f"eth{n}",))
    host = SimpleNamespace(sysfs_path=str(tmp_path), nics=[
        SimpleNamespace(name="gone", ports=[port(1, "Ethernet"), port(2, "Ethernet")]),
        SimpleNamespace(name="r0", ports=[port(1, "InfiniBand"), port(2, "Ethernet")])])
    assert roce_ports(host) == [  # type: ignore[arg-type]
        RocePort("gone", 1, ("eth1",), ()), RocePort("gone", 2, ("eth2",), ()),
        RocePort("r0", 2, ("eth2",), ("fe80::1", "::ffff:10.0.0.1"))]


# ------------------------------------------------------------------ rank/hca.py


def test_the_old_parsers_entries() -> None:
    """NCCL before 2.30.7 (the character loop): a name alone is any port (-1), rail and
    plane do not exist (-1); ``name:port`` reads the port up to the next comma."""
    f = parse_hca("mlx5_0:1,mlx5_1,mlx5_2:", nccl_version="2.21.5")
    assert f.entries == (HcaEntry("mlx5_0", 1, -1, -1, "mlx5_0:1"),
                         HcaEntry("mlx5_1", -1, -1, -1, "mlx5_1"),
                         HcaEntry("mlx5_2", 0, -1, -1, "mlx5_2:"))
    assert f.matches("mlx5_1", 2) and f.matches("mlx5_0") and not f.matches("mlx5_0", 2)


def test_a_device_without_a_port_matches_every_entry_port() -> None:
    f = parse_hca("mlx5_0:2")
    assert f.matches("mlx5_0") and f.match_index("mlx5_0") == 0
    assert not f.matches("mlx5_0", 1)


def test_the_parser_by_release_and_the_kept_value() -> None:
    """2.30.7 is the first release of the strtok parser (an empty port is -1, before it
    0); the value is kept as given, None as ""; rail and plane are int16_t."""
    assert parse_hca("mlx5_0:", nccl_version="2.30.7").entries[0].port == -1
    assert parse_hca("mlx5_0:", nccl_version="2.30.6").entries[0].port == 0
    assert parse_hca("mlx5_0").value == "mlx5_0" and parse_hca(None).value == ""
    e, f = parse_hca("mlx5_0:1:40000:70000,mlx5_1:1:70000:40000").entries
    assert (e.port, e.rail, e.plane) == (1, 40000 - 65536, 70000 - 65536)
    assert (f.rail, f.plane) == (70000 - 65536, 40000 - 65536)
    f = parse_hca("mlx5_0")
    with pytest.raises(AttributeError):  # frozen (a FrozenRecord)
        f.negate = True  # type: ignore[misc]
    assert f.match_index("mlx5_1") == -1 and f.match_index("mlx5_0") == 0


def test_a_name_cut_inside_a_character_is_compared_as_nccls_63_bytes() -> None:
    """``"é" * 40`` is cut at 63 bytes, inside the 32nd ``é``: a device matches when its
    name starts with (or, with ``=``, is) those 63 bytes, not the 31 whole ``é``."""
    long = "é" * 40
    cut_byte = "é" * 31 + "\udcc3"  # the 63 bytes NCCL keeps, as os.fsdecode gives them
    f = parse_hca(long)
    assert f.entries[0].prefix == "é" * 31
    assert f.matches("é" * 32) and f.matches(cut_byte) and not f.matches("é" * 31 + "x")
    assert not f.matches("\ud800")  # no C string: no name NCCL sees
    exact = parse_hca("=" + long)
    assert exact.matches(cut_byte) and not exact.matches("é" * 32)
    with_port = parse_hca(long + ":1")
    assert with_port.matches("é" * 32, 1) and not with_port.matches("é" * 31 + "x", 1)


def test_socket_interface_checks_every_name_and_ignores_ports() -> None:
    """ncclOsFindInterfaces matches with port -1: an entry's port never excludes; every
    interface name must be a C string."""
    assert socket_interface(["eth0"], "eth0:5") == "eth0"
    assert socket_interface(["eth0"], "eth0:5", nccl_version="2.21.5") == "eth0"
    with pytest.raises(UsageError):
        socket_interface(["eth0", "a\0b"], "eth0")


# ------------------------------------------------------------------ rank/gdr.py


def test_gdr_support_reasons() -> None:
    facts = GdrFacts(driver=True, modules_known=True, peermem=None, flavour="open",
                     kernel=(6, 8))
    assert gdr_support(facts, {}) == GdrSupport(
        "dmabuf", "no peer-memory module; DMA-BUF: kernel 6.8 and the open NVIDIA module "
                  "(CUDA's DMA_BUF_SUPPORTED; each NIC's driver must pass NCCL's trial "
                  "ibv_reg_dmabuf_mr: mlx5 does)")
    assert gdr_support(facts._replace(kernel=(4, 19)), {}) == GdrSupport(
        "none", "no peer-memory module (/sys/module/nvidia_peermem) and no DMA-BUF path "
                "(kernel 4.19 < 5.12 has no ibv_reg_dmabuf_mr)")
    assert gdr_support(facts._replace(kernel=None), {}).reason.endswith(
        "depends on the kernel release, which cannot be read")
    assert gdr_support(facts._replace(flavour=None), {}).reason.endswith(
        "depends on the module flavour, which cannot be read")


@pytest.mark.parametrize(("value", "level"), [
    ("99999999999999999999", "LOC"),  # out of range: NCCL's default, 0
    ("4", "SYS"), ("5", "SYS"), ("7", "SYS"), ("2x", "PXB"),
])
def test_gdr_level_old_numbers(value: str, level: str) -> None:
    assert gdr_level({"NCCL_NET_GDR_LEVEL": value}) == (level, f"NCCL_NET_GDR_LEVEL={value}")


def test_grace_root_ports_are_the_layouts() -> None:
    """The root ports under which a GPU has C2C are those the layout knows as Grace's and
    Vera's (placement/_layout.py, from rdma-core's rdma_topo)."""
    from sysverbs.placement._layout import GRACE_ROOT_PORTS as LAYOUT
    assert GRACE_ROOT_PORTS == frozenset(LAYOUT)


def _gpu(index: int, vendor: str, bridges: tuple[str, ...]) -> Any:
    return SimpleNamespace(index=index, address=f"0000:0{index}:00.0", vendor=vendor,
                           model=None, pci=SimpleNamespace(bridges=bridges, device=0))


def test_gdr_pairs_on_grace_and_elsewhere() -> None:
    """A GPU below a Grace root port (the last bridge) has C2C: its PHB NIC is P2C, within
    the default level; below any other port (or the Grace one not last, or none) it is
    PHB, beyond it.  Other GPUs and ranks without a GPU are passed over."""
    host = SimpleNamespace(pci={
        "rp": SimpleNamespace(vendor=0x10DE, device=0x22B8),
        "sw": SimpleNamespace(vendor=0x10DE, device=0x22B3),
        "x": SimpleNamespace(vendor=0x15B3, device=0x22B1)})
    nic = NicChoice("mlx5_0", 1, None, (), None, None, "PHB", "PHB", 2, "")
    ranks = [Assignment(None, None, (), "no GPU"),
             Assignment(_gpu(9, "amd", ("rp",)), None, (nic,), ""),
             *(Assignment(_gpu(i, "nvidia", b), None, (nic,), "")
               for i, b in enumerate((("sw", "rp"), ("rp", "sw"), (), ("x",))))]
    support = GdrSupport("peermem", "")  # no NIC driver to judge: DMA-BUF would be NCCL's trial
    pairs = gdr_pairs(host, ranks, support, {})  # type: ignore[arg-type]
    assert [(p.gpu, p.path, p.enabled) for p in pairs] == [
        (0, "P2C", True), (1, "PHB", False), (2, "PHB", False), (3, "PHB", False)]
    assert pairs[0].reason == ("path P2C (C2C GPU, NIC on its CPU) within the GDR level P2C "
                               "(NCCL_NET_GDR_LEVEL unset, NCCL_NET_GDR_C2C=1)")
    for state, enabled in (("none", False), ("n/a", None)):
        got = gdr_pairs(host, ranks, GdrSupport(state, "why"), {})  # type: ignore[arg-type]
        assert [(p.enabled, p.reason) for p in got] == [(enabled, "why")] * 4

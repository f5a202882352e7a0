"""sysverbs.devices.location: PCI function, NUMA and CPUs, SR-IOV, auxiliary devices,
netdevs per port and char devices, on the bundled fixtures, the DGX B200 udev
capture and broken trees."""

from __future__ import annotations

import doctest
import importlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sysverbs
import sysverbs.devices.location as location_module
from sysverbs import testing
from sysverbs.devices.location import _AUX_RDMA, device_location, parse_cpulist
from tests import listing_hosts
from tests.bad_input import make_broken
from tests.fuzz.profiles import fuzz_settings

DATA = Path(__file__).resolve().parent / "data"  # real machines' data: see PROVENANCE.md


def test_doctests() -> None:
    result = doctest.testmod(importlib.import_module('sysverbs.devices.location'))
    assert result.attempted and result.failed == 0, 'sysverbs.devices.location'


@pytest.fixture(scope="module")
def hosts() -> Iterator[listing_hosts.LazyHosts]:
    with listing_hosts.LazyHosts.temporary() as hosts:
        yield hosts


def topo(host: testing.FakeHost, name: str) -> location_module.DeviceLocation:
    return device_location(name, sysfs_path=host.sysfs, dev_dir=host.dev)


def test_pci_identity(hosts: listing_hosts.LazyHosts) -> None:
    t = topo(hosts["mlx5-cx6"], "mlx5_2")
    assert t.pci is not None
    assert (
        t.pci.address,
        t.pci.vendor,
        t.pci.device,
        t.pci.subsystem_vendor,
        t.pci.subsystem_device,
        t.pci.pci_class,
        t.pci.driver,
    ) == ("0000:81:00.0", 0x15B3, 0x1017, 0x15B3, 0x0001, 0x020700, "mlx5_core")
    assert t.numa_node == t.pci.numa_node == 1
    assert t.parent_subsystem == "pci" and t.parent == t.pci.path
    assert t.pci.raw["vendor"] == "0x15b3" and t.pci.local_cpus is None


def test_ipoib_by_port_guid_not_node_guid(hosts: listing_hosts.LazyHosts) -> None:
    t = topo(hosts["mlx4"], "mlx4_0")
    assert [(n.port, n.name, n.via) for n in t.netdevs] == [
        (1, "ib0", "port_guid"),
        (2, "ib1", "port_guid"),
    ]
    assert t.netdevs[0].address is not None and t.netdevs[0].address.endswith("3d:41")
    assert t.netdevs[0].ifindex is not None


def test_ipoib_node_guid_address_is_not_mapped(tmp_path: Path) -> None:
    """A netdev whose address carries the node GUID (not port 1's GUID) is not port 1's."""
    host = testing.materialize(testing.fixture_path("mlx4"), tmp_path)
    addr = host.sysfs / "devices/pci0000:00/0000:00:03.0/0000:04:00.0/net/ib0/address"
    addr.write_text("00:00:10:c9:fe:80:00:00:00:00:00:00:24:8a:07:03:00:e5:3d:40\n")
    assert topo(host, "mlx4_0").port_netdevs(1) == ()


def test_roce_netdevs(hosts: listing_hosts.LazyHosts) -> None:
    assert [(n.name, n.via) for n in topo(hosts["mlx5-cx6"], "mlx5_3").netdevs] == [
        ("p2p2", "gid_attrs")
    ]
    t = topo(hosts["mlx5-cx6"], "mlx5_3")
    assert t.netdevs[0].operstate == "up" and t.netdevs[0].ifindex == 6
    # cxgb4 (iWARP, two ports, no GID netdevs): the PCI function's netdevs by dev_port
    assert [(n.port, n.name, n.via) for n in topo(hosts["cxgb4"], "cxgb4_0").netdevs] == [
        (1, "enp129s0f4", "device/net"),
        (2, "enp129s0f4d1", "device/net"),
    ]


def test_rxe_parent_netdev(tmp_path: Path) -> None:
    host = testing.materialize(testing.fixture_path("rxe"), tmp_path)
    t = topo(host, "rxe1")
    assert t.parent is None and t.pci is None and t.auxiliary is None
    assert [(n.name, n.via) for n in t.netdevs] == [("v0", "gid_attrs")]
    # without GIDs (netdev down), the parent attribute still names it
    for f in (host.sysfs / "class/infiniband/rxe1/ports/1/gids").iterdir():
        f.write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")
    assert [(n.name, n.via) for n in topo(host, "rxe1").netdevs] == [("v0", "parent")]


def test_sriov(hosts: listing_hosts.LazyHosts) -> None:
    h = hosts["mlx5-sriov"]
    pf = topo(h, "mlx5_0")
    assert pf.pci is not None and not pf.pci.is_vf
    assert (pf.pci.sriov_numvfs, pf.pci.sriov_totalvfs, len(pf.pci.virtfns)) == (20, 20, 20)
    assert pf.pci.virtfns[:3] == ("0000:5e:00.2", "0000:5e:00.3", "0000:5e:00.4")
    assert pf.pci.virtfns[10] == "0000:5e:01.4"  # virtfn10 sorts after virtfn9
    assert len(pf.vf_rdma_devices) == 20 and pf.pf_rdma_devices == ()
    vf = topo(h, "mlx5_10")
    assert vf.pci is not None and vf.pci.is_vf and vf.pci.physfn == "0000:5e:00.0"
    assert vf.pf_rdma_devices == ("mlx5_0",)
    assert vf.pci.address in pf.pci.virtfns
    assert pf.pci.virtfns.index(vf.pci.address) == 8  # 0000:5e:01.2 is VF 8 (mlx5_2 is VF 0)


def test_auxiliary_devices(hosts: listing_hosts.LazyHosts) -> None:
    t = topo(hosts["mlx5-cx6"], "mlx5_0")
    assert t.auxiliary is not None
    assert (t.auxiliary.name, t.auxiliary.driver) == ("mlx5_core.rdma.0", "mlx5_ib.rdma")
    irdma = topo(hosts["irdma"], "rocep31s0f0").auxiliary
    assert irdma is not None and irdma.name == "ice.roce.0"
    bnxt = topo(hosts["bnxt_re"], "bnxt_re0").auxiliary
    assert bnxt is not None and bnxt.name == "bnxt_en.rdma.0"
    assert topo(hosts["efa"], "rdmap79s0").auxiliary is None  # EFA binds the PCI device


def test_sub_function(hosts: listing_hosts.LazyHosts) -> None:
    t = topo(hosts["mlx5-sf"], "mlx5_2")
    assert t.parent_subsystem == "auxiliary"
    assert t.auxiliary is not None and (t.auxiliary.name, t.auxiliary.driver) == (
        "mlx5_core.sf.2",
        "mlx5_core.sf",
    )
    assert t.pci is not None and t.pci.address == "0000:03:00.0"  # the PF that hosts it
    assert [(n.name, n.via) for n in t.netdevs] == [("enp3s0f0s2", "gid_attrs")]
    assert t.netdevs[0].address == "02:ac:5d:1e:00:01"


def test_char_devices(hosts: listing_hosts.LazyHosts) -> None:
    t = topo(hosts["mlx4"], "mlx4_0")
    got = [
        (c.kind, c.name, c.port, c.dev, c.abi_version, c.node_exists, c.node_is_chardev, c.node_ok)
        for c in t.char_devices
    ]
    assert got == [
        ("uverbs", "uverbs0", None, (231, 192), 4, True, False, False),
        ("issm", "issm0", 1, (231, 64), None, True, False, False),
        ("issm", "issm1", 2, (231, 65), None, True, False, False),
        ("umad", "umad0", 1, (231, 0), None, True, False, False),
        ("umad", "umad1", 2, (231, 1), None, True, False, False),
    ]
    assert t.char_devices[0].node == str(hosts["mlx4"].dev / "uverbs0")


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_char_device_nodes_and_rdma_cm(tmp_path: Path) -> None:
    host = testing.materialize(testing.fixture_path("rxe"), tmp_path)
    for name, (major, minor) in (
        ("uverbs0", (231, 192)),
        ("uverbs1", (231, 1)),
        ("rdma_cm", (10, 58)),
    ):
        node = host.dev / name
        if node.exists():
            node.unlink()
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    misc = host.sysfs / "devices/virtual/misc/rdma_cm"
    misc.mkdir(parents=True)
    (misc / "dev").write_text("10:58\n")
    (misc / "abi_version").write_text("4\n")
    (host.sysfs / "class/misc").mkdir()
    os.symlink("../../devices/virtual/misc/rdma_cm", host.sysfs / "class/misc/rdma_cm")
    c0 = {c.name: c for c in topo(host, "rxe0").char_devices}
    assert c0["uverbs0"].node_ok and c0["uverbs0"].node_is_chardev
    assert (
        c0["rdma_cm"].node_ok and c0["rdma_cm"].abi_version == 4 and c0["rdma_cm"].dev == (10, 58)
    )
    c1 = {c.name: c for c in topo(host, "rxe1").char_devices}
    assert c1["uverbs1"].node_is_chardev and not c1["uverbs1"].node_ok  # 231:1, not 231:193


def test_numa_and_local_cpus(tmp_path: Path) -> None:
    host = testing.materialize(testing.fixture_path("mlx5-cx6"), tmp_path)
    pci = host.sysfs / "devices/pci0000:00/0000:00:02.0/0000:04:00.0"
    (pci / "local_cpulist").write_text("0-3,8,10-11\n")
    (pci / "local_cpus").write_text("00000000,00000f0f\n")
    t = topo(host, "mlx5_0")
    assert t.pci is not None and t.pci.local_cpus == frozenset({0, 1, 2, 3, 8, 10, 11})
    (pci / "local_cpulist").unlink()  # older kernels: only the mask
    t = topo(host, "mlx5_0")
    assert t.pci is not None and t.pci.local_cpus == frozenset({0, 1, 2, 3, 8, 9, 10, 11})
    (pci / "local_cpus").write_text("zz\n")
    (pci / "numa_node").write_text("-1\n")
    t = topo(host, "mlx5_0")
    assert t.pci is not None and t.pci.local_cpus is None and t.pci.numa_node == -1


@pytest.mark.parametrize(
    "text, expect",
    [
        ("0", {0}),
        ("0-0", {0}),
        ("0-2,4", {0, 1, 2, 4}),
        ("", set()),
        ("1-", None),
        ("a", None),
        ("2-1", None),
        ("0,,1", None),
        ("0 1", None),
    ],
)
def test_parse_cpulist(text: str, expect: object) -> None:
    got = parse_cpulist(text)
    assert (got is None and expect is None) or got == frozenset(expect)  # type: ignore


def test_device_object(tmp_path: Path) -> None:
    host = testing.materialize(testing.fixture_path("mlx5-cx6"), tmp_path)
    devs = sysverbs.get_device_list(
        sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin", rdma_core="44"
    )
    try:
        for dev in devs:
            t = device_location(dev)
            assert t.name == dev.name
            assert [c.name for c in t.char_devices if c.kind == "uverbs"] == [dev.dev_name]
            assert t.char_devices[0].node == os.path.join(
                dev.dev_name and str(host.dev), dev.dev_name
            )
    finally:
        sysverbs.free_device_list(devs)


def test_broken_trees(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    ib = root / "class/infiniband"
    ib.mkdir(parents=True)
    # a device whose device link dangles, one that loops, one whose parent is a file
    for name, target in (("d0", "../../nowhere"), ("d1", "device"), ("d2", "../file")):
        (ib / name / "ports/1").mkdir(parents=True)
        os.symlink(target, ib / name / "device")
    (ib / "file").write_text("x\n")
    (root / "class/infiniband_verbs").mkdir()
    (root / "class/infiniband_verbs/uverbs0").mkdir()
    (root / "class/infiniband_verbs/uverbs0/ibdev").write_text("d0\n")
    (root / "class/infiniband_verbs/uverbs0/dev").write_text("junk\n")
    os.symlink("loop", root / "class/infiniband_verbs/loop")
    (root / "class/infiniband_mad").mkdir()
    os.mkfifo(root / "class/infiniband_mad/umad0")
    for name in ("d0", "d1", "d2", "absent"):
        t = device_location(name, sysfs_path=root, dev_dir=tmp_path / "dev")
        assert t.pci is None and t.netdevs == () and t.auxiliary is None
    t0 = device_location("d0", sysfs_path=root, dev_dir=tmp_path / "dev")
    assert [(c.name, c.dev, c.node_exists) for c in t0.char_devices] == [("uverbs0", None, False)]


def test_aux_pattern_on_dgx_b200_capture() -> None:
    """Every auxiliary device of the DGX B200 that an RDMA driver binds (mlx5_ib.rdma,
    irdma) has a name the pattern takes; the Ethernet ones (mlx5_core.eth) do not."""
    path = DATA / "udev-dgx-b200/rdma-records-only.txt"
    rdma, other = 0, 0
    for record in path.read_text().split("\n\n"):
        m = re.search(r"^P: .*/([^/\n]+)$", record, re.M)
        if not m or "E: SUBSYSTEM=auxiliary" not in record:
            continue
        driver = re.search(r"^E: DRIVER=(\S+)$", record, re.M)
        if driver and driver.group(1) in ("mlx5_ib.rdma", "irdma"):
            assert re.fullmatch(_AUX_RDMA, m.group(1)), m.group(1)
            rdma += 1
        else:
            assert not re.fullmatch(_AUX_RDMA, m.group(1)), m.group(1)
            other += 1
    assert rdma == 18 and other >= 1


_LINKS = [
    "device",
    "device/subsystem",
    "device/physfn",
    "device/virtfn0",
    "device/driver",
    "device/net/eth0",
    "device/net/eth0/type",
    "device/net/eth0/address",
    "device/numa_node",
    "device/local_cpulist",
    "device/local_cpus",
    "ports/1/gid_attrs/ndevs/0",
    "ports/1/link_layer",
    "ports/1/gids/0",
    "parent",
]


@pytest.mark.timeout(60)  # FIFOs in the tree: a read of one would block, fail fast
@fuzz_settings(ci=40, deep=400)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_LINKS),
            st.sampled_from(["file", "dir", "loop", "dangling", "up", "fifo"]),
            st.binary(max_size=30),
        ),
        max_size=10,
    )
)
def test_broken_trees_never_raise(entries: list[tuple[str, str, bytes]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sys"
        pci = root / "devices/pci0000:00/0000:00:01.0"
        ib = pci / "infiniband/dev0"
        (ib / "ports/1").mkdir(parents=True)
        (root / "class/infiniband").mkdir(parents=True)
        os.symlink(
            "../../devices/pci0000:00/0000:00:01.0/infiniband/dev0", root / "class/infiniband/dev0"
        )
        for rel, kind, data in entries:
            path = ib / rel
            try:
                if os.path.lexists(path):
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError:
                continue  # a parent is a file, a link loop...
            make_broken(path, kind, data)
        t = device_location("dev0", sysfs_path=root, dev_dir=Path(tmp) / "dev")
        assert t.name == "dev0"
        hash(t.pci) if t.pci is not None else None

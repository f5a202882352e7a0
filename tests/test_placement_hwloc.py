"""The placement model against hwloc (Debian's ``hwloc``, ``lstopo-no-graphics
--whole-io --of xml`` with ``HWLOC_FSROOT``), on every GPU fixture and on generated
PCI trees: for every PCI function hwloc reports, the chain of bridges up to the host
bridge, the host bridge, the local CPUs and the NUMA node must be hwloc's; the GPUs
and RDMA devices must be the ones hwloc finds, at the same functions; and every
GPU/NIC pair's class must be the class nvidia-smi's legend gives on hwloc's tree
(``tests/oracle/hwloc.py``, written without the library).

The oracle's classification is itself checked against cells of real published
``nvidia-smi topo -m`` matrices of the same machine types (DGX A100, HGX B200).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import given

from sysverbs import testing
from sysverbs.testing import umockdev
from tests.conftest import fast_tmpdir, require
from tests.fuzz.pci_trees import TreeSpec, pci_trees, render
from tests.fuzz.profiles import fuzz_settings
from tests.oracle import hwloc

GPU_FIXTURES = [n for n in testing.fixture_names() if n.startswith("gpu-")]


@pytest.fixture(scope="session")
def hwloc_ready() -> None:
    require(hwloc.unavailable_reason(), "hwloc (lstopo-no-graphics)")


@pytest.fixture(scope="module")
def hosts(hwloc_ready: None
          ) -> Iterator[dict[str, tuple[testing.FakeHost, hwloc.HwlocTopology]]]:
    with fast_tmpdir("sv-hwloc-") as base:
        out = {}
        for name in GPU_FIXTURES:
            host = testing.materialize(testing.fixture_path(name), base / name)
            out[name] = (host, hwloc.topology(host.root))
        yield out


def _pci_records(rec: umockdev.Recording) -> dict[str, umockdev.Record]:
    return {r.name: r for r in rec if r.subsystem == "pci"}


def _wide_domain(bdf: str) -> bool:
    return len(bdf.split(":")[0]) > 4


# ---------------------------------------------------------------- the fixtures vs hwloc


def test_gpu_fixtures_exist() -> None:
    assert set(GPU_FIXTURES) >= {"gpu-dgx-a100", "gpu-dgx-b200", "gpu-hgx-h100",
                                 "gpu-mi300x", "gpu-pcie-2socket", "gpu-cloud-vm",
                                 "gpu-sriov-sf"}


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_hwloc_reads_the_fixture(name: str, hosts: Any) -> None:
    """hwloc sees every PCI function of the fixture (but bridges with nothing below
    them, whose bus numbers are unassigned, and devices in a domain above 0xffff,
    which Debian's build ignores, saying so), every NUMA node with its CPUs, and
    every RDMA device."""
    host, topo = hosts[name]
    rec = umockdev.load(testing.fixture_path(name))
    pci = _pci_records(rec)
    empty = {n for n, r in pci.items()
             if r.value("secondary_bus_number") == b"0\n"}
    wide = {n for n in pci if _wide_domain(n)}
    assert set(topo.devices) == set(pci) - empty - wide
    if wide:
        assert "non-16bit domain" in topo.stderr
    nodes = {int(r.name[4:]): r.value("cpulist") for r in rec if r.subsystem == "node"}
    # hwloc 2.9 hides a GPU's memory node (tests/oracle/hwloc.py: gpu_memory)
    assert set(topo.numa_nodes) == set(nodes) - set(topo.gpu_memory)
    for n, cpulist in nodes.items():
        if n in topo.gpu_memory:
            continue
        assert cpulist is not None
        cpus = hwloc.parse_cpulist(cpulist.decode())
        # a CPU-less node (Grace's GPU memory) has the CPUs of what hwloc hangs it below
        assert cpus == topo.numa_nodes[n] or not cpus and n in topo.cpuless
    ib = {r.name for r in rec if r.subsystem == "infiniband"}
    assert set(topo.rdma) == ib


# Cells of real published matrices, checked on the oracle's classification of the
# fixture built from the same machine type (see tools/make_fixtures.py PROVENANCE).
REAL_CELLS = {
    # oyanghd/gpu-compress-decompress docs/project_description_EN.md (DGX A100):
    # GPU0 07:00.0, GPU2 47:00.0, GPU7 bd:00.0; NIC0 0c, NIC1 12, NIC2 4b, NIC8/9 e1.
    "gpu-dgx-a100": [
        ("0000:07:00.0", "0000:0c:00.0", "PXB"), ("0000:07:00.0", "0000:12:00.0", "PXB"),
        ("0000:07:00.0", "0000:4b:00.0", "SYS"), ("0000:47:00.0", "0000:4b:00.0", "PXB"),
        ("0000:bd:00.0", "0000:cc:00.0", "PXB"), ("0000:0c:00.0", "0000:12:00.0", "PXB"),
        ("0000:e1:00.0", "0000:e1:00.1", "PIX"), ("0000:07:00.0", "0000:e1:00.0", "SYS"),
    ],
    # NVIDIA/nccl-tests#333 (HGX B200, 16 mlx5): GPU0-NIC4 PXB, NIC0..3 PIX among
    # themselves (the quad-function card), GPU0-NIC0 NODE, NIC5-NIC6 PIX (a BF3's two
    # functions), GPU0-NIC10 SYS; here GPU0 1b:00.0, mlx5_0..3 05:00.x, mlx5_4
    # 18:00.0, mlx5_5/6 29:00.0/.1, mlx5_10 9a:00.0.
    "gpu-dgx-b200": [
        ("0000:1b:00.0", "0000:18:00.0", "PXB"), ("0000:05:00.0", "0000:05:00.3", "PIX"),
        ("0000:1b:00.0", "0000:05:00.0", "NODE"), ("0000:29:00.0", "0000:29:00.1", "PIX"),
        ("0000:1b:00.0", "0000:9a:00.0", "SYS"), ("0000:9d:00.0", "0000:9a:00.0", "PXB"),
    ],
    # sgl-project/sglang#30401 (HGX H100): GPUi-NICi PIX, NODE on a socket, SYS across.
    "gpu-hgx-h100": [
        ("0000:19:00.0", "0000:1a:00.0", "PIX"), ("0000:19:00.0", "0000:3a:00.0", "NODE"),
        ("0000:19:00.0", "0000:99:00.0", "SYS"),
    ],
    # luigifcruz/stelline (ESC8000A-E12): GPU0-NIC0 NODE, NIC0-NIC1 PIX, GPU2-NIC0 SYS.
    "gpu-pcie-2socket": [
        ("0000:01:00.0", "0000:21:00.0", "NODE"), ("0000:21:00.0", "0000:21:00.1", "PIX"),
        ("0000:c1:00.0", "0000:21:00.0", "SYS"), ("0000:01:00.0", "0000:41:00.0", "NODE"),
    ],
    # sgl-project/sglang#24413 (KVM guest): GPU0-NIC0 PHB.
    "gpu-cloud-vm": [("0000:05:00.0", "0000:0d:00.0", "PHB")],
}


@pytest.mark.parametrize("name", sorted(REAL_CELLS))
def test_oracle_classes_match_real_matrices(name: str, hosts: Any) -> None:
    _, topo = hosts[name]
    got = [(a, b, hwloc.smi_class(topo, a, b)) for a, b, _ in REAL_CELLS[name]]
    assert got == REAL_CELLS[name]


# ------------------------------------------------------------------ the model vs hwloc


def _placement() -> Any:
    return pytest.importorskip("sysverbs.placement", reason="the placement library")


def _endpoints(topo: hwloc.HwlocTopology) -> list[str]:
    """GPUs (NVIDIA 3D/VGA, AMD processing accelerators) and RDMA functions, by hwloc."""
    gpus = [b for b, d in topo.devices.items()
            if (d.vendor == 0x10DE and d.pci_class in (0x0300, 0x0302))
            or (d.vendor == 0x1002 and d.pci_class >> 8 == 0x12)]
    return sorted(set(gpus) | set(topo.rdma.values()))


def compare(host: Any, topo: hwloc.HwlocTopology) -> None:
    """Everything the model and hwloc both say must agree.  A CPU-less NUMA node (a
    Grace GPU's memory and its reserved nodes) has no CPUs in the model and those of
    the object it hangs below in hwloc; hwloc hangs a GPU's memory node below the GPU
    (its driver's ``numa_status``): the model's memory node of that GPU.  Across PCI
    domains on a host of several CPU nodes nvidia-smi's class is not the NUMA rule the
    oracle knows (tests/test_grace_matrix.py holds those cells to the real outputs)."""
    assert {n: c for n, c in host.numa_nodes.items() if c} == {
        n: c for n, c in topo.numa_nodes.items() if n not in topo.cpuless}
    assert {n for n, c in host.numa_nodes.items() if not c} == topo.cpuless
    assert set(host.numa_nodes) == set(topo.numa_nodes) | set(topo.gpu_memory)
    memory = {_placement().gpu_memory_node(host, g): g.address for g in host.gpus}
    assert {n: b for n, b in memory.items() if n is not None} == topo.gpu_memory
    for busid, dev in topo.devices.items():
        mine = host.pci[busid]
        assert mine.bridges == dev.bridges, busid
        assert mine.host_bridge == dev.host_bridge, busid
        assert mine.local_cpus == dev.cpuset, busid
        # Both ways.  hwloc says a NUMA node when it hangs the device below an object
        # other than the Machine with one node: the model must say that node.  The
        # model says None (numa_node -1): hwloc must know no locality either, and hang
        # the device below the Machine (whose nodeset, on a one-node host, is {0}).
        if not dev.at_root and len(dev.nodeset) == 1:
            assert mine.numa_node == hwloc.numa_of(topo, busid), busid
        if mine.numa_node is None:
            assert dev.at_root, (busid, dev.nodeset)
        else:
            assert dev.nodeset - topo.cpuless == {mine.numa_node}, busid
    for busid, mine in host.pci.items():  # what hwloc cannot see: a wide (VMD) domain
        if busid not in topo.devices and not mine.is_bridge:
            assert _wide_domain(busid) and mine.vmd is not None, busid
    gpus = [b for b in _endpoints(topo) if b not in topo.rdma.values()]
    assert sorted(g.address for g in host.gpus) == gpus
    placed = {n.name: n.address for n in host.nics if n.address is not None}
    assert {k: v for k, v in placed.items() if not _wide_domain(v)} == topo.rdma
    ends = _endpoints(topo)
    sockets = len(set(topo.numa_nodes) - topo.cpuless)
    for a, b in itertools.combinations_with_replacement(ends, 2):
        if sockets > 1 and a.split(":")[0] != b.split(":")[0]:
            continue
        assert host.smi_class(a, b) == hwloc.smi_class(topo, a, b), (a, b)


def compare_numa_affinity(host: Any, topo: hwloc.HwlocTopology) -> None:
    """``Topology.numa_affinity`` (nvidia-smi's NUMA Affinity column) of every GPU and NIC
    is the one node of the object hwloc hangs it below, and None where that object
    spans several nodes (the Machine of a multi-node host)."""
    for busid in _endpoints(topo):
        dev = topo.devices[busid]
        node, source = host.numa_affinity(busid)
        if len(dev.nodeset - topo.cpuless) == 1:
            assert {node} == dev.nodeset - topo.cpuless, (busid, dev.nodeset, source)
        else:
            assert (node, source) == (None, "unknown"), (busid, dev.nodeset)


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_model_matches_hwloc(name: str, hosts: Any) -> None:
    placement = _placement()
    host_dir, topo = hosts[name]
    host = placement.read_host(host_dir.sysfs, proc_path=host_dir.proc, dev_dir=host_dir.dev)
    compare(host, topo)
    compare_numa_affinity(host, topo)
    # the driver's /proc file was read under the proc root
    nvidia = [g for g in host.gpus if g.vendor == "nvidia"]
    assert all(g.uuid and g.uuid.startswith("GPU-") for g in nvidia)
    assert sorted(g.minor for g in nvidia) == list(range(len(nvidia)))


@pytest.fixture
def scratch(hwloc_ready: None) -> Iterator[Path]:
    with fast_tmpdir("sv-hwloc-") as path:
        yield path


@fuzz_settings(ci=30, deep=300)
@given(spec=pci_trees())
def test_generated_trees_match_hwloc(spec: TreeSpec) -> None:
    require(hwloc.unavailable_reason(), "hwloc (lstopo-no-graphics)")
    placement = _placement()
    with fast_tmpdir("sv-hwloc-") as root:
        fake = render(spec).materialize(root)
        topo = hwloc.topology(fake.root)
        host = placement.read_host(fake.sysfs, proc_path=fake.root / "proc", dev_dir=fake.dev)
        compare(host, topo)


def test_generated_tree_layout(hwloc_ready: None, scratch: Path) -> None:
    """The strategy's rendering, read by hwloc: a two-level switch tree gives PIX on a
    switch, PXB across its levels, PHB across root ports, NODE/SYS across host bridges."""
    from tests.fuzz.pci_trees import Leaf, Switch

    spec = TreeSpec(2, 1, 1, (
        (0, (Switch((Leaf("gpu"), Leaf("nic"), Switch((Leaf("gpu"),)))), Leaf("nic"))),
        (0, (Leaf("gpu"),)),
        (1, (Leaf("nic"),)),
    ))
    fake = render(spec).materialize(scratch)
    topo = hwloc.topology(fake.root)
    gpu_a, nic_a, gpu_b = "0000:03:00.0", "0000:04:00.0", "0000:07:00.0"
    nic_rp, gpu_hb2, nic_hb3 = "0000:08:00.0", "0000:0a:00.0", "0000:0c:00.0"
    assert set(topo.rdma.values()) == {nic_a, nic_rp, nic_hb3}
    cells: dict[tuple[str, str], Optional[str]] = {
        (gpu_a, nic_a): "PIX", (gpu_b, nic_a): "PXB", (gpu_a, nic_rp): "PHB",
        (gpu_hb2, nic_a): "NODE", (nic_hb3, gpu_a): "SYS", (gpu_a, gpu_a): "X",
    }
    assert {k: hwloc.smi_class(topo, *k) for k in cells} == cells


@pytest.mark.parametrize("name", testing.fixture_names())
def test_every_fixture_rdma_placement_matches_hwloc(name: str, hosts: Any, ftmp: Path) -> None:
    """On every bundled fixture (most have no CPU topology and no bridges: hwloc then
    reads the PCI functions and RDMA devices only), the PCI functions are hwloc's and
    every RDMA device hwloc places sits at the same PCI function in the model; the
    ones hwloc does not place are software devices or unplaced."""
    placement = _placement()
    if name in hosts:  # a GPU fixture: the module's tree and hwloc's reading of it
        fake, topo = hosts[name]
    else:
        fake = testing.materialize(testing.fixture_path(name), ftmp)
        topo = hwloc.topology(fake.root)
    host = placement.read_host(fake.sysfs, proc_path=fake.proc, dev_dir=fake.dev)
    listed = {b for b, d in host.pci.items() if d.listed and not d.is_bridge
              and not _wide_domain(b)}
    assert {b for b, d in topo.devices.items() if not d.is_bridge} == listed
    placed = {n.name: n for n in host.nics}
    assert {k: placed[k].address for k in topo.rdma} == topo.rdma
    assert all(n.kind in ("soft", "unplaced") or _wide_domain(n.address or "")
               for n in host.nics if n.name not in topo.rdma)


def test_unknown_numa_across_host_bridges_is_undecided(hwloc_ready: None,
                                                       scratch: Path) -> None:
    """Two GPUs on different host bridges with ``numa_node`` -1 on a two-node host:
    their ``local_cpus`` are all CPUs (the kernel's answer for an unknown node), hwloc
    hangs both below the Machine, so which NUMA node each is on, and NODE vs SYS, is
    not known (found by the generated-tree test, deep profile)."""
    from tests.fuzz.pci_trees import Leaf

    placement = _placement()
    spec = TreeSpec(2, 1, 1, ((-1, (Leaf("gpu"),)), (0, (Leaf("gpu"),)),
                              (-1, (Leaf("gpu"),))))
    fake = render(spec).materialize(scratch)
    topo = hwloc.topology(fake.root)
    assert topo.devices["0000:01:00.0"].at_root and topo.devices["0000:05:00.0"].at_root
    assert hwloc.smi_class(topo, "0000:01:00.0", "0000:05:00.0") is None
    host = placement.read_host(fake.sysfs, proc_path=fake.proc, dev_dir=fake.dev)
    compare(host, topo)
    compare_numa_affinity(host, topo)
    assert host.numa_affinity("0000:01:00.0") == (None, "unknown")


@pytest.mark.parametrize("name", ["gpu-pcie-2socket", "gpu-hgx-h100", "gpu-dgx-b200",
                                  "gpu-dgx-a100", "gpu-cloud-vm"])
def test_numa_affinity_without_numa_node_is_hwlocs(hwloc_ready: None, scratch: Path,
                                                   name: str) -> None:
    """Every ``numa_node`` of a fixture removed (as on hosts whose firmware gives PCI
    devices no proximity domain): hwloc places each GPU and NIC by its local CPUs, and
    so does the NUMA Affinity: the same node, or none where hwloc hangs the device
    below a Machine of several nodes; on a host of one node, that node."""
    placement = _placement()
    fake = testing.materialize(testing.fixture_path(name), scratch / name)
    for f in (fake.sysfs / "devices").rglob("numa_node"):
        f.unlink()
    topo = hwloc.topology(fake.root)
    host = placement.read_host(fake.sysfs, proc_path=fake.proc, dev_dir=fake.dev)
    compare_numa_affinity(host, topo)
    assert {host.numa_affinity(g)[1] for g in host.gpus} == {"local_cpulist"}


def test_numa_affinity_on_one_node_with_numa_node_minus_one(hwloc_ready: None,
                                                            scratch: Path) -> None:
    """One NUMA node, ``numa_node`` -1 everywhere (the Threadripper PRO workstation of
    tests/data/nvidia-smi-topo, whose nvidia-smi said NUMA Affinity 0): hwloc hangs the
    GPUs below the Machine, whose one node is 0; so does the model."""
    from tests.pcitree import PciTree

    placement = _placement()
    t = PciTree(scratch / "one-node")
    t.node(0, "0-23")
    for i in (1, 2):
        t.pci(f"pci0000:c0/0000:c0:0{i}.1", numa=-1, cpus="0-23")
        t.gpu(f"pci0000:c0/0000:c0:0{i}.1/0000:c{i}:00.0", numa=-1, cpus="0-23")
    topo = hwloc.topology(t.sys.parent)
    host = placement.read_host(t.sys, t.proc)
    assert [topo.devices[g.address].nodeset for g in host.gpus] == [{0}, {0}]
    compare_numa_affinity(host, topo)
    assert [host.numa_affinity(g) for g in host.gpus] == [(0, "local_cpulist")] * 2

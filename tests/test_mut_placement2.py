"""placement's matrix, distances and pairing and the host model (issue 41: the mutants
of ``make mutation``), on small generated trees and the recorded real outputs
(``nvidia-smi topo -m`` under tests/data/nvidia-smi-topo).  Pure functions and in-process
reads: no subprocess.  The Grace layout, the assignment, ACS and the steady scrape:
tests/test_mut_placement3.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from sysverbs.placement import Distance, Topology, host_json, read_host, render_matrix
from sysverbs.placement._distance import (
    _bcm_gen,
    cross_segment,
    nccl_chain,
    nccl_distance,
    nccl_merged_path,
    numa_affinity,
    smi_distance,
    smi_rank,
)
from sysverbs.placement._pairing import nic_roles, pairing
from tests.conftest import fast_tmpdir

from .pcitree import PciTree
from .placement_trees import DATA, ETH, dgx_a100, parse_matrix

# ------------------------------------------------------------------ placement/_smi.py


@pytest.fixture(scope="module")
def a100() -> Iterator[Topology]:
    with fast_tmpdir("sv-mut-a100-") as base:
        yield read_host(dgx_a100(base).sys)


def test_model_pairs_are_the_real_matrix(a100: Topology) -> None:
    """host_json's pairs: every pair of the matrix once (a before b), each class the
    real DGX A100's ``nvidia-smi topo -m`` cell (GPU-GPU: NVLink there, PCIe here)."""
    names, cells, tail = parse_matrix((DATA / "dgx-a100-epyc7742-10nic.txt").read_text())
    model = host_json(a100)
    got = [(p["a"], p["b"]) for p in model["pairs"]]
    assert got == [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    for p in model["pairs"]:
        if not (p["a"].startswith("GPU") and p["b"].startswith("GPU")):
            assert p["smi"] == cells[p["a"]][names.index(p["b"])], p
    # the GPUs' NUMA Affinity column, and where it came from
    assert [(g["numa_affinity"], g["numa_affinity_source"]) for g in model["gpus"]] == [
        (int(tail[f"GPU{i}"][1]), "numa_node") for i in range(8)]
    assert [(n["numa_affinity"], n["numa_affinity_source"]) for n in model["nics"]] == [
        (3, "numa_node")] * 2 + [(1, "numa_node")] * 2 + [(7, "numa_node")] * 2 + [
        (5, "numa_node")] * 2 + [(6, "numa_node")] * 2


def test_matrix_nics_in_uverbs_order_then_by_name_then_address(tmp_path: Path) -> None:
    """nvidia-smi's NICs are libibverbs' order: by uverbsN (not by name), then the ones
    without a uverbs device by name; two names alike as numbers (``r01``, ``r1``) by
    PCI address."""
    t = PciTree(tmp_path)
    t.node(0, "0-7")
    t.pci("pci0000:00/0000:00:01.0")
    for name, bus, uverbs in (("mlx5_0", 0x10, 1), ("mlx5_1", 0x11, 0), ("mlx5_10", 0x12, 2),
                              ("mlx5_2", 0x13, None), ("r01", 0x15, None),
                              ("r1", 0x14, None)):
        t.rdma(name, f"pci0000:00/0000:00:01.0/0000:{bus:02x}:00.0", ports=(ETH,),
               cls=0x020000, uverbs=uverbs)
    text = render_matrix(read_host(t.sys))
    legend = [line.split(": ")[1] for line in text.splitlines() if line.startswith("  NIC")]
    assert legend == ["mlx5_1", "mlx5_0", "mlx5_10", "mlx5_2", "r1", "r01"]


# ------------------------------------------------------------------ placement/_distance.py

def _dev(address: str, ancestors: tuple[str, ...], numa: Optional[int] = 0,
         cpus: Optional[frozenset[int]] = None, **kw: object) -> Any:
    """A PCI function as the distance reads it (``ancestors`` from the host bridge)."""
    hb = next((a for a in reversed(ancestors) if a.startswith("pci")), None)
    return SimpleNamespace(address=address, ancestors=ancestors, host_bridge=hb,
                           top_host_bridge=ancestors[0] if ancestors else None,
                           numa_node=numa, local_cpus=cpus, **kw)


TWO = {0: frozenset(range(4)), 1: frozenset(range(4, 8))}
ONE = {0: frozenset(range(8))}


def test_smi_rank() -> None:
    assert smi_rank("X", 0) == (0, 0)
    assert smi_rank("PXB", 3) == (2, 3)
    assert smi_rank(None, None) == (6, 1 << 20)
    assert Distance("SYS", "SYS", 5, "").rank == (5, 5)


@pytest.mark.parametrize(("numa", "cpus", "nodes", "want"), [
    (2, None, TWO, (2, "numa_node")),
    (0, frozenset({5}), TWO, (0, "numa_node")),  # numa_node wins over the CPUs
    (None, frozenset({5, 6}), TWO, (1, "local_cpulist")),
    (None, frozenset(range(8)), TWO, (None, "unknown")),  # machine-wide: in no one node
    (None, frozenset(range(8)), ONE, (0, "local_cpulist")),  # the one node
    (None, frozenset({1}), {0: frozenset({1}), 1: frozenset({1})}, (None, "unknown")),
    (None, frozenset(), ONE, (None, "unknown")), (None, None, ONE, (None, "unknown")),
])
def test_numa_affinity(numa: Optional[int], cpus: Optional[frozenset[int]],
                       nodes: dict[int, frozenset[int]], want: tuple[object, str]) -> None:
    assert numa_affinity(_dev("0000:01:00.0", ("pci0000:00",), numa, cpus), nodes) == want


def _across(a_numa: Optional[int], b_numa: Optional[int], nodes: dict[int, frozenset[int]],
            a_cpus: Optional[frozenset[int]] = None, b_cpus: Optional[frozenset[int]] = None,
            ) -> tuple[Optional[str], Optional[int], str]:
    a = _dev("0000:01:00.0", ("pci0000:00", "0000:00:01.0"), a_numa, a_cpus)
    b = _dev("0000:81:00.0", ("pci0000:80", "0000:80:01.0", "0000:81:00.0"), b_numa, b_cpus)
    return smi_distance(a, b, nodes)


@pytest.mark.parametrize(("args", "want"), [
    ((0, 0, TWO), ("NODE", 5, "different host bridges, both on NUMA node 0")),
    ((0, 1, TWO), ("SYS", 5, "different host bridges, NUMA node 0 and 1")),
    ((0, None, ONE), ("NODE", 5, "different host bridges, one NUMA node on this host")),
    ((None, 0, ONE), ("NODE", 5, "different host bridges, one NUMA node on this host")),
    ((None, None, TWO, frozenset({5}), frozenset({1})),
     ("SYS", 5, "different host bridges, NUMA node 1 and 0 (from their local CPUs)")),
    ((None, None, TWO, frozenset({2}), frozenset({1})),
     ("NODE", 5, "different host bridges, both on NUMA node 0 (from their local CPUs)")),
    ((None, 1, TWO, frozenset(range(8))),
     (None, 5, "different host bridges, numa_node unknown (-1 or missing) on a host with "
               "several NUMA nodes")),
])
def test_across_host_bridges(args: tuple[Any, ...],
                             want: tuple[Optional[str], Optional[int], str]) -> None:
    assert _across(*args) == want


def test_across_pci_domains() -> None:
    assert cross_segment("pci0008:00", "pci0009:00", TWO) == (
        "SYS", "different PCI domains (0008 and 0009) on a host of 2 CPU nodes: "
        "nvidia-smi's SYS, whatever their NUMA nodes")
    assert cross_segment("pci0008:00", "pci0008:80", TWO) is None  # one domain
    assert cross_segment("pci0008:00", "pci0009:00", ONE) is None  # one socket: NUMA rule
    # a node without CPUs (a GPU's memory on Grace) is no socket
    assert cross_segment("pci0008:00", "pci0009:00", {0: ONE[0], 1: frozenset()}) is None
    a = _dev("0008:01:00.0", ("pci0008:00", "0008:00:00.0"), 0)
    b = _dev("0009:01:00.0", ("pci0009:00", "0009:00:00.0"), 0)
    assert smi_distance(a, b, TWO) == (
        "SYS", 4, "different PCI domains (0008 and 0009) on a host of 2 CPU nodes: "
        "nvidia-smi's SYS, whatever their NUMA nodes")


RP, USP, DSP1, DSP2 = "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0"


@pytest.mark.parametrize(("ca", "cb", "want"), [
    ((RP, USP, DSP1), (RP, USP, DSP1), ("PIX", 1, f"they meet at bridge {DSP1} (a single port)")),
    ((RP,), (RP,), ("PIX", 1, f"they meet at bridge {RP} (a single port)")),
    ((RP, USP, DSP1), (RP, USP, DSP2), ("PIX", 3, f"they meet at bridge {USP} (a single switch)")),
    ((RP, USP), (RP, USP, DSP2), ("PIX", 2, f"they meet at bridge {USP} (a single switch)")),
    ((RP, USP, DSP2), (RP, USP), ("PIX", 2, f"they meet at bridge {USP} (a single switch)")),
    # a switch below a switch's downstream port: its upstream port at depth 4
    ((RP, USP, DSP1, "0000:03:00.0", "0000:04:00.0"), (RP, USP, DSP1, "0000:03:00.0",
                                                      "0000:04:01.0"),
     ("PIX", 3, "they meet at bridge 0000:03:00.0 (a single switch)")),
    ((RP, USP, DSP1, "0000:03:00.0"), (RP, USP, DSP2),
     ("PXB", 4, f"they meet at bridge {USP}, through several bridges")),
    ((RP, USP), (RP, "0000:01:00.1"), ("PXB", 3, f"they meet at bridge {RP}, through several "
                                                 "bridges")),
    ((RP,), ("0000:00:02.0",), ("PHB", 3, "they meet at host bridge pci0000:00")),
    # behind VMD: a host bridge inside the chain
    (("0000:00:0e.0", "pci10000:e0", "10000:e0:1d.0"), ("0000:00:0e.0", "pci10000:e0",
                                                         "10000:e0:1c.0"),
     ("PHB", 3, "they meet at host bridge pci10000:e0")),
    (("0000:00:0e.0", "pci10000:e0", "10000:e0:1d.0", "10000:e1:00.0"),
     ("0000:00:0e.0", "pci10000:e0", "10000:e0:1d.0", "10000:e1:00.1"),
     ("PXB", 3, "they meet at bridge 10000:e0:1d.0, through several bridges")),
    (("0000:00:0e.0", "pci10000:e0", "10000:e0:1d.0"), ("0000:00:0e.0", "pci10000:e0",
                                                         "10000:e0:1d.0"),
     ("PIX", 1, "they meet at bridge 10000:e0:1d.0 (a single port)")),
    (("0000:00:0e.0", "pci10000:e0", RP, USP, DSP1), ("0000:00:0e.0", "pci10000:e0", RP, USP,
                                                      DSP2),
     ("PIX", 3, f"they meet at bridge {USP} (a single switch)")),
])
def test_below_one_host_bridge(ca: tuple[str, ...], cb: tuple[str, ...],
                               want: tuple[str, int, str]) -> None:
    a = _dev("0000:0a:00.0", ("pci0000:00", *ca))
    b = _dev("0000:0b:00.0", ("pci0000:00", *cb))
    assert smi_distance(a, b, TWO) == want


def test_same_function_and_no_host_bridge() -> None:
    a = _dev("0000:0a:00.0", ("pci0000:00", RP))
    assert smi_distance(a, a, TWO) == ("X", 0, "same PCI function")
    lost = _dev("0000:0b:00.0", ())
    assert smi_distance(a, lost, TWO) == (None, None, "no host bridge above one of them")
    assert smi_distance(lost, a, TWO) == (None, None, "no host bridge above one of them")


@pytest.mark.parametrize(("last", "nic", "merge", "want"), [
    ("0000:01:02.3", True, True, "0000:01:00.0"), ("0000:01:02.3", True, False, "0000:01:02.0"),
    ("0000:01:02.3", False, True, "0000:01:02.3"),
    # NCCL's p[len-1] = '0', then p[len-3] = p[len-4] = '0': from four characters
    ("abcd", True, True, "00c0"), ("abc", True, True, "ab0"),
])
def test_nccl_merged_path(last: str, nic: bool, merge: bool, want: str) -> None:
    dev = SimpleNamespace(path=f"/x/sys/devices/pci0000:00/{RP}/{last}")
    assert nccl_merged_path(dev, nic, merge) == ["pci0000:00", RP, want]  # type: ignore[arg-type]


def test_nccl_merged_path_without_devices() -> None:
    """From the tree's own ``devices/`` down (a tree below a directory named devices);
    a path with no ``/devices/`` in it: all of it."""
    dev: Any = SimpleNamespace(path=f"/tmp/devices/sys/devices/pci0000:00/{RP}")
    assert nccl_merged_path(dev, False) == ["pci0000:00", RP]
    dev = SimpleNamespace(path=f"pci0000:00/{RP}/0000:01:02.1")
    assert nccl_merged_path(dev, True) == ["pci0000:00", RP, "0000:01:00.0"]  # VFs merged


def _bcm(device: Optional[int], sub: Optional[int], vendor: int = 0x1000,
         sub_vendor: Optional[int] = 0x1000) -> Any:
    return SimpleNamespace(vendor=vendor, device=device, subsystem_vendor=sub_vendor,
                           subsystem_device=sub)


@pytest.mark.parametrize(("dev", "level", "want"), [
    (_bcm(0xC010, 0xA123), 0, 4), (_bcm(0xC010, 0xA123), 1, 4), (_bcm(0xC010, 0xB000), 0, 0),
    (_bcm(0xC030, 0x0FFF), 0, 5), (_bcm(0xC030, 0x1000), 1, 5), (_bcm(0xC030, 0x1000), 0, 0),
    (_bcm(0xC010, 0xA000, vendor=0x10B5), 0, 0), (_bcm(None, 0xA000), 0, 0),
    (_bcm(0xC010, None), 0, 0), (_bcm(0xC010, 0xA000, sub_vendor=None), 0, 0),
    (_bcm(0xC010, 0xA000, sub_vendor=0x1001), 0, 0), (None, 0, 0),
    # NCCL sums the four ids (ncclTopoGetIntDevice's +=): one past 16 bits carries over
    (_bcm(0xC010, 0x1000A000), 0, 0), (_bcm(0xC010, 0x1A000, sub_vendor=0x0FFF), 0, 4),
    (_bcm(0x1C010, 0xA000), 0, 0),
])
def test_broadcom_switch_generation(dev: Any, level: int, want: int) -> None:
    assert _bcm_gen(dev, level) == want


def _node(numa_raw: Optional[str], **kw: object) -> Any:
    return SimpleNamespace(numa_raw=numa_raw, vendor=0x10B5, device=0x8796,
                           subsystem_vendor=0x10B5, subsystem_device=0, **kw)


def test_nccl_chain() -> None:
    parts = ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0",
             "0000:04:00.0", "0000:05:00.0"]
    pci = {"0000:01:00.0": _node("1\n"), "0000:03:00.0": _node("2")}
    dev = _node("3")
    # two non-Broadcom switches, both kept; the CPU of the top one
    assert nccl_chain(parts, pci, dev) == ("1", ["0000:03:00.0", "0000:01:00.0"])
    # a name that is no BDF stops the climb (its neighbour being one does not matter)
    assert nccl_chain(["pci0000:00", RP, "virtual", USP], pci, dev) == ("3", [])
    assert nccl_chain(["pci0000:00", USP], pci, dev) == ("3", [])
    assert nccl_chain([RP, USP], pci, dev) == ("3", [])
    # from the first component: a BDF there is a switch too
    assert nccl_chain([RP, USP, DSP1], {RP: _node("4")}, dev) == ("4", [RP])
    assert nccl_chain([], pci, dev) == ("3", [])
    assert nccl_chain([], pci, _node(None)) == ("-1", [])
    # a top bridge without attributes: the device's own node
    assert nccl_chain(parts, {}, _node(" 7 ")) == ("7", ["0000:03:00.0", "0000:01:00.0"])
    # a Broadcom gen5 sub-switch below its parent switch is merged into it
    bcm = {"0000:01:00.0": _bcm(0xC030, 0x0000), "0000:03:00.0": _bcm(0xC030, 0x1000)}
    bcm["0000:01:00.0"].numa_raw = "0"
    assert nccl_chain(parts, bcm, dev) == ("0", ["0000:01:00.0"])
    # each switch against the one right above it: a sub-switch two levels below stays
    three = ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0",
             "0000:04:00.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0"]
    bcm = {"0000:01:00.0": _node("0"), "0000:03:00.0": _bcm(0xC030, 0x0000),
           "0000:05:00.0": _bcm(0xC030, 0x1000)}
    assert nccl_chain(three, bcm, dev) == ("0", ["0000:03:00.0", "0000:01:00.0"])
    bcm = {"0000:01:00.0": _bcm(0xC030, 0x0000), "0000:03:00.0": _node("0"),
           "0000:05:00.0": _bcm(0xC030, 0x1000)}
    bcm["0000:01:00.0"].numa_raw = "0"
    assert nccl_chain(three, bcm, dev) == ("0", ["0000:05:00.0", "0000:03:00.0",
                                                 "0000:01:00.0"])


def _nccl_dev(path: str, numa: str = "0") -> Any:
    return SimpleNamespace(address=path.rsplit("/", 1)[-1], path="/sys/devices/" + path,
                           numa_raw=numa, vendor=0x8086)


@pytest.mark.parametrize(("a", "b", "want"), [
    ("pci0000:00/0000:00:01.0/0000:01:00.0", "pci0000:00/0000:00:01.0/0000:01:00.1", "LOC"),
    ("pci0000:00/0000:00:01.0/0000:01:00.0", "pci0000:80/0000:80:01.0/0000:81:00.0", "SYS"),
    ("pci0000:00/0000:00:01.0/0000:01:00.0", "pci0000:00/0000:00:02.0/0000:02:00.0", "PHB"),
    ("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0",
     "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", "PIX"),
    ("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0",
     "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:00.0/"
     "0000:05:00.0", "PXB"),
    ("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:00.0/"
     "0000:05:00.0",
     "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", "PXB"),
])
def test_nccl_path_types(a: str, b: str, want: str) -> None:
    pci = {p.rsplit("/", 1)[-1]: _nccl_dev(p, "1" if "0000:8" in p else "0")
           for p in (a, b)}
    for path in (a, b):
        parts = path.split("/")
        for i in range(1, len(parts)):
            pci.setdefault(parts[i], _nccl_dev("/".join(parts[:i + 1]),
                                               "1" if "0000:8" in path else "0"))
    got = nccl_distance(pci[a.rsplit("/", 1)[-1]], pci[b.rsplit("/", 1)[-1]], pci, True, True)
    assert got == want


# ------------------------------------------------------------------ model/host.py

def test_host_model_reads_each_part_once_through_its_scope() -> None:
    from sysverbs.ground.errors import WrongTypeError
    from sysverbs.model import HostModel
    from sysverbs.placement import read_cpus
    from sysverbs.testing.cache import fixture_tree

    with pytest.raises(WrongTypeError, match="^root must be a HostRoot, not str$"):
        HostModel("/sys")  # type: ignore[arg-type]
    tree = fixture_tree("gpu-dgx-a100")
    model = HostModel(tree.host_root)
    assert model.reading() is model.reads
    assert repr(model) == "HostModel(fixture gpu-dgx-a100, read: nothing)"
    cpus = model.cpus
    # the tree's CPUs (256 on this DGX A100), not this machine's
    assert cpus == read_cpus(tree.host_root.sysfs) and len(cpus.online) == 256
    host = model.placement
    assert model.cpus is cpus and model.placement is host  # kept, not read again
    assert repr(model) == "HostModel(fixture gpu-dgx-a100, read: cpus, placement)"
    assert [n.name for n in host.nics][:2] == ["mlx5_0", "mlx5_1"] and len(host.gpus) == 8


# ------------------------------------------------------------------ placement/_pairing.py

def _nic(name: str, address: Optional[str], *layers: str, placement: str = "pci") -> Any:
    return SimpleNamespace(name=name, address=address, placement=placement,
                           ports=tuple(SimpleNamespace(link_layer=x) for x in layers))


def _fn(vendor: Optional[int], device: Optional[int], cls: Optional[int] = 0x020700,
        numa: Optional[int] = 0, physfn: Optional[str] = None) -> Any:
    return SimpleNamespace(vendor=vendor, device=device, pci_class=cls, numa_node=numa,
                           physfn=physfn)


@pytest.mark.parametrize(("fn", "layers", "want"), [
    (_fn(0x15B3, 0xA2DC, 0x020000, 1), ("Ethernet", "InfiniBand", "Ethernet"),
     ("dpu", "15b3:a2dc", "0x020000", ("Ethernet", "InfiniBand"), 1,
      "BlueField-3 (15b3:a2dc): a DPU, not a compute NIC; Ethernet/InfiniBand; NUMA node 1")),
    (_fn(0x15B3, 0xA2D6), ("InfiniBand",),
     ("dpu", "15b3:a2d6", "0x020700", ("InfiniBand",), 0,
      "BlueField-2 (15b3:a2d6): a DPU, not a compute NIC; InfiniBand; NUMA node 0")),
    (_fn(0x15B3, 0x1023), ("InfiniBand",),
     ("compute", "15b3:1023", "0x020700", ("InfiniBand",), 0,
      "ConnectX-8 (15b3:1023); InfiniBand; NUMA node 0")),
    (_fn(0x15B3, 0x101E, None, None), (),
     ("compute", "15b3:101e", None, (), None,
      "ConnectX VF (15b3:101e); no link layer; NUMA node unknown")),
    (_fn(0x15B3, 0x1021, 0x010802), ("Ethernet",),
     ("other", "15b3:1021", "0x010802", ("Ethernet",), 0,
      "ConnectX-7 id but PCI class 0x010802, not a network class; Ethernet; NUMA node 0")),
    (_fn(0x15B3, 0x1025, 0x028000), ("Ethernet",),  # any network class
     ("compute", "15b3:1025", "0x028000", ("Ethernet",), 0,
      "ConnectX-9 (15b3:1025); Ethernet; NUMA node 0")),
    (_fn(0x15B3, 0x1017), ("Ethernet",),  # a ConnectX-5: not in the table
     ("other", "15b3:1017", "0x020700", ("Ethernet",), 0,
      "15b3:1017 is no ConnectX compute NIC (storage or management); Ethernet; NUMA node 0")),
    (_fn(0x8086, 0xA2DC), ("Ethernet",),  # a BlueField id of another vendor
     ("other", "8086:a2dc", "0x020700", ("Ethernet",), 0,
      "8086:a2dc is no ConnectX compute NIC (storage or management); Ethernet; NUMA node 0")),
    (_fn(0x8086, 0x1023), (),
     ("other", "8086:1023", "0x020700", (), 0,
      "8086:1023 is no ConnectX compute NIC (storage or management); no link layer; "
      "NUMA node 0")),
    (_fn(None, None, None, 2), (),
     ("other", "0000:0000", None, (), 2,
      "0000:0000 is no ConnectX compute NIC (storage or management); no link layer; "
      "NUMA node 2")),
])
def test_nic_roles(fn: Any, layers: tuple[str, ...], want: tuple[object, ...]) -> None:
    host: Any = SimpleNamespace(nics=[_nic("n0", "0000:01:00.0", *layers)],
                                pci={"0000:01:00.0": fn})
    (role,) = nic_roles(host).values()
    assert (role.name, role.role, role.device_id, role.pci_class, role.link_layers,
            role.numa_node, role.reason) == ("n0", *want)
    assert role.as_dict() == {"role": want[0], "reason": want[5], "signals": {
        "device_id": want[1], "pci_class": want[2], "link_layers": list(want[3]),
        "numa_node": want[4]}}


def test_a_nic_off_pci_is_other() -> None:
    host: Any = SimpleNamespace(nics=[_nic("rxe0", None, "Ethernet", placement="unplaced"),
                                      _nic("x", "0000:09:00.0")], pci={})
    roles = nic_roles(host)
    assert [(r.name, r.role, r.device_id, r.pci_class, r.link_layers, r.numa_node, r.reason)
            for r in roles.values()] == [
        ("rxe0", "other", None, None, ("Ethernet",), None, "not on a PCI function (unplaced)"),
        ("x", "other", None, None, (), None, "not on a PCI function (pci)")]


def _grace_host() -> Any:
    """Three CX-8 PFs (two RDMA devices on one: by name), a VF of the first, a
    BlueField-3 and a NIC off PCI."""
    pci = {"0000:03:00.0": _fn(0x15B3, 0x1023), "0000:03:00.1": _fn(0x15B3, 0x1023),
           "0000:03:00.2": _fn(0x15B3, 0x101E, physfn="0000:03:00.0"),
           "0002:03:00.0": _fn(0x15B3, 0x1023, numa=1),
           "0006:01:00.0": _fn(0x15B3, 0xA2DC, numa=1)}
    nics = [_nic("mlx5_3", "0002:03:00.0"), _nic("mlx5_2", "0000:03:00.2"),
            _nic("mlx5_10", "0000:03:00.1"), _nic("mlx5_1", "0000:03:00.0"),
            _nic("mlx5_9", "0000:03:00.1"),
            _nic("bf3", "0006:01:00.0"), _nic("rxe0", None)]
    return SimpleNamespace(nics=nics, pci=pci)


def _dma(gpu: object, nic: object) -> dict[str, object]:
    return {"gpu": gpu, "dma_function": "0000:03:00.4", "nic": nic}


def test_data_direct_pairing() -> None:
    host = _grace_host()
    resolved = {"status": "resolved", "via": "VPD V3", "pfs": [{"address": "0000:03:00.0"},
                                                                 "junk"]}
    lone = {"status": "resolved", "via": "ioctl", "pfs": [{"address": "0002:03:00.0"}]}
    none = {"status": "resolved", "via": "ioctl", "pfs": []}
    open_ = {"status": "unresolved", "reason": "its vpd is absent",
             "candidates": [{"address": "0000:03:00.1"}, {"address": "0000:03:00.0"}]}
    lay: Any = SimpleNamespace(kind="dma-based", complexes=[
        _dma("0000:06:00.0", resolved), _dma("0002:06:00.0", lone), _dma("0003:06:00.0", none),
        _dma("0004:06:00.0", open_), _dma(None, resolved), _dma("0005:06:00.0", "x"),
        _dma("0006:06:00.0", {"status": "unresolved", "reason": "r", "candidates": []})])
    got = {k: v.as_dict() for k, v in pairing(host, lay).items()}
    assert list(got) == ["0000:06:00.0", "0002:06:00.0", "0003:06:00.0", "0004:06:00.0",
                         "0006:06:00.0"]
    # the PF's RDMA devices and its VF's, by PCI address
    assert got["0000:06:00.0"] == {
        "gpu": "0000:06:00.0", "rule": "data-direct", "status": "resolved",
        "nics": ["mlx5_1", "mlx5_2"], "dma_function": "0000:03:00.4", "via": "VPD V3",
        "candidates": [], "reason": "Data Direct: mlx5_1, mlx5_2 are the CX-8 whose DMA "
        "function 0000:03:00.4 sits below this GPU's CX switch (tied by VPD V3); NCCL names "
        "them mlx5_1_dma, mlx5_2_dma"}
    assert got["0002:06:00.0"]["reason"] == (
        "Data Direct: mlx5_3 is the CX-8 whose DMA function 0000:03:00.4 sits below this "
        "GPU's CX switch (tied by ioctl); NCCL names them mlx5_3_dma")
    assert got["0003:06:00.0"]["nics"] == [] and got["0003:06:00.0"]["reason"] == (
        "Data Direct: the CX-8 whose DMA function 0000:03:00.4 sits below this GPU's CX "
        "switch (tied by ioctl) has no RDMA device")
    assert got["0004:06:00.0"] == {
        "gpu": "0004:06:00.0", "rule": "data-direct", "status": "unresolved", "nics": [],
        "dma_function": "0000:03:00.4", "via": None,
        "candidates": ["mlx5_1", "mlx5_9", "mlx5_10", "mlx5_2"],
        "reason": "Data Direct: the CX-8 of DMA function 0000:03:00.4 is unresolved: its vpd "
        "is absent; candidates mlx5_1, mlx5_9, mlx5_10, mlx5_2 (no guess: NCCL resolves it itself "
        "when NCCL_IB_HCA is not set)"}
    assert "candidates none (no guess" in got["0006:06:00.0"]["reason"]


def test_numa_pairing() -> None:
    host = _grace_host()
    lay: Any = SimpleNamespace(kind="numa-based", complexes=[
        {"numa_node": 0, "gpus": ["0000:06:00.0", "0000:07:00.0"],
         "pfs": [{"address": "0000:03:00.1"}, {"address": "0000:03:00.0"}]},
        {"numa_node": 1, "gpus": ["0002:06:00.0"],
         "pfs": [{"address": "0002:03:00.0"}, {"address": "0006:01:00.0"}]},
        {"numa_node": 2, "gpus": ["0003:06:00.0"], "pfs": [{"address": "0006:01:00.0"}]}])
    got = {k: (v.rule, v.status, v.nics, v.dma_function, v.via, v.candidates, v.reason)
           for k, v in pairing(host, lay).items()}
    text = ("NUMA-based: no PCIe path joins a GPU and a NIC here; the compute NICs of its CPU "
            "NUMA node {}: {}")
    both = ("numa", "resolved", ("mlx5_1", "mlx5_9", "mlx5_10", "mlx5_2"), None, None, (),
            text.format(0, "mlx5_1, mlx5_9, mlx5_10, mlx5_2"))
    assert got == {"0000:06:00.0": both, "0000:07:00.0": both,
                   "0002:06:00.0": ("numa", "resolved", ("mlx5_3",), None, None, (),
                                    text.format(1, "mlx5_3")),
                   "0003:06:00.0": ("numa", "resolved", (), None, None, (),
                                    text.format(2, "none"))}
    for kind in ("inline", "pcie"):
        assert pairing(host, SimpleNamespace(kind=kind, complexes=lay.complexes)) == {}

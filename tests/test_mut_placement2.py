"""placement's matrix, distances, pairing and layout, the host model and the steady
scrape (issue 41: the mutants of ``make mutation``), on small generated trees and the
recorded real outputs (``nvidia-smi topo -m`` under tests/data/nvidia-smi-topo).  Pure
functions and in-process reads: no subprocess.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from sysverbs.placement import (
    Distance,
    Nic,
    Port,
    Topology,
    host_json,
    read_host,
    render_matrix,
)
from sysverbs.placement._assign import (
    assign_rank,
    host_link_layer,
    local_rank,
    visible_gpus,
)
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
from sysverbs.placement._layout import parse_vpd
from sysverbs.placement._pairing import nic_roles, pairing
from tests.conftest import fast_tmpdir

from .pcitree import PciTree
from .placement_trees import DATA, ETH, dgx_a100, hgx, parse_matrix

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
    assert got["0003:06:00.0"]["nics"] == [] and got["0003:06:00.0"]["reason"].startswith(
        "Data Direct: no RDMA device are the CX-8")
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


# ------------------------------------------------------------------ placement/_layout.py

def vpd_image(name: Optional[str], ro: list[tuple[str, str]],
              rw: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A PCI VPD image as a device holds it: the identifier string, the read-only
    fields closed by RV (its checksum making the bytes so far sum to 0), the
    read-write fields, the end tag."""
    out = b"" if name is None else b"\x82" + len(name).to_bytes(2, "little") + name.encode()
    body = b"".join(k.encode() + bytes([len(v)]) + v.encode() for k, v in ro)
    head = out + b"\x90" + (len(body) + 4).to_bytes(2, "little") + body + b"RV\x01"
    out = head + bytes([-sum(head) & 0xFF])
    if rw:
        fields = b"".join(k.encode() + bytes([len(v)]) + v.encode() for k, v in rw)
        out += b"\x91" + len(fields).to_bytes(2, "little") + fields
    return out + b"\x78"


VPDS = {
    "0000:01:00.0": vpd_image("ConnectX-8 Data Direct", [
        ("SN", "MT2451X00001"), ("V3", "5eb0c8d100004a2b8c3d000000000001")]),
    "0000:02:00.0": vpd_image("NVIDIA ConnectX-7 HHHL adapter card   ", [
        ("PN", "MCX75310AAS-NEAT  "), ("EC", "A7"), ("V2", "MCX75310AAS-NEAT"),
        ("SN", "MT2231T07M55"), ("V3", "c0cd10e64a2eed11800088e9a4d9b2de"), ("VA", "")],
        (("V1", "rw"), ("YA", "asset"))),
    "0000:03:00.0": vpd_image(None, [("V3", "0" * 32), ("V0", "x" * 40)]),
}


def _lspci_vpd(tmp: Path) -> dict[str, dict[str, str]]:
    """Real ``lspci -vv`` (pciutils' sysfs access) of functions whose ``config`` has a
    VPD capability and whose ``vpd`` file holds :data:`VPDS`: each one's product name
    and read-only fields, as it decodes them."""
    import shutil
    import subprocess

    from tests.conftest import require

    require(None if shutil.which("lspci") else "lspci not on PATH (Debian's pciutils)",
            "lspci")
    config = bytearray(256)
    config[0:4] = (0x15B3 | 0x1021 << 16).to_bytes(4, "little")
    config[6], config[0x0B], config[0x34], config[0x40] = 0x10, 0x02, 0x40, 0x03
    for bdf, image in VPDS.items():
        d = tmp / "devices" / bdf
        d.mkdir(parents=True)
        (d / "config").write_bytes(bytes(config))
        (d / "vpd").write_bytes(image)
        (d / "irq").write_text("0\n")
        (d / "resource").write_text("0x0 0x0 0x0\n" * 7)
        for attr, value in (("vendor", "0x15b3"), ("device", "0x1021"), ("class", "0x020000"),
                            ("subsystem_vendor", "0x15b3"), ("subsystem_device", "0x0021")):
            (d / attr).write_text(value + "\n")
    out = subprocess.run(["lspci", "-A", "linux-sysfs", "-O", f"sysfs.path={tmp}", "-D",
                          "-vv"], capture_output=True, text=True, timeout=60, check=True).stdout
    found: dict[str, dict[str, str]] = {}
    fields: dict[str, str] = {}
    section = ""
    for line in out.splitlines():
        if line and not line[0].isspace():
            fields = found.setdefault(line.split()[0], {})
        text = line.strip()
        if text.startswith("Product Name: "):
            fields["name"] = text[len("Product Name: "):].strip()
        elif text.endswith("fields:"):
            section = text
        elif text.startswith("[") and section == "Read-only fields:" and "[RV]" not in text:
            key, value = text[1:3], text.split(": ", 1)[1] if ": " in text else ""
            fields[key] = value.strip()
    return found


def test_parse_vpd_reads_what_lspci_reads(tmp_path: Path) -> None:
    """parse_vpd against real lspci on the same bytes: the identifier string and every
    read-only keyword but RV, values stripped; the read-write ones left out."""
    real = _lspci_vpd(tmp_path)
    assert {bdf: parse_vpd(image) for bdf, image in VPDS.items()} == real
    assert real["0000:02:00.0"]["PN"] == "MCX75310AAS-NEAT" and "V1" not in real[
        "0000:02:00.0"]


# ------------------------------------------------------------------ fleet/steady.py

@dataclass(frozen=True)
class _Part:
    name: str
    success: bool
    duration_seconds: float


@dataclass(frozen=True)
class _Snapshot:
    """What Steady reads of a snapshot (HostFacts' collectors and sysfs_path)."""

    sysfs_path: str
    collectors: tuple[_Part, ...]
    value: bytes


def test_steady_reuses_the_last_snapshot_until_an_input_changes(tmp_path: Path) -> None:
    """A snapshot of one file: the second scrape is the first again (one collection),
    with this scrape's duration on its first part and 0 on the others; a changed file, a
    failed part, a changed environment and a tree gone are each a new collection."""
    from sysverbs.fleet.steady import Steady
    from sysverbs.ground.hostroot import HostRoot
    from sysverbs.ground.sysfs_read import read_sysfs_file
    from sysverbs.model import HostModel

    sys_dir = tmp_path / "sys"
    (sys_dir / "devices").mkdir(parents=True)
    (sys_dir / "devices" / "x").write_text("1\n")
    root = HostRoot.resolve(str(sys_dir))
    ok = [True, True]

    def collect(model: HostModel) -> Any:
        value = read_sysfs_file(str(sys_dir / "devices" / "x"), 64)
        return _Snapshot(str(sys_dir), (_Part("topology", ok[0], 0.5), _Part("gpus", ok[1],
                                                                             0.25)), value)

    environ = {"NCCL_IB_HCA": "mlx5_0"}
    steady = Steady(collect, lambda: HostModel(root), environ)
    assert steady.recheck is None
    first = steady()
    assert (steady.collected, steady.reused, steady.why) == (1, 0, "first")
    assert steady.recheck is not None
    start = time.perf_counter()
    again = steady()
    within = time.perf_counter() - start
    assert (steady.collected, steady.reused) == (1, 1) and again.value == first.value
    took, rest = again.collectors[0].duration_seconds, again.collectors[1].duration_seconds
    assert 0.0 < took <= within and rest == 0.0  # this scrape's, not the snapshot's 0.5
    (sys_dir / "devices" / "x").write_text("2\n")
    assert steady().value == b"2" and (steady.collected, steady.reused) == (2, 1)
    assert steady.why.endswith("devices/x")
    ok[1] = False
    (sys_dir / "devices" / "x").write_text("3\n")
    steady()
    steady()
    assert steady.collected == 4 and steady.why == "the gpus part failed"
    ok[0] = False
    (sys_dir / "devices" / "x").write_text("4\n")
    steady()
    steady()
    assert steady.collected == 6 and steady.why == "the topology part failed"  # the first
    ok[:] = [True, True]
    steady()
    steady()
    assert (steady.collected, steady.reused) == (7, 2)
    environ["NCCL_IB_HCA"] = "mlx5_1"
    steady()
    assert steady.collected == 8 and steady.why.startswith("this process")
    (sys_dir / "devices" / "x").unlink()
    (sys_dir / "devices").rmdir()
    steady()
    assert steady.collected == 9 and steady.why == "no sysfs tree"


def test_process_inputs_errno() -> None:
    from sysverbs.fleet.steady import _proc, process_inputs

    assert _proc("/nonexistent/status") == b"errno 2"
    assert _proc("/proc/self/cgroup") == Path("/proc/self/cgroup").read_bytes()
    mine = process_inputs({"A": "1"})
    assert mine[0] == {"A": "1"} and mine[1] == dict(os.environ)
    assert process_inputs()[0] is None and all(x.startswith(b"Cap") for x in mine[8])
    assert len(mine[8]) == 5  # CapInh, CapPrm, CapEff, CapBnd, CapAmb


# ------------------------------------------------------------------ placement/_assign.py

IBL, ETHL = "InfiniBand", "Ethernet"


@pytest.mark.parametrize(("layers", "want"), [
    ([IBL, ETHL, ETHL], ETHL), ([IBL, IBL, ETHL], IBL), ([IBL, ETHL], IBL),
    ([IBL, IBL], None), ([ETHL], None), ([None, IBL], None), ([], None),
])
def test_host_link_layer(layers: list[Optional[str]], want: Optional[str]) -> None:
    assert host_link_layer(layers) == want


@pytest.mark.parametrize(("env", "want"), [
    ({}, (None, "none of LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, "
                "MPI_LOCALRANKID, PALS_LOCAL_RANKID, MV2_COMM_WORLD_LOCAL_RANK, "
                "JSM_NAMESPACE_LOCAL_RANK is set")),
    ({"SLURM_LOCALID": " 3 ", "JSM_NAMESPACE_LOCAL_RANK": "5"}, (3, "SLURM_LOCALID=3")),
    ({"OMPI_COMM_WORLD_LOCAL_RANK": "2", "LOCAL_RANK": "1"}, (1, "LOCAL_RANK=1")),
    ({"LOCAL_RANK": "x", "SLURM_LOCALID": "1"}, (None, "LOCAL_RANK='x' is not a local rank")),
    ({"LOCAL_RANK": "123456"}, (123456, "LOCAL_RANK=123456")),
    ({"LOCAL_RANK": "1234567"}, (None, "LOCAL_RANK='1234567' is not a local rank")),
    ({"JSM_NAMESPACE_LOCAL_RANK": "0"}, (0, "JSM_NAMESPACE_LOCAL_RANK=0")),
])
def test_local_rank(env: dict[str, str], want: tuple[Optional[int], str]) -> None:
    assert local_rank(env) == want


@pytest.fixture(scope="module")
def hgx8() -> Iterator[Topology]:
    """8 GPUs (uuid GPU-0000000N-1111-...), each with one NIC behind its own switch."""
    with fast_tmpdir("sv-mut-hgx-") as base:
        yield read_host(hgx(base).sys, base / "proc")


@pytest.mark.parametrize(("env", "want", "why"), [
    ({}, [0, 1, 2, 3, 4, 5, 6, 7], "all GPUs (no CUDA_VISIBLE_DEVICES)"),
    ({"NVIDIA_VISIBLE_DEVICES": "ALL"}, [0, 1, 2, 3, 4, 5, 6, 7], "NVIDIA_VISIBLE_DEVICES=ALL"),
    ({"NVIDIA_VISIBLE_DEVICES": " void "}, [],
     "NVIDIA_VISIBLE_DEVICES='void': no GPU in this container"),
    ({"NVIDIA_VISIBLE_DEVICES": ""}, [], "NVIDIA_VISIBLE_DEVICES='': no GPU in this container"),
    ({"NVIDIA_VISIBLE_DEVICES": "none"}, [],
     "NVIDIA_VISIBLE_DEVICES='none': no GPU in this container"),
    ({"NVIDIA_VISIBLE_DEVICES": "5,3", "CUDA_VISIBLE_DEVICES": "1"}, [3],
     "NVIDIA_VISIBLE_DEVICES=5,3; CUDA_VISIBLE_DEVICES=1"),
    ({"CUDA_VISIBLE_DEVICES": "2, 9,1"}, [2],
     "CUDA_VISIBLE_DEVICES=2, 9,1; CUDA_VISIBLE_DEVICES stops at '9' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": "2,2"}, [2],
     "CUDA_VISIBLE_DEVICES=2,2; CUDA_VISIBLE_DEVICES stops at '2' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": "7,8"}, [7],
     "CUDA_VISIBLE_DEVICES=7,8; CUDA_VISIBLE_DEVICES stops at '8' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": "00006"}, [],
     "CUDA_VISIBLE_DEVICES=00006; CUDA_VISIBLE_DEVICES stops at '00006' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": "gpu-00000003,GPU-00000001-1111"}, [3, 1],
     "CUDA_VISIBLE_DEVICES=gpu-00000003,GPU-00000001-1111"),
    ({"CUDA_VISIBLE_DEVICES": "GPU-0000000,1"}, [],
     "CUDA_VISIBLE_DEVICES=GPU-0000000,1; GPU-0000000 is an ambiguous UUID prefix; "
     "CUDA_VISIBLE_DEVICES stops at 'GPU-0000000' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": "GPU-fff"}, [],
     "CUDA_VISIBLE_DEVICES=GPU-fff; CUDA_VISIBLE_DEVICES stops at 'GPU-fff' (as CUDA does)"),
    ({"NVIDIA_VISIBLE_DEVICES": "GPU-00000006", "CUDA_VISIBLE_DEVICES": "0"}, [6],
     "NVIDIA_VISIBLE_DEVICES=GPU-00000006; CUDA_VISIBLE_DEVICES=0"),
    ({"NVIDIA_VISIBLE_DEVICES": "1,x"}, [1],
     "NVIDIA_VISIBLE_DEVICES=1,x; NVIDIA_VISIBLE_DEVICES stops at 'x' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": " "}, [], "CUDA_VISIBLE_DEVICES='': no GPU visible"),
    ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, [],
     "CUDA_VISIBLE_DEVICES='NoDevFiles': no GPU visible"),
])
def test_visible_gpus(hgx8: Topology, env: dict[str, str], want: list[int], why: str) -> None:
    gpus, said = visible_gpus(hgx8, env)
    assert ([g.index for g in gpus], said) == (want, why)


def test_visible_gpus_of_two_models(tmp_path: Path) -> None:
    """Two GPU models: CUDA's default FASTEST_FIRST order is not PCI order, and said;
    UUIDs unknown without /proc/driver/nvidia."""
    t = PciTree(tmp_path)
    t.node(0, "0-7")
    t.pci("pci0000:00/0000:00:01.0")
    t.gpu("pci0000:00/0000:00:01.0/0000:01:00.0", device=0x2330)
    t.gpu("pci0000:00/0000:00:01.0/0000:02:00.0", device=0x20B0)
    host = read_host(t.sys)
    order = ("CUDA_DEVICE_ORDER is not PCI_BUS_ID and the GPUs differ: CUDA's FASTEST_FIRST "
             "index order cannot be known from sysfs; PCI bus order is assumed")
    gpus, said = visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "1,0"})
    assert [g.index for g in gpus] == [1, 0] and said == f"CUDA_VISIBLE_DEVICES=1,0; {order}"
    gpus, said = visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "1",
                                     "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert [g.index for g in gpus] == [1] and said == "CUDA_VISIBLE_DEVICES=1"
    gpus, said = visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "GPU-1",
                                     "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert gpus == () and said == (
        "CUDA_VISIBLE_DEVICES=GPU-1; GPU-1: no GPU UUID known (no /proc/driver/nvidia); "
        "CUDA_VISIBLE_DEVICES stops at 'GPU-1' (as CUDA does)")
    # one visible GPU of the NVIDIA runtime's selection: models of the pool only
    gpus, said = visible_gpus(host, {"NVIDIA_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "0"})
    assert [g.index for g in gpus] == [0] and said == (
        "NVIDIA_VISIBLE_DEVICES=0; CUDA_VISIBLE_DEVICES=0")


def test_assign_rank_edges(hgx8: Topology) -> None:
    from sysverbs.ground.errors import NotFoundError, UsageError

    none = assign_rank(hgx8, env={})
    assert (none.gpu, none.rank, none.nics) == (None, None, ()) and none.reason.startswith(
        "no local rank: none of LOCAL_RANK")
    with pytest.raises(UsageError):
        assign_rank(hgx8, -1, env={})
    with pytest.raises(NotFoundError, match=r"^local rank 0 has no GPU: rank 0 \(given\), but "
                       r"no GPU is visible \(CUDA_VISIBLE_DEVICES='': no GPU visible\)$"):
        assign_rank(hgx8, 0, env={"CUDA_VISIBLE_DEVICES": ""})
    with pytest.raises(NotFoundError, match=r"^local rank 2 has no GPU: LOCAL_RANK=2, but only "
                       r"2 GPUs are visible \(CUDA_VISIBLE_DEVICES=4,5\), ranks 0 to 1$"):
        assign_rank(hgx8, env={"LOCAL_RANK": "2", "CUDA_VISIBLE_DEVICES": "4,5"})
    a = assign_rank(hgx8, env={"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "4,5"})
    assert (a.gpu.index, a.rank, [n.device for n in a.nics]) == (5, 1, ["mlx5_5"])  # type: ignore[union-attr]
    assert a.reason.startswith("LOCAL_RANK=1 -> GPU5 (0000:b3:00.0; CUDA_VISIBLE_DEVICES=4,5); "
                               "nearest class PIX, ")
    # one visible GPU: the plan is the host's, the rank may be any
    b = assign_rank(hgx8, 6, env={"CUDA_VISIBLE_DEVICES": "3"})
    assert (b.gpu.index, b.rank, [n.device for n in b.nics]) == (3, 6, ["mlx5_3"])  # type: ignore[union-attr]


def _port(n: int, state: Optional[str] = "ACTIVE", layer: Optional[str] = IBL,
          rate: Optional[float] = 400.0) -> Port:
    return Port(n, state, layer, rate, None, ())


def _rdma(name: str, address: Optional[str], *ports: Port, kind: str = "pf",
          bond_slave: bool = False) -> Nic:
    return Nic(name, address, kind, "pci" if address else "no PCI device above it", None,
               ports, bond_slave, None)


def test_candidates_and_what_each_filter_leaves_out() -> None:
    from sysverbs.ground.errors import UsageError, WrongTypeError
    from sysverbs.placement._assign import candidates

    host: Any = SimpleNamespace(nics=[
        _rdma("b", "0000:02:00.0", _port(2), _port(1)),
        _rdma("a10", "0000:01:00.0", _port(1)), _rdma("a9", "0000:01:00.0", _port(1)),
        _rdma("soft", None), _rdma("vf", "0000:03:00.2", _port(1), kind="vf"),
        _rdma("sf", "0000:03:00.3", _port(1), kind="sf"),
        _rdma("bf", "0000:04:00.0", _port(1)),
        _rdma("slave", "0000:05:00.0", _port(1), bond_slave=True),
        _rdma("empty", "0000:06:00.0"),
        _rdma("down", "0000:07:00.0", _port(1, "DOWN"), _port(2, None)),
        _rdma("eth", "0000:08:00.0", _port(1, layer=ETHL), _port(2, layer=None)),
        _rdma("slow", "0000:09:00.0", _port(1, rate=100.0), _port(2, rate=None),
              _port(3, rate=200.0))])
    keep, out = candidates(host, drop={"bf": "BlueField-3 (15b3:a2dc): a DPU"},
                           min_rate_gbps=200, link_layer="ib")
    assert [(c.nic.name, c.port.port) for c in keep] == [
        ("a9", 1), ("a10", 1), ("b", 1), ("b", 2), ("slow", 3)]
    assert [(f.device, f.port, f.code, f.reason) for f in out] == [
        ("soft", None, "unplaced", "not placed: no PCI device above it"),
        ("vf", None, "vf", "an SR-IOV VF (include_vfs to use it)"),
        ("sf", None, "vf", "a sub-function (include_vfs to use it)"),
        ("bf", None, "role", "not a compute NIC: BlueField-3 (15b3:a2dc): a DPU "
                             "(include_non_compute to use it)"),
        ("slave", None, "bond_slave", "its netdev is a bond slave (use the bond)"),
        ("empty", None, "no_ports", "no ports in sysfs"),
        ("down", 1, "port_not_active", "port state DOWN, not ACTIVE"),
        ("down", 2, "port_not_active", "port state unknown, not ACTIVE"),
        ("eth", 1, "link_layer", "link layer Ethernet, not InfiniBand"),
        ("eth", 2, "link_layer", "link layer unknown, not InfiniBand"),
        ("slow", 1, "rate", "rate 100 Gb/s below 200 Gb/s"),
        ("slow", 2, "rate", "rate unknown below 200 Gb/s")]
    # the defaults: any link layer, any rate, inactive ports left out; VFs, bond
    # slaves and inactive ports kept when asked for
    keep, out = candidates(host, include_vfs=True, include_bond_slaves=True,
                           require_active=False)
    names = [(c.nic.name, c.port.port) for c in keep]
    assert ("vf", 1) in names and ("sf", 1) in names and ("slave", 1) in names
    assert ("down", 1) in names and ("bf", 1) in names and ("slow", 2) in names
    # InfiniBand and Ethernet mixed: the host's one link layer (more ports: InfiniBand)
    assert ("eth", 1) not in names and ("eth", 2) not in names
    assert [(f.device, f.port, f.code, f.reason) for f in out if f.device == "eth"] == [
        ("eth", 1, "link_layer", "link layer Ethernet: this host's ports are InfiniBand and "
         "Ethernet (RoCE), which NCCL cannot join, so every rank uses InfiniBand (more "
         "ports, InfiniBand on a tie; link_layer= chooses)"),
        ("eth", 2, "link_layer", "link layer unknown: this host's ports are InfiniBand and "
         "Ethernet (RoCE), which NCCL cannot join, so every rank uses InfiniBand (more "
         "ports, InfiniBand on a tie; link_layer= chooses)")]
    with pytest.raises(WrongTypeError, match="^unexpected keyword argument 'colour'$"):
        candidates(host, colour=1)  # type: ignore[call-arg]
    with pytest.raises(WrongTypeError, match="^link_layer must be a str or None, not 1$"):
        candidates(host, link_layer=1)  # type: ignore[arg-type]
    with pytest.raises(WrongTypeError, match="^min_rate_gbps must be a number or None, not "
                                             "True$"):
        candidates(host, min_rate_gbps=True)
    with pytest.raises(WrongTypeError, match="^min_rate_gbps must be a number or None, not "
                                             "'1'$"):
        candidates(host, min_rate_gbps="1")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="^link layer must be InfiniBand or Ethernet, not "
                                         "'opa'$"):
        candidates(host, link_layer="opa")
    keep, _ = candidates(host, link_layer=" RoCE ", min_rate_gbps=0.5)
    assert [(c.nic.name, c.port.port) for c in keep] == [("eth", 1)]


# ------------------------------------------------------------------ placement/_acs.py

def test_acs_message_names_the_functions_apart_from_their_port() -> None:
    from sysverbs.placement._acs import AcsRedirect

    r = AcsRedirect("0000:04:00.0", "mlx5_0", "0000:03:00.0", "gpu", "0000:01:00.0",
                    ("0000:02:01.0", "0000:02:00.0"), "iommu_group", (None, None),
                    (("12", "10"), ("11", "11")))
    assert r.message().endswith(
        "Evidence: 0000:04:00.0 in iommu_group 12, its port 0000:02:01.0 in 10 (apart "
        "from its port: the port's ACS isolates it; run as root to read the ACS bits).")
    both = AcsRedirect("0000:04:00.0", "mlx5_0", "0000:03:00.0", "gpu", "0000:01:00.0",
                       ("0000:02:01.0", "0000:02:00.0"), "iommu_group", (None, None),
                       (("12", "10"), ("13", "11")))
    assert both.message().endswith(
        "Evidence: 0000:04:00.0 in iommu_group 12, its port 0000:02:01.0 in 10; "
        "0000:03:00.0 in iommu_group 13, its port 0000:02:00.0 in 11 (apart from its port: "
        "the port's ACS isolates it; run as root to read the ACS bits).")


def test_acs_records_are_frozen() -> None:
    import dataclasses

    from sysverbs.placement._acs import AcsRedirect, IommuMode, TranslatedNic

    for record in (AcsRedirect("a", "n", "p", "gpu", "s", ("x", "y"), "acs_ctl", (12, 0),
                               ((None, None), (None, None))),
                   IommuMode("off", "e"), TranslatedNic("a", "n", "e")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.evidence = "x"  # type: ignore[misc]


def test_ext_capability_edges() -> None:
    from sysverbs.placement._acs import acs_control, ext_capability

    last = bytearray(0x104)  # a header in the last 4 bytes: read, its body empty
    last[0x100:0x104] = (0x000D | 1 << 16).to_bytes(4, "little")
    assert ext_capability(bytes(last), 0x000D) == b""
    # an all-zero header: no extended capability at all (PCIe), not a capability 0
    assert ext_capability(bytes(0x1000), 0) is None
    assert acs_control(bytes(257)) == 0  # past 256 bytes: the extended space is there
    assert acs_control(bytes(256)) is None


def test_nvme_peers_are_physical_functions() -> None:
    from sysverbs.placement._acs import acs_redirects

    fn = SimpleNamespace
    host: Any = SimpleNamespace(gpus=[SimpleNamespace(address="0000:03:00.0")], nics=[], pci={
        "0000:05:00.0": fn(pci_class=0x010802, is_vf=False),
        "0000:05:00.1": fn(pci_class=0x010802, is_vf=True),
        "0000:06:00.0": fn(pci_class=0x010801, is_vf=False)})
    from sysverbs.placement import _acs

    assert list(_acs._peers(host)) == [("0000:03:00.0", "gpu"), ("0000:05:00.0", "nvme")]
    assert acs_redirects(host) == ()


def test_only_a_switch_below_its_upstream_port_redirects(tmp_path: Path) -> None:
    """Two functions meet at a switch when each hangs below one of its downstream
    ports: not at a root port, not with one right below the upstream port."""
    from sysverbs.placement._acs import find_redirects

    redirect = bytearray(4096)
    redirect[0x100:0x104] = (0x000D | 1 << 16).to_bytes(4, "little")
    redirect[0x106:0x108] = (0b11101).to_bytes(2, "little")

    def dev(address: str, *bridges: str) -> Any:
        d = tmp_path / address
        d.mkdir()
        (d / "config").write_bytes(bytes(redirect))
        return SimpleNamespace(address=address, bridges=bridges, path=str(d))

    rp, usp, dsp, x = "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:08.0"
    pci = {d.address: d for d in (
        dev(rp), dev(usp, rp), dev(dsp, usp, rp), dev(x, usp, rp),
        dev("0000:03:00.0", dsp, usp, rp), dev("0000:04:00.0", x, usp, rp),
        dev("0000:01:00.1", usp, rp), dev("0000:09:00.0", "0000:08:00.0", rp),
        dev("0000:08:00.0", rp))}
    found = find_redirects(pci, [("0000:04:00.0", "mlx5_0"), ("0000:01:00.1", "mlx5_1")],
                           [("0000:03:00.0", "gpu"), ("0000:09:00.0", "nvme")])
    assert [(r.device, r.peer, r.switch, r.ports, r.evidence, r.controls) for r in found] == [
        ("0000:04:00.0", "0000:03:00.0", usp, (x, dsp), "acs_ctl", (0b11101, 0b11101))]

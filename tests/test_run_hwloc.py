"""``sysverbs.rank.launch.plan`` against hwloc: for every rank of every bundled GPU fixture
and of generated hosts, in every CPU mode, the plan's ``cpus`` and ``mems`` are what
hwloc computes for the rank's anchor, with the split rule of docs/run.md applied on
top of hwloc's answers.

hwloc's view of a tree (the directory holding ``sys/``) is one ``lstopo-no-graphics
-i ROOT --if fsroot --of xml`` (the packages, L3 caches, cores and PUs with their CPU
sets, the PCI functions) and a few ``hwloc-calc -i ROOT --if fsroot`` runs that read
every anchor's location from stdin, one line each (``pci=BDF`` for a GPU or a NIC's
PCI function, ``os=mlx5_0`` for an RDMA device): its PUs (``-I pu --po``), its
memory nodes (``--local-memory --po``), the first PU of each of its cores
(``--no-smt -I pu --po``), its cores (``-I core``), L3s (``-I l3cache --po``) and
packages (``-I package --po``).  Nothing expected here is read by sysverbs: the GPUs
and their order are hwloc's PCI functions of an NVIDIA or AMD display or accelerator
class, by bus id; the fixtures are chosen by their recording files' text.

What each mode must give (``want``), from hwloc's answers for the anchor only:

* ``node``: the anchor's PUs; ``none``: the machine's PUs (every online CPU);
* ``socket``: the PUs of the package (of the anchor's) holding its lowest PU, and
  that package's ``--local-memory`` (``--pi package:N``): all its nodes;
* ``exclusive``: the anchor's cores (each core's PUs, keyed by its lowest PU, in that
  order) split among the ranks whose anchors have the same memory nodes by hwloc,
  rank ``j`` of ``count`` (GPUs in index order) taking cores ``[j*k + min(j, r),
  +k + (j < r))``, ``k, r = divmod(cores, count)``; ``exclusive-nosmt``: hwloc's
  ``--no-smt`` PUs of those same cores;
* ``core-complex``: the anchor's L3s, each as its PUs within the anchor's, sorted by
  (-PUs, lowest PU), rank ``j`` taking group ``j % groups``;
* ``mems`` (``mem="preferred"``): hwloc's ``--local-memory`` of the anchor, one node
  (``socket``: the package's).

The GPUs' shares are keyed by their place on the host, whatever the job's
``CUDA_VISIBLE_DEVICES`` (:func:`test_two_jobs_on_one_host_never_share_a_core`).

``gpu-cloud-vm`` (a KVM guest) gives every PCI function ``numa_node`` -1 and all 96
CPUs as ``local_cpulist``; it has one NUMA node, so hwloc puts the GPUs below the
machine with memory node 0, and the plan takes node 0 from ``local_cpulist``: the two
agree in every mode, checked like every fixture.  A device of unknown node on a host
of several nodes (generated here: an mlx5 below a host bridge of ``numa_node`` -1)
differs in kind: hwloc gives it every PU and every memory node, the plan every allowed
CPU in every mode, no node, no memory policy, and a warning
(:func:`test_unknown_node_on_a_multi_node_host`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

from sysverbs.rank.launch import CPU_MODES, Plan, plan
from sysverbs.testing import HostBuilder, fixture_names, fixture_path, materialize
from tests.conftest import fast_tmpdir, require
from tests.oracle import hwloc

pytestmark = pytest.mark.oracle

HWLOC_CALC = "hwloc-calc"
MODES = ("node", "socket", "exclusive", "exclusive-nosmt", "core-complex", "none")
GPU_VENDORS = (0x10DE, 0x1002)  # NVIDIA, AMD


def _gpu_count(text: str) -> int:
    """The PCI functions of an NVIDIA or AMD display (0x03xx) or processing
    accelerator (0x1200) class in a recording's text (one record per paragraph)."""
    count = 0
    for record in text.split("\n\n"):
        if "E: SUBSYSTEM=pci\n" not in record:
            continue
        cls = re.search(r"^A: class=0x([0-9a-f]{6})", record, re.M)
        vendor = re.search(r"^A: vendor=0x([0-9a-f]{4})", record, re.M)
        if cls and vendor and int(vendor.group(1), 16) in GPU_VENDORS and (
                cls.group(1)[:2] == "03" or cls.group(1)[:4] == "1200"):
            count += 1
    return count


#: Every bundled fixture with GPUs, and how many.
FIXTURE_GPUS = {name: n for name in fixture_names()
                if (n := _gpu_count(fixture_path(name).read_text()))}


# ------------------------------------------------------------------ generated hosts


@dataclass(frozen=True)
class Spec:
    """A generated host: 2 sockets x ``cores`` cores x 2 threads, 2 NUMA nodes per
    socket, an L3 per ``l3`` cores (None: per socket); ``gpus``: the node of each GPU
    (in PCI order); ``nics``: the node of each mlx5 (-1: a host bridge of unknown
    node), named mlx5_0, mlx5_1... in that order."""

    cores: int
    l3: Optional[int]
    gpus: tuple[int, ...]
    nics: tuple[int, ...] = ()


GENERATED = {
    # 16 cores a node, 4 L3s of 4 cores each: 3 GPUs on node 0 (6, 5 and 5 cores),
    # GPU1 and GPU3 between them; mlx5_0 0000:71:00.0, mlx5_1 81:00.0, mlx5_2 91:00.0
    "gen-ccx4": Spec(32, 4, (0, 1, 0, 2, 0, 2), (3, 1, -1)),
    # 6 cores a node, one L3 per socket (two nodes): 5 GPUs on node 1 (2, 1, 1, 1, 1)
    "gen-l3-socket": Spec(12, None, (1, 1, 1, 1, 1, 2, 3), (0,)),
    # 8 cores a node, 2 L3s of 4: 3 GPUs on node 3 (3, 3, 2 cores; L3 0, 1, 0)
    "gen-ccx4-wrap": Spec(16, 4, (3, 0, 3, 3)),
}


def build(spec: Spec) -> HostBuilder:
    """Device ``i`` (the GPUs, then the NICs) on a root port of a host bridge of its
    own, ``pci0000:BB`` with ``BB`` = 0x10 * (i + 1) on the device's node; the device
    on bus ``BB + 1``."""
    b = HostBuilder().cpu_topology(sockets=2, cores_per_socket=spec.cores,
                                   threads_per_core=2, nodes_per_socket=2,
                                   cores_per_l3=spec.l3)
    devices = [("gpu", n) for n in spec.gpus] + [("nic", n) for n in spec.nics]
    for i, (kind, node) in enumerate(devices):
        bus = 0x10 * (i + 1)
        hb = b.host_bridge(f"pci0000:{bus:02x}", numa_node=node)
        port = b.pci_bridge(f"{hb}/0000:{bus:02x}:01.0", port="root")
        path = f"{port}/0000:{bus + 1:02x}:00.0"
        if kind == "gpu":
            b.gpu(path)
        else:
            b.mlx5(path=path)
    return b


# ------------------------------------------------------------------ hwloc's view


@dataclass
class Where:
    """hwloc-calc's answers for one location."""

    pus: frozenset[int]
    nodes: frozenset[int]
    nosmt: frozenset[int]
    cores: int  # how many (-I core)
    l3: frozenset[int]  # their os indexes (-I l3cache --po)
    packages: frozenset[int]


@dataclass
class View:
    """hwloc's view of one tree."""

    root: Path
    machine: frozenset[int]
    packages: dict[int, frozenset[int]]
    l3: dict[int, frozenset[int]]
    cores: list[frozenset[int]]
    gpus: list[str]  # bus ids, in PCI order
    rdma: dict[str, str]  # OpenFabrics device -> bus id
    where: dict[str, Where] = field(default_factory=dict)
    package_nodes: dict[int, frozenset[int]] = field(default_factory=dict)

    @property
    def sysfs(self) -> str:
        return str(self.root / "sys")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    return {**env, "LC_ALL": "C"}


def bitmap(text: Optional[str]) -> frozenset[int]:
    """hwloc's bitmap (``0x0000ffff,,0xffffffff``: 32-bit groups, highest first)."""
    assert text and "f...f" not in text, text
    value = 0
    for group in text.split(","):
        value = (value << 32) | (int(group, 16) if group else 0)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def ints(text: str) -> frozenset[int]:
    return frozenset(int(x) for x in text.split(",") if x)


def calc(root: Path, args: Sequence[str], locations: Sequence[str]) -> list[str]:
    """``hwloc-calc -i ROOT --if fsroot ARGS`` on each location (stdin, one a line):
    one output line each."""
    proc = subprocess.run([HWLOC_CALC, "-i", str(root), "--if", "fsroot", *args],
                          input="".join(f"{loc}\n" for loc in locations),
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stdout.splitlines() if not x.startswith("Waiting for")]
    assert len(lines) == len(locations), (args, proc.stdout, proc.stderr)
    return lines


def view_of(root: Path, near: Sequence[str] = ()) -> View:
    """hwloc's view of the tree at ``root``: lstopo's XML, and hwloc-calc's answers
    for ``pci=`` every GPU and for the ``near`` locations."""
    proc = subprocess.run(["lstopo-no-graphics", "-i", str(root), "--if", "fsroot",
                           "--of", "xml", "-"], capture_output=True, text=True,
                          env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    tree = ET.fromstring(proc.stdout)
    packages: dict[int, frozenset[int]] = {}
    l3: dict[int, frozenset[int]] = {}
    cores: list[frozenset[int]] = []
    gpus: list[str] = []
    rdma: dict[str, str] = {}
    machine: frozenset[int] = frozenset()

    def walk(obj: ET.Element, pci: Optional[str]) -> None:
        nonlocal machine
        kind = obj.get("type")
        if kind == "Machine":
            machine = bitmap(obj.get("cpuset"))
        elif kind in ("Package", "L3Cache"):
            known = packages if kind == "Package" else l3
            index = int(obj.attrib["os_index"])
            assert index not in known, (kind, index)
            known[index] = bitmap(obj.get("cpuset"))
        elif kind == "Core":
            cores.append(bitmap(obj.get("cpuset")))
        elif kind == "PCIDev":
            pci = obj.get("pci_busid")
            m = re.match(r"([0-9a-f]{4}) \[([0-9a-f]{4}):", obj.get("pci_type", ""))
            assert m and pci, obj.attrib
            cls, vendor = int(m.group(1), 16), int(m.group(2), 16)
            if vendor in GPU_VENDORS and (cls >> 8 == 0x03 or cls == 0x1200):
                gpus.append(pci)
        elif kind == "OSDev" and obj.get("osdev_type") == "3" and pci:  # OpenFabrics
            rdma[obj.get("name", "")] = pci
        for child in obj.findall("object"):
            walk(child, pci)

    for top in tree.findall("object"):
        walk(top, None)
    assert machine and packages and cores and len(l3) >= 1
    view = View(root, machine, packages, l3, sorted(cores, key=min),
                sorted(gpus), rdma)
    locations = [f"pci={g}" for g in view.gpus] + list(near)
    pus, nodes, nosmt, core, l3s, pkgs = (
        calc(root, args, locations) for args in (
            ("-I", "pu", "--po"), ("--local-memory", "--po"), ("--no-smt", "-I", "pu", "--po"),
            ("-I", "core"), ("-I", "l3cache", "--po"), ("-I", "package", "--po")))
    # hwloc counts a CPU-less node (a Grace GPU's memory and its reserved nodes) local
    # to the object it hangs below; a rank's memory goes to nodes with CPUs only
    # (docs/run.md), so those are what is compared.
    cpuless = frozenset(int(n.name[4:]) for n in (root / "sys/devices/system/node").glob(
        "node[0-9]*") if not (n / "cpulist").read_text().strip())
    for i, loc in enumerate(locations):
        view.where[loc] = Where(ints(pus[i]), ints(nodes[i]) - cpuless, ints(nosmt[i]),
                                len(ints(core[i])), ints(l3s[i]), ints(pkgs[i]))
    order = sorted(packages)
    local = calc(root, ("--pi", "--local-memory", "--po"), [f"package:{p}" for p in order])
    view.package_nodes = {p: ints(line) - cpuless for p, line in zip(order, local)}
    return view


# ------------------------------------------------------------------ the rule


def want(view: View, loc: str, mode: str, j: int, count: int,
         allowed: Optional[frozenset[int]] = None) -> tuple[frozenset[int], frozenset[int]]:
    """(cpus, mems) of rank ``j`` of the ``count`` ranks whose anchors share the
    memory nodes of ``loc``, from hwloc's answers (the module's docstring), within
    the ``allowed`` PUs (whole cores: none of hwloc's ``--no-smt`` PUs is left out
    of a core that stays)."""
    w = view.where[loc]
    assert len(w.nodes) == 1, f"{loc}: hwloc gives memory nodes {sorted(w.nodes)}"
    ok = view.machine if allowed is None else allowed
    pus = w.pus & ok
    if mode == "none":
        return view.machine & ok, w.nodes
    if mode == "node":
        return pus, w.nodes
    if mode == "socket":
        (pkg,) = [p for p in w.packages if min(pus) in view.packages[p]]
        return view.packages[pkg] & ok, view.package_nodes[pkg]
    if mode in ("exclusive", "exclusive-nosmt"):
        cores = [c for c in view.cores if c <= w.pus]  # sorted by lowest PU
        assert len(cores) == w.cores and frozenset().union(*cores) == w.pus
        cores = [c for c in cores if c & ok]
        assert all(c <= ok for c in cores), "allowed: whole cores only"
        k, r = divmod(len(cores), count)
        assert k >= 1, "more ranks than cores: not compared here"
        start = j * k + min(j, r)
        mine = frozenset().union(*cores[start:start + k + (j < r)])
        return (mine if mode == "exclusive" else mine & w.nosmt), w.nodes
    assert mode == "core-complex"
    groups = sorted((g for i in w.l3 if (g := view.l3[i] & pus)),
                    key=lambda g: (-len(g), min(g)))
    return groups[j % len(groups)], w.nodes


def gpu_want(view: View, rank: int, mode: str) -> tuple[frozenset[int], frozenset[int]]:
    """:func:`want` for GPU ``rank``: its index among the GPUs with its memory nodes."""
    nodes = [view.where[f"pci={g}"].nodes for g in view.gpus]
    same = [i for i, n in enumerate(nodes) if n == nodes[rank]]
    return want(view, f"pci={view.gpus[rank]}", mode, same.index(rank), len(same))


def compare(got: Plan, wanted: tuple[frozenset[int], frozenset[int]]) -> None:
    cpus, mems = wanted
    assert (sorted(got.cpus), sorted(got.mems)) == (sorted(cpus), sorted(mems)), \
        got.reasons


# ------------------------------------------------------------------ the trees


#: The near= locations asked for on a tree, besides its GPUs.
NEAR = {"gen-ccx4": ("os=mlx5_0", "os=mlx5_2", "pci=0000:81:00.0"),
        "gpu-dgx-a100": ("os=mlx5_0", "pci=0000:4b:00.0")}


@pytest.fixture(scope="module", autouse=True)
def read_once() -> Iterator[None]:
    """Each tree read once: ``plan`` gets the one :class:`~sysverbs.placement.Topology`
    and :class:`~sysverbs.placement.CpuTopology` of a tree for all its calls here
    (the trees do not change; the readers are what every first call runs), so that
    the 400 plans cost milliseconds each, not the 3,000 file reads of a big host."""
    import sysverbs.placement as placement

    with pytest.MonkeyPatch.context() as mp:
        for name in ("read_cpus", "read_host"):
            real = getattr(placement, name)
            mp.setattr(placement, name, functools.lru_cache(maxsize=None)(real))
        yield


@pytest.fixture(scope="module")
def views() -> Iterator[Callable[[str], View]]:
    """hwloc's view of a fixture or generated tree by name, made on first use."""
    reason = hwloc.unavailable_reason() or (
        None if shutil.which(HWLOC_CALC) else f"{HWLOC_CALC} not found (Debian package "
                                              "hwloc)")
    require(reason, "hwloc (hwloc-calc, lstopo-no-graphics)")
    made: dict[str, View] = {}
    with fast_tmpdir("sv-run-hwloc-") as base:
        def get(name: str) -> View:
            if name not in made:
                if name in GENERATED:
                    root = build(GENERATED[name]).materialize(base / name).root
                else:
                    root = materialize(name, base / name).root
                made[name] = view_of(root, NEAR.get(name, ()))
            return made[name]

        yield get


def test_the_modes_are_all_here() -> None:
    assert set(CPU_MODES) == set(MODES)


def test_the_fixtures_with_gpus() -> None:
    assert set(FIXTURE_GPUS) >= {"gpu-dgx-a100", "gpu-dgx-b200", "gpu-hgx-h100",
                                 "gpu-mi300x", "gpu-pcie-2socket", "gpu-cloud-vm",
                                 "gpu-sriov-sf"}


CASES = [(name, rank) for name, n in [*FIXTURE_GPUS.items(),
                                      *((k, len(s.gpus)) for k, s in GENERATED.items())]
         for rank in range(n)]


@pytest.mark.parametrize("name", [*FIXTURE_GPUS, *GENERATED])
def test_hwloc_finds_the_gpus(name: str, views: Callable[[str], View]) -> None:
    """hwloc sees the GPUs the cases are made for; each on one memory node, its PUs
    whole cores."""
    view = views(name)
    want_n = FIXTURE_GPUS[name] if name in FIXTURE_GPUS else len(GENERATED[name].gpus)
    assert len(view.gpus) == want_n
    for g in view.gpus:
        w = view.where[f"pci={g}"]
        assert len(w.nodes) == 1 and w.pus and w.cores == len(w.nosmt)
    if name in GENERATED:
        spec = GENERATED[name]
        assert [min(view.where[f"pci={g}"].nodes) for g in view.gpus] == list(spec.gpus)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("name", "rank"), CASES)
def test_gpu_rank(name: str, rank: int, mode: str, views: Callable[[str], View]) -> None:
    view = views(name)
    got = plan(local_rank=rank, cpu=mode, sysfs_path=view.sysfs, environ={}, nics=False)
    assert got.anchor.kind == "gpu" and got.anchor.address == view.gpus[rank]
    compare(got, gpu_want(view, rank, mode))
    assert got.node == min(view.where[f"pci={view.gpus[rank]}"].nodes)
    assert not got.warnings


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("name", "near", "loc", "size"), [
    ("gen-ccx4", "mlx5_0", "os=mlx5_0", 3),
    ("gpu-dgx-a100", "mlx5_0", "os=mlx5_0", 2),
])
def test_near_an_rdma_device(name: str, near: str, loc: str, size: int, mode: str,
                             views: Callable[[str], View]) -> None:
    """``near`` an RDMA device (hwloc's ``os=``), ``size`` ranks near it."""
    view = views(name)
    for rank in range(size):
        got = plan(near, local_rank=rank, cpu=mode, sysfs_path=view.sysfs, environ={},
                   local_size=size, nics=False)
        assert got.anchor.address == view.rdma[near]
        compare(got, want(view, loc, mode, rank, size))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("name", "near", "size"), [
    ("gen-ccx4", "0000:81:00.0", 2),  # mlx5_1, on node 1 with GPU1
    ("gpu-dgx-a100", "0000:4b:00.0", 3),
])
def test_near_a_nic_pci_address(name: str, near: str, size: int, mode: str,
                                views: Callable[[str], View]) -> None:
    view = views(name)
    assert near in view.rdma.values()
    for rank in range(size):
        got = plan(near, local_rank=rank, cpu=mode, sysfs_path=view.sysfs, environ={},
                   local_size=size, nics=False)
        assert got.anchor.address == near and got.anchor.kind == "pci"
        compare(got, want(view, f"pci={near}", mode, rank, size))


def test_cloud_vm_numa_node_minus_one(views: Callable[[str], View]) -> None:
    """gpu-cloud-vm: every GPU has ``numa_node`` -1 and every CPU local; hwloc gives
    each all 96 PUs and memory node 0 (the only one), the plan node 0 from
    ``local_cpulist`` (the node's CPUs are all of them), with no warning."""
    view = views("gpu-cloud-vm")
    assert len(view.machine) == 96
    for rank, g in enumerate(view.gpus):
        w = view.where[f"pci={g}"]
        assert w.pus == view.machine and w.nodes == {0}
        got = plan(local_rank=rank, sysfs_path=view.sysfs, environ={}, nics=False)
        assert got.node == 0 and "(local_cpulist)" in got.reasons["node"]
        assert got.cpus == w.pus and got.mems == w.nodes and not got.warnings


@pytest.mark.parametrize("mode", MODES)
def test_unknown_node_on_a_multi_node_host(mode: str, views: Callable[[str], View]) -> None:
    """mlx5_2 below a host bridge of ``numa_node`` -1, on a host of 4 nodes: hwloc
    puts it below the machine (every PU, every memory node); the plan has no node:
    every allowed CPU in every mode, no memory policy, a warning."""
    view = views("gen-ccx4")
    w = view.where["os=mlx5_2"]
    assert w.pus == view.machine and w.nodes == {0, 1, 2, 3}
    got = plan("mlx5_2", local_rank=0, cpu=mode, sysfs_path=view.sysfs, environ={},
               nics=False)
    assert got.anchor.address == view.rdma["mlx5_2"]
    assert got.cpus == w.pus and got.node is None and got.mems == frozenset()
    assert any("NUMA node is unknown" in x for x in got.warnings)


@pytest.mark.parametrize("mode", MODES)
def test_allowed_cpus_make_unequal_groups(mode: str, views: Callable[[str], View]) -> None:
    """``allowed_cpus`` without the first core of node 0's first L3 and the last two
    of its third: node 0's L3 groups are then 6, 8, 4 and 8 PUs, taken largest first (then
    by lowest PU), and 13 cores for its 3 GPUs (5, 4, 4)."""
    view = views("gen-ccx4")
    l3 = sorted((view.l3[i] for i in view.where[f"pci={view.gpus[0]}"].l3), key=min)
    core = {min(c): c for c in view.cores}
    drop = core[min(l3[0])] | core[min(l3[2]) + 2] | core[min(l3[2]) + 3]
    assert len(drop) == 6
    allowed = view.machine - drop
    for rank in (0, 2, 4):  # node 0's GPUs
        got = plan(local_rank=rank, cpu=mode, sysfs_path=view.sysfs, environ={},
                   allowed_cpus=allowed, nics=False)
        compare(got, want(view, f"pci={view.gpus[rank]}", mode, rank // 2, 3, allowed))


#: Jobs on one host as launchers start them: each job's CUDA_VISIBLE_DEVICES, its
#: ranks local rank 0, 1... (one GPU each in the job's view).
JOBS = (("0,1", "2,3"), ("0", "1", "2", "3"), ("3,2,1,0",), ("1,0", "3,2"))


@pytest.mark.parametrize("mode", ("exclusive", "exclusive-nosmt", "core-complex"))
@pytest.mark.parametrize("name", ["gpu-hgx-h100", "gpu-dgx-b200", "gen-ccx4"])
def test_two_jobs_on_one_host_never_share_a_core(name: str, mode: str,
                                                 views: Callable[[str], View]) -> None:
    """Every rank of every job gets hwloc's share of its GPU's place on the host
    (``gpu_want`` of the host's GPU index), however the job's CUDA_VISIBLE_DEVICES
    lists it: in exclusive modes no two ranks of the host overlap."""
    view = views(name)
    for jobs in JOBS:
        taken: dict[int, int] = {}
        for visible in jobs:
            for rank, index in enumerate(int(x) for x in visible.split(",")):
                got = plan(local_rank=rank, cpu=mode, sysfs_path=view.sysfs, nics=False,
                           environ={"CUDA_VISIBLE_DEVICES": visible})
                assert got.anchor.address == view.gpus[index]
                compare(got, gpu_want(view, index, mode))
                if mode != "core-complex":
                    assert not got.cpus & set(taken), (visible, rank, got.reasons)
                    taken.update(dict.fromkeys(got.cpus, index))

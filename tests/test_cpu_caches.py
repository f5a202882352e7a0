"""The CPU caches of the testing kit's hosts (``cpu_topology(cores_per_l3=...,
caches=...)``) against hwloc and the kernel.

For every GPU fixture, hwloc (``hwloc-calc -i ROOT --if fsroot``, and the XML of
``lstopo-no-graphics``, tests/oracle/hwloc.py) must find exactly the L3 groups the
fixture's ``cpuN/cache/index3`` files describe, with the PUs of each one's
``shared_cpu_list``, the L3s of each NUMA node, one L2 and L1 per core, and the sizes
and ways of the fixture's real CPU (as tools/fixturegen/gpu_hosts.py says which CPU
that is).  The ``hwloc-calc`` command lines that give a PCI function's PUs, NUMA
nodes, cores, L3s and package on a fixture tree are checked against the tree's own
files (``local_cpulist``, ``numa_node``, ``topology/``).  The file names and formats
of a cache directory are compared with the running kernel's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest

from sysverbs import testing
from sysverbs.testing import HostBuilder, umockdev
from tests.conftest import fast_tmpdir, require
from tests.oracle import hwloc

HWLOC_CALC = "hwloc-calc"
GPU_FIXTURES = [n for n in testing.fixture_names() if n.startswith("gpu-")]

# The real CPUs (see tools/fixturegen/gpu_hosts.py, CPU CACHES): the number of L3s,
# the PUs of each, and one L3's size (bytes) and ways.
MB = 1 << 20
REAL_L3 = {
    "gpu-dgx-a100": (32, 8, 16 * MB, 16),  # 2x EPYC 7742: 16 CCX x 4 cores x 2 threads
    "gpu-dgx-b200": (2, 112, 300 * MB, 16),  # 2x Xeon 8570: one per socket
    "gpu-hgx-h100": (2, 96, 105 * MB, 15),  # 2x Xeon 8468
    "gpu-mi300x": (24, 8, 32 * MB, 16),  # 2x EPYC 9654: 12 CCD x 8 cores
    "gpu-pcie-2socket": (16, 4, 32 * MB, 16),  # 2x EPYC 9354: 8 CCD x 4 cores
    "gpu-cloud-vm": (1, 96, 16 * MB, 16),  # QEMU's default L3
    "gpu-sriov-sf": (1, 32, 37 * MB + MB // 2, 15),  # Xeon Gold 6426Y
    "gpu-gb200-nvl72": (2, 72, 114 * MB, 16),  # 2x Grace: one 114 MB L3 each
    "gpu-gb300-nvl72": (2, 72, 114 * MB, 16),
    "gpu-dgx-station-gb300": (1, 72, 114 * MB, 16),
    "gpu-gh200": (1, 72, 114 * MB, 16),
}


def _unavailable() -> Optional[str]:
    exe = shutil.which(HWLOC_CALC)
    if exe is None:
        return f"{HWLOC_CALC} not found (Debian package hwloc)"
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        return f"{HWLOC_CALC} --version exited {proc.returncode}: {proc.stderr.strip()}"
    return hwloc.unavailable_reason()


@pytest.fixture(scope="module")
def roots() -> Iterator[dict[str, Path]]:
    require(_unavailable(), "hwloc (hwloc-calc, lstopo-no-graphics)")
    with fast_tmpdir("sv-caches-") as base:
        yield {name: testing.materialize(testing.fixture_path(name), base / name).root
               for name in GPU_FIXTURES}


def calc(root: Path, *args: str) -> str:
    """``hwloc-calc -i ROOT --if fsroot ARGS`` (ROOT: the directory holding sys/)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    proc = subprocess.run([HWLOC_CALC, "-i", str(root), "--if", "fsroot", *args],
                          capture_output=True, text=True, env={**env, "LC_ALL": "C"},
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def ints(text: str) -> set[int]:
    """hwloc-calc's index list (``1,3,2``) as a set."""
    return {int(x) for x in text.split(",") if x}


def mask(text: str) -> frozenset[int]:
    """The kernel's ``%*pb`` mask (``00000000,0000000f``) as a set."""
    value = int(text.strip().replace(",", ""), 16)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def cpus_of(system: Path) -> list[Path]:
    return sorted((p for p in (system / "cpu").iterdir() if re.fullmatch(r"cpu\d+", p.name)),
                  key=lambda p: int(p.name[3:]))


def written_l3(root: Path) -> dict[int, frozenset[int]]:
    """{L3 id: its CPUs} from the tree's ``cpuN/cache/index3`` files, each CPU's files
    consistent (level 3, unified, the map and list the same set, holding the CPU)."""
    out: dict[int, frozenset[int]] = {}
    for cpu in cpus_of(root / "sys/devices/system"):
        d = cpu / "cache/index3"
        assert (d / "level").read_text() == "3\n" and (d / "type").read_text() == "Unified\n"
        shared = hwloc.parse_cpulist((d / "shared_cpu_list").read_text())
        assert mask((d / "shared_cpu_map").read_text()) == shared
        assert int(cpu.name[3:]) in shared
        assert out.setdefault(int((d / "id").read_text()), shared) == shared
    return out


def gpus(rec: umockdev.Recording) -> list[umockdev.Record]:
    """The GPUs (display and processing-accelerator classes) of a fixture."""
    out = []
    for r in rec:
        cls = int(r.value("class") or b"0", 16) if r.subsystem == "pci" else 0
        if cls >> 16 == 0x03 or cls >> 8 == 0x1200:
            out.append(r)
    return out


# ------------------------------------------------------------------- the fixtures


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_l3_groups_are_the_real_cpus(name: str, roots: dict[str, Path]) -> None:
    count, pus, _, _ = REAL_L3[name]
    l3 = written_l3(roots[name])
    assert len(l3) == count and {len(c) for c in l3.values()} == {pus}
    assert sorted(l3) == list(range(count))
    every = frozenset().union(*l3.values())
    assert sum(len(c) for c in l3.values()) == len(every)  # a partition of the CPUs


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_hwloc_finds_the_l3_groups(name: str, roots: dict[str, Path]) -> None:
    root = roots[name]
    l3 = written_l3(root)
    assert calc(root, "--number-of", "l3cache", "all") == str(len(l3))
    found: dict[int, set[int]] = {}
    for item in calc(root, "all", "-H", "l3cache.pu", "--po").split():
        m = re.fullmatch(r"L3Cache:(\d+)\.PU:(\d+)", item)
        assert m, item
        found.setdefault(int(m.group(1)), set()).add(int(m.group(2)))
    assert found == l3
    first = min(l3)  # one L3 by its id, as a placement would ask for it
    assert ints(calc(root, "--pi", f"l3cache:{first}", "-I", "pu", "--po")) == l3[first]


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_hwloc_l3s_of_each_node(name: str, roots: dict[str, Path]) -> None:
    root = roots[name]
    l3 = written_l3(root)
    nodes = sorted((root / "sys/devices/system/node").glob("node[0-9]*"))
    assert nodes
    for node in nodes:
        cpus = hwloc.parse_cpulist((node / "cpulist").read_text())
        if not cpus:
            continue  # CPU-less (Grace's GPU memory): hwloc gives it its parent's CPUs
        want = {i for i, c in l3.items() if c & cpus}
        got = ints(calc(root, "--pi", f"numanode:{node.name[4:]}", "-I", "l3cache", "--po"))
        assert got == want, node.name
        if all(l3[i] <= cpus for i in want):  # L3s inside the node (AMD CCX/CCD)
            assert calc(root, "--pi", f"numanode:{node.name[4:]}",
                        "--number-of", "l3cache") == str(len(want))


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_hwloc_cache_sizes_and_levels(name: str, roots: dict[str, Path]) -> None:
    """lstopo's caches: the real CPU's L3 size and ways; the fixtures carry the last
    level only (cache/index3), so hwloc sees no L1 or L2."""
    root = roots[name]
    _, _, size, ways = REAL_L3[name]
    xml_text, _ = hwloc.lstopo(root)
    objs = ET.fromstring(xml_text).iter("object")
    caches: dict[str, list[ET.Element]] = {}
    for o in objs:
        if (o.get("type") or "").endswith("Cache"):
            caches.setdefault(o.get("type") or "", []).append(o)
    assert {(o.get("cache_size"), o.get("cache_associativity"), o.get("cache_linesize"))
            for o in caches["L3Cache"]} == {(str(size), str(ways), "64")}
    assert set(caches) == {"L3Cache"}


def test_hwloc_sees_every_level_with_all_caches(tmp_path: Path) -> None:
    """``all_caches=True``: one L2, L1d and L1i per core (its SMT threads) in lstopo,
    each with the size its files give."""
    reason = hwloc.unavailable_reason()
    require(reason, "hwloc (lstopo)")
    hb = HostBuilder().cpu_topology(sockets=2, cores_per_socket=8, threads_per_core=2,
                                    cores_per_l3=4, caches="epyc-genoa", all_caches=True)
    root = hb.materialize(tmp_path).root
    xml_text, _ = hwloc.lstopo(root)
    caches: dict[str, list[ET.Element]] = {}
    for o in ET.fromstring(xml_text).iter("object"):
        if (o.get("type") or "").endswith("Cache"):
            caches.setdefault(o.get("type") or "", []).append(o)
    assert len(caches["L3Cache"]) == 4
    cpu0 = root / "sys/devices/system/cpu/cpu0"
    cores = int(calc(root, "--number-of", "core", "all"))
    siblings = hwloc.parse_cpulist((cpu0 / "topology/thread_siblings_list").read_text())
    for kind, index in (("L1Cache", 0), ("L1iCache", 1), ("L2Cache", 2)):
        objs_k = caches[kind]
        assert len(objs_k) == cores
        d = cpu0 / f"cache/index{index}"
        kb = int((d / "size").read_text().rstrip("K\n"))
        assert {o.get("cache_size") for o in objs_k} == {str(kb * 1024)}
        assert hwloc.parse_cpulist((d / "shared_cpu_list").read_text()) == siblings


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_hwloc_calc_recipe_for_a_gpu(name: str, roots: dict[str, Path]) -> None:
    """The command lines that give a GPU's PUs, NUMA nodes, first threads, cores, L3s
    and package on a fixture tree, against the tree's own files (first and last GPU)."""
    root = roots[name]
    system = root / "sys/devices/system"
    l3 = written_l3(root)
    found = gpus(umockdev.load(testing.fixture_path(name)))
    assert found
    for rec in (found[0], found[-1]):
        pci = root / "sys/bus/pci/devices" / rec.name
        local = hwloc.parse_cpulist((pci / "local_cpulist").read_text())
        where = f"pci={rec.name}"
        assert ints(calc(root, where, "-I", "pu", "--po")) == local
        numa = int((pci / "numa_node").read_text())
        nodes = {int(p.name[4:]) for p in system.glob("node/node[0-9]*")
                 if hwloc.parse_cpulist((p / "cpulist").read_text()) & local}
        cpuless = {int(p.name[4:]) for p in system.glob("node/node[0-9]*")
                   if not (p / "cpulist").read_text().strip()}
        # hwloc also counts the CPU-less nodes (Grace's GPU memory) of the GPU's package
        assert ints(calc(root, where, "--local-memory", "--po")) - cpuless == (
            nodes if numa < 0 else {numa})
        first = {min(hwloc.parse_cpulist(
            (system / f"cpu/cpu{c}/topology/thread_siblings_list").read_text()))
            for c in local}
        assert ints(calc(root, "--no-smt", where, "-I", "pu", "--po")) == first
        assert len(ints(calc(root, where, "-I", "core"))) == len(first)
        assert ints(calc(root, where, "-I", "l3cache", "--po")) == {
            i for i, c in l3.items() if c & local}
        assert ints(calc(root, where, "-I", "package", "--po")) == {
            int((system / f"cpu/cpu{c}/topology/physical_package_id").read_text())
            for c in local}


# ------------------------------------------------------------------- the builder


def test_layout_files_like_the_kernel(tmp_path: Path) -> None:
    """A cache directory holds the files of the running kernel's (but ``uevent``), in
    its formats: ``32K`` sizes, the mask of ``shared_cpu_map``."""
    real = Path("/sys/devices/system/cpu/cpu0/cache/index0")
    reason = None if (real / "level").is_file() else f"{real} not found"
    require(reason, "the kernel's CPU cache files")
    hb = HostBuilder().cpu_topology(sockets=2, cores_per_socket=8, threads_per_core=2,
                                    cores_per_l3=4, caches="epyc-genoa", all_caches=True)
    assert hb.l3_cpus == {0: (0, 1, 2, 3, 16, 17, 18, 19), 1: (4, 5, 6, 7, 20, 21, 22, 23),
                          2: (8, 9, 10, 11, 24, 25, 26, 27),
                          3: (12, 13, 14, 15, 28, 29, 30, 31)}
    cache = hb.materialize(tmp_path).sysfs / "devices/system/cpu/cpu21/cache"
    assert sorted(p.name for p in cache.iterdir()) == [f"index{i}" for i in range(4)]
    for index in cache.iterdir():
        names = {p.name for p in index.iterdir()}
        assert names == {p.name for p in real.iterdir()} - {"uevent", "power"}
        for key in ("size", "shared_cpu_map", "level", "type", "coherency_line_size"):
            want = (real.parent / index.name / key)
            if want.is_file():
                pattern = {"size": r"\d+K\n", "shared_cpu_map": r"[0-9a-f]+(,[0-9a-f]{8})*\n",
                           "level": r"[123]\n", "type": r"(Data|Instruction|Unified)\n",
                           "coherency_line_size": r"64\n"}[key]
                assert re.fullmatch(pattern, want.read_text()), want
                assert re.fullmatch(pattern, (index / key).read_text()), index / key
    assert (cache / "index3/shared_cpu_list").read_text() == "4-7,20-23\n"
    assert (cache / "index3/shared_cpu_map").read_text() == "00f000f0\n"
    assert (cache / "index3/id").read_text() == "1\n"
    assert (cache / "index3/size").read_text() == "32768K\n"
    assert (cache / "index3/number_of_sets").read_text() == "32768\n"
    assert (cache / "index2/shared_cpu_list").read_text() == "5,21\n"
    assert (cache / "index2/size").read_text() == "1024K\n"
    assert (cache / "index0/id").read_text() == "5\n"
    plain = HostBuilder().cpu_topology(sockets=2, cores_per_socket=8, threads_per_core=2,
                                       cores_per_l3=4, caches="epyc-genoa")
    last = plain.materialize(tmp_path / "plain").sysfs / "devices/system/cpu/cpu21/cache"
    assert [p.name for p in last.iterdir()] == ["index3"]
    assert (last / "index3/shared_cpu_list").read_text() == "4-7,20-23\n"


def test_default_is_one_l3_per_socket() -> None:
    hb = HostBuilder().cpu_topology(sockets=2, cores_per_socket=4, nodes_per_socket=2)
    assert hb.l3_cpus == {0: (0, 1, 2, 3), 1: (4, 5, 6, 7)}
    assert HostBuilder().l3_cpus == {}


def test_bad_cache_arguments() -> None:
    hb = HostBuilder()
    with pytest.raises(ValueError):
        hb.cpu_topology(cores_per_socket=8, nodes_per_socket=2, cores_per_l3=8)
    with pytest.raises(ValueError):
        hb.cpu_topology(cores_per_socket=8, cores_per_l3=3)
    with pytest.raises(ValueError):
        hb.cpu_topology(cores_per_socket=8, cores_per_l3=0)
    with pytest.raises(ValueError):
        hb.cpu_topology(caches="pentium")

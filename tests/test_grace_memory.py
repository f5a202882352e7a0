"""A Grace GPU's memory is CPU-less NUMA nodes (8 per GPU on GB200, HBM in 2, 10, 18,
26): never the GPU's node, never in ``run``'s ``mems``; ``topo`` shows it apart, as
nvidia-smi's ``GPU NUMA ID`` column does on a real GB200 tray (docs/placement.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sysverbs.placement import CpuTopology, mem_node
from sysverbs.placement._gpumem import parse_numa_status
from sysverbs.testing.builder_grace import GRACE_HOSTS
from tests.conftest import fast_tmpdir

ROOT = Path(__file__).resolve().parent.parent
#: nvidia-smi topo -m of a GB200 NVL72 tray (driver 580.105.08; docs/placement.md):
#: each GPU row's CPU Affinity and GPU NUMA ID.
NVIDIA_SMI_GB200 = {"GPU0": ("0-71", "2"), "GPU1": ("0-71", "10"),
                    "GPU2": ("72-143", "18"), "GPU3": ("72-143", "26")}
HBM = {2, 10, 18, 26}


@pytest.fixture(scope="module")
def gb200() -> Iterator[Path]:
    with fast_tmpdir("sv-hbm-") as base:
        yield GRACE_HOSTS["gb200-nvl72"]().materialize(base / "gb200").root


def _sysverbs(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "sysverbs", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=True).stdout


def test_matrix_gpu_numa_id_is_nvidia_smis(gb200: Path) -> None:
    rows = {line.split("\t")[0]: line.split("\t") for line in
            _sysverbs("topo", "--sysfs-path", str(gb200 / "sys")).splitlines()
            if line.startswith("GPU")}
    assert {g: (r[-4], r[-1]) for g, r in rows.items()} == NVIDIA_SMI_GB200
    assert all(r[-3] in ("0", "1") for r in rows.values())  # the CPU node, not the HBM


def test_topo_json_has_the_memory_node_apart(gb200: Path) -> None:
    doc = json.loads(_sysverbs("topo", "--json", "--sysfs-path", str(gb200 / "sys")))
    assert [(g["numa_node"], g["memory_node"]) for g in doc["gpus"]] == [
        (0, 2), (0, 10), (1, 18), (1, 26)]


@pytest.mark.parametrize("rank,mode", [(0, "bind"), (3, "preferred")])
def test_run_never_binds_an_hbm_node(gb200: Path, rank: int, mode: str) -> None:
    doc = json.loads(_sysverbs("run", "--dry-run", "--json", "--sysfs-path",
                               str(gb200 / "sys"), "--local-rank", str(rank), "--mem", mode,
                               "--", "true"))
    assert doc["node"] == (0 if rank < 2 else 1) and doc["mems"] == str(doc["node"])
    assert HBM <= {int(x) for x in doc["allowed_mems"].replace("-", ",").split(",")}


def test_a_cpu_node_without_memory_never_takes_the_hbm() -> None:
    """Node 0 (CPUs, no memory of its own) nearer to HBM node 2 than to node 1: the
    memory comes from node 1, the nearest node with CPUs."""
    cpus = frozenset(range(4))
    dist = {(a, b): (10 if a == b else 20 if {a, b} == {0, 2} else 40)
            for a in range(3) for b in range(3)}
    topo = CpuTopology(cpus, dict.fromkeys(cpus, 0), {c: c for c in cpus}, {}, 0,
                       {0: frozenset({0, 1}), 1: frozenset({2, 3}), 2: frozenset()},
                       frozenset({1, 2}), dist)
    node, why = mem_node(topo, 0, frozenset({0, 1, 2}))
    assert node == 1 and "node 1 is the nearest" in why


def test_numa_status_node_line() -> None:
    assert parse_numa_status("Node: 26\n") == 26  # hwloc reads this line; no capture shows more
    assert parse_numa_status("Node: -1\n") is None and parse_numa_status("") is None

"""placement's matrix, distances, pairing and layout, the host model and the steady
scrape (issue 41: the mutants of ``make mutation``), on small generated trees and the
recorded real outputs (``nvidia-smi topo -m`` under tests/data/nvidia-smi-topo).  Pure
functions and in-process reads: no subprocess.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sysverbs.placement import Topology, host_json, read_host, render_matrix
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

"""``sysverbs topo``'s matrix on the bundled Grace fixtures against the real
``nvidia-smi topo -m`` outputs of those machines (tests/data/nvidia-smi-topo, sources in
its PROVENANCE.md), cell by cell: every GPU-NIC and NIC-NIC cell, the NIC legend, the CPU
affinity and the GPU NUMA ID.  GPU-GPU cells are NV18 there (NVLink, which sysfs does
not show).  Where the sources disagree, docs/placement.md ("Grace: nvidia-smi's
matrix") says which one the rule follows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sysverbs import testing
from sysverbs.placement import Topology, read_host, render_matrix
from sysverbs.placement._distance import CROSS_SEGMENT, cross_segment
from tests.conftest import fast_tmpdir

from .placement_trees import DATA, nic_legend, parse_matrix

FIXTURES = ("gpu-gb200-nvl72", "gpu-gb300-nvl72", "gpu-dgx-station-gb300", "gpu-gh200")


@pytest.fixture(scope="module")
def hosts() -> Iterator[dict[str, Topology]]:
    with fast_tmpdir("sv-grace-smi-") as base:
        out = {}
        for name in FIXTURES:
            fake = testing.materialize(name, base / name)
            out[name] = read_host(fake.sysfs, fake.root / "proc")
        yield out


def cells(text: str) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
    """parse_matrix, each GPU-GPU cell dropped (NV# in the real outputs)."""
    names, rows, tail = parse_matrix(text)
    gpus = [i for i, n in enumerate(names) if n.startswith("GPU")]
    keep = {r: [c for i, c in enumerate(row) if not (r.startswith("GPU") and i in gpus)]
            for r, row in rows.items()}
    return names, keep, tail


def test_gb200_tray_is_its_real_matrix(hosts: dict[str, Topology]) -> None:
    """The GB200 NVL72 tray (drivers 580.105.08 and 570.172.08 print the same): every
    cell SYS but PIX between a BlueField-3's two functions, NICk = mlx5_k; CPU
    affinity and GPU NUMA ID per GPU.  NUMA Affinity: the real one adds the GPUs'
    reserved CPU-less nodes (``0,3-9,11-17``), sysverbs names the CPU node (the first)."""
    mine = render_matrix(hosts["gpu-gb200-nvl72"], legend="m")
    real = (DATA / "gb200-nvl72-tray-8nic.txt").read_text()
    m_names, m_cells, m_tail = cells(mine)
    r_names, r_cells, r_tail = cells(real)
    assert m_names == r_names and m_cells == r_cells
    assert nic_legend(mine) == nic_legend(real) == [f"mlx5_{i}" for i in range(8)]
    for gpu in ("GPU0", "GPU1", "GPU2", "GPU3"):
        (cpus, numa, gpu_numa), (r_cpus, r_numa, r_gpu_numa) = m_tail[gpu], r_tail[gpu]
        assert (cpus, gpu_numa) == (r_cpus, r_gpu_numa)
        assert numa == r_numa.split(",")[0]


def test_gh200_is_its_real_matrix(hosts: dict[str, Topology]) -> None:
    """The GH200 (driver 580.95.05; the published copy has no GPU NUMA ID column):
    GPU-NIC NODE on its one Grace though the NIC is in another PCI domain, the dual
    port PIX; CPU and NUMA affinity."""
    mine = render_matrix(hosts["gpu-gh200"], legend="m")
    real = (DATA / "gh200-2nic.txt").read_text()
    m_names, m_cells, m_tail = cells(mine)
    r_names, r_cells, r_tail = cells(real)
    assert m_names == r_names and m_cells == r_cells
    assert nic_legend(mine) == ["mlx5_0", "mlx5_1"]
    assert m_tail["GPU0"][:2] == r_tail["GPU0"] == ["0-71", "0"]


def test_gb300_tray_gpu_rows_are_the_cx8_trays(hosts: dict[str, Topology]) -> None:
    """No raw GB300 NVL72 matrix is published; the same Data Direct layout (GB200 with
    ConnectX-8, OCI BM.GPU.GB200-v3.4, its author's table) has every GPU0-NIC cell
    SYS: here every GPU-NIC cell is, the CX-8 PFs being in other PCI domains."""
    real = (DATA / "oci-gb200-v3.4-cx8-gpu0-row.md").read_text().splitlines()
    row = [c.strip() for c in real[2].strip("|").split("|")]
    assert row[0] == "GPU0" and row[5:] == ["SYS"] * 8
    _, m_cells, _ = cells(render_matrix(hosts["gpu-gb300-nvl72"]))
    for gpu in ("GPU0", "GPU1", "GPU2", "GPU3"):
        assert m_cells[gpu] == row[5:]


def test_dgx_station_gb300_pf_and_dma_function(hosts: dict[str, Topology]) -> None:
    """The DGX Station's one Grace: its PF NODE to the GPU by the GH200 rule, where a
    writeup's sentence says SYS (no matrix of the machine is published:
    docs/placement.md); its Data Direct DMA function PXB to the GPU, as that sentence
    says."""
    host = hosts["gpu-dgx-station-gb300"]
    _, m_cells, _ = cells(render_matrix(host))
    assert m_cells["GPU0"] == ["NODE", "NODE"]
    gpu, dma = host.pci["0009:06:00.0"], host.pci["0009:03:00.0"]
    assert host.distance(gpu.address, dma.address).smi == "PXB"


def test_the_rule_is_data() -> None:
    """Across PCI domains: SYS with several CPU nodes, the NUMA rule with one; one
    domain (every x86 host bridge) is left to the usual rules."""
    two = {0: frozenset({0}), 1: frozenset({1}), 2: frozenset()}
    one = {0: frozenset({0}), 1: frozenset()}
    assert CROSS_SEGMENT == {"one socket": None, "several sockets": "SYS"}
    found = cross_segment("pci0008:00", "pci0000:00", two)
    assert found is not None and found[0] == "SYS" and "0008 and 0000" in found[1]
    assert cross_segment("pci0009:00", "pci0000:00", one) is None
    assert cross_segment("pci0000:00", "pci0000:80", two) is None


def test_sources_are_named() -> None:
    """Each real text here has its source in the directory's PROVENANCE.md."""
    text = Path(DATA / "PROVENANCE.md").read_text()
    for name in ("gb200-nvl72-tray-8nic.txt", "gh200-2nic.txt",
                 "oci-gb200-v3.4-cx8-gpu0-row.md"):
        assert f"`{name}`" in text

"""GPUDirect RDMA per GPU/HCA pair against a real NCCL log (NVIDIA/nccl-tests#350,
tests/data/pcie-captures/nccl-tests-350-a100-gdr.json): host n013's tree rebuilt from
its ``nvidia-smi topo -m`` (real nvidia-smi's cells are the oracle for the tree:
sysverbs' matrix must print them) and NCCL 2.16.5's own lines.  NCCL put the GPU at
path PHB from mlx5_2 and SYS from mlx5_0 and, with ``NCCL_NET_GDR_LEVEL=SYS``, enabled
GDR for both; without it ("bandwidth peaks at around 13 GB/s") both are beyond the
default level.  sysverbs must give the same path per pair, the same verdict at the
log's level, and ``gdr_disabled_by_distance`` without it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sysverbs.placement import Topology, read_host, render_matrix
from sysverbs.placement._distance import nccl_distance
from sysverbs.rank.gdr import gdr_allowed, gdr_level
from sysverbs.rank.whynot import read_findings

from .pcitree import PciTree
from .placement_trees import parse_matrix

CAPTURE = json.loads((Path(__file__).parent / "data/pcie-captures/nccl-tests-350-a100-gdr.json")
                     .read_text())
NODES = {0: "0-63,128-191", 1: "64-127,192-255"}  # node 1's is the GPU's CPU Affinity
RATES = {"MT4117": "25 Gb/sec (1X EDR)", "MT4123": "200 Gb/sec (4X HDR)"}
#: (host bridge, root port, PCI function, NUMA node) of each device: the GPU's bus id
#: is the log's (81000), the cards' are the NCCL topology's NIC/21000 and NIC/D1000;
#: root ports and host bridges assumed, one each, on the NUMA node topo -m gives.
PLACES = {"GPU0": ("pci0000:80", "0000:80:01.1", "0000:81:00.0", 1),
          "mlx5_0": ("pci0000:20", "0000:20:01.1", "0000:21:00.0", 0),
          "mlx5_1": ("pci0000:20", "0000:20:01.1", "0000:21:00.1", 0),
          "mlx5_2": ("pci0000:d0", "0000:d0:01.1", "0000:d1:00.0", 1),
          "mlx5_3": ("pci0000:d0", "0000:d0:01.1", "0000:d1:00.1", 1)}
OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build  "
        "(dvs-builder@U22-I3-AE18-23-3)  Wed Jul  2 14:38:36 UTC 2025\n")


def _host(tmp: Path) -> PciTree:
    t = PciTree(tmp)
    for n, cpus in NODES.items():
        t.node(n, cpus)
    for hb, rp, numa in sorted({(hb, rp, numa) for hb, rp, _, numa in PLACES.values()}):
        t.pci(f"{hb}/{rp}", numa=numa)
    hb, rp, bdf, numa = PLACES["GPU0"]
    t.gpu(f"{hb}/{rp}/{bdf}", numa=numa, cpus=NODES[numa], device=0x20F1)  # A100-PCIE-40GB
    for name, (chip, state, layer) in CAPTURE["ibstat"].items():
        hb, rp, bdf, numa = PLACES[name]
        port = ("4: ACTIVE" if state == "Active" else "1: DOWN", layer, RATES[chip])
        t.rdma(name, f"{hb}/{rp}/{bdf}", ports=(port,), numa=numa, cpus=NODES[numa],
               cls=0x020000 if layer == "Ethernet" else 0x020700)
    # the driver as the log shows it: "DMA-BUF is available on GPU device 0" (the open
    # kernel module's DMA-BUF; the kernel release is not published, >= 5.12 assumed)
    for rel, text in (("proc/driver/nvidia/version", OPEN), ("sys/module/nvidia/taint", "OE\n"),
                      ("proc/sys/kernel/osrelease", "5.15.0\n")):
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    return t


@pytest.fixture(scope="module")
def n013(tmp_path_factory: pytest.TempPathFactory) -> Topology:
    return read_host(str(_host(tmp_path_factory.mktemp("n013")).sys))


def test_the_tree_prints_nvidia_smis_cells(n013: Topology) -> None:
    mine = render_matrix(n013, legend="m")
    names, cells, tail = parse_matrix(mine)
    real_names, real_cells, real_tail = parse_matrix(CAPTURE["topo_m"])
    assert (names, cells) == (real_names, real_cells)
    assert tail["GPU0"][:2] == real_tail["GPU0"][:2] == ["64-127,192-255", "1"]
    assert re.findall(r"^  (NIC\d+): (\S+)$", mine, re.M) == list(CAPTURE["nic_legend"].items())


def _nccl_paths() -> dict[str, tuple[str, bool]]:
    """HCA name -> (NCCL's path type from the GPU, GDR enabled) from the log's lines."""
    log = "\n".join(CAPTURE["log"])
    hcas = dict(re.findall(r"\[(\d+)\](mlx5_\d+):1/", log))
    types = dict(re.findall(r" NET/(\d+) \(\d+/[0-9.]+/([A-Z]+)\)", log))
    return {hcas[i]: (types[i], verdict == "Enabled")
            for verdict, i in re.findall(r"GPU Direct RDMA (Enabled|Disabled) for GPU 81000 / "
                                         r"HCA (\d+) \(distance", log)}


def test_each_pairs_path_and_verdict_are_nccls(n013: Topology) -> None:
    host = n013
    (gpu,) = host.gpus
    level = gdr_level(CAPTURE["nccl_env"])[0]
    assert level == "SYS" and "NCCL_NET_GDR_LEVEL set by environment to SYS" in \
        CAPTURE["log"][4]
    mine = {}
    for name in _nccl_paths():
        nic = next(n for n in host.nics if n.name == name)
        path = nccl_distance(gpu.pci, host.pci[nic.address], host.pci, False, True)
        assert path is not None
        mine[name] = (path, gdr_allowed(path, level))
    assert mine == _nccl_paths() == {"mlx5_2": ("PHB", True), "mlx5_0": ("SYS", True)}


def test_the_gpus_nic_gets_gdr_at_sys_and_a_finding_without_it(n013: Topology) -> None:
    host = n013
    found = read_findings(host, CAPTURE["nccl_env"], live=False)
    assert found.gdr.state == "dmabuf"
    assert [(p.gpu, p.device, p.path, p.level, p.enabled) for p in found.pairs] == [
        (0, "mlx5_2", "PHB", "SYS", True)]
    assert found.reasons() == []
    default = read_findings(host, {}, live=False)
    assert [(p.device, p.path, p.enabled) for p in default.pairs] == [("mlx5_2", "PHB", False)]
    ((code, message),) = default.reasons()
    assert code == "gdr_disabled_by_distance"
    assert "GPU0 (0000:81:00.0) -> mlx5_2:1: path PHB beyond the GDR level P2C" in message

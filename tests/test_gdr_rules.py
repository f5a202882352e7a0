"""NCCL's GPUDirect RDMA conditions that sysverbs.rank.gdr models beyond the peer-memory
module, the DMA-BUF prerequisites and the distance (tests/test_gdr.py): the GPU's own
support (``cudaDevAttrGPUDirectRDMASupported``: none on GeForce and on the GB10 of DGX
Spark), the DMA-BUF trial registration on each NIC (left to NCCL where sysverbs does not
know the NIC's driver), and the order NCCL checks them in, as pure functions; then a DGX
Spark rebuilt from public captures (tests/data/gdr-captures/dgx-spark-gb10.json), whose
NCCL logged "GPU Direct RDMA Disabled" for its HCAs while the open module and Linux 6.14
would have given the DMA-BUF path on a discrete GPU.

The real NCCL cannot be run here (no GPU: tests/test_gdr.py says why); the oracle of the
DGX Spark test is NCCL's own log of that host."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

import pytest

from sysverbs.placement import read_host
from sysverbs.rank.gdr import (
    GdrFacts,
    GdrPair,
    GdrSupport,
    gdr_findings,
    gdr_support,
    gpu_facts,
    gpu_without_gdr,
    pair_verdict,
    read_gdr_facts,
)
from sysverbs.rank.whynot import read_findings

from .pcitree import PciTree

SPARK = json.loads((Path(__file__).parent / "data/gdr-captures/dgx-spark-gb10.json")
                   .read_text())

# ------------------------------------------------------------------ the GPU's support


@pytest.mark.parametrize("model,device,lacks", [
    ("NVIDIA GB10", 0x2E12, "GB10 (DGX Spark)"),
    (None, 0x2E12, "GB10 (DGX Spark)"),             # no /proc/driver/nvidia: the PCI id
    ("NVIDIA GB10", None, "GB10 (DGX Spark)"),
    ("NVIDIA GeForce RTX 4090", 0x2684, "GeForce"),
    ("NVIDIA GeForce RTX 5090", None, "GeForce"),
    ("NVIDIA A100-SXM4-80GB", 0x20B2, None),
    ("NVIDIA RTX 6000 Ada Generation", 0x26B1, None),
    ("NVIDIA H100 80GB HBM3", 0x2330, None),
    ("NVIDIA GeForceless", None, None),              # a word of the name, not a part of one
    (None, None, None),
])
def test_which_gpus_cuda_gives_no_gdr(model: Optional[str], device: Optional[int],
                                      lacks: Optional[str]) -> None:
    why = gpu_without_gdr(model, device)
    assert (why is None) == (lacks is None)
    if lacks is not None:
        assert why is not None and lacks in why


OPEN_614 = GdrFacts(True, True, None, "open", (6, 14))
SPARK_GPU = ("000f:01:00.0", "NVIDIA GB10", 0x2E12)
ADA_GPU = ("0000:01:00.0", "NVIDIA RTX 6000 Ada Generation", 0x26B1)


def test_a_host_whose_every_gpu_lacks_gdr_has_none_whatever_the_module() -> None:
    assert gdr_support(OPEN_614, {}).state == "dmabuf"  # the rule without the GPU
    s = gdr_support(OPEN_614._replace(gpus=(SPARK_GPU,)), {})
    assert (s.state, s.code) == ("none", "gdr_unavailable")
    assert s.reason.startswith("no GPU of this host can: 000f:01:00.0 (NVIDIA GB10): "
                               "GB10 (DGX Spark) is an integrated GPU on unified memory")
    # the GPU is asked before the peer-memory module (paths.cc:486, whatever the NIC)
    peermem = OPEN_614._replace(peermem="module/nvidia_peermem/version", gpus=(SPARK_GPU,))
    assert gdr_support(peermem, {}).state == "none"
    geforce = ("0000:41:00.0", "NVIDIA GeForce RTX 4090", 0x2684)
    assert gdr_support(peermem._replace(gpus=(geforce,)), {}).state == "none"
    # one GPU that can: the host keeps its support, the other GPU's pairs are off
    assert gdr_support(peermem._replace(gpus=(SPARK_GPU, ADA_GPU)), {}).state == "peermem"
    assert gdr_support(OPEN_614._replace(gpus=(ADA_GPU,)), {}).state == "dmabuf"


# --------------------------------------------------------------------- one pair


LEVEL = ("P2C", "NCCL_NET_GDR_LEVEL unset, NCCL_NET_GDR_C2C=1")


#: the finding of a pair off: its GPU's own lack or no support (U), only the distance (D)
U, D = "gdr_unavailable", "gdr_disabled_by_distance"


@pytest.mark.parametrize("state,lacks,path,driver,enabled,code,says", [
    ("n/a", None, "PIX", "mlx5_core", None, None, "no driver"),
    ("none", None, "PIX", "mlx5_core", False, U, "no module"),
    ("none", None, "SYS", "mlx5_core", False, U, "no module"),  # no support before distance
    ("unknown", None, "PIX", "mlx5_core", None, None, "path PIX within"),
    ("unknown", None, "SYS", "mlx5_core", False, D, "path SYS beyond"),
    ("peermem", "GeForce", "PIX", "mlx5_core", False, U, "the GPU has no GPUDirect RDMA: Ge"),
    ("peermem", "GeForce", "SYS", "mlx5_core", False, U, "the GPU has no"),  # GPU before distance
    ("peermem", "GeForce", None, "mlx5_core", False, U, "the GPU has no"),
    ("peermem", None, None, "mlx5_core", None, None, "the GPU-NIC path is unknown"),
    ("peermem", None, "SYS", "mlx5_core", False, D, "path SYS beyond the GDR level P2C"),
    ("peermem", None, "PXB", "ice", True, None, "path PXB within"),        # peermem: no trial
    ("dmabuf", None, "PXB", "mlx5_core", True, None, "path PXB within"),
    ("dmabuf", None, "P2C", "mlx5_core", True, None, "path P2C (C2C GPU, NIC on its CPU) within"),
    ("dmabuf", None, "PXB", "ice", None, None, "unknown: NCCL decides by a trial "
     "ibv_reg_dmabuf_mr on dev0 at run time (its PCI driver ice is not one known"),
    ("dmabuf", None, "PXB", None, None, None, "(its PCI driver is unknown)"),
    ("dmabuf", None, "PHB", "ice", False, D, "path PHB beyond"),        # off whatever the trial
])
def test_a_pairs_verdict_in_nccls_order(state: str, lacks: Optional[str], path: Optional[str],
                                        driver: Optional[str], enabled: Optional[bool],
                                        code: Optional[str], says: str) -> None:
    reason = {"n/a": "no driver", "none": "no module"}.get(state, state)
    got, finding, why = pair_verdict(GdrSupport(state, reason), lacks, path, *LEVEL, "dev0",
                                     driver)
    assert got is enabled
    assert finding == code
    assert says in why


def test_findings_tell_a_gpus_own_lack_from_distance() -> None:
    def pair(gpu: int, path: Optional[str], enabled: Optional[bool], code: Optional[str],
             reason: str) -> GdrPair:
        return GdrPair(gpu, f"0000:{gpu + 1:02x}:00.0", "mlx5_0", 1, path, "P2C", enabled,
                       code, reason)

    pairs = (pair(0, "PIX", False, U, "the GPU has no GPUDirect RDMA: GeForce"),
             pair(1, "PIX", True, None, "path PIX within"),
             pair(2, "SYS", False, D, "path SYS beyond the GDR level P2C"),
             pair(3, None, False, U, "the GPU has no GPUDirect RDMA: GeForce"))
    found = gdr_findings(GdrSupport("peermem", "nvidia_peermem"), pairs)
    assert [code for code, _ in found] == [
        "gdr_unavailable", "gdr_disabled_by_distance", "gdr_unavailable"]
    assert found[0][1] == ("GPU0 (0000:01:00.0) -> mlx5_0:1: the GPU has no GPUDirect RDMA: "
                           "GeForce, so NCCL stages this GPU's transfers through host memory "
                           "(no GPUDirect RDMA)")
    assert found[1][1].endswith("set NCCL_NET_GDR_LEVEL=SYS if this path is fast enough")


# ---------------------------------------------------------- a DGX Spark, from its captures

LSPCI = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.(\d) .*\[([0-9a-f]{4})\]: "
                   r".*\[([0-9a-f]{4}):([0-9a-f]{4})\]")


def _spark(root: Path) -> PciTree:
    """The DGX Spark of the captures: each function of its ``lspci -nn`` at its address
    (a root port per domain, the functions below it), the driver's files as the forum
    post gives them (the open module 580.95.05, Linux 6.14, no nvidia_peermem)."""
    t = PciTree(root)
    t.node(0, "0-19")
    smi_name = re.search(r"\|\s+0\s+(NVIDIA GB10)\s", SPARK["nvidia_smi"]["lines"][1])
    assert smi_name is not None
    for line in SPARK["lspci"]["lines"]:
        m = LSPCI.match(line)
        assert m is not None, line
        dom, bus, slot, fn, cls, vendor, device = m.groups()
        bdf = f"{dom}:{bus}:{slot}.{fn}"
        path = f"pci{dom}:00/{dom}:00:00.0" + ("" if bus == "00" else f"/{bdf}")
        ids = {"cls": int(cls, 16) << 8, "vendor": int(vendor, 16), "device": int(device, 16)}
        if cls == "0300":
            t.gpu(path, **ids)
            info = root / f"proc/driver/nvidia/gpus/{bdf}/information"
            info.parent.mkdir(parents=True, exist_ok=True)
            info.write_text(f"Model: \t\t {smi_name.group(1)}\nBus Location: \t {bdf}\n")
        elif cls == "0200":
            t.pci(path, driver="mlx5_core", **ids)
            t.rdma(SPARK["rdma_names"][bdf], path, pci_function=False,
                   ports=(("4: ACTIVE", "Ethernet", "200 Gb/sec (4X HDR)"),))
        else:
            t.pci(path, **ids)
    kernel = re.search(r"Kernel: (\S+)", SPARK["nccl"]["lines"][0])
    driver = re.search(r"Driver: (\S+) \(open-source", SPARK["nccl"]["lines"][1])
    assert kernel is not None and driver is not None
    for rel, text in (
            ("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for "
             f"aarch64  {driver.group(1)}  Release Build\n"),   # the format; not published
            ("sys/module/nvidia/taint", "OE\n"),
            ("proc/sys/kernel/osrelease", f"{kernel.group(1)}\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return t


def test_dgx_spark_has_no_gdr_as_its_nccl_logged(tmp_path: Path) -> None:
    host = read_host(str(_spark(tmp_path).sys))
    assert [(g.address, g.model, g.pci.device) for g in host.gpus] == [SPARK_GPU]
    assert sorted(n.name for n in host.nics) == sorted(SPARK["rdma_names"].values())
    facts = read_gdr_facts(host.sysfs_path, host.proc_path)
    assert facts._replace(gpus=gpu_facts(host.gpus)) == OPEN_614._replace(gpus=(SPARK_GPU,))
    # what the rule said before it asked the GPU: the DMA-BUF path (the false "GDR on")
    assert gdr_support(facts, {}).state == "dmabuf"

    found = read_findings(host, {}, live=False)
    assert found.gdr.state == "none"
    assert "GB10 (DGX Spark) is an integrated GPU on unified memory" in found.gdr.reason
    ((code, message),) = found.reasons()
    assert code == "gdr_unavailable" and message.startswith(
        "NCCL would not use GPUDirect RDMA: no GPU of this host can: 000f:01:00.0 (NVIDIA "
        "GB10)")
    # NCCL's log: every HCA it names has GPU Direct RDMA disabled
    logged = {name: verdict for verdict, name in re.findall(
        r"GPU Direct RDMA (Enabled|Disabled) for HCA \d+ \u2018(\S+)\u2019",
        "\n".join(SPARK["nccl"]["lines"]))}
    assert logged == {"rocep1s0f0": "Disabled", "rocep1s0f1": "Disabled"}
    mine = {p.device: p.enabled for p in found.pairs}
    assert set(logged) <= set(mine)
    assert set(mine.values()) == {False}


def test_a_gpu_without_gdr_beyond_the_level_is_its_own_lack_everywhere() -> None:
    """A GeForce pair at SYS is off because of the GPU (NCCL asks it first): doctor, the
    prediction, metrics and nfd all say ``gdr_unavailable``, never the distance (whose fix,
    NCCL_NET_GDR_LEVEL, would change nothing)."""
    support = GdrSupport("peermem", "nvidia_peermem")
    lack = gpu_without_gdr("NVIDIA GeForce RTX 4090", 0x2684)
    far = GdrPair(0, "0000:01:00.0", "mlx5_0", 1, "SYS", "PXB", *pair_verdict(
        support, lack, "SYS", "PXB", "default", "mlx5_0", "mlx5_core"))
    distance = GdrPair(1, "0000:02:00.0", "mlx5_0", 1, "SYS", "PXB", *pair_verdict(
        support, None, "SYS", "PXB", "default", "mlx5_0", "mlx5_core"))
    assert (far.enabled, far.code) == (False, "gdr_unavailable")
    assert (distance.enabled, distance.code) == (False, "gdr_disabled_by_distance")
    assert distance.reason == "path SYS beyond the GDR level PXB (default)"
    assert [code for code, _ in gdr_findings(support, (far, distance))] == [
        "gdr_unavailable", "gdr_disabled_by_distance"]

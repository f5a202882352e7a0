"""The Grace pairing (sysverbs/placement/_pairing.py) as :func:`assign` applies it, on the
testing kit's Grace hosts, against rdma-core's ``kernel-boot/rdma_topo`` (its recorded
outputs, tests/data/rdma_topo/) and NCCL's own logs of a DGX Station GB300
(docs/placement.md): each GPU's NICs are the CX-8 rdma_topo ties to its DMA function
(Data Direct), or the compute NICs of its NUMA node; NCCL_IB_HCA carries the verbs
names, never NCCL's ``_dma`` names."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sysverbs.placement import Topology, assign, layout, read_host, read_vpd
from sysverbs.placement._pairing import nic_roles
from sysverbs.rank.lint import dma_base
from sysverbs.testing.builder_grace import GRACE_HOSTS
from tests.conftest import fast_tmpdir

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "rdma_topo"
BUILD = {"gb300-nvl72": {}, "gb300-nvl72-crossed": {"crossed": True},
         "gb300-nvl72-novpd": {"vpd": False}, "dgx-station-gb300": {}, "gb200-nvl72": {},
         "gh200": {}}


@pytest.fixture(scope="module")
def trees() -> Iterator[dict[str, Path]]:
    with fast_tmpdir("sv-pairing-") as base:
        out = {}
        for name, kw in BUILD.items():
            make = GRACE_HOSTS[name.replace("-crossed", "").replace("-novpd", "")]
            out[name] = make(**kw).materialize(base / name).root  # type: ignore[call-arg]
        yield out


@pytest.fixture(scope="module")
def hosts(trees: dict[str, Path]) -> dict[str, Topology]:
    return {name: read_host(root / "sys", root / "proc") for name, root in trees.items()}


def rdma_topo_pairs(tree: str) -> dict[str, tuple[set[str], str | None]]:
    """What rdma_topo's ``topo -j`` pairs: GPU -> (its NICs' RDMA devices, the DMA
    function); NUMA-based, every GPU of a node -> that node's."""
    doc = json.loads((DATA / f"{tree}.json").read_text())
    out: dict[str, tuple[set[str], str | None]] = {}
    for c in json.loads(doc["runs"][0]["stdout"]):
        names = {n for s in c["subsystems"].values() for n in s.get("infiniband", [])}
        for gpu in c.get("gpu_bdfs", [c.get("gpu_bdf")]):
            out[gpu] = (names, c.get("rdma_dma_bdf"))
    return out


@pytest.mark.parametrize("tree", ["gb300-nvl72", "gb300-nvl72-crossed", "dgx-station-gb300"])
def test_data_direct_gpu_gets_its_cx8(tree: str, hosts: dict[str, Topology]) -> None:
    """Each GPU: all ports of the CX-8 rdma_topo ties to its DMA function, each NIC
    with that ``dma_function``; the crossed tray proves the tie decides, not the PCI
    addresses (the PF in 0000 serves the GPU in 0009 there)."""
    theirs = rdma_topo_pairs(tree)
    plan = assign(hosts[tree])
    assert len(plan) == len(theirs) > 0
    for a in plan:
        assert a.gpu is not None and a.pairing is not None
        names, dma = theirs[a.gpu.address]
        assert {n.device for n in a.nics} == names
        assert {n.dma_function for n in a.nics} == {dma}
        assert a.pairing.rule == "data-direct" and a.pairing.status == "resolved"
        assert all(n + "_dma" in a.reason for n in names)
    if tree == "gb300-nvl72-crossed":
        assert [(a.gpu.address, [n.device for n in a.nics]) for a in plan if a.gpu] == [
            ("0008:06:00.0", ["ibP2p3s0"]), ("0009:06:00.0", ["ibp3s0"]),
            ("0018:06:00.0", ["ibP18p3s0"]), ("0019:06:00.0", ["ibP16p3s0"])]


@pytest.mark.parametrize("tree", ["gb200-nvl72", "gh200"])
def test_numa_gpu_gets_its_nodes_compute_nics(tree: str, hosts: dict[str, Topology]) -> None:
    """Without a tie-break each GPU gets all compute NICs of its node (rdma_topo's
    complex, BlueField-3 left out); the default 1:1 split covers them and says it is
    sysverbs' own tie-break where it splits."""
    theirs = rdma_topo_pairs(tree)
    whole = assign(hosts[tree], split_ties=False)
    assert {a.gpu.address: {n.device for n in a.nics} for a in whole if a.gpu} == {
        g: names for g, (names, _) in theirs.items()}
    split = assign(hosts[tree])
    for a in split:
        assert a.gpu is not None and a.pairing is not None and a.pairing.rule == "numa"
        names = theirs[a.gpu.address][0]
        assert {n.device for n in a.nics} <= names and a.nics
        peers = [g for g in theirs if theirs[g][0] == names]
        assert ("sysverbs' own tie-break" in a.reason) == (len(peers) > 1)
    if tree == "gb200-nvl72":
        assert [[n.device for n in a.nics] for a in split] == [
            ["mlx5_0"], ["mlx5_1"], ["mlx5_4"], ["mlx5_5"]]
        left = {f.device: f.code for f in split[0].filtered}
        assert left == {"mlx5_2": "role", "mlx5_3": "role", "mlx5_6": "role",
                        "mlx5_7": "role"}


def test_unresolved_without_vpd_gives_no_guess(hosts: dict[str, Topology]) -> None:
    """rdma_topo stops there (no V3 UUID); sysverbs gives each GPU no NIC, the status
    ``unresolved``, the reason and the four CX-8s as candidates."""
    assert "does not have a VPD V3 UUID" in (
        DATA / "gb300-nvl72-novpd.json").read_text()
    for a in assign(hosts["gb300-nvl72-novpd"]):
        assert a.pairing is not None and a.nics == ()
        assert a.pairing.status == "unresolved" and "its vpd is absent" in a.reason
        assert a.pairing.candidates == ("ibp3s0", "ibP2p3s0", "ibP16p3s0", "ibP18p3s0")


def test_the_kernels_tie_comes_first(hosts: dict[str, Topology]) -> None:
    """What the uverbs ioctl answers (read_data_direct's form) resolves without VPD,
    before VPD; an errno leaves it unresolved and is named."""
    host = hosts["dgx-station-gb300"]
    kernel = {"0001:03:00.0": "0009:03:00.0", "0001:03:00.1": "0009:03:00.0"}
    nic: Any = layout(host, None, kernel).complexes[0]["nic"]
    assert nic["status"] == "resolved" and "ioctl" in nic["via"]
    (a,) = assign(host, layout=layout(host, read_vpd(host), kernel))
    assert [n.device for n in a.nics] == ["mlx5_0", "mlx5_1"] and "ioctl" in a.reason
    failed = {"0001:03:00.0": "errno ENODEV: No such device"}
    nic = layout(host, None, failed).complexes[0]["nic"]
    assert nic["status"] == "unresolved" and "ENODEV" in nic["reason"]


def test_roles_and_their_signals(hosts: dict[str, Topology]) -> None:
    roles = nic_roles(hosts["gb300-nvl72"])
    assert {n: r.role for n, r in roles.items()} == {
        "ibp3s0": "compute", "ibP2p3s0": "compute", "ibP16p3s0": "compute",
        "ibP18p3s0": "compute", "roceP6p1s0f0": "dpu", "roceP6p1s0f1": "dpu",
        "roceP22p1s0f0": "dpu", "roceP22p1s0f1": "dpu"}
    assert roles["ibP16p3s0"].as_dict()["signals"] == {
        "device_id": "15b3:1023", "pci_class": "0x020700", "link_layers": ["InfiniBand"],
        "numa_node": 1}
    assert roles["roceP22p1s0f0"].device_id == "15b3:a2dc"
    with_all = assign(hosts["gb200-nvl72"], include_non_compute=True, link_layer="eth")
    assert [n.device for n in with_all[0].nics] == []  # BF-3 is on no GPU's pairing


def _sysverbs(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sysverbs", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, env=env)


def test_env_gives_nccls_real_value(trees: dict[str, Path]) -> None:
    """DGX Station GB300: NCCL's log of the real machine reads ``NCCL_IB_HCA set to
    =mlx5_0:1,mlx5_1:1`` and then uses ``mlx5_0_dma``/``mlx5_1_dma``; sysverbs env
    gives that value, no ``_dma`` name."""
    root = trees["dgx-station-gb300"]
    proc = _sysverbs("env", "--sysfs-path", str(root / "sys"), "--local-rank", "0")
    assert "export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1'" in proc.stdout, proc.stderr
    assert "_dma'" not in proc.stdout


def test_nccl_check_names_the_dma_name(trees: dict[str, Path]) -> None:
    """``mlx5_0_dma`` in NCCL_IB_HCA matches nothing (NCCL filters on the verbs name):
    nccl check says so and its fix is the real machine's value."""
    import os

    root = trees["dgx-station-gb300"]
    env = dict(os.environ, NCCL_IB_HCA="=mlx5_0_dma:1,mlx5_1_dma:1")
    proc = _sysverbs("nccl", "check", "--json", "--sysfs-path", str(root / "sys"),
                     "--dev-dir", str(root / "dev/infiniband"), env=env)
    doc = json.loads(proc.stdout)
    codes = [w["code"] for w in doc["warnings"]]
    assert codes[:2] == ["dma-name", "dma-name"] and proc.returncode == 1
    assert doc["warnings"][0]["fix"] == "=mlx5_0:1,mlx5_1:1"
    assert dma_base("mlx5_0_dma", ["mlx5_0"]) == "mlx5_0"
    assert dma_base("mlx5_0_dma", ["mlx5_0_dma"]) is None

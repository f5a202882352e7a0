"""``gdr_unavailable`` and ``gdr_disabled_by_distance`` (sysverbs/rank/gdr.py): NCCL's
GPUDirect RDMA rules on generated trees, each way, and on every surface (doctor, metrics
checked by promtool, nfd).

The real NCCL cannot be the oracle here: ``ncclCommInitRank`` of PyPI's NCCL 2.32.3
fails at CUDA's initialisation without a GPU ("CUDA driver version is insufficient"),
before the topology where ``ncclTopoCheckGdr`` runs, and ``ncclGetUniqueId`` (what
tests/test_nccl_oracle.py drives) never reaches it.  The rules are NCCL's source lines
(``sysverbs.rank.gdr.RULES``); these tests pin each of them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sysverbs import testing
from sysverbs.fleet import metrics
from sysverbs.fleet.facts import collect_facts
from sysverbs.fleet.nfd import feature_file
from sysverbs.placement import read_host
from sysverbs.rank.gdr import (
    PEERMEM_FILES,
    GdrFacts,
    gdr_findings,
    gdr_level,
    gdr_support,
    read_gdr_facts,
)
from sysverbs.rank.whynot import read_findings
from tests import prom
from tests.conftest import require

PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 "
               "09:35:42 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build  "
        "(dvs-builder@U16-I3-B03-4-3)  Fri May 31 09:34:20 UTC 2024\n")


def _write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _driver(root: Path, *, version: str = PROPRIETARY, kernel: str = "6.1.0-25-amd64",
            peermem: str = "") -> None:
    """An NVIDIA driver on the tree at ``root`` (``root/sys``, ``root/proc``)."""
    _write(root, "sys/module/nvidia/taint", "POE\n" if "Open" not in version else "OE\n")
    _write(root, "proc/driver/nvidia/version", version)
    _write(root, "proc/sys/kernel/osrelease", kernel + "\n")
    if peermem:
        _write(root, "sys/" + peermem, "1.0\n")


@pytest.fixture(scope="module")
def two_socket(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """gpu-pcie-2socket: GPU0/1 on socket 0's root complex with mlx5_0 (PHB), GPU2/3
    across the sockets from their NIC (SYS)."""
    return Path(testing.materialize("gpu-pcie-2socket",
                                    tmp_path_factory.mktemp("2s")).sysfs).parent


# ---------------------------------------------------------------- the host's support


@pytest.mark.parametrize("peermem", PEERMEM_FILES)
def test_each_peermem_file_gives_gdr(tmp_path: Path, peermem: str) -> None:
    _driver(tmp_path, peermem=peermem)
    facts = read_gdr_facts(str(tmp_path / "sys"), str(tmp_path / "proc"))
    assert facts == GdrFacts(True, True, peermem, "proprietary", (6, 1))
    s = gdr_support(facts, {"NCCL_DMABUF_ENABLE": "0"})
    assert (s.state, s.code) == ("peermem", None)


@pytest.mark.parametrize("version,kernel,env,state", [
    (PROPRIETARY, "6.1.0", {}, "none"),               # no peermem, no DMA-BUF from the GPU
    (OPEN, "6.1.0", {}, "dmabuf"),                    # open module on >= 5.12
    (OPEN, "6.1.0", {"NCCL_DMABUF_ENABLE": "0"}, "none"),
    (OPEN, "6.1.0", {"NCCL_DMABUF_ENABLE": "0x0"}, "none"),   # strtoll base 0
    (OPEN, "6.1.0", {"NCCL_DMABUF_ENABLE": "junk"}, "none"),  # no digits: 0
    (OPEN, "5.11.22", {}, "none"),                    # ibv_reg_dmabuf_mr came in 5.12
    (OPEN, "5.12.0", {}, "dmabuf"),
])
def test_the_dmabuf_path(tmp_path: Path, version: str, kernel: str, env: dict[str, str],
                         state: str) -> None:
    _driver(tmp_path, version=version, kernel=kernel)
    s = gdr_support(read_gdr_facts(str(tmp_path / "sys"), str(tmp_path / "proc")), env)
    assert s.state == state, s.reason
    assert s.code == ("gdr_unavailable" if state == "none" else None)


def test_the_module_flavour_from_its_taint_when_proc_has_no_version(tmp_path: Path) -> None:
    _driver(tmp_path)
    os.unlink(tmp_path / "proc/driver/nvidia/version")
    assert read_gdr_facts(str(tmp_path / "sys"), str(tmp_path / "proc")).flavour == \
        "proprietary"
    _write(tmp_path, "sys/module/nvidia/taint", "OE\n")
    assert read_gdr_facts(str(tmp_path / "sys"), str(tmp_path / "proc")).flavour == "open"


def test_no_driver_is_not_applicable_and_never_alarms(tmp_path: Path) -> None:
    (tmp_path / "sys/module").mkdir(parents=True)
    s = gdr_support(read_gdr_facts(str(tmp_path / "sys"), str(tmp_path / "proc")), {})
    assert (s.state, s.code, gdr_findings(s, ())) == ("n/a", None, [])


def test_what_cannot_be_read_is_unknown(tmp_path: Path) -> None:
    _driver(tmp_path)
    os.unlink(tmp_path / "proc/sys/kernel/osrelease")
    _write(tmp_path, "proc/driver/nvidia/version", OPEN)
    assert gdr_support(read_gdr_facts(str(tmp_path / "sys"), str(tmp_path / "proc")),
                       {}).state == "unknown"
    # a recording has no /sys/module: the peer-memory module is unknown
    facts = GdrFacts(True, False, None, "proprietary", (6, 1))
    assert gdr_support(facts, {}).state == "unknown"


# ------------------------------------------------------------------------ the level


@pytest.mark.parametrize("value,level", [
    (None, "P2C"), ("LOC", "LOC"), ("PIX", "PIX"), ("PXB", "PXB"), ("P2C", "P2C"),
    ("PXN", "PXN"), ("PHB", "PHB"), ("SYS", "SYS"),
    ("0", "LOC"), ("1", "PIX"), ("2", "PXB"), ("3", "PHB"), ("4", "SYS"), ("5", "SYS"),
    ("9", "SYS"), ("2abc", "PXB"), ("0x3", "PHB"),
    ("phb", "P2C"), ("", "P2C"), ("-1", "P2C"),  # no match: NCCL's default
])
def test_nccl_get_level(value: str, level: str) -> None:
    env = {} if value is None else {"NCCL_NET_GDR_LEVEL": value}
    assert gdr_level(env)[0] == level
    assert gdr_level({**env, "NCCL_NET_GDR_C2C": "0"})[0] == (
        "PXB" if level == "P2C" and value != "P2C" else level)


# ------------------------------------------------------------------- GPU/NIC pairs


def _pairs(root: Path, env: dict[str, str]) -> list[tuple[int, str, str, object]]:
    found = read_findings(read_host(str(root / "sys")), env, live=False)
    return [(p.gpu, p.device, p.path or "", p.enabled) for p in found.pairs]


def test_distance_beyond_the_level(two_socket: Path) -> None:
    (two_socket / "sys/module").mkdir(exist_ok=True)  # the peer-memory module is absent
    assert _pairs(two_socket, {}) == [
        (0, "mlx5_0", "PHB", False), (1, "mlx5_1", "PHB", False),
        (2, "mlx5_0", "SYS", False), (3, "mlx5_1", "SYS", False)]
    assert [p[3] for p in _pairs(two_socket, {"NCCL_NET_GDR_LEVEL": "PHB"})] == [
        None, None, False, False]  # within the level, but the support is unknown here


def test_with_peermem_the_near_pairs_use_gdr(two_socket: Path) -> None:
    _driver(two_socket, peermem="module/nvidia_peermem/version")
    try:
        assert [p[3] for p in _pairs(two_socket, {"NCCL_NET_GDR_LEVEL": "PHB"})] == [
            True, True, False, False]
        found = read_findings(read_host(str(two_socket / "sys")), {}, live=False)
        codes = [c for c, _ in found.reasons()]
        assert codes == ["gdr_disabled_by_distance"] * 4
        assert "GPU2 (0000:c1:00.0) -> mlx5_0:1: path SYS beyond the GDR level P2C " \
            "(NCCL_NET_GDR_LEVEL unset, NCCL_NET_GDR_C2C=1)" in found.reasons()[2][1]
    finally:
        os.unlink(two_socket / "sys/module/nvidia_peermem/version")


def test_grace_c2c_makes_the_cpus_nic_p2c(tmp_path: Path) -> None:
    """GH200: the GPU under a Grace root port, its NICs on the same CPU: P2C, GDR on by
    default (NCCL_NET_GDR_C2C=1), off with NCCL_NET_GDR_C2C=0 (level PXB)."""
    from sysverbs.testing.builder_grace import gh200

    root = Path(gh200().materialize(tmp_path).root)
    _driver(root, peermem="module/nvidia_peermem/version")
    assert _pairs(root, {}) == [(0, "mlx5_0", "P2C", True), (0, "mlx5_1", "P2C", True)]
    assert {p[3] for p in _pairs(root, {"NCCL_NET_GDR_C2C": "0"})} == {False}


# ------------------------------------------------------------------- the surfaces


def _sv(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env = {k: v for k, v in env.items() if not k.startswith("NCCL_")}
    return subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                          text=True, env=env, timeout=120)


def test_every_surface_reports_gdr_unavailable(tmp_path: Path) -> None:
    root = Path(testing.materialize("gpu-pcie-2socket", tmp_path).sysfs).parent
    _driver(root)  # proprietary module, no peermem
    tree = ("--sysfs-path", str(root / "sys"), "--dev-dir", str(root / "dev/infiniband"))
    doc = json.loads(_sv("doctor", "--json", "--no-open", "--predict", "--providers",
                         "builtin", *tree).stdout)
    (reason,) = [r for r in doc["host"] if r["code"].startswith("gdr_")]
    assert reason["code"] == "gdr_unavailable" and reason["severity"] == "warning"
    assert "the proprietary NVIDIA kernel module gives no DMA-BUF" in reason["message"]
    assert doc["gdr"]["state"] == "none"
    topo = json.loads(_sv("topo", "--json", *tree).stdout)
    assert [p for p in topo["problems"] if p.startswith("gdr_")] == [
        f"gdr_unavailable: {reason['message']}"]
    nccl = [p for p in doc["predict"] if p["library"] == "nccl"]
    assert nccl == [{"library": "nccl", "outcome": "IB transport on 2 port(s), no GDR",
                     "reason": "gdr_unavailable", "details": ["mlx5_0:1", "mlx5_1:1"]}]

    facts = collect_facts(sysfs_path=str(root / "sys"), dev_dir=tree[3], providers="builtin",
                          source="sysfs", environ={})
    page = metrics.render(facts)
    require(prom.unavailable(prom.PROMTOOL), "promtool (Debian's prometheus package)")
    assert prom.promtool_check_metrics(page) == (0, "")
    lines = page.decode().splitlines()
    assert "sysverbs_gdr_unavailable 1.0" in lines
    assert not any(s.startswith("sysverbs_gdr_disabled_by_distance{") for s in lines)
    labels = feature_file(facts, expires_in=60).labels()
    assert ("sysverbs.feature.node.kubernetes.io/gdr.unavailable", "true") in labels

    _write(root, "sys/module/nvidia_peermem/version", "1.0\n")  # now: distance only
    facts = collect_facts(sysfs_path=str(root / "sys"), dev_dir=tree[3], providers="builtin",
                          source="sysfs", environ={"NCCL_NET_GDR_LEVEL": "PHB"})
    lines = metrics.render(facts).decode().splitlines()
    assert "sysverbs_gdr_unavailable 1.0" not in lines
    assert [s for s in lines if s.startswith("sysverbs_gdr_disabled_by_distance{")] == [
        f'sysverbs_gdr_disabled_by_distance{{device="mlx5_{n % 2}",gpu="{n}",level="PHB",'
        f'path="SYS",pci_bus_id="00000000:{bus}:00.0",port="1"}} 1.0'
        for n, bus in ((2, "C1"), (3, "E1"))]
    labels = feature_file(facts, expires_in=60).labels()
    assert ("sysverbs.feature.node.kubernetes.io/gdr.disabled-by-distance", "true") in labels
    assert not any(k.endswith("/gdr.unavailable") for k, _ in labels)

    # GPU2 a GeForce (no GDR of its own): its SYS pair is off for the GPU, not the distance
    info = root / "proc/driver/nvidia/gpus/0000:c1:00.0/information"
    info.write_text(re.sub(r"Model:.*", "Model: \t\t NVIDIA GeForce RTX 4090", info.read_text()))
    facts = collect_facts(sysfs_path=str(root / "sys"), dev_dir=tree[3], providers="builtin",
                          source="sysfs", environ={"NCCL_NET_GDR_LEVEL": "PHB"})
    lines = metrics.render(facts).decode().splitlines()
    assert "sysverbs_gdr_unavailable 1.0" in lines
    assert [s for s in lines if s.startswith("sysverbs_gdr_disabled_by_distance{")] == [
        'sysverbs_gdr_disabled_by_distance{device="mlx5_1",gpu="3",level="PHB",'
        'path="SYS",pci_bus_id="00000000:E1:00.0",port="1"} 1.0']
    labels = feature_file(facts, expires_in=60).labels()
    assert {k.rsplit("/", 1)[1] for k, v in labels if "/gdr." in k and v == "true"} == {
        "gdr.unavailable", "gdr.disabled-by-distance"}

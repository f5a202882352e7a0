"""Peer traffic redirected by ACS (``acs_redirect``) and translated DMA
(``iommu_translated``): sysverbs/placement/_acs.py on generated trees whose ``config``
bytes, ``iommu_group`` links and ``kernel/iommu_groups/N/type`` files are written as the
kernel shows them, and every surface (doctor, metrics, nfd).  The real kernel and
``lspci``/``setpci`` check the same reads in the NUMA VM (tests/kernel/test_acs_lab.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

from sysverbs.fleet import metrics
from sysverbs.fleet.facts import collect_facts
from sysverbs.fleet.nfd import feature_file
from sysverbs.placement import acs_redirects, read_host, translated_nics
from sysverbs.placement._acs import (
    acs_control,
    acs_text,
    ext_capability,
    iommu_mode,
    redirect_evidence,
)
from sysverbs.testing import HostBuilder
from tests import prom
from tests.conftest import require

HB = "devices/pci0000:00"
RP = f"{HB}/0000:00:01.0"
USP = f"{RP}/0000:01:00.0"
DSP_GPU, DSP_NIC = f"{USP}/0000:02:00.0", f"{USP}/0000:02:01.0"
GPU, NIC = f"{DSP_GPU}/0000:03:00.0", f"{DSP_NIC}/0000:04:00.0"
#: The kernel's default for a port it isolates: SrcValid ReqRedir CmpltRedir UpstreamFwd
ISOLATED = 0b11101
ACS_AT = 0x148  # where qemu's root ports have it (the kernel lab's lspci)


def config(control: Optional[int], size: int = 4096) -> bytes:
    """A bridge's config space: AER at 0x100, then ACS (``control``; None: no ACS)."""
    raw = bytearray(size)
    raw[0:4] = (0x8086 | 0x1234 << 16).to_bytes(4, "little")
    if size > 0x100:
        nxt = ACS_AT if control is not None else 0
        raw[0x100:0x104] = (0x0001 | 1 << 16 | nxt << 20).to_bytes(4, "little")
        if control is not None:
            raw[ACS_AT:ACS_AT + 4] = (0x000D | 1 << 16).to_bytes(4, "little")
            raw[ACS_AT + 4:ACS_AT + 6] = (0x5F).to_bytes(2, "little")  # ACSCap
            raw[ACS_AT + 6:ACS_AT + 8] = control.to_bytes(2, "little")
    return bytes(raw)


def tree(tmp: Path, controls: Optional[int] = ISOLATED, size: int = 4096,
         groups: Optional[dict[str, str]] = None, group_type: Optional[str] = "DMA-FQ",
         cmdline: str = "BOOT_IMAGE=/vmlinuz root=/dev/sda1") -> str:
    """A root port, a switch, an H100 and a ConnectX-7 on two of its downstream ports;
    the ports' ``config`` (``controls``: their ACS Control, ``size`` bytes as the reader
    may read them), ``groups``: path -> iommu group."""
    hb = HostBuilder()
    root = hb.host_bridge("pci0000:00", numa_node=0)
    rp = hb.pci_bridge(f"{root}/0000:00:01.0", port="root")
    usp = hb.pci_bridge(f"{rp}/0000:01:00.0", port="upstream")
    for dsp, bdf in ((hb.pci_bridge(f"{usp}/0000:02:00.0"), "0000:03:00.0"),
                     (hb.pci_bridge(f"{usp}/0000:02:01.0"), "0000:04:00.0")):
        if bdf.startswith("0000:03"):
            hb.gpu(f"{dsp}/{bdf}", model="h100")
        else:
            hb.mlx5(path=f"{dsp}/{bdf}", model="cx7", link_layer="Ethernet")
    host = hb.materialize(tmp)
    sysfs = Path(host.sysfs)
    for port in (DSP_GPU, DSP_NIC):
        (sysfs / port / "config").write_bytes(config(controls, size))
    for path, group in (groups or {}).items():
        gdir = sysfs / "kernel/iommu_groups" / group
        (gdir / "devices").mkdir(parents=True, exist_ok=True)
        if group_type is not None:
            (gdir / "type").write_text(group_type + "\n")
        link = sysfs / path / "iommu_group"
        link.symlink_to(os.path.relpath(gdir, link.parent))
    if groups:
        (sysfs / "class/iommu/dmar0").mkdir(parents=True)
    proc = sysfs.parent / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "cmdline").write_text(cmdline + "\n")
    return str(sysfs)


#: Each function in its own group, as the kernel makes them below ports with ACS.
APART = {RP: "1", USP: "2", DSP_GPU: "3", DSP_NIC: "4", GPU: "5", NIC: "6"}
#: Below ports without ACS: each function in its port's group.
WITH_PORT = {RP: "1", USP: "2", DSP_GPU: "3", DSP_NIC: "4", GPU: "3", NIC: "4"}


def _found(sysfs: str) -> list[tuple[str, str, str, str, str]]:
    return [(r.device, r.name, r.peer, r.switch, r.evidence)
            for r in acs_redirects(read_host(sysfs))]


def test_redirect_bits_read_as_root(tmp_path: Path) -> None:
    found = acs_redirects(read_host(tree(tmp_path, ISOLATED, groups=APART)))
    assert [(r.device, r.name, r.peer, r.peer_role, r.switch, r.ports, r.evidence)
            for r in found] == [("0000:04:00.0", "mlx5_0", "0000:03:00.0", "gpu",
                                 "0000:01:00.0", ("0000:02:01.0", "0000:02:00.0"), "acs_ctl")]
    msg = found[0].message()
    assert ("0000:02:01.0 ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ "
            "EgressCtrl- DirectTrans-") in msg
    assert found[0].as_dict()["acs_ctl"] == [acs_text(ISOLATED)] * 2


def test_bits_off_decide_over_the_groups(tmp_path: Path) -> None:
    # ACS off (rdma_topo setup's non-virtualised setting): peer traffic goes through the
    # switch, whatever groups the kernel made at boot.
    assert _found(tree(tmp_path, 0b10001, groups=APART)) == []


def test_no_acs_capability_is_no_redirect(tmp_path: Path) -> None:
    # qemu's xio3130 downstream ports: no ACS; the kernel lab shows the groups then.
    assert _found(tree(tmp_path, None, groups=WITH_PORT)) == []


def test_without_root_the_groups_decide(tmp_path: Path) -> None:
    # 64 bytes: what a user reads of config.  Apart from their ports: isolated.
    assert _found(tree(tmp_path / "a", ISOLATED, size=64, groups=APART)) == [
        ("0000:04:00.0", "mlx5_0", "0000:03:00.0", "0000:01:00.0", "iommu_group")]
    # Each in its port's group (two groups, not one: the naive test would say redirected).
    assert _found(tree(tmp_path / "b", ISOLATED, size=64, groups=WITH_PORT)) == []
    # No IOMMU, no root: undecided.
    assert _found(tree(tmp_path / "c", ISOLATED, size=64)) == []


def test_translated_and_passthrough(tmp_path: Path) -> None:
    sysfs = tree(tmp_path / "a", groups=APART)
    assert [(t.device, t.name, t.evidence) for t in translated_nics(read_host(sysfs))] == [
        ("0000:04:00.0", "mlx5_0", "iommu_group 6 type DMA-FQ")]
    assert translated_nics(read_host(tree(tmp_path / "b", groups=APART,
                                          group_type="identity"))) == ()
    # an older kernel without the type file: the command line decides
    old = tree(tmp_path / "c", groups=APART, group_type=None)
    assert [t.evidence for t in translated_nics(read_host(old))] == [
        "IOMMUs dmar0, kernel command line without iommu=pt"]
    pt = tree(tmp_path / "d", groups=APART, group_type=None, cmdline="intel_iommu=on iommu=pt")
    assert translated_nics(read_host(pt)) == ()
    assert translated_nics(read_host(tree(tmp_path / "e"))) == ()  # no IOMMU


def test_the_rules() -> None:
    assert redirect_evidence((None, None), ((None, None), (None, None))) is None
    assert redirect_evidence((0, None), (("5", "3"), ("6", "4"))) is None
    assert redirect_evidence((None, 0b1000), ((None, None), (None, None))) == "acs_ctl"
    assert redirect_evidence((None, None), (("3", "3"), ("6", "4"))) == "iommu_group"
    assert iommu_mode("7", "DMA", (), None).mode == "translated"
    assert iommu_mode("7", "blocked", ("dmar0",), None).mode == "unknown"
    assert iommu_mode(None, None, ("dmar0",), "").mode == "off"
    assert iommu_mode("7", None, ("dmar0",), None).mode == "unknown"


def test_config_walk_survives_bad_bytes() -> None:
    assert acs_control(config(0b100)) == 0b100
    assert acs_control(config(None)) == 0  # extended space, no ACS
    assert acs_control(config(0b100, size=256)) is None  # no extended space
    assert acs_control(None) is None
    loop = bytearray(4096)
    loop[0x100:0x104] = (0x0001 | 0x100 << 20).to_bytes(4, "little")  # points at itself
    assert ext_capability(bytes(loop), 0x000D) is None
    cut = config(0b100)[:ACS_AT + 6]  # the control register cut off
    assert acs_control(cut) == 0
    assert acs_text(0x7F).count("+") == 7


def test_every_surface_reports_them(tmp_path: Path) -> None:
    sysfs = tree(tmp_path, ISOLATED, groups=APART)
    proc = str(Path(sysfs).parent / "proc")
    facts = collect_facts(sysfs_path=sysfs, dev_dir=str(tmp_path / "dev"),
                          providers="builtin", source="sysfs", proc_path=proc, environ={})
    assert [(r.device, r.peer) for r in facts.acs_redirects] == [("0000:04:00.0",
                                                                 "0000:03:00.0")]
    assert [t.device for t in facts.translated_nics] == ["0000:04:00.0"]
    page = metrics.render(facts).decode()
    assert ('sysverbs_acs_redirect{device="0000:04:00.0",evidence="acs_ctl",name="mlx5_0",'
            'peer="0000:03:00.0",peer_role="gpu",switch="0000:01:00.0"} 1.0') in page
    assert 'sysverbs_iommu_translated{device="0000:04:00.0",name="mlx5_0"} 1.0' in page
    require(prom.unavailable(prom.PROMTOOL), "promtool (Debian's prometheus package)")
    assert prom.promtool_check_metrics(page.encode()) == (0, "")
    labels = feature_file(facts, expires_in=60).labels()
    for label in ("pcie.acs-redirect", "iommu.translated"):
        assert (f"sysverbs.feature.node.kubernetes.io/{label}", "true") in labels
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    run = subprocess.run([sys.executable, "-m", "sysverbs", "doctor", "--json", "--no-open",
                          "--sysfs-path", sysfs, "--dev-dir", str(tmp_path / "dev")],
                         capture_output=True, text=True, env=env, timeout=120)
    doc = json.loads(run.stdout)
    assert [h["code"] for h in doc["host"] if h["severity"] == "warning"][-2:] == [
        "acs_redirect", "iommu_translated"]
    assert [p["code"] for p in doc["pcie_peers"]] == ["acs_redirect", "iommu_translated"]

"""PCIe links trained below what both ends support (sysverbs/placement/_links.py,
``pcie_link_degraded``): generated trees whose link files are written as the kernel
writes them (``current_link_speed`` "16.0 GT/s PCIe", ``current_link_width`` "16"), one
real capture (r-aa-fatty01's ``lspci -vvv``), and every bundled fixture (none raises it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from sysverbs.fleet import metrics
from sysverbs.fleet.facts import collect_facts
from sysverbs.fleet.nfd import feature_file
from sysverbs.placement import degraded_links, read_host
from sysverbs.placement._links import parse_speed, parse_width
from sysverbs.testing import HostBuilder
from sysverbs.testing.cache import fixture_tree
from sysverbs.testing.host import fixture_names
from tests import prom
from tests.conftest import require

GEN = {3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe"}
HB = "/devices/pci0000:00"
RP_GPU, RP_NIC = f"{HB}/0000:00:01.0", f"{HB}/0000:00:02.0"
USP, DSP = f"{RP_GPU}/0000:01:00.0", f"{RP_GPU}/0000:01:00.0/0000:02:00.0"
GPU = f"{DSP}/0000:03:00.0"
NIC = f"{RP_NIC}/0000:04:00.0"

#: (current speed, current width, max speed, max width): None leaves the file out.
Link = tuple[Optional[str], Optional[str], Optional[str], Optional[str]]
FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


def _gen(gen: int, width: int, cap: Optional[tuple[int, int]] = None) -> Link:
    cg, cw = cap or (gen, width)
    return GEN[gen], str(width), GEN[cg], str(cw)


def _tree(tmp_path: Path, links: dict[str, Link], gpu: str = "h100") -> str:
    """A root port with a switch (upstream, downstream port) and a GPU below it, and a
    second root port with a ConnectX-7; ``links``: each function's link files."""
    hb = HostBuilder()
    root = hb.host_bridge("pci0000:00", numa_node=0)
    rp = hb.pci_bridge(f"{root}/0000:00:01.0", port="root")
    usp = hb.pci_bridge(f"{rp}/0000:01:00.0", port="upstream")
    dsp = hb.pci_bridge(f"{usp}/0000:02:00.0")
    hb.gpu(f"{dsp}/0000:03:00.0", model=gpu)
    rp2 = hb.pci_bridge(f"{root}/0000:00:02.0", port="root")
    hb.mlx5(path=f"{rp2}/0000:04:00.0", model="cx7", link_layer="Ethernet")
    host = hb.materialize(tmp_path)
    for path, values in links.items():
        for name, value in zip(FILES, values):
            f = host.sysfs / path.lstrip("/") / name
            if value is None:
                f.unlink(missing_ok=True)
            else:
                f.write_bytes(os.fsencode(value + "\n"))
    return str(host.sysfs)


def _healthy() -> dict[str, Link]:
    return {RP_GPU: _gen(5, 16), USP: _gen(5, 16), DSP: _gen(5, 16), GPU: _gen(5, 16),
            RP_NIC: _gen(5, 16), NIC: _gen(5, 16)}


def _found(tmp_path: Path, **changes: Link) -> list[tuple[str, str, str, object, object]]:
    links = _healthy()
    for key, value in changes.items():
        links[{"rp_gpu": RP_GPU, "usp": USP, "dsp": DSP, "gpu": GPU, "rp_nic": RP_NIC,
               "nic": NIC}[key]] = value
    host = read_host(_tree(tmp_path, links))
    return [(d.device, d.port, d.what, (d.speed, d.width), (d.capable_speed, d.capable_width))
            for d in degraded_links(host)]


def test_healthy_tree_has_no_finding(tmp_path: Path) -> None:
    assert _found(tmp_path) == []


def test_x8_on_an_x16_link(tmp_path: Path) -> None:
    # the NIC trained x8 (the port's files say the same: one link, two views)
    assert _found(tmp_path, nic=_gen(5, 8, (5, 16)), rp_nic=_gen(5, 8, (5, 16))) == [
        ("0000:04:00.0", "0000:00:02.0", "width", (32.0, 8), (32.0, 16))]


def test_gen3_on_a_gen5_link_for_a_nic(tmp_path: Path) -> None:
    found = _found(tmp_path, nic=_gen(3, 16, (5, 16)))
    assert found == [("0000:04:00.0", "0000:00:02.0", "speed", (8.0, 16), (32.0, 16))]
    host = read_host(_tree(tmp_path / "again", {**_healthy(), NIC: _gen(3, 16, (5, 16))}))
    (d,) = degraded_links(host)
    assert d.role == "nic" and d.names == ("mlx5_0",)
    msg = d.message()
    assert "8 GT/s x16, below the 32 GT/s x16" in msg and "lspci -vvv" in msg
    assert f"{host.sysfs_path}{NIC}" in msg and "current 8.0 GT/s PCIe x16" in msg


def test_idle_gpu_speed_down_training_is_no_finding(tmp_path: Path) -> None:
    # nvidia-smi -q: the current PCIe generation is reduced when the GPU is not in use
    assert _found(tmp_path, gpu=("2.5 GT/s PCIe", "16", GEN[5], "16"),
                  dsp=("2.5 GT/s PCIe", "16", GEN[5], "16")) == []


def test_gpu_width_degradation_is_a_finding(tmp_path: Path) -> None:
    assert _found(tmp_path, gpu=_gen(5, 8, (5, 16))) == [
        ("0000:03:00.0", "0000:02:00.0", "width", (32.0, 8), (32.0, 16))]


def test_a_bridge_on_the_gpu_path(tmp_path: Path) -> None:
    # the switch's upstream link at Gen3: the GPU's own link is fine
    assert _found(tmp_path, usp=_gen(3, 16, (5, 16))) == [
        ("0000:01:00.0", "0000:00:01.0", "speed", (8.0, 16), (32.0, 16))]


def test_gen4_nic_in_a_gen5_slot_is_no_finding(tmp_path: Path) -> None:
    assert _found(tmp_path, nic=_gen(4, 16)) == []
    # and a Gen5 x16 NIC in a Gen4 x8 slot: the slot is the capability
    assert _found(tmp_path / "b", nic=_gen(4, 8, (5, 16)), rp_nic=_gen(4, 8)) == []


@pytest.mark.parametrize("value", [
    ("Unknown", "16", GEN[5], "16"), ("Unknown speed", "0", "Unknown", "0"),
    (None, None, None, None), (GEN[3], "8", None, None)])
def test_unknown_and_missing_files_decide_nothing(tmp_path: Path, value: Link) -> None:
    assert _found(tmp_path, nic=value, rp_nic=value) == []
    # one end missing altogether (no port files): one end's max alone decides nothing
    assert _found(tmp_path / "b", nic=_gen(3, 8, (5, 16)), rp_nic=(None,) * 4) == []


@pytest.mark.parametrize("garbage", ["", "x", "-16", "16.0 GT/s PCIe\x00", "1e9 GT/s",
                                     "\udcff", "9" * 4000, "0x10", "3"])
def test_garbage_values(tmp_path: Path, garbage: str) -> None:
    assert parse_width(garbage) is None
    assert parse_speed(garbage) is None
    found = _found(tmp_path, nic=(garbage, garbage, GEN[5], "16"),
                   rp_nic=(garbage, garbage, garbage, garbage))
    assert found == []


def test_parsers_take_the_kernels_texts() -> None:
    assert [parse_speed(t) for t in ("2.5 GT/s PCIe", "5.0 GT/s PCIe", "8 GT/s", "64.0 GT/s PCIe",
                                     "Unknown", None)] == [2.5, 5.0, 8.0, 64.0, None, None]
    assert [parse_width(t) for t in ("16", "x8", " 4\n", "0", "7", None)] == [
        16, 8, 4, None, None, None]


@pytest.mark.parametrize("name", fixture_names())
def test_no_bundled_fixture_raises_it(name: str) -> None:
    tree = fixture_tree(name)
    assert degraded_links(read_host(tree.sysfs, recorded=True)) == ()


# -- a real capture --------------------------------------------------------------------
#: r-aa-fatty01 (Ubuntu 20.04, kernel 5.4.0-125), `lspci -vvvDnnd 15b3:` as recorded by
#: lshca 3.9 (MrBr-github/lshca_regression_data, commit 8f547b82, file
#: r-aa-fatty01--LLDP--Mofed5.7--1663230747.258801--v3.9): each function's LnkCap and
#: LnkSta lines, as they are there.
FATTY01 = {
    "0000:03:00.0": ("LnkCap:\tPort #0, Speed 16GT/s, Width x8, ASPM not supported",
                     "LnkSta:\tSpeed 8GT/s (downgraded), Width x8 (ok)"),
    "0000:03:00.1": ("LnkCap:\tPort #0, Speed 16GT/s, Width x8, ASPM not supported",
                     "LnkSta:\tSpeed 8GT/s (downgraded), Width x8 (ok)"),
    "0000:07:00.0": ("LnkCap:\tPort #0, Speed 8GT/s, Width x8, ASPM not supported",
                     "LnkSta:\tSpeed 5GT/s (downgraded), Width x4 (downgraded)"),
    "0000:07:00.1": ("LnkCap:\tPort #0, Speed 8GT/s, Width x8, ASPM not supported",
                     "LnkSta:\tSpeed 5GT/s (downgraded), Width x4 (downgraded)"),
}
_LSPCI = re.compile(r"Speed (\d+(?:\.\d+)?)GT/s[^,]*, Width x(\d+)( \(downgraded\))?")


def _lspci(line: str) -> tuple[str, str, bool]:
    """"Speed 8GT/s, Width x16" -> sysfs's texts ("8.0 GT/s PCIe", "16"), and whether
    lspci marks the width downgraded."""
    m = _LSPCI.search(line)
    assert m is not None, line
    return f"{float(m.group(1)):.1f} GT/s PCIe", m.group(2), m.group(3) is not None


def _fatty01(tmp_path: Path, port: Optional[Link]) -> str:
    """The two cards, each on a root port (``port``: its link files; None: none, all the
    capture knows)."""
    hb = HostBuilder()
    root = hb.host_bridge("pci0000:00", numa_node=0)
    links: dict[str, Link] = {}
    for n, (bus, model) in enumerate(((3, "cx6dx"), (7, "cx5"))):
        rp = hb.pci_bridge(f"{root}/0000:00:0{n + 1}.0", port="root")
        links[rp] = port or (None, None, None, None)
        for fn in (0, 1):
            bdf = f"0000:{bus:02x}:00.{fn}"
            hb.mlx5(path=f"{rp}/{bdf}", model=model, link_layer="Ethernet")
            cap, sta = FATTY01[bdf]
            speed, width, _ = _lspci(sta)
            links[f"{rp}/{bdf}"] = (speed, width, *_lspci(cap)[:2])
    host = hb.materialize(tmp_path)
    for path, values in links.items():
        for name, value in zip(FILES, values):
            if value is not None:
                (host.sysfs / path.lstrip("/") / name).write_text(value + "\n")
    return str(host.sysfs)


def test_a_real_capture_alone_decides_nothing(tmp_path: Path) -> None:
    # lspci says "(downgraded)" for all four: against each card's own LnkCap only.  The
    # capture has no root port's LnkCap, so neither has sysverbs: no finding.
    assert degraded_links(read_host(_fatty01(tmp_path, None))) == ()


def test_a_real_capture_with_its_slots(tmp_path: Path) -> None:
    # With Gen3 x8 root ports (assumed: the capture does not show them; 03:00.0's LnkCtl2
    # "Target Link Speed: 8GT/s" fits), the ConnectX-6 Dx (Gen4 card) at 8 GT/s is the
    # normal Gen4-card-in-Gen3-slot case, and the ConnectX-5 at 5 GT/s x4 is degraded in
    # both: the width lspci marks "(downgraded)", and the speed.
    found = degraded_links(read_host(_fatty01(tmp_path, (GEN[3], "8", GEN[3], "8"))))
    marked = {bdf for bdf, (_, sta) in FATTY01.items() if _lspci(sta)[2]}
    assert marked == {"0000:07:00.0", "0000:07:00.1"}
    assert [(d.device, d.port, d.what, d.speed, d.width, d.capable_speed, d.capable_width,
             d.names) for d in found] == [
        ("0000:07:00.0", "0000:00:02.0", "width,speed", 5.0, 4, 8.0, 8, ("mlx5_2", "mlx5_3"))]


# -- the surfaces: doctor, topo --json, metrics (promtool), nfd --------------------------
def _sv(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                          text=True, env=env, timeout=120)


def test_every_surface_reports_it(tmp_path: Path) -> None:
    sysfs = _tree(tmp_path, {**_healthy(), NIC: _gen(5, 8, (5, 16)),
                             GPU: ("2.5 GT/s PCIe", "16", GEN[5], "16")})
    tree = ("--sysfs-path", sysfs, "--dev-dir", str(Path(sysfs).parent / "dev/infiniband"))
    doctor = _sv("doctor", "--json", "--no-open", "--providers", "builtin", *tree)
    doc = json.loads(doctor.stdout)
    (link,) = doc["pcie_links"]
    assert (link["device"], link["port"], link["what"], link["width"], link["capable_width"],
            link["names"]) == ("0000:04:00.0", "0000:00:02.0", "width", 8, 16, ["mlx5_0"])
    (reason,) = [r for r in doc["host"] if r["code"] == "pcie_link_degraded"]
    assert reason["severity"] == "warning" and reason["message"] == link["message"]
    text = _sv("doctor", "--no-open", "--providers", "builtin", *tree).stdout
    assert f"host: warning: {link['message']} [pcie_link_degraded]\n" in text
    topo = json.loads(_sv("topo", "--json", *tree).stdout)
    assert [p for p in topo["problems"] if p.startswith("pcie_link_degraded: ")] == [
        f"pcie_link_degraded: {link['message']}"]

    facts = collect_facts(sysfs_path=sysfs, dev_dir=tree[3], providers="builtin",
                          source="sysfs", environ={})
    page = metrics.render(facts)
    require(prom.unavailable(prom.PROMTOOL), "promtool (Debian's prometheus package)")
    assert prom.promtool_check_metrics(page) == (0, "")
    series = [line for line in page.decode().splitlines()
              if line.startswith("sysverbs_pcie_link_degraded{")]
    assert series == ['sysverbs_pcie_link_degraded{capable="32 GT/s x16",current="32 GT/s x8",'
                      'device="0000:04:00.0",port="0000:00:02.0",role="nic",what="width"} 1.0']
    labels = feature_file(facts, expires_in=60).labels()
    assert ("sysverbs.feature.node.kubernetes.io/pcie.degraded", "true") in labels


def test_a_healthy_host_has_no_series_and_no_label(tmp_path: Path) -> None:
    facts = collect_facts(sysfs_path=_tree(tmp_path, _healthy()), providers="builtin",
                          source="sysfs", environ={})
    assert facts.pcie_links == ()
    assert b"sysverbs_pcie_link_degraded{" not in metrics.render(facts)
    assert not any(k.endswith("/pcie.degraded") for k, _ in
                   feature_file(facts, expires_in=60).labels())

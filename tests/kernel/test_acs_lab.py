"""ACS, IOMMU groups and links on the NUMA machine (``acs_scenarios.py``), with the
kernel's sysfs and ``lspci -vvv``/``setpci`` (pciutils) as the oracle:

* every function's ACS capability and Control register as sysverbs decodes them from
  ``config`` is what lspci prints (``ACSCtl:``), before and after ``setpci`` rewrote root
  port 40:01.0's register;
* the kernel really translates (iommu groups of type ``DMA-FQ``): sysverbs says
  ``iommu_translated`` for both NICs, with that evidence, in doctor, metrics and nfd;
* qemu's switch has no ACS (lspci), so the NIC and the NVMe below it talk through it:
  no ``acs_redirect`` as root (the bits) nor as uid 65534 (each function shares its
  port's group), although the kernel gave the two ports different groups (the naive
  test, two groups, would be wrong here);
* root port 40:01.0's ``x-speed``/``x-width`` show in lspci's ``LnkCap`` and in sysfs;
  the link below it is not degraded by lspci's own numbers (qemu trains the link at the
  endpoint's x1 2.5 GT/s), and sysverbs finds no ``pcie_link_degraded``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

import pytest

from tests.kernel.acs_scenarios import PORT, WRITTEN
from tests.kernel.numa_vm import LAYOUT, NumaResults

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(3600)]

NICS = {e.address: e.rdma for e in LAYOUT if e.kind == "nic"}
SWITCHED = ("0000:13:00.0", "0000:14:00.0")  # the NIC and the NVMe below the switch
PORTS = ("0000:12:00.0", "0000:12:01.0")


def _acs(numa: NumaResults) -> dict[str, Any]:
    scen = numa.scenario("acs")
    assert "crash" not in scen, scen.get("crash")
    return scen


def lspci_blocks(text: str) -> dict[str, str]:
    """``lspci -vvv -D``'s text per function."""
    out: dict[str, str] = {}
    current = ""
    for line in text.splitlines():
        m = re.match(r"([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ", line)
        if m:
            current = m.group(1)
            out[current] = ""
        if current:
            out[current] += line + "\n"
    return out


def acs_ctl(block: str) -> Optional[str]:
    m = re.search(r"ACSCtl:\s+(.*)", block)
    return m.group(1).strip() if m else None


def lnk(block: str, what: str) -> tuple[str, str]:
    """(speed, width) of lspci's ``LnkCap`` or ``LnkSta`` line."""
    m = re.search(rf"{what}:.*?Speed ([0-9.]+GT/s|unknown)[^,]*, Width x(\d+)", block)
    assert m, block
    return m.group(1), m.group(2)


def _doctor(step: dict[str, Any]) -> dict[str, Any]:
    assert step["rc"] in (0, 1), step
    doc: dict[str, Any] = json.loads(step["stdout"])
    return doc


def test_acs_bits_are_lspcis(numa: NumaResults) -> None:
    scen = _acs(numa)
    assert scen["lspci"]["rc"] == 0, scen["lspci"]
    blocks = lspci_blocks(scen["lspci"]["stdout"])
    ours = scen["ours"]
    assert set(blocks) == set(ours)
    with_acs = {a for a, b in blocks.items() if "Access Control Services" in b}
    assert {a for a, o in ours.items() if o["acs"]} == with_acs
    assert {"0000:10:00.0", "0000:40:00.0", "0000:40:01.0"} <= with_acs  # root ports
    assert not with_acs & set(PORTS)  # qemu 7.2's switch: no ACS
    for address in with_acs:
        assert ours[address]["acs_ctl"] == acs_ctl(blocks[address]), address
    # the kernel enabled it on the root ports (it does so with an IOMMU)
    assert "ReqRedir+ CmpltRedir+" in ours["0000:40:01.0"]["acs_ctl"]


def test_setpci_rewrite_is_seen(numa: NumaResults) -> None:
    s = _acs(numa)["setpci"]
    assert s["write"]["rc"] == 0 and s["restore"]["rc"] == 0, s
    assert int(s["before"]["stdout"], 16) != int(WRITTEN, 16)
    block = lspci_blocks(s["lspci"]["stdout"])[PORT]
    assert acs_ctl(block) == s["ours"]["acs_ctl"]
    assert s["ours"]["acs_ctl"].startswith("SrcValid+ TransBlk- ReqRedir- CmpltRedir-")


def test_iommu_translated(numa: NumaResults) -> None:
    scen = _acs(numa)
    assert "intel_iommu=on" in scen["cmdline"]["stdout"]
    group_of = {dev: (g, v["type"]) for g, v in scen["groups"].items() for dev in v["devices"]}
    for doc in (_doctor(scen["doctor_root"]), _doctor(scen["doctor_nobody"])):
        translated = {p["device"]: p for p in doc["pcie_peers"]
                      if p["code"] == "iommu_translated"}
        assert set(translated) == set(NICS)
        for address, p in translated.items():
            group, kind = group_of[address]
            assert kind in ("DMA", "DMA-FQ")
            assert p["name"] == NICS[address]
            assert p["evidence"] == f"iommu_group {group} type {kind}"
        assert "iommu_translated" in [h["code"] for h in doc["host"]]
    page = scen["metrics"]["stdout"]
    for address, name in NICS.items():
        assert f'sysverbs_iommu_translated{{device="{address}",name="{name}"}} 1.0' in page
    assert "sysverbs.feature.node.kubernetes.io/iommu.translated=true" in scen["nfd"]["stdout"]


def test_no_redirect_through_a_switch_without_acs(numa: NumaResults) -> None:
    scen = _acs(numa)
    group_of = {dev: g for g, v in scen["groups"].items() for dev in v["devices"]}
    nic, nvme = SWITCHED
    assert group_of[nic] != group_of[nvme]  # what rdma_topo check would call isolated
    assert (group_of[nic], group_of[nvme]) == (group_of[PORTS[0]], group_of[PORTS[1]])
    root, nobody = _doctor(scen["doctor_root"]), _doctor(scen["doctor_nobody"])
    for doc in (root, nobody):
        assert [p for p in doc["pcie_peers"] if p["code"] == "acs_redirect"] == []
    assert "sysverbs_acs_redirect{" not in scen["metrics"]["stdout"]
    assert "acs-redirect" not in scen["nfd"]["stdout"]


def test_slot_link_settings(numa: NumaResults) -> None:
    scen = _acs(numa)
    blocks = lspci_blocks(scen["lspci"]["stdout"])
    assert lnk(blocks[PORT], "LnkCap") == ("5GT/s", "2")  # qemu's x-speed=5,x-width=2
    assert scen["port_link"]["stdout"].splitlines() == ["5.0 GT/s PCIe", "2"]  # sysfs
    nvme = "0000:42:00.0"
    sta, cap = lnk(blocks[nvme], "LnkSta"), lnk(blocks[nvme], "LnkCap")
    assert sta == cap == ("2.5GT/s", "1")  # trained at the endpoint's own maximum
    assert _doctor(scen["doctor_root"])["pcie_links"] == []

"""``pcie_link_degraded`` on trees rebuilt from public captures
(tests/data/pcie-captures, tests/data/PROVENANCE.md): each function's ``config``
holds the capture's LnkCap and LnkSta (sysverbs/testing/builder_lspci.py), real
``lspci -F`` decodes those bytes back into the capture's lines, the kernel's link files
come from the same registers, and sysverbs' verdict is the capture's own: the kernel's
"limited by ... link at PORT (capable of ...)" message for the ConnectX-6 that trained
at Gen3 in a Gen4 slot, and nothing for a GPU whose LnkSta is "downgraded" in speed
only (the idle down-training lspci marks too).
"""

from __future__ import annotations

import doctest
import json
import re
from pathlib import Path

import pytest

from sysverbs.ground.errors import UsageError
from sysverbs.placement import degraded_links, read_host
from sysverbs.placement._links import LinkEnd, find_degraded, judge, parse_speed
from sysverbs.testing import HostBuilder, builder_lspci
from sysverbs.testing.builder_lspci import Function, write_function
from tests import lspci_oracle
from tests.conftest import require

DATA = Path(__file__).parent / "data/pcie-captures"
CX6 = json.loads((DATA / "cx6-ocp3-z690.json").read_text())
GPU = json.loads((DATA / "rtx4090-riser-idle.json").read_text())
#: The slots as the author names them -> (speed code, width) of the port's LnkCap.
SLOTS = {"pcie 4.0 16x": (4, 16), "pcie 4.0 4x": (4, 4)}
_KERNEL = re.compile(r"limited by ([0-9.]+ GT/s) PCIe x([0-9]+) link at (\S+) \(capable of "
                     r"[0-9.]+ Gb/s with ([0-9.]+ GT/s) PCIe x([0-9]+) link\)")


def _same(line: str) -> str:
    """A capture's line as pciutils 3.9 writes it: the same words and marks, less
    the " (ok)" older releases add after a field at its capability, and whitespace
    (a terminal's copy turns the tabs into spaces) as one space."""
    return " ".join(line.replace(" (ok)", "").split())


def _port(bdf: str, slot: str, sta: tuple[int, int]) -> Function:
    """A root port whose LnkCap is the slot the author names; its LnkSta is the
    link's, which the endpoint's LnkSta shows too (one link, two views)."""
    return Function("0000:" + bdf if bdf.count(":") == 1 else bdf, "root", 0x8086, 0x460D,
                    0x060400, SLOTS[slot], sta)


def _cx6() -> tuple[Function, Function]:
    x16 = CX6["x16_slot"]
    nic = Function.parse(x16["device"], "endpoint", 0x15B3, 0x101B, 0x020000, *x16["lspci"])
    return nic, _port(x16["port"], x16["slot"], nic.sta)


def _rtx4090() -> tuple[Function, Function]:
    # the capture names no address: the card and its slot placed at 41:00.0 / 40:01.1
    gpu = Function.parse("0000:41:00.0", "endpoint", 0x10DE, 0x2684, 0x030000, *GPU["lspci"])
    return gpu, _port("0000:40:01.1", "pcie 4.0 16x", gpu.sta)


def test_lspci_decodes_the_bytes_into_the_captures_lines(tmp_path: Path) -> None:
    require(lspci_oracle.unavailable(), "lspci (Debian's pciutils)")
    (nic, port), (gpu, gpu_port) = _cx6(), _rtx4090()
    got = lspci_oracle.decode([port, nic, gpu_port, gpu], tmp_path)
    for f, lines in ((nic, CX6["x16_slot"]["lspci"]), (gpu, GPU["lspci"])):
        decoded = [lspci_oracle.line(got[f.bdf], name) for name in ("LnkCap:", "LnkSta:")]
        assert [_same(x) for x in decoded] == [_same(x) for x in lines]
    # lspci marks an endpoint against its own LnkCap only, and a root port not at
    # all: the link's other end shows the same 8 GT/s with no mark
    assert lspci_oracle.line(got[port.bdf], "LnkSta:") == "LnkSta:\tSpeed 8GT/s, Width x16"


def _cx6_tree(tmp_path: Path) -> str:
    nic, port = _cx6()
    hb = HostBuilder()
    root = hb.host_bridge("pci0000:00", numa_node=0)
    rp = hb.pci_bridge(f"{root}/{port.bdf}", port="root", vendor=0x8086, device=0x460D)
    hb.mlx5(path=f"{rp}/{nic.bdf}", model="cx6", link_layer="Ethernet")
    host = hb.materialize(tmp_path)
    write_function(str(host.sysfs), rp, port)
    write_function(str(host.sysfs), f"{rp}/{nic.bdf}", nic)
    return str(host.sysfs)


def test_the_connectx6_in_the_x16_slot_is_degraded_as_the_kernel_says(tmp_path: Path) -> None:
    (d,) = degraded_links(read_host(_cx6_tree(tmp_path)))
    m = _KERNEL.search(CX6["x16_slot"]["dmesg"])
    assert m is not None
    speed, width, port, cap_speed, cap_width = m.groups()
    assert (d.device, d.port, d.speed, d.width, d.capable_speed, d.capable_width) == (
        CX6["x16_slot"]["device"], port, parse_speed(speed), int(width),
        parse_speed(cap_speed), int(cap_width))
    assert (d.role, d.what, d.names) == ("nic", "speed", ("mlx5_0",))
    assert d.rates() == ("8 GT/s x16", "16 GT/s x16")
    # mlxlink's "Active (Enabled)" says the same from the card's side
    assert CX6["x16_slot"]["mlxlink"][0].endswith(": 8G-Gen 3 (16G-Gen 4)")


def test_the_x4_slot_width_is_the_slots_and_its_speed_is_degraded() -> None:
    # The same card in the PCH's PCIe 4.0 x4 slot (its dmesg only): lspci and the
    # kernel measure x4 against the card's own x16, but x4 is all the slot has; the
    # link's capability is Gen4 x4, so only its 2.5 GT/s is below it.
    x4 = CX6["x4_slot"]
    m = _KERNEL.search(x4["dmesg"])
    assert m is not None
    speed, width, port, cap_speed, cap_width = m.groups()
    assert port == x4["port"]
    slot_gen, slot_width = SLOTS[x4["slot"]]
    down = LinkEnd(x4["device"], "/sys/devices/pci0000:00/0000:00:1b.4/0000:04:00.0",
                   f"{speed} PCIe", width, f"{cap_speed} PCIe", cap_width)
    up = LinkEnd(port, "/sys/devices/pci0000:00/0000:00:1b.4", f"{speed} PCIe", width,
                 "16.0 GT/s PCIe" if slot_gen == 4 else None, str(slot_width))
    assert judge(down, up, gpu=False) == ("speed", 2.5, 16.0, 4, 4)
    assert x4["mlxlink"] == ["Link Speed Active (Enabled)        : 2.5G-Gen 1 (16G-Gen 4)",
                             "Link Width Active (Enabled)        : 4X (16X)"]


def test_the_idle_gpu_stays_quiet(tmp_path: Path) -> None:
    # lspci marks the RTX 4090's 2.5 GT/s "(downgraded)"; a GPU lowers its link speed
    # when idle (the thread's answer: "May be related to power saving mode"), so a GPU's
    # speed alone is no finding: sysverbs cannot tell idle from broken without load.
    gpu, port = _rtx4090()
    hb = HostBuilder()
    root = hb.host_bridge("pci0000:40", numa_node=0)
    rp = hb.pci_bridge(f"{root}/{port.bdf}", port="root", vendor=0x8086, device=0x460D)
    hb.pci_device(f"{rp}/{gpu.bdf}", vendor=gpu.vendor, device=gpu.device,
                  pci_class=gpu.pci_class, driver="nvidia")
    host = hb.materialize(tmp_path)
    write_function(str(host.sysfs), rp, port)
    write_function(str(host.sysfs), f"{rp}/{gpu.bdf}", gpu)
    topo = read_host(str(host.sysfs))
    assert [g.address for g in topo.gpus] == [gpu.bdf]
    assert degraded_links(topo) == ()
    # the same link judged as a NIC's would be a speed finding: the GPU rule is what
    # keeps it quiet, not missing data
    (d,) = find_degraded(topo.pci, [(gpu.bdf, "nic", None)])
    assert (d.what, d.speed, d.capable_speed, d.width) == ("speed", 2.5, 16.0, 16)


def test_the_builder_takes_only_lspci_lines() -> None:
    assert doctest.testmod(builder_lspci).failed == 0
    for bad in ("LnkCap:\tPort #0, Speed 3GT/s, Width x16", "LnkSta:\tSpeed unknown", ""):
        with pytest.raises(UsageError):
            Function.parse("0000:01:00.0", "endpoint", 0x15B3, 0x101B, 0x020000, bad, bad)
    with pytest.raises(UsageError):
        builder_lspci.acs_bits("ACSCtl:\tSrcValid+ TransBlk-")
    with pytest.raises(UsageError):
        Function.parse("0000:01:00.0", "switch", 0, 0, 0, *CX6["x16_slot"]["lspci"])

"""placement/_links.py's verdict as a pure function of the link texts and the bridge
chains (issue 41: the mutants of ``make mutation``): the parsers' edges, which end
decides, which hops are links, and the words of the finding.  tests/test_pcie_links.py
has the same verdicts on generated sysfs trees and the bundled fixtures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from sysverbs.placement import degraded_links, read_host
from sysverbs.placement._links import LinkEnd, find_degraded, judge, parse_speed, parse_width
from sysverbs.testing import HostBuilder

G3, G4, G5 = "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe"


@pytest.mark.parametrize(("text", "gts"), [
    (G5, 32.0), ("2.5 GT/s PCIe", 2.5), ("8 GT/s", 8.0), (" 16.0 GT/s PCIe\n", 16.0),
    ("0 GT/s", None), ("0.0 GT/s PCIe", None), ("Unknown", None), (None, None), ("", None),
])
def test_parse_speed(text: Optional[str], gts: Optional[float]) -> None:
    assert parse_speed(text) == gts


@pytest.mark.parametrize(("text", "lanes"), [
    *((str(n), n) for n in (1, 2, 4, 8, 12, 16, 32)), ("x16", 16), ("16\n", 16),
    *((str(n), None) for n in (0, 3, 5, 7, 9, 11, 13, 15, 17, 31, 33, 64)),
    ("Unknown", None), (None, None),
])
def test_parse_width(text: Optional[str], lanes: Optional[int]) -> None:
    assert parse_width(text) == lanes


def _end(address: str, cur: tuple[Optional[str], Optional[str]],
         cap: tuple[Optional[str], Optional[str]]) -> LinkEnd:
    return LinkEnd(address, f"/sys/devices/pci0000:00/{address}", *cur, *cap)


@pytest.mark.parametrize(("down", "up", "gpu", "want"), [
    # width x8 of x16 at both ends
    (((G5, "8"), (G5, "16")), ((G5, "16"), (G5, "16")), False, ("width", 32.0, 32.0, 8, 16)),
    (((G5, "16"), (G5, "16")), ((G5, "16"), (G5, "16")), False, None),
    # the lower end's maximum decides: a Gen4 x8 card in a Gen5 x16 slot is at its best
    (((G4, "8"), (G4, "8")), ((G5, "16"), (G5, "16")), False, None),
    (((G3, "16"), (G5, "16")), ((G5, "16"), (G5, "16")), False, ("speed", 8.0, 32.0, 16, 16)),
    (((G3, "4"), (G5, "16")), ((G5, "16"), (G5, "16")), False,
     ("width,speed", 8.0, 32.0, 4, 16)),
    # a GPU's speed alone decides nothing, its width does
    (((G3, "16"), (G5, "16")), ((G5, "16"), (G5, "16")), True, None),
    (((G3, "8"), (G5, "16")), ((G5, "16"), (G5, "16")), True, ("width", 8.0, 32.0, 8, 16)),
    # no current values at the function: the port's
    (((None, None), (G5, "16")), ((G3, "8"), (G5, "16")), False,
     ("width,speed", 8.0, 32.0, 8, 16)),
    # one end's maximum unknown: undecided
    (((G3, "8"), (G5, "16")), ((G5, "16"), ("Unknown", None)), False, None),
    (((G3, "8"), ("Unknown", "16")), ((G5, "16"), (G5, None)), False, None),
    (((G3, "8"), (G5, None)), ((G5, "16"), (G5, "16")), False, ("speed", 8.0, 32.0, 8, None)),
    (((None, "8"), (G5, "16")), ((None, None), (G5, "16")), False,
     ("width", None, 32.0, 8, 16)),
])
def test_judge(down: Any, up: Any, gpu: bool, want: Any) -> None:
    assert judge(_end("0000:03:00.0", *down), _end("0000:02:00.0", *up), gpu) == want


class _Function:
    """What find_degraded reads of a PCI function: its BDF, directory, bridges above it
    (nearest first) and link texts."""

    def __init__(self, address: str, bridges: tuple[str, ...],
                 link: tuple[Optional[str], ...]) -> None:
        self.address, self.bridges, self.link = address, bridges, link
        self.path = f"/sys/devices/{address}"


OK = (G5, "16", G5, "16")
SLOW = (G3, "16", G5, "16")


def _pci(**links: tuple[Optional[str], ...]) -> dict[str, Any]:
    """Root port 00:01.0 - switch (upstream 01:00.0, downstream 02:00.0 and 02:01.0) -
    endpoints 03:00.0 and 04:00.0; root port 00:02.0 - endpoint 05:00.0; endpoint
    06:00.0 under a chain of three bridges, 0a:00.0 under two and 0f:00.0 under four
    (neither is root port + switches)."""
    chains = {"rp": ("00:01.0", ()), "usp": ("01:00.0", ("00:01.0",)),
              "dsp": ("02:00.0", ("01:00.0", "00:01.0")),
              "dsp2": ("02:01.0", ("01:00.0", "00:01.0")),
              "a": ("03:00.0", ("02:00.0", "01:00.0", "00:01.0")),
              "b": ("04:00.0", ("02:01.0", "01:00.0", "00:01.0")),
              "rp2": ("00:02.0", ()), "c": ("05:00.0", ("00:02.0",)),
              "x1": ("07:00.0", ()), "x2": ("08:00.0", ("07:00.0",)),
              "x3": ("09:00.0", ("08:00.0", "07:00.0")),
              "d": ("06:00.0", ("09:00.0", "08:00.0", "07:00.0")),
              "e": ("0a:00.0", ("08:00.0", "07:00.0")),
              "y1": ("0b:00.0", ()), "y2": ("0c:00.0", ("0b:00.0",)),
              "y3": ("0d:00.0", ("0c:00.0", "0b:00.0")),
              "y4": ("0e:00.0", ("0d:00.0", "0c:00.0", "0b:00.0")),
              "f": ("0f:00.0", ("0e:00.0", "0d:00.0", "0c:00.0", "0b:00.0"))}
    return {f"0000:{bdf}": _Function(f"0000:{bdf}", tuple(f"0000:{b}" for b in above),
                                     links.get(key, OK))
            for key, (bdf, above) in chains.items()}


def _found(pci: dict[str, Any], targets: list[tuple[str, str, Optional[str]]]
           ) -> list[tuple[str, str, tuple[str, ...], str, str]]:
    return [(d.device, d.role, d.names, d.port, d.what) for d in find_degraded(pci, targets)]


def test_which_hops_are_links() -> None:
    """Endpoint - downstream port and upstream port - root port are links (the second a
    bridge's, shared by both GPUs' names, once each); downstream - upstream port is
    inside the switch; a chain of three bridges keeps its first link only."""
    pci = _pci(a=SLOW, usp=SLOW, dsp=SLOW, c=SLOW, x3=SLOW, d=SLOW, e=SLOW, y2=SLOW, y3=SLOW)
    targets = [("0000:1a:00.0", "nic", "gone"),
               ("0000:04:00.0", "nic", "mlx5_0"), ("0000:03:00.0", "nic", "mlx5_1"),
               ("0000:03:00.0", "nic", "mlx5_1"), ("0000:05:00.0", "nvme", None),
               ("0000:06:00.0", "nic", "mlx5_2"), ("0000:0a:00.0", "nic", "mlx5_3"),
               ("0000:0f:00.0", "nic", "mlx5_4")]
    assert _found(pci, targets) == [
        ("0000:01:00.0", "bridge", ("mlx5_0", "mlx5_1"), "0000:00:01.0", "speed"),
        ("0000:03:00.0", "nic", ("mlx5_1",), "0000:02:00.0", "speed"),
        ("0000:05:00.0", "nvme", (), "0000:00:02.0", "speed"),
        ("0000:06:00.0", "nic", ("mlx5_2",), "0000:09:00.0", "speed"),
        ("0000:0a:00.0", "nic", ("mlx5_3",), "0000:08:00.0", "speed")]


def test_the_records_are_values() -> None:
    """Frozen records: equal ones are one in a set."""
    (d,) = find_degraded(_pci(c=SLOW), [("0000:05:00.0", "nic", "mlx5_0")])
    (again,) = find_degraded(_pci(c=SLOW), [("0000:05:00.0", "nic", "mlx5_0")])
    assert len({d, again}) == 1 and len({d.down, again.down, d.up}) == 2


def test_an_nvme_drive_on_a_generated_host(tmp_path: Path) -> None:
    """An NVMe controller (class 010802) is checked without any name; its link at Gen3
    below a Gen5 root port that it could match is a finding."""
    hb = HostBuilder()
    root = hb.host_bridge("pci0000:00", numa_node=0)
    rp = hb.pci_bridge(f"{root}/0000:00:01.0", port="root")
    hb.add_pci_function(f"{rp}/0000:01:00.0", 0x144D, 0xA80A, 0x144D, 0xA801, 0x010802,
                        "nvme")
    host = hb.materialize(tmp_path)
    for path, (cur, cap) in {f"{rp}/0000:01:00.0": (G3, G5), rp: (G5, G5)}.items():
        for name, value in zip(("current_link_speed", "current_link_width",
                                "max_link_speed", "max_link_width"), (cur, "4", cap, "4")):
            (host.sysfs / path.lstrip("/") / name).write_text(value + "\n")
    found = degraded_links(read_host(str(host.sysfs)))
    assert [(d.device, d.role, d.names, d.port, d.what) for d in found] == [
        ("0000:01:00.0", "nvme", (), "0000:00:01.0", "speed")]


def test_a_gpu_is_judged_by_width_and_its_bridges_by_both() -> None:
    pci = _pci(a=SLOW, usp=SLOW)
    assert _found(pci, [("0000:03:00.0", "gpu", "GPU0")]) == [
        ("0000:01:00.0", "bridge", ("GPU0",), "0000:00:01.0", "speed")]
    pci = _pci(a=(G3, "8", G5, "16"))
    assert _found(pci, [("0000:03:00.0", "gpu", "GPU0")]) == [
        ("0000:03:00.0", "gpu", ("GPU0",), "0000:02:00.0", "width")]


def test_a_link_whose_port_is_not_in_the_tree() -> None:
    pci = _pci(a=SLOW, c=SLOW)
    del pci["0000:02:00.0"]
    assert _found(pci, [("0000:03:00.0", "nic", "mlx5_0"), ("0000:05:00.0", "nic", "mlx5_1")]
                  ) == [("0000:05:00.0", "nic", ("mlx5_1",), "0000:00:02.0", "speed")]


def test_the_words() -> None:
    pci = _pci(c=(G3, "8", G5, "16"), rp2=(None, None, G5, None))
    (d,) = find_degraded(pci, [("0000:05:00.0", "nic", "mlx5_0")])
    files = "{current_link_speed,current_link_width,max_link_speed,max_link_width}"
    assert d.rates() == ("8 GT/s x8", "32 GT/s x?")
    assert d.as_dict() == {
        "code": "pcie_link_degraded", "device": "0000:05:00.0", "role": "nic",
        "names": ["mlx5_0"], "port": "0000:00:02.0", "what": "speed", "speed_gts": 8.0,
        "capable_speed_gts": 32.0, "width": 8, "capable_width": None,
        "message": "PCIe link of nic 0000:05:00.0 (mlx5_0) to 0000:00:02.0 runs at 8 GT/s "
        "x8, below the 32 GT/s x? both ends support (speed): reseat the card, check the "
        "slot or riser (and the BIOS's slot settings); compare lspci -vvv LnkSta with "
        "LnkCap of both ends. Evidence: 0000:05:00.0 current 8.0 GT/s PCIe x8, max 32.0 "
        f"GT/s PCIe x16 (/sys/devices/0000:05:00.0/{files}); 0000:00:02.0 current - x-, "
        f"max 32.0 GT/s PCIe x- (/sys/devices/0000:00:02.0/{files})."}
    pci = _pci(c=(None, "4", G5, "16"))
    (d,) = find_degraded(pci, [("0000:05:00.0", "nvme", None)])
    assert d.rates() == ("32 GT/s x4", "32 GT/s x16")
    assert d.message().startswith("PCIe link of nvme 0000:05:00.0 to 0000:00:02.0 runs at")

"""PCIe links trained below what both of their ends support (``pcie_link_degraded``).

A link joins a PCI function (its downstream end: an endpoint or a switch's upstream
port) and the root or switch downstream port directly above it; the hop from a switch's
downstream port to its upstream port is inside the switch, no link.  Its capability
is, for speed and for width, the lower of the two ends' ``max_link_speed`` and
``max_link_width``; it is degraded when the downstream end's ``current_link_*`` (the
port's when the function has none) is below that.  One end's maximum alone decides
nothing: a Gen4 NIC in a Gen3 slot runs at Gen3 as it should, so an end whose values
are absent, ``Unknown`` or garbage leaves the link undecided (no finding).

Checked: the link of every GPU, RDMA NIC (a VF's through its PF) and NVMe controller,
and every link above them up to the root port (the bridges on their GPU<->NIC and
GPU<->CPU paths).  A GPU's own link counts only by width: GPUs lower their link speed
when idle to save power (nvidia-smi documents its current PCIe generation as reduced
when the GPU is not in use; AMD's by PCIe DPM), so its speed alone decides nothing; a
narrower GPU link is a finding (docs/diagnose.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._pci import LINK_FILES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Optional

    from ._pci import PciDevice
    from ._topology import Topology

__all__ = ["CODE", "FIX", "DegradedLink", "LinkEnd", "degraded_links", "parse_speed",
           "parse_width"]

CODE = "pcie_link_degraded"
FIX = ("reseat the card, check the slot or riser (and the BIOS's slot settings); compare "
       "lspci -vvv LnkSta with LnkCap of both ends")
NVME_CLASS = 0x010802
_SPEED = re.compile(r"([0-9]{1,3}(?:\.[0-9]{1,2})?) ?GT/s(?: PCIe)?")
_WIDTH = re.compile(r"x?([0-9]{1,2})")
_WIDTHS = frozenset((1, 2, 4, 8, 12, 16, 32))


def parse_speed(text: Optional[str]) -> Optional[float]:
    """GT/s of a ``*_link_speed`` text (``"16.0 GT/s PCIe"``, older kernels' ``"8 GT/s"``);
    None for ``Unknown``, absent or anything else."""
    m = _SPEED.fullmatch(text.strip()) if text is not None else None
    value = float(m.group(1)) if m else 0.0
    return value if value > 0 else None


def parse_width(text: Optional[str]) -> Optional[int]:
    """Lanes of a ``*_link_width`` text (``"16"``; ``"x16"`` accepted); None for 0 (no
    link), absent or anything that is not a PCIe width."""
    m = _WIDTH.fullmatch(text.strip()) if text is not None else None
    value = int(m.group(1)) if m else 0
    return value if value in _WIDTHS else None


@dataclass(frozen=True)
class LinkEnd:
    """One end of a link as sysfs shows it: the texts as read (None: absent)."""

    address: str
    path: str
    current_speed: Optional[str]
    current_width: Optional[str]
    max_speed: Optional[str]
    max_width: Optional[str]

    @classmethod
    def of(cls, pci: PciDevice) -> LinkEnd:
        cur_speed, cur_width, max_speed, max_width = pci.link
        return cls(pci.address, pci.path, cur_speed, cur_width, max_speed, max_width)

    def text(self) -> str:
        return (f"{self.address} current {self.current_speed or '-'} x{self.current_width or '-'}"
                f", max {self.max_speed or '-'} x{self.max_width or '-'} ({self.path}/"
                f"{{{','.join(LINK_FILES)}}})")


@dataclass(frozen=True)
class DegradedLink:
    """A link below its capability: ``device`` its downstream end's BDF (``role``:
    ``"gpu"``, ``"nic"``, ``"nvme"`` or ``"bridge"``; ``names``: the GPUs/NICs whose
    traffic crosses it), ``port`` the BDF above, ``what`` ``"width"``, ``"speed"`` or
    ``"width,speed"``; the speeds in GT/s, widths in lanes, both ends' evidence."""

    device: str
    role: str
    names: tuple[str, ...]
    port: str
    what: str
    speed: Optional[float]
    capable_speed: Optional[float]
    width: Optional[int]
    capable_width: Optional[int]
    down: LinkEnd
    up: LinkEnd

    def rates(self) -> tuple[str, str]:
        """The link's current and capable speed and width (``"8 GT/s x8"``)."""
        return (f"{_gts(self.speed)} x{self.width or '?'}",
                f"{_gts(self.capable_speed)} x{self.capable_width or '?'}")

    def message(self) -> str:
        names = f" ({', '.join(self.names)})" if self.names else ""
        got, cap = self.rates()
        return (f"PCIe link of {self.role} {self.device}{names} to {self.port} runs at {got}, "
                f"below the {cap} both ends support ({self.what}): {FIX}. Evidence: "
                f"{self.down.text()}; {self.up.text()}.")

    def as_dict(self) -> dict[str, object]:
        return {"code": CODE, "device": self.device, "role": self.role,
                "names": list(self.names), "port": self.port, "what": self.what,
                "speed_gts": self.speed, "capable_speed_gts": self.capable_speed,
                "width": self.width, "capable_width": self.capable_width,
                "message": self.message()}


def _gts(value: Optional[float]) -> str:
    return "? GT/s" if value is None else f"{value:g} GT/s"


def _lower(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or b is None else min(a, b)


def judge(down: LinkEnd, up: LinkEnd, gpu: bool) -> Optional[tuple[
        str, Optional[float], Optional[float], Optional[int], Optional[int]]]:
    """The verdict on one link from its two ends' texts: (what, speed, capable speed,
    width, capable width), or None when it is not degraded or cannot be decided.
    ``gpu``: the downstream end is a GPU (its speed alone decides nothing)."""
    speed = parse_speed(down.current_speed) or parse_speed(up.current_speed)
    width = parse_width(down.current_width) or parse_width(up.current_width)
    cap_speed = _lower(parse_speed(down.max_speed), parse_speed(up.max_speed))
    cap_width = _lower(parse_width(down.max_width), parse_width(up.max_width))
    what = []
    if width is not None and cap_width is not None and width < cap_width:
        what.append("width")
    if not gpu and speed is not None and cap_speed is not None and speed < cap_speed:
        what.append("speed")
    if not what:
        return None
    return (",".join(what), speed, cap_speed,
            width, None if cap_width is None else int(cap_width))


def _targets(host: Topology) -> Iterable[tuple[str, str, Optional[str]]]:
    """(BDF, role, name) of each device whose links are checked."""
    for g in host.gpus:
        yield g.address, "gpu", g.name
    for n in host.nics:
        pci = host.pci.get(n.address) if n.address else None
        if pci is not None:
            yield (pci.physfn or pci.address), "nic", n.name
    for address, pci in host.pci.items():
        if pci.pci_class == NVME_CLASS and not pci.is_vf:
            yield address, "nvme", None


def degraded_links(host: Topology) -> tuple[DegradedLink, ...]:
    """The degraded links of ``host`` (see the module's text), one per link, in PCI
    order of their downstream ends."""
    return find_degraded(host.pci, _targets(host))


def find_degraded(pci: Mapping[str, PciDevice],
                  targets: Iterable[tuple[str, str, Optional[str]]]
                  ) -> tuple[DegradedLink, ...]:
    """:func:`degraded_links` over a PCI tree and the (BDF, role, name) to check."""
    links: dict[str, tuple[str, str, list[str]]] = {}  # port -> (device, role, names)
    for address, role, name in targets:
        dev = pci.get(address)
        if dev is None:
            continue
        chain = (address, *dev.bridges)
        # Links alternate with switch-internal hops: device-port, (switch upstream port
        # - downstream port inside the switch), upstream port-port above...  A chain
        # that is not root port + switches (an even count of bridges) keeps its first.
        pairs = list(zip(chain[::2], chain[1::2]) if len(chain) % 2 == 0
                     else zip(chain[:1], chain[1:2]))
        for i, (below, above) in enumerate(pairs):
            entry = links.setdefault(above, (below, role if i == 0 else "bridge", []))
            if name is not None and name not in entry[2]:
                entry[2].append(name)
    out: list[DegradedLink] = []
    for port, (address, role, names) in links.items():
        dev, up = pci.get(address), pci.get(port)
        if dev is None or up is None:
            continue
        down_end, up_end = LinkEnd.of(dev), LinkEnd.of(up)
        verdict = judge(down_end, up_end, role == "gpu")
        if verdict is not None:
            what, speed, cap_speed, width, cap_width = verdict
            out.append(DegradedLink(address, role, tuple(names), port, what, speed, cap_speed,
                                    width, cap_width, down_end, up_end))
    out.sort(key=lambda d: d.device)
    return tuple(out)

"""PCI functions rebuilt from the lines of a real ``lspci -vvv`` capture: the
configuration space that holds what those lines print (the PCI Express capability's
``LnkCap``, ``LnkSta`` and ``LnkCap2``, the Access Control Services extended
capability's ``ACSCap`` and ``ACSCtl``), the four link files the kernel derives from
the same registers (``current_link_speed`` "8.0 GT/s PCIe", ``max_link_width`` "16"),
and the ``lspci -xxxx`` text of a set of functions, which real ``lspci -F`` decodes
back into ``-vvv`` lines (the oracle that the bytes say what the capture says).

>>> f = Function.parse("0000:01:00.0", "endpoint", 0x15B3, 0x101B, 0x020700,
...                    "LnkCap:\\tPort #0, Speed 16GT/s, Width x16, ASPM not supported",
...                    "LnkSta:\\tSpeed 8GT/s (downgraded), Width x16 (ok)")
>>> (f.cap, f.sta)
((4, 16), (3, 16))
>>> link_files(f)
('8.0 GT/s PCIe', '16', '16.0 GT/s PCIe', '16')
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Optional

from ..ground.errors import UsageError
from .builder_machine import PORT_TYPES as BRIDGE_PORTS

__all__ = ["ACS_AT_PLX", "ACS_NAMES", "KERNEL_SPEEDS", "LSPCI_SPEEDS", "LINK_FILES", "PORT_TYPES",
           "Function",
           "acs_bits", "config", "link_files", "lspci_dump", "write_function"]

#: The link speed codes (LnkCap's Max Link Speed, LnkSta's Current Link Speed) as
#: ``lspci`` prints them (pciutils' ``link_speed()``) ...
LSPCI_SPEEDS: Mapping[int, str] = {1: "2.5GT/s", 2: "5GT/s", 3: "8GT/s", 4: "16GT/s",
                                   5: "32GT/s", 6: "64GT/s"}
#: ... and as the kernel writes them to sysfs (``pci_speed_string()``).
KERNEL_SPEEDS: Mapping[int, str] = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe",
                                    4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe",
                                    6: "64.0 GT/s PCIe"}
#: The device/port type field of the PCI Express Capabilities register.
PORT_TYPES: Mapping[str, int] = {"endpoint": 0, "legacy": 1, **BRIDGE_PORTS}
#: The ACS Capability/Control bits in ``lspci``'s names and order, bit 0 first.
ACS_NAMES = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl",
             "DirectTrans")
#: Where Broadcom/PLX switch ports have their ACS capability: NCCL's troubleshooting
#: guide and NVIDIA/nccl#304 clear ACSCtl with ``setpci -s BDF f2a.w=0000`` (the
#: control register, 6 bytes into the capability at 0xf24).
ACS_AT_PLX = 0xF24
LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
_EXP_AT, _AER_AT = 0x60, 0x100
_ASPM = {"not supported": 0, "L0s": 1, "L1": 2, "L0s L1": 3}
_L0S = ("<64ns", "<128ns", "<256ns", "<512ns", "<1us", "<2us", "<4us", "unlimited")
_L1 = ("<1us", "<2us", "<4us", "<8us", "<16us", "<32us", "<64us", "unlimited")
_LINK = re.compile(r"Speed ([0-9.]+GT/s)[^,]*, Width x([0-9]+)")
_ACS = re.compile(r"(\w+)([+-])")


def _link(line: str) -> tuple[int, int]:
    """(speed code, width) of a capture's ``LnkCap``/``LnkSta`` line."""
    m = _LINK.search(line)
    codes = {text: code for code, text in LSPCI_SPEEDS.items()}
    if m is None or m.group(1) not in codes:
        raise UsageError(f"not an lspci link line: {line!r}")
    return codes[m.group(1)], int(m.group(2))


def _aspm(lnkcap: str) -> int:
    """LnkCap's ASPM Support and exit latency fields (bits 10-17) of a capture's line
    ("ASPM L1, Exit Latency L1 <16us")."""
    m = re.search(r"ASPM (not supported|L0s L1|L0s|L1)", lnkcap)
    bits = _ASPM[m.group(1)] << 10 if m else 0
    for name, table, shift in (("L0s", _L0S, 12), ("L1", _L1, 15)):
        lat = re.search(rf"(?:Latency|,) {name} (<?[0-9a-z]+)", lnkcap)
        if lat is not None and lat.group(1) in table:
            bits |= table.index(lat.group(1)) << shift
    return bits


def acs_bits(line: str) -> int:
    """The register value of a capture's ``ACSCap:``/``ACSCtl:`` line."""
    flags = dict(_ACS.findall(line.split(":", 1)[-1]))
    if set(flags) != set(ACS_NAMES):
        raise UsageError(f"not an lspci ACS line: {line!r}")
    return sum(1 << bit for bit, name in enumerate(ACS_NAMES) if flags[name] == "+")


@dataclass(frozen=True)
class Function:
    """One PCI function: ``bdf`` (with its domain), ``port`` (a key of
    :data:`PORT_TYPES`), ids and class, ``cap`` and ``sta`` the (speed code, width)
    of LnkCap and LnkSta, ``port_number`` LnkCap's Port #, ``aspm`` its ASPM bits
    (10-17), ``acs`` the (ACSCap,
    ACSCtl) registers at ``acs_at`` (None: no ACS capability)."""

    bdf: str
    port: str
    vendor: int
    device: int
    pci_class: int
    cap: tuple[int, int]
    sta: tuple[int, int]
    port_number: int = 0
    aspm: int = 0
    acs: Optional[tuple[int, int]] = None
    acs_at: int = ACS_AT_PLX

    @classmethod
    def parse(cls, bdf: str, port: str, vendor: int, device: int, pci_class: int,
              lnkcap: str, lnksta: str, acs: Optional[tuple[str, str]] = None,
              acs_at: int = ACS_AT_PLX) -> Function:
        """The function whose registers print the capture's lines (``acs``: its
        ``ACSCap:`` and ``ACSCtl:`` lines)."""
        if port not in PORT_TYPES:
            raise UsageError(f"port must be one of {', '.join(PORT_TYPES)}")
        m = re.search(r"Port #([0-9]+)", lnkcap)
        return cls(bdf, port, vendor, device, pci_class, _link(lnkcap), _link(lnksta),
                   int(m.group(1)) if m else 0, _aspm(lnkcap),
                   None if acs is None else (acs_bits(acs[0]), acs_bits(acs[1])), acs_at)


def _put(cfg: bytearray, at: int, value: int, size: int) -> None:
    cfg[at:at + size] = value.to_bytes(size, "little")


def config(f: Function) -> bytes:
    """The function's 4096-byte configuration space, as root reads its ``config``: a
    type 0 or type 1 header, a PCI Express capability (v2) at 0x60 and, in the
    extended space, AER at 0x100 followed by ACS at ``f.acs_at``."""
    cfg = bytearray(4096)
    bridge = f.port in BRIDGE_PORTS
    _put(cfg, 0x00, f.vendor | f.device << 16, 4)
    _put(cfg, 0x04, 0x0010_0006, 4)  # memory, bus master; status: capability list
    _put(cfg, 0x08, f.pci_class << 8, 4)
    cfg[0x0E] = 0x01 if bridge else 0x00
    cfg[0x34] = _EXP_AT
    slot = 0x100 if f.port in ("root", "downstream") else 0
    _put(cfg, _EXP_AT, 0x10, 2)  # PCI Express, the last capability
    _put(cfg, _EXP_AT + 0x02, 0x2 | PORT_TYPES[f.port] << 4 | slot, 2)
    _put(cfg, _EXP_AT + 0x0C, f.cap[0] | f.cap[1] << 4 | f.aspm | f.port_number << 24,
         4)
    _put(cfg, _EXP_AT + 0x12, f.sta[0] | f.sta[1] << 4, 2)
    # LnkCap2's Supported Link Speeds vector: the kernel's max_link_speed reads it
    _put(cfg, _EXP_AT + 0x2C, sum(1 << s for s in range(1, f.cap[0] + 1)), 4)
    nxt = f.acs_at if f.acs is not None else 0
    _put(cfg, _AER_AT, 0x0001 | 2 << 16 | nxt << 20, 4)  # AER v2
    if f.acs is not None:
        _put(cfg, f.acs_at, 0x000D | 1 << 16, 4)  # ACS v1, the last capability
        _put(cfg, f.acs_at + 4, f.acs[0], 2)
        _put(cfg, f.acs_at + 6, f.acs[1], 2)
    return bytes(cfg)


def link_files(f: Function) -> tuple[str, str, str, str]:
    """What the kernel writes to the function's :data:`LINK_FILES` from these
    registers: LnkSta's speed and width, LnkCap2's highest speed and LnkCap's width."""
    return (KERNEL_SPEEDS[f.sta[0]], str(f.sta[1]), KERNEL_SPEEDS[f.cap[0]], str(f.cap[1]))


def lspci_dump(functions: Iterable[Function]) -> str:
    """The ``lspci -xxxx`` text of ``functions`` (what ``lspci -F`` reads)."""
    out: list[str] = []
    for f in functions:
        raw = config(f)
        out.append(f"{f.bdf} PCI device")
        out += [f"{o:02x}: " + " ".join(f"{b:02x}" for b in raw[o:o + 16])
                for o in range(0, len(raw), 16)]
        out.append("")
    return "\n".join(out) + "\n"


def write_function(sysfs: str, path: str, f: Function) -> None:
    """Write ``f``'s ``config`` and link files into the function's directory
    ``path`` (below ``devices/``) of the tree whose sysfs root is ``sysfs``."""
    where = os.path.join(sysfs, path.lstrip("/"))
    with open(os.path.join(where, "config"), "wb") as out:
        out.write(config(f))
    for name, value in zip(LINK_FILES, link_files(f)):
        with open(os.path.join(where, name), "w", encoding="ascii") as text:
            text.write(value + "\n")

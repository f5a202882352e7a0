"""Peer traffic redirected to the root complex (``acs_redirect``), and an IOMMU that
translates the NICs' DMA (``iommu_translated``).

``acs_redirect``: a NIC and a GPU (or an NVMe drive: both are peers of a NIC for
GPUDirect RDMA and storage) below one PCIe switch should talk through the switch.  When
the switch's downstream ports have ACS P2P Request or Completion Redirect enabled, every
peer request goes up to the root complex and back, at a fraction of the bandwidth.  As
root, the ACS Control register of the two downstream ports decides (the Access Control
Services extended capability, id 0x000D, in ``config``; bit 2 ReqRedir, bit 3
CmpltRedir, as ``lspci -vvv``'s ``ACSCtl`` line prints them).  Without root (``config``
ends at 64 bytes), the kernel's ``iommu_group``\\ s decide: the kernel gives a function
a group of its own, apart from the downstream port above it, only when that port's ACS
(SrcValid, ReqRedir, CmpltRedir, UpstreamFwd) is enabled; without ACS it puts the
function in its port's group.  Two functions in different groups alone prove nothing
(``rdma_topo check``'s test): the kernel separates the groups of two downstream ports
of one switch whether or not they have ACS, as the kernel lab's switch without ACS
shows (tests/kernel/acs_scenarios.py).  Neither readable: no finding.

``iommu_translated``: the kernel's default domain of a NIC's ``iommu_group``
(``/sys/kernel/iommu_groups/N/type``: ``DMA`` or ``DMA-FQ`` translate, ``identity`` is
passthrough) or, on kernels without that file, the IOMMUs of ``/sys/class/iommu`` with
no ``iommu=pt``/``iommu.passthrough=1`` on ``/proc/cmdline``.  Translated DMA costs the
NIC IOTLB misses, and GPUDirect RDMA's peer traffic goes through the root complex:
NVIDIA's tuning guides ask for ``iommu=pt``.

The rules (:func:`redirect_evidence`, :func:`iommu_mode`) are pure functions over what
was read; :func:`acs_redirects` and :func:`translated_nics` read a :class:`Topology`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from ..ground.sysfs_read import read_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Optional

    from ._pci import PciDevice
    from ._topology import Topology

__all__ = ["ACS_BITS", "AcsRedirect", "IommuMode", "TranslatedNic",
           "acs_control", "acs_redirects", "acs_text", "ext_capability", "find_redirects",
           "iommu_mode", "redirect_evidence", "translated_nics"]

PCI_EXT_CAP_ID_ACS = 0x000D
#: The ACS Control register's bits in lspci's names and order (bit 0 first).
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl",
            "DirectTrans")
REDIRECT = 0b1100  # ReqRedir | CmpltRedir
_CONFIG_MAX = 4096
_TRANSLATED = ("DMA", "DMA-FQ")
_PASSTHROUGH = frozenset(("iommu=pt", "iommu.passthrough=1", "iommu.passthrough=on",
                          "iommu.passthrough=y", "amd_iommu=pt"))
_NVME_CLASS = 0x010802
_GPU_FIX = ("disable ACS P2P redirect on the switch's downstream ports (setpci, or "
            "rdma_topo setup / the BIOS's ACS setting), or pass the devices through to one "
            "VM as a group")


def ext_capability(config: bytes, cap_id: int) -> Optional[bytes]:
    """The body of PCIe extended capability ``cap_id`` in ``config`` (after its 4-byte
    header), or None: absent, or ``config`` without its extended space (not root)."""
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 4 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        nxt = (header >> 20) & 0xFFC
        if header & 0xFFFF == cap_id:
            end = nxt if nxt > offset else len(config)
            return config[offset + 4:end]
        offset = nxt
    return None


def acs_control(config: Optional[bytes]) -> Optional[int]:
    """The ACS Control register of a function's ``config`` bytes: 0 when the extended
    space is there without an ACS capability (nothing isolated), None when ``config``
    has no extended space (unreadable, or read without root)."""
    if config is None or len(config) <= 0x100:
        return None
    body = ext_capability(config, PCI_EXT_CAP_ID_ACS)
    return int.from_bytes(body[2:4], "little") if body and len(body) >= 4 else 0


def acs_text(control: int) -> str:
    """``control`` as ``lspci -vvv``'s ``ACSCtl:`` line lists it."""
    return " ".join(f"{name}{'+' if control >> bit & 1 else '-'}"
                    for bit, name in enumerate(ACS_BITS))


def redirect_evidence(controls: tuple[Optional[int], Optional[int]],
                      groups: tuple[tuple[Optional[str], Optional[str]], ...]
                      ) -> Optional[str]:
    """Whether peer traffic between two functions below one switch is redirected, from
    the ACS Control of their two downstream ports (``controls``, None: unreadable) and
    the ``iommu_group`` of each function and of its port (``groups``: (function's,
    port's) twice; None: none): ``"acs_ctl"`` or ``"iommu_group"`` (the evidence it
    rests on), or None (not redirected, or undecided).  The ports' bits decide when
    read; the groups only when neither port's could be: a function in a group apart
    from its port's is isolated by that port's ACS."""
    if any(c is not None for c in controls):
        return "acs_ctl" if any(c is not None and c & REDIRECT for c in controls) else None
    if any(dev is not None and port is not None and dev != port for dev, port in groups):
        return "iommu_group"
    return None


@dataclass(frozen=True)
class AcsRedirect:
    """Peer traffic between ``device`` (a NIC's PCI function, ``name`` its RDMA device)
    and ``peer`` (``peer_role`` ``"gpu"`` or ``"nvme"``) redirected at the switch whose
    upstream port is ``switch``: ``ports`` their downstream ports, ``evidence``
    ``"acs_ctl"`` or ``"iommu_group"``; ``controls`` the ports' ACS Control (None:
    unread) and ``groups`` the iommu groups of each function and its port."""

    code: ClassVar[str] = "acs_redirect"
    device: str
    name: str
    peer: str
    peer_role: str
    switch: str
    ports: tuple[str, str]
    evidence: str
    controls: tuple[Optional[int], Optional[int]]
    groups: tuple[tuple[Optional[str], Optional[str]], ...]

    def message(self) -> str:
        if self.evidence == "acs_ctl":
            why = "; ".join(f"{p} ACSCtl: {acs_text(c)}" for p, c in zip(self.ports,
                                                                         self.controls)
                            if c is not None)
        else:
            why = "; ".join(
                f"{dev} in iommu_group {g[0]}, its port {port} in {g[1]}"
                for dev, port, g in zip((self.device, self.peer), self.ports, self.groups)
                if g[0] != g[1]) + (" (apart from its port: the port's ACS isolates it; run "
                                    "as root to read the ACS bits)")
        return (f"Peer traffic between NIC {self.device} ({self.name}) and {self.peer_role} "
                f"{self.peer} below switch {self.switch} is redirected to the root complex "
                f"by ACS: {_GPU_FIX}. Evidence: {why}.")

    def as_dict(self) -> dict[str, object]:
        return {"code": self.code, "device": self.device, "name": self.name, "peer": self.peer,
                "peer_role": self.peer_role, "switch": self.switch, "ports": list(self.ports),
                "evidence": self.evidence,
                "acs_ctl": [None if c is None else acs_text(c) for c in self.controls],
                "iommu_groups": [list(g) for g in self.groups], "message": self.message()}


def _read(path: str, size: int) -> Optional[bytes]:
    """At most ``size`` bytes of the file, read as every sysfs file is (once inside a
    command's read-once scope); None when it cannot be read."""
    data = read_file(path, size)
    return None if isinstance(data, int) else data


def _group(pci: PciDevice) -> Optional[str]:
    from ..ground import inputs

    try:
        return os.fsdecode(os.path.basename(
            inputs.readlink(os.path.join(pci.path, "iommu_group"))))
    except (OSError, ValueError):
        return None


def _ingress(chain: tuple[str, ...], common: str) -> Optional[str]:
    """The port of ``chain`` (device first) just below ``common``."""
    i = chain.index(common)
    return chain[i - 1] if i >= 2 else None


def _shared_switch(a: PciDevice, b: PciDevice) -> Optional[tuple[str, str, str]]:
    """(switch upstream port, a's downstream port, b's) when a and b hang below two
    downstream ports of one switch (the nearest bridge they share is no root port)."""
    common = next((x for x in a.bridges if x in b.bridges), None)
    if common is None or common == a.bridges[-1]:
        return None
    pa = _ingress((a.address, *a.bridges), common)
    pb = _ingress((b.address, *b.bridges), common)
    return None if pa is None or pb is None or pa == pb else (common, pa, pb)


def _peers(host: Topology) -> Iterable[tuple[str, str]]:
    for g in host.gpus:
        yield g.address, "gpu"
    for address, pci in host.pci.items():
        if pci.pci_class == _NVME_CLASS and not pci.is_vf:
            yield address, "nvme"


def find_redirects(pci: Mapping[str, PciDevice], nics: Iterable[tuple[str, str]],
                   peers: Iterable[tuple[str, str]]) -> tuple[AcsRedirect, ...]:
    """:func:`acs_redirects` over a PCI tree, the (BDF, RDMA device) of the NICs and the
    (BDF, role) of their peers."""
    peers = list(peers)
    out: list[AcsRedirect] = []
    configs: dict[str, Optional[int]] = {}

    def control(port: str) -> Optional[int]:
        if port not in configs:
            dev = pci.get(port)
            configs[port] = None if dev is None else acs_control(
                _read(os.path.join(dev.path, "config"), _CONFIG_MAX))
        return configs[port]

    def group(address: str) -> Optional[str]:
        dev = pci.get(address)
        return None if dev is None else _group(dev)

    for address, name in nics:
        nic = pci.get(address)
        for peer, role in peers:
            other = pci.get(peer)
            if nic is None or other is None:
                continue
            shared = _shared_switch(nic, other)
            if shared is None:
                continue
            switch, pa, pb = shared
            controls = (control(pa), control(pb))
            groups = ((group(address), group(pa)), (group(peer), group(pb)))
            evidence = redirect_evidence(controls, groups)
            if evidence is not None:
                out.append(AcsRedirect(address, name, peer, role, switch, (pa, pb), evidence,
                                       controls, groups))
    return tuple(out)


def _nic_functions(host: Topology) -> Iterable[tuple[str, str]]:
    """(PF BDF, RDMA device) of each NIC, one per function."""
    seen: set[str] = set()
    for n in host.nics:
        pci = host.pci.get(n.address) if n.address else None
        if pci is None:
            continue
        address = pci.physfn or pci.address
        if address not in seen:
            seen.add(address)
            yield address, n.name


def acs_redirects(host: Topology) -> tuple[AcsRedirect, ...]:
    """Every (NIC, GPU or NVMe) pair below one switch whose peer traffic ACS redirects
    (see the module's text), in the NICs' order."""
    return find_redirects(host.pci, _nic_functions(host), _peers(host))


@dataclass(frozen=True)
class IommuMode:
    """How the IOMMU treats a function's DMA: ``mode`` ``"translated"``,
    ``"passthrough"``, ``"off"`` (no IOMMU) or ``"unknown"``, and the evidence."""

    mode: str
    evidence: str


def iommu_mode(group: Optional[str], group_type: Optional[str], iommus: tuple[str, ...],
               cmdline: Optional[str]) -> IommuMode:
    """The rule: the group's default domain ``type`` when the kernel has it; else the
    IOMMUs of ``/sys/class/iommu`` (none: off) and ``/proc/cmdline``'s passthrough
    options."""
    if group_type is not None:
        kind = group_type.strip()
        mode = ("translated" if kind in _TRANSLATED else "passthrough" if kind == "identity"
                else "unknown")
        return IommuMode(mode, f"iommu_group {group} type {kind}")
    if not iommus:
        return IommuMode("off", "no IOMMU in /sys/class/iommu")
    if group is None:
        return IommuMode("off", "no iommu_group: not behind an IOMMU")
    pt = sorted(set((cmdline or "").split()) & _PASSTHROUGH)
    if cmdline is None:
        return IommuMode("unknown", f"IOMMUs {', '.join(iommus)}; /proc/cmdline unreadable")
    return IommuMode("passthrough" if pt else "translated",
                     f"IOMMUs {', '.join(iommus)}, kernel command line "
                     f"{' '.join(pt) if pt else 'without iommu=pt'}")


@dataclass(frozen=True)
class TranslatedNic:
    """A NIC whose DMA the IOMMU translates (``iommu_translated``)."""

    code: ClassVar[str] = "iommu_translated"
    device: str
    name: str
    evidence: str

    def message(self) -> str:
        return (f"The IOMMU translates the DMA of NIC {self.device} ({self.name}): every "
                "access pays IOTLB lookups and GPUDirect RDMA's peer traffic goes through "
                "the root complex; boot with iommu=pt (intel_iommu=on iommu=pt, or "
                f"iommu.passthrough=1). Evidence: {self.evidence}.")

    def as_dict(self) -> dict[str, object]:
        return {"code": self.code, "device": self.device, "name": self.name,
                "evidence": self.evidence, "message": self.message()}


def _text(path: str) -> Optional[str]:
    raw = _read(path, 4096)
    return None if raw is None else raw.decode("utf-8", "replace")


def translated_nics(host: Topology) -> tuple[TranslatedNic, ...]:
    """The NICs whose DMA the IOMMU translates (:func:`iommu_mode` of each)."""
    from ..ground.sysfs_read import listdir

    try:
        iommus = tuple(sorted(os.fsdecode(n) for n in listdir(
            os.path.join(host.sysfs_path, "class", "iommu"))))
    except (OSError, ValueError):
        iommus = ()
    cmdline = _text(os.path.join(host.proc_path, "cmdline"))
    out: list[TranslatedNic] = []
    for address, name in _nic_functions(host):
        pci = host.pci.get(address)  # (a VF's PF may be outside the tree)
        group = None if pci is None else _group(pci)
        gtype = None if group is None else _text(os.path.join(
            host.sysfs_path, "kernel", "iommu_groups", group, "type"))
        mode = iommu_mode(group, gtype, iommus, cmdline)
        if mode.mode == "translated":
            out.append(TranslatedNic(address, name, mode.evidence))
    return tuple(out)

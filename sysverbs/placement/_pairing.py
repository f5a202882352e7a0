"""Which NICs a GPU pairs with on a Grace host, from the :class:`~._layout.Layout`
(docs/placement.md, "Grace and Data Direct"); :func:`~._assign.assign` follows it, so
``topo --assign``, ``env``, ``run``, ``metrics`` and ``nfd`` do too.

* Data Direct (``dma-based``): a GPU's NICs are the RDMA devices of the CX-8 whose DMA
  function sits below the GPU's CX switch, all its ports, under their verbs names.  The
  PF-DMA function link comes from the kernel (the uverbs ioctl,
  :mod:`sysverbs.devices.datadirect`), else the VPD ``V3`` keyword (root); else the GPU
  is ``unresolved``, with the reason and the candidates: never a guess.
* NUMA (``numa-based``): a GPU's NICs are the compute NICs of its CPU NUMA node.  No
  NVIDIA rule pairs them 1:1; where :func:`~._assign.assign` splits them among the
  GPUs of a node, its reason says that split is sysverbs' own tie-break.

NIC roles (:func:`nic_roles`), from four signals (NVSentinel's: device id, link layer,
PCI class, NUMA node): ``compute`` (a ConnectX PF or VF), ``dpu`` (BlueField), or
``other`` (storage, management: any other NIC).  Pure functions of the host and the
layout.
"""

from __future__ import annotations

from ..ground.records import FrozenRecord, init
from ._layout import CX_NICS
from ._names import bdf_key, natural_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Optional

    from ._layout import Layout
    from ._topology import Nic, Topology

__all__ = ["BLUEFIELD", "CX_VFS", "GpuPairing", "NicRole", "nic_roles", "pairing"]

#: BlueField DPUs (their ConnectX function): never a compute NIC (rdma_topo leaves
#: BlueField-3 out of its complexes).
BLUEFIELD = {0xA2D6: "BlueField-2", 0xA2DC: "BlueField-3"}
#: ConnectX virtual functions (mlx5Gen VF): compute NICs, like their PF.
CX_VFS = {0x101E: "ConnectX VF"}


class NicRole(FrozenRecord):
    """An RDMA device's role (``compute``, ``dpu``, ``other``) and the signals read."""

    __slots__ = _fields = ("name", "role", "device_id", "pci_class", "link_layers",
                           "numa_node", "reason")
    name: str
    role: str
    device_id: Optional[str]
    pci_class: Optional[str]
    link_layers: tuple[str, ...]
    numa_node: Optional[int]
    reason: str

    def __init__(self, name: str, role: str, device_id: Optional[str],
                 pci_class: Optional[str], link_layers: tuple[str, ...],
                 numa_node: Optional[int], reason: str) -> None:
        init(self, name, role, device_id, pci_class, link_layers, numa_node, reason)

    def as_dict(self) -> dict[str, object]:
        return {"role": self.role, "reason": self.reason,
                "signals": {"device_id": self.device_id, "pci_class": self.pci_class,
                            "link_layers": list(self.link_layers),
                            "numa_node": self.numa_node}}


def _role(nic: Nic, host: Topology) -> NicRole:
    dev = host.pci.get(nic.address or "")
    layers = tuple(sorted({p.link_layer for p in nic.ports if p.link_layer}))
    if dev is None:
        return NicRole(nic.name, "other", None, None, layers, None,
                       f"not on a PCI function ({nic.placement})")
    vendor, device, cls = dev.vendor, dev.device or 0, dev.pci_class
    ids = f"{vendor or 0:04x}:{device:04x}"
    klass = None if cls is None else f"0x{cls:06x}"
    numa = dev.numa_node
    if vendor == 0x15B3 and device in BLUEFIELD:
        role, why = "dpu", f"{BLUEFIELD[device]} ({ids}): a DPU, not a compute NIC"
    elif vendor == 0x15B3 and (device in CX_NICS or device in CX_VFS):
        model = CX_NICS.get(device) or CX_VFS[device]
        role, why = "compute", f"{model} ({ids})"
        if cls is not None and cls >> 16 != 0x02:
            role, why = "other", f"{model} id but PCI class {klass}, not a network class"
    else:
        role, why = "other", (f"{ids} is no ConnectX compute NIC (storage or "
                              "management)")
    where = "NUMA node unknown" if numa is None else f"NUMA node {numa}"
    return NicRole(nic.name, role, ids, klass, layers, numa,
                   f"{why}; {'/'.join(layers) or 'no link layer'}; {where}")


def nic_roles(host: Topology) -> dict[str, NicRole]:
    """Each RDMA device's role, by name."""
    return {n.name: _role(n, host) for n in host.nics}


class GpuPairing(FrozenRecord):
    """One GPU's pairing: ``rule`` (``data-direct``, ``numa``), ``status``
    (``resolved``, ``unresolved``), ``nics`` (RDMA device names, verbs names),
    ``dma_function`` (its CX-8's, Data Direct), ``via`` (how the PF was tied to it),
    ``candidates`` (unresolved: the NICs it could be), ``reason``."""

    __slots__ = _fields = ("gpu", "rule", "status", "nics", "dma_function", "via",
                           "candidates", "reason")
    gpu: str
    rule: str
    status: str
    nics: tuple[str, ...]
    dma_function: Optional[str]
    via: Optional[str]
    candidates: tuple[str, ...]
    reason: str

    def __init__(self, gpu: str, rule: str, status: str, nics: tuple[str, ...],
                 dma_function: Optional[str], via: Optional[str],
                 candidates: tuple[str, ...], reason: str) -> None:
        init(self, gpu, rule, status, nics, dma_function, via, candidates, reason)

    def as_dict(self) -> dict[str, object]:
        return {"gpu": self.gpu, "rule": self.rule, "status": self.status,
                "nics": list(self.nics), "dma_function": self.dma_function,
                "via": self.via, "candidates": list(self.candidates), "reason": self.reason}


def _names_on(host: Topology, pfs: Iterable[str]) -> tuple[str, ...]:
    """The RDMA devices on these PCI functions and on their VFs, by name."""
    want = set(pfs)
    out = [n for n in host.nics if n.address is not None and (
        n.address in want or (n.address in host.pci and host.pci[n.address].physfn in want))]
    return tuple(n.name for n in sorted(out, key=lambda n: (bdf_key(n.address or ""),
                                                            natural_key(n.name))))


def _addresses(entries: object) -> list[str]:
    return [str(p["address"]) for p in entries  # type: ignore[attr-defined]
            if isinstance(p, dict)]


def _dma_pairing(host: Topology, c: Mapping[str, object]) -> Optional[GpuPairing]:
    gpu, dma, nic = c.get("gpu"), str(c.get("dma_function")), c.get("nic")
    if not isinstance(gpu, str) or not isinstance(nic, dict):
        return None
    if nic["status"] == "resolved":
        names = _names_on(host, _addresses(nic["pfs"]))
        where = (f"the CX-8 whose DMA function {dma} sits below this GPU's CX switch "
                 f"(tied by {nic['via']})")
        why = (f"Data Direct: {', '.join(names)} {'is' if len(names) == 1 else 'are'} "
               f"{where}; NCCL names them {', '.join(n + '_dma' for n in names)}" if names
               else f"Data Direct: {where} has no RDMA device")
        return GpuPairing(gpu, "data-direct", "resolved", names, dma, str(nic["via"]), (),
                          why)
    cands = _names_on(host, _addresses(nic["candidates"]))
    return GpuPairing(gpu, "data-direct", "unresolved", (), dma, None, cands,
                      f"Data Direct: the CX-8 of DMA function {dma} is unresolved: "
                      f"{nic['reason']}; candidates {', '.join(cands) or 'none'} (no "
                      "guess: NCCL resolves it itself when NCCL_IB_HCA is not set)")


def pairing(host: Topology, lay: Layout) -> dict[str, GpuPairing]:
    """Each paired GPU's :class:`GpuPairing`, by address (empty for the ``inline`` and
    ``pcie`` layouts, where PCIe locality applies; a GPU in no complex, like a DGX
    Station's display GPU, is left to it too)."""
    out: dict[str, GpuPairing] = {}
    if lay.kind == "dma-based":
        for c in lay.complexes:
            p = _dma_pairing(host, c)
            if p is not None:
                out[p.gpu] = p
    elif lay.kind == "numa-based":
        roles = nic_roles(host)
        for c in lay.complexes:
            node = c["numa_node"]
            names = tuple(n for n in _names_on(host, _addresses(c["pfs"]))
                          if roles[n].role == "compute")
            for gpu in c["gpus"]:  # type: ignore[attr-defined]
                out[str(gpu)] = GpuPairing(
                    str(gpu), "numa", "resolved", names, None, None, (),
                    f"NUMA-based: no PCIe path joins a GPU and a NIC here; the compute "
                    f"NICs of its CPU NUMA node {node}: {', '.join(names) or 'none'}")
    return out

"""How GPUs and NICs are laid out, as rdma-core's ``kernel-boot/rdma_topo`` names it, from
the PCI tree alone (docs/placement.md, "Grace and Data Direct").

* ``dma-based``: a ConnectX-8 Data Direct DMA function (15b3:2100) exists.  Each sits
  below a CX switch (15b3:197c/1979) under a Grace/Vera root port, beside one GPU below
  the same switch; the CX-8's RDMA PFs are in other PCI domains.  No sysfs link ties a
  PF to its DMA function: the kernel tells it through a uverbs ioctl
  (:func:`read_data_direct`, taken first); the one sysfs fact that does is the VPD
  ``V3`` keyword both carry (``vpd``, readable by root only), which rdma_topo matches;
  without either the complex says ``unresolved`` with the candidates.
* ``numa-based``: a GPU sits directly under a Grace/Vera root port (GB200 with CX-7,
  GH200): no PCIe path joins GPU and NIC; GPUs pair with the ConnectX PFs of their
  CPU NUMA node (BlueField-3 and other NICs are no compute NICs).
* ``inline``: a GPU and a ConnectX PF below one CX switch (ordinary PCIe locality).
* ``pcie``: none of these: PCIe locality as everywhere else.

rdma_topo decides in this order too; where this module differs it says so: rdma_topo's
NUMA rule takes any root port (a bridge with no bridge above), so a PCIe host whose GPU
sits on a root port is "NUMA-based" to it (then rejected for want of CX NICs); here
only Grace and Vera root ports count.

:func:`layout` is a pure function of the host model and the VPD images
:func:`read_vpd` read (or none).
"""

from __future__ import annotations

import errno
import os

from ..ground.records import FrozenRecord, init
from ._names import bdf_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional, Union

    from ._pci import PciDevice
    from ._topology import Topology

    #: A function's ``vpd``: its bytes, or why there are none ("absent", "unreadable").
    VpdRead = Union[bytes, str]

__all__ = ["CX_DMA", "CX_NICS", "CX_SWITCHES", "GRACE_ROOT_PORTS", "KINDS", "Layout",
           "layout", "parse_vpd", "read_data_direct", "read_layout", "read_vpd"]

NVIDIA, MELLANOX = 0x10DE, 0x15B3
#: Root ports of NVIDIA's CPUs (device id -> CPU), as rdma_topo's device table has them.
GRACE_ROOT_PORTS: Mapping[int, str] = {0x22B1: "Grace", 0x22B2: "Grace", 0x22B8: "Grace",
                                       0x2F95: "Vera", 0x2F96: "Vera"}
#: ConnectX compute NICs (PF device ids); BlueField-3 (a2dc) is left out, as rdma_topo does.
CX_NICS: Mapping[int, str] = {0x1021: "ConnectX-7", 0x1023: "ConnectX-8",
                              0x1025: "ConnectX-9"}
CX_SWITCHES = frozenset({0x197C, 0x1979})  # USP/DSP of a ConnectX PCIe switch
CX_DMA = 0x2100  # ConnectX-8 Data Direct DMA function (class 0x080100)
KINDS = ("dma-based", "numa-based", "inline", "pcie")
_VPD_MAX = 32768


class Layout(FrozenRecord):
    """``kind`` (one of :data:`KINDS`), ``reason``, and the complexes: per DMA function
    (dma-based), per NUMA node (numa-based), per GPU (inline); each a JSON object."""

    __slots__ = _fields = ("kind", "reason", "complexes")
    kind: str
    reason: str
    complexes: tuple[dict[str, object], ...]

    def __init__(self, kind: str, reason: str,
                 complexes: tuple[dict[str, object], ...] = ()) -> None:
        init(self, kind, reason, complexes)

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "reason": self.reason, "complexes": list(self.complexes)}


def parse_vpd(data: bytes) -> dict[str, str]:
    """The read-only keywords of a PCI VPD image (``SN``, ``V3``...) and its identifier
    string as ``"name"``; what does not parse is left out."""
    out: dict[str, str] = {}
    i = 0
    while i < len(data):
        tag = data[i]
        if tag & 0x80:  # large resource: 2-byte length
            if i + 3 > len(data):
                break
            length = int.from_bytes(data[i + 1:i + 3], "little")
            body, item = data[i + 3:i + 3 + length], tag
            i += 3 + length
        else:
            item, length = (tag >> 3) & 0x0F, tag & 0x07
            body = data[i + 1:i + 1 + length]
            i += 1 + length
            if item == 0x0F:  # end tag
                break
        if item == 0x82:
            out["name"] = body.decode("ascii", "replace").strip()
        elif item == 0x90:
            j = 0
            while j + 3 <= len(body):
                key, n = body[j:j + 2].decode("ascii", "replace"), body[j + 2]
                if key != "RV":
                    out[key] = body[j + 3:j + 3 + n].decode("ascii", "replace").strip()
                j += 3 + n
    return out


def _ids(dev: PciDevice) -> tuple[Optional[int], Optional[int]]:
    return dev.vendor, dev.device


def _is(dev: Optional[PciDevice], vendor: int, devices: object) -> bool:
    return dev is not None and dev.vendor == vendor and dev.device in devices  # type: ignore


def _nvidia_gpus(host: Topology) -> list[PciDevice]:
    return [g.pci for g in host.gpus
            if g.pci.vendor == NVIDIA and (g.pci.pci_class or 0) >> 16 == 0x03]


def _dma_functions(host: Topology) -> list[PciDevice]:
    return sorted((d for d in host.pci.values() if _ids(d) == (MELLANOX, CX_DMA)),
                  key=lambda d: bdf_key(d.address))


def _cx_pfs(host: Topology) -> list[PciDevice]:
    return sorted((d for d in host.pci.values() if _is(d, MELLANOX, CX_NICS)),
                  key=lambda d: bdf_key(d.address))


def read_vpd(host: Topology) -> dict[str, VpdRead]:
    """The ``vpd`` of each DMA function and ConnectX PF: its bytes, ``"absent"`` (no
    file) or ``"unreadable"`` (the kernel makes it 0600: root only).  Nothing on a host
    without a DMA function (a VPD read goes to the device: it is only made when
    needed)."""
    out: dict[str, VpdRead] = {}
    dmas = _dma_functions(host)
    for dev in dmas + (_cx_pfs(host) if dmas else []):
        try:
            with open(os.path.join(dev.path, "vpd"), "rb") as f:
                out[dev.address] = f.read(_VPD_MAX)
        except FileNotFoundError:
            out[dev.address] = "absent"
        except OSError:
            out[dev.address] = "unreadable"
    return out


def _rdma_names(host: Topology) -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for nic in host.nics:
        if nic.address is not None:
            names.setdefault(nic.address, []).append(nic.name)
    return names


def _pf_entry(dev: PciDevice, names: Mapping[str, list[str]]) -> dict[str, object]:
    return {"address": dev.address, "model": CX_NICS.get(dev.device or 0),
            "numa_node": dev.numa_node, "rdma_devices": names.get(dev.address, [])}


def _v3(vpd: Mapping[str, VpdRead], address: str) -> tuple[Optional[str], str]:
    raw = vpd.get(address, "not read")
    if isinstance(raw, str):
        return None, f"its vpd is {raw}" + (" (root only)" if raw == "unreadable" else "")
    v3 = parse_vpd(raw).get("V3")
    return (v3, "") if v3 else (None, "its vpd has no V3 keyword")


def read_data_direct(host: Topology) -> dict[str, str]:
    """What the kernel says of each ConnectX PF's Data Direct DMA function (the uverbs
    ioctl of :mod:`sysverbs.devices.datadirect`, on each of its RDMA devices): by PF
    address, the DMA function's address, or ``"errno NAME: text"``.  Only on this
    machine (sysfs ``/sys``, not recorded) with a DMA function: a tree's device nodes
    are stand-ins or this machine's, neither the tree's devices."""
    live = os.path.abspath(host.sysfs_path) == "/sys" and not host.recorded
    if not live or not _dma_functions(host):
        return {}
    from ..devices.datadirect import data_direct_path

    pfs = {d.address for d in _cx_pfs(host)}
    out: dict[str, str] = {}
    for nic in host.nics:
        if nic.address not in pfs or nic.uverbs is None or nic.address in out:
            continue
        try:
            path = data_direct_path(os.path.join(host.dev_dir, f"uverbs{nic.uverbs}"))
            out[nic.address] = os.path.basename(path.rstrip("/"))
        except OSError as e:
            name = errno.errorcode.get(e.errno or 0, str(e.errno))
            out[nic.address] = f"errno {name}: {e.strerror}"
    return out


def _kernel_tie(host: Topology, dd: Mapping[str, str], dma: str) -> tuple[list[PciDevice], str]:
    """The PFs the kernel ties to DMA function ``dma``, or none and what it said."""
    pfs = [d for d in _cx_pfs(host) if dd.get(d.address) == dma]
    said = sorted({v for v in dd.values() if v.startswith("errno ")})
    return pfs, ("; the kernel's ioctl answered " + ", ".join(said)) if said else ""


def _dma_complex(host: Topology, dma: PciDevice, vpd: Mapping[str, VpdRead],
                 taken: set[str], names: Mapping[str, list[str]],
                 dd: Mapping[str, str]) -> dict[str, object]:
    pci = host.pci
    up = [pci.get(b) for b in dma.bridges[:3]]
    dsp, usp, rp = (up + [None, None, None])[:3]
    entry: dict[str, object] = {"dma_function": dma.address, "gpu": None,
                                "switch": usp.address if usp else None,
                                "root_port": rp.address if rp else None}
    if not (_is(dsp, MELLANOX, CX_SWITCHES) and _is(usp, MELLANOX, CX_SWITCHES)
            and _is(rp, NVIDIA, GRACE_ROOT_PORTS)):
        entry["problem"] = ("not below a CX switch under a Grace/Vera root port: no GPU "
                            "pairs with it")
    else:
        assert usp is not None
        gpus = [g.address for g in _nvidia_gpus(host) if usp.address in g.bridges]
        if len(gpus) == 1:
            entry["gpu"] = gpus[0]
        else:
            entry["problem"] = f"{len(gpus)} GPUs below its switch {usp.address} (1 expected)"
    by_kernel, kernel_said = _kernel_tie(host, dd, dma.address)
    if by_kernel:
        taken.update(d.address for d in by_kernel)
        entry["nic"] = {"status": "resolved", "via": "the kernel (uverbs ioctl "
                        "MLX5_IB_METHOD_GET_DATA_DIRECT_SYSFS_PATH)",
                        "pfs": [_pf_entry(d, names) for d in by_kernel]}
        return entry
    v3, why = _v3(vpd, dma.address)
    pfs = [d for d in _cx_pfs(host) if v3 is not None and _v3(vpd, d.address)[0] == v3]
    if pfs:
        taken.update(d.address for d in pfs)
        entry["nic"] = {"status": "resolved", "via": f"VPD V3 keyword {v3} (rdma_topo's tie)",
                        "pfs": [_pf_entry(d, names) for d in pfs]}
        return entry
    if v3 is not None:
        why = f"no ConnectX PF has its VPD V3 keyword {v3}"
    entry["nic"] = {"status": "unresolved",
                    "reason": f"no sysfs link ties a PF to its DMA function, and {why}"
                              f"{kernel_said}",
                    "candidates": []}
    return entry


def _dma_based(host: Topology, dmas: list[PciDevice], vpd: Mapping[str, VpdRead],
               dd: Mapping[str, str]) -> Layout:
    names = _rdma_names(host)
    taken: set[str] = set()
    out = [_dma_complex(host, d, vpd, taken, names, dd) for d in dmas]
    left = [_pf_entry(d, names) for d in _cx_pfs(host)
            if d.device == 0x1023 and d.address not in taken]
    for entry in out:
        nic = entry["nic"]
        if isinstance(nic, dict) and nic["status"] == "unresolved":
            nic["candidates"] = left  # every ConnectX-8 PF no V3 tied elsewhere
    gpus = sorted({str(e["gpu"]) for e in out if e["gpu"]})
    reason = (f"{len(dmas)} ConnectX-8 Data Direct DMA function(s) (15b3:2100): "
              f"{', '.join(d.address for d in dmas)}; GPUs pair with the CX-8 whose DMA "
              f"function shares their switch ({', '.join(gpus) or 'none found'}), not by "
              "the PF's PCIe path")
    return Layout("dma-based", reason, tuple(out))


def _numa_based(host: Topology, gpus: list[PciDevice], on_rp: list[PciDevice]) -> Layout:
    names = _rdma_names(host)
    pfs = _cx_pfs(host)
    nodes = sorted({g.numa_node for g in gpus if g.numa_node is not None})
    out: list[dict[str, object]] = []
    for node in nodes:
        out.append({"numa_node": node,
                    "gpus": [g.address for g in gpus if g.numa_node == node],
                    "pfs": [_pf_entry(d, names) for d in pfs if d.numa_node == node],
                    "left_out": sorted(n.name for n in host.nics if n.address is not None
                                       and n.address in host.pci
                                       and not _is(host.pci[n.address], MELLANOX, CX_NICS)
                                       and host.pci[n.address].numa_node == node)})
    rp = ", ".join(f"{g.address} under {GRACE_ROOT_PORTS[host.pci[g.bridges[0]].device or 0]}"
                   f" root port {g.bridges[0]}" for g in on_rp)
    reason = (f"GPUs directly under a CPU root port ({rp}): no PCIe path joins a GPU and a "
              "NIC; each GPU pairs with the ConnectX PFs of its CPU NUMA node (no 1:1 "
              "pairing; BlueField-3 and other NICs are left out)")
    return Layout("numa-based", reason, tuple(out))


def _inline(host: Topology) -> Optional[Layout]:
    names = _rdma_names(host)
    out: list[dict[str, object]] = []
    cx_pfs: Optional[list[PciDevice]] = None  # the host's ConnectX PFs, listed once
    for g in _nvidia_gpus(host):
        chain = [host.pci.get(b) for b in g.bridges[:4]]
        if len(chain) < 4 or not all(_is(b, MELLANOX, CX_SWITCHES) for b in chain):
            continue
        usp = chain[3]
        assert usp is not None
        if cx_pfs is None:
            cx_pfs = _cx_pfs(host)
        pfs = [d for d in cx_pfs if usp.address in d.bridges]
        if pfs:
            out.append({"gpu": g.address, "switch": usp.address,
                        "pfs": [_pf_entry(d, names) for d in pfs]})
    if not out:
        return None
    return Layout("inline", f"{len(out)} GPU(s) share a ConnectX switch with a ConnectX PF "
                  "(no DMA function): PCIe locality pairs them", tuple(out))


def layout(host: Topology, vpd: Optional[Mapping[str, VpdRead]] = None,
           data_direct: Optional[Mapping[str, str]] = None) -> Layout:
    """The layout of ``host`` (see the module's text); ``vpd``: what :func:`read_vpd`
    read, ``data_direct``: what :func:`read_data_direct` read (the kernel's tie, taken
    first; None for either: nothing read, the NIC unresolved without the other)."""
    dmas = _dma_functions(host)
    if dmas:
        return _dma_based(host, dmas, vpd or {}, data_direct or {})
    gpus = _nvidia_gpus(host)
    on_rp = [g for g in gpus if g.bridges and _is(host.pci.get(g.bridges[0]), NVIDIA,
                                                 GRACE_ROOT_PORTS)]
    if on_rp:
        return _numa_based(host, gpus, on_rp)
    found = _inline(host)
    if found is not None:
        return found
    return Layout("pcie", "no ConnectX-8 DMA function, no GPU directly under a Grace/Vera "
                  "root port, no GPU sharing a ConnectX switch with a ConnectX PF: PCIe "
                  "locality applies")


def read_layout(host: Topology) -> Layout:
    """:func:`layout` with what the kernel's ioctl says (a live host) and the VPD
    images read from the host's sysfs."""
    return layout(host, read_vpd(host), read_data_direct(host))

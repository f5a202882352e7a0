"""Distance between two PCI functions: nvidia-smi's class, NCCL's path type, bridge hops.

Pure functions over :class:`~sysverbs.placement.PciDevice` data.

nvidia-smi (its legend): ``X`` self; ``PIX`` at most a single PCIe bridge; ``PXB``
multiple PCIe bridges without the host bridge; ``PHB`` through a PCIe host bridge;
``NODE`` across host bridges within a NUMA node; ``SYS`` across NUMA nodes.  A PCIe
switch (its upstream port and downstream ports) counts as one bridge: in a PCIe tree
the root port is at depth 1, a switch's upstream port at an even depth and its
downstream ports one below.

NCCL (``src/graph/xml.cc`` ncclTopoGetXmlFromSys, ``topo.cc``, ``paths.cc``): a PCI
node's parent is the directory two levels up in its sysfs path (a switch's downstream
port is skipped, so a switch is one node), or the CPU (keyed by the top node's
``numa_node``) when one of those two is not a ``BBBB:BB:DD.F`` name; Broadcom PEX gen4/5
sub-switches are merged into their parent switch; a NIC's path has its function digit
(and, with NCCL_IB_MERGE_VFS=1, its device digits) set to 0.  Path type: ``PIX``
through one switch node, ``PXB`` through several, ``PHB`` through the CPU, ``SYS``
across CPUs (NCCL has no ``NODE``).
"""

from __future__ import annotations

import re

from ..ground.records import FrozenRecord, init
from ._names import is_host_bridge

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Optional

    from ._pci import PciDevice

BROADCOM = 0x1000
_NCCL_BDF = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]")

SMI_ORDER = ("X", "PIX", "PXB", "PHB", "NODE", "SYS")
NCCL_ORDER = ("LOC", "PIX", "PXB", "PHB", "SYS")


class Distance(FrozenRecord):
    """How far apart two PCI functions are.

    ``smi``: nvidia-smi's class (None: undecidable, ``reason`` says why); ``nccl``:
    NCCL's path type; ``hops``: PCI bridges traversed (each port counted; a host bridge
    counts one; across host bridges both chains plus two), None when unknown.
    """

    __slots__ = _fields = ("smi", "nccl", "hops", "reason")
    smi: Optional[str]
    nccl: Optional[str]
    hops: Optional[int]
    reason: str

    def __init__(self, smi: Optional[str], nccl: Optional[str], hops: Optional[int],
                 reason: str) -> None:
        init(self, smi, nccl, hops, reason)

    @property
    def rank(self) -> tuple[int, int]:
        """Sort key: nearest class first, then fewest hops (unknown last)."""
        return smi_rank(self.smi, self.hops)


def smi_rank(smi: Optional[str], hops: Optional[int]) -> tuple[int, int]:
    """:attr:`Distance.rank` of a class and a hop count."""
    cls = SMI_ORDER.index(smi) if smi in SMI_ORDER else len(SMI_ORDER)
    return (cls, hops if hops is not None else 1 << 20)


def _node_of(dev: PciDevice, nodes: Mapping[int, frozenset[int]]) -> Optional[int]:
    """The NUMA node of a device: its ``numa_node``, else the one node whose CPUs hold
    all its local CPUs (machine-wide local CPUs, the kernel's answer for an unknown
    node, decide nothing)."""
    if dev.numa_node is not None:
        return dev.numa_node
    cpus = dev.local_cpus
    if not cpus:
        return None
    found = [n for n, node_cpus in nodes.items() if cpus <= node_cpus]
    return found[0] if len(found) == 1 else None


#: Where :func:`numa_affinity` took a device's NUMA node from.
NUMA_SOURCES = ("numa_node", "local_cpulist", "unknown")


def numa_affinity(dev: PciDevice, nodes: Mapping[int, frozenset[int]]
                  ) -> tuple[Optional[int], str]:
    """The NUMA node nvidia-smi's ``NUMA Affinity`` column names for a device, and where
    it came from (:data:`NUMA_SOURCES`): its ``numa_node``; else (-1, missing) the one
    node whose CPUs hold all its ``local_cpulist`` -- on a host of one NUMA node, that
    node (the kernel gives a device of unknown node every CPU); else ``(None,
    "unknown")``: machine-wide local CPUs on a host of several nodes name none."""
    if dev.numa_node is not None:
        return dev.numa_node, "numa_node"
    node = _node_of(dev, nodes)
    return (node, "local_cpulist") if node is not None else (None, "unknown")


def _nodes_text(na: int, nb: int) -> str:
    """``NUMA node 3 and 1``; ``both on NUMA node 0`` (not ``NUMA node 0 and 0``)."""
    return f"both on NUMA node {na}" if na == nb else f"NUMA node {na} and {nb}"


def _same_numa(a: PciDevice, b: PciDevice, nodes: Mapping[int, frozenset[int]]
               ) -> tuple[Optional[bool], str]:
    na, nb = a.numa_node, b.numa_node
    if na is not None and nb is not None:
        return na == nb, _nodes_text(na, nb)
    if len(nodes) <= 1:
        return True, "one NUMA node on this host"
    na, nb = _node_of(a, nodes), _node_of(b, nodes)
    if na is not None and nb is not None:
        return na == nb, _nodes_text(na, nb) + " (from their local CPUs)"
    return None, "numa_node unknown (-1 or missing) on a host with several NUMA nodes"


#: nvidia-smi's class for two functions in different PCI domains (segments: a Grace
#: CPU gives each root port a segment of its own, ``pciDDDD:00``), by the host's number
#: of NUMA nodes with CPUs (sockets), as the real outputs print it (docs/placement.md,
#: "Grace: nvidia-smi's matrix"): on the two-Grace GB200 NVL72 tray (drivers 570.172.08
#: and 580.105.08) every cell across segments is SYS, GPU-NIC and NIC-NIC alike, even
#: within one NUMA node; on the one-Grace GH200 (580.95.05) the GPU-NIC cell within its
#: node is NODE, the NUMA rule below.  None: the NUMA rule decides.  x86 hosts keep all
#: their host bridges in domain 0000 (every real x86 sample): this changes none.
CROSS_SEGMENT: dict[str, Optional[str]] = {"one socket": None, "several sockets": "SYS"}


def _domain(host_bridge: Optional[str]) -> str:
    """``pci0009:00`` -> ``0009`` (a VMD domain counts by the host bridge above it)."""
    return (host_bridge or "")[3:].split(":", 1)[0]


def cross_segment(hb_a: Optional[str], hb_b: Optional[str],
                  nodes: Mapping[int, frozenset[int]]) -> Optional[tuple[str, str]]:
    """(class, reason) of two top host bridges in different PCI domains, by
    :data:`CROSS_SEGMENT`; None when the domains are one or the rule leaves it to the
    NUMA comparison."""
    da, db = _domain(hb_a), _domain(hb_b)
    if da == db:
        return None
    sockets = sum(1 for cpus in nodes.values() if cpus)
    cls = CROSS_SEGMENT["several sockets" if sockets > 1 else "one socket"]
    if cls is None:
        return None
    return cls, (f"different PCI domains ({da} and {db}) on a host of {sockets} "
                 "CPU nodes: nvidia-smi's SYS, whatever their NUMA nodes")


def smi_distance(a: PciDevice, b: PciDevice, nodes: Mapping[int, frozenset[int]]
                 ) -> tuple[Optional[str], Optional[int], str]:
    """(nvidia-smi class, bridge hops, reason)."""
    if a.address == b.address:
        return "X", 0, "same PCI function"
    if a.host_bridge is None or b.host_bridge is None:
        return None, None, "no host bridge above one of them"
    if a.top_host_bridge != b.top_host_bridge:
        hops = len(a.ancestors) + len(b.ancestors)
        segments = cross_segment(a.top_host_bridge, b.top_host_bridge, nodes)
        if segments is not None:
            return segments[0], hops, segments[1]
        same, why = _same_numa(a, b, nodes)
        cls = None if same is None else "NODE" if same else "SYS"
        return cls, hops, f"different host bridges, {why}"
    # Below one host bridge: the full chains (VMD endpoints and their host bridges
    # included), root port first.
    ca, cb = a.ancestors[1:], b.ancestors[1:]
    p = 0
    while p < len(ca) and p < len(cb) and ca[p] == cb[p]:
        p += 1
    hops = (len(ca) - p) + (len(cb) - p) + 1
    if p == 0 or is_host_bridge(ca[p - 1]):
        where = a.top_host_bridge if p == 0 else ca[p - 1]
        return "PHB", hops, f"they meet at host bridge {where}"
    meet = ca[p - 1]
    depth = 0  # depth of the meeting bridge in its PCI domain (root port = 1)
    for name in ca[:p]:
        depth = 0 if is_host_bridge(name) else depth + 1
    # A switch's upstream port sits at an even depth: its downstream ports (one
    # below) are the same switch, so the same single bridge.
    allowed = p + 1 if depth % 2 == 0 else p
    if len(ca) <= allowed and len(cb) <= allowed:
        what = "switch" if depth % 2 == 0 else "port"
        return "PIX", hops, f"they meet at bridge {meet} (a single {what})"
    return "PXB", hops, f"they meet at bridge {meet}, through several bridges"


# ------------------------------------------------------------------------------ NCCL


def nccl_merged_path(dev: PciDevice, is_nic: bool, merge_vfs: bool = True) -> list[str]:
    """The sysfs path components NCCL uses for a device (NIC: function digit 0, VF
    device digits 0); from ``devices/`` down."""
    parts = dev.path.rsplit("/devices/", 1)[-1].split("/")  # the tree's own devices/
    if is_nic and parts:
        last = parts[-1]
        last = last[:-1] + "0"
        if merge_vfs and len(last) >= 4:
            last = last[:-4] + "00" + last[-2:]
        parts = parts[:-1] + [last]
    return parts


def _bcm_gen(dev: Optional[PciDevice], level: int) -> int:
    """NCCL's Broadcom PEX switch generation of a bridge (4, 5; 0: none): its vendor,
    device, subsystem vendor and subsystem device against NCCL's ids."""
    if dev is None or dev.vendor != BROADCOM:  # both ids are Broadcom's
        return 0
    device, sub_vendor, sub_device = dev.device, dev.subsystem_vendor, dev.subsystem_device
    if device is None or sub_vendor is None or sub_device is None:
        return 0
    # summed, as NCCL's ncclTopoGetIntDevice does (an id past 16 bits carries over)
    ident = (BROADCOM << 48) + (device << 32) + (sub_vendor << 16) + sub_device
    if ident & 0xFFFFFFFFFFFFF000 == 0x1000C0101000A000:
        return 4
    if ident & 0xFFFFFFFFFFFFF000 == (0x1000C03010000000 | level * 0x1000):
        return 5
    return 0


def nccl_chain(parts: Sequence[str], pci: Mapping[str, PciDevice], dev: PciDevice
               ) -> tuple[str, list[str]]:
    """(CPU key, switch nodes from the device's parent up) as NCCL builds them."""
    switches: list[str] = []
    i = len(parts) - 1
    top = parts[i] if parts else ""
    while True:
        if i - 1 < 0 or not _NCCL_BDF.match(parts[i - 1]):
            break
        if i - 2 < 0 or not _NCCL_BDF.match(parts[i - 2]):
            break
        i -= 2
        switches.append(parts[i])
        top = parts[i]
    # Flatten Broadcom PEX gen4/gen5 two-level switches (topo.cc).
    flat: list[str] = []
    for j, s in enumerate(switches):
        up = switches[j + 1] if j + 1 < len(switches) else None
        gen = _bcm_gen(pci.get(up), 0) if up is not None else 0
        if gen and _bcm_gen(pci.get(s), 1) == gen:
            continue
        flat.append(s)
    top_dev = pci.get(top) if switches else dev
    raw = top_dev.numa_raw if top_dev is not None else None
    if raw is None:  # a bridge without attributes (a partial tree): the device's own
        raw = dev.numa_raw
    numa = raw.strip() if raw is not None else "-1"
    return numa, flat


def _nccl_node(dev: PciDevice, nic: bool, pci: Mapping[str, PciDevice],
               cache: dict[object, object]) -> tuple[list[str], str, list[str]]:
    key = ("nccl", dev.address, nic)
    hit = cache.get(key)
    if hit is None:
        path = nccl_merged_path(dev, nic)
        hit = cache[key] = (path, *nccl_chain(path, pci, dev))
    return hit  # type: ignore[return-value]


def nccl_distance(a: PciDevice, b: PciDevice, pci: Mapping[str, PciDevice], a_nic: bool,
                  b_nic: bool, cache: Optional[dict[object, object]] = None) -> Optional[str]:
    cache = {} if cache is None else cache
    pa, cpu_a, sa = _nccl_node(a, a_nic, pci, cache)
    pb, cpu_b, sb = _nccl_node(b, b_nic, pci, cache)
    if pa == pb:
        return "LOC"
    if cpu_a != cpu_b:
        return "SYS"
    ra, rb = list(reversed(sa)), list(reversed(sb))
    p = 0
    while p < len(ra) and p < len(rb) and ra[p] == rb[p]:
        p += 1
    if p == 0:
        return "PHB"
    if len(ra) == p and len(rb) == p:
        return "PIX"
    return "PXB"

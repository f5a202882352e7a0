"""hwloc as an oracle for placement: Debian's ``lstopo-no-graphics`` on a materialized
host, its XML read back, and nvidia-smi's distance classes computed on hwloc's tree.

``lstopo(root)`` runs ``lstopo-no-graphics --whole-io --of xml`` with
``HWLOC_FSROOT=<root>`` (hwloc then reads ``<root>/sys`` and ``<root>/proc`` only and
treats the topology as another machine's, ``HWLOC_THISSYSTEM=0``) and
``HWLOC_COMPONENTS=-x86`` (the x86 backend would otherwise describe the CPUs of the
machine running the test, by CPUID, instead of the fixture's ``/sys/devices/system``).

What hwloc's linux backend (hwloc 2.9, ``topology-linux.c``) reads, and so what a
fixture must carry for this oracle:

* CPUs: ``sys/devices/system/cpu/online``, ``cpuN/topology/{core_cpus,thread_siblings,
  package_cpus,core_siblings,die_cpus,core_id,physical_package_id,die_id}``;
* NUMA: ``sys/devices/system/node/online``, ``nodeN/{cpumap,meminfo,distance}``;
* PCI: the flat list ``sys/bus/pci/devices/*`` with ``class``, ``vendor``, ``device``,
  ``subsystem_*`` and ``config`` (header type, and for a bridge the secondary and
  subordinate bus numbers: hwloc builds the tree from bus ranges, not from sysfs
  paths); the link speed from the config's PCIe capability or ``current_link_*``;
* locality: ``local_cpus`` of the first function on each root bus (hwloc never reads
  ``numa_node`` for PCI devices); the I/O objects hang below the smallest object whose
  CPU set is that mask;
* RDMA: ``sys/class/infiniband/*`` (OpenFabrics OS devices, placed at the ``device``
  link's PCI function) and ``sys/class/net/*``.

hwloc makes one host bridge per root bus (``bridge_pci="0000:[00-0c]"``), which is
the ``pciDDDD:BB`` directory of sysfs.  Devices in a PCI domain above 0xffff (VMD) are
ignored by a build without ``--enable-32bits-pci-domain`` (Debian's), with a warning.

The classification (:func:`smi_class`) is nvidia-smi's legend, written here on hwloc's
tree without the library: ``X`` self; ``PIX`` at most one PCIe bridge; ``PXB``
several bridges without the host bridge; ``PHB`` through a host bridge; ``NODE``
across host bridges within a NUMA node; ``SYS`` across NUMA nodes.  "A bridge" is what
a real matrix counts as one: a root port, or a whole PCIe switch (its upstream port
and the downstream ports below it), as DGX systems show (two devices on downstream
ports of one switch: ``PIX``; behind two switches of a two-level tree: ``PXB``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

__all__ = [
    "LSTOPO",
    "HwlocDevice",
    "HwlocTopology",
    "lstopo",
    "numa_of",
    "parse",
    "parse_cpulist",
    "smi_class",
    "topology",
    "unavailable_reason",
]

LSTOPO = "lstopo-no-graphics"


def unavailable_reason() -> Optional[str]:
    """Why the oracle cannot run here (None: it can)."""
    exe = shutil.which(LSTOPO)
    if exe is None:
        return f"{LSTOPO} not found (Debian package hwloc)"
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{LSTOPO} --version failed: {exc}"
    if proc.returncode != 0:
        return f"{LSTOPO} --version exited {proc.returncode}: {proc.stderr.strip()}"
    return None


def lstopo(root: os.PathLike[str] | str, **more: str) -> tuple[str, str]:
    """(XML, stderr) of ``lstopo-no-graphics --whole-io --of xml`` on the host at
    ``root`` (the directory holding ``sys`` and ``proc``); ``more``: other HWLOC_
    variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    env.update(HWLOC_FSROOT=os.fspath(root), HWLOC_COMPONENTS="-x86", HWLOC_THISSYSTEM="0",
               LC_ALL="C", **more)
    proc = subprocess.run([LSTOPO, "--whole-io", "--of", "xml", "-"], capture_output=True,
                          text=True, env=env, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{LSTOPO} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout, proc.stderr


def parse_cpulist(text: str) -> frozenset[int]:
    """``0-15,128-143`` (a sysfs list) as a set."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def _bitmap(text: Optional[str]) -> frozenset[int]:
    """hwloc's bitmap text (``0x00ff00ff`` or ``0x0000ffff,0xffffffff``) as a set."""
    if not text or "f...f" in text:
        return frozenset()
    value = 0
    for group in text.split(","):
        value = (value << 32) | (int(group, 16) if group else 0)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


@dataclass(frozen=True)
class HwlocDevice:
    """One PCI function (device or bridge) in hwloc's tree."""

    busid: str  # "0000:07:00.0"
    pci_class: int  # 16-bit class/subclass, e.g. 0x0302
    vendor: int
    device: int
    is_bridge: bool
    bridges: tuple[str, ...]  # PCI bridges above it, nearest first (root port last)
    host_bridge: Optional[str]  # "pci0000:00", from hwloc's host bridge bus range
    cpuset: frozenset[int]  # CPU set of the non-I/O object it hangs below
    nodeset: frozenset[int]  # NUMA nodes of that object
    at_root: bool  # that object is the Machine itself
    osdevs: tuple[str, ...] = ()  # names of OS devices below it (mlx5_0, enp12s0np0...)


@dataclass(frozen=True)
class HwlocTopology:
    """What the oracle compares: PCI functions by bus id, NUMA nodes' CPU sets, and
    the PCI function of each OpenFabrics (RDMA) device."""

    devices: dict[str, HwlocDevice]
    numa_nodes: dict[int, frozenset[int]]
    rdma: dict[str, str]  # ib device name -> PCI bus id
    bridge_depth: dict[str, int] = field(default_factory=dict)  # PCI bridge -> 1 = root port
    stderr: str = ""
    #: NUMA nodes hwloc hangs below a PCI function (a Grace GPU's memory, found by
    #: its driver's ``numa_status``): node -> bus id
    gpu_memory: dict[int, str] = field(default_factory=dict)
    #: the nodes without CPUs (their ``cpulist`` in the tree is empty): hwloc gives
    #: such a node the CPU set of the object it hangs below
    cpuless: frozenset[int] = frozenset()


def _attr_int(elem: ET.Element, name: str) -> Optional[int]:
    value = elem.get(name)
    return int(value) if value is not None else None


def parse(xml_text: str, stderr: str = "") -> HwlocTopology:
    """Read lstopo's XML (hwloc 2.x format)."""
    root = ET.fromstring(xml_text)
    devices: dict[str, HwlocDevice] = {}
    numa: dict[int, frozenset[int]] = {}
    rdma: dict[str, str] = {}
    depth: dict[str, int] = {}
    memory: dict[int, str] = {}

    def walk(elem: ET.Element, normal: Optional[ET.Element], at_root: bool,
             bridges: tuple[str, ...], host_bridge: Optional[str]) -> None:
        for child in elem.findall("object"):
            kind = child.get("type")
            if kind == "NUMANode":
                index = _attr_int(child, "os_index")
                if index is not None:
                    numa[index] = _bitmap(child.get("cpuset"))
                continue
            if kind in ("Bridge", "PCIDev"):
                busid = child.get("pci_busid")
                if busid is None:  # a host bridge: "0000:[00-0c]"
                    rng = child.get("bridge_pci") or ""
                    dom, _, rest = rng.partition(":[")
                    name = f"pci{dom}:{rest[:2]}" if rest else None
                    walk(child, normal, at_root, (), name)
                    continue
                ptype = (child.get("pci_type") or "0000 [0000:0000]").split()
                ids = ptype[1].strip("[]").split(":")
                osdevs = tuple(o.get("name") or "" for o in child.findall("object")
                               if o.get("type") == "OSDev")
                assert normal is not None
                dev = HwlocDevice(
                    busid=busid, pci_class=int(ptype[0], 16), vendor=int(ids[0], 16),
                    device=int(ids[1], 16), is_bridge=kind == "Bridge",
                    bridges=bridges, host_bridge=host_bridge,
                    cpuset=_bitmap(normal.get("cpuset")),
                    nodeset=_bitmap(normal.get("nodeset")), at_root=at_root, osdevs=osdevs)
                devices[busid] = dev
                for o in child.findall("object"):
                    if o.get("type") == "OSDev" and o.get("osdev_type") == "3":
                        rdma[o.get("name") or ""] = busid
                    index = _attr_int(o, "os_index")
                    if o.get("type") == "NUMANode" and index is not None:
                        numa[index] = _bitmap(o.get("cpuset"))
                        memory[index] = busid
                if kind == "Bridge":
                    depth[busid] = len(bridges) + 1
                    walk(child, normal, at_root, (busid, *bridges), host_bridge)
                continue
            if kind in ("OSDev", "Misc"):
                continue
            walk(child, child, kind == "Machine", bridges, host_bridge)

    walk(root, None, True, (), None)
    return HwlocTopology(devices, numa, rdma, depth, stderr, memory)


def topology(root: os.PathLike[str] | str) -> HwlocTopology:
    """:func:`lstopo` then :func:`parse`, with the tree's CPU-less nodes."""
    xml_text, stderr = lstopo(root)
    nodes = Path(root, "sys/devices/system/node")
    cpuless = frozenset(int(n.name[4:]) for n in nodes.glob("node[0-9]*")
                        if not (n / "cpulist").read_text().strip())
    return replace(parse(xml_text, stderr), cpuless=cpuless, gpu_memory=gpu_memory(root))


def gpu_memory(root: os.PathLike[str] | str) -> dict[int, str]:
    """The NUMA nodes hwloc takes for a GPU's memory (from the NVIDIA driver's
    ``numa_status``; hwloc 2.9 hides them unless ``HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES``
    is set, then names them ``GPUMemory`` with the GPU's ``PCIBusID``): node -> bus id.
    Asked only where a ``numa_status`` file exists."""
    if not any(Path(root, "proc/driver/nvidia/gpus").glob("*/numa_status")):
        return {}
    xml_text, _ = lstopo(root, HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES="1")
    out = {}
    for o in ET.fromstring(xml_text).iter("object"):
        if o.get("type") == "NUMANode" and o.get("subtype") == "GPUMemory":
            bus = [i.get("value") for i in o.findall("info") if i.get("name") == "PCIBusID"]
            out[int(o.get("os_index") or -1)] = (bus or [""])[0].lower()
    return out


def _switch(topo: HwlocTopology, bridge: str, chain: tuple[str, ...]) -> str:
    """The "one bridge" of nvidia-smi's count that ``bridge`` belongs to: a root port
    (depth 1) is its own; an upstream port (even depth) stands for its switch; a
    downstream port (odd depth >= 3) belongs to the switch of the upstream port
    above it."""
    d = topo.bridge_depth[bridge]
    if d == 1 or d % 2 == 0:
        return bridge
    i = chain.index(bridge)
    return chain[i + 1]


def numa_of(topo: HwlocTopology, busid: str) -> Optional[int]:
    """The device's NUMA node per hwloc: the one node of the object it hangs below,
    or None when that object spans several nodes (locality unknown or machine-wide)."""
    nodeset = topo.devices[busid].nodeset - topo.cpuless
    return next(iter(nodeset)) if len(nodeset) == 1 else None


def smi_class(topo: HwlocTopology, a: str, b: str) -> Optional[str]:
    """nvidia-smi's class of the path between PCI functions ``a`` and ``b`` on hwloc's
    tree (None: undecidable, when the NUMA nodes are unknown across host bridges)."""
    if a == b:
        return "X"
    da, db = topo.devices[a], topo.devices[b]
    if da.host_bridge != db.host_bridge:
        if len(set(topo.numa_nodes) - topo.cpuless) <= 1:
            return "NODE"
        na, nb = numa_of(topo, a), numa_of(topo, b)
        if na is None or nb is None:
            return None
        return "NODE" if na == nb else "SYS"
    # the chains, extended by the device itself when it is a bridge
    ca = ((a,) if da.is_bridge else ()) + da.bridges
    cb = ((b,) if db.is_bridge else ()) + db.bridges
    common = [x for x in ca if x in cb]
    if not common:
        return "PHB"
    meet = common[0]  # nearest common bridge
    group = _switch(topo, meet, ca)
    below = ca[: ca.index(meet)] + cb[: cb.index(meet)]
    chains = [ca] * ca.index(meet) + [cb] * cb.index(meet)
    if all(_switch(topo, x, ch) == group for x, ch in zip(below, chains)):
        return "PIX"
    return "PXB"

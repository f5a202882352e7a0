"""The PCI topology of :class:`~sysverbs.testing.HostBuilder`: host bridges, bridges,
GPUs and any PCI function at the sysfs path of a real machine, CPUs and NUMA nodes,
``/proc`` files, and what :meth:`~sysverbs.testing.HostBuilder.build` derives from
the whole tree."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Optional, Union

from ..ground.errors import UsageError
from . import umockdev as recording
from .builder_base import BuilderBase
from .builder_machine import (
    BDF_RE,
    CPU_CACHES,
    PORT_TYPES,
    CpuLayout,
    bdf_of,
    bridge_config,
)
from .builder_tables import GPU_MODELS
from .layout import Value
from .layout import cpulist as _cpulist
from .layout import cpumask as _cpumask
from .layout import encode as _value
from .umockdev import Attribute, Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["PciTreeBuilder"]


class PciTreeBuilder(BuilderBase):
    """:class:`BuilderBase` with the PCI topology methods of
    :class:`~sysverbs.testing.HostBuilder`."""

    # ------------------------------------------------------------------ PCI topology
    # Hosts with a real PCI tree (bridges, GPUs, NUMA nodes) for placement and hwloc:
    # every method takes the device's full sysfs path, so that a fixture can follow a
    # real machine's tree exactly; build() then derives what depends on the whole tree
    # (each bridge's bus range in its config space, each function's local CPUs).

    def cpu_topology(
        self,
        *,
        sockets: int = 1,
        cores_per_socket: int = 4,
        threads_per_core: int = 1,
        nodes_per_socket: int = 1,
        mem_per_node_kb: int = 64 << 20,
        distances: Optional[Sequence[Sequence[int]]] = None,
        cores_per_l3: Optional[int] = None,
        caches: str = "generic",
        all_caches: bool = False,
        memory_nodes: Optional[Mapping[int, int]] = None,
    ) -> Self:
        """CPUs and NUMA nodes (``/sys/devices/system/cpu`` and ``.../node``), laid out
        as Linux numbers them on x86: the first threads of all cores (socket by
        socket, node by node), then the second threads in the same order (DGX A100:
        node 3 = CPUs 48-63,176-191).  Each ``cpuN`` has ``topology/`` files (package,
        die, core ids and sibling masks/lists); each ``nodeN`` its ``cpumap``,
        ``cpulist``, ``distance`` (10 local, 12 same socket, 32 remote unless
        ``distances`` is given) and ``meminfo``.  PCI functions added with
        :meth:`host_bridge` trees get ``local_cpus``/``local_cpulist`` of their node
        (all CPUs for ``numa_node`` -1).

        Each ``cpuN`` also has its last-level cache, ``cache/index3`` as x86 Linux
        numbers it, and with ``all_caches`` the ``cache/index0``-``index3`` of x86 Linux
        (L1 data, L1 instruction, L2, L3: four times the files, which a fixture of 224
        CPUs pays at every materialization; binding and hwloc's L3 groups need only
        the last level).  The files: ``level``, ``type``, ``size`` such as ``32K``, ``id``,
        ``shared_cpu_map``/``shared_cpu_list``, ``coherency_line_size``,
        ``number_of_sets``, ``ways_of_associativity``, ``physical_line_partition``):
        L1 and L2 shared by the core's SMT threads, one L3 per ``cores_per_l3``
        consecutive cores of a socket (AMD EPYC: a CCX or CCD, several per NUMA node;
        a divisor of the cores of one node), or per socket with ``None`` (Intel Xeon,
        VMs).  L3s are numbered socket by socket (their ``id``).  ``caches`` names the
        sizes and ways, a key of ``CPU_CACHES`` (``sysverbs.testing.builder_machine``):
        ``generic``, ``epyc-7742``, ``epyc-genoa``, ``xeon-8468``, ``xeon-6426y``,
        ``xeon-8570``, ``qemu``.

        ``memory_nodes``: CPU-less NUMA nodes after the CPU nodes, node -> MemTotal in
        kB (the GPU memory nodes of a Grace machine: 0 kB for the ones reserved for MIG);
        ``has_cpu`` leaves them out, ``has_memory`` lists those with memory."""
        if min(sockets, cores_per_socket, threads_per_core, nodes_per_socket) < 1:
            raise UsageError("counts must be >= 1")
        if cores_per_socket % nodes_per_socket:
            raise UsageError("cores_per_socket must be a multiple of nodes_per_socket")
        nodes = sockets * nodes_per_socket
        extra = tuple(sorted((memory_nodes or {}).items()))
        if any(n < nodes or kb < 0 for n, kb in extra):
            raise UsageError(f"memory_nodes must be numbered from {nodes} (after the CPU "
                             "nodes), with kB >= 0")
        nodes += len(extra)
        if distances is not None and (len(distances) != nodes
                                      or any(len(row) != nodes for row in distances)):
            raise UsageError(f"distances must be a {nodes}x{nodes} matrix")
        if caches not in CPU_CACHES:
            raise UsageError(f"unknown cache model {caches!r} (have: {', '.join(CPU_CACHES)})")
        if cores_per_l3 is not None and (
                cores_per_l3 < 1 or (cores_per_socket // nodes_per_socket) % cores_per_l3):
            raise UsageError("cores_per_l3 must divide the cores of one NUMA node")
        self._cpu = CpuLayout(sockets, cores_per_socket, threads_per_core, nodes_per_socket,
                               mem_per_node_kb,
                               tuple(tuple(r) for r in distances) if distances else None,
                               cores_per_l3, CPU_CACHES[caches], bool(all_caches), extra)
        return self

    @property
    def numa_cpus(self) -> Mapping[int, tuple[int, ...]]:
        """The CPUs of each NUMA node of :meth:`cpu_topology` (empty without one)."""
        return self._cpu.node_cpus() if self._cpu is not None else {}

    @property
    def l3_cpus(self) -> Mapping[int, tuple[int, ...]]:
        """The CPUs of each L3 of :meth:`cpu_topology`, by its ``id`` (empty without
        one)."""
        return self._cpu.l3_cpus() if self._cpu is not None else {}

    def host_bridge(self, name: str = "pci0000:00", *, numa_node: int = 0,
                    parent: Optional[str] = None) -> str:
        """A PCI host bridge (root bus) ``pciDDDD:BB``; returns its path
        (``/devices/pci0000:00``) for the devices below it.  ``numa_node`` is what
        the functions below it show by default (-1: unknown, as in many VMs);
        ``parent`` puts the bridge below a device (a VMD endpoint's domain:
        ``host_bridge("pci10000:00", parent=vmd_path)``).  Host bridge directories
        are no devices (no ``uevent``), so this adds no record."""
        m = re.fullmatch(r"pci([0-9a-f]{4,8}):([0-9a-f]{2})", name)
        if m is None:
            raise UsageError(f"invalid host bridge name {name!r} (pciDDDD:BB)")
        path = f"{parent}/{name}" if parent else f"/devices/{name}"
        self._host_bridges[path] = numa_node
        return path

    def _tree_numa(self, path: str, numa_node: Optional[int]) -> int:
        if numa_node is not None:
            return numa_node
        best = ""
        for hb in self._host_bridges:
            if path.startswith(hb + "/") and len(hb) > len(best):
                best = hb
        if not best:
            raise UsageError(f"{path} is below no host_bridge()")
        return self._host_bridges[best]

    def _place(self, path: Optional[str]) -> tuple[str, str, int]:
        """(function path, BDF, NUMA node): at ``path`` below a :meth:`host_bridge`,
        or on a root port and bus of its own."""
        if path is not None:
            slot = bdf_of(path)
            return path, slot, self._tree_numa(path, None)
        root, bus = self._new_bus()
        slot = f"0000:{bus:02x}:00.0"
        return f"{root}/{slot}", slot, 0

    def pci_bridge(
        self,
        path: str,
        *,
        port: str = "downstream",
        vendor: int = 0x1000,
        device: int = 0xC010,
        sub_vendor: Optional[int] = None,
        sub_device: Optional[int] = None,
        revision: int = 0xB0,
        driver: Optional[str] = "pcieport",
        numa_node: Optional[int] = None,
        link: tuple[int, int] = (4, 16),
    ) -> str:
        """A PCI-to-PCI bridge (class 0x060400) at ``path``: a root port
        (``port="root"``), a PCIe switch's upstream or downstream port (default: a
        Broadcom PEX88096 downstream port, 1000:c010, as on a DGX A100).  Its config
        space (256 bytes, header type 1, a PCIe capability with this port type and
        ``link`` = (generation, width)) gets the bus numbers at :meth:`build`: the
        secondary bus is the bus of the functions directly below it, the subordinate
        bus the highest bus below it (both 0, unassigned, for a bridge with nothing
        below).  Returns ``path``."""
        if port not in PORT_TYPES:
            raise UsageError(f"port must be one of {', '.join(PORT_TYPES)}")
        bdf_of(path)
        numa = self._tree_numa(path, numa_node)
        self.add_pci_function(path, vendor, device, vendor if sub_vendor is None else sub_vendor,
                  device if sub_device is None else sub_device, 0x060400, driver,
                  numa_node=numa, revision=revision)
        self._bridges[path] = (port, link)
        self._tree_functions.add(path)
        return path

    def pci_device(
        self,
        path: str,
        *,
        vendor: int,
        device: int,
        pci_class: int,
        driver: Optional[str] = None,
        sub_vendor: Optional[int] = None,
        sub_device: Optional[int] = None,
        revision: int = 0,
        numa_node: Optional[int] = None,
        attrs: Optional[Mapping[str, Value]] = None,
        links: Sequence[tuple[str, str]] = (),
        link: Optional[tuple[str, int]] = None,
    ) -> str:
        """Any PCI function at ``path`` (below a :meth:`host_bridge`): NVMe, audio,
        NVSwitch, a management endpoint...  ``numa_node`` defaults to the host
        bridge's; ``attrs`` adds or replaces files, ``links`` adds symlinks,
        ``link`` = (``current_link_speed``, ``current_link_width``), e.g.
        ``("16.0 GT/s PCIe", 16)``.  Returns ``path``."""
        bdf_of(path)
        numa = self._tree_numa(path, numa_node)
        extra: list[tuple[str, Optional[bytes]]] = []
        if link is not None:
            extra += [("current_link_speed", _value(link[0])),
                      ("current_link_width", _value(link[1])),
                      ("max_link_speed", _value(link[0])), ("max_link_width", _value(link[1]))]
        for key, val in (attrs or {}).items():
            extra = [(k, v) for k, v in extra if k != key] + [(key, _value(val))]
        self.add_pci_function(path, vendor, device, vendor if sub_vendor is None else sub_vendor,
                  device if sub_device is None else sub_device, pci_class, driver,
                  numa_node=numa, revision=revision, extra=extra, links=links)
        self._tree_functions.add(path)
        return path

    def gpu(
        self,
        path: str,
        *,
        model: str = "a100",
        numa_node: Optional[int] = None,
        driver: Optional[str] = None,
        uuid: Optional[str] = None,
        minor: Optional[int] = None,
        proc: bool = True,
    ) -> str:
        """A GPU at ``path``: ``model`` is a key of :data:`GPU_MODELS` (NVIDIA: class
        0x0302 3D controller or 0x0300 VGA; AMD Instinct: 0x1200 processing
        accelerator).  An NVIDIA GPU also gets, unless ``proc=False``, the driver's
        ``/proc/driver/nvidia/gpus/<bdf>/information`` (model, UUID, bus location,
        device minor: by default the GPU's index among the NVIDIA GPUs added so far),
        written to the proc root by :func:`materialize`.  Returns ``path``."""
        if model not in GPU_MODELS:
            raise UsageError(f"unknown GPU model {model!r} (have: {', '.join(GPU_MODELS)})")
        gm = GPU_MODELS[model]
        bdf = bdf_of(path)
        nvidia = gm.vendor == 0x10DE
        index = self._count("gpu-nvidia" if nvidia else "gpu-other")
        self.pci_device(path, vendor=gm.vendor, device=gm.device, pci_class=gm.pci_class,
                        driver=gm.driver if driver is None else driver,
                        sub_vendor=gm.vendor, sub_device=gm.sub_device, revision=0xA1,
                        numa_node=numa_node, link=gm.link)
        if nvidia and proc:
            digest = hashlib.sha256(f"{gm.name} {bdf}".encode()).hexdigest()
            gpu_uuid = uuid or (f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-"
                                f"{digest[16:20]}-{digest[20:32]}")
            info = (f"Model: \t\t {gm.name}\nIRQ:   \t\t {200 + index}\n"
                    f"GPU UUID: \t {gpu_uuid}\nVideo BIOS: \t {gm.vbios}\n"
                    f"Bus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\n"
                    f"Bus Location: \t {bdf}\n"
                    f"Device Minor: \t {index if minor is None else minor}\n"
                    f"GPU Excluded:\t No\n")
            self.proc_file(path, f"/proc/driver/nvidia/gpus/{bdf}/information", info)
        return path

    def pci_file(self, record_path: str, name: str, value: bytes) -> Self:
        """One more binary file ``name`` of the device at ``record_path`` (its
        ``vpd``, or the ``config`` space of an endpoint), written at :meth:`build`."""
        self._extra_files.append((record_path, Attribute(name, value, binary=True)))
        return self

    def proc_file(self, record_path: str, target: str, value: Union[str, bytes]) -> Self:
        """A ``/proc`` file (``target``, e.g. ``/proc/cpuinfo``), carried by the record
        at ``record_path`` (see :func:`sysverbs.testing.umockdev.proc_file`)."""
        data = value.encode() if isinstance(value, str) else value
        self._proc_files.append((record_path, recording.proc_file(record_path, target, data)))
        return self

    def _finish(self, records: Sequence[Record]) -> list[Record]:
        """What depends on the whole host: bridge bus numbers, local CPUs, links added
        to earlier records, /proc files, and the CPU/NUMA records."""
        if not (self._bridges or self._tree_functions or self._proc_files or self._extra_links
                or self._cpu is not None or self._host_bridges or self._extra_files):
            return list(records)
        pci_buses: dict[str, tuple[int, int]] = {}
        for rec in records:
            if rec.subsystem == "pci":
                m = BDF_RE.fullmatch(rec.name)
                if m:
                    pci_buses[rec.path] = (int(m.group(1), 16), int(m.group(2), 16))
        node_cpus = self._cpu.node_cpus() if self._cpu is not None else {}
        all_cpus = tuple(sorted(c for cpus in node_cpus.values() for c in cpus))
        ncpus = len(all_cpus)
        out: list[Record] = []
        for rec in records:
            extra: list[Attribute] = []
            if rec.path in self._bridges:
                domain, bus = pci_buses[rec.path]
                direct = [b for p, (d, b) in pci_buses.items()
                          if d == domain and p.rsplit("/", 1)[0] == rec.path]
                below = [b for p, (d, b) in pci_buses.items()
                         if d == domain and p.startswith(rec.path + "/")]
                secondary = min(direct) if direct else 0
                subordinate = max(below) if below else 0
                port, link = self._bridges[rec.path]
                extra.append(Attribute("config", bridge_config(
                    rec, bus, secondary, subordinate, PORT_TYPES[port], link), binary=True))
                extra += [Attribute("secondary_bus_number", _value(secondary) or b""),
                          Attribute("subordinate_bus_number", _value(subordinate) or b"")]
            if ncpus and rec.path in pci_buses and (
                    rec.path in self._tree_functions
                    or any(rec.path.startswith(hb + "/") for hb in self._host_bridges)):
                raw = rec.value("numa_node")
                numa = int(raw) if raw is not None else -1
                cpus = node_cpus.get(numa, all_cpus)
                extra += [Attribute("local_cpulist", _value(_cpulist(cpus)) or b""),
                          Attribute("local_cpus", _value(_cpumask(cpus, ncpus)) or b"")]
            extra += [a for p, a in self._proc_files if p == rec.path]
            extra += [a for p, a in self._extra_files if p == rec.path]
            extra += [Attribute(name, b"", target)
                      for p, name, target in self._extra_links if p == rec.path]
            if extra:
                files = [a for a in rec.attributes if a.link is None]
                link_attrs = [a for a in rec.attributes if a.link is not None]
                rec = replace(rec, attributes=tuple(files + [a for a in extra if a.link is None]
                                                    + link_attrs
                                                    + [a for a in extra if a.link is not None]))
            out.append(rec)
        if self._cpu is not None:
            out += self._cpu.records()
        return out

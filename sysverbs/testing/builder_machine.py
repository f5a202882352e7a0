"""What :class:`~sysverbs.testing.HostBuilder`'s PCI trees and CPUs are made of: PCI
function addresses, a bridge's config space, and the CPU, cache and NUMA layout of
:meth:`~sysverbs.testing.HostBuilder.cpu_topology` with its records."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from ..ground.errors import UsageError
from .layout import cpulist as _cpulist
from .layout import cpumask as _cpumask
from .umockdev import Attribute, Record

__all__ = ["PORT_TYPES", "BDF_RE", "bdf_of", "bridge_config", "CacheModel", "CPU_CACHES",
           "CpuLayout"]

#: PCIe capability device/port types of the bridge ports (PCI_EXP_TYPE_*).
PORT_TYPES: Mapping[str, int] = {"root": 4, "upstream": 5, "downstream": 6, "pci": 7}
BDF_RE = re.compile(r"([0-9a-f]{4,8}):([0-9a-f]{2}):[0-9a-f]{2}\.[0-7]")


def bdf_of(path: str) -> str:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if not path.startswith("/devices/") or BDF_RE.fullmatch(name) is None:
        raise UsageError(f"{path!r} is not a PCI function path (/devices/.../DDDD:BB:DD.F)")
    return name


def _le16(v: int) -> bytes:
    return bytes((v & 0xFF, (v >> 8) & 0xFF))


def bridge_config(rec: Record, bus: int, secondary: int, subordinate: int, port_type: int,
                   link: tuple[int, int]) -> bytes:
    """256 bytes of a type-1 (bridge) config header with a PCIe capability at 0x40."""

    def num(name: str) -> int:
        raw = rec.value(name)
        return int(raw, 16) if raw else 0

    cfg = bytearray(256)
    cls = num("class")
    cfg[0:2], cfg[2:4] = _le16(num("vendor")), _le16(num("device"))
    cfg[4:6], cfg[6:8] = _le16(0x0407), _le16(0x0010)  # I/O, memory, master; cap list
    cfg[8] = num("revision") & 0xFF
    cfg[9], cfg[10], cfg[11] = cls & 0xFF, (cls >> 8) & 0xFF, (cls >> 16) & 0xFF
    cfg[0x0C], cfg[0x0E] = 0x10, 0x01  # cache line 64 bytes; header type 1
    cfg[0x18], cfg[0x19], cfg[0x1A] = bus, secondary, subordinate
    cfg[0x34] = 0x40
    cfg[0x3C], cfg[0x3D] = 0xFF, 0x01
    gen, width = link
    cfg[0x40], cfg[0x41] = 0x10, 0x00  # PCI Express, last capability
    cfg[0x42:0x44] = _le16(0x0002 | (port_type << 4) | (0x100 if port_type in (4, 6) else 0))
    cfg[0x4C:0x4E] = _le16(gen | (width << 4))
    cfg[0x52:0x54] = _le16(gen | (width << 4))
    return bytes(cfg)


@dataclass(frozen=True)
class CacheModel:
    """The caches of one CPU model, each as (size in KiB, ways of associativity), with
    64-byte lines: L1 data and instruction and L2 per core (shared by its SMT threads),
    one L3 per group of cores (see :meth:`~sysverbs.testing.HostBuilder.cpu_topology`'s
    ``cores_per_l3``)."""

    l1d: tuple[int, int]
    l1i: tuple[int, int]
    l2: tuple[int, int]
    l3: tuple[int, int]


#: The cache models :meth:`~sysverbs.testing.HostBuilder.cpu_topology` knows
#: (``caches=``): the L3 size is one L3's, a CCX's or CCD's on AMD, a socket's on Intel.
#: Sizes and ways are the vendors' published figures (AMD's and Intel's product pages
#: and optimization guides; the fixtures' recipes in tools/fixturegen/gpu_hosts.py say
#: which machine uses which).  ``xeon-8570``'s L3 ways are filled in (16; no published
#: figure was found); ``qemu`` is QEMU's default (legacy) cache
#: model of a ``-cpu host`` guest without ``host-cache-info`` (target/i386/cpu.c
#: ``legacy_l1d_cache``... ``legacy_l3_cache``); ``generic`` is round figures of no
#: particular CPU.
CPU_CACHES: Mapping[str, CacheModel] = {
    "generic": CacheModel((32, 8), (32, 8), (1024, 16), (32768, 16)),
    # Zen 2 (Rome): 16 MB L3 per CCX of 4 cores.
    "epyc-7742": CacheModel((32, 8), (32, 8), (512, 8), (16384, 16)),
    # Zen 4 (Genoa, EPYC 9004): 32 MB L3 per CCD (8 cores, fewer on small SKUs).
    "epyc-genoa": CacheModel((32, 8), (32, 8), (1024, 8), (32768, 16)),
    # Sapphire Rapids (4th gen Xeon): 48 KB L1d, 2 MB L2, 15-way L3 per socket.
    "xeon-8468": CacheModel((48, 12), (32, 8), (2048, 16), (107520, 15)),
    "xeon-6426y": CacheModel((48, 12), (32, 8), (2048, 16), (38400, 15)),
    # Emerald Rapids (5th gen Xeon): the same cores, 300 MB L3 per socket.
    "xeon-8570": CacheModel((48, 12), (32, 8), (2048, 16), (307200, 16)),
    "qemu": CacheModel((32, 8), (32, 8), (4096, 16), (16384, 16)),
    # NVIDIA Grace (72 Neoverse V2 cores): 64 KB L1d/L1i, 1 MB L2 per core, one 114 MB
    # L3 per CPU (a GH200's lscpu); the ways are not published (constructed).
    "grace": CacheModel((64, 4), (64, 4), (1024, 8), (116736, 16)),
}


@dataclass(frozen=True)
class CpuLayout:
    sockets: int
    cores: int  # per socket
    threads: int
    nodes_per_socket: int
    mem_kb: int
    distances: Optional[tuple[tuple[int, ...], ...]]
    cores_per_l3: Optional[int] = None  # None: one L3 per socket
    caches: CacheModel = CPU_CACHES["generic"]
    all_caches: bool = False  # False: only the last level (index3)
    #: CPU-less NUMA nodes after the CPU nodes, as (node, MemTotal in kB): the GPU
    #: memory nodes of a Grace machine (HBM in some, 0 kB in the others)
    memory_nodes: tuple[tuple[int, int], ...] = ()

    @property
    def total_cores(self) -> int:
        return self.sockets * self.cores

    def cpu(self, thread: int, core: int) -> int:
        return thread * self.total_cores + core

    def node_of(self, core: int) -> int:
        socket, c = divmod(core, self.cores)
        return socket * self.nodes_per_socket + c // (self.cores // self.nodes_per_socket)

    def node_cpus(self) -> dict[int, tuple[int, ...]]:
        out: dict[int, list[int]] = {}
        for core in range(self.total_cores):
            for t in range(self.threads):
                out.setdefault(self.node_of(core), []).append(self.cpu(t, core))
        return {n: tuple(sorted(c)) for n, c in sorted(out.items())}

    def l3_of(self, core: int) -> int:
        """The L3 (its ``id``) of a core: L3s are numbered socket by socket."""
        return core // (self.cores_per_l3 or self.cores)

    def l3_cpus(self) -> dict[int, tuple[int, ...]]:
        out: dict[int, list[int]] = {}
        for core in range(self.total_cores):
            out.setdefault(self.l3_of(core), []).extend(
                self.cpu(t, core) for t in range(self.threads))
        return {i: tuple(sorted(c)) for i, c in sorted(out.items())}

    def cache_attrs(self, core: int, l3: tuple[int, ...], n: int) -> list[tuple[str, str]]:
        """``cache/indexN/...`` of a CPU of ``core`` (the files of x86 Linux, whose
        cache ids are the APIC ids shifted by the sharing width: with contiguous APIC
        ids, the core's index for L1 and L2, the L3's for L3)."""
        siblings = [self.cpu(t, core) for t in range(self.threads)]
        m = self.caches
        out: list[tuple[str, str]] = []
        levels = (
            (1, "Data", m.l1d, siblings, core), (1, "Instruction", m.l1i, siblings, core),
            (2, "Unified", m.l2, siblings, core),
            (3, "Unified", m.l3, list(l3), self.l3_of(core)))
        for index, (level, kind, (kb, ways), shared, ident) in enumerate(levels):
            if not self.all_caches and index != 3:
                continue
            out += [(f"cache/index{index}/{key}", value) for key, value in (
                ("coherency_line_size", "64"), ("id", str(ident)), ("level", str(level)),
                ("number_of_sets", str(kb * 1024 // (ways * 64))),
                ("physical_line_partition", "1"), ("shared_cpu_list", _cpulist(shared)),
                ("shared_cpu_map", _cpumask(shared, n)), ("size", f"{kb}K"), ("type", kind),
                ("ways_of_associativity", str(ways)))]
        return out

    def distance(self, a: int, b: int) -> int:
        if self.distances is not None:
            return self.distances[a][b]
        if a == b:
            return 10
        cpu_nodes = self.sockets * self.nodes_per_socket
        if a >= cpu_nodes or b >= cpu_nodes:
            return 80  # a CPU-less node: no captured distance table (a choice)
        return 12 if a // self.nodes_per_socket == b // self.nodes_per_socket else 32

    def records(self) -> list[Record]:
        n = self.total_cores * self.threads
        every = _cpulist(range(n))
        node_cpus = self.node_cpus()
        l3_cpus = self.l3_cpus()
        recs: list[Record] = []
        for cpu in range(n):
            thread, core = divmod(cpu, self.total_cores)
            socket = core // self.cores
            siblings = [self.cpu(t, core) for t in range(self.threads)]
            package = [self.cpu(t, c) for t in range(self.threads)
                       for c in range(socket * self.cores, (socket + 1) * self.cores)]
            attrs: list[tuple[str, str]] = []
            if cpu == 0:
                attrs += [("../online", every), ("../possible", every), ("../present", every),
                          ("../offline", ""), ("../kernel_max", str(max(n - 1, 8191)))]
            else:
                attrs.append(("online", "1"))
            for key, value in (("core_cpus", siblings), ("thread_siblings", siblings),
                               ("die_cpus", package), ("package_cpus", package),
                               ("core_siblings", package)):
                attrs += [(f"topology/{key}", _cpumask(value, n)),
                          (f"topology/{key}_list", _cpulist(value))]
            attrs += [("topology/core_id", str(core % self.cores)), ("topology/die_id", "0"),
                      ("topology/physical_package_id", str(socket))]
            attrs += self.cache_attrs(core, l3_cpus[self.l3_of(core)], n)
            path = f"/devices/system/cpu/cpu{cpu}"
            node = self.node_of(core)
            recs.append(Record(path, (("SUBSYSTEM", "cpu"),),
                               tuple(Attribute(k, f"{v}\n".encode()) for k, v in attrs)
                               + (Attribute(f"node{node}", b"", f"../../node/node{node}"),)))
        mem_kb = dict(self.memory_nodes)
        nodes = sorted(node_cpus) + sorted(mem_kb)
        for node in nodes:
            cpus = node_cpus.get(node, ())
            kb = mem_kb.get(node, self.mem_kb)
            meminfo = "".join(f"Node {node} {key + ':':<15} {val:8d} kB\n" for key, val in (
                ("MemTotal", kb), ("MemFree", kb * 9 // 10), ("MemUsed", kb - kb * 9 // 10),
                ("Active", 0), ("Inactive", 0), ("HugePages_Total", 0), ("HugePages_Free", 0)))
            attrs = []
            if node == nodes[0]:
                every_node = _cpulist(nodes)
                attrs += [(f"../{key}", every_node) for key in ("online", "possible")]
                # GPU memory is onlined movable: it is memory, not normal memory
                attrs += [("../has_cpu", _cpulist(sorted(node_cpus))),
                          ("../has_memory", _cpulist(sorted(
                              [*node_cpus, *(n for n, kb in mem_kb.items() if kb)]))),
                          ("../has_normal_memory", _cpulist(sorted(node_cpus)))]
            attrs += [("cpulist", _cpulist(cpus)), ("cpumap", _cpumask(cpus, n)),
                      ("distance", " ".join(str(self.distance(node, o)) for o in nodes))]
            files = [Attribute(k, f"{v}\n".encode()) for k, v in attrs]
            files.append(Attribute("meminfo", meminfo.encode()))
            links = tuple(Attribute(f"cpu{c}", b"", f"../../cpu/cpu{c}") for c in cpus)
            recs.append(Record(f"/devices/system/node/node{node}", (("SUBSYSTEM", "node"),),
                               tuple(files) + links))
        return recs

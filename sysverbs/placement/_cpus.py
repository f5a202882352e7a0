"""The host's CPUs and NUMA nodes as the binding modes of ``sysverbs run`` need them:
which CPUs are online, each CPU's package, physical core and last-level cache, each
node's CPUs, whether it has memory, and the distances between nodes.

Read from ``<sysfs>/devices/system/{cpu,node}`` with the one sysfs reader
(:func:`~sysverbs.placement._pci.read_text`); nothing is computed here
(:mod:`sysverbs.placement._bind` is the pure part).  A file that is missing or
unreadable never raises: what could not be read is in ``problems`` and the fields say
so (a CPU without ``thread_siblings_list`` is its own core, one without a cache
directory its own cache group).
"""

from __future__ import annotations

import os
import re

from ..ground.records import FrozenRecord, init
from ..ground.text import parse_cpulist
from ._pci import read_text, to_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

__all__ = ["CpuTopology", "read_cpus"]

_CPU = re.compile(rb"cpu([0-9]{1,5})")
_NODE = re.compile(rb"node([0-9]{1,5})")
_INDEX = re.compile(rb"index([0-9]{1,3})")
_SIZE = re.compile(r"([0-9]{1,12})([KMG]?)")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class CpuTopology(FrozenRecord):
    """What :func:`read_cpus` found.

    ``online``: the online CPUs (``cpu/online``; else every ``cpuN``).  ``package``:
    CPU -> ``physical_package_id``.  ``core``: CPU -> the lowest CPU of its
    ``thread_siblings_list`` (one key per physical core, as torchrun keys them).
    ``llc``: CPU -> the lowest CPU of its last-level cache's ``shared_cpu_list`` (the
    highest-level Data/Unified ``cache/index*``), ``llc_level`` that level (0: no cache
    information).  ``nodes``: node -> its CPUs (empty for a CPU-less node, such as HBM
    or CXL memory).  ``memory``: the nodes with memory (``node/has_memory``; else those
    whose ``meminfo`` has a MemTotal above 0; else all).  ``distance``: (a, b) ->
    ``nodeA/distance``'s entry for b.
    """

    __slots__ = _fields = ("online", "package", "core", "llc", "llc_level", "nodes",
                           "memory", "distance", "problems")
    online: frozenset[int]
    package: Mapping[int, int]
    core: Mapping[int, int]
    llc: Mapping[int, int]
    llc_level: int
    nodes: Mapping[int, frozenset[int]]
    memory: frozenset[int]
    distance: Mapping[tuple[int, int], int]
    problems: tuple[str, ...]

    def __init__(self, online: frozenset[int], package: Mapping[int, int],
                 core: Mapping[int, int], llc: Mapping[int, int], llc_level: int,
                 nodes: Mapping[int, frozenset[int]], memory: frozenset[int],
                 distance: Mapping[tuple[int, int], int], problems: tuple[str, ...] = ()
                 ) -> None:
        init(self, online, package, core, llc, llc_level, nodes, memory, distance, problems)

    def node_of_cpu(self, cpu: int) -> Optional[int]:
        for node, cpus in self.nodes.items():
            if cpu in cpus:
                return node
        return None


def _list(path: bytes) -> Optional[frozenset[int]]:
    return parse_cpulist((read_text(path) or "").strip() or None)


def _listdir(path: bytes) -> list[bytes]:
    try:
        return sorted(os.listdir(path))
    except (OSError, ValueError):
        return []


def _llc(cpu_dir: bytes, cpu: int, problems: list[str]) -> tuple[int, Optional[frozenset[int]]]:
    """(level, shared CPUs) of the CPU's highest-level Data or Unified cache, as
    torchrun's core-complex mode and hwloc take it; (0, None) without cache files."""
    best: tuple[int, Optional[frozenset[int]]] = (0, None)
    base = cpu_dir + b"/cache"
    for entry in _listdir(base):
        if _INDEX.fullmatch(entry) is None:
            continue
        d = base + b"/" + entry
        kind = read_text(d + b"/type", 64)
        if kind is None or kind.strip() not in ("Data", "Unified"):
            continue
        level = to_int(read_text(d + b"/level", 64))
        shared = parse_cpulist((read_text(d + b"/shared_cpu_list") or "").strip() or None)
        if level is None or shared is None:
            problems.append(f"cpu{cpu}/cache/{os.fsdecode(entry)} unreadable")
            continue
        if level > best[0]:
            best = (level, shared)
    return best


def read_cpus(sysfs: bytes) -> CpuTopology:
    """Read ``<sysfs>/devices/system/cpu`` and ``.../node`` (see :class:`CpuTopology`)."""
    problems: list[str] = []
    cpu_base = sysfs + b"/devices/system/cpu"
    listed = sorted(int(m.group(1)) for e in _listdir(cpu_base)
                    if (m := _CPU.fullmatch(e)) is not None)
    online = parse_cpulist((read_text(cpu_base + b"/online") or "").strip() or None)
    if online is None:
        online = frozenset(listed)
    package: dict[int, int] = {}
    core: dict[int, int] = {}
    llc: dict[int, int] = {}
    level = 0
    # One read per core, cache and package, not per CPU: the CPUs a list names share it
    # (the kernel writes the same thread_siblings_list, shared_cpu_list and
    # package_cpus_list for each of them), so a CPU already covered is not read again.
    for cpu in listed:
        if cpu not in online:
            continue
        d = cpu_base + b"/cpu%d" % cpu
        if cpu not in package:
            pkg = to_int(read_text(d + b"/topology/physical_package_id", 64))
            if pkg is not None:
                mates = _list(d + b"/topology/package_cpus_list") or \
                    _list(d + b"/topology/core_siblings_list") or frozenset({cpu})
                package.update((c, pkg) for c in mates | {cpu} if c in online)
        if cpu not in core:
            sib = _list(d + b"/topology/thread_siblings_list")
            if not sib:
                problems.append(f"cpu{cpu}/topology/thread_siblings_list unreadable: its own "
                                "core")
            key = min(sib | {cpu}) if sib else cpu
            core.update((c, key) for c in (sib or frozenset()) | {cpu} if c in online)
        if cpu not in llc:
            lvl, shared = _llc(d, cpu, problems)
            key = min(shared | {cpu}) if shared else cpu
            llc.update((c, key) for c in (shared or frozenset()) | {cpu} if c in online)
            level = max(level, lvl)
    node_base = sysfs + b"/devices/system/node"
    nodes: dict[int, frozenset[int]] = {}
    distance: dict[tuple[int, int], int] = {}
    with_mem: set[int] = set()
    for entry in _listdir(node_base):
        m = _NODE.fullmatch(entry)
        if m is None:
            continue
        n = int(m.group(1))
        d = node_base + b"/" + entry
        cpus = parse_cpulist((read_text(d + b"/cpulist") or "").strip())
        if cpus is None:
            problems.append(f"node{n}/cpulist unreadable")
            cpus = frozenset()
        nodes[n] = cpus & online
        meminfo = read_text(d + b"/meminfo", 16384) or ""
        total = re.search(r"MemTotal:\s+([0-9]+) kB", meminfo)
        if total is None or int(total.group(1)) > 0:
            with_mem.add(n)
    order = sorted(nodes)
    for n in order:
        row = (read_text(node_base + b"/node%d/distance" % n, 4096) or "").split()
        if len(row) == len(order) and all(x.isdigit() for x in row):
            for other, value in zip(order, row):
                distance[n, other] = int(value)
        elif len(order) > 1:
            problems.append(f"node{n}/distance unreadable or not one entry per node")
    has_memory = parse_cpulist((read_text(node_base + b"/has_memory") or "").strip() or None)
    memory = frozenset(has_memory & set(nodes)) if has_memory else frozenset(with_mem)
    return CpuTopology(frozenset(online), package, core, llc, level,
                       dict(sorted(nodes.items())), memory, distance, tuple(problems))

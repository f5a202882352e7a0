"""Which CPUs and memory nodes a rank should be bound to: pure functions over a
:class:`~sysverbs.placement._cpus.CpuTopology`, the anchor's NUMA node and the CPUs and
nodes the process may use (docs/run.md says each rule and where it differs from
torchrun's).

>>> from sysverbs.placement._cpus import CpuTopology
>>> topo = CpuTopology(frozenset(range(8)), {c: c // 4 for c in range(8)},
...                    {c: c for c in range(8)},
...                    {c: 0 if c < 4 else 4 for c in range(8)}, 3,
...                    {0: frozenset(range(4)), 1: frozenset(range(4, 8))},
...                    frozenset({0, 1}), {(0, 0): 10, (0, 1): 20, (1, 0): 20, (1, 1): 10})
>>> sorted(cpu_set(topo, "exclusive", 0, frozenset(range(8)), 1, 2)[0])
[2, 3]
>>> cpulist_text(frozenset({0, 1, 2, 3, 8, 10, 11}))
'0-3,8,10-11'
"""

from __future__ import annotations

from ..ground.errors import UsageError
from ..ground.text import cpulist_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional

    from ._cpus import CpuTopology

__all__ = ["CPU_MODES", "MEM_MODES", "cpu_node", "cpu_set", "mem_node", "socket_nodes"]

#: ``--cpu``: the node's CPUs, the package's, a share of the node's physical cores (with
#: or without their SMT siblings), one last-level cache group, or no CPU binding.
CPU_MODES = ("node", "socket", "exclusive", "exclusive-nosmt", "core-complex", "none")
#: ``--mem``: MPOL_PREFERRED (falls back to other nodes when the node is full),
#: MPOL_BIND (never does), or no memory policy.
MEM_MODES = ("preferred", "bind", "none")


def _nearest(topo: CpuTopology, node: int, candidates: Iterable[int]) -> Optional[int]:
    """The candidate nearest ``node`` by ``nodeN/distance`` (lowest id on a tie; None
    without distances)."""
    known = [(topo.distance[node, m], m) for m in candidates if (node, m) in topo.distance]
    return min(known)[1] if known else None


def cpu_node(topo: CpuTopology, node: Optional[int], allowed: frozenset[int]
             ) -> tuple[Optional[int], str]:
    """The node whose CPUs the rank runs on, for an anchor on ``node`` (None: unknown),
    and why.  A node without CPUs (HBM, CXL memory) gives the nearest node that has
    allowed CPUs, by ``nodeN/distance``.  None when the anchor's node is unknown, or
    its CPUs are all outside ``allowed`` (the reason says which)."""
    if node is None:
        return None, "the anchor's NUMA node is unknown"
    if node not in topo.nodes:
        return None, f"node {node} is not in devices/system/node"
    mine = topo.nodes[node]
    if mine & allowed:
        return node, f"node {node}"
    if mine:
        return None, (f"node {node}'s CPUs {cpulist_text(mine)} are all outside the "
                      f"allowed CPUs {cpulist_text(allowed) or '(none)'}")
    usable = [m for m, cpus in topo.nodes.items() if cpus & allowed]
    near = _nearest(topo, node, usable)
    if near is None:
        return None, (f"node {node} has no CPUs (HBM or CXL memory) and no node "
                      "distances say which node is nearest")
    return near, (f"node {node} has no CPUs (HBM or CXL memory): node {near} is the "
                  f"nearest with allowed CPUs (distance {topo.distance[node, near]})")


def mem_node(topo: CpuTopology, node: int, allowed_mems: frozenset[int]
             ) -> tuple[Optional[int], str]:
    """The memory node for a rank whose CPUs are ``node``'s: that node when it has
    memory this process may use, else the nearest that has (by distance) among the nodes
    with CPUs: a CPU-less node (a Grace GPU's HBM, CXL memory) is never chosen."""
    if node in topo.memory and node in allowed_mems:
        return node, f"node {node}, where the CPUs are"
    usable = [m for m in sorted(topo.memory) if m in allowed_mems and topo.nodes.get(m)]
    near = _nearest(topo, node, usable)
    why = "has no memory" if node not in topo.memory else "is not in the allowed memory nodes"
    if near is None:
        return None, f"node {node} {why} and no other node's memory is nearer"
    return near, f"node {node} {why}: node {near} is the nearest (distance " \
                 f"{topo.distance[node, near]})"


def socket_nodes(topo: CpuTopology, cpus: frozenset[int], allowed_mems: frozenset[int]
                 ) -> frozenset[int]:
    """The memory nodes of a rank in ``socket`` mode running on ``cpus`` (its package's
    allowed CPUs): every node with CPUs among them that has memory this process may use
    (torchrun's socket mode spans all the package's nodes; empty: none has)."""
    return frozenset(n for n, mine in topo.nodes.items()
                     if mine & cpus and n in topo.memory and n in allowed_mems)


def _groups(cpus: frozenset[int], key: dict[int, int]) -> dict[int, frozenset[int]]:
    out: dict[int, set[int]] = {}
    for c in sorted(cpus):
        out.setdefault(key.get(c, c), set()).add(c)
    return {k: frozenset(v) for k, v in sorted(out.items())}


def _share(index: int, count: int) -> str:
    """Which of the ``count`` shares a rank takes, said without a second numbering."""
    return f"share {index} (of 0 to {count - 1})" if count > 1 else "the only share"


def cpu_set(topo: CpuTopology, mode: str, node: int, allowed: frozenset[int], index: int,
            count: int, among: str = "ranks placed there") -> tuple[frozenset[int], str]:
    """The CPUs of a rank in ``mode`` (:data:`CPU_MODES` but ``none``), running on
    ``node``, the ``index``-th of ``count`` ranks placed on that node (``among``: who
    they are, for the reason); and why.

    * ``node``: the node's allowed CPUs;
    * ``socket``: the allowed CPUs of the package of the node's lowest allowed CPU;
    * ``exclusive``: the node's allowed CPUs by physical core (the lowest CPU of
      ``thread_siblings_list``), cores in that order; ``count`` ranks share them
      ``cores // count`` each, the first ``cores % count`` ranks one more (torchrun's
      split); fewer cores than ranks give no CPU (the caller's error: exclusive means it);
    * ``exclusive-nosmt``: the same cores, each by its lowest allowed CPU only;
    * ``core-complex``: the node's allowed CPUs by last-level cache, groups with more
      CPUs first (then by lowest CPU), rank ``index`` takes group ``index % groups``
      (torchrun's rule).
    """
    here = topo.nodes.get(node, frozenset()) & allowed
    if mode == "node":
        return here, f"node {node}'s allowed CPUs"
    if mode == "socket":
        first = min(here)
        pkg = topo.package.get(first)
        if pkg is None:
            return here, (f"cpu{first} has no physical_package_id: node {node}'s CPUs "
                          "stand for its package")
        cpus = frozenset(c for c in allowed if topo.package.get(c) == pkg)
        return cpus, f"package {pkg} (of cpu{first}, node {node}'s lowest allowed CPU)"
    if mode in ("exclusive", "exclusive-nosmt"):
        cores = list(_groups(here, dict(topo.core)).values())
        n = len(cores)
        if n < count:
            return frozenset(), (f"only {n} physical cores on node {node} for the {count} "
                                 f"{among}: exclusive needs a core each at least")
        k, r = divmod(n, count)
        start = index * k + min(index, r)
        mine = cores[start:start + k + (1 if index < r else 0)]
        extra = f", the first {r} one more" if r else ""
        why = (f"{n} physical cores of node {node} split among the {count} {among} ({k} "
               f"each{extra}): {_share(index, count)}")
        if mode == "exclusive-nosmt":
            return frozenset(min(c) for c in mine), why + "; one CPU per core (no SMT)"
        return frozenset().union(*mine), why + "; with their SMT siblings"
    if mode == "core-complex":
        if topo.llc_level == 0:
            return here, (f"no cache/index* files: the last-level caches are unknown, "
                          f"node {node}'s allowed CPUs")
        groups = sorted(_groups(here, dict(topo.llc)).items(),
                        key=lambda kv: (-len(kv[1]), kv[0]))
        pick = index % len(groups)
        return groups[pick][1], (
            f"L{topo.llc_level} cache group {pick} of the {len(groups)} on node {node} "
            f"(largest first): {_share(index, count)}")
    raise UsageError(f"unknown CPU mode {mode!r} (have: {', '.join(CPU_MODES)})")

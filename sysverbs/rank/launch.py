"""Start a rank on its CPUs, memory node and NICs: the plan :func:`plan` works out from
sysfs alone, and :meth:`Plan.apply` / :meth:`Plan.exec`, which bind the calling process
(``sched_setaffinity``, ``set_mempolicy``) with no numactl, libnuma, NVML or CUDA.

The rank's anchor is its GPU (the local rank's visible GPU, as
:func:`sysverbs.placement.assign_rank` picks it) or any device named with ``near``; its
NUMA node gives the CPUs (``cpu``: :data:`CPU_MODES`) and the memory node (``mem``:
``preferred``, ``bind`` or ``none``); the NICs and their environment are what
``sysverbs env`` computes for the same anchor.  docs/run.md has the rules.

>>> import tempfile
>>> from sysverbs import testing
>>> from sysverbs.rank.launch import plan
>>> with tempfile.TemporaryDirectory() as tmp:
...     fake = testing.materialize("gpu-hgx-h100", tmp)
...     p = plan(local_rank=3, cpu="exclusive", sysfs_path=fake.sysfs, environ={})
>>> p.anchor.name, p.node, p.cpus_text, p.mems_text
('GPU3', 0, '36-47,132-143', '0')
>>> p.env["NCCL_IB_HCA"], p.reasons["cpus"].split(":")[0]
('=mlx5_3:1', '48 physical cores of node 0 split among the 4 GPUs of the host there (12 each)')

GPU3 is the fourth of the four GPUs on node 0: the fourth 12 of its 48 cores, with
their SMT siblings (CPU 36's is 132).  ``plan.apply()`` would bind this process there
(only on this host: this plan is a fixture's); ``sysverbs run`` does the same and
``exec``s the command.
"""

from __future__ import annotations

import os
import re

from ..engine.api import environ_arg, index_arg
from ..ground.errors import BindingError, NotFoundError, UsageError, WrongTypeError
from ..ground.records import FrozenRecord, init
from ..ground.text import parse_cpulist
from ..placement import (
    CPU_MODES,
    MEM_MODES,
    cpu_node,
    cpu_set,
    cpulist_text,
    mem_node,
    socket_nodes,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, NoReturn, Optional, Union

    from ..placement import Anchor, CpuTopology, Topology

__all__ = ["CPU_MODES", "MEM_MODES", "SIZE_VARIABLES", "SCHEMA", "Plan", "plan"]

SCHEMA = "sysverbs.run/1"
#: The launchers' number of ranks on this host (exclusive and core-complex modes with
#: one ``near`` device for every rank), the first set wins.
SIZE_VARIABLES = ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                  "PALS_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE", "JSM_NAMESPACE_LOCAL_SIZE",
                  "SLURM_NTASKS_PER_NODE")


class Plan(FrozenRecord):
    """Where one rank runs.  ``cpus``: the CPUs its affinity is set to (all allowed
    ones with ``cpu_mode`` ``"none"``, which sets none); ``mems``: the nodes of its
    memory policy (empty: none is set); ``env``: the variables it adds (never one the
    environment already has: those are in ``kept`` with the value kept); ``reasons``:
    each decision and why; ``live``: the plan is for this host (:meth:`apply` binds
    only then)."""

    __slots__ = _fields = ("rank", "anchor", "cpu_mode", "mem_mode", "node", "cpus", "mems",
                           "allowed_cpus", "allowed_mems", "nics", "env", "kept", "reasons",
                           "warnings", "live", "sysfs_path")
    rank: Optional[int]
    anchor: Anchor
    cpu_mode: str
    mem_mode: str
    node: Optional[int]
    cpus: frozenset[int]
    mems: frozenset[int]
    allowed_cpus: frozenset[int]
    allowed_mems: frozenset[int]
    nics: tuple[str, ...]
    env: Mapping[str, str]
    kept: Mapping[str, str]
    reasons: Mapping[str, str]
    warnings: tuple[str, ...]
    live: bool
    sysfs_path: str

    def __init__(self, rank: Optional[int], anchor: Anchor, cpu_mode: str, mem_mode: str,
                 node: Optional[int], cpus: frozenset[int], mems: frozenset[int],
                 allowed_cpus: frozenset[int], allowed_mems: frozenset[int],
                 nics: tuple[str, ...], env: Mapping[str, str], kept: Mapping[str, str],
                 reasons: Mapping[str, str], warnings: tuple[str, ...], live: bool,
                 sysfs_path: str) -> None:
        init(self, rank, anchor, cpu_mode, mem_mode, node, cpus, mems, allowed_cpus,
             allowed_mems, nics, env, kept, reasons, warnings, live, sysfs_path)

    @property
    def cpus_text(self) -> str:
        """``cpus`` in the kernel's list format (``0-23,48-71``)."""
        return cpulist_text(self.cpus)

    @property
    def mems_text(self) -> str:
        return cpulist_text(self.mems)

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "rank": self.rank, "anchor": self.anchor.as_dict(),
            "cpu_mode": self.cpu_mode, "mem_mode": self.mem_mode, "node": self.node,
            "cpus": self.cpus_text, "mems": self.mems_text,
            "allowed_cpus": cpulist_text(self.allowed_cpus),
            "allowed_mems": cpulist_text(self.allowed_mems),
            "nics": list(self.nics), "env": dict(self.env), "kept": dict(self.kept),
            "reasons": dict(self.reasons), "warnings": list(self.warnings),
            "live": self.live,
        }

    def render(self) -> str:
        """The plan as ``sysverbs run --dry-run`` prints it."""
        a = self.anchor
        lines = [f"rank {self.rank if self.rank is not None else '-'}: near {a.name} "
                 f"({a.address}), node {self.node if self.node is not None else 'unknown'}",
                 f"  cpus {self.cpus_text} ({self.cpu_mode}"
                 f"{', not set' if self.cpu_mode == 'none' else ''})",
                 f"  mems {self.mems_text or '-'} ({self.mem_mode}"
                 f"{', not set' if not self.mems else ''})",
                 f"  nics {', '.join(self.nics) or 'none'}"]
        lines += [f"  set {k}={v}" for k, v in self.env.items()]
        lines += [f"  kept {k}={v} (already set)" for k, v in self.kept.items()]
        lines += [f"  why {k}: {v}" for k, v in self.reasons.items()]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines) + "\n"

    def apply(self) -> None:
        """Bind the calling thread (and the process's other threads that still have
        its affinity) to :attr:`cpus`, and set the calling thread's memory policy
        (``MPOL_PREFERRED``, ``MPOL_PREFERRED_MANY`` for several nodes, or
        ``MPOL_BIND`` on :attr:`mems`).  Both survive ``exec``
        and are inherited by new threads and children.  The environment is not
        changed (:meth:`exec` passes :attr:`env`).  A plan of another sysfs root is a
        :class:`~sysverbs.ground.errors.UsageError`; a refused call a
        :class:`~sysverbs.ground.errors.BindingError` with the kernel's errno."""
        if not self.live:
            raise UsageError(f"this plan is for the host under {self.sysfs_path}, not "
                             "this one: it can be shown, not applied")
        from .mempolicy import (
            MPOL_BIND,
            MPOL_PREFERRED,
            MPOL_PREFERRED_MANY,
            get_affinity,
            set_affinity,
            set_mempolicy,
        )

        old = get_affinity(0)
        if self.cpu_mode != "none":
            try:
                set_affinity(0, self.cpus)
            except OSError as e:
                raise BindingError(f"the kernel refused sched_setaffinity({self.cpus_text})"
                                   f": [Errno {e.errno}] {e.strerror}", e.errno or 22
                                   ) from None
            for tid in _threads():
                try:
                    if get_affinity(tid) == old:
                        set_affinity(tid, self.cpus)
                except OSError:
                    pass  # the thread ended
        if self.mems:
            try:
                set_mempolicy(MPOL_BIND if self.mem_mode == "bind" else
                              MPOL_PREFERRED_MANY if len(self.mems) > 1 else MPOL_PREFERRED,
                              sorted(self.mems))
            except BindingError:
                if self.cpu_mode != "none":  # all or nothing: the affinity goes back
                    set_affinity(0, old)
                raise

    def exec(self, argv: Sequence[str], environ: Optional[Mapping[str, str]] = None,
             fallback: bool = False) -> NoReturn:
        """:meth:`apply`, then replace this process with ``argv`` (searched in PATH)
        with ``environ`` (default ``os.environ``) and :attr:`env`.  ``fallback``: a
        :class:`~sysverbs.ground.errors.BindingError` does not stop it: the command runs
        unbound (the caller says so)."""
        args = [os.fsdecode(a) for a in argv]
        if not args:
            raise UsageError("no command to run")
        try:
            self.apply()
        except BindingError:
            if not fallback:
                raise
        env = environ_arg(environ, "environ")
        env.update(self.env)
        os.execvpe(args[0], args, env)


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task") if t.isdigit()]
    except OSError:
        return []


def _live_mems() -> Optional[frozenset[int]]:
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Mems_allowed_list:"):
                    return parse_cpulist(line.split(":", 1)[1].strip())
    except OSError:
        pass
    return None


def _list_arg(value: object, what: str) -> Optional[frozenset[int]]:
    if value is None:
        return None
    if isinstance(value, str):
        parsed = parse_cpulist(value.strip())
        if parsed is None or not parsed:
            raise UsageError(f"{what} {value!r} is not a list such as 0-3,8")
        return parsed
    if isinstance(value, (set, frozenset, list, tuple)) and all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in value):
        return frozenset(value)
    raise WrongTypeError(f"{what} must be a list text ('0-3,8') or a set of ints")


def _local_size(env: Mapping[str, str]) -> tuple[Optional[int], str]:
    for name in SIZE_VARIABLES:
        value = env.get(name)
        if value is not None and re.fullmatch(r"\s*[0-9]{1,6}\s*", value) and int(value):
            return int(value), f"{name}={value.strip()}"
    return None, "none of " + ", ".join(SIZE_VARIABLES) + " is set"


def _anchors(host: Topology, near: Union[None, str, Sequence[str]], rank: Optional[int],
             why_rank: str, env: Mapping[str, str], local_size: Optional[int]
             ) -> tuple[int, list[Anchor], str]:
    """The anchors of every rank on the host (for the split modes and the NICs'
    balance), the index of this rank's among them, and why."""
    from ..placement import find_anchor, gpu_anchor, visible_gpus

    if near is not None:
        specs = [s for s in (near.split(",") if isinstance(near, str) else list(near))]
        if not specs or not all(isinstance(s, str) and s.strip() for s in specs):
            raise UsageError(f"near must name one or more devices, not {near!r}")
        found = [find_anchor(host, s) for s in specs]
        if len(found) == 1:
            size, why_size = (local_size, "given") if local_size is not None \
                else _local_size(env)
            peers = [found[0]] * (size or 1)
            note = (f"{size} ranks near it ({why_size})" if size else
                    f"one rank near it ({why_size})")
            me = 0 if rank is None or not size else rank % size
            return me, peers, f"near {specs[0].strip()}: {found[0].via}; {note}"
        if rank is None:
            raise UsageError(f"near names {len(found)} devices, one per local rank, but "
                             f"no local rank is known ({why_rank})")
        if rank >= len(found):
            raise NotFoundError(f"local rank {rank} has no device: near names "
                                f"{len(found)} ({', '.join(specs)}), ranks 0 to "
                                f"{len(found) - 1}")
        return rank, found, (f"near[{rank}] = {specs[rank].strip()} ({why_rank}): "
                             f"{found[rank].via}")
    if not host.gpus:
        raise NotFoundError("no GPU on this host (NVIDIA/AMD by PCI vendor and class): "
                            "say which device the rank is near (--near DEV)")
    visible, why_vis = visible_gpus(host, env)
    if not visible:
        raise NotFoundError(f"no GPU is visible ({why_vis}): say which device the rank "
                            "is near (--near DEV)")
    if rank is None:
        if len(visible) > 1:
            raise UsageError(f"{len(visible)} GPUs are visible and no local rank is known "
                             f"({why_rank}): say which rank this is (--local-rank N)")
        rank_gpu, pool = visible[0], list(host.gpus)
    elif len(visible) == 1:
        rank_gpu, pool = visible[0], list(host.gpus)
    elif rank < len(visible):
        rank_gpu, pool = visible[rank], list(visible)
    else:
        raise NotFoundError(f"local rank {rank} has no GPU: {why_rank}, but only "
                            f"{len(visible)} GPUs are visible ({why_vis}), ranks 0 to "
                            f"{len(visible) - 1}")
    pool.sort(key=lambda g: g.index)
    me = [g.address for g in pool].index(rank_gpu.address)
    return me, [gpu_anchor(g) for g in pool], (f"{why_rank} -> GPU{rank_gpu.index} "
                                               f"{rank_gpu.address} ({why_vis})")


def _nics(host: Topology, me: int, peers: list[Anchor], rank: Optional[int],
          env: dict[str, str], sysfs_path: Optional[str], dev_dir: Optional[str],
          list_options: Optional[Mapping[str, Any]], where: str = "this host"
          ) -> tuple[tuple[str, ...], dict[str, str], dict[str, str], str, list[str]]:
    """(NICs, variables to set, variables kept, reason, warnings) for ``peers[me]``:
    the NICs placement gives it among its peers (GPUs as GPUs, so that the answer is
    ``sysverbs topo --assign``'s), and ``sysverbs env``'s variables for them; nothing
    is set when ``sysverbs env`` would warn."""
    from ..placement import assign
    from .environment import rank_environment

    anchor = peers[me]
    targets = [p.gpu if p.gpu is not None and p.kind == "gpu" else p for p in peers]
    chosen = assign(host, targets)[me]
    if chosen is None or not chosen.nics:
        why = chosen.reason if chosen is not None else "no assignment"
        return (), {}, {}, f"no NIC for {anchor.name}: {why}", []
    nics = [(n.device, n.port) for n in chosen.nics]
    # keep_set: sysverbs env's one rule for what the user set (kept, said, and the
    # NCCL_IB_HCA in force is the one nccl check judges)
    result = rank_environment(nics, local_rank=rank, environ=env, sysfs_path=sysfs_path,
                              dev_dir=dev_dir, list_options=list_options, host=host,
                              keep_set=True, where=where)
    names = tuple(f"{n.device}:{n.port}" for n in result.nics)
    if result.warnings:
        return names, {}, {}, (f"{chosen.reason}; the environment is not set: sysverbs "
                               "env warns"), list(result.warnings)
    kept = {v.name: env[v.name] for v in result.variables
            if v.value is None and v.reason.startswith("already set to ")}
    said = [n for n in result.notes if n.split(" ", 1)[0] in kept and " is already set to " in n]
    return names, result.exports(), kept, chosen.reason, said


def plan(near: Union[None, str, Sequence[str]] = None, *, local_rank: Optional[int] = None,
         cpu: str = "node", mem: str = "preferred",
         environ: Optional[Mapping[str, str]] = None,
         sysfs_path: Optional[str] = None, proc_path: Optional[str] = None,
         dev_dir: Optional[str] = None, allowed_cpus: Union[None, str, frozenset[int]] = None,
         allowed_mems: Union[None, str, frozenset[int]] = None,
         local_size: Optional[int] = None, nics: bool = True,
         list_options: Optional[Mapping[str, Any]] = None,
         host: Optional[Topology] = None, cpu_topology: Optional[CpuTopology] = None,
         where: str = "this host") -> Plan:
    """The :class:`Plan` of one local rank.

    ``near``: the anchor (a device name, or a list or comma-separated text of them, one
    per local rank; default the rank's GPU).  ``local_rank``: default from the
    launchers' variables (:data:`sysverbs.placement.RANK_VARIABLES`).  ``cpu``:
    :data:`CPU_MODES`; ``mem``: :data:`MEM_MODES`.  ``environ``: the environment the
    command will get (default ``os.environ``): its ranks, CUDA_VISIBLE_DEVICES /
    NVIDIA_VISIBLE_DEVICES, and the variables that are kept.  ``sysfs_path``: another
    host's tree (default ``$SYSFS_PATH``, else ``/sys``); then that host's online CPUs
    and memory nodes are the allowed ones.  ``allowed_cpus`` / ``allowed_mems``
    (``"0-3,8"`` or a set) narrow the allowed sets (on this host: within
    ``sched_getaffinity`` and ``Mems_allowed_list``).  ``local_size``: the number of
    ranks near one ``near`` device (default from :data:`SIZE_VARIABLES`).  ``nics``:
    False leaves the NIC variables out.  An empty CPU or memory set is a
    :class:`~sysverbs.ground.errors.BindingError` naming the cause.  ``host`` and
    ``cpu_topology``: the host and CPUs of that tree already read (the command's one host model,
    ``sysverbs/model/``), instead of reading them again.  ``where``: how the NIC
    variables' check names the host (``sysverbs env``'s ``where``).
    """
    from ..ground.hostroot import HostRoot
    from ..placement import local_rank as rank_from
    from ..placement import read_cpus, read_host_at

    if cpu not in CPU_MODES:
        raise UsageError(f"unknown cpu mode {cpu!r} (have: {', '.join(CPU_MODES)})")
    if mem not in MEM_MODES:
        raise UsageError(f"unknown mem mode {mem!r} (have: {', '.join(MEM_MODES)})")
    if local_rank is not None:
        index_arg(local_rank, "local_rank")
    if local_size is not None and index_arg(local_size, "local_size") < 1:
        raise UsageError("local_size must be at least 1")
    env = environ_arg(environ, "environ")
    want_cpus = _list_arg(allowed_cpus, "allowed_cpus")
    want_mems = _list_arg(allowed_mems, "allowed_mems")
    at = HostRoot.resolve(sysfs_path, dev_dir, proc_path)
    root = os.path.abspath(at.sysfs or b"/")
    live = at.live
    if host is None:
        host = read_host_at(at)
    topo = read_cpus(root) if cpu_topology is None else cpu_topology
    reasons: dict[str, str] = {}
    warnings: list[str] = []
    rank, why_rank = (local_rank, f"rank {local_rank} (given)") if local_rank is not None \
        else rank_from(env)
    reasons["rank"] = why_rank
    me, peers, reasons["anchor"] = _anchors(host, near, rank, why_rank, env, local_size)
    anchor = peers[me]
    ok_cpus, ok_mems, why_allowed = _allowed(topo, live, want_cpus, want_mems)
    reasons["allowed"] = why_allowed
    numa, source = host.numa_affinity(anchor)
    node, why_node = cpu_node(topo, numa, ok_cpus)
    if numa is None:
        reasons["node"] = f"{anchor.name}: {why_node} ({source})"
    elif node is None:
        reasons["node"] = f"{anchor.name} is on node {numa} ({source}): {why_node}"
    else:
        reasons["node"] = f"{anchor.name}'s NUMA node {numa} ({source}): CPUs of {why_node}"
    cpus, mems = _sets(topo, cpu, mem, me, peers, node, numa, ok_cpus, ok_mems,
                       host, reasons, warnings)
    names: tuple[str, ...] = ()
    add: dict[str, str] = {}
    kept: dict[str, str] = {}
    if nics:
        names, add, kept, reasons["nics"], more = _nics(
            host, me, peers, rank, env, None if live else os.fsdecode(root), dev_dir,
            list_options, where)
        warnings += more
    else:
        reasons["nics"] = "not asked for"
    return Plan(rank, anchor, cpu, mem, node, cpus, mems, ok_cpus, ok_mems, names, add,
                kept, reasons, tuple(warnings), live, os.fsdecode(root))


def _allowed(topo: CpuTopology, live: bool, cpus: Optional[frozenset[int]],
             mems: Optional[frozenset[int]]) -> tuple[frozenset[int], frozenset[int], str]:
    if live:
        from .mempolicy import get_affinity

        base_cpus = get_affinity(0)
        base_mems = _live_mems() or frozenset(topo.nodes)
        why = (f"this process may use CPUs {cpulist_text(base_cpus)} (sched_getaffinity, "
               f"within its cgroup cpuset) and memory nodes {cpulist_text(base_mems)} "
               "(Mems_allowed_list)")
    else:
        base_cpus = topo.online
        base_mems = topo.memory or frozenset(topo.nodes)
        why = (f"that host's online CPUs {cpulist_text(base_cpus)} and memory nodes "
               f"{cpulist_text(base_mems)}")
    if cpus is not None:
        base_cpus &= cpus
        why += f", within the allowed CPUs given ({cpulist_text(cpus)})"
    if mems is not None:
        base_mems &= mems
        why += f", within the allowed memory nodes given ({cpulist_text(mems)})"
    return base_cpus, base_mems, why


def _sets(topo: CpuTopology, cpu: str, mem: str, me: int, peers: list[Anchor],
          node: Optional[int], numa: Optional[int], ok_cpus: frozenset[int],
          ok_mems: frozenset[int], host: Topology, reasons: dict[str, str],
          warnings: list[str]) -> tuple[frozenset[int], frozenset[int]]:
    anchor = peers[me]
    if not ok_cpus:
        raise BindingError("no CPU is allowed: " + reasons["allowed"])
    if cpu == "none":
        cpus = ok_cpus
        reasons["cpus"] = "cpu mode none: the affinity is left as it is"
    elif node is None:
        if numa is not None:  # the node is known, but none of its CPUs is allowed
            raise BindingError(reasons["node"])
        cpus = ok_cpus
        reasons["cpus"] = (f"{anchor.name}'s NUMA node is unknown: every allowed CPU "
                           f"(cpu mode {cpu} needs a node)")
        warnings.append(reasons["cpus"])
    else:
        index, count, among = _position(host, topo, me, peers, ok_cpus)
        cpus, reasons["cpus"] = cpu_set(topo, cpu, node, ok_cpus, index, count, among)
        if not cpus:
            raise BindingError(f"no CPU left for cpu mode {cpu}: {reasons['cpus']}")
    if mem == "none":
        reasons["mems"] = "mem mode none: no memory policy"
        return cpus, frozenset()
    if node is None:
        reasons["mems"] = "the node is unknown: no memory policy"
        warnings.append(f"{anchor.name}'s NUMA node is unknown: no memory policy is set")
        return cpus, frozenset()
    many = socket_nodes(topo, cpus, ok_mems) if cpu == "socket" else frozenset()
    if len(many) > 1:
        policy = "MPOL_BIND" if mem == "bind" else "MPOL_PREFERRED_MANY"
        reasons["mems"] = (f"{policy} on nodes {cpulist_text(many)}: the nodes of the "
                           "package the CPUs span that have memory (as torchrun's socket "
                           "mode)")
        return cpus, many
    target, why = mem_node(topo, node, ok_mems)
    if target is None:
        raise BindingError(f"no memory node for mem mode {mem}: {why}")
    policy = "MPOL_BIND" if mem == "bind" else "MPOL_PREFERRED"
    reasons["mems"] = f"{policy} on {why}"
    return cpus, frozenset({target})


def _position(host: Topology, topo: CpuTopology, me: int, peers: list[Anchor],
              ok_cpus: frozenset[int]) -> tuple[int, int, str]:
    """The index of ``peers[me]`` among the ranks whose anchors have its CPU node,
    their number, and who they are (the split modes).  A GPU anchor's share is keyed
    by the GPU's place on the host (all its GPUs, in index order), never by the job's
    view of them (CUDA_VISIBLE_DEVICES): two jobs on one host then never share a core."""
    from ..placement import gpu_anchor

    gpu = peers[me].gpu if peers[me].kind == "gpu" else None
    if gpu is not None and all(p.kind == "gpu" for p in peers) and len(
            {p.address for p in peers}) == len(peers):
        peers = [gpu_anchor(g) for g in sorted(host.gpus, key=lambda g: g.index)]
        me = [p.address for p in peers].index(gpu.address)
        among = "GPUs of the host there"
    else:
        among = "ranks placed there"
    nodes = [cpu_node(topo, host.numa_affinity(p)[0], ok_cpus)[0] for p in peers]
    same = [i for i, n in enumerate(nodes) if n == nodes[me]]
    return same.index(me), len(same), among

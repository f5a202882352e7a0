"""``sysverbs run``: start a command on this rank's CPUs, memory node and NICs
(docs/run.md).

    sysverbs run [--local-rank N] [--near DEV[,DEV...]] [--cpu MODE] [--mem MODE]
                 [--dry-run] [--json] [--fallback] -- COMMAND [ARG...]

Only :func:`register` runs when the parser is built; the work is imported when the
command runs.
"""

from __future__ import annotations

import sys

from ..ground.errors import UsageError
from .hostmodel import model_of, read_once, say_link_layer

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

__all__ = ["register", "run"]

_CPU = ("node", "socket", "exclusive", "exclusive-nosmt", "core-complex", "none")


def register(subparsers: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    """Add ``run`` to the ``sysverbs`` command's subparsers."""
    import argparse

    p = subparsers.add_parser(
        "run", parents=list(parents), help="start a command on the rank's CPUs, memory and NICs",
        description="Work out this rank's place from sysfs (its GPU, or the device given with "
        "--near; that device's NUMA node, CPUs and memory; its NICs) and exec COMMAND there: "
        "CPU affinity (sched_setaffinity), memory policy (set_mempolicy) and the NCCL/UCX "
        "variables sysverbs env computes, none that is already set. No numactl, libnuma, "
        "nvidia-smi or CUDA.",
        epilog="exit status: COMMAND's own (it replaces sysverbs); 1 when the rank cannot be "
        "placed or bound (an empty CPU or memory set, a refused system call, fewer cores "
        "than ranks for exclusive) unless --fallback; 127 when COMMAND is not found, 126 "
        "when it cannot be executed (as shells); 2 for a usage error. --dry-run prints the "
        "plan and exits 0.")
    p.add_argument("--local-rank", type=int, metavar="N",
                   help="this rank's local rank (default: LOCAL_RANK, "
                   "OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID, "
                   "PALS_LOCAL_RANKID, MV2_COMM_WORLD_LOCAL_RANK, JSM_NAMESPACE_LOCAL_RANK)")
    p.add_argument("--near", metavar="DEV[,DEV...]",
                   help="place by this device instead of the rank's GPU: a PCI address, an "
                   "RDMA device, a netdev or a block device (nvme0n1); a list is indexed by "
                   "local rank")
    p.add_argument("--cpu", choices=_CPU, default="node",
                   help="node (default): the anchor's NUMA node; socket: its package; "
                   "exclusive: a share of the node's physical cores; exclusive-nosmt: the "
                   "same without SMT siblings; core-complex: one last-level cache group; "
                   "none: no CPU binding")
    p.add_argument("--mem", choices=("preferred", "bind", "none"), default="preferred",
                   help="memory policy on the node: preferred (default, MPOL_PREFERRED), bind "
                   "(MPOL_BIND), none")
    p.add_argument("--local-size", type=int, metavar="N",
                   help="ranks near one --near device, for exclusive and core-complex "
                   "(default: LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, ...)")
    p.add_argument("--allowed-cpus", metavar="LIST",
                   help="CPUs the rank may use, e.g. 0-23,48-71 (default: this process's; "
                   "another sysfs root's online CPUs)")
    p.add_argument("--no-nics", action="store_true", help="set no NIC variables")
    p.add_argument("--fallback", action="store_true",
                   help="when the rank cannot be placed or bound, run COMMAND unbound with a "
                   "warning instead of failing")
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    p.add_argument("words", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG...]",
                   help="what to run")
    p.set_defaults(func=run)


def _command(args: argparse.Namespace) -> list[str]:
    words = list(args.words)
    if words[:1] == ["--"]:
        words = words[1:]
    return words


@read_once
def run(args: argparse.Namespace, opts: dict[str, Any]) -> int:
    """``sysverbs run``: exec the command bound; print the plan with --dry-run."""
    import os

    from ..ground.errors import BindingError, NotFoundError
    from ..rank.launch import plan
    from .contract import emit, fail, sysfs_root, warning, where

    words = _command(args)
    if not words and not args.dry_run:
        raise UsageError("no command to run: sysverbs run [options] -- COMMAND [ARG...]")
    if args.local_size is not None and args.local_size < 1:
        raise UsageError(f"--local-size must be at least 1, not {args.local_size}")
    if args.local_rank is not None and args.local_rank < 0:
        raise UsageError(f"--local-rank must not be negative, not {args.local_rank}")
    if args.allowed_cpus is not None:
        from ..ground.text import parse_cpulist

        if not parse_cpulist(args.allowed_cpus.strip()):
            raise UsageError(f"--allowed-cpus {args.allowed_cpus!r}: not a CPU list such as "
                             "0-23,48-71")
    sysfs = sysfs_root(opts)
    live = args.host_root.live
    if not live and not args.dry_run:
        raise UsageError(f"{where(args, sysfs)} is not this host: its plan can be shown "
                         "(--dry-run), not applied")
    problem = args.root_problem
    if args.near is None and problem is not None:
        if not model_of(args).placement.gpus:
            return _unplaced(args, words, "nothing-found", f"no GPU and no RDMA device on "
                             f"{where(args, sysfs)}: nothing to place by (--near DEV)")
    if problem is not None:
        warning("run", problem.message)
    listing = {k: opts[k] for k in ("source", "config_dir", "providers", "rdma_core")}
    try:
        p = plan(args.near, local_rank=args.local_rank, cpu=args.cpu, mem=args.mem,
                 sysfs_path=sysfs, dev_dir=opts["dev_dir"],
                 proc_path=args.host_root.proc_path,
                 allowed_cpus=args.allowed_cpus, local_size=args.local_size,
                 nics=not args.no_nics, list_options=listing,
                 host=model_of(args).placement, cpu_topology=model_of(args).cpus,
                 where=where(args, sysfs))
    except NotFoundError as e:
        return _unplaced(args, words, "not-found", str(e.args[0]))
    except BindingError as e:
        return _unplaced(args, words, "binding", str(e))
    for w in p.warnings:
        warning("run", w)
    if not args.no_nics and p.anchor.gpu is not None and p.nics and \
            not say_link_layer(args, "run", [p.anchor.gpu.index]):
        return _unplaced(args, words, "nothing-chosen", "no single link layer (InfiniBand or "
                         "RoCE) serves every rank of this host")
    if args.dry_run:
        if args.json:
            doc = p.as_dict()
            doc["command"] = words
            emit(doc)
        else:
            sys.stdout.write(p.render())
            sys.stdout.flush()
        return 0
    try:
        p.apply()
    except BindingError as e:
        if not args.fallback:
            return fail(args, "binding", str(e))
        warning("run", f"{e}; --fallback: running {words[0]!r} unbound (the NIC variables "
                "are still set)")
    env = dict(os.environ)
    env.update(p.env)
    return _exec(args, words, env)


#: The exit status when the command cannot be run, as POSIX shells give it: 127 when it
#: is not found, 126 when it is found but cannot be executed.
NOT_FOUND, NOT_EXECUTABLE = 127, 126


def _exec(args: argparse.Namespace, words: list[str], env: dict[str, str]) -> int:
    """Replace sysverbs with the command; when exec fails, the error and the shell's
    status (:data:`NOT_FOUND`, :data:`NOT_EXECUTABLE`), which launchers read."""
    import errno
    import os

    from .contract import fail

    try:
        os.execvpe(words[0], words, env)
    except OSError as e:  # exec failed: the command is not there or not executable
        # a name searched in PATH is not found when no directory has it (ENOENT, or
        # ENOTDIR for a PATH entry that is a file); a path only when it does not exist
        missing = (errno.ENOENT,) if "/" in words[0] else (errno.ENOENT, errno.ENOTDIR)
        status = NOT_FOUND if e.errno in missing else NOT_EXECUTABLE
        return fail(args, "exec", f"cannot run {words[0]!r}: {e.strerror or e}", status)
    return 1  # pragma: no cover (exec does not return)


def _unplaced(args: argparse.Namespace, words: list[str], kind: str, message: str) -> int:
    """The rank cannot be placed or bound: fail (exit 1), or with --fallback run the
    command unbound after a warning."""
    import os

    from .contract import fail, warning

    if not args.fallback or args.dry_run or not words:
        return fail(args, kind, message)
    warning("run", f"{message}; --fallback: running {words[0]!r} unbound")
    return _exec(args, words, dict(os.environ))

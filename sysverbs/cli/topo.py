"""``sysverbs topo``: the GPU/NIC matrix of ``nvidia-smi topo -m``, from sysfs alone.

    sysverbs topo                     # nvidia-smi topo -m's layout
    sysverbs topo --json              # the model (schema sysverbs.topo/1)
    sysverbs topo --assign [--json]   # each GPU's (or --rank's) NICs, with reasons

This module is imported when the parser is built: it imports nothing heavy; the
placement package is imported only when the command runs.
"""

from __future__ import annotations

import sys

from ..ground.errors import UsageError
from .contract import link_layer, rate
from .hostmodel import model_of, read_once, say_link_layer

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    """Add the ``topo`` command to the ``sysverbs`` parser."""
    t = subparsers.add_parser(
        "topo", parents=list(parents), help="GPU/NIC matrix as nvidia-smi topo -mp, from sysfs",
        description="The GPU/NIC matrix in nvidia-smi topo -mp's layout (PIX/PXB/PHB/NODE/"
        "SYS), read from sysfs with no GPU driver. NVLink is not visible in sysfs: GPU-GPU "
        "cells are PCIe classes, as in topo -mp. --assign: the NICs each GPU (or local rank) "
        "should use, nearest class first, then fewest bridge hops, with the reasons.",
        epilog="exit status: 0; 1 when the root is not a sysfs tree, it has neither GPUs nor "
        "RDMA devices, --assign gives no GPU a NIC (or --rank names no GPU), or no single "
        "link layer (InfiniBand or RoCE) serves every GPU; 2 for a usage error.")
    t.add_argument("--assign", action="store_true", help="print each GPU's NICs")
    t.add_argument("--near", metavar="DEV[,DEV...]",
                   help="with --assign: the NICs of these devices instead of the GPUs' (a "
                   "GPU, PCI address, RDMA device, netdev or block device such as nvme0n1)")
    t.add_argument("--smi-format", choices=["535", "525"], default="535",
                   help="nvidia-smi layout: 535 (R535+, GPU NUMA ID column; default) or 525")
    t.add_argument("--legend", choices=["mp", "m"], default="mp",
                   help="mp: nvidia-smi topo -mp's legend (the PCIe-only matrix, which is what "
                   "sysfs shows; default); m: topo -m's, with its NV# line (no cell is NV#)")
    t.add_argument("--underline", action="store_true",
                   help="underline the header with ESC[4m..ESC[0m, as R580 does")
    t.add_argument("--rank", default=None, metavar="N|env",
                   help="with --assign: only local rank N ('env': from LOCAL_RANK, "
                   "OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID, and CUDA_VISIBLE_DEVICES)")
    t.add_argument("--link-layer", choices=["InfiniBand", "Ethernet", "IB", "RoCE"],
                   type=link_layer, help="only ports of this link layer (any case)")
    t.add_argument("--min-rate", type=rate, metavar="GBPS", help="only ports this fast")
    t.add_argument("--any-state", action="store_true", help="also ports that are not ACTIVE")
    t.add_argument("--usable", action="store_true",
                   help="only devices sysverbs doctor finds usable (their char device opens)")
    t.add_argument("--include-vfs", action="store_true", help="also SR-IOV VFs and SFs")
    t.add_argument("--include-bond-slaves", action="store_true",
                   help="also devices whose netdev is a bond slave")
    t.add_argument("--svg", metavar="FILE|-",
                   help="draw the host as lstopo does (NUMA nodes, host bridges, bridges "
                   "and switches, GPUs, NICs, DMA functions) with each GPU's NICs joined "
                   "to it, as SVG, to FILE or stdout (the assignment filters apply)")
    t.set_defaults(func=run)


def _rank_arg(value: Any) -> Any:
    if value is None or value == "env":
        return value
    if str(value).isdigit():
        return int(value)
    raise UsageError(f"--rank must be a number or 'env', not {value!r}")


@read_once
def run(args: argparse.Namespace, opts: dict[str, Any]) -> int:
    """``sysverbs topo``: 0; 1 with neither GPUs nor RDMA devices, or when ``--assign``
    gives no GPU a NIC (or the rank has no GPU)."""
    from ..ground.errors import NotFoundError
    from ..placement import host_json, render_matrix
    from .contract import error, fail, sysfs_root, warning, where

    rank = _rank_arg(args.rank)
    if rank is not None and not args.assign:
        raise UsageError("--rank needs --assign (the matrix shows every GPU)")
    if args.near is not None and not args.assign:
        raise UsageError("--near needs --assign (the matrix shows GPUs and NICs)")
    if args.near is not None and rank is not None:
        raise UsageError("--near and --rank exclude each other (sysverbs run --near takes a "
                         "rank's device from a list)")
    sysfs = sysfs_root(opts)
    host = model_of(args).placement  # of args.host_root (--fixture: recorded)
    problem = args.root_problem
    if not host.gpus and args.near is None and (problem is not None or not host.nics):
        return fail(args, "nothing-found",
                    f"no GPU and no RDMA device on {where(args, sysfs)}: nothing to show")
    if problem is not None:
        warning("topo", problem.message)
    filters: dict[str, Any] = {
        "link_layer": args.link_layer, "min_rate_gbps": args.min_rate,
        "require_active": not args.any_state, "require_usable": args.usable,
        "include_vfs": args.include_vfs, "include_bond_slaves": args.include_bond_slaves,
    }
    if args.svg is not None:
        return _svg(args, host, filters, where(args, sysfs))
    if args.json:
        import json
    if not args.assign:
        if args.json:
            from ..placement import read_dra, read_layout

            doc = host_json(host)
            doc["problems"] = [*doc["problems"], *_link_problems(host)]
            lay = read_layout(host)
            doc["layout"] = lay.as_dict()  # rdma_topo's layout names
            doc["dra"] = read_dra(host, lay)  # Kubernetes DRA's attributes, the pairing
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            sys.stdout.write(render_matrix(host, args.smi_format, args.underline, args.legend))
        sys.stdout.flush()
        return 0
    from ..placement import assign, assign_rank

    plan: Sequence[Any]
    try:
        if args.near is not None:
            from ..placement import find_anchor

            plan = assign(host, [find_anchor(host, s) for s in args.near.split(",")],
                          **filters)
        elif rank is not None:
            plan = (assign_rank(host, None if rank == "env" else rank, **filters),)
        else:
            plan = assign(host, **filters)
    except NotFoundError as e:
        return fail(args, "not-found", str(e.args[0]))
    served = True
    if args.near is None:  # the host's one link layer: which ranks it costs a NIC
        mine = None if rank is None else [a.gpu.index for a in plan if a.gpu is not None]
        served = say_link_layer(args, "topo", mine, **filters)
    if args.json:
        doc = {"schema": "sysverbs.assign/1", "nvlink": "not visible in sysfs",
               "assignments": [_assignment_json(host, a) for a in plan],
               "problems": [*host.problems, *_link_problems(host)]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(_human(host, plan))
    sys.stdout.flush()
    if any(a.nics for a in plan):
        return 0 if served else 1
    if args.near is not None:
        error("topo", "no device got a NIC: " + (plan[0].reason if plan else "no assignment"))
    elif not host.gpus:
        error("topo", f"no GPU on {where(args, sysfs)} (NVIDIA/AMD by PCI vendor and "
              "class): nothing to assign")
    else:
        error("topo", "no GPU got a NIC: " + (plan[0].reason if plan else "no assignment"))
    return 1


def _svg(args: argparse.Namespace, host: Any, filters: dict[str, Any], here: str) -> int:
    """``--svg FILE|-``: the picture, with the assignment drawn in."""
    from ..placement import assign
    from ..placement._svg import host_svg
    from .contract import fail

    if args.assign or args.json or args.rank is not None or args.near is not None:
        raise UsageError("--svg draws every GPU's NICs: no --assign, --json, --rank or "
                         "--near with it")
    text = host_svg(host, assign(host, **filters), here)
    if args.svg == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    try:
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        return fail(args, "unwritable", f"--svg {args.svg}: {e.strerror or e}")
    return 0


def _numa(host: Any, dev: Any) -> str:
    """A device's NUMA node as every command answers it (``Topology.numa_affinity``: the
    matrix's NUMA Affinity, run's node), with the rule when it is not ``numa_node``."""
    node, source = host.numa_affinity(dev)
    if node is None:
        return "N/A"
    return str(node) if source == "numa_node" else f"{node}, from {source}"


def _assignment_json(host: Any, a: Any) -> dict[str, Any]:
    doc: dict[str, Any] = a.as_dict()
    if a.gpu is not None:
        node, source = host.numa_affinity(a.gpu)
        doc["gpu"].update(numa_affinity=node, numa_affinity_source=source)
    return doc


def _link_problems(host: Any) -> list[str]:
    """``pcie_link_degraded`` findings, then ``gdr_unavailable`` and
    ``gdr_disabled_by_distance`` with this environment's NCCL variables, as problem lines
    (docs/diagnose.md)."""
    import os

    from ..placement import degraded_links
    from ..rank.whynot import read_findings

    gdr = read_findings(host, os.environ, live=False).reasons()
    return [*(f"pcie_link_degraded: {d.message()}" for d in degraded_links(host)),
            *(f"{code}: {message}" for code, message in gdr)]


def _human(host: Any, plan: Sequence[Any]) -> str:
    out: list[str] = []
    if not host.gpus and not any(a.anchor for a in plan):
        out.append("no GPU found (NVIDIA/AMD by PCI vendor and class); nothing to assign")
    for a in plan:
        head = f"rank {a.rank}: " if a.rank is not None else ""
        if a.anchor is not None:
            numa = _numa(host, a.anchor)
            nics = ", ".join(f"{n.device}:{n.port}" for n in a.nics) or "none"
            out.append(f"{a.anchor.name} {a.anchor.address} (NUMA {numa}) -> {nics}")
            out.append(f"  found: {a.anchor.via}")
        elif a.gpu is None:
            out.append(f"{head}undecided: {a.reason}")
            continue
        else:
            g = a.gpu
            numa = _numa(host, g)
            nics = ", ".join(f"{n.device}:{n.port}" for n in a.nics) or "none"
            out.append(f"{head}GPU{g.index} {g.address} (NUMA {numa}) -> {nics}")
        out.append(f"  why: {a.reason}")
        for n in a.nics:
            nd = ",".join(n.netdevs) or "-"
            out.append(f"  {n.device} port {n.port} ({n.link_layer or '?'}, {nd}, "
                       f"{n.address}): {n.reason}; NCCL {n.nccl}")
    filtered = plan[0].filtered if plan else ()
    for f in filtered:
        port = f" port {f.port}" if f.port is not None else ""
        out.append(f"left out: {f.device}{port}: {f.reason}")
    for p in host.problems:
        out.append(f"note: {p}")
    out.append("NVLink is not visible in sysfs: distances are PCIe distances.")
    return "\n".join(out) + "\n"

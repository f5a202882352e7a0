"""``sysverbs env``: the NCCL/UCX environment for a rank (docs/environment.md).

    sysverbs env [--format sh|dotenv|json] [--local-rank N] [--device NAME[:PORT] ...]

Only :func:`register` runs when the parser is built; the work is imported when the
command runs.
"""

from __future__ import annotations

import argparse
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any],
             parents: Sequence[argparse.ArgumentParser],
             with_options: Callable[[Any], Any]) -> None:
    """Add ``env`` to the ``sysverbs`` command's subparsers (``with_options``: how the
    command gets its listing options, ``sysverbs.cli``'s)."""
    p = subparsers.add_parser(
        "env", parents=list(parents), help="NCCL_IB_HCA, UCX_NET_DEVICES... for a rank",
        description="Print the environment for one rank: NCCL_IB_HCA (exact names and ports), "
        "UCX_NET_DEVICES (UCX's dev:port names), NCCL_SOCKET_IFNAME (when a netdev of the "
        "chosen NICs carries an address) and NCCL_IB_GID_INDEX (RoCE, when one index suits "
        "every chosen port), each with its reason. Without --device: the NICs placement "
        "assigns to the local rank's GPU (sysverbs topo --assign); on a host without GPUs, "
        "every ACTIVE port of the usable devices.",
        epilog="exit status: 0; 1 when no NIC is chosen or a device is not found; 2 for a "
        "usage error. Use: eval \"$(sysverbs env --device mlx5_0:1)\"")
    p.add_argument("--format", choices=["sh", "dotenv", "json"], default="sh",
                   help="sh exports (default), a dotenv file, or JSON")
    p.add_argument("--local-rank", type=int, metavar="N",
                   help="without --device: the rank whose NICs placement chooses (default: "
                   "LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID); on a host "
                   "without GPUs the N-th usable port")
    p.add_argument("--device", action="append", metavar="NAME[:PORT]",
                   help="a NIC of the rank (repeatable; default: the NICs placement "
                   "assigns to the rank's GPU; without GPUs every usable ACTIVE port)")
    p.set_defaults(func=with_options(run))


def run(args: argparse.Namespace, opts: dict[str, Any]) -> int:
    """``sysverbs env``: ``opts`` are the listing options of the command line."""
    import os

    from ..environment import rank_environment
    from .topo import proc_root

    listing = {k: opts[k] for k in ("source", "config_dir", "providers", "rdma_core")}
    try:
        sysfs = opts["sysfs_path"]
        env = rank_environment(args.device, local_rank=args.local_rank, environ=os.environ,
                               sysfs_path=sysfs, dev_dir=opts["dev_dir"],
                               proc_path=None if sysfs is None
                               else proc_root(args.proc_path, sysfs),
                               conf_root=args.conf_root, list_options=listing)
    except LookupError as e:
        sys.stderr.write(f"sysverbs env: {e.args[0]}\n")
        return 1
    sys.stdout.write(env.render(args.format))
    sys.stdout.flush()
    if not env.nics:
        sys.stderr.write("sysverbs env: no usable NIC (no ACTIVE InfiniBand/Ethernet port)\n")
        return 1
    return 0

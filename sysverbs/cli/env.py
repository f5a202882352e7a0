"""``sysverbs env``: the NCCL/UCX environment for a rank (docs/environment.md).

    sysverbs env [--format sh|dotenv|json] [--local-rank N] [--device NAME[:PORT] ...]

Only :func:`register` runs when the parser is built; the work is imported when the
command runs.
"""

from __future__ import annotations

import argparse
import sys

from ..ground.errors import UsageError
from .hostmodel import model_of, read_once, say_link_layer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Optional

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[Any],
             parents: Sequence[argparse.ArgumentParser]) -> None:
    """Add ``env`` to the ``sysverbs`` command's subparsers."""
    p = subparsers.add_parser(
        "env", parents=list(parents), help="NCCL_IB_HCA, UCX_NET_DEVICES... for a rank",
        description="Print the environment for one rank: NCCL_IB_HCA (exact names and ports), "
        "UCX_NET_DEVICES (UCX's dev:port names), NCCL_SOCKET_IFNAME (when a netdev of the "
        "chosen NICs carries an address) and NCCL_IB_GID_INDEX (RoCE, when one index suits "
        "every chosen port), each with its reason. Without --device: the NICs placement "
        "assigns to the local rank's GPU (sysverbs topo --assign); on a host without GPUs, "
        "every ACTIVE port of the usable devices.",
        epilog="exit status: 0; 1 when no NIC is chosen, a device or the rank's GPU is not "
        "found, what would be written has warnings (then nothing is exported), or no single "
        "link layer (InfiniBand or RoCE) serves every rank of the host; 2 for a usage "
        "error. Use: eval \"$(sysverbs env --device mlx5_0:1)\"")
    p.add_argument("--format", choices=["sh", "dotenv", "json"], default="sh",
                   help="sh exports (default), a dotenv file, or JSON (as --json)")
    p.add_argument("--local-rank", type=int, metavar="N",
                   help="without --device: the rank whose NICs placement chooses (default: "
                   "LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID); on a host "
                   "without GPUs the N-th usable port")
    p.add_argument("--device", action="append", metavar="NAME[:PORT][,...]",
                   help="a NIC of the rank (repeatable, or a comma-separated list; "
                   "default: the NICs placement assigns to the rank's GPU; without GPUs "
                   "every usable ACTIVE port)")
    p.add_argument("--for", dest="frameworks", metavar="NAME[,NAME...]",
                   help="only these frameworks' variables, each in its own syntax: nccl, "
                   "ucx, nvshmem, uccl, vllm (the whole host's GPU->NIC map), mooncake "
                   "(with --map FILE: its topology file); sglang, nixl write nothing")
    p.add_argument("--map", metavar="FILE|-",
                   help="write the whole host's GPU->NICs map as JSON (PCI addresses, "
                   "devices, ports, GID index; schema sysverbs.nic-map/1) to FILE or stdout; "
                   "with --for mooncake, Mooncake's topology file, and MC_CUSTOM_TOPO_JSON")
    p.set_defaults(func=run)


def device_arg(value: str) -> str:
    """``--device NAME[:PORT]``: a port, when given, is a number from 1."""
    name, sep, port = value.rpartition(":")
    if sep and name:
        if not port.isdigit() or int(port) < 1:
            raise UsageError(f"--device {value!r}: bad port {port!r} (ports are numbered "
                             "from 1: NAME or NAME:PORT)")
    elif not value or sep:
        raise UsageError(f"--device {value!r}: not NAME or NAME:PORT")
    return value


def device_args(value: str) -> list[str]:
    """``--device NAME[:PORT][,NAME[:PORT]...]``: each entry as :func:`device_arg`
    (``mlx5_0:1,mlx5_1:1`` is two NICs, not the device ``mlx5_0:1,mlx5_1``)."""
    return [device_arg(v) for v in value.split(",")]


@read_once
def run(args: argparse.Namespace, opts: dict[str, Any]) -> int:
    """``sysverbs env``: ``opts`` are the listing options of the command line.  Exit 0
    when what it writes has no warning; else 1, the warnings on stderr and (sh, dotenv)
    the variables commented out, so that ``eval "$(sysverbs env)"`` sets nothing wrong."""
    import os

    from ..ground.errors import NotFoundError
    from ..rank.environment import rank_environment
    from .contract import fail, sysfs_root, where

    fmt = "json" if args.json else args.format
    names = None
    if args.frameworks is not None:
        from ..rank.frameworks import framework_names

        names = framework_names(args.frameworks)
    mooncake = names == ["mooncake"]
    if args.map is not None:
        if args.device is not None or args.local_rank is not None or not (
                names is None or mooncake):
            raise UsageError("--map writes the whole host's map: no --device or "
                             "--local-rank with it, and --for only as --for mooncake")
        from .env_map import write_map

        rc = write_map(args, opts, mooncake)
        if rc != 0 or not mooncake or args.map == "-":
            return rc
    if names is not None and not _rank_needed(names):
        from .env_map import host_only

        host_env = host_only(args, opts, names)
        return host_env if isinstance(host_env, int) else emit_env(host_env, fmt)
    devices = None if args.device is None else [n for d in args.device
                                                for n in device_args(d)]
    listing = {k: opts[k] for k in ("source", "config_dir", "providers", "rdma_core")}
    try:
        sysfs = opts["sysfs_path"]
        env = rank_environment(devices, local_rank=args.local_rank, environ=os.environ,
                               sysfs_path=sysfs, dev_dir=opts["dev_dir"],
                               proc_path=args.host_root.proc_path,
                               conf_root=args.conf_root, list_options=listing,
                               keep_set=True, where=where(args, sysfs_root(opts)),
                               host=model_of(args).placement)
    except NotFoundError as e:
        return fail(args, "not-found", str(e.args[0]))
    if not env.nics:
        return fail(args, "nothing-chosen",
                    "no usable NIC (no ACTIVE InfiniBand/Ethernet port)")
    served = devices is not None or _one_link_layer(args, env.gpu)  # placement's rank only
    if names is not None:
        from .env_map import with_frameworks

        env = with_frameworks(args, env, names)
    rc = emit_env(env, fmt)
    return rc if served else 1


def _rank_needed(names: Sequence[str]) -> bool:
    """Whether one of these frameworks takes the rank's NICs (vLLM takes the host's;
    those with no established variable take none)."""
    from ..rank.frameworks import FRAMEWORKS, HOST_FRAMEWORKS

    return any(n in FRAMEWORKS and n not in HOST_FRAMEWORKS for n in names)


def emit_env(env: Any, fmt: str) -> int:
    """Print ``env`` (a RankEnvironment) as ``fmt``; 1 with its warnings on stderr and
    (sh, dotenv) every variable commented out."""
    from .contract import warning

    text = env.render(fmt)
    for w in env.warnings:
        warning("env", w)
    if env.warnings and fmt != "json":
        text = "".join(line if line.startswith("#") else f"# (not set) {line}"
                       for line in text.splitlines(keepends=True))
        text += "# nothing is set: see the warnings (exit status 1)\n"
        if fmt == "sh":  # eval "$(sysverbs env)" fails too (set -e stops there)
            text += "false\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    return 1 if env.warnings else 0


def _one_link_layer(args: argparse.Namespace, gpu: Optional[int]) -> bool:
    """Placement's rank (on ``gpu``, as :func:`~sysverbs.rank.environment.rank_environment`
    placed it: not placed again) on a host of InfiniBand and RoCE ports: warn when the
    host's one link layer costs this rank its nearest NIC; False when no link layer
    serves every rank (``topo --assign`` and ``run`` say the same)."""
    if not model_of(args).placement.gpus:
        return True
    return say_link_layer(args, "env", [] if gpu is None else [gpu])

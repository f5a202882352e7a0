"""``sysverbs env --for LIST`` and ``--map FILE|-``: the frameworks' variables
(:mod:`sysverbs.rank.frameworks`) and the whole host's GPU->NICs map
(:mod:`sysverbs.rank.frameworks_map`).  Imported when the command runs."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["host_only", "with_frameworks", "write_map"]


def _host(args: Any) -> tuple[Any, Any]:
    from ..placement import assign, read_host_at

    host = read_host_at(args.host_root)
    return host, assign(host)


def with_frameworks(args: Any, env: Any, names: Sequence[str]) -> Any:
    """``env`` restricted to the frameworks ``names``, with theirs added."""
    from ..rank.frameworks import for_frameworks

    pairs: list[Any] = []
    devices: list[str] = []
    if "vllm" in names:
        from ..rank.frameworks_map import host_pairs

        host, plan = _host(args)
        pairs, devices = host_pairs(host, plan), [n.name for n in host.nics]
    return for_frameworks(env, names, pairs=pairs, all_devices=devices, environ=os.environ,
                          mooncake_file=None if args.map in (None, "-") else
                          os.path.abspath(args.map))


def host_only(args: Any, opts: dict[str, Any], names: Sequence[str]) -> Any:
    """``--for`` frameworks that take the whole host (vLLM): no rank is needed.  The
    environment to print, or the exit status when there is nothing to write."""
    from ..rank.environment import RankEnvironment
    from .contract import fail, sysfs_root, where

    env = with_frameworks(args, RankEnvironment((), ()), names)
    if not any(v.value is not None for v in env.variables) and not env.warnings:
        why = "; ".join(f"{v.name}: {v.reason}" for v in env.variables) or "; ".join(
            env.notes)
        return fail(args, "nothing-chosen",
                    f"nothing to write on {where(args, sysfs_root(opts))}: {why}")
    return env._replace(notes=("the whole host's answer, every GPU's NICs: no rank's",
                               *env.notes))


def write_map(args: Any, opts: dict[str, Any], mooncake: bool = False) -> int:
    """``--map FILE|-`` (``mooncake``: Mooncake's topology file): 0 when a GPU has a
    NIC; 1 when none has (or no GPU)."""
    import json

    from ..rank.frameworks_map import host_map, mooncake_topology
    from .contract import fail, sysfs_root, where

    here = where(args, sysfs_root(opts))
    host, plan = _host(args)
    if not host.gpus:
        return fail(args, "nothing-found", f"no GPU on {here}: no GPU->NICs map")
    doc = (mooncake_topology(host, plan) if mooncake else
           host_map(host, plan, sysfs_path=opts["sysfs_path"], environ=os.environ,
                    where=here))
    text = json.dumps(doc, indent=2) + "\n"
    if args.map == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        try:
            with open(args.map, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            return fail(args, "unwritable", f"--map {args.map}: {e.strerror or e}")
    if not any(a.nics for a in plan):
        return fail(args, "nothing-chosen", f"no GPU of {here} got a NIC")
    return 0


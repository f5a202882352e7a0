"""``sysverbs nccl check [VALUE]``: NCCL_IB_HCA as NCCL reads it on this host (docs/nccl.md).

Prints the ``NET/IB : Using ...`` line NCCL would print, then one warning (with a
fix) per problem :func:`sysverbs.rank.nccl.lint_hca` finds.  Exit status: 0 clean, 1
warnings or a device list that cannot be read, 2 usage errors.

Only :func:`register` runs when the ``sysverbs`` command starts; the rest is imported
when the command runs.
"""

from __future__ import annotations

from .hostmodel import read_once

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence
    from typing import Any, Optional

    from ..rank.ib import IbPort
    from ..rank.nccl import IbSelection, LintResult

__all__ = ["register", "check", "live_interfaces"]

EXIT_CLEAN, EXIT_WARNINGS = 0, 1


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``nccl check`` to the ``sysverbs`` parser (``parents``: the common options)."""
    import argparse

    n = subparsers.add_parser(
        "nccl", help="NCCL_IB_HCA as NCCL reads it: the devices it uses, and a linter",
        description="NCCL's view of this host's RDMA devices.")
    nsub = n.add_subparsers(dest="nccl_command", required=True, metavar="COMMAND")
    c = nsub.add_parser(
        "check", parents=parents, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="print NCCL's 'NET/IB : Using' line for VALUE, then warnings with fixes",
        description="Print the 'NET/IB : Using ...' line NCCL would print on this host with "
        "NCCL_IB_HCA=VALUE (default: $NCCL_IB_HCA, or its value from NCCL's config files), "
        "then a warning and a fix for each entry that does not mean what it seems: prefix "
        "collisions, entries matching nothing, whitespace or newlines, a misplaced '^' or "
        "'=', ports that do not exist or are not ACTIVE, too many entries or too long names, "
        "a value that selects no device, InfiniBand and RoCE ports together, ports of one "
        "NIC that NCCL cannot merge, plane IDs it refuses, more ports than its table holds.",
        epilog="exit status: 0 no warning; 1 warnings, or the device list cannot be read "
        "(a host without RDMA support has no device); 2 usage error.")
    c.add_argument("value", nargs="?", metavar="VALUE",
                   help="the NCCL_IB_HCA value to check (default: as NCCL would read it)")
    c.add_argument("--nccl-version", metavar="X.Y.Z",
                   help="the NCCL release whose rules apply (default: the newest known, "
                   "2.32.3; 2.5.6 and later)")
    c.add_argument("--oob", metavar="IF:ADDR",
                   help="the OOB interface text of the Using line (default: computed from "
                   "this host's interfaces and NCCL_SOCKET_IFNAME; '?' for another host)")
    c.set_defaults(func=check)


def live_interfaces() -> list[tuple[str, str]]:
    """``(name, address)`` of this host's running interfaces with an IPv4 or IPv6
    address, as NCCL's ``ncclOsFindInterfaces`` walks ``getifaddrs``: IPv4 addresses by
    interface index, then IPv6 ones (``/proc/net/if_inet6``, loopback excluded) by
    interface index and, as the kernel keeps each interface's list, wider scopes first.  The
    address is as ``ncclSocketToString`` prints it, with port 0: ``10.0.0.1<0>``."""
    import fcntl
    import ipaddress
    import socket
    import struct

    siocgifflags, siocgifaddr, iff_running = 0x8913, 0x8915, 0x40
    out: list[tuple[str, str]] = []
    running: dict[str, bool] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in _if_names():
            req = struct.pack("16sH22x", name.encode()[:15], 0)
            try:
                flags = struct.unpack("16sH", fcntl.ioctl(s, siocgifflags, req)[:18])[1]
            except OSError:
                continue
            running[name] = bool(flags & iff_running)
            if not running[name]:
                continue
            try:
                res = fcntl.ioctl(s, siocgifaddr, struct.pack("16s24x", name.encode()[:15]))
            except OSError:
                continue
            out.append((name, socket.inet_ntoa(res[20:24]) + "<0>"))
    try:
        with open("/proc/net/if_inet6") as fh:
            rows = [line.split() for line in fh]
    except OSError:
        rows = []
    rows = [r for r in rows if len(r) >= 6]
    rows.sort(key=lambda r: (int(r[1], 16), int(r[3], 16)))  # ifindex, then scope
    for row in rows:
        if not running.get(row[5]):
            continue
        addr = ipaddress.IPv6Address(int(row[0], 16))
        if addr.is_loopback:
            continue
        text = str(addr) + (f"%{row[5]}" if addr.is_link_local else "")
        out.append((row[5], text + "<0>"))
    return out


def _if_names() -> list[str]:
    """The interfaces by index (socket.if_nameindex; PyPy lacks it: /sys/class/net)."""
    import os
    import socket

    try:
        return [n for _, n in sorted(socket.if_nameindex())]
    except (AttributeError, OSError):
        pass
    found = []
    try:
        for name in os.listdir("/sys/class/net"):
            try:
                with open(f"/sys/class/net/{name}/ifindex") as fh:
                    found.append((int(fh.read()), name))
            except (OSError, ValueError):
                continue
    except OSError:
        return []
    return [n for _, n in sorted(found)]


def _oob(args: argparse.Namespace, env: dict[str, str], live: bool,
         version: tuple[int, int, int]) -> Optional[str]:
    if args.oob is not None:
        return str(args.oob)
    if not live:
        return None
    from ..rank.nccl import socket_interface

    ifs = live_interfaces()
    name = socket_interface([n for n, _ in ifs], env.get("NCCL_SOCKET_IFNAME"),
                            nccl_version=version)
    for n, addr in ifs:
        if n == name:
            return f"{n}:{addr}"
    return None


def _why_unlisted(args: argparse.Namespace, opts: dict[str, Any]) -> str:
    """Why libibverbs lists none of the root's RDMA devices: its device nodes are not
    under the dev dir (a tree given without --dev-dir), or (doctor says) another reason."""
    import os

    from ..engine.api import resolve
    from .contract import sysfs_root, where

    root = sysfs_root(opts)
    o = resolve(sysfs_path=opts["sysfs_path"], dev_dir=opts["dev_dir"])
    ib = os.listdir(os.path.join(root, "class", "infiniband"))
    try:
        uverbs = [n for n in os.listdir(os.path.join(root, "class", "infiniband_verbs"))
                  if n.startswith("uverbs")]
    except OSError:
        uverbs = []
    place = where(args, root)
    head = f"libibverbs lists none of the {len(ib)} RDMA devices of {place}"
    if uverbs and not any(os.path.exists(os.path.join(o.dev_dir, n)) for n in uverbs):
        hint = "" if opts["dev_dir"] is not None else (
            f" (the default: --dev-dir names the tree's own, e.g. "
            f"{os.path.join(os.path.dirname(root.rstrip('/')), 'dev', 'infiniband')})")
        return f"{head}: no device node of {', '.join(sorted(uverbs)[:3])}" \
               f"{'...' if len(uverbs) > 3 else ''} is under {o.dev_dir}{hint}"
    return f"{head} (sysverbs doctor says why)"


def _text(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def _doc(result: LintResult, sel: IbSelection, source: str, lines: list[str],
         version: str, transport: str) -> dict[str, Any]:
    return {
        "schema": "sysverbs.nccl-check/1",
        "value": result.value,
        "value_source": source,
        "nccl_version": version,
        "transport": transport,
        "lines": lines,
        "devices": [{"slot": d.slot, "device": d.device, "port": d.port, "link": d.link,
                     "rail": d.rail, "plane": d.plane} for d in sel.devices],
        "virtual_devices": sel.virtual_names(),
        "warnings": [w._asdict() for w in result.warnings],
        "notes": list(sel.notes),
    }


def _transport(env: Mapping[str, str], sel: IbSelection, ports: Sequence[IbPort],
               opts: dict[str, Any]) -> str:
    """The network NCCL would use between nodes (:func:`~sysverbs.rank.netplugin.
    net_transport`, the rule ``metrics`` and ``nfd`` report): a net plugin's, its IB
    transport's or its sockets'.  An EFA device counts when it is listed (the efa
    provider claims it) and its ports open."""
    from ..engine import api
    from ..rank.netplugin import net_transport, uses_ib

    names = {p.device for p in ports if p.opens}
    listing = {k: opts[k] for k in ("sysfs_path", "dev_dir", "source", "providers")}
    try:
        devices = api.get_device_list(**listing)
    except OSError:
        efa = False
    else:
        efa = any(d.provider == "efa" and d.name in names for d in devices)
        api.free_device_list(devices)
    return net_transport(env, ib_ports=uses_ib(len(sel.devices), sel.disabled, sel.failure),
                         efa_devices=efa)


@read_once
def check(args: argparse.Namespace, opts: dict[str, Any]) -> int:
    """``sysverbs nccl check``: ``opts`` are the listing options of the command line; a
    bad ``--nccl-version`` raises :class:`~sysverbs.ground.errors.UsageError` (exit 2)."""
    import errno
    import json
    import os
    import sys

    from ..ground.errors import UsageError
    from ..rank import nccl
    from .contract import describe_os_error, fail, sysfs_root, warning, where

    version = nccl.parse_version(args.nccl_version)
    if version[0] != nccl.LATEST[0]:
        raise UsageError(f"--nccl-version {args.nccl_version}: not an NCCL 2 release (the "
                         f"rules modelled are 2.5.6 to {_text(nccl.LATEST)})")
    if version > nccl.LATEST:
        warning("nccl check", f"NCCL {_text(version)} is newer than the newest release "
                f"whose rules sysverbs knows: {_text(nccl.LATEST)}'s rules apply")
        version = nccl.LATEST
    env, sources = nccl.nccl_environment(os.environ, root=args.conf_root,
                                         nccl_version=version)
    if args.value is not None:
        value: Optional[str] = args.value
        source = "argument"
    else:
        value = env.get("NCCL_IB_HCA")
        source = sources.get("NCCL_IB_HCA", "environment" if value is not None else "unset")
    live = args.host_root.live  # not a fixture, nor another tree
    extra: list[str] = []
    try:
        ports = nccl.host_ports(sysfs_path=opts["sysfs_path"], dev_dir=opts["dev_dir"],
                                source=opts["source"], providers=opts["providers"],
                                open_devices=live, gid_tables=True)
    except OSError as e:
        if e.errno not in (errno.ENOSYS, errno.ENOENT):
            return fail(args, "no-device-list",
                        f"cannot read the device list: {describe_os_error(e)}")
        ports = []  # ibv_get_device_list returns NULL: NCCL counts no device
        extra.append(nccl.no_device_list_note(e))
    else:
        if not ports and args.root_problem is None:
            why = _why_unlisted(args, opts)
            warning("nccl check", why)
            extra.append(why)
    result = nccl.lint_hca(value, ports, env, nccl_version=version,
                           where=where(args, sysfs_root(opts)))
    sel = result.selection
    if extra:
        sel = sel._replace(notes=(*sel.notes, *extra))
    lines = sel.lines(_oob(args, env, live, version))
    vtext = ".".join(map(str, version))
    transport = _transport(env, sel, ports, opts)
    if args.json:
        doc = _doc(result, sel, source, lines, vtext, transport)
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return EXIT_WARNINGS if result.warnings else EXIT_CLEAN
    out = sys.stdout
    for line in lines:
        out.write(line + "\n")
    for name in sel.virtual_names():
        if "+" in name:
            out.write(f"  (merged into the virtual device {name})\n")
    for note in sel.notes:
        out.write(f"note: {note}\n")
    shown = "NCCL_IB_HCA unset" if value is None else f"NCCL_IB_HCA={value!r} ({source})"
    out.write(f"{shown}; NCCL {vtext} rules\n")
    out.write(f"network between nodes: {transport or 'none: NCCL would fail to initialise'}"
              "\n")
    for w in result.warnings:
        out.write(f"warning [{w.code}] {w.entry!r}: {w.message}\n")
        if w.fix:
            out.write(f"  fix: NCCL_IB_HCA={w.fix!r}\n")
    return EXIT_WARNINGS if result.warnings else EXIT_CLEAN

"""The ``sysverbs`` command: rdma-core's device tools without rdma-core (docs/cli.md).

    sysverbs devices                 # byte-identical to ibv_devices
    sysverbs devinfo -l              # byte-identical to ibv_devinfo -l
    sysverbs devinfo [-d DEV] [-i PORT] [-v]   # ibv_devinfo's layout, from sysfs
    sysverbs netdev                  # ibdev2netdev: mlx5_0 port 1 ==> ib0 (Up)
    sysverbs doctor                  # why a device is missing or unusable, and the fix
    sysverbs watch [--json]          # hotplug events as they happen
    sysverbs snapshot [-o FILE]      # record this host's RDMA sysfs as a fixture
    sysverbs nccl check [VALUE]      # NCCL_IB_HCA as NCCL reads it, with fixes
    sysverbs env [--device DEV:PORT] # NCCL/UCX variables for a rank
    sysverbs run -- COMMAND          # start COMMAND on the rank's CPUs, memory and NICs
    sysverbs metrics [--listen A:P]  # this host's RDMA facts as Prometheus metrics
    sysverbs nfd [--features-dir D]  # the same facts as Node Feature Discovery labels
    sysverbs devices --fixture dgx-demo   # a bundled demo host instead of this one

Only this module is imported for ``devices`` and ``devinfo -l``; each other command
imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..engine import api
from ..engine.devlist import source_names
from ..ground.errors import UsageError
from .contract import (
    EXIT_USAGE,
    POLICY,
    POLL_INTERVAL,
    check_usage,
    command_name,
    describe_os_error,
    emit,
    error,
    fail,
    hoist_options,
    leading_options,
    listing_options,
    root_problem,
    schema_name,
    seconds,
    sysfs_root,
    warning,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, BinaryIO, Optional

__all__ = ["main"]

class _Usage(UsageError):
    """``ibv_devinfo``'s usage exit (``-i`` not a positive number)."""


def _out() -> BinaryIO:
    return sys.stdout.buffer


def _perror(prefix: str, err: OSError) -> None:
    """C ``perror``: ``<prefix>: <strerror(errno)>``."""
    code = err.errno or 0
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stderr.buffer.write(f"{prefix}: {os.strerror(code)}\n".encode())
    sys.stderr.buffer.flush()


def _list_failed(args: argparse.Namespace, err: OSError, status: int) -> int:
    """ibv_devices' / ibv_devinfo's perror and status; with --json, the error document."""
    _perror("Failed to get IB devices list", err)
    if args.json:
        emit({"schema": schema_name(args), "error": {
            "kind": "no-device-list", "message": describe_os_error(err)}})
    return status


def _devices(args: argparse.Namespace, opts: dict[str, Any]) -> int:
    try:
        devices = api.get_device_list(**opts)
    except OSError as e:
        return _list_failed(args, e, 1)
    if args.json:
        emit({"schema": "sysverbs.devices/1", "devices": [
            {"name": d.name, "node_guid": f"{api.get_device_guid(d):016x}",
             "node_type": d.node_type.name, "transport": d.transport_type.name,
             "provider": d.provider, "uverbs": d.dev_name, "dev_path": d.dev_path,
             "ibdev_path": d.ibdev_path} for d in devices]})
        api.free_device_list(devices)
        return 0
    out = _out()
    out.write(b"    %-16s\t   node GUID\n" % b"device")
    out.write(b"    %-16s\t----------------\n" % b"------")
    for dev in devices:
        guid = api.get_device_guid(dev)
        out.write(b"    %-16s\t%016x\n" % (os.fsencode(dev.name), guid))
    out.flush()
    api.free_device_list(devices)
    return 0


def _devinfo(args: argparse.Namespace, opts: dict[str, Any]) -> int:
    try:
        devices = api.get_device_list(**opts)
    except OSError as e:
        return _list_failed(args, e, 255)
    try:
        if args.list:
            if args.json:
                emit({"schema": "sysverbs.devinfo-list/1",
                      "devices": [d.name for d in devices]})
                return 0
            out = _out()
            n = len(devices)
            out.write(b"%d HCA%s found:\n" % (n, b"" if n == 1 else b"s"))
            for dev in devices:
                out.write(b"\t%s\n" % os.fsencode(dev.name))
            out.write(b"\n")
            out.flush()
            return 0
        from ..engine.api import resolve
        from .devinfo import render

        sysfs = resolve(source=opts["source"], sysfs_path=opts["sysfs_path"]).sysfs_path
        return render(list(devices), args.ib_dev, args.ib_port, args.verbose, args.json,
                      sysfs)
    finally:
        api.free_device_list(devices)


def _run_tool(name: str) -> Any:
    def run(args: argparse.Namespace, opts: dict[str, Any]) -> int:
        from . import tools as cli_tools

        rc: int = getattr(cli_tools, name)(args, opts)
        return rc

    return run


def _dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command under the contract (:mod:`sysverbs.cli.contract`)."""
    name = command_name(args)
    check_usage(args)
    policy = POLICY[name]
    if policy == "none":
        rc: int = args.func(args, {})
        return rc
    opts = listing_options(args)
    args.root_problem = None
    if policy != "rdma-core":
        problem = root_problem(sysfs_root(opts))
        args.root_problem = problem
        if problem is not None:
            if problem.kind == "not-sysfs" or policy == "fails":
                return fail(args, problem.kind, problem.message)
            if policy != "gpus":  # topo says it itself, with what it still shows
                warning(name, problem.message)
    rc = args.func(args, opts)
    return rc


# getopt-like ibv_devinfo options: -l acts when it is parsed, so what follows is ignored,
# and an -i that is not a positive number exits with the usage at once.
class _ListAction(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        ns.list = True


class _DevAction(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        if not ns.list:
            ns.ib_dev = values


class _PortAction(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        if ns.list:
            return
        from .devinfo import parse_port

        port = parse_port(str(values))
        if port <= 0:
            raise _Usage()
        ns.ib_port = port


class _VerboseAction(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        if not ns.list:
            ns.verbose = True


class _CompletionAction(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        from .completion import bash_script

        sys.stdout.write(bash_script(_parser()))
        sys.stdout.flush()
        parser.exit(0)


_EPILOG = """\
exit status (every command): 0 success; 1 a finding, nothing chosen or nothing to read;
2 a usage error. devices and devinfo keep ibv_devices' and ibv_devinfo's statuses and
messages (devinfo: 255, 4); 130 on Ctrl-C. Errors: 'sysverbs COMMAND: error: ...'.
--json on every command: one document whose "schema" names its JSON Schema. The shared
options (--fixture, --sysfs-path, --json...) may also come before the command.
Try: sysverbs fixtures; sysverbs topo --fixture gpu-hgx-h100 --assign
Docs: docs/cli.md.  Bash completion: eval "$(sysverbs --completion bash)"."""


def help_width() -> int:
    """The width argparse's help formatter takes by default (``shutil.get_terminal_size()``
    columns less 2: ``$COLUMNS``, else the terminal's, else 80), without importing
    :mod:`shutil` (with its archive modules, about 3 ms of ``sysverbs topo``'s 60)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return columns - 2


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose formatters get :func:`help_width` (argparse makes one at
    every ``add_argument``, to check the metavar, and its own default imports shutil).
    Subparsers are of the parser's class."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=help_width())  # type: ignore[call-arg]


#: The commands, in the order of the parser's help.
COMMANDS = ("devices", "devinfo", "netdev", "doctor", "watch", "snapshot", "topo", "nccl",
            "env", "run", "metrics", "nfd", "fixtures")


def _parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The command line's parser; ``only``: with that command alone (what a command line
    that names it needs: building every command's options costs more than some commands
    take to run).  The help and errors of a command do not depend on the others."""

    def want(name: str) -> bool:
        return only is None or name == only

    common = _Parser(add_help=False)
    g = common.add_argument_group("where to look (defaults: this machine)")
    g.add_argument("--sysfs-path", metavar="DIR",
                   help="sysfs root (default: $SYSFS_PATH, else /sys)")
    g.add_argument("--dev-dir", metavar="DIR",
                   help="uverbs device nodes (default: /dev/infiniband)")
    g.add_argument("--config-dir", metavar="DIR",
                   help="provider config dir (default: /etc/libibverbs.d)")
    g.add_argument("--source", default="auto", choices=source_names(),
                   help="where device records come from (default: auto, as libibverbs: "
                   "netlink, else sysfs)")
    g.add_argument("--providers", choices=["installed", "builtin"],
                   help="which providers count (default: installed if the config dir "
                   "exists, else builtin)")
    g.add_argument("--rdma-core", metavar="RELEASE",
                   help="rdma-core release of the provider tables "
                   "(e.g. 44, latest; default: the installed one, else latest)")
    g.add_argument("--static-providers", metavar="LIST",
                   help="answer as a statically linked libibverbs built with "
                   "RDMA_STATIC_PROVIDERS=LIST (e.g. mlx5, mlx4,mlx5, all; '' for no define)")
    g.add_argument("--fixture", metavar="NAME",
                   help="use a bundled fixture host (e.g. dgx-demo) instead of this machine")
    js = _Parser(add_help=False)
    js.add_argument("--json", action="store_true",
                    help="print JSON (schema in docs/cli.md) instead of text")
    # The options that several commands share beyond the listing ones: one parent each.
    proc = _Parser(add_help=False)
    proc.add_argument("--proc-path", metavar="DIR",
                      help="/proc root for /proc/driver/nvidia, the GPUs' UUIDs (default: the "
                      "proc beside the sysfs root: /proc for /sys, <root>/proc for a fixture)")
    conf = _Parser(add_help=False)
    conf.add_argument("--conf-root", metavar="DIR",
                      help="alternate root for NCCL's config files (NCCL_CONF_FILE or "
                      "~/.nccl.conf, then /etc/nccl.conf); read on the live host by default")

    p = _Parser(
        prog="sysverbs",
        description="RDMA device discovery exactly as libibverbs does it, in pure Python: "
        "rdma-core's device tools for machines and containers without rdma-core.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from ..ground import __version__

    p.add_argument("--version", action="version", version=f"sysverbs {__version__}")
    p.add_argument("--completion", choices=["bash"], action=_CompletionAction,
                   help="print the bash completion script: eval \"$(sysverbs --completion "
                   "bash)\"")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    if want("devices"):
        d = sub.add_parser("devices", parents=[common, js],
                           help="list devices and node GUIDs, byte-identical to ibv_devices",
                           description="List RDMA devices and their node GUIDs. stdout, stderr "
                           "and exit status are those of ibv_devices (exit 1 when the device "
                           "list cannot be read).")
        d.set_defaults(func=_devices)
    if want("devinfo"):
        i = sub.add_parser(
            "devinfo", parents=[common, js],
            help="ibv_devinfo: -l byte-identical; else what sysfs knows, in its layout",
            formatter_class=argparse.RawDescriptionHelpFormatter,
            description="Like ibv_devinfo. -l is byte-identical to ibv_devinfo -l. Without -l, "
            "the values sysfs knows are printed in ibv_devinfo's layout and those only a device "
            "query knows (vendor_id, vendor_part_id, hw_ver, MTUs, device capabilities...) say "
            "'(unavailable)'; the device is never opened.",
            epilog="exit status: 0; 255 when no device / -d not found / the list fails; 4 when "
            "-i names a port the device lacks; 1 (with ibv_devinfo's usage) for -i <= 0.",
        )
        i.set_defaults(list=False, ib_dev=None, ib_port=0, verbose=False)
        i.add_argument("-d", "--ib-dev", action=_DevAction, metavar="DEV",
                       help="use IB device DEV (default: all devices)")
        i.add_argument("-i", "--ib-port", action=_PortAction, metavar="PORT",
                       help="use port PORT of the device (default: all ports)")
        i.add_argument("-l", "--list", action=_ListAction, nargs=0,
                       help="print only the device names, exactly as ibv_devinfo -l")
        i.add_argument("-v", "--verbose", action=_VerboseAction, nargs=0,
                       help="print all attributes (device capabilities are unavailable)")
        i.set_defaults(func=_devinfo)
    if want("netdev"):
        n = sub.add_parser("netdev", parents=[common, js],
                           help="which network interface each port uses, as ibdev2netdev",
                           description="For each RDMA device port, its network interface and "
                           "whether it is up, in ibdev2netdev's format "
                           "('mlx5_0 port 1 ==> ib0 (Up)'): RoCE/iWARP ports by their GIDs' "
                           "netdevs (or the rxe/siw parent), InfiniBand ports by the IPoIB "
                           "interface whose address ends in the port GUID. All vendors.")
        n.set_defaults(func=_run_tool("netdev"))
    if want("doctor"):
        dr = sub.add_parser("doctor", parents=[common, js],
                            help="why each device is (not) usable, and what to do",
                            description="One line per RDMA device the kernel shows: usable or "
                            "not, the first reason and what to do. Exit 0 when there is a "
                            "device and every device is usable, else 1.")
        dr.add_argument("-v", "--verbose", action="store_true", help="list every reason")
        dr.add_argument("--no-open", action="store_true",
                        help="do not try to open the device nodes")
        dr.add_argument("--predict", action="store_true",
                        help="also say what libibverbs, librdmacm, NCCL, UCX and "
                        "libfabric would do here, and why (docs/diagnose.md)")
        dr.set_defaults(func=_run_tool("doctor"))
    if want("watch"):
        w = sub.add_parser("watch", parents=[common, js],
                           help="print RDMA devices as they appear and disappear (hotplug)",
                           description="Print RDMA devices (infiniband and infiniband_verbs) as "
                           "they appear and disappear, until Ctrl-C or --timeout. --json: one "
                           "JSON object per line (schema sysverbs.event/1).")
        w.add_argument("--timeout", type=float, metavar="SECONDS", help="stop after SECONDS")
        w.add_argument("--count", type=int, default=0, metavar="N", help="stop after N events")
        w.add_argument("--existing", action="store_true",
                       help="first report an add for every device present now")
        w.add_argument("--backend", choices=["auto", "udev", "poll"], default="auto",
                       help="udev events or polling sysfs (default: auto; other sysfs roots "
                       "are polled)")
        w.add_argument("--interval", type=seconds(POLL_INTERVAL), default=0.5,
                       metavar="SECONDS", help=f"poll interval (default 0.5; "
                       f"{POLL_INTERVAL[0]:g} to {POLL_INTERVAL[1]:g})")
        w.add_argument("--all-actions", action="store_true",
                       help="also report move (rename), change, bind... (udev only)")
        w.set_defaults(func=_run_tool("watch"))
    if want("snapshot"):
        s = sub.add_parser("snapshot", parents=[common, js],
                           help="record this host's RDMA and placement sysfs as a fixture "
                           "(umockdev format)",
                           description="Record the RDMA devices of this host's sysfs (or "
                           "--sysfs-path), their parents and netdevs, and what placement "
                           "reads (every PCI function, CPU and NUMA node, the network, block "
                           "and NVMe devices below PCI functions, the NVIDIA driver's GPU "
                           "files of /proc), in the umockdev fixture format sysverbs.testing "
                           "and umockdev read: topo, env and run give the same answers on it. "
                           "No device is opened; nothing outside sysfs and those /proc files "
                           "is read.")
        s.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
        which = s.add_mutually_exclusive_group()
        which.add_argument("--all-devices", action="store_true",
                           help="record every device below devices/ (small or fake trees)")
        which.add_argument("--rdma-only", action="store_true",
                           help="record the RDMA devices and their parents only (no GPUs, "
                           "CPUs or NUMA nodes: a smaller file, enough for the listing)")
        s.set_defaults(func=_run_tool("snapshot"))
    if want("topo"):
        from .topo import register as register_topo

        register_topo(sub, [common, js, proc])
    if want("nccl"):
        from .nccl import register as register_nccl

        register_nccl(sub, [common, js, conf])
    if want("env"):
        from .env import register as register_env

        register_env(sub, [common, js, proc, conf])
    if want("run"):
        from .run import register as register_run

        register_run(sub, [common, js, proc])
    if want("metrics"):
        from .metrics import register as register_metrics

        register_metrics(sub, [common, js, proc, conf])
    if want("nfd"):
        from .nfd import register as register_nfd

        register_nfd(sub, [common, js, proc, conf])
    if want("fixtures"):
        from .fixtures import register as register_fixtures

        register_fixtures(sub, [js])
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    # The options every command shares may come before the command: moved after it.
    words = hoist_options(sys.argv[1:] if argv is None else list(argv), COMMANDS)
    given = leading_options(words)
    if given:  # options, then no command
        what = f"{words[given]!r} is not a command" if given < len(words) else "no command"
        options = " ".join(words[:given])
        sys.stderr.write(f"sysverbs: error: {what} after {options}: sysverbs COMMAND "
                         f"{options} (COMMAND: {', '.join(COMMANDS)})\n")
        return EXIT_USAGE
    try:
        return _main(words)
    except KeyboardInterrupt:  # Ctrl-C anywhere: 130 (128 + SIGINT), one line
        name = " ".join(words[:2] if words[:2] == ["nccl", "check"] else words[:1])
        if name in COMMANDS or name == "nccl check":
            error(name, "interrupted")
        else:
            sys.stderr.write("sysverbs: error: interrupted\n")
        return 130


def _main(words: list[str]) -> int:
    # Names and files from sysfs are bytes, decoded with surrogateescape: print them
    # back as those bytes, as the C tools do, in any locale (a UTF-8 one makes the
    # streams strict, and a junk file would end in a UnicodeEncodeError).
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="surrogateescape")
    # The top-level parser has no option but -h: a command line that starts with a
    # command's name parses as with that command's parser alone (anything else, such as
    # --help, no command or an unknown one, gets the whole parser and its help).
    parser = _parser(words[0] if words and words[0] in COMMANDS else None)
    try:
        args, extra = parser.parse_known_args(words)
        if extra:  # the command's own parser says it, with its prog: "sysverbs env: error:"
            from .completion import command_words

            command_words(parser)[command_name(args)].error(
                f"unrecognized arguments: {' '.join(extra)}")
    except _Usage:
        from .devinfo import USAGE

        sys.stdout.write(USAGE.format(argv0="ibv_devinfo"))
        sys.stdout.flush()
        return 1
    try:
        rc: int = _dispatch(args)
    except UsageError as e:
        error(command_name(args), str(e.args[0]) if e.args else str(e))
        return EXIT_USAGE
    except BrokenPipeError:  # `sysverbs ... | head`: stop quietly, as the C tools do
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return 1
    except OSError as e:
        return fail(args, "os-error", describe_os_error(e))
    return rc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

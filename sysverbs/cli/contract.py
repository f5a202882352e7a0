"""What every ``sysverbs`` command does the same way (docs/cli.md, "The contract").

* exit status: :data:`EXIT_OK` (0), :data:`EXIT_FINDING` (1: a finding, nothing chosen,
  nothing to read), :data:`EXIT_USAGE` (2: the command line is wrong); ``devices`` and
  ``devinfo`` keep rdma-core's statuses and messages byte for byte (255 and 4 for
  ``devinfo``), 130 on Ctrl-C (SIGINT) in every command;
* one prefix for what goes wrong, on stderr: ``sysverbs <command>: error: ...`` (and
  ``sysverbs <command>: warning: ...`` when the command goes on), argparse's own;
* ``--json``: one document on stdout whose ``schema`` key names its JSON Schema, a file
  shipped in ``sysverbs/cli/schemas/``; when the command fails, the document has an
  ``error`` key (``kind``, ``message``) instead of its findings;
* the same answer everywhere for a root that is not a sysfs tree (exit 1) and for a
  host without RDMA devices (see :data:`POLICY`).

This module is imported by every command, ``sysverbs devices`` included: it imports
only what the standard library's start-up has already loaded.
"""

from __future__ import annotations

import os
import sys

from ..ground.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, Callable, Optional

__all__ = ["EXIT_OK", "EXIT_FINDING", "EXIT_USAGE", "POLICY", "Problem", "command_name",
           "schema_name", "error", "warning", "emit", "fail", "describe_os_error",
           "root_problem", "where", "check_usage", "listing_options", "sysfs_root",
           "REWRITE_INTERVAL", "POLL_INTERVAL", "seconds", "rate", "link_layer",
           "GLOBAL_OPTIONS", "leading_options", "hoist_options"]

EXIT_OK, EXIT_FINDING, EXIT_USAGE = 0, 1, 2

#: What each command does on a root without RDMA devices (it fails on a root that is not
#: a sysfs tree, except ``devices`` and ``devinfo``, which answer as rdma-core does):
#:
#: * ``rdma-core``: as ``ibv_devices`` / ``ibv_devinfo`` (their messages, their statuses);
#: * ``fails``: ``error: no RDMA device ...``, exit 1 (nothing to show or choose);
#: * ``reports``: the same line as a warning, then the command's own answer (doctor's
#:   fix, NCCL's view, the recording), exit 1;
#: * ``gpus``: the same warning; the GPU matrix still prints, ``run`` still places by the
#:   GPUs (exit 1 only when there is no GPU either, or ``--assign`` has no NIC to give);
#: * ``waits``: the same warning, then it goes on (exit 0): ``watch`` watches for devices
#:   to appear, ``metrics`` reports the host as it is (its no_kernel_support series is 1),
#:   ``nfd`` labels it (``rdma.usable=false``);
#: * ``none``: the command reads no host.
POLICY = {
    "devices": "rdma-core", "devinfo": "rdma-core", "netdev": "fails", "env": "fails",
    "doctor": "reports", "nccl check": "reports", "snapshot": "reports", "topo": "gpus",
    "run": "gpus",
    "watch": "waits", "metrics": "waits", "nfd": "waits",
    "fixtures": "none",
}


#: The bounds of every interval option, in seconds (docs/cli.md, "The contract"): a
#: rewrite (``metrics --interval``, ``nfd --interval``) from 0.1 s, below which the loop is
#: a busy loop, to one day; ``watch``'s poll from 0.01 s to one hour.
REWRITE_INTERVAL = (0.1, 86400.0)
POLL_INTERVAL = (0.01, 3600.0)


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return float("nan")


def seconds(bounds: tuple[float, float]) -> Callable[[str], float]:
    """An argparse ``type``: a number of seconds within ``bounds`` (NaN, infinities,
    negative numbers, 0 and anything past the bounds are a usage error, exit 2)."""
    low, high = bounds

    def parse(value: str) -> float:
        number = _number(value)
        if not low <= number <= high:
            import argparse

            raise argparse.ArgumentTypeError(
                f"{value!r}: not a number of seconds from {low:g} to {high:g}")
        return number

    return parse


def rate(value: str) -> float:
    """An argparse ``type``: a rate in Gb/s, a finite number >= 0."""
    number = _number(value)
    if not 0 <= number < float("inf"):
        import argparse

        raise argparse.ArgumentTypeError(f"{value!r}: not a rate in Gb/s (a number >= 0)")
    return number


#: What ``--link-layer`` takes, in any case: the kernel's and ibv_devinfo's names
#: (``InfiniBand``, ``Ethernet``) and the short ones (``IB``, ``RoCE``, ``eth``).
_LINK_LAYERS = {"infiniband": "InfiniBand", "ib": "IB", "ethernet": "Ethernet",
                "eth": "Ethernet", "roce": "RoCE"}


def link_layer(value: str) -> str:
    """An argparse ``type`` for ``--link-layer``: the choice's own spelling, whatever the
    case (argparse then checks it against ``choices``)."""
    return _LINK_LAYERS.get(value.strip().lower(), value)


#: The options every reading command takes, which may also come before the command
#: (``sysverbs --fixture X topo``): True for those that take a value.
GLOBAL_OPTIONS = {"--sysfs-path": True, "--dev-dir": True, "--config-dir": True,
                  "--source": True, "--providers": True, "--rdma-core": True,
                  "--static-providers": True, "--fixture": True, "--json": False}


def leading_options(words: list[str]) -> int:
    """How many of ``words`` are :data:`GLOBAL_OPTIONS` (and their values) before the
    first other word; 0 when an option before the command is not one of them."""
    i = 0
    while i < len(words) and words[i].startswith("-"):
        name, eq, _ = words[i].partition("=")
        if name not in GLOBAL_OPTIONS:
            return 0
        i += 2 if GLOBAL_OPTIONS[name] and not eq else 1
    return min(i, len(words))


def hoist_options(words: list[str], commands: tuple[str, ...]) -> list[str]:
    """``--fixture X topo ...`` -> ``topo --fixture X ...``: the :data:`GLOBAL_OPTIONS` that
    come before the command are moved after it (after ``nccl check``'s ``check``), where
    the command's parser reads them.  Anything else before the command is left as it is
    (``--version``, ``--help``, an unknown option: the top parser answers)."""
    i = leading_options(words)
    if i == 0 or i >= len(words) or words[i] not in commands:
        return words
    at = i + 1
    if words[i] == "nccl" and words[at:at + 1] == ["check"]:
        at += 1
    return words[i:at] + words[:i] + words[at:]


class Problem:
    """Why a root cannot be (fully) answered for: ``kind`` ``"not-sysfs"`` or
    ``"no-rdma"``, and the message.  (A plain class: ``typing`` is not imported by
    ``sysverbs devices``.)"""

    __slots__ = ("kind", "message")

    def __init__(self, kind: str, message: str) -> None:
        self.kind, self.message = kind, message


def command_name(args: argparse.Namespace) -> str:
    """``devices``, ..., ``nccl check``: the command as its messages name it."""
    name = str(args.command)
    return f"{name} {args.nccl_command}" if name == "nccl" else name


def schema_name(args: argparse.Namespace) -> str:
    """The ``schema`` key of the command's ``--json`` document."""
    name = command_name(args)
    if name == "devinfo":
        return "sysverbs.devinfo-list/1" if args.list else "sysverbs.devinfo/1"
    if name == "topo" and args.assign:
        return "sysverbs.assign/1"
    return {"watch": "sysverbs.event/1", "nccl check": "sysverbs.nccl-check/1"}.get(
        name, f"sysverbs.{name}/1")


def _write(text: str) -> None:
    sys.stdout.flush()
    sys.stderr.write(text)
    sys.stderr.flush()


def error(name: str, message: str) -> None:
    """``sysverbs <name>: error: <message>`` on stderr."""
    _write(f"sysverbs {name}: error: {message}\n")


def warning(name: str, message: str) -> None:
    """``sysverbs <name>: warning: <message>`` on stderr."""
    _write(f"sysverbs {name}: warning: {message}\n")


def emit(doc: Any, one_line: bool = False) -> None:
    """A ``--json`` document on stdout (``one_line``: ``watch``'s JSON lines)."""
    import json

    sys.stdout.write((json.dumps(doc, sort_keys=True) if one_line
                      else json.dumps(doc, indent=2)) + "\n")
    sys.stdout.flush()


def fail(args: argparse.Namespace, kind: str, message: str,
         status: int = EXIT_FINDING) -> int:
    """The command fails: the error line, and with ``--json`` a document with ``error``."""
    error(command_name(args), message)
    if getattr(args, "json", False):
        emit({"schema": schema_name(args), "error": {"kind": kind, "message": message}},
             one_line=args.command == "watch")
    return status


def describe_os_error(err: OSError) -> str:
    """``<file>: <strerror>``, never Python's ``[Errno N] ...``."""
    text = err.strerror or (os.strerror(err.errno) if err.errno else str(err))
    if err.filename is not None:
        return f"{os.fsdecode(err.filename)}: {text}"
    return text


def sysfs_root(opts: dict[str, Any]) -> str:
    """The sysfs root the listing options name (``$SYSFS_PATH``, else ``/sys``: the rule
    of :class:`~sysverbs.ground.hostroot.HostRoot`)."""
    from ..ground.hostroot import HostRoot

    return HostRoot.resolve(opts.get("sysfs_path")).sysfs_path or "/"


def where(args: argparse.Namespace, root: str) -> str:
    """How messages name the root: ``this host``, ``fixture NAME`` or ``the tree R``,
    the ``describe()`` of the command's HostRoot (:func:`listing_options`)."""
    from ..ground.hostroot import HostRoot

    host = getattr(args, "host_root", None)
    if not isinstance(host, HostRoot):  # not through listing_options()
        host = HostRoot.resolve(root, recorded=args.fixture is not None, name=args.fixture)
    return host.describe()


def root_problem(root: str) -> Optional[Problem]:
    """``not-sysfs`` when ``root`` has no ``devices/``; ``no-rdma`` when it has no RDMA
    device (``class/infiniband`` missing or empty); else None."""
    from ..ground.sysfs_read import check_sysfs_root

    try:
        check_sysfs_root(root)
    except FileNotFoundError as e:
        return Problem("not-sysfs", describe_os_error(e))
    broot = os.fsencode(root)
    ib = os.path.join(broot, b"class", b"infiniband")
    try:
        names = [n for n in os.listdir(ib) if not n.startswith(b".")]
    except FileNotFoundError:
        return Problem("no-rdma", f"no RDMA device: {os.fsdecode(ib)} does not exist (no "
                       "RDMA driver is loaded, or this is not the host's sysfs)")
    except OSError as e:
        return Problem("no-rdma", f"no RDMA device: {describe_os_error(e)}")
    if not names:
        return Problem("no-rdma", f"no RDMA device: {os.fsdecode(ib)} is empty (the RDMA "
                       "drivers found no adapter)")
    return None


def check_usage(args: argparse.Namespace) -> None:
    """The option combinations no command accepts (:class:`UsageError`, exit 2)."""
    if getattr(args, "fixture", None) is not None:
        given = [o for o, v in (("--sysfs-path", args.sysfs_path), ("--dev-dir", args.dev_dir),
                                ("--proc-path", getattr(args, "proc_path", None)))
                 if v is not None]
        if given:
            raise UsageError(f"--fixture names a whole host: it excludes {given[0]}")


def listing_options(args: argparse.Namespace) -> dict[str, Any]:
    """The listing options of the command line (``--fixture``: the bundled host's
    cached tree, with the builtin providers and the sysfs source).  Sets
    ``args.host_root``, the :class:`~sysverbs.ground.hostroot.HostRoot` the command
    reads (a fixture's is recorded and named)."""
    from ..engine.api import OPTION_NAMES
    from ..ground.hostroot import HostRoot

    opts: dict[str, Any] = {name: getattr(args, name) for name in OPTION_NAMES}
    if args.fixture is None:
        args.host_root = HostRoot.resolve(opts["sysfs_path"], opts["dev_dir"],
                                          getattr(args, "proc_path", None),
                                          opts["config_dir"])
        return opts
    from ..ground.errors import UnknownFixtureError
    from ..testing.cache import fixture_tree

    try:
        host = fixture_tree(args.fixture)
    except UnknownFixtureError as e:
        raise UsageError(f"--fixture {args.fixture!r}: no such bundled host (sysverbs "
                         f"fixtures lists them){_close(args.fixture)}") from e
    args.host_root = host.host_root
    opts["sysfs_path"] = host.sysfs
    opts["dev_dir"] = host.dev
    if args.providers is None and args.static_providers is None:
        opts["providers"] = "builtin"
    if args.source == "auto":
        # A fixture is a sysfs tree: on a host with RDMA netlink, "auto" would list
        # the real kernel's devices (as libibverbs does with SYSFS_PATH set).
        opts["source"] = "sysfs"
    return opts


def _close(name: str) -> str:
    """``: did you mean X?`` for the fixture names close to ``name``."""
    import difflib

    from ..testing.host import fixture_names

    close = difflib.get_close_matches(name, fixture_names(), n=3, cutoff=0.5)
    return f"; did you mean {' or '.join(close)}?" if close else ""

"""``sysverbs metrics``: this host's RDMA facts as Prometheus metrics (docs/fleet.md).

    sysverbs metrics                          # the exposition once, on stdout
    sysverbs metrics --listen 127.0.0.1:9947  # serve /metrics there until stopped
    sysverbs metrics --textfile DIR [--interval 60]   # DIR/sysverbs.prom for node_exporter
    sysverbs metrics --json                   # the same series as a JSON document
    sysverbs metrics --rules                  # the alert and recording rules shipped

Only :func:`register` runs when the parser is built; the snapshot
(:mod:`sysverbs.fleet.facts`) and prometheus_client are imported when the command runs.
"""

from __future__ import annotations

import argparse
import sys

from .contract import REWRITE_INTERVAL, seconds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Callable, Optional

    from ..fleet.facts import HostFacts
    from ..model import HostModel

__all__ = ["register", "run", "listen_address", "max_age"]


def listen_address(value: str) -> tuple[str, int]:
    """``--listen ADDR:PORT`` (``[::1]:9947`` for IPv6): the address is required, so that
    nothing listens on every interface unless asked (``0.0.0.0:PORT``)."""
    host, sep, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host:
        raise argparse.ArgumentTypeError(
            f"{value!r}: not ADDR:PORT (the address is required: 127.0.0.1:9947 for this "
            "host only, 0.0.0.0:9947 for every interface)")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{value!r}: the port must be a number from 1 to "
                                         "65535")
    return host, int(port)


def max_age(value: str) -> float:
    """``--max-age SECONDS``: 0 or more, finite."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r}: not a number of seconds, 0 or more")
    return seconds


class _RulesAction(argparse.Action):
    """``--rules``: print the shipped alert rules and exit, whatever else is given."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        from ..fleet.metrics import rules_path

        path = rules_path()
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as e:
            parser.exit(1, f"sysverbs metrics: error: the alert rules are not installed: "
                        f"{path}: {e.strerror}\n")
        sys.stdout.write(text)
        sys.stdout.flush()
        parser.exit(0)


def register(subparsers: argparse._SubParsersAction[Any],
             parents: Sequence[argparse.ArgumentParser]) -> None:
    """Add ``metrics`` to the ``sysverbs`` command's subparsers."""
    p = subparsers.add_parser(
        "metrics", parents=list(parents),
        help="this host's RDMA facts as Prometheus metrics (print, serve, textfile)",
        description="This host's RDMA devices as Prometheus gauges: listed, usable and every "
        "reason (as sysverbs doctor judges them with this process's credentials), ports, link "
        "layers, netdevs and GIDs, rdma_cm, RLIMIT_MEMLOCK, the GPU/NIC PCIe classes and "
        "assignment of sysverbs topo, the ports NCCL would use. No counters or port states: "
        "node_exporter has those, under the same device and port labels. Without --listen or "
        "--textfile the text exposition is printed once.",
        epilog="exit status: 0; 1 when a collector failed or a device could not be read (the "
        "rest is still printed or written), the root is not a sysfs tree, the address cannot "
        "be listened on (or the server stops on an error) or DIR written, or "
        "prometheus_client is missing (pip install 'sysverbs[metrics]'); 2 for a usage "
        "error; 130 on Ctrl-C (SIGTERM stops with 0).")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--listen", type=listen_address, metavar="ADDR:PORT",
                     help="serve /metrics on ADDR:PORT (exactly there; 0.0.0.0:PORT for "
                     "every interface) until stopped; concurrent scrapes share one snapshot, "
                     "idle clients are dropped (docs/fleet.md: the exporter's limits)")
    out.add_argument("--textfile", metavar="DIR",
                     help="write DIR/sysverbs.prom for node_exporter's textfile collector "
                     "(atomically: a temporary file in DIR, then a rename)")
    p.add_argument("--interval", type=seconds(REWRITE_INTERVAL), metavar="SECONDS",
                   help="with --textfile: write it again every SECONDS until stopped "
                   f"({REWRITE_INTERVAL[0]:g} to {REWRITE_INTERVAL[1]:g}; without it: once)")
    p.add_argument("--max-age", type=max_age, metavar="SECONDS",
                   help="with --listen: answer a scrape that comes less than SECONDS after "
                   "the last snapshot was taken with that snapshot's page (default 5; 0: a "
                   "fresh snapshot for each scrape, those that come together still share one)")
    p.add_argument("--no-open", action="store_true",
                   help="do not open the device nodes (as doctor --no-open): in a pod that "
                   "was not given the devices, the device cgroup refuses every open")
    p.add_argument("--no-gpu-links", action="store_true",
                   help="do not compute the GPU/NIC PCIe classes (sysverbs_gpu_nic_link, "
                   "GPUs x RDMA devices series, written only with --detail)")
    p.add_argument("--detail", action="store_true",
                   help="write every series, constant ones included: each device and host "
                   "reason 0 or 1 (by default a problem is a series only while found), each "
                   "GID type of each port, sysverbs_gpu_nic_link for each GPU and device")
    p.add_argument("--rules", action=_RulesAction, nargs=0,
                   help="print the Prometheus alert and recording rules shipped with sysverbs "
                   "and exit")
    p.set_defaults(func=run)


def _problems(facts: HostFacts) -> list[str]:
    """What the snapshot could not read: failed collectors, unreadable devices."""
    out = [f"the {c.name} collector failed ({c.error}): sysverbs_collector_success"
           f"{{collector=\"{c.name}\"}} is 0, the other series are reported"
           for c in facts.collectors if not c.success]
    out += [f"{d.name}: its files could not be read ({d.error}); its other series are "
            "reported" for d in facts.devices if d.error]
    return out


def _json_value(value: float) -> Any:
    import math

    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return int(value) if value.is_integer() and abs(value) < 2 ** 53 else value


def _document(facts: HostFacts, detail: bool) -> dict[str, Any]:
    from ..fleet.metrics import families

    return {"schema": "sysverbs.metrics/1", "families": [
        {"name": f.name, "type": f.kind, "help": f.help,
         "samples": [{"labels": dict(pairs), "value": _json_value(value)}
                     for pairs, value in f.samples]}
        for f in families(facts, detail)]}


def _until_stopped(loop: Callable[[], None]) -> int:
    """Run ``loop`` (which never returns) until Ctrl-C (130) or SIGTERM (0)."""
    import signal

    def stop(signum: int, frame: Any) -> None:  # SIGTERM: stop, with exit status 0
        raise SystemExit(0)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        loop()
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0  # pragma: no cover (loop never returns)


def run(args: argparse.Namespace, opts: dict[str, Any]) -> int:
    """``sysverbs metrics``: ``opts`` are the listing options of the command line."""
    from ..fleet.facts import collect_facts
    from ..fleet.metrics import missing_client
    from ..ground.errors import UsageError
    from .contract import emit, error, warning
    from .hostmodel import fresh_model

    if args.interval is not None and args.textfile is None:
        raise UsageError("--interval needs --textfile (--listen takes a snapshot per scrape)")
    if args.max_age is not None and args.listen is None:
        raise UsageError("--max-age needs --listen")
    if args.json and (args.listen is not None or args.textfile is not None):
        raise UsageError("--json prints the series once: it excludes --listen and --textfile")
    missing = None if args.json else missing_client()
    if missing is not None:
        error("metrics", missing)
        return 1
    proc = args.host_root.proc_path

    def collect_with(model: HostModel) -> HostFacts:  # each file read once
        with model.reading():
            return collect_facts(gpu_links=not args.no_gpu_links, proc_path=proc,
                                 recorded=args.fixture is not None,
                                 probe_open=not args.no_open, conf_root=args.conf_root,
                                 model=model, **opts)

    if args.listen is not None or args.textfile is not None:
        from ..fleet.steady import Steady

        # a scrape asks again what the last snapshot read; a new one when any changed
        steady = Steady(collect_with, lambda: fresh_model(args))
        if args.listen is not None:
            return _serve(args, steady)
        return _textfile(args, steady)
    facts = collect_with(fresh_model(args))
    problems = _problems(facts)
    for text in problems:
        warning("metrics", text)
    if args.json:
        emit(_document(facts, args.detail))
    else:
        from ..fleet.metrics import render

        data = render(facts, args.detail)
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    return 1 if problems else 0


class _Reporter:
    """Prints a snapshot's problems when they differ from the last snapshot's (a server
    or a timer would otherwise say the same thing at every scrape)."""

    def __init__(self) -> None:
        self.last: list[str] = []

    def __call__(self, facts: HostFacts) -> None:
        from .contract import warning

        problems = _problems(facts)
        if problems != self.last:
            for text in problems:
                warning("metrics", text)
        self.last = problems


def _serve(args: argparse.Namespace, collect: Callable[[], HostFacts]) -> int:
    from ..fleet.metrics import serve
    from ..fleet.serve import MAX_AGE
    from .contract import describe_os_error, fail, warning

    addr, port = args.listen
    age = MAX_AGE if args.max_age is None else args.max_age
    try:
        server = serve(addr, port, collect, _Reporter(), max_age=age,
                       on_error=lambda text: warning("metrics", text), detail=args.detail)
    except OSError as e:
        return fail(args, "os-error", f"cannot listen on {addr}:{port}: {describe_os_error(e)}")
    status = _until_stopped(server.wait)
    if server.error is None:
        return status
    stopped = server.error
    return fail(args, "os-error", f"the server stopped: {type(stopped).__name__}: {stopped}")


def _textfile(args: argparse.Namespace, collect: Callable[[], HostFacts]) -> int:
    import os
    import time

    from ..fleet.metrics import Pages, write_textfile
    from .contract import describe_os_error, fail, warning

    directory = args.textfile
    if not os.path.isdir(directory):
        return fail(args, "os-error", f"--textfile {directory}: not a directory")
    report = _Reporter()
    pages = Pages(args.detail)  # an unchanged host's file: only its durations written again

    def once() -> int:
        facts = collect()
        report(facts)
        write_textfile(directory, facts, pages=pages)
        return 1 if report.last else 0

    if args.interval is None:
        try:
            return once()
        except OSError as e:
            return fail(args, "os-error", describe_os_error(e))

    def forever() -> None:
        while True:
            start = time.monotonic()
            try:
                once()
            except OSError as e:  # a full disk: say it each time, try again next time
                warning("metrics", describe_os_error(e))
            time.sleep(max(0.0, args.interval - (time.monotonic() - start)))

    return _until_stopped(forever)

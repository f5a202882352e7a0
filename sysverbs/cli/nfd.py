"""``sysverbs nfd``: this host's RDMA facts as node labels, a feature file of Node Feature
Discovery's ``local`` source (docs/fleet.md).

    sysverbs nfd                                   # print the file
    sysverbs nfd --features-dir DIR --interval S   # rewrite DIR/sysverbs every S seconds
    sysverbs nfd --features-dir DIR                # write it once (a timer's job)

The file is :func:`sysverbs.fleet.nfd.feature_file` of one
:func:`sysverbs.fleet.facts.collect_facts` snapshot; it is written as ``DIR/.sysverbs``
and renamed to ``DIR/sysverbs``.  As ``metrics --textfile``, it is written once unless
``--interval`` is given (``--once``: once even then).  Its lines expire 3 x ``--interval``
after the write (10 minutes without ``--interval``), so the labels of a writer that
stopped go away.
"""

from __future__ import annotations

import errno
import os
import sys
import time

from .contract import REWRITE_INTERVAL, describe_os_error, emit, seconds, warning, where

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any, Optional

    from ..fleet.nfd import FeatureFile

__all__ = ["register", "run"]

#: How long a file written without ``--interval`` stays valid.
ONCE_EXPIRY = 600.0


def register(subparsers: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    """Add the ``nfd`` command to the ``sysverbs`` parser."""
    n = subparsers.add_parser(
        "nfd", parents=list(parents),
        help="node labels for Kubernetes: a Node Feature Discovery features.d file",
        description="This host's RDMA facts (usable devices, link layers, problems, the "
        "GPU/NIC distance, NCCL's transport) as a feature file of Node Feature Discovery's "
        "local source: labels sysverbs.feature.node.kubernetes.io/..., per-device details "
        "as features only (# +no-label), an expiry time of 3 x --interval. Without "
        "--features-dir the file is printed.",
        epilog="exit status: 0 the file written (or printed), also for a host without RDMA "
        "devices (its labels say so); 1 a part of the snapshot failed (the file is still "
        "written without its labels), or the file cannot be written; 2 for a usage error; "
        "130 on Ctrl-C. With --features-dir and --interval (and no --once) it runs until "
        "stopped (SIGTERM: exit 0), with a warning for each write that fails.")
    n.add_argument("--features-dir", metavar="DIR",
                   help="write DIR/sysverbs (e.g. /etc/kubernetes/node-feature-discovery/"
                   "features.d); default: print the file")
    n.add_argument("--interval", type=seconds(REWRITE_INTERVAL), metavar="SECONDS",
                   help="with --features-dir: rewrite the file every SECONDS until stopped "
                   f"({REWRITE_INTERVAL[0]:g} to {REWRITE_INTERVAL[1]:g}; NFD re-reads it "
                   "every 60); its lines expire after 3 x SECONDS (default: 10 minutes)")
    n.add_argument("--once", action="store_true",
                   help="write the file once and exit, also with --interval (the default "
                   "without --interval)")
    n.add_argument("--no-open", action="store_true",
                   help="do not open the device nodes (as doctor --no-open): in a pod that "
                   "was not given the devices, the device cgroup refuses every open")
    n.set_defaults(func=run)


def _snapshot(args: argparse.Namespace, opts: dict[str, Any], expires_in: float) -> Any:
    from ..fleet.facts import collect_facts
    from ..fleet.nfd import feature_file
    from ..ground import __version__
    from .hostmodel import fresh_model

    proc = args.host_root.proc_path
    model = fresh_model(args)  # one host model per snapshot, each file read once
    with model.reading():
        facts = collect_facts(recorded=args.fixture is not None, probe_open=not args.no_open,
                              proc_path=proc, conf_root=args.conf_root, model=model, **opts)
    ff = feature_file(facts, expires_in=expires_in,
                      header=f"written by sysverbs {__version__} (sysverbs nfd) for "
                      f"{where(args, args.host_root.sysfs_path)}")
    failed = [(c.name, c.error) for c in facts.collectors if not c.success]
    return ff, failed


def _document(ff: FeatureFile, path: Optional[str]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "sysverbs.nfd/1", "path": path, "expiry_time": ff.expiry_time,
        "labels": dict(ff.labels()),
        "features": {f.key: f.value for f in ff.features if not f.label},
        "dropped": [{"line": line, "reason": why} for line, why in ff.dropped]}
    if path is None:
        doc["text"] = ff.text()
    return doc


def _write_once(args: argparse.Namespace, opts: dict[str, Any], expires_in: float,
                said: set[str], one_line: bool) -> int:
    """One snapshot, written (or printed); warnings not already in ``said``."""
    from ..fleet.nfd import write_feature_file

    ff, failed = _snapshot(args, opts, expires_in)
    messages = [f"the {name} part failed ({why}): its labels are left out"
                for name, why in failed]
    messages += [f"left out {line}: {why}" for line, why in ff.dropped]
    for m in messages:
        if m not in said:
            warning("nfd", m)
    said.clear()
    said.update(messages)
    path: Optional[str] = None
    if args.features_dir is not None:
        if not os.path.isdir(args.features_dir):
            raise OSError(errno.ENOTDIR, "not a directory", f"--features-dir {args.features_dir}")
        path = write_feature_file(args.features_dir, ff.text())
    if args.json:
        emit(_document(ff, path), one_line=one_line)
    elif path is None:
        sys.stdout.write(ff.text())
        sys.stdout.flush()
    return 1 if failed else 0


def run(args: argparse.Namespace, opts: dict[str, Any]) -> int:
    interval = args.interval
    loop = args.features_dir is not None and interval is not None and not args.once
    expires_in = ONCE_EXPIRY if interval is None else 3 * interval
    said: set[str] = set()
    if not loop:
        try:
            return _write_once(args, opts, expires_in, said, one_line=False)
        except OSError as e:
            from .contract import fail

            return fail(args, "os-error", describe_os_error(e))
    assert interval is not None
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        while True:
            start = time.monotonic()
            try:
                _write_once(args, opts, expires_in, said, one_line=True)
            except OSError as e:  # a full disk: say it each time, try again next time
                warning("nfd", describe_os_error(e))
            time.sleep(max(0.0, interval - (time.monotonic() - start)))
    except KeyboardInterrupt:
        return 130

"""``sysverbs netdev``, ``doctor``, ``watch`` and ``snapshot`` (see docs/cli.md).

Each function takes the parsed arguments and the resolved options of
``sysverbs.cli``'s ``_options`` and returns the exit status.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Optional

from ..ground.errors import UsageError
from .hostmodel import model_of, read_once

__all__ = ["netdev", "doctor", "watch", "snapshot", "netdev_links"]


def _natural(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def netdev_links(sysfs_path: str, dev_dir: str) -> list[dict[str, Any]]:
    """One entry per (RDMA device, port, netdev), in ``ibdev2netdev``'s order: devices
    by name, ports by number, netdevs as :func:`sysverbs.devices.location.device_location`
    finds them."""
    from ..devices.location import LocationScan, device_location

    ib_dir = os.path.join(sysfs_path, "class", "infiniband")
    try:
        names = sorted(n for n in os.listdir(ib_dir) if not n.startswith("."))
    except OSError:
        return []
    links: list[dict[str, Any]] = []
    with LocationScan():  # the char-device directories read once, not once per device
        topos = [device_location(n, sysfs_path=sysfs_path, dev_dir=dev_dir) for n in names]
    for name, topo in zip(names, topos):
        ports = sorted({n.port for n in topo.netdevs})
        for port in ports:
            for nd in topo.netdevs:
                if nd.port != port:
                    continue
                links.append({"device": name, "port": port, "netdev": nd.name,
                              "state": "Up" if nd.operstate == "up" else "Down",
                              "operstate": nd.operstate, "via": nd.via})
    return links


def netdev(args: Any, opts: dict[str, Any]) -> int:
    from ..engine.api import resolve

    o = resolve(**opts)
    links = netdev_links(o.sysfs_path, o.dev_dir)
    if args.json:
        sys.stdout.write(json.dumps({"schema": "sysverbs.netdev/1", "links": links},
                                    indent=2) + "\n")
        return 0
    for link in links:
        sys.stdout.write(f"{link['device']} port {link['port']} ==> {link['netdev']} "
                         f"({link['state']})\n")
    return 0


def _line(d: Any) -> str:
    """One line per device: its state (and a recording's node), then the first error
    (or warning) and its fix."""
    head: str = d.summary()
    if not d.reasons:
        return head
    first = d.reasons[0]
    more = len(d.reasons) - 1
    tail = f" (+{more} more; --verbose lists them)" if more else ""
    return f"{head}: {first.severity}: {first.message} [{first.code}]{tail}"


def _pcie_links(args: Any) -> tuple[list[Any], list[Any]]:
    """The degraded PCIe links of the host (``pcie_link_degraded``), and its NICs' ACS
    redirects and translated DMA (``acs_redirect``, ``iommu_translated``): placement's
    findings beside diagnose()'s host reasons, from the invocation's model."""
    from ..placement import acs_redirects, degraded_links, translated_nics

    host = model_of(args).placement
    return list(degraded_links(host)), [*acs_redirects(host), *translated_nics(host)]


def _print_predictions(found: Any, host: Any, findings: Any, opts: dict[str, Any],
                       as_json: bool, doc: dict[str, Any], live: bool) -> None:
    """``doctor --predict``: each library's predicted outcome (docs/diagnose.md).
    ``live``: the tree is this machine's, so this namespace's addresses count."""
    from ..rank.nccl import predict_ib
    from ..rank.netplugin import net_transport, uses_ib
    from ..rank.predict import NcclView, predict
    from ..rank.whynot import device_views

    sel = predict_ib(os.environ, **opts)
    ports = tuple(dict.fromkeys(f"{d.device}:{d.port}" for d in sel.devices))
    views = device_views(host, list(found))
    efa = any(v.usable and v.provider == "efa" for v in views)
    transport = net_transport(os.environ, ib_ports=uses_ib(len(ports), sel.disabled,
                                                             sel.failure), efa_devices=efa)
    why = ("NCCL_IB_DISABLE" if sel.disabled else sel.failure
           or ("" if ports else "NCCL's IB transport finds no usable port"))
    codes = [r.code for r in found.host] + [c for c, _ in findings.reasons()]
    addresses = None
    if live and not host.recorded:
        from ..rank.rtnetlink import interface_addresses

        addresses = interface_addresses()
    preds = predict(views, codes, nccl=NcclView(transport, ports, why), gdr=findings.gdr,
                    pairs=findings.pairs, addr=findings.addr, environ=os.environ,
                    addresses=addresses)
    if as_json:
        doc["predict"] = [p.as_dict() for p in preds]
        return
    for p in preds:
        sys.stdout.write(f"{p.library}: {p.outcome} ({p.reason})\n")
        lines = (p.details if p.library in ("ucx", "libfabric-verbs")
                 else [", ".join(p.details)] * bool(p.details))
        for line in lines:
            sys.stdout.write(f"  {line}\n")


@read_once
def doctor(args: Any, opts: dict[str, Any]) -> int:
    from dataclasses import asdict

    from ..devices.diagnosis import Reason, diagnose
    from ..rank.whynot import read_findings

    # --fixture: the tree is a recording, its /dev nodes are stand-ins (a --dev-dir the
    # user gives is not: a plain file there is the error it is).
    recorded = getattr(args, "fixture", None) is not None
    found = diagnose(probe_open=not args.no_open, recorded=recorded, **opts)
    model = model_of(args)
    placed = model.placement
    links, peers = _pcie_links(args)
    findings = read_findings(placed, os.environ, live=model.root.live)
    host = [*found.host, *(Reason("pcie_link_degraded", d.message(), "warning")
                           for d in links),
            *(Reason(p.code, p.message(), "warning") for p in peers),
            *(Reason(code, message, "warning") for code, message in findings.reasons())]
    # an SMI device is no verbs device: neither usable nor a problem
    verbs = [d for d in found if not d.management]
    ok = bool(verbs) and all(d.usable for d in verbs)
    if args.json:
        doc = {"schema": "sysverbs.doctor/1", "usable": ok,
               "host": [asdict(r) for r in host],
               "pcie_links": [d.as_dict() for d in links],
               "pcie_peers": [d.as_dict() for d in peers],
               "devices": [asdict(d) for d in found],
               "gdr": {"state": findings.gdr.state, "reason": findings.gdr.reason,
                       "pairs": [p.as_dict() for p in findings.pairs]},
               "address_gids": [f.as_dict() for f in findings.addr]}
        if args.predict:
            _print_predictions(found, placed, findings, opts, True, doc, model.root.live)
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif args.verbose:
        sys.stdout.write(found.report() + "\n")
        for r in host[len(found.host):]:
            sys.stdout.write(f"host: {r}\n")
    else:
        for r in host:
            sys.stdout.write(f"host: {r}\n")
        for d in found:
            sys.stdout.write(_line(d) + "\n")
        if not found and not found.host:  # a host reason already says why, with the fix
            sys.stdout.write("no RDMA device\n")
    if args.predict and not args.json:
        sys.stdout.write("predicted:\n")
        _print_predictions(found, placed, findings, opts, False, {}, model.root.live)
    return 0 if ok else 1


def _event_json(e: Any) -> str:
    return json.dumps({"schema": "sysverbs.event/1", "action": e.action,
                       "subsystem": e.subsystem, "name": e.name, "ibdev": e.ibdev,
                       "sys_path": e.sys_path, "backend": e.backend, "seqnum": e.seqnum,
                       "properties": dict(e.properties)}, sort_keys=True)


def watch(args: Any, opts: dict[str, Any]) -> int:
    from ..devices.monitor import monitor

    if args.timeout is not None and not args.timeout >= 0:  # NaN too
        raise UsageError("--timeout must not be negative")
    if args.interval is not None and not args.interval > 0:
        raise UsageError("--interval must be positive")
    mon = monitor(timeout=args.timeout, sysfs_path=opts["sysfs_path"], backend=args.backend,
                  actions=None if args.all_actions else ("add", "remove"),
                  existing=args.existing, poll_interval=args.interval)
    out = sys.stdout
    if not args.json:
        out.write(f"# watching RDMA devices ({mon.backend}: {mon.reason}); Ctrl-C to stop\n")
        out.flush()
    try:
        for e in mon:
            if args.json:
                out.write(_event_json(e) + "\n")
            else:
                extra = f" (ibdev {e.ibdev})" if e.subsystem != "infiniband" and e.ibdev else ""
                out.write(f"{e.action} {e.subsystem} {e.name}{extra}\n")
            out.flush()
            if args.count and args.count > 0:
                args.count -= 1
                if args.count == 0:
                    break
    except KeyboardInterrupt:
        return 130
    finally:
        mon.stop()
    return 0


def snapshot(args: Any, opts: dict[str, Any]) -> int:
    """Write the recording (stdout, or ``-o FILE``; with ``--json`` a document holding
    it, or naming the file).  Exit 1 when the root has no RDMA device (the recording
    is still written: an empty host is a host too)."""
    from ..engine.api import resolve
    from ..testing import umockdev as recording
    from ..testing.recorder import record_host

    o = resolve(**opts)
    dev_root: Optional[str] = None  # record_host's guess: /dev for /sys, else beside it
    if opts["dev_dir"] is not None:
        dev_root = os.path.dirname(o.dev_dir.rstrip("/")) or "/"
    which = "all" if args.all_devices else "rdma" if args.rdma_only else "placement"
    rec = record_host(o.sysfs_path, dev_root=dev_root, devices=which)
    text = recording.dumps(rec)
    to_file = args.output not in (None, "-")
    if to_file:
        with open(args.output, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
    devices = sorted({e.path.rsplit("/", 1)[-1] for e in rec
                      if e.path.rsplit("/", 2)[-2:-1] == ["infiniband"]})
    if args.json:
        doc: dict[str, Any] = {"schema": "sysverbs.snapshot/1", "records": len(rec),
                               "rdma_devices": devices,
                               "output": args.output if to_file else None}
        if not to_file:
            doc["recording"] = text
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif not to_file:
        sys.stdout.write(text)
    sys.stdout.flush()
    if to_file:
        n = len(rec)
        sys.stderr.write(f"sysverbs snapshot: wrote {n} record{'s' if n != 1 else ''} "
                         f"({len(devices)} RDMA device{'s' if len(devices) != 1 else ''}) "
                         f"to {args.output}\n")
    return 1 if args.root_problem is not None else 0

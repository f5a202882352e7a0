#!/usr/bin/env python3
"""Benchmark one scrape of ``sysverbs metrics`` in-process: the snapshot
(:func:`sysverbs.fleet.facts.collect_facts`) and the text exposition
(:func:`sysverbs.fleet.metrics.render`), which is what the ``--listen`` server does at
every scrape, on the 8-GPU/18-NIC host (gpu-dgx-b200), beside node_exporter's infiniband
collector on the same tree and the floor (the reads alone), and the steady-state scrape
of the long-running exporter (:class:`sysverbs.fleet.steady.Steady`: the last snapshot's
inputs asked again, the snapshot reused when none changed, and its page
(:class:`sysverbs.fleet.metrics.Pages`): the last one with the durations family written
again); and the number of series a node exports, for every bundled fixture.

    .venv/bin/python benchmarks/bench_metrics.py [--samples 51] [--fixture gpu-dgx-b200]
    .venv/bin/python benchmarks/bench_metrics.py --table    # the series table only

The fixture is materialized once into a temporary directory and read as ``--fixture``
reads it (a recording: no device node is opened); one scrape is made first and not
counted (imports, the process-wide device list).  Each round: collect, then render;
the table gives the medians of both, of their sum and of each collector.  Target: a
scrape under 50 ms.  Nothing asserts wall-clock time; the table says ``met`` or ``NOT
MET``.  In the same run, on the same tree: node_exporter's infiniband collector alone
(``--collector.disable-defaults --collector.infiniband --path.sysfs``), its own
``node_scrape_collector_duration_seconds`` and the whole HTTP scrape, and the floor:
every file one sysverbs snapshot opens (seen by an audit hook), read again with nothing
else.  Issue 45's target: a sysverbs scrape at most 2x node_exporter's collector, judged
on the steady scrape (what ``metrics --listen`` does at every scrape of a host that did
not change, node_exporter's whole job; the cold scrape, a new snapshot, is printed beside
it).  The
series counts are those of every bundled fixture, by default and with ``--detail``
(``--table`` prints them as docs/fleet.md's table).  Writes
``benchmarks/metrics-results.json`` (``--json``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))
from fixturegen.counters import PMA  # noqa: E402  (the fixtures' port counters)

TARGET_MS = 50.0
#: Issue 45: a scrape at most this many times node_exporter's infiniband collector.
NODE_RATIO = 2.0
NODE_EXPORTER = ("prometheus-node-exporter", "node_exporter")
_DURATION = re.compile(rb'^node_scrape_collector_duration_seconds\{collector="infiniband"\} '
                       rb'(\S+)$', re.M)


def _collect(host: Any, **kw: Any) -> Any:
    from sysverbs.fleet.facts import collect_facts

    return collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
                         source="sysfs", recorded=True, environ={}, **kw)


def _steady(host: Any) -> Any:
    """The long-running exporter's collector (``metrics --listen``): a
    :class:`~sysverbs.fleet.steady.Steady` over the same snapshot as :func:`_collect`."""
    from sysverbs.fleet.steady import Steady
    from sysverbs.ground.hostroot import HostRoot
    from sysverbs.model import HostModel

    root = HostRoot.resolve(str(host.sysfs), str(host.dev), None, recorded=True)
    return Steady(lambda model: _collect(host, model=model), lambda: HostModel(root), {})


def _load() -> str:
    try:
        with open("/proc/loadavg") as fh:
            return fh.read().split()[0]
    except OSError:
        return "?"


def _inputs(steady: Any) -> str:
    """What a steady scrape asks again: the scope's records, by kind."""
    recheck = steady.recheck
    by_kind = recheck.recorded
    first = ("files", "links", "directories")
    return (", ".join(f"{by_kind[k]} {k}" for k in first) + ", "
            + ", ".join(f"{n} {k}" for k, n in sorted(by_kind.items()) if k not in first)
            + f": {recheck.count} asked, the others implied")


def series(text: bytes) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))


def series_table() -> list[tuple[str, int, int, int]]:
    """(fixture, RDMA devices, series with --detail, series by default) for every bundled
    fixture: what docs/fleet.md's table shows (tests/test_metrics.py checks it)."""
    from sysverbs.fleet.metrics import families
    from sysverbs.testing import fixture_names, materialize

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(fixture_names()):
            facts = _collect(materialize(name, Path(tmp) / str(i)))
            rows.append((name, len(facts.devices),
                         *(sum(len(f.samples) for f in families(facts, detail))
                           for detail in (True, False))))
    return rows


def markdown(rows: list[tuple[str, int, int, int]]) -> str:
    out = ["| fixture | RDMA devices | before (`--detail`) | after (default) |",
           "|---|---:|---:|---:|"]
    out += [f"| {n} | {d} | {before} | {after} |" for n, d, before, after in rows]
    return "\n".join(out) + "\n"


def opened_files(host: Any) -> list[str]:
    """Every file one snapshot opens (``open`` audit events), in order, repeats kept."""
    seen: list[str] = []
    active = [True]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if active[0] and event == "open" and isinstance(args[0], (str, bytes)) and not (
                args[2] or 0) & os.O_DIRECTORY:  # a directory's open reads no file
            seen.append(os.fsdecode(args[0]))

    sys.addaudithook(hook)
    try:
        _collect(host)
    finally:
        active[0] = False  # an audit hook cannot be removed
    return [p for p in seen if os.path.isfile(p)]


def repeated(paths: list[str], sysfs: str) -> list[tuple[str, int, int]]:
    """The files opened more than once, by kind (the path below ``sysfs`` with its numbers
    as N): (kind, opens of each file, how many files), the most opened first."""
    opens: dict[str, int] = {}
    for path in paths:
        opens[path] = opens.get(path, 0) + 1
    kinds: dict[tuple[str, int], int] = {}
    for path, n in opens.items():
        if n > 1:
            kind = re.sub(r"\d+", "N", os.path.relpath(path, sysfs))
            kinds[kind, n] = kinds.get((kind, n), 0) + 1
    return sorted(((k, n, c) for (k, n), c in kinds.items()), key=lambda r: (-r[1], -r[2]))


def read_all(paths: list[str]) -> None:
    for path in paths:
        try:
            with open(path, "rb", buffering=0) as fh:
                fh.read()
        except OSError:
            pass


#: The counters of an InfiniBand port (the kernel's ib_core ``counters/`` directory) that
#: node_exporter's infiniband collector reads: a port without that directory makes it
#: report nothing ("infiniband statistics not found").  The fixtures' own list.
IB_COUNTERS = PMA


def add_counters(sysfs: str) -> int:
    """Give each port of the tree that has no ``counters/`` directory one (every counter
    0), and each device with no ``board_id`` an empty one (irdma has none, and
    node_exporter 1.5 then reports no device at all), so that node_exporter's collector
    does its whole work; a sysverbs scrape reads neither.  Returns how many ports got
    counters (0 once the fixtures have their own)."""
    added = 0
    for device in Path(sysfs, "class", "infiniband").glob("*"):
        if not (device / "board_id").exists():
            (device.resolve() / "board_id").write_text("\n")
    for ports in Path(sysfs, "class", "infiniband").glob("*/ports/*"):
        counters = ports.resolve() / "counters"
        if counters.exists():
            continue
        counters.mkdir()
        for name in IB_COUNTERS:
            (counters / name).write_text("0\n")
        added += 1
    return added


def pad_gid_tables(sysfs: str, length: int) -> int:
    """Give every port's GID table ``length`` entries, as the kernel shows a port's whole
    table (``gids/0`` .. ``gids/<gid_tbl_len - 1>``, the unused ones the zero GID, their
    ``gid_attrs`` unreadable), where a recording keeps only the entries it found in use.
    Returns how many entries were added."""
    zero = ":".join(["0000"] * 8) + "\n"
    added = 0
    for gids in Path(sysfs, "class", "infiniband").glob("*/ports/*/gids"):
        real = gids.resolve()
        for index in range(length):
            entry = real / str(index)
            if not entry.exists():
                entry.write_text(zero)
                added += 1
    return added


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NodeExporter:
    """node_exporter's infiniband collector alone on ``sysfs``, started (``with``), one
    scrape not counted; :meth:`scrape` gives its own collector duration and the whole
    HTTP scrape, in ms.  :func:`start` gives None without node_exporter."""

    def __init__(self, binary: str, sysfs: str) -> None:
        port = _free_port()
        self.proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}",
                                      "--collector.disable-defaults", "--collector.infiniband",
                                      f"--path.sysfs={sysfs}", "--log.level=warn"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}/metrics"

    def __enter__(self) -> NodeExporter:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(self.url, timeout=5).read()
                return self
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.__exit__()
                    raise
                time.sleep(0.05)

    def scrape(self) -> tuple[float, float]:
        t0 = time.perf_counter()
        page = urllib.request.urlopen(self.url, timeout=10).read()
        http = (time.perf_counter() - t0) * 1000
        found = _DURATION.search(page)
        assert found is not None and b"node_infiniband_info" in page, "no infiniband"
        return float(found.group(1)) * 1000, http

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def start(sysfs: str) -> Optional[NodeExporter]:
    binary = next(filter(None, map(shutil.which, NODE_EXPORTER)), None)
    return None if binary is None else NodeExporter(binary, sysfs)


def _proc_stats(pid: int) -> tuple[float, int, int]:
    """(CPU seconds, user + system; resident KiB now; peak resident KiB) of ``pid``."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = hwm = 0
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return cpu, rss, hwm


def exporter_resources(where: list[str], scrapes: int) -> dict[str, float]:
    """The real ``sysverbs metrics --listen`` as the DaemonSet runs it (``--source sysfs
    --no-open``, ``--max-age 0``: a fresh snapshot for every scrape) on ``where`` (its
    tree's arguments): its resident memory before the first scrape and at its peak, and
    its CPU time per scrape over ``scrapes`` scrapes after one not counted (the imports
    and the first device list)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sysverbs", "metrics", "--listen", f"127.0.0.1:{port}",
         "--source", "sysfs", "--no-open", "--max-age", "0", *where],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        _, idle_kib, _ = _proc_stats(proc.pid)
        urllib.request.urlopen(url, timeout=120).read()
        cpu0, _, _ = _proc_stats(proc.pid)
        t0 = time.perf_counter()
        for _ in range(scrapes):
            urllib.request.urlopen(url, timeout=120).read()
        wall = (time.perf_counter() - t0) / scrapes
        cpu1, rss_kib, peak_kib = _proc_stats(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
    return {"idle_rss_mib": idle_kib / 1024, "rss_mib": rss_kib / 1024,
            "peak_rss_mib": peak_kib / 1024, "cpu_ms_per_scrape": (cpu1 - cpu0) * 1000 / scrapes,
            "wall_ms_per_scrape": wall * 1000}


def resources(scrapes: int) -> dict[str, dict[str, float]]:
    """:func:`exporter_resources` on gpu-dgx-b200, mlx5-sriov (the fixture with the most
    devices: 42) and a generated SR-IOV host of 1,000 devices (tests/scale_hosts.py)."""
    sys.path.insert(0, str(REPO))
    from tests.scale_hosts import sriov_host

    out = {name: exporter_resources(["--fixture", name], scrapes)
           for name in ("gpu-dgx-b200", "mlx5-sriov")}
    with tempfile.TemporaryDirectory() as tmp:
        host = sriov_host(1000, Path(tmp) / "h1000").root
        out["sriov-1000"] = exporter_resources(
            ["--sysfs-path", f"{host}/sys", "--dev-dir", f"{host}/dev/infiniband"], scrapes)
    for name, r in out.items():
        print(f"  {name:13} RSS {r['idle_rss_mib']:5.1f} MiB idle, peak "
              f"{r['peak_rss_mib']:5.1f} MiB; CPU {r['cpu_ms_per_scrape']:7.1f} ms per scrape "
              f"(wall {r['wall_ms_per_scrape']:.1f} ms)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=51)
    ap.add_argument("--fixture", default="gpu-dgx-b200")
    ap.add_argument("--json", default=str(REPO / "benchmarks" / "metrics-results.json"))
    ap.add_argument("--table", action="store_true",
                    help="print docs/fleet.md's series table (every fixture) and stop")
    ap.add_argument("--gid-table", type=int, metavar="N", default=0,
                    help="pad every port's GID table to N entries first (a kernel shows the "
                    "whole table; a recording only the entries in use)")
    ap.add_argument("--resources", type=int, metavar="SCRAPES", default=0,
                    help="measure the exporter's memory and CPU per scrape as the DaemonSet "
                    "runs it (docs/fleet.md's resource requests) over SCRAPES scrapes, and stop")
    args = ap.parse_args()
    if args.resources:
        print(f"sysverbs metrics --listen, {args.resources} scrapes (load average {_load()}):")
        Path(args.json).write_text(json.dumps(
            {"resources": resources(args.resources), "load": _load()}, indent=2) + "\n")
        return 0
    if args.table:
        sys.stdout.write(markdown(series_table()))
        return 0
    from sysverbs.fleet.metrics import Pages, render
    from sysverbs.testing import materialize

    collect_ms: list[float] = []
    render_ms: list[float] = []
    steady_ms: list[float] = []
    asked_ms: list[float] = []  # the steady scrape without its render
    parts: dict[str, list[float]] = {}
    floor_ms: list[float] = []
    node: Optional[dict[str, list[float]]] = None
    with tempfile.TemporaryDirectory() as tmp:
        host = materialize(args.fixture, Path(tmp) / "host")
        padded = pad_gid_tables(str(host.sysfs), args.gid_table)
        # what node_exporter reads (sysverbs reads neither counters/ nor an empty board_id)
        added = add_counters(str(host.sysfs))
        render(_collect(host))  # warm: imports, the device list
        files = opened_files(host)
        for _ in range(args.samples):
            t0 = time.perf_counter()
            read_all(files)
            floor_ms.append((time.perf_counter() - t0) * 1000)
        for _ in range(args.samples):
            t0 = time.perf_counter()
            facts = _collect(host)
            t1 = time.perf_counter()
            text = render(facts)
            t2 = time.perf_counter()
            collect_ms.append((t1 - t0) * 1000)
            render_ms.append((t2 - t1) * 1000)
            for c in facts.collectors:
                parts.setdefault(c.name, []).append(c.duration_seconds * 1000)
        steady, pages = _steady(host), Pages()  # the exporter's snapshots and pages
        render(steady(), pages=pages)  # the first scrape of the exporter collects
        exporter = start(str(host.sysfs))
        with exporter or contextlib.nullcontext():
            if exporter is not None:
                node = {"collector_ms": [], "http_ms": []}
            for _ in range(args.samples):  # alternating: both see the same load
                t0 = time.perf_counter()
                again = steady()
                t1 = time.perf_counter()
                same = render(again, pages=pages)
                steady_ms.append((time.perf_counter() - t0) * 1000)
                asked_ms.append((t1 - t0) * 1000)
                if exporter is not None and node is not None:
                    collector, http = exporter.scrape()
                    node["collector_ms"].append(collector)
                    node["http_ms"].append(http)
        assert steady.reused == args.samples, steady.why  # nothing changed in between
        assert series(same) == series(text)
        inputs = _inputs(steady)
    scrape = [a + b for a, b in zip(collect_ms, render_ms)]
    median = statistics.median(scrape)
    verdict = "met" if median < TARGET_MS else "NOT MET"
    steady_median = statistics.median(steady_ms)
    load = _load()
    print(f"{args.fixture}, {args.samples} scrapes in-process (load average {load}"
          + (f"; GID tables padded to {args.gid_table} entries: {padded} added"
             if args.gid_table else "") + "), median ms:")
    print(f"  collect {statistics.median(collect_ms):7.2f}  "
          f"({', '.join(f'{k} {statistics.median(v):.2f}' for k, v in parts.items())})")
    print(f"  render  {statistics.median(render_ms):7.2f}")
    print(f"  scrape  {median:7.2f}  (cold: a new snapshot; min {min(scrape):.2f}, max "
          f"{max(scrape):.2f}; target < {TARGET_MS:g} ms: {verdict})")
    print(f"  steady  {steady_median:7.2f}  (the exporter's scrape of an unchanged host: "
          f"its inputs asked again ({statistics.median(asked_ms):.2f}), then its page: the "
          "last one's with the durations written again; "
          f"min {min(steady_ms):.2f}, max "
          f"{max(steady_ms):.2f}; {inputs})")
    print(f"  series  {series(text)} ({len(text)} bytes of text)")
    floor = statistics.median(floor_ms)
    print(f"  floor   {floor:7.2f}  (the {len(files)} files one snapshot opens, "
          f"{len(set(files))} distinct, read again alone)")
    repeats = repeated(files, str(host.sysfs))
    print("  files opened more than once per snapshot, by kind (times: files): "
          + ", ".join(f"{kind} {n}x: {count}" for kind, n, count in repeats[:8]))
    ratio = steady_ratio = None
    if node is None:
        print("  node_exporter: not installed (Debian's prometheus-node-exporter): no "
              "comparison")
    else:
        ne = statistics.median(node["collector_ms"])
        ratio = median / ne
        # each steady scrape beside the node_exporter scrape that followed it (one load)
        steady_ratio = statistics.median(a / b for a, b in zip(steady_ms, node["collector_ms"]))
        print(f"  node_exporter infiniband collector {ne:7.2f}  (HTTP scrape "
              f"{statistics.median(node['http_ms']):.2f}; counters/ added to {added} "
              "ports that had none, every counter 0)")
        print(f"  steady scrape / node_exporter's collector: {steady_ratio:.1f}x (the median "
              "of each round's ratio, the two scrapes made one after the other; ratio of the "
              f"medians {steady_median / ne:.1f}x; target <= {NODE_RATIO:g}x, judged on the "
              "steady scrape, what the exporter does at every scrape of a host that did not "
              f"change: {'met' if steady_ratio <= NODE_RATIO else 'NOT MET'})")
        print(f"  cold scrape / collector {ratio:.1f}x; floor / collector {floor / ne:.1f}x")
    rows = series_table()
    print("series per node (samples on the page), every fixture:")
    sys.stdout.write(markdown(rows))
    Path(args.json).write_text(json.dumps({
        "fixture": args.fixture, "python": platform.python_version(),
        "machine": platform.machine(), "collect_ms": collect_ms, "render_ms": render_ms,
        "collectors_ms": parts, "median_scrape_ms": median, "target_ms": TARGET_MS,
        "met": median < TARGET_MS, "steady_ms": steady_ms,
        "median_steady_ms": steady_median, "steady_inputs": inputs, "asked_ms": asked_ms,
        "steady_node_ratio": steady_ratio,
        "steady_met": steady_ratio is not None and steady_ratio <= NODE_RATIO,
        "floor_ms": floor_ms, "files_opened": len(files),
        "files_distinct": len(set(files)),
        "node_exporter": node, "node_ratio": ratio,
        "counters_added": added, "gid_table": args.gid_table, "gid_entries_added": padded,
        "series": {n: {"devices": d, "detail": b, "default": a} for n, d, b, a in rows},
        "load": load}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

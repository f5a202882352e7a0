#!/usr/bin/env python3
"""Benchmark one scrape of ``sysverbs metrics`` in-process: the snapshot
(:func:`sysverbs.fleet.facts.collect_facts`) and the text exposition
(:func:`sysverbs.fleet.metrics.render`), which is what the ``--listen`` server does at
every scrape, on the 8-GPU/18-NIC host (gpu-dgx-b200), and the number of series a node
exports.

    .venv/bin/python benchmarks/bench_metrics.py [--samples 51] [--fixture gpu-dgx-b200]

The fixture is materialized once into a temporary directory and read as ``--fixture``
reads it (a recording: no device node is opened); one scrape is made first and not
counted (imports, the process-wide device list).  Each round: collect, then render;
the table gives the medians of both, of their sum and of each collector.  Target: a
scrape under 50 ms.  Nothing asserts wall-clock time; the table says ``met`` or ``NOT
MET``.  The series counts are those of each bundled GPU fixture, with and without
``--no-gpu-links``.  Writes ``benchmarks/metrics-results.json`` (``--json``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGET_MS = 50.0
COUNTED = ("gpu-dgx-b200", "gpu-dgx-a100", "gpu-hgx-h100", "dgx-demo", "mlx5-sriov", "rxe")


def _collect(host: Any, **kw: Any) -> Any:
    from sysverbs.fleet.facts import collect_facts

    return collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
                         source="sysfs", recorded=True, environ={}, **kw)


def _load() -> str:
    try:
        with open("/proc/loadavg") as fh:
            return fh.read().split()[0]
    except OSError:
        return "?"


def series(text: bytes) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=51)
    ap.add_argument("--fixture", default="gpu-dgx-b200")
    ap.add_argument("--json", default=str(REPO / "benchmarks" / "metrics-results.json"))
    args = ap.parse_args()
    from sysverbs.fleet.metrics import render
    from sysverbs.testing import materialize

    collect_ms: list[float] = []
    render_ms: list[float] = []
    parts: dict[str, list[float]] = {}
    counts: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        host = materialize(args.fixture, Path(tmp) / "host")
        render(_collect(host))  # warm: imports, the device list
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
        for i, name in enumerate(COUNTED):
            other = materialize(name, Path(tmp) / f"count{i}")
            counts[name] = {"series": series(render(_collect(other))),
                            "no_gpu_links": series(render(_collect(other, gpu_links=False))),
                            "devices": len(_collect(other).devices)}
    scrape = [a + b for a, b in zip(collect_ms, render_ms)]
    median = statistics.median(scrape)
    verdict = "met" if median < TARGET_MS else "NOT MET"
    load = _load()
    print(f"{args.fixture}, {args.samples} scrapes in-process (load average {load}), median ms:")
    print(f"  collect {statistics.median(collect_ms):7.2f}  "
          f"({', '.join(f'{k} {statistics.median(v):.2f}' for k, v in parts.items())})")
    print(f"  render  {statistics.median(render_ms):7.2f}")
    print(f"  scrape  {median:7.2f}  (min {min(scrape):.2f}, max {max(scrape):.2f}; "
          f"target < {TARGET_MS:g} ms: {verdict})")
    print(f"  series  {series(text)} ({len(text)} bytes of text)")
    print("series per node (samples on the page; with --no-gpu-links):")
    for name, c in counts.items():
        print(f"  {name:14} {c['devices']:3} devices  {c['series']:5}  {c['no_gpu_links']:5}")
    Path(args.json).write_text(json.dumps({
        "fixture": args.fixture, "python": platform.python_version(),
        "machine": platform.machine(), "collect_ms": collect_ms, "render_ms": render_ms,
        "collectors_ms": parts, "median_scrape_ms": median, "target_ms": TARGET_MS,
        "met": median < TARGET_MS, "series": counts, "load": load}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

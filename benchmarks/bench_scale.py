#!/usr/bin/env python3
"""How every command scales on SR-IOV hosts of 256, 1,024 and 5,000 RDMA devices (issue 42).

    .venv/bin/python benchmarks/bench_scale.py [--sizes 256,1024,5000] [--samples 3]
        [--compare 1016] [--json benchmarks/scale-results.json]

Each host is generated with the testing kit (``tests/scale_hosts.py``: ConnectX-6 PFs
of 128 functions, each function an mlx5 device with its uverbs and umad entries, as an
SR-IOV Kubernetes node has them).  Measured, round by round through the sizes (so that
the load of the machine falls on every size alike):

(a) every command run in this process through ``sysverbs.cli.main`` as a first call:
    ``devices``, ``devinfo``, ``netdev``, ``doctor``, ``topo --assign --near mlx5_0``
    (the matrix itself, ``topo``, has N x N cells: up to ``--matrix-max`` devices only),
    ``env``, ``nccl check``, ``metrics``, ``nfd``; each run goes through a link of its
    own to the tree, so that nothing this process kept (the device list) is reused;
(b) one scrape in-process: :func:`~sysverbs.fleet.facts.collect_facts` then
    :func:`~sysverbs.fleet.metrics.render`, after one unmeasured scrape (what the
    ``--listen`` server does at each scrape, as ``bench_metrics.py`` measures it).

Per command: the medians, t(1024)/t(256) (a 4x step: target <= 4.5) and, from 1,024 to
5,000, the same step scaled to 4x: t(5000)/t(1024) x 4 / (5000/1024).  Then on the
``--compare`` host (8 cards x 127 functions = 1,016 devices, issue 42's): the scrape
(in-process and ``python -m sysverbs metrics`` as a process) beside Debian's
``ibv_devices`` (SYSFS_PATH and the tree's /dev/infiniband in a private mount
namespace, as the oracle tests run it) and ``prometheus-node-exporter
--collector.disable-defaults --collector.infiniband --path.sysfs=TREE`` (on 127.0.0.1,
stopped afterwards): the wall time of a GET of /metrics and its own
``node_scrape_collector_duration_seconds{collector="infiniband"}``.  Nothing asserts
time; the table says ``met`` or ``NOT MET``.  Writes ``--json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGET = 4.5
COMMANDS = ["devices", "devinfo", "netdev", "doctor", "topo --assign --near mlx5_0", "env",
            "nccl check", "metrics", "nfd"]
MATRIX = "topo"


def _load() -> str:
    """The 1-minute load average (the machine is shared: it says how loaded it was)."""
    return f"{os.getloadavg()[0]:.2f}"


def run_command(command: str, host: Path, fresh: Path) -> float:
    """Seconds ``sysverbs COMMAND`` takes in this process on ``host`` (through the new
    link ``fresh``: a first call), its output thrown away."""
    from sysverbs.cli import main

    fresh.symlink_to(host)
    argv = [*command.split(), "--sysfs-path", f"{fresh}/sys", "--dev-dir",
            f"{fresh}/dev/infiniband"]
    with open(os.devnull, "wb") as null:
        out = io.TextIOWrapper(null)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            t0 = time.perf_counter()
            rc = main(argv)
            out.flush()
            elapsed = time.perf_counter() - t0
    if rc not in (0, 1):
        raise SystemExit(f"sysverbs {command} failed on {host} (exit {rc})")
    return elapsed


def _collect(host: Path) -> Any:
    from sysverbs.fleet.facts import collect_facts

    return collect_facts(sysfs_path=str(host / "sys"), dev_dir=str(host / "dev/infiniband"),
                         providers="builtin", source="sysfs", recorded=True, environ={})


def scrape(host: Path) -> float:
    """Seconds of one in-process scrape (collect + render)."""
    from sysverbs.fleet.metrics import render

    t0 = time.perf_counter()
    render(_collect(host))
    return time.perf_counter() - t0


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def step_ratio(small: float, big: float, n_small: int, n_big: int) -> float:
    """t(big)/t(small) scaled to a 4x step in devices."""
    return big / small * 4 / (n_big / n_small)


# ---------------------------------------------------------------- the comparison


def ibv_devices(host: Path, mount: Path, samples: int) -> Optional[dict[str, Any]]:
    """Wall times of Debian's ``ibv_devices`` on the tree (timed inside the namespace)."""
    from tests.oracle.harness import run_in_ns, unavailable_reason

    why = unavailable_reason() or (None if shutil.which("ibv_devices") else "no ibv_devices")
    if why is not None:
        print(f"ibv_devices: not measured: {why}")
        return None
    timer = ("import subprocess, sys, time, json\nts = []\nlines = 0\n"
             f"for _ in range({samples}):\n"
             "    t = time.perf_counter()\n"
             "    p = subprocess.run(['ibv_devices'], capture_output=True)\n"
             "    ts.append(time.perf_counter() - t)\n"
             "    lines = len(p.stdout.splitlines())\n"
             "print(json.dumps({'times': ts, 'lines': lines}))\n")
    mount.mkdir()
    run = run_in_ns(host, mount, ["/usr/bin/python3", "-c", timer])
    if run.returncode != 0:
        print(f"ibv_devices: failed: {run.stderr.decode(errors='replace')[-300:]}")
        return None
    out: dict[str, Any] = json.loads(run.stdout)
    return out


def node_exporter(host: Path, samples: int) -> Optional[dict[str, Any]]:
    """GETs of node_exporter's /metrics with only its infiniband collector on the tree."""
    from tests.prom import NODE_EXPORTER, binary, free_port, http_get, stop, wait_http

    ne = binary(NODE_EXPORTER)
    if ne is None:
        print("node_exporter: not measured: prometheus-node-exporter is not installed")
        return None
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    proc = subprocess.Popen([ne, f"--web.listen-address=127.0.0.1:{port}",
                             f"--path.sysfs={host / 'sys'}", "--collector.disable-defaults",
                             "--collector.infiniband", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_http(url, timeout=30, proc=proc)
        times: list[float] = []
        own: list[float] = []
        series = 0
        for _ in range(samples):
            t0 = time.perf_counter()
            status, _, body = http_get(url, timeout=60)
            times.append(time.perf_counter() - t0)
            text = body.decode()
            m = re.search(r'^node_scrape_collector_duration_seconds\{collector="infiniband"\} '
                          r'(\S+)$', text, re.M)
            if status != 200 or m is None:
                print(f"node_exporter: unexpected answer (status {status})")
                return None
            own.append(float(m.group(1)))
            series = sum(1 for line in text.splitlines()
                         if line.startswith("node_infiniband_"))
        return {"times": times, "collector": own, "infiniband_series": series}
    finally:
        stop(proc)


def metrics_process(host: Path, samples: int) -> list[float]:
    """Wall times of ``python -m sysverbs metrics`` as a process of its own."""
    times = []
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(samples):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "sysverbs", "metrics", "--sysfs-path",
                        str(host / "sys"), "--dev-dir", str(host / "dev/infiniband")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                       check=True, timeout=600)
        times.append(time.perf_counter() - t0)
    return times


# ------------------------------------------------------------------------ main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="256,1024,5000")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--matrix-max", type=int, default=1024,
                    help="time the N x N `topo` matrix up to this many devices")
    ap.add_argument("--compare", type=int, default=1016,
                    help="devices of the host compared with ibv_devices and node_exporter "
                    "(0: none)")
    ap.add_argument("--json", default=str(REPO / "benchmarks" / "scale-results.json"))
    args = ap.parse_args()
    from tests.scale_hosts import shape, sriov_host

    sizes = [int(s) for s in args.sizes.split(",")]
    times: dict[str, dict[int, list[float]]] = {c: {n: [] for n in sizes}
                                                for c in [*COMMANDS, MATRIX, "scrape"]}
    result: dict[str, Any] = {"python": platform.python_version(),
                              "machine": platform.machine(), "cpus": os.cpu_count(),
                              "load_start": _load(), "sizes": sizes, "samples": args.samples}
    with tempfile.TemporaryDirectory(prefix="sv-scale-") as tmp:
        base = Path(tmp)
        hosts: dict[int, Path] = {}
        for n in sizes:
            t0 = time.perf_counter()
            hosts[n] = sriov_host(n, base / f"h{n}").root
            print(f"{n} devices {shape(n)}: generated in {time.perf_counter() - t0:.1f} s")
        for n in sizes:
            scrape(hosts[n])  # warm: imports, the device list of that tree
        fresh = iter(range(1 << 30))
        for r in range(args.samples):
            for n in sizes:
                for command in COMMANDS + ([MATRIX] if n <= args.matrix_max else []):
                    link = base / f"run{next(fresh)}"
                    times[command][n].append(run_command(command, hosts[n], link))
                    link.unlink()
                times["scrape"][n].append(scrape(hosts[n]))
            print(f"round {r + 1}/{args.samples} done (load {_load()})")
        result["load_end"] = _load()

        print(f"\nmedian ms of {args.samples} runs (load average {result['load_start']} "
              f"at the start, {result['load_end']} at the end; {os.cpu_count()} CPUs)")
        head = "".join(f"{n:>10}" for n in sizes)
        print(f"{'command':30}{head}   4x steps (target <= {TARGET:g})")
        rows: dict[str, Any] = {}
        verdicts = []
        for command, by_size in times.items():
            med = {n: median_ms(v) for n, v in by_size.items() if v}
            ks = sorted(med)
            ratios = [step_ratio(med[a], med[b], a, b) for a, b in zip(ks, ks[1:])]
            quadratic = command == MATRIX  # N x N cells by definition: not held to it
            met = all(x <= TARGET for x in ratios)
            if not quadratic:
                verdicts.append(met)
            rows[command] = {"median_ms": med, "samples_ms": {n: [x * 1000 for x in v]
                                                               for n, v in by_size.items()},
                             "step_ratios": ratios, "met": met}
            cells = "".join(f"{med[n]:10.0f}" if n in med else f"{'-':>10}" for n in sizes)
            note = ("  (N x N cells: quadratic by definition)" if quadratic else
                    "" if met else "  NOT MET")
            print(f"{command:30}{cells}   {', '.join(f'{x:.2f}' for x in ratios)}{note}")
        result["commands"] = rows
        result["met"] = all(verdicts)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        print(f"every command and the scrape within {TARGET:g} per 4x: "
              f"{'met' if result['met'] else 'NOT MET'}")

        if args.compare:
            n = args.compare
            print(f"\n{n} devices {shape(n, 127)}: the scrape beside ibv_devices and "
                  f"node_exporter's infiniband collector (median ms of {args.samples})")
            host = sriov_host(n, base / f"c{n}", per_pf=127, counters=True).root
            scrape(host)
            comp: dict[str, Any] = {"devices": n,
                                    "scrape_ms": [scrape(host) * 1000
                                                  for _ in range(args.samples)],
                                    "metrics_process_ms": [t * 1000 for t in metrics_process(
                                        host, args.samples)]}
            ibv = ibv_devices(host, base / "mnt", args.samples)
            if ibv is not None:
                comp["ibv_devices_ms"] = [t * 1000 for t in ibv["times"]]
                comp["ibv_devices_lines"] = ibv["lines"]
            ne = node_exporter(host, args.samples)
            if ne is not None:
                comp["node_exporter_get_ms"] = [t * 1000 for t in ne["times"]]
                comp["node_exporter_collector_ms"] = [t * 1000 for t in ne["collector"]]
                comp["node_exporter_infiniband_series"] = ne["infiniband_series"]
            result["compare"] = comp
            show: list[tuple[str, Callable[[], Optional[float]]]] = [
                ("sysverbs scrape, in-process", lambda: statistics.median(comp["scrape_ms"])),
                ("sysverbs metrics, a process", lambda: statistics.median(
                    comp["metrics_process_ms"])),
                ("ibv_devices (libibverbs)", lambda: statistics.median(
                    comp["ibv_devices_ms"]) if "ibv_devices_ms" in comp else None),
                ("node_exporter GET /metrics", lambda: statistics.median(
                    comp["node_exporter_get_ms"]) if "node_exporter_get_ms" in comp else None),
                ("  its infiniband collector", lambda: statistics.median(
                    comp["node_exporter_collector_ms"])
                    if "node_exporter_collector_ms" in comp else None),
            ]
            for label, value in show:
                v = value()
                print(f"  {label:32}{'not measured' if v is None else f'{v:10.1f}'}")
        # written before the trees are removed (5,000 devices: minutes on a busy disk)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nwrote {args.json}; removing the trees")
    return 0


if __name__ == "__main__":
    sys.exit(main())

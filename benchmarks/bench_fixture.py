#!/usr/bin/env python3
"""Benchmark ``--fixture`` on the fixture cache (issue 26 item 5): a command on a
bundled fixture within 1.5 times the same command on the unpacked tree.

    .venv/bin/python benchmarks/bench_fixture.py [--samples 11] [--json PATH]

For each fixture (``--fixtures``, default ``dgx-demo,gpu-dgx-b200``) and command
(``--commands``, default ``devices,topo,doctor``), the wall time of a fresh process:

(A) ``CMD --sysfs-path TREE/sys --dev-dir TREE/dev/infiniband --providers builtin
    --source sysfs`` on the fixture materialized once into a directory (the baseline);
(B) the same command on the tree of :func:`sysverbs.testing.cache.fixture_tree`,
    called first in that process: what ``CMD --fixture NAME`` costs once the command
    line asks the cache (the entry is built before the measurement: "after the first
    call");
(C) the same with :func:`~sysverbs.testing.cache.cached_fixture` (a ``FakeHost``: it
    also imports ``pathlib`` and ``dataclasses``);
(D) ``CMD --fixture NAME``, the command line as it is (a command line that unpacks
    the fixture at every call takes seconds here).

Target: B / A <= 1.5 and D / A <= 1.5 (each the median of the per-round ratios; A,
B, C and D run round by round, side by side).  Beside them: the first call (the
entry's build, in a fresh process on an empty cache) and, in this process, one
checked call of ``fixture_tree`` on a built entry (its ``stat`` count is the
manifest's).  The cache (``XDG_CACHE_HOME``) and the baseline trees lie in one
temporary directory (``--tmpdir``), so both are on the same file system.  The
processes run the interpreter of ``bench_placement.plain_python`` (the package as a
regular install sees it, bytecode cached); the outputs of A, B and C are compared.
Prints a table with ``met`` / ``NOT MET``; writes every sample to
``benchmarks/fixture-results.json`` (``--json``).  Nothing asserts wall-clock time.
Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench_placement import plain_python, timed, walls  # noqa: E402

TARGET = 1.5
LISTING = ["--providers", "builtin", "--source", "sysfs"]
#: A child: its command on the paths the cache gives (B: fixture_tree, C: cached_fixture).
CHILD = """import sys
from sysverbs.testing.cache import {func}
t = {func}({name!r})
from sysverbs.cli import main
sys.exit(main([{command!r}, "--sysfs-path", str(t.sysfs), "--dev-dir", str(t.dev), *{opts!r}]))
"""
PLAIN = """import sys
from sysverbs.cli import main
sys.exit(main(sys.argv[1:]))
"""
BUILD = """import sys, time
t0 = time.perf_counter()
from sysverbs.testing.cache import fixture_tree
tree = fixture_tree({name!r})
sys.stdout.write(repr((time.perf_counter() - t0) * 1000) + " " + str(tree.cached))
"""


def per_round_ratio(a: list[float], b: list[float]) -> float:
    return statistics.median([y / x for x, y in zip(a, b)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=11)
    ap.add_argument("--fixtures", default="dgx-demo,gpu-dgx-b200")
    ap.add_argument("--commands", default="devices,topo,doctor")
    ap.add_argument("--tmpdir", default=None)
    ap.add_argument("--json", default=str(REPO / "benchmarks/fixture-results.json"))
    args = ap.parse_args()
    fixtures = args.fixtures.split(",")
    commands = args.commands.split(",")
    results: dict[str, Any] = {
        "machine": f"{platform.python_implementation()} {platform.python_version()}, "
                   f"{os.cpu_count()} CPUs", "target": TARGET, "rows": []}
    with tempfile.TemporaryDirectory(prefix="bench-fixture-", dir=args.tmpdir) as tmp:
        base = Path(tmp)
        python = plain_python(base / "venv")
        cache = base / "cache"
        env = dict(os.environ, PYTHONPYCACHEPREFIX=str(base / "pyc"),
                   XDG_CACHE_HOME=str(cache))
        for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONHOME"):
            env.pop(name, None)
        # This process's own calls use the same cache.
        os.environ["XDG_CACHE_HOME"] = str(cache)
        from sysverbs.testing import materialize
        from sysverbs.testing.cache import fixture_tree

        first: dict[str, float] = {}
        in_process: dict[str, list[float]] = {}
        checked: dict[str, int] = {}
        for name in fixtures:
            materialize(name, base / "trees" / name)
            out = subprocess.run([python, "-c", BUILD.format(name=name)], env=env,
                                 capture_output=True, text=True, check=True).stdout.split()
            if out[1] != "True":
                raise SystemExit(f"{name}: the cache was not usable in {cache}")
            first[name] = float(out[0])
            in_process[name] = timed(lambda n=name: fixture_tree(n), args.samples)
            entry = Path(fixture_tree(name).root).parent
            checked[name] = sum(1 for line in (entry / "manifest").read_text().split(
                "\n\n", 1)[1].splitlines())
            print(f"progress: {name} built in {first[name]:.0f} ms", file=sys.stderr)
        results["first_call_ms"] = first
        results["check_in_process_ms"] = in_process
        results["stats_per_check"] = checked
        for name in fixtures:
            tree = base / "trees" / name
            for command in commands:
                opts = LISTING
                runs: dict[str, tuple[list[str], dict[str, str]]] = {
                    "A": ([python, "-c", PLAIN, command, "--sysfs-path", str(tree / "sys"),
                           "--dev-dir", str(tree / "dev/infiniband"), *opts], env),
                    "B": ([python, "-c", CHILD.format(func="fixture_tree", name=name,
                                                      command=command, opts=opts)], env),
                    "C": ([python, "-c", CHILD.format(func="cached_fixture", name=name,
                                                      command=command, opts=opts)], env),
                    "D": ([python, "-c", PLAIN, command, "--fixture", name], env),
                }
                # The outputs, each tree's path replaced (doctor names its files); A, B and
                # C must agree.
                cached_root = fixture_tree(name).root.encode()
                same = {k: subprocess.run(argv, env=e, capture_output=True).stdout
                        .replace(cached_root, b"TREE").replace(str(tree).encode(), b"TREE")
                        for k, (argv, e) in runs.items()}
                sample = walls(runs, args.samples)
                # D may differ: the command line says that a fixture's nodes are stand-ins.
                row: dict[str, Any] = {"fixture": name, "command": command,
                                       "outputs_identical": len({same[k] for k in "ABC"}) == 1,
                                       "D_output_as_A": same["D"] == same["A"],
                                       **{k + "_ms": v for k, v in sample.items()}}
                row["ratio_B"] = per_round_ratio(sample["A"], sample["B"])
                row["ratio_C"] = per_round_ratio(sample["A"], sample["C"])
                row["ratio_D"] = per_round_ratio(sample["A"], sample["D"])
                row["met"] = row["ratio_B"] <= TARGET and row["ratio_D"] <= TARGET
                results["rows"].append(row)
                print(f"progress: {name} {command}: B/A {row['ratio_B']:.2f}, D/A "
                      f"{row['ratio_D']:.2f}", file=sys.stderr)
    med: Callable[[list[float]], float] = statistics.median
    print("| fixture | command | (A) --sysfs-path | (B) fixture_tree | B/A "
          "| (C) cached_fixture | C/A | (D) --fixture | D/A | B/A, D/A <= 1.5 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results["rows"]:
        verdict = "met" if r["met"] else "NOT MET"
        same = "" if r["outputs_identical"] else " (outputs differ!)"
        print(f"| {r['fixture']} | {r['command']} | {med(r['A_ms']):.1f} ms | "
              f"{med(r['B_ms']):.1f} ms | {r['ratio_B']:.2f} | {med(r['C_ms']):.1f} ms | "
              f"{r['ratio_C']:.2f} | {med(r['D_ms']):.1f} ms | {r['ratio_D']:.2f} | "
              f"{verdict}{same} |")
    print()
    for name in fixtures:
        print(f"{name}: first call (build) {first[name]:.0f} ms; a checked call "
              f"in-process {med(in_process[name]):.2f} ms ({checked[name]} stat calls)")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results["load_average"] = load
    results["met"] = all(r["met"] for r in results["rows"])
    print(f"\n{results['machine']}; load average {load:.1f}; target "
          f"{'met' if results['met'] else 'NOT MET'}")
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The benchmark runs end to end on tiny hosts, and its syscall counts meet issue 8.

``benchmarks/bench_list.py`` (``make bench``) is the measuring instrument of the
performance work; this keeps it from rotting.  Wall-clock times are never
asserted (they depend on the machine).  Syscall counts do not: ``strace -c`` counts
what each implementation asks of the kernel per device, on the same trees, so
"at most 1.3x libibverbs" is checked here against the real library.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import require
from tests.oracle.harness import unavailable_reason

REPO = Path(__file__).resolve().parents[1]


def test_bench_runs_and_syscalls_per_device_are_within_target(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is None and shutil.which("strace") is None:
        reason = "strace is not installed (apt-get install strace)"
    if reason is None and shutil.which("ibv_devices") is None:
        reason = "ibv_devices is not installed (apt-get install ibverbs-utils)"
    require(reason, "the benchmark (libibverbs, strace)")
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_list.py"), "--sizes", "1,5",
         "--samples", "1", "--repeats", "2", "--cli-size", "5", "--tmpdir", str(tmp_path),
         "--json", str(out), "--sysverbs", str(REPO)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["machine"]["sysverbs_checkout"] == str(REPO)
    measured = {(r["measurement"].split(",")[0], r["n"]) for r in result["rows"]}
    for n in (1, 5):
        assert ("(a) first call", n) in measured and ("(b) repeated call", n) in measured
    assert "outputs identical" in next(
        r["note"] for r in result["rows"] if r["measurement"].startswith("(d)"))
    first, repeated = result["syscalls"]
    # 5 - 1 = 4 more devices: each costs libibverbs about 22 syscalls on a first call
    assert first["libibverbs"] > 10 and repeated["libibverbs"] > 10, result["syscalls"]
    for row in (first, repeated):
        assert row["sysverbs"] <= 1.3 * row["libibverbs"], row
    assert "Targets (issue 8):" in result["targets"] and "Targets" in proc.stdout


def test_bench_refuses_a_checkout_without_sysverbs(tmp_path: Path) -> None:
    """``--sysverbs DIR`` (another commit's checkout, measured on this benchmark's
    trees) must hold the package."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_list.py"), "--sysverbs",
         str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"--sysverbs {tmp_path}: no sysverbs package there" in proc.stderr


def test_placement_floor_replays_the_models_own_calls(tmp_path: Path) -> None:
    """``bench_placement.py``'s floor under (a) is the model's file-system calls
    replayed alone: the replay makes the same calls, in the same order, each name
    looked up from an open directory looked up from that directory again (only those
    directories' own opens come on top)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_placement as bench
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    from sysverbs.placement import assign, read_host
    from tests.pcitree import PciTree, oci_a100

    t = oci_a100(PciTree(tmp_path))
    calls = bench.recorded_reads(lambda: assign(read_host(t.sys)))
    assert sum(1 for c in calls if c[2] is not None) > 50  # the bus walk's lookups
    replayed = bench.recorded_reads(lambda: bench.replay(calls))
    dirs = {c[2] for c in calls if c[2] is not None}

    def lookups(seq: list[tuple[str, Any, Any]]) -> list[tuple[str, str, Any]]:
        """The calls but the opens of those directories (the model opens each once,
        the replay once more for its lookups)."""
        return [(n, os.fsdecode(p), w) for n, p, w in seq
                if not (n == "open" and os.fsdecode(p) in dirs)]

    assert lookups(replayed) == lookups(calls)
    assert len(replayed) == len(calls) + len(dirs)

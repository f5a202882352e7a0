"""docs/fleet.md says what the code does: its metrics table is the families' names, labels
and HELP texts; its scrape, feature file and GPU lines are what the commands print on the
fixtures it names (less what changes from run to run: durations, this process's
RLIMIT_MEMLOCK, the expiry time); the rules, the DaemonSet and the scrape configuration
are the shipped files, byte for byte; its PromQL joins are the expressions that
tests/data/alert_rules_test.yml runs through promtool."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sysverbs.fleet.facts import HostFacts
from sysverbs.fleet.metrics import families

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "fleet.md").read_text()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", DOC, re.S)


def _sv(*argv: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NCCL_IB_HCA", None)
    p = subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                       text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


def _block(kind: str, start: str) -> str:
    found = [text for k, text in BLOCKS if k == kind and text.startswith(start)]
    assert len(found) == 1, (kind, start)
    return found[0]


@pytest.mark.parametrize("path", ["sysverbs/fleet/rules.yml", "deploy/sysverbs-daemonset.yaml",
                                  "deploy/prometheus-scrape.yml"])
def test_shipped_files_are_shown_whole(path: str) -> None:
    text = (ROOT / path).read_text()
    assert ("yaml", text) in BLOCKS, path


def test_metrics_table_is_the_families() -> None:
    empty = HostFacts("0", "44", "/sys", False, (), (), False, 0.0, (), (), (), (), "", ())
    rows = re.findall(r"^\| `(sysverbs_\w+)` \| ([^|]*) \| ([^|]*) \|$", DOC, re.M)
    assert rows == [(f.name, ", ".join(f.labels) or "—", f.help) for f in families(empty)]


_VARIES = re.compile(
    r"^(sysverbs_collector_duration_seconds\{.*\}|sysverbs_memlock_limit_bytes) .*$", re.M)


def test_the_scrape_is_a_real_one() -> None:
    shown = _block("text", "# HELP sysverbs_build_info")
    real = _sv("metrics", "--fixture", "rxe")
    assert _VARIES.sub(r"\1 X", shown) == _VARIES.sub(r"\1 X", real)


def test_the_gpu_lines_are_real() -> None:
    shown = _block("text", "sysverbs_gpu_nic_link{")
    real = _sv("metrics", "--detail", "--fixture", "gpu-hgx-h100").splitlines()
    assert shown.splitlines() and set(shown.splitlines()) <= set(real)


def test_the_feature_file_is_a_real_one() -> None:
    shown = _block("text", "# +expiry-time=")
    real = _sv("nfd", "--fixture", "smi")
    first, rest = shown.split("\n", 1)
    assert re.fullmatch(r"# \+expiry-time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first)
    assert rest == real.split("\n", 1)[1]


def test_promql_joins_are_the_tested_ones() -> None:
    tests = (ROOT / "tests" / "data" / "alert_rules_test.yml").read_text()
    shown = [text for kind, text in BLOCKS if kind == "promql"]
    assert len(shown) == 2
    for expr in shown:
        flat = " ".join(expr.split())
        assert any(" ".join(m.split()) == flat for m in re.findall(
            r"- expr: (?:\|\n)?((?:.+\n)+?)\s+eval_time:", tests)), expr

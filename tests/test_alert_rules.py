"""sysverbs' alert rules (sysverbs/fleet/rules.yml) against the real Prometheus: Debian's
``promtool`` checks the file (``promtool check rules``) and runs its unit tests
(tests/data/alert_rules_test.yml, ``promtool test rules``): each alert fires when it
should and stays silent when it should not, with the exact labels and annotations.  A
mutated rule file fails those tests (the cases can tell a wrong rule from the right one).

Skips without promtool (Debian's ``prometheus`` package), fails under CI=true.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "sysverbs" / "fleet" / "rules.yml"
TESTS = ROOT / "tests" / "data" / "alert_rules_test.yml"
ALERTS = ("SysverbsRdmaDeviceUnusable", "SysverbsRdmaDevicesDisappeared",
          "SysverbsNcclWouldUseSockets", "SysverbsTextfileStale")

pytestmark = pytest.mark.oracle


def _promtool() -> str:
    path: Optional[str] = shutil.which("promtool")
    require(None if path else "no promtool on PATH (apt-get install prometheus)",
            "promtool (Prometheus' rule checker)")
    assert path is not None
    return path


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_promtool(), *argv], capture_output=True, text=True, timeout=120)


def test_promtool_checks_the_rules() -> None:
    p = _run("check", "rules", str(RULES))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 4 rules found" in p.stdout


def test_promtool_unit_tests_pass() -> None:
    p = _run("test", "rules", str(TESTS))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


def test_the_four_alerts_each_with_cases_and_what_to_do() -> None:
    """rules.yml has the spec's four alerts in group ``sysverbs``; each has a summary and
    a description naming the command to run, and cases in the test file that expect it
    to fire and cases that expect it silent."""
    text = RULES.read_text()
    assert re.findall(r"^      - alert: (\w+)$", text, re.M) == list(ALERTS)
    assert re.search(r"^  - name: sysverbs$", text, re.M)
    tests = TESTS.read_text()
    for block in text.split("      - alert: ")[1:]:
        name = block.split("\n", 1)[0]
        assert "summary:" in block and "description:" in block, name
        desc = block[block.index("description:"):]
        assert re.search(r"`sysverbs (doctor|nccl check|metrics)", desc), name
        cases = re.findall(rf"alertname: {name}\n +exp_alerts:(.*?)(?=\n      - |\n  - |\Z)",
                           tests, re.S)
        assert any(c.strip() == "[]" for c in cases), f"{name}: no silent case"
        assert any("exp_labels" in c for c in cases), f"{name}: no firing case"


def test_rules_are_package_data() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^"sysverbs\.fleet" = \["\*\.yml"\]$', text, re.M)


#: Rules a little wrong, each caught by a case of the test file: no per-host count (one
#: alert per vanished device), no discovery guard, no 5 minutes, any textfile, sockets
#: on hosts without RDMA devices.
MUTATIONS = [
    ("count by (instance) (", "sum by (instance, device) ("),
    ('collector="discovery"} == 1)', 'collector="discovery"} >= 0)'),
    ("        for: 5m\n", ""),
    ("sysverbs\\\\.prom", ".*"),
    ("and on (instance) sysverbs_rdma_device_info", "or on (instance) vector(0) == 1"),
    ("sysverbs_rdma_device_info[1h]", "sysverbs_rdma_device_info[5m]"),
]


@pytest.mark.parametrize("old,new", MUTATIONS, ids=[m[1][:30] for m in MUTATIONS])
def test_a_wrong_rule_fails_the_cases(old: str, new: str, tmp_path: Path) -> None:
    text = RULES.read_text()
    assert old in text
    (tmp_path / "sysverbs" / "fleet").mkdir(parents=True)
    (tmp_path / "tests" / "data").mkdir(parents=True)
    (tmp_path / "sysverbs" / "fleet" / "rules.yml").write_text(text.replace(old, new))
    test_file = tmp_path / "tests" / "data" / TESTS.name
    shutil.copy(TESTS, test_file)
    p = _run("check", "rules", str(tmp_path / "sysverbs" / "fleet" / "rules.yml"))
    assert p.returncode == 0, p.stdout + p.stderr  # still a valid rule file
    p = _run("test", "rules", str(test_file))
    assert p.returncode == 1 and "FAILED" in p.stdout + p.stderr, (old, new, p.stdout)

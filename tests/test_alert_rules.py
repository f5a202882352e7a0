"""sysverbs' alert rules (sysverbs/fleet/rules.yml) against the real Prometheus: Debian's
``promtool`` checks the file (``promtool check rules``) and runs its unit tests
(tests/data/alert_rules_test.yml, ``promtool test rules``): each alert fires when it
should and stays silent when it should not, with the exact labels and annotations.  A
mutated rule file fails those tests (the cases can tell a wrong rule from the right one).

Skips without promtool (Debian's ``prometheus`` package), fails under CI=true.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "sysverbs" / "fleet" / "rules.yml"
TESTS = ROOT / "tests" / "data" / "alert_rules_test.yml"
ALERTS = ("SysverbsRdmaDeviceUnusable", "SysverbsRdmaDevicesDisappeared",
          "SysverbsNcclWouldUseSockets", "SysverbsMemlockLimited", "SysverbsCollectorFailed",
          "SysverbsTextfileStale", "SysverbsPcieLinkDegraded", "SysverbsGpuDirectRdmaOff",
          "SysverbsRdmaConfinement")

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
    records = len(re.findall(r"^      - record: ", RULES.read_text(), re.M))  # the fleet view
    assert records == 5 and f"SUCCESS: {len(ALERTS) + records} rules found" in p.stdout


def test_promtool_unit_tests_pass() -> None:
    p = _run("test", "rules", str(TESTS))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


def test_the_alerts_each_with_cases_and_what_to_do() -> None:
    """rules.yml has the alerts in group ``sysverbs``; each has a summary and
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
#: on hosts without RDMA devices, a finite memlock without the host problem (the exporter
#: has CAP_IPC_LOCK), 5 minutes for memlock, one collector only, a host problem that outlives
#: its series, the reasons listed with their 0s.
MUTATIONS = [
    ("count by (instance) (", "sum by (instance, device) ("),
    ('collector="discovery"} == 1)', 'collector="discovery"} >= 0)'),
    ("        for: 5m\n", ""),
    ("sysverbs\\\\.prom", ".*"),
    ("and on (instance) sysverbs_rdma_device_info", "or on (instance) vector(0) == 1"),
    ("sysverbs_rdma_device_info[1h]", "sysverbs_rdma_device_info[5m]"),
    ("          and on (instance)\n            max by",
     "          or on (instance)\n            max by"),
    ("        for: 15m\n", "        for: 5m\n"),
    ("expr: sysverbs_collector_success == 0",
     'expr: sysverbs_collector_success{collector="discovery"} == 0'),
    # a problem that stays an hour after its series went (it must clear with the series)
    ('max by (instance) (sysverbs_rdma_host_problem{reason=~"memlock|memlock_low"})',
     'max by (instance) (max_over_time(sysverbs_rdma_host_problem'
     '{reason=~"memlock|memlock_low"}[1h]))'),
    # the reasons listed whatever their value (--detail's 0s too)
    ('== 1" $labels.instance $labels.device', '>= 0" $labels.instance $labels.device'),
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


# ------------------------------------------------------- the real scrapes of the fixtures

#: How long the scraped values are held, and when every alert is evaluated: past every
#: ``for:`` of the rules.
_HELD_MINUTES = 40


def _clean_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), LC_ALL="C.UTF-8")
    for name in [k for k in env if k.startswith("NCCL_")] + ["SYSFS_PATH"]:
        env.pop(name, None)
    return env


def _scrape(fixture: str, env: Optional[dict[str, str]] = None) -> str:
    """``sysverbs metrics --fixture NAME``'s text exposition, from the command itself."""
    p = subprocess.run([sys.executable, "-m", "sysverbs", "metrics", "--fixture", fixture],
                       capture_output=True, text=True, env={**_clean_env(), **(env or {})},
                       timeout=120)
    assert p.returncode == 0, (fixture, p.stderr)
    return p.stdout


def _in_process(monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str]:
    """The command's exit status and stdout, run in this process (the same ``main()`` as
    ``python -m sysverbs``, without an interpreter's start for each of 60 runs)."""
    from sysverbs.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with monkeypatch.context() as m:
        for name in set(os.environ) - set(_clean_env()):
            m.delenv(name)
        m.setattr(sys, "stdout", out)
        rc = main(list(argv))
        out.flush()
    return rc, out.buffer.getvalue().decode()  # type: ignore[attr-defined]


def _series(instance: str, exposition: str) -> list[dict[str, str]]:
    """promtool's input series for one scrape held for :data:`_HELD_MINUTES`, the scrape
    parsed by prometheus_client's own parser (``job``/``instance`` added as Prometheus'
    scrape does)."""
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    for family in text_string_to_metric_families(exposition):
        for s in family.samples:
            labels = {"job": "sysverbs", "instance": instance, **s.labels}
            text = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))
            value = "Inf" if s.value == math.inf else repr(float(s.value))
            out.append({"series": f"{s.name}{{{text}}}",
                        "values": " ".join([value] * (_HELD_MINUTES + 1))})
    return out


def _fired(scrapes: dict[str, str], tmp_path: Path) -> str:
    """Every alert evaluated on the scrapes with promtool, each expected silent: promtool's
    output ("" when none fired)."""
    test = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [s for name, text in scrapes.items() for s in _series(name, text)],
        "alert_rule_test": [{"eval_time": f"{_HELD_MINUTES}m", "alertname": a,
                             "exp_alerts": []} for a in ALERTS]}]}
    path = tmp_path / "scrapes_test.yml"
    path.write_text(json.dumps(test, indent=1))  # JSON is YAML
    p = _run("test", "rules", str(path))
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return "" if p.returncode == 0 else p.stdout + p.stderr


def test_no_shipped_alert_fires_on_a_healthy_fixture(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The scrape of every fixture ``sysverbs doctor --fixture`` passes (exit 0; efa and
    smi among them), held for 40 minutes: promtool fires none of the shipped alerts.  EFA's
    NCCL transport is aws-ofi-nccl's (``ofi``), the SMI device has no usable series nor
    problem.  efa's and smi's scrapes come from ``python -m sysverbs metrics``, the others
    from the same ``main()`` in this process."""
    from sysverbs.testing.host import fixture_names

    _promtool()
    healthy = [n for n in fixture_names()
               if _in_process(monkeypatch, "doctor", "--fixture", n)[0] == 0]
    assert {"efa", "smi", "gpu-dgx-b200", "cxgb4"} <= set(healthy), healthy
    scrapes = {}
    for name in healthy:
        if name in ("efa", "smi"):
            scrapes[name] = _scrape(name)
        else:
            rc, scrapes[name] = _in_process(monkeypatch, "metrics", "--fixture", name)
            assert rc == 0, name
    assert 'sysverbs_nccl_transport{transport="ofi"} 1.0' in scrapes["efa"]
    assert 'sysverbs_nccl_transport{transport="socket"} 0.0' in scrapes["efa"]
    assert 'sysverbs_rdma_device_usable{device="smi1"}' not in scrapes["smi"]
    assert re.search(r'device_problem\{device="smi1",reason="\w+"\} 1', scrapes["smi"]) is None
    assert _fired(scrapes, tmp_path) == ""


def test_the_same_check_sees_an_alert_that_fires(tmp_path: Path) -> None:
    """The check above can fail: efa with NCCL's net plugin turned off
    (``NCCL_NET_PLUGIN=none``: NCCL's IB transport skips EFA's devices, so sockets) pages
    SysverbsNcclWouldUseSockets, and only that."""
    _promtool()
    scrape = _scrape("efa", {"NCCL_NET_PLUGIN": "none"})
    assert 'sysverbs_nccl_transport{transport="socket"} 1.0' in scrape
    out = _fired({"efa": scrape}, tmp_path)
    assert "alertname: SysverbsNcclWouldUseSockets" in out
    assert re.findall(r"alertname: (\w+)", out) == ["SysverbsNcclWouldUseSockets"]

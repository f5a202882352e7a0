"""The alert rules of the host findings (sysverbs/fleet/rules.yml: SysverbsPcieLinkDegraded,
SysverbsGpuDirectRdmaOff, SysverbsRdmaConfinement) against the real Prometheus rule
engine: rules a little wrong fail their promtool cases (tests/data/alert_rules_test.yml),
and a real scrape of a host without GPUDirect RDMA pages SysverbsGpuDirectRdmaOff and
nothing else.  tests/test_alert_rules.py holds them silent on every healthy fixture.

Skips without promtool (Debian's ``prometheus`` package), fails under CI=true."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest

from sysverbs import testing
from sysverbs.fleet import metrics
from sysverbs.fleet.facts import collect_facts
from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "sysverbs" / "fleet" / "rules.yml"
TESTS = ROOT / "tests" / "data" / "alert_rules_test.yml"
OURS = ("SysverbsPcieLinkDegraded", "SysverbsGpuDirectRdmaOff", "SysverbsRdmaConfinement")

pytestmark = pytest.mark.oracle


def _promtool(*argv: str) -> subprocess.CompletedProcess[str]:
    path: Optional[str] = shutil.which("promtool")
    require(None if path else "no promtool on PATH (apt-get install prometheus)",
            "promtool (Prometheus' rule checker)")
    assert path is not None
    return subprocess.run([path, *argv], capture_output=True, text=True, timeout=120)


#: Each caught by a case: the GDR alert on hosts whose NCCL uses sockets, --detail's 0s
#: of acs_redirect counted, only host problems (a device cgroup's are device problems).
MUTATIONS = [
    ('and on (instance) (sysverbs_nccl_transport{transport="ib"} == 1)',
     'and on (instance) (sysverbs_nccl_transport{transport="ib"} >= 0)'),
    ('reason=~"acs_redirect|iommu_translated"} == 1\n          )',
     'reason=~"acs_redirect|iommu_translated"} >= 0\n          )'),
    ('{__name__=~"sysverbs_rdma_(host|device)_problem",',
     '{__name__=~"sysverbs_rdma_host_problem",'),
]


@pytest.mark.parametrize("old,new", MUTATIONS, ids=[str(i) for i in range(len(MUTATIONS))])
def test_a_wrong_rule_fails_the_cases(old: str, new: str, tmp_path: Path) -> None:
    text = RULES.read_text()
    assert text.count(old) == 1, old
    (tmp_path / "sysverbs" / "fleet").mkdir(parents=True)
    (tmp_path / "tests" / "data").mkdir(parents=True)
    (tmp_path / "sysverbs" / "fleet" / "rules.yml").write_text(text.replace(old, new))
    shutil.copy(TESTS, tmp_path / "tests" / "data" / TESTS.name)
    p = _promtool("test", "rules", str(tmp_path / "tests" / "data" / TESTS.name))
    assert p.returncode == 1 and "FAILED" in p.stdout + p.stderr, (old, new, p.stdout)


def test_a_real_scrape_without_gdr_pages_only_that(tmp_path: Path) -> None:
    """gpu-pcie-2socket with the proprietary NVIDIA module and no nvidia_peermem, NCCL on
    its IB transport: the scrape, held 40 minutes, fires SysverbsGpuDirectRdmaOff alone."""
    root = Path(testing.materialize("gpu-pcie-2socket", tmp_path / "h").sysfs).parent
    for rel, text in (("sys/module/nvidia/taint", "POE\n"),
                      ("proc/sys/kernel/osrelease", "6.1.0-25-amd64\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    facts = collect_facts(sysfs_path=str(root / "sys"), dev_dir=str(root / "dev/infiniband"),
                          providers="builtin", source="sysfs", environ={},
                          recorded=True)
    from prometheus_client.parser import text_string_to_metric_families

    series = []
    for family in text_string_to_metric_families(metrics.render(facts).decode()):
        for s in family.samples:
            labels = {"job": "sysverbs", "instance": "gpu1:9105", **s.labels}
            text = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))
            value = "Inf" if s.value == math.inf else repr(float(s.value))
            series.append({"series": f"{s.name}{{{text}}}", "values": f"{value}x40"})
    alerts = re.findall(r"^      - alert: (\w+)$", RULES.read_text(), re.M)
    assert set(OURS) <= set(alerts)
    test = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [{"eval_time": "40m", "alertname": a, "exp_alerts": []}
                            for a in alerts]}]}
    path = tmp_path / "scrape_test.yml"
    path.write_text(json.dumps(test))
    p = _promtool("test", "rules", str(path))
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.findall(r"alertname: (\w+)", p.stdout + p.stderr) == ["SysverbsGpuDirectRdmaOff"]

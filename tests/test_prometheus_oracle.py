"""A real Prometheus (Debian's 2.42) scrapes ``sysverbs metrics --listen`` on the
gpu-dgx-b200 fixture (and ``--listen --detail``, as the job ``detail``), and a real
node_exporter (1.5) serves the file ``sysverbs metrics --textfile`` wrote: what
Prometheus stores, answers through its query API and evaluates the shipped alert rules
on, and what node_exporter accepts and serves again, are the samples sysverbs wrote
(tests/prom.py starts both on 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import sysverbs
from sysverbs.fleet.facts import DEVICE_REASONS, HOST_REASONS
from sysverbs.fleet.metrics import rules_path
from tests import prom
from tests.conftest import require

pytestmark = pytest.mark.oracle

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = "gpu-dgx-b200"
#: Prometheus' own Accept header (2.42's scrape.go): OpenMetrics first.
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-"
                     "text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
#: Per scrape, not per host: compared for presence only.
DURATION = "sysverbs_collector_duration_seconds"
Sample = tuple[str, frozenset[tuple[str, str]], float]


class Stack(NamedTuple):
    prometheus: prom.Prometheus
    exporter: str            # sysverbs metrics --listen's base URL
    node: prom.NodeExporter
    textfile: Path
    json_doc: dict[str, Any]
    detail_doc: dict[str, Any]  # sysverbs metrics --json --detail


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), LC_ALL="C.UTF-8")
    for name in ("SYSFS_PATH", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_CONF_FILE"):
        env.pop(name, None)
    return env


def _sv(*argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                          env=_env(), timeout=120, check=True)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    for name in (prom.PROMETHEUS, prom.NODE_EXPORTER):
        require(prom.unavailable(name), f"{name} (Debian's {name} package)")
    textdir = tmp_path_factory.mktemp("textfile")
    os.chmod(textdir, 0o755)
    _sv("metrics", "--fixture", FIXTURE, "--textfile", str(textdir))
    doc = json.loads(_sv("metrics", "--json", "--fixture", FIXTURE).stdout)
    detail = json.loads(_sv("metrics", "--json", "--detail", "--fixture", FIXTURE).stdout)
    port, port2 = prom.free_ports(2)
    listen, listen2 = (subprocess.Popen(
        [sys.executable, "-m", "sysverbs", "metrics", "--listen", f"127.0.0.1:{n}",
         "--fixture", FIXTURE, *more], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=_env()) for n, more in ((port, ()), (port2, ("--detail",))))
    url = f"http://127.0.0.1:{port}"
    try:
        prom.wait_http(url + "/metrics", proc=listen)
        prom.wait_http(f"http://127.0.0.1:{port2}/metrics", proc=listen2)
        rules = [rules_path()] if os.path.exists(rules_path()) else []
        with prom.NodeExporter(textdir) as node, prom.Prometheus(
                [f"127.0.0.1:{port}", f"127.0.0.1:{node.port}", f"127.0.0.1:{port2}"],
                jobs=["sysverbs", "node", "detail"], rule_files=rules) as p:
            p.wait_for('count(sysverbs_rdma_device_info{job="sysverbs"}) and '
                       'count(sysverbs_rdma_device_info{job="node"}) and '
                       'count(sysverbs_rdma_device_info{job="detail"})', bool, timeout=60)
            yield Stack(p, url, node, textdir / "sysverbs.prom", doc, detail)
    finally:
        rc, rc2 = prom.stop(listen), prom.stop(listen2)
    assert rc == rc2 == 0, "sysverbs metrics --listen did not stop with 0 on SIGTERM"


def _value(v: Any) -> float:
    return float(str(v).replace("Inf", "inf"))


def _stored(stack: Stack, job: str) -> set[Sample]:
    """Every sysverbs_ series Prometheus holds for the job, without its target labels."""
    rows = stack.prometheus.query(f'{{__name__=~"sysverbs_.+",job="{job}"}}')
    out = set()
    for row in rows:
        labels = dict(row["metric"])
        name = labels.pop("__name__")
        assert labels.pop("job") == job and labels.pop("instance")
        out.add((name, frozenset(labels.items()),
                 0.0 if name == DURATION else _value(row["value"][1])))
    return out


def _documented(doc: dict[str, Any]) -> set[Sample]:
    """The document's samples as Prometheus keeps them: a label whose value is empty is
    no label at all (``netdev=""``, ``pcie_root=""`` are absent in storage)."""
    return {(f["name"], frozenset((k, v) for k, v in s["labels"].items() if v),
             0.0 if f["name"] == DURATION else _value(s["value"]))
            for f in doc["families"] for s in f["samples"]}


def test_prometheus_stores_every_sample_written(stack: Stack) -> None:
    """Scraped over HTTP (OpenMetrics, as Prometheus asks for it), every series and
    value of the page is what Prometheus stores, and nothing else."""
    stored = _stored(stack, "sysverbs")
    assert stored == _documented(stack.json_doc)
    assert 100 < len(stored) <= 150  # issue 45: at most 150 series per node by default
    assert _stored(stack, "detail") == _documented(stack.detail_doc)
    assert len(_stored(stack, "detail")) > 600
    assert stack.prometheus.targets_health() == {"sysverbs": "up", "node": "up",
                                                 "detail": "up"}


def test_the_default_page_is_the_detail_less_its_constants(stack: Stack) -> None:
    """What Prometheus holds of the default exporter is what it holds of the --detail one
    less the problems that are 0, the GID counts of types the port's link layer cannot
    have (all 0 here) and the GPU/NIC pairs; the two agree on every series both have."""
    default, detail = _stored(stack, "sysverbs"), _stored(stack, "detail")
    left = detail - default
    assert default < detail
    assert {x[0] for x in left} == {"sysverbs_rdma_device_problem", "sysverbs_rdma_host_problem",
                                    "sysverbs_rdma_port_gids", "sysverbs_gpu_nic_link"}
    assert all(x[2] == 0 for x in left if x[0] != "sysverbs_gpu_nic_link")
    assert [x for x in default if x[0].endswith("_problem") and x[2] != 1] == []


def test_the_query_api_answers(stack: Stack) -> None:
    p = stack.prometheus

    def one(expr: str) -> float:
        (row,) = p.query(expr)
        return _value(row["value"][1])

    assert one('count(sysverbs_rdma_device_usable{job="sysverbs"})') == 18
    assert one('sum(sysverbs_rdma_device_usable{job="sysverbs"})') == 18
    assert p.query('sysverbs_gpu_nic_link{job="sysverbs"}') == []  # --detail only
    assert one('count(sysverbs_gpu_nic_link{job="detail"})') == 144
    assert one('sysverbs_gpu_nic_link{job="detail",gpu="0",device="mlx5_4"}') == 1
    (link,) = p.query('sysverbs_gpu_nic_link{job="detail",gpu="0",device="mlx5_4"}')
    assert link["metric"]["link"] == "PXB" and link["metric"]["pci_bus_id"] == \
        "00000000:1B:00.0"
    assert one('count(sysverbs_gpu_nic_link{job="detail",link="PXB"})') == 8
    assert one('count(sysverbs_rdma_device_problem{job="detail"})') == 18 * len(DEVICE_REASONS)
    assert one('count(sysverbs_rdma_host_problem{job="detail"})') == len(HOST_REASONS)
    # by default a problem is a series only while found, with the same answer to == 1
    (problem,) = p.query('sysverbs_rdma_device_problem{job="sysverbs"}')
    assert (problem["metric"]["device"], problem["metric"]["reason"]) == ("irdma1", "port_down")
    assert {(r["metric"]["device"], r["metric"]["reason"]) for r in p.query(
        'sysverbs_rdma_device_problem{job="detail"} == 1')} == {("irdma1", "port_down")}
    (build,) = p.query('sysverbs_build_info{job="sysverbs"}')
    want = sysverbs.effective_options(providers="builtin", source="sysfs").rdma_core
    assert (build["metric"]["version"], build["metric"]["rdma_core"]) == (
        sysverbs.__version__, str(want))
    assert one('sum(sysverbs_collector_success{job="sysverbs"})') == 3
    assert one('sysverbs_nccl_transport{job="sysverbs",transport="ib"}') == 1
    # the info series join on device (and port) as docs/fleet.md shows
    joined = p.query('sysverbs_gpu_nic_assigned{job="sysverbs"} * on(instance, device) '
                     'group_left(numa_node, pcie_root) sysverbs_rdma_device_info')
    assert len(joined) == 8 and {r["metric"]["numa_node"] for r in joined} == {"0", "1"}
    ports = p.query('sysverbs_rdma_port_gids{job="detail",gid_type="ib"} * on(instance, '
                    'device, port) group_left(link_layer) sysverbs_rdma_port_info')
    assert len(ports) == 18
    assert {r["metric"]["link_layer"] for r in ports} == {"InfiniBand", "Ethernet"}
    # by default a port has its link layer's GID types: 14 IB ports, 4 RoCE ones
    ports = p.query('sysverbs_rdma_port_gids{job="sysverbs"} * on(instance, device, port) '
                    'group_left(link_layer) sysverbs_rdma_port_info')
    assert len(ports) == 14 + 2 * 4
    assert {(r["metric"]["gid_type"], r["metric"]["link_layer"]) for r in ports} == {
        ("ib", "InfiniBand"), ("roce_v1", "Ethernet"), ("roce_v2", "Ethernet")}


def test_node_exporter_serves_the_textfile(stack: Stack) -> None:
    """node_exporter's textfile collector takes the file (no scrape error, its mtime
    exported) and serves the same samples, which Prometheus then stores as from the
    exporter itself."""
    page = stack.node.metrics()
    served = prom.samples(page, "sysverbs_")
    written = prom.samples(stack.textfile.read_text())

    def stored_form(s: set[Sample]) -> set[Sample]:  # as _stored() and _documented()
        return {(x[0], frozenset((k, v) for k, v in x[1] if v),
                 0.0 if x[0] == DURATION else x[2]) for x in s}

    assert served == written
    assert stored_form(written) == _documented(stack.json_doc)
    assert ("node_textfile_scrape_error", frozenset(), 0.0) in prom.samples(page)
    assert any(name == "node_textfile_mtime_seconds" and
               dict(labels)["file"].endswith("/sysverbs.prom")
               for name, labels, _ in prom.samples(page))
    assert _stored(stack, "node") == stored_form(written)


def test_both_formats_pass(stack: Stack) -> None:
    """The exporter answers Prometheus' Accept with OpenMetrics, a plain GET with text
    0.0.4 (which promtool checks); the same samples either way."""
    status, headers, om = prom.http_get(stack.exporter + "/metrics",
                                        headers={"Accept": PROMETHEUS_ACCEPT})
    assert status == 200 and headers["Content-Type"].startswith(
        "application/openmetrics-text; version=1.0.0")
    assert om.endswith(b"# EOF\n") and b"# TYPE sysverbs_build info\n" in om
    status, headers, text = prom.http_get(stack.exporter + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert prom.promtool_check_metrics(text) == (0, "")


def test_the_shipped_rules_evaluate(stack: Stack) -> None:
    """Prometheus loads sysverbs metrics --rules' file and evaluates each rule on the
    real series without an error; on this healthy host nothing fires."""
    if not os.path.exists(rules_path()):
        pytest.skip("sysverbs/fleet/rules.yml is not written yet")
    p = stack.prometheus

    def evaluated(data: Any) -> bool:
        rules = [r for g in data["groups"] for r in g["rules"]]
        return bool(rules) and all(r.get("lastEvaluation", "").startswith("2") and
                                   not r["lastEvaluation"].startswith("0001") for r in rules)

    deadline = time.monotonic() + 30
    data = p.api("rules")
    while not evaluated(data) and time.monotonic() < deadline:
        time.sleep(0.2)
        data = p.api("rules")
    groups = {g["name"]: g for g in data["groups"]}
    assert "sysverbs" in groups
    for rule in groups["sysverbs"]["rules"]:
        assert rule["health"] == "ok" and rule.get("lastError", "") == "", rule
    assert p.api("alerts")["alerts"] == []  # not even pending

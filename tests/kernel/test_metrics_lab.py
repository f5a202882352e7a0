"""``sysverbs metrics`` on a real kernel, scraped by a real Prometheus with sysverbs' rules.

The kernel lab's ``metrics`` scenario (``scenario_metrics.py``) ran ``sysverbs metrics``
three times in the VM: with rxe0 and rxe1, after ``rdma link delete rxe1``, and after
rxe0 went too.  Here:

* each output lists the devices the kernel listed at that moment, and Debian's
  ``promtool check metrics`` finds nothing wrong in it;
* a tiny HTTP server on 127.0.0.1 serves the three outputs, in order, one per scrape (the
  last one repeated), to a real Prometheus (Debian's ``prometheus``) scraping every
  second with ``sysverbs/fleet/rules.yml`` loaded.  Through its query API, evaluated at
  each scrape's own timestamp (read back from ``up``), the expression of
  ``SysverbsRdmaDevicesDisappeared`` (read from rules.yml) is empty on the first scrape,
  one series for the instance with the value 1 on the first scrape after rxe1 is gone,
  and one series with the value 2 once both are gone; and the alert fires, once, for the
  instance.

Nothing waits on a sleep alone: the server counts the scrapes, and Prometheus scrapes a
target again only after it stored the previous scrape, so once the server has answered
scrape N+1, scrapes 1..N are queryable.

Skips without the lab (or fails under CI=true, tests/kernel/conftest.py), and without
``prometheus``/``promtool`` (Debian's ``prometheus`` package; fails under CI=true).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests import prom
from tests.conftest import require
from tests.kernel import parsing
from tests.kernel.lab import LabResults
from tests.kernel.scenario_metrics import DEVICES, RUNS
from tests.prom import Prometheus

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(3600)]

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "sysverbs" / "fleet" / "rules.yml"
ALERT = "SysverbsRdmaDevicesDisappeared"
#: How many devices are gone at each run (RUNS' deletions, summed).
GONE = [sum(len(g) for _, g in RUNS[: i + 1]) for i in range(len(RUNS))]
WAIT = 60.0


def where(lab: LabResults) -> str:
    return f"\n(kernel lab logs and results: {lab.workdir})"


def metrics_runs(lab: LabResults) -> list[tuple[list[str], str]]:
    """For each run, in order: the devices ``ls /sys/class/infiniband`` showed before it,
    and what ``sysverbs metrics`` printed (set-up steps and exit statuses checked)."""
    scen = lab.scenario("metrics")
    listed: list[str] = []
    out: list[tuple[list[str], str]] = []
    for e in scen["events"]:
        if e["op"] == "crash":
            pytest.fail(f"runner crashed: {e['error']}{where(lab)}", pytrace=False)
        if e["op"] in ("sh", "py") and e["rc"] != 0:
            pytest.fail(f"step failed ({e['rc']}): {e['cmd']!r}: {e['stderr']}{where(lab)}",
                        pytrace=False)
        if e["op"] == "py":
            failed = [line for line in e["stdout"].splitlines() if " FAILED " in line]
            assert not failed, f"the VM could not import the exporter: {failed}{where(lab)}"
        if e["op"] == "sh" and "ls /sys/class/infiniband" in e["cmd"]:
            listed = e["stdout"].split()
        if e["op"] == "cli":
            assert e["rc"] == 0, f"{e['name']}: exit {e['rc']}: {e['stderr']}{where(lab)}"
            out.append((listed, parsing.utf8(e["stdout"])))
    assert len(out) == len(RUNS), where(lab)
    return out


def _series(text: str, name: str) -> list[dict[str, str]]:
    """The label sets of the samples named ``name`` in an exposition."""
    return sorted((dict(labels) for n, labels, _ in prom.samples(text, name) if n == name),
                  key=lambda labels: sorted(labels.items()))


def test_each_output_shows_the_devices_the_kernel_showed(lab: LabResults) -> None:
    """The three runs saw what ``ls /sys/class/infiniband`` saw just before each: both
    devices, rxe0, none (so that the scrapes below are about something); discovery
    worked every time (the alert holds only while it does)."""
    runs = metrics_runs(lab)
    assert [sorted(listed) for listed, _ in runs] == [[d for d, _ in DEVICES], ["rxe0"], []]
    for listed, text in runs:
        devices = [s["device"] for s in _series(text, "sysverbs_rdma_device_info")]
        assert devices == sorted(listed), text + where(lab)
        assert ("sysverbs_collector_success", frozenset({("collector", "discovery")}), 1.0) \
            in prom.samples(text, "sysverbs_collector_success"), text + where(lab)


@pytest.mark.parametrize("run", range(len(RUNS)), ids=[n for n, _ in RUNS])
def test_promtool_checks_the_vm_output(lab: LabResults, run: int) -> None:
    text = metrics_runs(lab)[run][1]
    require(prom.unavailable(prom.PROMTOOL), "promtool (Debian's prometheus package)")
    assert prom.promtool_check_metrics(text.encode()) == (0, ""), where(lab)


# -- a real Prometheus scraping the VM's outputs ---------------------------------------------


class Scrapes(ThreadingHTTPServer):
    """Serves ``texts`` in order, one per request, the last one repeated."""

    daemon_threads = True

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.served = 0
        self.cond = threading.Condition()
        super().__init__(("127.0.0.1", 0), _Handler)

    def next_text(self) -> str:
        with self.cond:
            text = self.texts[min(self.served, len(self.texts) - 1)]
            self.served += 1
            self.cond.notify_all()
        return text

    def wait_served(self, n: int, timeout: float) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.served >= n, timeout):
                raise AssertionError(f"Prometheus scraped {self.served} times in {timeout} s, "
                                     f"not {n}")


class _Handler(BaseHTTPRequestHandler):
    server: Scrapes

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = self.server.next_text().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def _at(prom: Prometheus, expr: str, at: str) -> list[dict[str, Any]]:
    """An instant query evaluated at the time ``at``."""
    result: list[dict[str, Any]] = prom.api("query", query=expr, time=at)["result"]
    return result


def _rule_expr(name: str) -> str:
    import yaml

    doc = yaml.safe_load(RULES.read_text())
    (expr,) = [r["expr"] for g in doc["groups"] for r in g["rules"] if r.get("alert") == name]
    assert isinstance(expr, str)
    return expr


def test_disappeared_alert_on_the_next_scrape(lab: LabResults) -> None:
    texts = [text for _, text in metrics_runs(lab)]
    require(prom.unavailable(prom.PROMETHEUS), "Prometheus")
    expr = _rule_expr(ALERT)
    server = Scrapes(texts)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"127.0.0.1:{server.server_address[1]}"
    try:
        with Prometheus([target], jobs=["sysverbs"], rule_files=[RULES]) as p:
            # scrape N+2 begins only after scrape N+1 was stored: N+1 scrapes to read back
            server.wait_served(len(texts) + 2, WAIT)
            (up,) = p.api("query", query='up{job="sysverbs"}[1h]')["result"]
            scrapes = up["values"][: len(texts) + 1]
            assert [v for _, v in scrapes] == ["1"] * (len(texts) + 1), up
            # one evaluation at each scrape's timestamp: the state just after that scrape
            stamps = [str(t) for t, _ in scrapes]
            seen = [_at(p, "count(sysverbs_rdma_device_info)", at) for at in stamps]
            counts = [int(r[0]["value"][1]) if r else 0 for r in seen]
            assert counts == [len(DEVICES) - g for g in [*GONE, GONE[-1]]], counts
            got = [_at(p, expr, at) for at in stamps]
            assert got[0] == [], f"before any device went: {got[0]}"
            for at, result, gone in zip(stamps[1:], got[1:], [*GONE[1:], GONE[-1]]):
                assert result == [{"metric": {"instance": target},
                                   "value": [float(at), str(gone)]}], (gone, result)
            # and the alert itself fires, once, for the instance (no `for`: at the next
            # rule evaluation)
            deadline = time.monotonic() + WAIT
            while True:
                firing = [a for a in p.api("alerts")["alerts"]
                          if a["labels"]["alertname"] == ALERT]
                if firing and firing[0]["state"] == "firing" or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert len(firing) == 1, firing
            assert firing[0]["state"] == "firing", firing
            assert firing[0]["labels"]["instance"] == target
            assert float(firing[0]["value"]) == GONE[-1]
    finally:
        server.shutdown()
        server.server_close()

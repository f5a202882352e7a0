"""A simulated fleet of 200 nodes scraped by a real Prometheus (Debian's 2.42), with the
shipped rules (``for:`` shortened to seconds), on loopback.

Each distinct node (a bundled fixture, healthy or with a fault injected into a copy of
its tree) is rendered ONCE by the real ``sysverbs metrics`` code (``collect_facts``
with the DaemonSet's ``--no-open``, then ``render``); tests/fleet_serve.py answers 200
ports from one thread with those pages.  The faults: a device node missing, a port DOWN,
every port of a node DOWN, NCCL's IB transport disabled, GPUDirect RDMA off (NVIDIA's
proprietary module without nvidia_peermem), a PCIe link trained at half its width, a
device removed while the node is watched, an exporter that dies.  Checked through Prometheus'
HTTP API: every alert fires for exactly the injected faults and on no healthy node, the
recording rules give the fleet view (usable devices per node and role, NCCL's
fallbacks, the worst GPU/NIC class, the degraded links), and the head series of the
whole fleet, extrapolated in docs/fleet.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, NamedTuple

import pytest

from sysverbs.fleet.facts import LINKS, HostFacts, collect_facts
from sysverbs.fleet.metrics import render, rules_path
from sysverbs.testing.cache import fixture_tree
from tests import prom
from tests.conftest import fast_tmpdir, require
from tests.fleet_serve import Fleet

pytestmark = pytest.mark.oracle

ALERTS_FOR = re.compile(r"^(\s+for: )\d+m$", re.M)
#: How long an alert's condition must hold here (the shipped rules say minutes).
FOR = "2s"


def _ports_down(root: Path, devices: tuple[str, ...]) -> None:
    ib = root / "sys/class/infiniband"
    for name in devices or tuple(sorted(os.listdir(ib))):
        for port in (ib / name / "ports").iterdir():
            (port / "state").write_text("1: DOWN\n")
            (port / "phys_state").write_text("3: Disabled\n")


def _uverbs(root: Path, device: str) -> Path:
    verbs = root / "sys/class/infiniband_verbs"
    return next(e for e in verbs.iterdir()
                if e.is_symlink() and (e / "ibdev").read_text().strip() == device)


def _no_dev_node(root: Path, device: str) -> None:
    """The device's /dev/infiniband node is gone (a container without it)."""
    (root / "dev/infiniband" / _uverbs(root, device).name).unlink()


def _remove(root: Path, device: str) -> None:
    """What a failed probe leaves: the PCI function without its RDMA device."""
    entry = _uverbs(root, device)
    shutil.rmtree(entry.resolve())
    entry.unlink()
    (root / "dev/infiniband" / entry.name).unlink()
    link = root / "sys/class/infiniband" / device
    shutil.rmtree(link.resolve())
    link.unlink()


def _half_width(root: Path, device: str) -> None:
    """The device's PCIe link trained at x8 where both ends support x16."""
    function = (root / "sys/class/infiniband" / device / "device").resolve()
    for end in (function, function.parent):
        for name, value in (("max_link_speed", "32.0 GT/s PCIe"), ("max_link_width", "16"),
                            ("current_link_speed", "32.0 GT/s PCIe"),
                            ("current_link_width", "8")):
            (end / name).write_text(value + "\n")


def _gdr_off(root: Path) -> None:
    """NVIDIA's proprietary module loaded without nvidia_peermem: no GPUDirect RDMA."""
    (root / "sys/module/nvidia").mkdir(parents=True)
    (root / "sys/module/nvidia/taint").write_text("POE\n")


class Node(NamedTuple):
    """One distinct page: a fixture, its fault (``""``: healthy), how many nodes of the
    fleet serve it, their role, what injects the fault into a copy of the tree, the
    environment NCCL reads."""

    fixture: str
    fault: str
    count: int
    role: str
    change: Callable[[Path], None] | None = None
    environ: tuple[tuple[str, str], ...] = ()


#: 200 nodes: 190 healthy, 10 with a fault.  ``gone`` and ``dies`` are healthy until
#: the test removes a device from them or closes their socket.
FLEET = [
    Node("gpu-dgx-b200", "", 60, "gpu"),
    Node("gpu-hgx-h100", "", 52, "gpu"),
    Node("gpu-dgx-a100", "", 20, "gpu"),
    Node("efa", "", 10, "gpu"),
    Node("mlx5-cx7", "", 38, "storage"),
    Node("empty", "", 10, "cpu"),
    Node("mlx5-cx7", "no_dev_node", 2, "storage", lambda r: _no_dev_node(r, "mlx5_3")),
    Node("mlx5-cx7", "port_down", 1, "storage", lambda r: _ports_down(r, ("mlx5_2",))),
    Node("gpu-pcie-2socket", "all_ports_down", 1, "gpu", lambda r: _ports_down(r, ())),
    Node("mlx5-cx7", "nccl_ib_disabled", 1, "storage", environ=(("NCCL_IB_DISABLE", "1"),)),
    Node("gpu-pcie-2socket", "gdr_off", 1, "gpu", _gdr_off),
    Node("mlx5-cx7", "degraded_link", 1, "storage", lambda r: _half_width(r, "mlx5_4")),
    Node("mlx5-cx7", "gone", 2, "storage"),
    Node("gpu-dgx-b200", "dies", 1, "gpu"),
]
GONE = ("mlx5-cx7", "mlx5_4")
assert sum(n.count for n in FLEET) == 200


def _facts(root: str, environ: dict[str, str]) -> HostFacts:
    return collect_facts(sysfs_path=os.path.join(root, "sys"),
                         dev_dir=os.path.join(root, "dev/infiniband"),
                         proc_path=os.path.join(root, "proc"), recorded=True,
                         probe_open=False, environ=environ, source="sysfs",
                         providers="builtin", rdma_core="44")


def _tree(tmp: Path, node: Node) -> str:
    """The fixture's cached tree, or a copy with the fault injected."""
    tree = fixture_tree(node.fixture)
    if node.change is None:
        return tree.root
    copy = tmp / f"{node.fixture}-{node.fault}"
    shutil.copytree(tree.root, copy, symlinks=True)
    node.change(copy)
    return str(copy)


class Target(NamedTuple):
    port: int
    node: Node
    facts: HostFacts

    @property
    def instance(self) -> str:
        return f"127.0.0.1:{self.port}"


class Sim(NamedTuple):
    prometheus: prom.Prometheus
    fleet: Fleet
    targets: list[Target]
    gone_facts: HostFacts
    head_series: dict[str, Any]  # status/tsdb once the whole fleet was scraped


class FleetPrometheus(prom.Prometheus):
    """One job ``sysverbs`` whose targets carry their ``node_role``; the rules given."""

    def __init__(self, roles: dict[str, list[str]], rules: Path) -> None:
        super().__init__([], rule_files=[rules])
        self.roles = roles

    def _argv(self) -> list[str]:
        argv = super()._argv()
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                             "evaluation_interval": "1s"},
                  "rule_files": self.rule_files,
                  "scrape_configs": [{"job_name": "sysverbs", "static_configs": [
                      {"targets": targets, "labels": {"node_role": role}}
                      for role, targets in sorted(self.roles.items())]}]}
        (self.dir / "prometheus.yml").write_text(json.dumps(config, indent=2))
        return argv


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    require(prom.unavailable(prom.PROMETHEUS), "prometheus (Debian's prometheus package)")
    with fast_tmpdir("sv-fleet-") as tmp:
        yield from _sim(tmp)


def _sim(tmp: Path) -> Iterator[Sim]:
    t0 = time.monotonic()
    rules = tmp / "rules.yml"
    rules.write_text(ALERTS_FOR.sub(rf"\g<1>{FOR}", Path(rules_path()).read_text()))
    pages: dict[Node, tuple[bytes, HostFacts]] = {}
    for node in FLEET:
        facts = _facts(_tree(tmp, node), dict(node.environ))
        pages[node] = (render(facts), facts)
    gone = Node(GONE[0], "gone_now", 0, "storage", lambda r: _remove(r, GONE[1]))
    gone_facts = _facts(_tree(tmp, gone), {})
    print(f"\npages rendered in {time.monotonic() - t0:.1f} s")
    with Fleet(sum(n.count for n in FLEET)) as fleet:
        ports = iter(fleet.ports)
        targets = [Target(next(ports), node, pages[node][1])
                   for node in FLEET for _ in range(node.count)]
        roles: dict[str, list[str]] = {}
        for t in targets:
            fleet.pages[t.port] = pages[t.node][0]
            roles.setdefault(t.node.role, []).append(t.instance)
        with FleetPrometheus(roles, rules) as p:
            for expr in ("count(sysverbs_build_info)",  # every node scraped, every
                         "count(instance:sysverbs_rdma_devices_usable:sum)"):  # rule run
                p.wait_for(expr, lambda r: bool(r) and r[0]["value"][1] == "200", timeout=30)
            print(f"all scraped at {time.monotonic() - t0:.1f} s")
            head = p.api("status/tsdb")
            sim = Sim(p, fleet, targets, gone_facts, head)
            # the fleet changes: a device goes from two nodes, an exporter dies
            for t in targets:
                if t.node.fault == "gone":
                    fleet.pages[t.port] = render(gone_facts)
                elif t.node.fault == "dies":
                    fleet.die(t.port)
            yield sim


def _alerts(p: prom.Prometheus, state: str) -> set[tuple[str, str, str]]:
    return {(r["metric"]["alertname"], r["metric"]["instance"], r["metric"].get("device", ""))
            for r in p.query(f'ALERTS{{alertstate="{state}"}}')}


#: Faults that alerts for doctor's findings page (docs/diagnose.md), expected where the
#: shipped rules have them: GPUDirect RDMA off, a degraded PCIe link.
FINDING_ALERTS = {"gdr_off": "SysverbsGpuDirectRdmaOff",
                  "degraded_link": "SysverbsPcieLinkDegraded"}


def _expected_alerts(targets: list[Target]) -> set[tuple[str, str, str]]:
    """What the faults must page, from the faults alone."""
    shipped = set(re.findall(r"^ +- alert: (\w+)$", Path(rules_path()).read_text(), re.M))
    out = set()
    for t in targets:
        fault = t.node.fault
        if FINDING_ALERTS.get(fault) in shipped:
            out.add((FINDING_ALERTS[fault], t.instance,
                     t.facts.pcie_links[0].device if t.facts.pcie_links else ""))
        if fault == "no_dev_node":
            out.add(("SysverbsRdmaDeviceUnusable", t.instance, "mlx5_3"))
        elif fault in ("all_ports_down", "nccl_ib_disabled"):
            out.add(("SysverbsNcclWouldUseSockets", t.instance, ""))
        elif fault == "gone":
            out.add(("SysverbsRdmaDevicesDisappeared", t.instance, ""))
    return out


def test_each_alert_fires_for_exactly_the_faults(sim: Sim) -> None:
    """Once the faulted nodes have been scraped for the alerts' ``for:``, the firing
    alerts are exactly those of the faults, and nothing on a healthy node is even
    pending.  A DOWN port (doctor's warning: node_exporter's port state is the one to
    alert on) and a dead exporter (``up == 0``: its devices are not "disappeared") page
    nothing; GPUDirect RDMA off and a degraded link page where the rules have an alert
    for those findings (:data:`FINDING_ALERTS`)."""
    p = sim.prometheus
    expected = _expected_alerts(sim.targets)
    assert len(expected) >= 6
    dead = [t.instance for t in sim.targets if t.node.fault == "dies"]
    faulted = {t.instance for t in sim.targets if t.node.fault}

    def settled() -> None:  # a scrape that timed out on a loaded machine passes
        assert _alerts(p, "firing") == expected
        assert [r["metric"]["instance"] for r in p.query("up == 0")] == dead

    _eventually(settled, 30)
    for _ in range(3):  # three more evaluations: nothing else comes
        time.sleep(1)
        assert _alerts(p, "firing") <= expected
        assert {i for _, i, _ in _alerts(p, "pending")} <= faulted
    gone = {a["labels"]["instance"]: a["value"] for a in p.api("alerts")["alerts"]
            if a["labels"]["alertname"] == "SysverbsRdmaDevicesDisappeared"}
    assert sorted(gone.items()) == sorted(
        (t.instance, "1e+00") for t in sim.targets if t.node.fault == "gone")


def _eventually(check: Callable[[], None], timeout: float) -> None:
    """``check()`` until it passes (its last AssertionError after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _by_instance(p: prom.Prometheus, expr: str) -> dict[str, float]:
    return {r["metric"]["instance"]: float(r["value"][1]) for r in p.query(expr)}


def _worst(facts: HostFacts) -> float:
    link = facts.worst_assigned_link()
    return float(LINKS.index(link) + 1 if link in LINKS else len(LINKS) + 1)


def test_the_fleet_view(sim: Sim) -> None:
    """The recording rules, evaluated by Prometheus on the live scrapes, against what
    each node's page says and the faults injected."""
    p = sim.prometheus
    alive = [t for t in sim.targets if t.node.fault != "dies"]
    _eventually(lambda: _fleet_view(p, sim, alive), 30)


def _fleet_view(p: prom.Prometheus, sim: Sim, alive: list[Target]) -> None:
    facts = {t.instance: sim.gone_facts if t.node.fault == "gone" else t.facts for t in alive}
    usable = _by_instance(p, "instance:sysverbs_rdma_devices_usable:sum")
    assert usable == {i: float(sum(bool(d.usable) for d in f.devices))
                      for i, f in facts.items()}
    cx7 = next(t.facts for t in alive if t.node == FLEET[4])
    faults = {t.node.fault: usable[t.instance] for t in alive}
    # a DOWN port is doctor's warning, not an error: its device stays usable
    assert (faults["no_dev_node"], faults["port_down"], faults["gone"]) == (5, 6, 5)
    assert len(cx7.devices) == 6 and all(d.usable for d in cx7.devices)
    roles = {r["metric"]["node_role"]: float(r["value"][1])
             for r in p.query("node_role:sysverbs_rdma_devices_usable:sum")}
    assert roles == {role: sum(usable[t.instance] for t in alive if t.node.role == role)
                     for role in ("gpu", "storage", "cpu")}
    assert roles["cpu"] == 0 and roles["gpu"] > 1000
    fallback = _by_instance(p, "instance:sysverbs_nccl_socket_fallback:bool == 1")
    assert sorted(fallback) == sorted(t.instance for t in alive if t.node.fault in (
        "all_ports_down", "nccl_ib_disabled"))
    worst = _by_instance(p, "instance:sysverbs_gpu_nic_link_class:max")
    assert worst == {i: _worst(f) for i, f in facts.items() if f.assigned}
    assert {worst[t.instance] for t in alive if t.node == FLEET[0]} == {2.0}  # B200: PXB
    degraded = _by_instance(p, "instance:sysverbs_pcie_links_degraded:count > 0")
    assert degraded == {t.instance: 1.0 for t in alive if t.node.fault == "degraded_link"}


def test_head_series(sim: Sim) -> None:
    """What the fleet costs Prometheus: the head series once all 200 nodes were scraped
    (each page's samples, the 5 series of each scrape, the rules' outputs), per node and
    extrapolated (docs/fleet.md's numbers are this test's printout)."""
    series = int(sim.head_series["headStats"]["numSeries"])
    page = {n: sum(1 for line in render(t.facts).decode().splitlines()
                   if line and not line.startswith("#"))
            for n, t in {t.node: t for t in sim.targets}.items()}
    pages = sum(page[t.node] for t in sim.targets)
    # the 5 of each scrape (up, scrape_duration_seconds...), the rules' (at most 4 a node)
    assert pages + 5 * 200 <= series <= pages + 9 * 200 + 3, (series, pages)
    per_node = series / 200
    print(f"\nhead series: {series} for 200 nodes ({pages} of the pages, "
          f"{per_node:.1f} per node); 1,000 nodes: {math.ceil(per_node * 1000)}; "
          f"10,000: {math.ceil(per_node * 10000)}; pages: "
          + ", ".join(f"{n.fixture}{'/' + n.fault if n.fault else ''} {c}"
                      for n, c in page.items()))

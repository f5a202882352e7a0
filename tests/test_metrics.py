"""``sysverbs metrics`` and :mod:`sysverbs.fleet`: the exposition of every bundled fixture
passes the real ``promtool check metrics``, its names and labels are docs/fleet.md's,
every reason series is there, a broken device never blanks the others or the page, the
textfile is replaced atomically, and the command keeps the contract.

The real Prometheus and node_exporter reading it: tests/test_prometheus_oracle.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sysverbs import testing
from sysverbs.devices.diagnosis import CODES, diagnose
from sysverbs.fleet import metrics
from sysverbs.fleet.facts import DEVICE_REASONS, HOST_REASONS, HostFacts, collect_facts
from sysverbs.testing import fixture_names
from sysverbs.testing.cache import fixture_tree
from tests import prom, staging
from tests.conftest import fast_tmpdir, require

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = fixture_names()
#: docs/fleet.md's table: every family and its labels.
SPEC: dict[str, tuple[str, ...]] = {
    "sysverbs_build_info": ("version", "rdma_core"),
    "sysverbs_rdma_device_info": ("device", "node_type", "node_guid", "kernel_driver",
                                  "provider", "pci_address", "pcie_root", "numa_node"),
    "sysverbs_rdma_device_listed": ("device",),
    "sysverbs_rdma_device_usable": ("device",),
    "sysverbs_rdma_device_problem": ("device", "reason"),
    "sysverbs_rdma_host_problem": ("reason",),
    "sysverbs_rdma_port_info": ("device", "port", "link_layer", "netdev"),
    "sysverbs_rdma_port_gids": ("device", "port", "gid_type"),
    "sysverbs_rdma_cm_available": (),
    "sysverbs_memlock_limit_bytes": (),
    "sysverbs_gpu_nic_link": ("gpu", "pci_bus_id", "device", "link"),
    "sysverbs_gpu_nic_assigned": ("gpu", "pci_bus_id", "device", "port", "link"),
    "sysverbs_nccl_net_device_info": ("device", "port"),
    "sysverbs_nccl_transport": ("transport",),
    "sysverbs_nccl_gid_problem": ("device", "port", "reason"),
    "sysverbs_pcie_link_degraded": ("device", "role", "port", "what", "current", "capable"),
    "sysverbs_gdr_unavailable": (),
    "sysverbs_gdr_disabled_by_distance": ("gpu", "pci_bus_id", "device", "port", "path",
                                          "level"),
    "sysverbs_no_rdma_gid_for_address": ("device", "port"),
    "sysverbs_acs_redirect": ("device", "name", "peer", "peer_role", "switch", "evidence"),
    "sysverbs_iommu_translated": ("device", "name"),
    "sysverbs_collector_success": ("collector",),
    "sysverbs_collector_duration_seconds": ("collector",),
}
Sample = tuple[str, frozenset[tuple[str, str]], float]


@pytest.fixture(scope="module")
def promtool() -> None:
    require(prom.unavailable(prom.PROMTOOL), "promtool (Debian's prometheus package)")


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), LC_ALL="C.UTF-8")
    for name in ("SYSFS_PATH", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_CONF_FILE"):
        env.pop(name, None)
    return env


def sv(*argv: str, env: dict[str, str] | None = None,
       timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                          env=env or _env(), timeout=timeout)


def fixture_facts(name: str, **kw: Any) -> HostFacts:
    """What ``sysverbs metrics --fixture NAME`` collects, in this process."""
    host = fixture_tree(name)
    return collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
                         source="sysfs", recorded=True, environ={}, **kw)


def tree_facts(host: testing.FakeHost, **kw: Any) -> HostFacts:
    return collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
                         source="sysfs", recorded=True, environ={}, **kw)


def page(facts: HostFacts, detail: bool = False) -> str:
    return metrics.render(facts, detail).decode()


def by_device(samples: set[Sample]) -> dict[str, set[Sample]]:
    out: dict[str, set[Sample]] = {}
    for s in samples:
        device = dict(s[1]).get("device")
        if device is not None:
            out.setdefault(device, set()).add(s)
    return out


# ----------------------------------------------------------------- promtool, the spec


@pytest.mark.parametrize("fixture", FIXTURES)
def test_promtool_finds_nothing_on_every_fixture(promtool: None, fixture: str) -> None:
    """``promtool check metrics`` (client_golang's promlint: HELP, units, suffixes,
    names, label names) on the page of every bundled fixture: exit 0, no output."""
    assert prom.promtool_check_metrics(metrics.render(fixture_facts(fixture))) == (0, "")


def test_the_command_prints_what_promtool_accepts(promtool: None) -> None:
    """The command's own stdout on the largest GPU host: clean, with no stderr, exit 0."""
    p = sv("metrics", "--fixture", "gpu-dgx-b200")
    assert (p.returncode, p.stderr) == (0, b"")
    assert prom.promtool_check_metrics(p.stdout) == (0, "")
    assert p.stdout.startswith(b"# HELP sysverbs_build_info ")
    assert len(prom.samples(p.stdout.decode())) == len(prom.samples(page(
        fixture_facts("gpu-dgx-b200"))))


def test_names_and_labels_are_the_specs() -> None:
    """prometheus_client's own parser reads the page back: the families of the table,
    in its order, each a gauge with HELP and exactly its labels."""
    from prometheus_client.parser import text_string_to_metric_families

    text = page(fixture_facts("gpu-dgx-b200"))
    families = list(text_string_to_metric_families(text))
    assert [f.name for f in families] == list(SPEC)
    helps = {line.split()[2]: line for line in text.splitlines() if line.startswith("# HELP")}
    types = {line.split()[2]: line.split()[3] for line in text.splitlines()
             if line.startswith("# TYPE")}
    assert list(helps) == list(SPEC) and set(types.values()) == {"gauge"}
    for fam in families:
        for s in fam.samples:
            assert s.name in SPEC and tuple(sorted(s.labels)) == tuple(sorted(SPEC[s.name])), s
            assert s.timestamp is None
    usable = helps["sysverbs_rdma_device_usable"]
    assert "credentials" in usable and "uid" in usable and "RLIMIT_MEMLOCK" in usable


def test_gpu_series_of_the_b200() -> None:
    """Every GPU x placed RDMA device once; each GPU's NIC on its PCIe switch (PXB), as
    the matrix of sysverbs topo has it; NVML's bus id form."""
    facts = fixture_facts("gpu-dgx-b200")
    assert "sysverbs_gpu_nic_link" not in {x[0] for x in prom.samples(page(facts))}
    s = prom.samples(page(facts, detail=True))
    links = [dict(labels) for name, labels, _ in s if name == "sysverbs_gpu_nic_link"]
    assert len(links) == 8 * 18 and len({(x["gpu"], x["device"]) for x in links}) == 144
    assert {"gpu": "0", "pci_bus_id": "00000000:1B:00.0", "device": "mlx5_4",
            "link": "PXB"} in links
    assert {x["link"] for x in links} <= {"PIX", "PXB", "PHB", "NODE", "SYS"}
    assigned = {(dict(la)["gpu"], dict(la)["device"]) for name, la, _ in s
                if name == "sysverbs_gpu_nic_assigned"}
    assert ("0", "mlx5_4") in assigned and len(assigned) == 8
    off = prom.samples(page(fixture_facts("gpu-dgx-b200", gpu_links=False), detail=True))
    assert not any(name == "sysverbs_gpu_nic_link" for name, _, _ in off)
    assert {x for x in off if x[0] == "sysverbs_gpu_nic_assigned"} == {
        x for x in s if x[0] == "sysverbs_gpu_nic_assigned"}


def test_the_b200_node_has_at_most_150_series() -> None:
    """Issue 45: at most 150 series per node on gpu-dgx-b200 by default (623 with
    --detail, the old page), none of them a problem that is 0."""
    s = prom.samples(page(fixture_facts("gpu-dgx-b200")))
    assert 100 < len(s) <= 150
    assert {(dict(la)["device"], dict(la)["reason"], v) for name, la, v in s
            if name == "sysverbs_rdma_device_problem"} == {("irdma1", "port_down", 1.0)}


def test_reason_codes_are_split_between_device_and_host() -> None:
    # a device's notes (management_device) are no problem: no series
    notes = {c for c, (severity, _) in CODES.items() if severity == "note"}
    assert set(DEVICE_REASONS) | set(HOST_REASONS) | notes == set(CODES)
    assert not notes & set(DEVICE_REASONS)
    assert len(DEVICE_REASONS) == len(set(DEVICE_REASONS))


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_reason_series_is_there(fixture: str) -> None:
    """With --detail every device of class/infiniband has its info and a 0/1 series for
    every device reason (1 exactly for diagnose()'s codes), every port its GID types, the
    host every host reason; the codes diagnose() gives are those the split expects.  By
    default the same page less its constant series: a problem only while 1, a port's GID
    counts of its link layer's types (and of any other type that has GIDs)."""
    host = fixture_tree(fixture)
    found = diagnose(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
                     source="sysfs", recorded=True)
    assert {r.code for r in found.host} <= set(HOST_REASONS)
    facts = fixture_facts(fixture)
    s = prom.samples(page(facts, detail=True))
    compact = prom.samples(page(facts))
    own = {"InfiniBand": {"ib"}, "Ethernet": {"roce_v1", "roce_v2"}}
    layer = {(dict(la)["device"], dict(la)["port"]): dict(la)["link_layer"]
             for name, la, _ in s if name == "sysverbs_rdma_port_info"}

    def kept(name: str, labels: dict[str, str], value: float) -> bool:
        if name.endswith("_problem"):
            return value == 1
        if name == "sysverbs_rdma_port_gids":
            where = (labels["device"], labels["port"])
            return labels["gid_type"] in own.get(layer[where], set()) or value != 0
        return name != "sysverbs_gpu_nic_link"

    assert compact == {x for x in s if kept(x[0], dict(x[1]), x[2])}
    # docs/fleet.md's series table (benchmarks/bench_metrics.py --table) is these counts
    row = re.search(rf"^\| {re.escape(fixture)} \| (\d+) \| (\d+) \| (\d+) \|$",
                    (ROOT / "docs" / "fleet.md").read_text(), re.M)
    assert row and tuple(map(int, row.groups())) == (len(facts.devices), len(s), len(compact))
    assert not {x for x in compact if x[0].endswith("_problem") and x[2] != 1}
    names = {name for name, _, _ in s}
    ib = Path(host.sysfs) / "class/infiniband"
    kernel = sorted(os.listdir(ib)) if ib.is_dir() else []
    info = {dict(la)["device"] for name, la, _ in s if name == "sysverbs_rdma_device_info"}
    assert set(kernel) <= info
    for d in found:
        codes = {r.code for r in d.reasons if r.severity != "note"}
        assert codes <= set(DEVICE_REASONS), d
        problems = {dict(la)["reason"]: v for name, la, v in s
                    if name == "sysverbs_rdma_device_problem" and dict(la)["device"] == d.name}
        assert list(problems) == list(DEVICE_REASONS) or set(problems) == set(DEVICE_REASONS)
        assert {c for c, v in problems.items() if v == 1} == codes
        usable = [v for name, la, v in s if name == "sysverbs_rdma_device_usable"
                  and dict(la)["device"] == d.name]
        assert usable == ([] if d.management or d.unknown else [float(d.usable)])
    ports = {(dict(la)["device"], dict(la)["port"]) for name, la, _ in s
             if name == "sysverbs_rdma_port_info"}
    gids = {(dict(la)["device"], dict(la)["port"], dict(la)["gid_type"]) for name, la, _ in s
            if name == "sysverbs_rdma_port_gids"}
    assert gids == {(d, p, t) for d, p in ports for t in ("ib", "roce_v1", "roce_v2")}
    host_problems = {dict(la)["reason"]: v for name, la, v in s
                     if name == "sysverbs_rdma_host_problem"}
    assert set(host_problems) == set(HOST_REASONS)
    assert {c for c, v in host_problems.items() if v == 1} == {r.code for r in found.host}
    assert {dict(la)["transport"] for name, la, _ in s if name == "sysverbs_nccl_transport"} \
        == {"ib", "socket", "ofi", "plugin"}
    assert sum(v for name, _, v in s if name == "sysverbs_nccl_transport") == 1
    success = {dict(la)["collector"]: v for name, la, v in s
               if name == "sysverbs_collector_success"}
    assert success == {"discovery": 1, "topology": 1, "nccl": 1}
    assert {"sysverbs_build_info", "sysverbs_rdma_cm_available"} <= names
    # a recording's RLIMIT_MEMLOCK is not this process's: no sample
    assert "sysverbs_memlock_limit_bytes" not in names


# -------------------------------------------------------------- broken device directories


def _dev(host: testing.FakeHost, name: str) -> Path:
    return (Path(host.sysfs) / "class/infiniband" / name).resolve()


def _to_dir(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    path.mkdir()
    (path / "x").write_text("1\n")


def _files_are_directories(host: testing.FakeHost) -> list[str]:
    d = _dev(host, "mlx5_1")
    for rel in ("node_guid", "node_type", "ports/1/state", "ports/1/link_layer",
                "ports/1/gids/0", "ports/1/gid_attrs/types/0"):
        _to_dir(d / rel)
    return ["mlx5_1"]


def _half_written(host: testing.FakeHost) -> list[str]:
    d = _dev(host, "mlx5_2")
    for rel in ("node_guid", "node_type", "ports/1/state", "ports/1/link_layer"):
        (d / rel).write_text("")
    (d / "ports/1/gids/0").write_text("fe80:0000:")
    (d / "ports/1/rate").write_bytes(b"\xff\xfe 100 Gb")
    return ["mlx5_2"]


def _ports_is_a_file(host: testing.FakeHost) -> list[str]:
    d = _dev(host, "mlx5_3")
    shutil.rmtree(d / "ports")
    (d / "ports").write_text("1\n")
    return ["mlx5_3"]


def _dangling_device_link(host: testing.FakeHost) -> list[str]:
    d = _dev(host, "mlx5_0")
    (d / "device").unlink()
    (d / "device").symlink_to("../../../../nowhere")
    return ["mlx5_0"]


def _uverbs_without_ibdev(host: testing.FakeHost) -> list[str]:
    """uverbs1 loses its ibdev file, uverbs4's is 64 bytes or longer: libibverbs skips
    both entries."""
    verbs = Path(host.sysfs) / "class/infiniband_verbs"
    names = [(verbs / e / "ibdev").read_text().strip() for e in ("uverbs1", "uverbs4")]
    (verbs / "uverbs1/ibdev").unlink()
    (verbs / "uverbs4/ibdev").write_text("x" * 100 + "\n")
    return names


def _entry_is_a_file(host: testing.FakeHost) -> list[str]:
    link = Path(host.sysfs) / "class/infiniband/mlx5_5"
    link.unlink()
    link.write_text("not a device\n")
    return ["mlx5_5"]


def _junk_bytes(host: testing.FakeHost) -> list[str]:
    """Bytes that are no UTF-8 in a label's source: the link layer, and two entries of
    class/infiniband whose names differ only in such a byte."""
    d = _dev(host, "mlx5_4")
    (d / "ports/1/link_layer").write_bytes(b"Infini\xffBand\n")
    ib = os.fsencode(Path(host.sysfs) / "class/infiniband")
    for junk in (b"mlx5_\xff", b"mlx5_\xfe"):
        os.symlink(os.readlink(ib + b"/mlx5_5"), ib + b"/" + junk)
    return ["mlx5_4", "mlx5_\\xff", "mlx5_\\xfe"]


BREAKAGE = {f.__name__.lstrip("_"): f for f in (
    _files_are_directories, _half_written, _ports_is_a_file, _dangling_device_link,
    _uverbs_without_ibdev, _entry_is_a_file, _junk_bytes)}


@pytest.fixture
def cx6() -> Iterator[testing.FakeHost]:
    """The mlx5-cx6 fixture host (six devices) in a tree of its own."""
    with fast_tmpdir("sv-metrics-") as tmp:
        yield testing.materialize(testing.fixture_path("mlx5-cx6"), str(tmp / "h"))


@pytest.mark.parametrize("breakage", sorted(BREAKAGE))
def test_a_broken_device_never_blanks_the_others(promtool: None, cx6: testing.FakeHost,
                                                 breakage: str) -> None:
    """One device directory with directories for files, half-written files, a file for
    its ports, a dangling device link, a uverbs entry without ibdev, a file in
    class/infiniband: no exception, every collector succeeds but discovery when a file
    a verdict rests on is ``unknown`` (only on the broken devices), the page passes promtool,
    the broken device still has its info and problem series, and every other device's
    series are exactly what they were on the intact tree."""
    before = prom.samples(page(tree_facts(cx6)))
    broken = BREAKAGE[breakage](cx6)
    facts = tree_facts(cx6)
    unknown = {d.name for d in facts.devices if "unknown" in d.reasons}
    assert unknown <= set(broken), unknown
    assert [(c.name, c.success) for c in facts.collectors] == [
        ("discovery", not unknown), ("topology", True), ("nccl", True)], facts.collectors
    text = metrics.render(facts)
    assert prom.promtool_check_metrics(text) == (0, "")
    after = prom.samples(text.decode("utf-8"))  # strict: the page is UTF-8
    old, new = by_device(before), by_device(after)
    old.update({name: set() for name in broken if name not in old})
    assert broken and set(broken) <= set(new), (broken, sorted(new))
    for name in broken:
        assert new[name] != old[name], f"{breakage} changed nothing of {name}"
        kinds = {s[0] for s in new[name]}
        assert "sysverbs_rdma_device_info" in kinds
        if any(s[0] == "sysverbs_rdma_device_problem" for s in old[name]) and \
                name in {d.name for d in facts.devices if d.listed is not None}:
            assert "sysverbs_rdma_device_problem" in kinds
    # NCCL's device table and the GPU/NIC series may follow the broken device; the
    # device's own series must not change
    own = {"sysverbs_rdma_device_info", "sysverbs_rdma_device_listed",
           "sysverbs_rdma_device_usable", "sysverbs_rdma_device_problem",
           "sysverbs_rdma_port_info", "sysverbs_rdma_port_gids"}
    for name in set(old) - set(broken):
        assert {s for s in new.get(name, set()) if s[0] in own} == \
            {s for s in old[name] if s[0] in own}, name


@pytest.mark.parametrize("part", ["discovery", "device", "topology", "nccl"])
def test_a_part_that_raises_leaves_the_others(part: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A part whose code raises: its success is 0 and its error recorded, the other
    parts fill in; a device whose read raises keeps its name and diagnosis."""
    import sysverbs.devices.diagnosis as diagnosis
    import sysverbs.devices.location as topology
    import sysverbs.placement as placement
    import sysverbs.rank.nccl as nccl

    def boom(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("injected")

    real_topology = topology.device_location

    def one_bad(device: Any, **kw: Any) -> Any:
        if os.path.basename(os.fsdecode(device)) == "mlx5_3":
            raise RuntimeError("injected")
        return real_topology(device, **kw)

    target = {"discovery": (diagnosis, "diagnose", boom), "device": (topology,
              "device_location", one_bad), "topology": (placement, "read_host_at", boom),
              "nccl": (nccl, "predict_ib", boom)}[part]
    monkeypatch.setattr(target[0], target[1], target[2])
    facts = fixture_facts("gpu-dgx-a100")
    success = {c.name: c.success for c in facts.collectors}
    failed = {"discovery": "discovery", "topology": "topology", "nccl": "nccl"}.get(part)
    assert success == {n: n != failed for n in ("discovery", "topology", "nccl")}
    s = prom.samples(page(facts, detail=True))  # every series that could be there
    kinds = {name for name, _, _ in s}
    devices = {dict(la)["device"] for name, la, _ in s if name == "sysverbs_rdma_device_info"}
    assert len(devices) == 10
    if part == "discovery":
        assert facts.collector("discovery").error == "RuntimeError: injected"  # type: ignore
        assert not kinds & {"sysverbs_rdma_device_usable", "sysverbs_rdma_host_problem"}
        assert "sysverbs_rdma_port_info" in kinds and "sysverbs_gpu_nic_link" in kinds
    if part == "device":
        bad = facts.device("mlx5_3")
        assert bad is not None and bad.error == "RuntimeError: injected"
        assert bad.usable is not None and bad.ports == ()
        assert sum(1 for d in facts.devices if d.error) == 1
        assert len([x for x in s if x[0] == "sysverbs_rdma_device_problem"]) == \
            10 * len(DEVICE_REASONS)
    if part == "topology":
        assert "sysverbs_rdma_device_usable" in kinds
        assert not kinds & {"sysverbs_gpu_nic_link", "sysverbs_gpu_nic_assigned"}
    if part == "nccl":
        assert {v for name, _, v in s if name == "sysverbs_nccl_transport"} == {0.0}
    assert prom.binary(prom.PROMTOOL) is None or \
        prom.promtool_check_metrics(metrics.render(facts)) == (0, "")


def test_the_command_warns_and_exits_1_when_a_part_fails(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sysverbs.placement as placement
    from sysverbs.cli import main

    def boom(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("injected")

    monkeypatch.setattr(placement, "read_host_at", boom)  # the host model's placement part
    assert main(["metrics", "--json", "--fixture", "gpu-hgx-h100"]) == 1
    out, err = capsys.readouterr()
    assert err == ("sysverbs metrics: warning: the topology collector failed (RuntimeError: "
                   'injected): sysverbs_collector_success{collector="topology"} is 0, the '
                   "other series are reported\n")
    doc = json.loads(out)
    success = [f for f in doc["families"] if f["name"] == "sysverbs_collector_success"][0]
    assert {s["labels"]["collector"]: s["value"] for s in success["samples"]} == {
        "discovery": 1, "topology": 0, "nccl": 1}


@pytest.fixture
def unreadable_tree() -> Iterator[testing.FakeHost]:
    require(None if os.geteuid() == 0 else "needs root (setpriv to uid 65534)", "root")
    with fast_tmpdir("sv-metrics-user-") as tmp:
        host = testing.materialize(testing.fixture_path("gpu-dgx-a100"), str(tmp / "h"))
        for dirpath, dirnames, _ in os.walk(tmp):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
        yield host


def test_unreadable_device_directory_as_user(unreadable_tree: testing.FakeHost) -> None:
    """As uid 65534 (root reads a chmod 000 directory): one device directory unreadable,
    another's GID table and state; the JSON of the same series is whole, the two devices
    are ``unknown`` (no usable series, problem ``unknown`` 1) and the discovery collector
    says it failed, and the other devices' series are root's."""
    host = unreadable_tree
    args = ["metrics", "--json", "--source", "sysfs", "--providers", "builtin",
            "--sysfs-path", host.sysfs, "--dev-dir", host.dev]
    env = {"NCCL_IB_HCA": "", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    root = sv(*args, env=dict(_env(), **env))
    os.chmod(_dev(host, "mlx5_2"), 0)
    os.chmod(_dev(host, "mlx5_5") / "ports/1/gids", 0)
    os.chmod(_dev(host, "mlx5_5") / "ports/1/state", 0)
    user = subprocess.run([*staging.AS_NOBODY, staging.user_python(), "-m", "sysverbs", *args],
                          capture_output=True, env=staging.user_env(env), cwd="/", timeout=120)
    assert b"Traceback" not in user.stderr, user.stderr.decode()[-2000:]
    assert root.returncode == 0 and user.returncode in (0, 1), user.stderr

    def series(doc: bytes) -> dict[str, set[tuple[str, str]]]:
        out: dict[str, set[tuple[str, str]]] = {}
        for fam in json.loads(doc)["families"]:
            for s in fam["samples"]:
                dev = s["labels"].get("device")
                if dev is not None and "gpu" not in s["labels"]:
                    out.setdefault(dev, set()).add(
                        (fam["name"], json.dumps([s["labels"], s["value"]], sort_keys=True)))
        return out

    mine, theirs = series(root.stdout), series(user.stdout)
    assert set(mine) == set(theirs) and len(mine) == 10
    for name in set(mine) - {"mlx5_2", "mlx5_5"}:
        assert mine[name] == theirs[name], name
    for name in ("mlx5_2", "mlx5_5"):
        assert mine[name] != theirs[name], f"{name} read the same as uid 65534"
        kinds = {k for k, _ in theirs[name]}
        assert {"sysverbs_rdma_device_info", "sysverbs_rdma_device_problem"} <= kinds, (
            name, kinds)
        assert "sysverbs_rdma_device_usable" not in kinds, name
        unknown = json.dumps([{"device": name, "reason": "unknown"}, 1], sort_keys=True)
        assert ("sysverbs_rdma_device_problem", unknown) in theirs[name], name
    assert user.returncode == 1 and b"EACCES" in user.stderr
    doc = json.loads(user.stdout)
    success = [f for f in doc["families"] if f["name"] == "sysverbs_collector_success"][0]
    assert {s["labels"]["collector"]: s["value"] for s in success["samples"]} == {
        "discovery": 0, "topology": 1, "nccl": 1}


# ------------------------------------------------------------------------- the textfile


def test_the_textfile_is_replaced_atomically(tmp_path: Path) -> None:
    """Under umask 077 the file is still 0644 (node_exporter runs as another user); no
    temporary file is left; a reader never sees a part of a file while it is rewritten
    200 times; a failed rename leaves nothing behind."""
    facts = fixture_facts("gpu-dgx-b200")
    want = metrics.render(facts)
    old = os.umask(0o077)
    try:
        path = metrics.write_textfile(str(tmp_path), facts)
    finally:
        os.umask(old)
    assert path == str(tmp_path / "sysverbs.prom") and os.listdir(tmp_path) == ["sysverbs.prom"]
    assert (os.stat(path).st_mode & 0o777) == 0o644
    assert Path(path).read_bytes() == want
    seen: list[bytes] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(Path(path).read_bytes())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(200):
            metrics.write_textfile(str(tmp_path), facts)
    finally:
        done.set()
        reader.join()
    assert seen and all(data == want for data in seen)
    assert os.listdir(tmp_path) == ["sysverbs.prom"]
    with pytest.raises(OSError):
        metrics.write_textfile(str(tmp_path / "missing"), facts)
    real = os.replace

    def fail(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    os.replace = fail  # type: ignore[assignment]
    try:
        with pytest.raises(OSError):
            metrics.write_textfile(str(tmp_path), facts)
    finally:
        os.replace = real
    assert os.listdir(tmp_path) == ["sysverbs.prom"]
    with pytest.raises(ValueError):
        metrics.write_textfile(str(tmp_path), facts, name="sysverbs.txt")


def test_textfile_interval_until_sigterm(tmp_path: Path) -> None:
    """--textfile DIR --interval: rewritten until SIGTERM, which exits 0 and leaves the
    last whole file and nothing else."""
    p = subprocess.Popen([sys.executable, "-m", "sysverbs", "metrics", "--fixture", "rxe",
                          "--textfile", str(tmp_path), "--interval", "0.1"],
                         stderr=subprocess.PIPE, env=_env())
    target = tmp_path / "sysverbs.prom"
    try:
        deadline = time.monotonic() + 60
        stamps: set[int] = set()
        while len(stamps) < 3 and time.monotonic() < deadline:
            if target.exists():
                stamps.add(os.stat(target).st_mtime_ns)
            time.sleep(0.02)
        assert len(stamps) >= 3, "the file was not rewritten"
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (0, b"")
    assert os.listdir(tmp_path) == ["sysverbs.prom"]
    assert target.read_text().startswith("# HELP sysverbs_build_info ")


# ----------------------------------------------------------------------- the command


def test_once_prints_the_page_and_textfile_writes_it(tmp_path: Path) -> None:
    p = sv("metrics", "--fixture", "rxe", "--no-gpu-links")
    assert p.returncode == 0 and p.stderr == b""
    w = sv("metrics", "--fixture", "rxe", "--no-gpu-links", "--textfile", str(tmp_path))
    assert (w.returncode, w.stdout, w.stderr) == (0, b"", b"")
    strip = {"sysverbs_collector_duration_seconds"}
    assert {s for s in prom.samples(p.stdout.decode()) if s[0] not in strip} == \
        {s for s in prom.samples((tmp_path / "sysverbs.prom").read_text()) if s[0] not in strip}


@pytest.mark.parametrize("argv", [
    ["--listen", ":9947"], ["--listen", "9947"], ["--listen", "127.0.0.1:0"],
    ["--listen", "127.0.0.1:http"], ["--interval", "5"], ["--json", "--listen", "127.0.0.1:1"],
    ["--listen", "127.0.0.1:1", "--textfile", "/tmp"], ["--textfile", "/tmp", "--interval", "0"],
    ["--json", "--textfile", "/tmp"], ["--max-age", "5"], ["--textfile", "/tmp", "--max-age", "0"],
    ["--listen", "127.0.0.1:1", "--max-age", "-1"], ["--listen", "127.0.0.1:1", "--max-age", "nan"],
    ["--listen", "127.0.0.1:1", "--max-age", "inf"],
], ids=" ".join)
def test_usage_errors(argv: list[str]) -> None:
    p = sv("metrics", "--fixture", "rxe", *argv)
    assert p.returncode == 2 and p.stdout == b"", p
    assert p.stderr.decode().splitlines()[-1].startswith("sysverbs metrics: error: ")


def test_listen_says_when_the_port_is_taken() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = sv("metrics", "--fixture", "rxe", "--listen", f"127.0.0.1:{port}", timeout=60)
    assert p.returncode == 1 and p.stdout == b""
    assert p.stderr.decode() == (f"sysverbs metrics: error: cannot listen on 127.0.0.1:{port}:"
                                 " Address already in use\n")


def test_textfile_needs_a_directory(tmp_path: Path) -> None:
    p = sv("metrics", "--fixture", "rxe", "--textfile", str(tmp_path / "nope"))
    assert p.returncode == 1 and p.stderr.decode() == (
        f"sysverbs metrics: error: --textfile {tmp_path / 'nope'}: not a directory\n")


def test_rules_prints_the_shipped_rules() -> None:
    p = sv("metrics", "--rules")
    rules = Path(metrics.rules_path())
    if not rules.exists():
        assert p.returncode == 1 and b"alert rules are not installed" in p.stderr
        return
    assert (p.returncode, p.stdout, p.stderr) == (0, rules.read_bytes(), b"")
    assert rules.parent == ROOT / "sysverbs" / "fleet"


def test_without_prometheus_client() -> None:
    """The text, server and textfile need prometheus_client and say how to get it;
    --json does not need it; import sysverbs never loads it."""
    code = ("import sys; sys.modules['prometheus_client'] = None\n"
            "from sysverbs.cli import main\n"
            "sys.exit(main(sys.argv[1:]))")
    run = [sys.executable, "-c", code, "metrics", "--fixture", "rxe"]
    p = subprocess.run(run, capture_output=True, text=True, env=_env(), timeout=120)
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == ("sysverbs metrics: error: needs prometheus_client: pip install "
                        "'sysverbs[metrics]'\n")
    j = subprocess.run([*run, "--json"], capture_output=True, text=True, env=_env(),
                       timeout=120)
    assert j.returncode == 0 and json.loads(j.stdout)["schema"] == "sysverbs.metrics/1"
    check = ("import sys, sysverbs, sysverbs.fleet.facts, sysverbs.fleet.metrics; "
             "sysverbs.get_device_list; print('prometheus_client' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         env=_env(), timeout=120)
    assert out.stdout == "False\n", out.stderr


def test_json_is_the_page() -> None:
    """--json holds the same samples as the text (+Inf as text), in the same order."""
    facts = fixture_facts("gpu-pcie-2socket")
    p = sv("metrics", "--json", "--fixture", "gpu-pcie-2socket")
    doc = json.loads(p.stdout)
    assert [f["name"] for f in doc["families"]] == list(SPEC)

    def value(v: Any) -> float:
        return float(v.replace("Inf", "inf")) if isinstance(v, str) else float(v)

    got = {(f["name"], frozenset(s["labels"].items()), value(s["value"]))
           for f in doc["families"] for s in f["samples"]
           if f["name"] != "sysverbs_collector_duration_seconds"}
    want = {s for s in prom.samples(page(facts)) if s[0] != "sysverbs_collector_duration_seconds"}
    assert got == want

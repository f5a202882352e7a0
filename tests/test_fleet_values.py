"""Values the fleet's code gives, on hosts built for them (issue 41: a mutation audit found
that these could change with no test failing).

One generated host (``sysverbs.testing.HostBuilder``, no bundled fixture) holds what the
bundled fixtures lack:

* ``mlx5_0``: RoCE, its node GUID with leading zeros (cxgb4's ``0007434a8b500000``), two
  RoCE v1 and three RoCE v2 GIDs (``gid_attrs/types``), under ``pci0000:00``;
* ``mlx5_1``: InfiniBand, one IB GID, listed by libibverbs but not usable: its
  ``/dev/infiniband`` node is a directory (libibverbs only stats it; opening fails);
* ``mlx5_2``: a PCI function below a VMBus host bridge, as Azure's VFs and mana are
  (``/sys/devices/LNXSYSTM:00/.../pci7870:00/...``): no ``pcie_root``.

The exposition is prometheus_client's own text, read back as Prometheus reads it
(``tests.prom.samples``); "listed" and the GUID are checked against the real
``ibv_devices`` on the same tree, in a private mount namespace (root).
"""

from __future__ import annotations

import dataclasses
import math
import os
import resource
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from sysverbs import testing
from sysverbs.fleet import metrics
from sysverbs.fleet.facts import (
    CollectorResult,
    GpuAssigned,
    HostFacts,
    PortFacts,
    collect_facts,
    nvml_bus_id,
)
from sysverbs.fleet.nfd import MAX_FILE_SIZE, feature_file
from sysverbs.testing import HostBuilder, umockdev
from sysverbs.testing.cache import fixture_tree
from tests import prom
from tests.conftest import fast_tmpdir, require
from tests.oracle import harness

ROOT = Path(__file__).resolve().parents[1]
GUID = 0x0007434A8B500000
_LINK_LOCAL = "fe80:0000:0000:0000:0207:43ff:fe4a:8b50"
_V4 = "0000:0000:0000:0000:0000:ffff:c0a8:01{:02x}"
#: Port 1's GIDs of mlx5_0: RoCE v1, v2, v1, v2, v2 (2 + 3).
ROCE_GIDS = {
    "ports/1/gids/0": _LINK_LOCAL, "ports/1/gid_attrs/types/0": "IB/RoCE v1",
    "ports/1/gids/1": _LINK_LOCAL, "ports/1/gid_attrs/types/1": "RoCE v2",
    "ports/1/gids/2": _V4.format(5), "ports/1/gid_attrs/types/2": "IB/RoCE v1",
    "ports/1/gids/3": _V4.format(5), "ports/1/gid_attrs/types/3": "RoCE v2",
    "ports/1/gids/4": _V4.format(6), "ports/1/gid_attrs/types/4": "RoCE v2",
    **{f"ports/1/gid_attrs/ndevs/{i}": "enp3s0np0" for i in range(4)},
    "ports/1/gid_attrs/ndevs/4": "vlan100",  # a second netdev: the label names the first
}
VMBUS = ("/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/"
         "7870a1b2-0000-4000-8000-000000000001")


def build(root: Path) -> testing.FakeHost:
    hb = HostBuilder()
    hb.mlx5(link_layer="Ethernet", node_guid=GUID, ib_attrs=ROCE_GIDS, netdev="enp3s0np0")
    hb.mlx5(ib_attrs={"ports/1/gid_attrs/types/0": "IB/RoCE v1"})
    vf_root = hb.host_bridge("pci7870:00", numa_node=-1, parent=VMBUS)
    hb.mlx5(path=f"{vf_root}/7870:00:00.0")
    host = hb.materialize(root)
    node = Path(host.dev) / "uverbs1"
    node.unlink()
    node.mkdir()
    return host


def facts_of(host: testing.FakeHost, **kw: Any) -> HostFacts:
    return collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
                         source="sysfs", recorded=True, environ={}, **kw)


@pytest.fixture(scope="module")
def tree() -> Iterator[testing.FakeHost]:
    with fast_tmpdir("fleet-values-") as tmp:
        yield build(Path(tmp))


@pytest.fixture(scope="module")
def series(tree: testing.FakeHost) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    page = metrics.render(facts_of(tree)).decode()
    return {(name, labels): value for name, labels, value in prom.samples(page)}


@pytest.fixture(scope="module")
def detail(tree: testing.FakeHost) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """``--detail``'s page: every reason and GID type, 0 or not."""
    page = metrics.render(facts_of(tree), detail=True).decode()
    return {(name, labels): value for name, labels, value in prom.samples(page)}


def value(series: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
          **labels: str) -> float:
    return series[(name, frozenset(labels.items()))]


def test_listed_but_not_usable(series: dict[Any, float], detail: dict[Any, float]) -> None:
    """The usable gauge (the unusable-device alert's input) is not the listed flag; a
    problem is a series only while found (``--detail``: also the 0s)."""
    listed = {d: value(series, "sysverbs_rdma_device_listed", device=d)
              for d in ("mlx5_0", "mlx5_1", "mlx5_2")}
    usable = {d: value(series, "sysverbs_rdma_device_usable", device=d)
              for d in ("mlx5_0", "mlx5_1", "mlx5_2")}
    assert listed == {"mlx5_0": 1.0, "mlx5_1": 1.0, "mlx5_2": 1.0}
    assert usable == {"mlx5_0": 1.0, "mlx5_1": 0.0, "mlx5_2": 1.0}
    assert value(series, "sysverbs_rdma_device_problem", device="mlx5_1",
                 reason="dev_node_wrong") == 1.0
    absent = ("sysverbs_rdma_device_problem",
              frozenset({"device": "mlx5_0", "reason": "dev_node_wrong"}.items()))
    assert absent not in series and detail[absent] == 0.0
    assert value(detail, "sysverbs_rdma_device_problem", device="mlx5_1",
                 reason="dev_node_wrong") == 1.0


def test_gid_counts_by_type(series: dict[Any, float], detail: dict[Any, float]) -> None:
    counts = {(d, t): value(detail, "sysverbs_rdma_port_gids", device=d, port="1", gid_type=t)
              for d in ("mlx5_0", "mlx5_1") for t in ("ib", "roce_v1", "roce_v2")}
    assert counts == {("mlx5_0", "ib"): 0.0, ("mlx5_0", "roce_v1"): 2.0,
                      ("mlx5_0", "roce_v2"): 3.0, ("mlx5_1", "ib"): 1.0,
                      ("mlx5_1", "roce_v1"): 0.0, ("mlx5_1", "roce_v2"): 0.0}
    # by default only the types the port's link layer can have (Ethernet: RoCE; IB: ib)
    default = {(dict(la)["device"], dict(la)["gid_type"]): v for (n, la), v in series.items()
               if n == "sysverbs_rdma_port_gids" and dict(la)["device"] in ("mlx5_0", "mlx5_1")}
    assert default == {("mlx5_0", "roce_v1"): 2.0, ("mlx5_0", "roce_v2"): 3.0,
                       ("mlx5_1", "ib"): 1.0}


def test_device_info_labels(series: dict[Any, float]) -> None:
    """The GUID keeps its 16 digits; pcie_root is a pci* host bridge or empty."""
    info = {dict(labels)["device"]: dict(labels) for (name, labels), v in series.items()
            if name == "sysverbs_rdma_device_info" and v == 1.0}
    assert info["mlx5_0"]["node_guid"] == "0007434a8b500000"
    assert {i["kernel_driver"] for i in info.values()} == {"mlx5_core"}
    assert {d: (i["pci_address"], i["pcie_root"], i["numa_node"]) for d, i in info.items()} == {
        "mlx5_0": ("0000:03:00.0", "pci0000:00", "0"),
        "mlx5_1": ("0000:04:00.0", "pci0000:00", "0"),
        "mlx5_2": ("7870:00:00.0", "", "-1")}
    ports = {dict(la)["device"]: (dict(la)["link_layer"], dict(la)["netdev"])
             for (name, la), v in series.items() if name == "sysverbs_rdma_port_info"}
    assert ports == {"mlx5_0": ("Ethernet", "enp3s0np0"), "mlx5_1": ("InfiniBand", ""),
                     "mlx5_2": ("InfiniBand", "")}


@pytest.mark.oracle
def test_ibv_devices_agrees(tree: testing.FakeHost, tmp_path: Path) -> None:
    """The real libibverbs lists the device sysverbs calls listed but not usable, and
    prints the GUID with its leading zeros, as the info series does."""
    require(harness.unavailable_reason(), "libibverbs oracle")
    root = Path(tree.sysfs).parent
    dst = tmp_path / "root"
    dst.mkdir()
    run = harness.run_in_ns(root, dst, ["ibv_devices"])
    assert run.returncode == 0, run.stderr
    rows = dict(line.split() for line in run.stdout.splitlines()[2:] if line.strip())
    facts = facts_of(tree)
    assert rows == {d.name: d.node_guid for d in facts.devices if d.listed}
    assert rows["mlx5_0"] == "0007434a8b500000" and "mlx5_1" in rows


def test_rdma_cm_with_a_bad_abi_is_not_available(tmp_path: Path) -> None:
    """rdma_cm counts only with an ABI librdmacm takes (3..4; librdmacm's side of it is
    tests/test_rdmacm_oracle.py's test_rdma_cm_abi) and its /dev node."""
    found = {}
    for abi in ("4", "5"):
        entries = [umockdev.TreeEntry("sys/class/misc/rdma_cm/abi_version", f"{abi}\n".encode()),
                   umockdev.TreeEntry("dev/infiniband/rdma_cm")]
        host = testing.materialize(HostBuilder().mlx5(), tmp_path / abi, entries=entries)
        facts = facts_of(host, gpu_links=False)
        found[abi] = (facts.rdma_cm_available, "rdma_cm_abi" in (facts.host_reasons or ()))
    assert found == {"4": (True, False), "5": (False, True)}


def _failing(monkeypatch: pytest.MonkeyPatch, part: str) -> None:
    import sysverbs.placement as placement
    import sysverbs.rank.nccl as nccl

    def boom(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("injected")

    monkeypatch.setattr(*{"topology": (placement, "read_host_at"),  # the host model's
                          "nccl": (nccl, "predict_ib")}[part], boom)


@pytest.mark.parametrize("part", ["topology", "nccl"])
def test_nfd_says_which_part_failed(part: str, monkeypatch: pytest.MonkeyPatch) -> None:
    host = fixture_tree("gpu-dgx-b200")
    whole = feature_file(facts_of(host), expires_in=60, now=0)
    _failing(monkeypatch, part)
    start = time.perf_counter()
    facts = facts_of(host)
    took = time.perf_counter() - start
    failed = facts.collector(part)
    assert failed is not None and not failed.success and failed.error == "RuntimeError: injected"
    for c in facts.collectors:  # each part's own time, within the whole call's
        assert 0 <= c.duration_seconds <= took, c
    f = feature_file(facts, expires_in=60, now=0)
    assert (whole.value("gpu-nic.worst-link"), whole.value("nccl.transport")) == ("PXB", "ib")
    assert (whole.value("topology.failed"), whole.value("nccl.failed")) == (None, None)
    if part == "topology":
        assert (f.value("topology.failed"), f.value("gpu-nic.worst-link")) == ("true", None)
        assert (f.value("nccl.failed"), f.value("nccl.transport")) == (None, "ib")
    else:
        assert (f.value("nccl.failed"), f.value("nccl.transport")) == ("true", None)
        assert (f.value("topology.failed"), f.value("gpu-nic.worst-link")) == (None, "PXB")
    assert f.value("rdma.devices") == whole.value("rdma.devices") == "18"
    assert f.value("discovery.failed") is None


def test_the_collector_hands_each_snapshot_over() -> None:
    """FactsCollector's callback sees the snapshot of every scrape (the command prints
    its failures from there)."""
    from prometheus_client import generate_latest

    facts = HostFacts("0.1.0", "44", "/sys", False, (), (), False, 1.0, (), (), (), (), "",
                      (CollectorResult("nccl", False, 0.5, "RuntimeError: injected"),))
    seen: list[HostFacts] = []
    reg = metrics.registry(lambda: facts, seen.append)
    page = generate_latest(reg).decode()
    generate_latest(reg)
    assert seen == [facts, facts]
    s = prom.samples(page, "sysverbs_collector_")
    assert s == {("sysverbs_collector_success", frozenset({("collector", "nccl")}), 0.0),
                 ("sysverbs_collector_duration_seconds", frozenset({("collector", "nccl")}),
                  0.5)}


def pages_built(pages: metrics.Pages, facts: HostFacts, detail: bool) -> int:
    """How many times ``pages`` built the families to write ``facts`` in text, OpenMetrics
    and text again, each asked as the server asks (``exposition()`` per request: a new
    OpenMetrics encoder each time) and checked to be byte for byte what prometheus_client
    writes of ``facts`` in that format (``detail``: the pages' own)."""
    from unittest import mock

    from prometheus_client.exposition import choose_encoder

    built = 0
    for accept in ("text/plain", "application/openmetrics-text; version=1.0.0", ""):
        content_type, write = metrics.exposition(accept, pages=pages)
        with mock.patch.object(metrics, "families", wraps=metrics.families) as families:
            page = write(facts)
        built += families.call_count
        encoder, own_type = choose_encoder(accept)
        assert (content_type, page) == (own_type, encoder(metrics.registry(
            lambda: facts, detail=detail)))
    return built


@pytest.mark.parametrize("detail", [False, True])
def test_pages_are_prometheus_clients_own(tree: testing.FakeHost, detail: bool) -> None:
    """metrics.Pages (the exporter's pages): a snapshot given again with new durations (what
    the steady scrape gives for an unchanged host) is the last page with only the
    durations written again, any other snapshot a whole new page (once per format); each
    page, in both formats a scrape can ask for, byte for byte what prometheus_client
    writes of it."""
    facts = facts_of(tree)
    again = dataclasses.replace(facts, collectors=tuple(
        dataclasses.replace(c, duration_seconds=c.duration_seconds + 1.5)
        for c in facts.collectors))
    other = dataclasses.replace(again, rdma_cm_available=not facts.rdma_cm_available)
    pages = metrics.Pages(detail)
    for snapshot, built in ((facts, 2), (again, 0), (other, 2), (again, 2), (facts, 0)):
        assert pages_built(pages, snapshot, detail) == built, \
            "a page built anew for a snapshot given again, or kept for another"


def with_findings(facts: HostFacts) -> HostFacts:
    """``facts`` with one record of each of issue 44's findings: a degraded PCIe link, an
    ACS redirect, a translated NIC, a pair beyond the GDR level (GPU0), a pair off for
    its GPU's own lack (GPU1), an address without GID in the namespace and on a port."""
    from sysverbs.placement import AcsRedirect, TranslatedNic
    from sysverbs.placement._links import DegradedLink, LinkEnd
    from sysverbs.rank.addrgid import AddressGidFinding
    from sysverbs.rank.gdr import GdrPair, GdrSupport
    from sysverbs.rank.whynot import Findings

    end = LinkEnd("0000:03:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0",
                  "8.0 GT/s PCIe", "16", "16.0 GT/s PCIe", "16")
    link = DegradedLink("0000:03:00.0", "nic", ("mlx5_0",), "0000:00:01.0", "speed", 8.0,
                        16.0, 16, 16, end, end)
    acs = AcsRedirect("0000:03:00.0", "mlx5_0", "0000:04:00.0", "gpu", "0000:01:00.0",
                      ("0000:02:00.0", "0000:02:01.0"), "acs_ctl", (0x5d, 0x5d), ())
    far = GdrPair(0, "0000:04:00.0", "mlx5_0", 1, "SYS", "PXB", False,
                  "gdr_disabled_by_distance", "path SYS beyond the GDR level PXB (default)")
    own = far._replace(gpu=1, pci_bus_id="0000:05:00.0", path="PIX", code="gdr_unavailable")
    found = Findings(GdrSupport("peermem", "nvidia_peermem"), (far, own), (
        AddressGidFinding(None, None, ("10.0.0.1",), "no GID carries 10.0.0.1"),
        AddressGidFinding("mlx5_0", 1, ("10.0.0.2",), "no GID of mlx5_0:1 carries it")))
    return dataclasses.replace(
        facts, pcie_links=(link,), acs_redirects=(acs,), findings=found,
        translated_nics=(TranslatedNic("0000:03:00.0", "mlx5_0", "iommu_group type DMA"),))


def test_each_findings_series_with_its_labels_and_value(tree: testing.FakeHost) -> None:
    """The series of issue 44's findings, one record of each in a snapshot: present with
    value 1 and their labels as docs/fleet.md names them; a pair off for its GPU's own
    lack and a host without any GDR support each give ``sysverbs_gdr_unavailable``."""
    from sysverbs.rank.gdr import GdrSupport

    facts = with_findings(facts_of(tree))
    found = facts.findings
    assert found is not None
    far = found.pairs[0]

    def series(f: HostFacts, name: str) -> set[tuple[frozenset[tuple[str, str]], float]]:
        return {(labels, value) for n, labels, value in
                prom.samples(metrics.render(f).decode(), name) if n == name}

    assert series(facts, "sysverbs_pcie_link_degraded") == {(frozenset({
        ("device", "0000:03:00.0"), ("role", "nic"), ("port", "0000:00:01.0"),
        ("what", "speed"), ("current", "8 GT/s x16"), ("capable", "16 GT/s x16")}), 1.0)}
    assert series(facts, "sysverbs_acs_redirect") == {(frozenset({
        ("device", "0000:03:00.0"), ("name", "mlx5_0"), ("peer", "0000:04:00.0"),
        ("peer_role", "gpu"), ("switch", "0000:01:00.0"), ("evidence", "acs_ctl")}), 1.0)}
    assert series(facts, "sysverbs_iommu_translated") == {(frozenset({
        ("device", "0000:03:00.0"), ("name", "mlx5_0")}), 1.0)}
    assert series(facts, "sysverbs_no_rdma_gid_for_address") == {
        (frozenset({("device", ""), ("port", "")}), 1.0),
        (frozenset({("device", "mlx5_0"), ("port", "1")}), 1.0)}
    assert series(facts, "sysverbs_gdr_disabled_by_distance") == {(frozenset({
        ("gpu", "0"), ("pci_bus_id", "00000000:04:00.0"), ("device", "mlx5_0"),
        ("port", "1"), ("path", "SYS"), ("level", "PXB")}), 1.0)}
    assert series(facts, "sysverbs_gdr_unavailable") == {(frozenset(), 1.0)}  # GPU1's lack
    none = found._replace(gdr=GdrSupport("none", "no peer-memory module"), pairs=())
    assert series(dataclasses.replace(facts, findings=none), "sysverbs_gdr_unavailable") == {
        (frozenset(), 1.0)}
    assert series(dataclasses.replace(facts, findings=found._replace(pairs=(far,))),
                  "sysverbs_gdr_unavailable") == set()


def test_each_findings_label(tree: testing.FakeHost) -> None:
    """NFD's labels of issue 44's findings (one of each in the snapshot), none of them
    while the topology part failed; gdr.unavailable for a GPU's own lack or a host without
    support, not for a pair off only by distance; and the DRA alignment label on a Grace
    layout (every GPU misaligned or none)."""
    from sysverbs.fleet.facts import GpuFacts
    from sysverbs.rank.gdr import GdrSupport

    facts = with_findings(facts_of(tree))
    found = facts.findings
    assert found is not None
    names = ("pcie.degraded", "gdr.unavailable", "gdr.disabled-by-distance",
             "roce.no-address-gid", "pcie.acs-redirect", "iommu.translated")

    def labels(f: HostFacts) -> dict[str, Optional[str]]:
        file = feature_file(f, expires_in=60, now=0)
        return {name: file.value(name) for name in names}

    assert labels(facts) == dict.fromkeys(names, "true")
    failed = dataclasses.replace(facts, collectors=tuple(
        dataclasses.replace(c, success=c.name != "topology") for c in facts.collectors))
    assert labels(failed) == dict.fromkeys(names)
    far_only = dataclasses.replace(facts, findings=found._replace(pairs=found.pairs[:1]))
    assert labels(far_only)["gdr.unavailable"] is None
    none = dataclasses.replace(facts, findings=found._replace(
        gdr=GdrSupport("none", "no peer-memory module"), pairs=()))
    assert (labels(none)["gdr.unavailable"], labels(none)["gdr.disabled-by-distance"]) == (
        "true", None)
    grace = dataclasses.replace(facts, layout="dma-based", gpus=(
        GpuFacts(0, "0008:01:00.0", "00000008:01:00.0", "nvidia"),))
    for misaligned, aligned in (((), "true"), ((0,), "false")):
        file = feature_file(dataclasses.replace(grace, pcie_root_misaligned=misaligned),
                            expires_in=60, now=0)
        assert (file.value("gpu-nic.layout"), file.value("gpu-nic.pcie-root-aligned")) == (
            "dma-based", aligned)


def test_unknown_files_alone_keep_the_discovery_labels(tree: testing.FakeHost) -> None:
    """A discovery part that failed only because a device's files are unknown keeps its
    labels (rdma.usable...); one that failed with no diagnosis at all (host_reasons None)
    does not, even with a device whose files are unknown."""
    facts = facts_of(tree)
    failed = tuple(dataclasses.replace(c, success=c.name != "discovery")
                   for c in facts.collectors)
    unknown = tuple(dataclasses.replace(d, reasons=("unknown",)) if i == 0 else d
                    for i, d in enumerate(facts.devices))
    only = dataclasses.replace(facts, collectors=failed, devices=unknown, host_reasons=())
    assert feature_file(only, expires_in=60, now=0).value("rdma.usable") is not None
    nothing = dataclasses.replace(only, host_reasons=None)
    file = feature_file(nothing, expires_in=60, now=0)
    assert (file.value("rdma.usable"), file.value("discovery.failed")) == (None, "true")


def test_the_discovery_error_names_the_first_unknown_device(tmp_path: Path) -> None:
    """Two devices whose port state is no state: the discovery part fails with the count,
    both names and the first one's own error."""
    host = build(tmp_path)
    for name, text in (("mlx5_0", "9: bogus\n"), ("mlx5_1", "7: worse\n")):
        (Path(host.sysfs) / "class/infiniband" / name / "ports/1/state").write_text(text)
    discovery = facts_of(host).collector("discovery")
    assert discovery is not None and not discovery.success
    assert discovery.error.startswith("OSError: [Errno 5] unknown: 2 device(s) have files "
                                      "that cannot be read or parsed (mlx5_0, mlx5_1): ")
    assert "'9: bogus'" in discovery.error and "whether mlx5_0 works" in discovery.error
    assert "worse" not in discovery.error


def test_the_findings_read_the_environment_given(tmp_path: Path) -> None:
    """The snapshot's GPUDirect RDMA pairs take NCCL_NET_GDR_LEVEL from the environment
    the exporter is given (a GPU host: gpu-pcie-2socket)."""
    host = testing.materialize("gpu-pcie-2socket", tmp_path / "host")
    levels = {}
    for environ in ({}, {"NCCL_NET_GDR_LEVEL": "SYS"}):
        found = collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
                              source="sysfs", recorded=True, environ=environ).findings
        assert found is not None and found.pairs
        levels[len(environ)] = {p.level for p in found.pairs}
    assert levels == {0: {"P2C"}, 1: {"SYS"}}  # P2C: NCCL_NET_GDR_C2C's default 1


def test_detail_is_off_unless_asked(tree: testing.FakeHost) -> None:
    """Every entry point writes the default page (no --detail) unless told otherwise."""
    import urllib.request

    from prometheus_client import CollectorRegistry, generate_latest

    facts = facts_of(tree)
    plain, detail = metrics.render(facts, False), metrics.render(facts, True)
    assert plain != detail
    assert metrics.families(facts) == metrics.families(facts, False)
    assert generate_latest(metrics.registry(lambda: facts)) == plain
    assert metrics.Pages().page(facts, metrics.CONTENT_TYPE, generate_latest) == plain
    content_type, encode = metrics.exposition("text/plain")
    assert (content_type, encode(facts)) == (metrics.CONTENT_TYPE, plain)
    _, encode = metrics.exposition("text/plain", pages=metrics.Pages(True))
    assert encode(facts) == detail
    reg = CollectorRegistry(auto_describe=False)
    reg.register(metrics.FactsCollector(lambda: facts))  # type: ignore[arg-type]
    assert generate_latest(reg) == plain
    server = metrics.serve("127.0.0.1", 0, lambda: facts)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics") as answer:
            assert answer.read() == plain
    finally:
        server.close()


@pytest.mark.parametrize("detail", [False, True])
def test_pages_write_with_their_own_detail(tree: testing.FakeHost, tmp_path: Path,
                                           detail: bool) -> None:
    """``pages`` write with the detail they were made with: the same page as without
    them; a ``detail`` given other than theirs is a UsageError at every entry point
    (and one equal to theirs is no error)."""
    from sysverbs.ground.errors import UsageError

    facts = facts_of(tree)
    pages = metrics.Pages(detail)
    assert pages.detail is detail
    page = metrics.render(facts, detail)
    assert metrics.render(facts, pages=pages) == page
    assert metrics.render(facts, detail, pages) == page
    assert metrics.exposition("text/plain", detail, pages)[1](facts) == page
    path = metrics.write_textfile(str(tmp_path), facts, detail=detail, pages=pages)
    assert Path(path).read_bytes() == page
    other = not detail
    with pytest.raises(UsageError, match=f"detail={other} with pages made with "
                                         f"detail={detail}"):
        metrics.render(facts, other, pages)
    with pytest.raises(UsageError):
        metrics.exposition("text/plain", other, pages)
    with pytest.raises(UsageError):
        metrics.write_textfile(str(tmp_path), facts, detail=other, pages=pages)
    assert Path(path).read_bytes() == page  # nothing written


_CHILD = """
import sys
import sysverbs.placement as placement
def boom(*args, **kw):
    raise RuntimeError("injected")
placement.read_host_at = boom  # what the host model reads the placement host with
from sysverbs.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_listen_warns_when_a_part_fails() -> None:
    """``sysverbs metrics --listen``, its topology part failing at every scrape: each page
    says so, and stderr warns once (at the first scrape; not again while the failure is
    the same) in three scrapes."""
    port = prom.free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), LC_ALL="C.UTF-8")
    env.pop("SYSFS_PATH", None)
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, "metrics", "--fixture", "rxe",
                             "--listen", f"127.0.0.1:{port}"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pages = [prom.wait_http(f"http://127.0.0.1:{port}/metrics", timeout=60, proc=proc)]
        pages += [prom.http_get(f"http://127.0.0.1:{port}/metrics", timeout=30)[2]
                  for _ in range(2)]
    finally:
        if proc.poll() is None:
            proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    for body in pages:
        s = prom.samples(body.decode(), "sysverbs_collector_success")
        assert {(dict(la)["collector"], v) for _, la, v in s} == {
            ("discovery", 1.0), ("topology", 0.0), ("nccl", 1.0)}
    assert err.decode().splitlines() == [
        "sysverbs metrics: warning: the topology collector failed (RuntimeError: injected): "
        'sysverbs_collector_success{collector="topology"} is 0, the other series are reported']


def test_records_are_frozen_and_hashable() -> None:
    """Every record of a snapshot and of its feature file is a frozen dataclass: writers
    share them across scrapes and threads, and may key on them."""
    facts = facts_of(fixture_tree("gpu-dgx-b200"))
    features = feature_file(facts, expires_in=60, now=0)
    records = [facts, facts.devices[0], facts.devices[0].ports[0], facts.gpus[0],
               facts.gpu_links[0], facts.assigned[0], facts.collectors[0], features,
               features.features[0]]
    for record in records:
        hash(record)
        field = dataclasses.fields(record)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, None)


def test_a_port_without_gid_counts_has_none() -> None:
    port = PortFacts(1, "InfiniBand", "ACTIVE", "", ())
    assert [port.gid_count(t) for t in ("ib", "roce_v1", "roce_v2")] == [0, 0, 0]


def test_worst_assigned_link() -> None:
    def worst(*links: tuple[int, str]) -> object:
        assigned = tuple(GpuAssigned(g, "", f"mlx5_{i}", 1, link)
                         for i, (g, link) in enumerate(links))
        return HostFacts("0.1.0", "44", "/sys", False, (), (), False, 1.0, (), (), assigned,
                         (), "ib", ()).worst_assigned_link()

    assert worst() is None
    assert worst((0, "PIX"), (1, "SYS")) == "SYS"
    assert worst((0, "PIX"), (0, "SYS"), (1, "PXB")) == "PXB"  # each GPU's nearest
    assert worst((0, "N/A")) == "N/A"
    assert worst((0, "N/A"), (1, "NODE")) == "N/A"


def test_nvml_bus_id() -> None:
    """NVML's ``%08X:%02X:%02X.%X`` of each hexadecimal field."""
    assert nvml_bus_id("0010:1b:1e.7") == "00000010:1B:1E.7"
    assert nvml_bus_id("0000:c1:00.1") == "00000000:C1:00.1"
    assert nvml_bus_id("0000:zz:00.0") == "0000:zz:00.0"
    assert nvml_bus_id("not-a-bdf") == "not-a-bdf"


def test_environ_is_what_nccl_reads() -> None:
    host = fixture_tree("gpu-dgx-b200")
    assert facts_of(host).nccl_transport == "ib"
    assert collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
                         source="sysfs", recorded=True, gpu_links=False,
                         environ={"NCCL_IB_DISABLE": "1"}).nccl_transport == "socket"


def test_memlock_limit_is_the_kernels() -> None:
    """RLIMIT_MEMLOCK as the kernel gives it (prlimit sets it for the child)."""
    code = "from sysverbs.fleet.facts import memlock_limit; print(memlock_limit())"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    top = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    got = {}
    for limit in ("65536", top):  # the soft limit; the hard one as it is
        p = subprocess.run(["prlimit", f"--memlock={limit}:", sys.executable, "-c", code],
                           capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        got[limit] = float(p.stdout)
    assert got == {"65536": 65536.0, top: math.inf if top == "unlimited" else float(top)}


def test_a_live_tree_opens_the_nodes(tmp_path: Path) -> None:
    """Judged as a live host (not a recording): a uverbs char device that no driver
    serves fails to open, unless told not to open (``probe_open``); rdma_cm's node is
    opened too (a directory fails)."""
    require(None if os.geteuid() == 0 else "needs root", "mknod of a char device")
    entries = [umockdev.TreeEntry("sys/class/misc/rdma_cm/abi_version", b"4\n"),
               umockdev.TreeEntry("dev/infiniband/rdma_cm", directory=True)]
    host = testing.materialize(HostBuilder().mlx5(), tmp_path, entries=entries)
    node = Path(host.dev) / "uverbs0"
    node.unlink()
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(231, 192))

    def live(**kw: Any) -> HostFacts:
        return collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
                             source="sysfs", environ={}, gpu_links=False, **kw)

    opened = live()
    assert [(d.listed, d.usable, d.reasons) for d in opened.devices] == [
        (True, False, ("dev_node_open_failed",))]
    assert opened.rdma_cm_available is False
    assert [(c.name, c.success) for c in opened.collectors] == [
        ("discovery", True), ("topology", True), ("nccl", True)]
    assert [d.usable for d in live(probe_open=False).devices] == [True]
    (Path(host.dev) / "rdma_cm").rmdir()
    (Path(host.dev) / "rdma_cm").write_bytes(b"")
    assert live().rdma_cm_available is True


def test_a_file_of_exactly_64_kib_is_whole(tree: testing.FakeHost) -> None:
    """NFD reads a file of up to 64 KiB: one of exactly 65,536 bytes keeps every line,
    one byte more and its last line is left out (said why)."""
    facts = facts_of(tree)
    base = feature_file(facts, expires_in=60, now=0)
    pad = MAX_FILE_SIZE - len(base.text().encode()) - len("# \n")
    full = feature_file(facts, expires_in=60, now=0, header="x" * pad)
    assert len(full.text().encode()) == MAX_FILE_SIZE
    assert full.features == base.features and full.dropped == ()
    over = feature_file(facts, expires_in=60, now=0, header="x" * (pad + 1))
    last = base.features[-1]
    assert over.features == base.features[:-1]
    assert over.dropped == ((f"{last.key}={last.value}",
                             f"the file would pass NFD's limit of {MAX_FILE_SIZE} bytes"),)
    short = feature_file(facts, expires_in=60, now=0, header="x" * (pad + 300))
    assert len(short.dropped) > 1  # every line that did not fit is said
    assert len(short.features) + len(short.dropped) == len(base.features)


def test_a_failed_diagnosis_says_nothing_of_rdma_cm(tree: testing.FakeHost,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import sysverbs.devices.diagnosis as diagnosis

    def boom(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("injected")

    monkeypatch.setattr(diagnosis, "diagnose", boom)
    facts = facts_of(tree, gpu_links=False)
    assert (facts.rdma_cm_available, facts.host_reasons) == (False, None)
    assert [d.name for d in facts.devices] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert {(d.listed, d.usable) for d in facts.devices} == {(None, None)}


def test_nccl_devices_series() -> None:
    """One info series per device port NCCL's IB transport would use: the B200's 16
    mlx5 ports and its irdma one."""
    page = metrics.render(facts_of(fixture_tree("gpu-dgx-b200"), gpu_links=False)).decode()
    got = {(dict(la)["device"], dict(la)["port"])
           for _, la, _ in prom.samples(page, "sysverbs_nccl_net_device_info")}
    assert got == {(f"mlx5_{i}", "1") for i in range(16)} | {("irdma0", "1")}


def test_gpu_series_are_ones() -> None:
    facts = facts_of(fixture_tree("gpu-dgx-b200"))
    default = prom.samples(metrics.render(facts).decode(), "sysverbs_gpu_nic_")
    assert {name for name, _, _ in default} == {"sysverbs_gpu_nic_assigned"}  # link: --detail
    s = prom.samples(metrics.render(facts, detail=True).decode(), "sysverbs_gpu_nic_")
    values = {}
    for name, _, v in s:
        values.setdefault(name, set()).add(v)
    assert values == {"sysverbs_gpu_nic_link": {1.0}, "sysverbs_gpu_nic_assigned": {1.0}}
    assert sum(1 for name, _, _ in s if name == "sysverbs_gpu_nic_link") == \
        len(facts.gpu_links) == 144

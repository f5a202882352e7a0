"""The bundled fixtures' port counters (``ports/N/counters/``, ``hw_counters/``, made by
tools/fixturegen/counters.py) read by the real node_exporter's infiniband collector
(Debian's ``prometheus-node-exporter``, ``--path.sysfs`` on the fixture's tree), and
every PromQL join of docs/fleet.md ("Joining with node_exporter") run by a real
Prometheus scraping that node_exporter and ``sysverbs metrics --listen`` on the same
tree.  Everything listens on 127.0.0.1 only.

Skips without Prometheus/node_exporter, fails under CI=true.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sysverbs.testing import materialize
from sysverbs.testing.cache import fixture_tree
from tests import prom
from tests.conftest import require

pytestmark = pytest.mark.oracle

ROOT = Path(__file__).resolve().parents[1]
#: Fixtures whose ib devices are all mlx5 (counters/ and hw_counters/ on every port):
#: InfiniBand and RoCE, PFs, VFs, an SF, renamed devices.
MLX5 = ("gpu-hgx-h100", "gpu-dgx-a100", "mlx5-sriov", "azure-vf", "mlx5-sf")
#: Fixtures with irdma, bnxt_re or efa devices: hw_counters/ only, no counters/.
NO_PMA = {"irdma": "rocep31s0f0", "bnxt_re": "bnxt_re0", "efa": "rdmap79s0",
          "gpu-dgx-b200": "irdma0"}
#: The joins' host: mlx5 InfiniBand and RoCE ports, GPUs; BROKEN loses its uverbs node.
JOIN_FIXTURE = "gpu-dgx-a100"
BROKEN = "mlx5_3"
INSTANCE = "node-a"


def _require() -> None:
    for name in (prom.PROMETHEUS, prom.NODE_EXPORTER):
        require(prom.unavailable(name), f"{name} (Debian's {name} package)")


class InfinibandExporter(prom.NodeExporter):
    """node_exporter with only its infiniband collector, on the sysfs tree ``sysfs``."""

    def __init__(self, sysfs: str) -> None:
        super().__init__(sysfs)

    def _argv(self) -> list[str]:
        ne = prom.binary(prom.NODE_EXPORTER)
        assert ne is not None
        return [ne, f"--web.listen-address=127.0.0.1:{self.port}",
                f"--path.sysfs={self.textfile_dir}", "--collector.disable-defaults",
                "--collector.infiniband", "--log.level=warn"]


class OneInstance(prom.Prometheus):
    """Prometheus giving every target the same ``instance`` label, as a fleet's scrape
    configuration does (deploy/prometheus-scrape.yml, kube-prometheus)."""

    def _argv(self) -> list[str]:
        argv = super()._argv()
        path = self.dir / "prometheus.yml"
        text = path.read_text()
        relabel = ('"relabel_configs": [{"target_label": "instance", '
                   f'"replacement": "{INSTANCE}"}}], ')
        path.write_text(text.replace('"job_name": ', relabel + '"job_name": '))
        return argv


def _served(sysfs: str) -> tuple[dict[tuple[str, str, str], float], float]:
    """node_exporter's node_infiniband_* samples on ``sysfs``: (name, device, port) ->
    value (port "" for node_infiniband_info), and its collector's success."""
    with InfinibandExporter(sysfs) as ne:
        text = ne.metrics()
    out = {}
    for name, labels, value in prom.samples(text, "node_infiniband_"):
        d = dict(labels)
        out[(name, d["device"], d.get("port", ""))] = value
    ok = [v for n, labels, v in prom.samples(text, "node_scrape_collector_success")
          if dict(labels) == {"collector": "infiniband"}]
    assert len(ok) == 1, text
    return out, ok[0]


def _ports(sysfs: str) -> dict[tuple[str, str], Path]:
    """(device, port) -> its ports/N directory, for every ib device of the tree."""
    base = Path(sysfs) / "class" / "infiniband"
    return {(dev.name, p.name): p for dev in base.iterdir() for p in (dev / "ports").iterdir()}


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), LC_ALL="C.UTF-8")
    for name in ("SYSFS_PATH", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_CONF_FILE"):
        env.pop(name, None)
    return env


def _sysverbs_ports(*where: str) -> set[tuple[str, str]]:
    """(device, port) of ``sysverbs metrics``' sysverbs_rdma_port_info."""
    text = subprocess.run([sys.executable, "-m", "sysverbs", "metrics", *where],
                          capture_output=True, env=_env(), timeout=120, check=True).stdout
    return {(dict(labels)["device"], dict(labels)["port"])
            for _, labels, _ in prom.samples(text.decode(), "sysverbs_rdma_port_info")}


def _int(path: Path) -> int:
    return int(path.read_text().split(":")[0])


@pytest.mark.parametrize("fixture", MLX5)
def test_node_exporter_serves_every_port_with_the_files_values(fixture: str) -> None:
    """Every (device, port) of the tree, the labels sysverbs metrics gives it, is served
    with the values of its files: the data counters x4 (node_exporter's units), the
    error counters, the state and physical state."""
    _require()
    sysfs = fixture_tree(fixture).sysfs
    served, ok = _served(sysfs)
    assert ok == 1
    ports = _ports(sysfs)
    assert ports and set(ports) == _sysverbs_ports("--fixture", fixture)
    assert {(d, p) for (n, d, p) in served if n == "node_infiniband_state_id"} == set(ports)
    for (dev, port), path in ports.items():
        c = path / "counters"
        got = {n[len("node_infiniband_"):]: v for (n, d, p), v in served.items()
               if (d, p) == (dev, port)}.__getitem__
        assert got("port_data_received_bytes_total") == 4 * _int(c / "port_rcv_data") > 0
        assert got("port_data_transmitted_bytes_total") == 4 * _int(c / "port_xmit_data") > 0
        assert got("port_packets_received_total") == _int(c / "port_rcv_packets") > 0
        assert got("symbol_error_total") == _int(c / "symbol_error") == 3
        assert got("link_error_recovery_total") == _int(c / "link_error_recovery") == 1
        assert got("vl15_dropped_total") == _int(c / "VL15_dropped") == 0
        assert got("state_id") == _int(path / "state")
        assert got("physical_state_id") == _int(path / "phys_state")
        assert _int(path / "hw_counters" / "out_of_sequence") == 7


def _version() -> tuple[int, ...]:
    ne = prom.binary(prom.NODE_EXPORTER)
    assert ne is not None
    out = subprocess.run([ne, "--version"], capture_output=True, text=True, timeout=30)
    m = re.search(r"version (\d+)\.(\d+)", out.stdout + out.stderr)
    assert m, out
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("fixture", sorted(NO_PMA))
def test_drivers_without_pma_counters(fixture: str) -> None:
    """irdma, bnxt_re and efa have hw_counters/ and no counters/, as on real hosts.
    node_exporter 1.5 (Debian 12) then fails its whole infiniband collector (procfs
    required counters/ until procfs #678; node_exporter issues #2769, #2846): exactly
    what such a host shows.  A newer one serves every port."""
    _require()
    sysfs = fixture_tree(fixture).sysfs
    port = Path(sysfs) / "class" / "infiniband" / NO_PMA[fixture] / "ports" / "1"
    assert not (port / "counters").exists()
    assert (port / "hw_counters" / "lifespan").read_text() == "10\n"
    assert len(list((port / "hw_counters").iterdir())) > 10
    served, ok = _served(sysfs)
    if _version() < (1, 6):
        assert ok == 0 and not served
    else:
        assert ok == 1
        assert {(d, p) for (n, d, p) in served if n == "node_infiniband_state_id"} == \
            set(_ports(sysfs))


def _joins() -> list[str]:
    """The PromQL expressions of docs/fleet.md's "Joining with node_exporter"."""
    text = (ROOT / "docs" / "fleet.md").read_text()
    part = text.split("### Joining with node_exporter", 1)[1].split("\n## ", 1)[0]
    return [e.strip() for e in re.findall(r"```promql\n(.*?)```", part, re.S)]


@pytest.fixture(scope="module")
def joined(tmp_path_factory: pytest.TempPathFactory) -> Iterator[prom.Prometheus]:
    """One Prometheus scraping node_exporter and sysverbs metrics --listen on one tree
    (JOIN_FIXTURE with BROKEN's uverbs node removed), both as instance INSTANCE."""
    _require()
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")  # as tests/test_cli.py's char devices
    root = tmp_path_factory.mktemp("joined")
    host = materialize(JOIN_FIXTURE, root)
    # the tree as a live host has it: char devices with sysfs' numbers (not opened)
    for node in [p for p in host.dev.iterdir() if p.name.startswith("uverbs")]:
        major, minor = (host.sysfs / "class/infiniband_verbs" / node.name / "dev"
                        ).read_text().split(":")
        node.unlink()
        os.mknod(node, 0o20666, os.makedev(int(major), int(minor)))
    verbs = host.sysfs / "class" / "infiniband" / BROKEN / "device" / "infiniband_verbs"
    (host.dev / next(verbs.iterdir()).name).unlink()
    port = prom.free_port()
    listen = subprocess.Popen(
        [sys.executable, "-m", "sysverbs", "metrics", "--listen", f"127.0.0.1:{port}",
         "--sysfs-path", str(host.sysfs), "--dev-dir", str(host.dev),
         "--proc-path", str(root / "proc"), "--providers", "builtin", "--source", "sysfs",
         "--no-open"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
    try:
        prom.wait_http(f"http://127.0.0.1:{port}/metrics", proc=listen)
        with InfinibandExporter(str(host.sysfs)) as ne, OneInstance(
                [f"127.0.0.1:{port}", f"127.0.0.1:{ne.port}"], jobs=["sysverbs", "node"]) as p:
            p.wait_for("count(sysverbs_rdma_device_usable) and count(node_infiniband_state_id)",
                       bool, timeout=60)
            yield p
    finally:
        prom.stop(listen)


def _rows(result: list[dict[str, Any]]) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in result}


def test_the_documented_joins_on_real_series(joined: prom.Prometheus) -> None:
    """Both joins of docs/fleet.md give the expected non-empty answer on the real
    series: bytes received per second by link layer (both layers of the host), and the
    ACTIVE port of the device verbs cannot use (BROKEN, and only it)."""
    by_layer, active_unusable = _joins()
    assert "node_infiniband_port_data_received_bytes_total" in by_layer
    rows = _rows(joined.wait_for(by_layer, lambda r: len(r) == 2, timeout=60))
    assert rows == {(("instance", INSTANCE), ("link_layer", "Ethernet")): 0.0,
                    (("instance", INSTANCE), ("link_layer", "InfiniBand")): 0.0}
    rows = _rows(joined.query(active_unusable))
    assert rows == {(("__name__", "node_infiniband_state_id"), ("device", BROKEN),
                     ("instance", INSTANCE), ("job", "node"), ("port", "1")): 4.0}
    # without the join, every port is ACTIVE: the join is what picks BROKEN
    assert len(joined.query("node_infiniband_state_id == 4")) == 10


def test_index_lists_the_fixtures_with_counters() -> None:
    """index.json's ``counters`` names exactly the fixtures whose recordings have
    counter files, and every mlx5/irdma/bnxt_re/efa fixture is among them."""
    from sysverbs.testing.host import FIXTURE_DIR, fixture_names

    index = json.loads((FIXTURE_DIR / "index.json").read_text())
    having = {n for n in fixture_names()
              if "/hw_counters/" in (FIXTURE_DIR / f"{n}.umockdev").read_text()}
    assert set(index["counters"]["fixtures"]) == having
    assert having >= {*MLX5, *NO_PMA}

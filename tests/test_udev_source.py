"""The udev source (pyudev), udev enrichment and graceful degradation without udev.

The equivalence tests run each host under ``umockdev-run``: there ``/sys`` and
``/dev`` are the host's for every library in the process, so pyudev (libudev),
sysverbs and the real libibverbs (through ``tests/oracle/probe.py``, with
``SYSFS_PATH`` unset since umockdev redirects ``/sys`` itself) all read the same
testbed.  Three fresh processes per host must print the same bytes.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Optional

import pytest

from sysverbs import testing
from sysverbs.devices import enrich
from sysverbs.sources import udev as udev_source
from sysverbs.testing import HostBuilder, umockdev
from tests import listing_hosts
from tests.conftest import fast_tmp, require
from tests.oracle import harness

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "tests" / "oracle" / "probe.py"
FIXTURES = testing.fixture_names()
SHOW = {"IBV_SHOW_WARNINGS": "1"}
PLAN = [{"op": "list"}, {"op": "list"}, {"op": "free", "list": 0}, {"op": "list"}]


# ----------------------------------------------------------------------- helpers


def umockdev_reason() -> Optional[str]:
    if not umockdev.have_umockdev_run():
        return "umockdev-run is not installed (apt-get install umockdev)"
    return udev_source.unavailable_reason()


def libibverbs_umockdev_reason() -> Optional[str]:
    """Why the real libibverbs cannot be compared under umockdev here."""
    why = umockdev_reason()
    if why is not None:
        return why
    if not ctypes.util.find_library("ibverbs"):
        return "libibverbs is not installed (apt-get install libibverbs1 ibverbs-providers)"
    try:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, harness.NETLINK_RDMA)
    except OSError:
        return None
    s.close()
    return "this host has RDMA netlink (ib_core), so libibverbs would ignore the testbed's /sys"


def clean_env(**extra: str) -> dict[str, str]:
    env = harness.base_env()
    env.pop("SYSFS_PATH", None)  # umockdev redirects /sys; libibverbs must read /sys
    env["TMPDIR"] = fast_tmp()  # where umockdev-run makes its testbed
    env.update(extra)
    return env


def umockdev_run(fixture: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(umockdev.umockdev_run_command(fixture, argv), env=clean_env(**env),
                          capture_output=True, timeout=120)


def json_under_umockdev(fixture: Path, code: str, tmp_path: Path) -> Any:
    """What the Python script ``code`` prints (JSON) when run on ``fixture``'s testbed."""
    script = tmp_path / "script.py"
    script.write_text(code)
    proc = umockdev_run(fixture, [sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return json.loads(proc.stdout)


def probes(fixture: Path, runs: list[tuple[str, dict[str, Any]]]
           ) -> list[subprocess.CompletedProcess[bytes]]:
    """Run tests/oracle/probe.py for each (impl, options), concurrently, each in its
    own umockdev testbed of ``fixture``."""
    procs = []
    for impl, options in runs:
        plan = json.dumps({"root": "/", "steps": PLAN, "options": options})
        argv = umockdev.umockdev_run_command(fixture, [sys.executable, str(PROBE), impl, plan])
        procs.append((argv, subprocess.Popen(argv, env=clean_env(**SHOW),
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    out = []
    for argv, proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        out.append(subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr))
    return out


def write_host(tmp_path: Path, source: testing.Source, name: str = "host") -> Path:
    path = tmp_path / f"{name}.umockdev"
    rec = testing.as_recording(source)
    path.write_text(umockdev.dumps(rec), encoding="utf-8", errors="surrogateescape")
    return path


def three_way(fixture: Path) -> list[dict[str, Any]]:
    """libibverbs, sysverbs source=sysfs and source=udev on one testbed: identical."""
    real, *ours = probes(fixture, [("libibverbs", {}),
                                   ("sysverbs", {"source": "sysfs", "rdma_core": "44"}),
                                   ("sysverbs", {"source": "udev", "rdma_core": "44"})])
    assert real.returncode == 0, real.stderr.decode(errors="replace")
    for source, run in zip(("sysfs", "udev"), ours):
        assert run.returncode == 0, run.stderr.decode(errors="replace")
        assert run.stdout.decode() == real.stdout.decode(), source
        assert run.stderr == real.stderr, source
    return [json.loads(line) for line in real.stdout.decode().splitlines()]


def run_python(code: str, *, env: Optional[dict[str, str]] = None) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env or harness.base_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# ----------------------------------------------------------------- lazy import


def test_import_sysverbs_does_not_import_pyudev() -> None:
    out = run_python(
        "import sys, sysverbs, sysverbs.sources.udev, sysverbs.devices.monitor, "
        "sysverbs.devices.enrich, sysverbs.testing\n"
        "print('pyudev' in sys.modules, 'pytest' in sys.modules)"
    )
    assert out.split() == ["False", "False"]


# --------------------------------------------------------- graceful degradation

DEGRADED = textwrap.dedent(
    r"""
    import errno, json, sys, tempfile
    {prelude}
    import sysverbs
    from sysverbs import testing
    from sysverbs.devices import enrich
    from sysverbs.sources import udev as udev_source
    from sysverbs.devices.monitor import monitor
    out = {{"reason": udev_source.unavailable_reason()}}
    try:
        sysverbs.get_device_list(source="udev")
    except OSError as e:
        out["source"] = [e.errno, str(e)]
    with tempfile.TemporaryDirectory() as t:
        host = testing.materialize("mlx5-cx6", t)
        devs = host.get_device_list(rdma_core="44")
        out["sysfs"] = sorted(d.name for d in devs)
        try:
            enrich.vendor_model(devs[0])
        except udev_source.UdevUnavailable as e:
            out["enrich"] = str(e)
        mon = monitor(timeout=0)
        out["monitor"] = [mon.backend, mon.reason]
        mon.stop()
        try:
            monitor(backend="udev", timeout=0)
        except udev_source.UdevUnavailable as e:
            out["monitor_udev"] = str(e)
    print(json.dumps(out))
    """
)

NO_PYUDEV = "sys.modules['pyudev'] = None  # import pyudev -> ImportError"
NO_LIBUDEV = textwrap.dedent(
    """
    import ctypes.util
    _find = ctypes.util.find_library
    ctypes.util.find_library = lambda name: None if name == "udev" else _find(name)
    """
)


@pytest.mark.parametrize(("prelude", "why"), [(NO_PYUDEV, "pyudev is not installed"),
                                              (NO_LIBUDEV, "libudev cannot be loaded")],
                         ids=["no-pyudev", "no-libudev"])
def test_without_udev_the_sysfs_source_works_and_udev_features_say_why(
        prelude: str, why: str) -> None:
    out = json.loads(run_python(DEGRADED.format(prelude=prelude)))
    assert why in out["reason"]
    assert out["source"][0] == udev_source.UdevUnavailable("x").errno
    assert why in out["source"][1] and "source 'udev' unavailable" in out["source"][1]
    assert len(out["sysfs"]) > 0
    assert why in out["enrich"]
    assert out["monitor"][0] == "poll" and why in out["monitor"][1]
    assert why in out["monitor_udev"]


def test_udev_source_refuses_another_sysfs_root(tmp_path: Path) -> None:
    require(udev_source.unavailable_reason(), "pyudev")
    host = testing.materialize("rxe", tmp_path)
    with pytest.raises(OSError) as info:
        host.get_device_list(source="udev")
    assert info.value.errno == 22
    assert "use source='sysfs'" in str(info.value)


# ---------------------------------------------------------------- under umockdev

SOURCES_AGREE = textwrap.dedent(
    """
    import json, sys, sysverbs
    out = {}
    for source in ("udev", "sysfs"):
        devs = sysverbs.get_device_list(source=source, sysfs_path="/sys", rdma_core="44",
                                        providers="builtin")
        out[source] = [[d.name, d.dev_name, d.dev_path, d.ibdev_path, int(d.node_type),
                        d.provider, sysverbs.get_device_guid(d)] for d in devs]
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("name", ["dgx-demo", "mlx5-sf", "azure-vf", "efa", "rxe", "hfi1"])
def test_udev_source_equals_sysfs_source_on_a_testbed(name: str, tmp_path: Path) -> None:
    """On a umockdev testbed, ``/sys`` for pyudev (libudev) and for sysverbs alike,
    source='udev' lists what source='sysfs' lists: the same devices, order, names,
    paths, node types, providers and GUIDs; and there are devices to compare (the live
    /sys of a host without RDMA would give ENOSYS twice and compare nothing)."""
    require(umockdev_reason(), "umockdev + pyudev")
    fixture = listing_hosts.listing_file(name)
    out = json_under_umockdev(fixture, SOURCES_AGREE, tmp_path)
    expected = {r.name for r in umockdev.load(fixture).subsystem("infiniband")}
    assert out["sysfs"], f"no device listed in {name}"
    assert {d[0] for d in out["sysfs"]} <= expected
    assert out["udev"] == out["sysfs"]


PYUDEV_WALK = textwrap.dedent(
    """
    import json, pyudev
    ctx = pyudev.Context()
    out = {}
    for sub in ("infiniband", "infiniband_verbs"):
        out[sub] = sorted([d.device_path, d.sys_name, {k: d.properties[k] for k in d.properties}]
                          for d in ctx.list_devices(subsystem=sub))
    print(json.dumps(out, sort_keys=True))
    """
)


@pytest.mark.parametrize("name", FIXTURES)
def test_pyudev_sees_the_fixture_devices(name: str, tmp_path: Path) -> None:
    require(umockdev_reason(), "umockdev + pyudev")
    fixture = listing_hosts.listing_file(name)
    seen = json_under_umockdev(fixture, PYUDEV_WALK, tmp_path)
    rec = umockdev.load(fixture)
    for sub in ("infiniband", "infiniband_verbs"):
        expected = sorted([r.path, r.name, {"DEVPATH": r.path, **dict(r.properties)}]
                          for r in rec.subsystem(sub))
        assert seen[sub] == expected, sub


@pytest.mark.oracle
@pytest.mark.parametrize("name", FIXTURES)
def test_udev_equals_sysfs_equals_libibverbs_under_umockdev(name: str) -> None:
    require(libibverbs_umockdev_reason(), "libibverbs under umockdev")
    results = three_way(listing_hosts.listing_file(name))
    listed = results[0].get("devices", [])
    if name not in ("empty", "smi", "siw", "mana", "ionic", "usnic"):
        assert listed, f"libibverbs found no device in {name}"
    # the process-wide list: the second call hands back the same devices
    assert [d["id"] for d in results[1]["devices"]] == [d["id"] for d in listed]


BUILT_HOSTS = {
    "mlx5-pf-8vfs": lambda: HostBuilder().mlx5(vfs=8),
    "efa-rxe-irdma-bnxt": lambda: HostBuilder().efa().rxe().irdma().bnxt_re(),
    "missing-dev-nodes": lambda: HostBuilder().mlx5(vfs=3, vf_dev_nodes=False)
    .rxe(dev_node=False).efa(),
    "abi-variants": lambda: HostBuilder().mlx5(abi_version=2).rxe(abi_version=None)
    .mlx4(abi_version=b"4junk\n").efa(node_type=b"9: bogus\n"),
    "dynamic-major": lambda: HostBuilder().mlx5(uverbs=40).rxe(uverbs=33),
}


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(BUILT_HOSTS))
def test_built_hosts_under_umockdev(name: str, tmp_path: Path) -> None:
    require(libibverbs_umockdev_reason(), "libibverbs under umockdev")
    builder = BUILT_HOSTS[name]()
    results = three_way(write_host(tmp_path, builder))
    listed = {d["name"] for d in results[0]["devices"]}
    assert listed, name
    assert listed <= {d.ibdev for d in builder.devices}


# ------------------------------------------------------------------ enrichment


def hwdb_reason() -> Optional[str]:
    """Why udev's hardware database cannot be consulted here."""
    why = udev_source.unavailable_reason()
    if why is not None:
        return why
    if not any(os.path.exists(p) for p in ("/etc/udev/hwdb.bin", "/usr/lib/udev/hwdb.bin")):
        return "udev's hwdb.bin is missing (apt-get install udev)"
    if shutil.which("systemd-hwdb") is None:
        return "systemd-hwdb is not installed (apt-get install udev)"
    return None


def _hwdb_query(modalias: str) -> dict[str, str]:
    tool = shutil.which("systemd-hwdb")
    assert tool is not None
    proc = subprocess.run([tool, "query", modalias], capture_output=True, text=True)
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


@pytest.mark.parametrize("name", ["mlx5-cx6", "efa", "bnxt_re", "irdma", "mlx5-sf",
                                  "azure-vf", "rxe", "hfi1"])
def test_vendor_model_from_hwdb_matches_systemd_hwdb(name: str, tmp_path: Path) -> None:
    """Fixture trees are unknown to udev's database, but the hwdb knows their
    hardware: the names equal what ``systemd-hwdb query <modalias>`` prints."""
    require(hwdb_reason(), "udev hwdb")
    host = testing.materialize(name, tmp_path)
    devs = host.get_device_list(rdma_core="44")
    assert devs
    for dev in devs:
        assert enrich.udev_properties(dev) == {}  # not the live /sys
        vendor, model = enrich.vendor_model(dev)
        modalias_file = Path(dev.ibdev_path) / "device" / "modalias"
        if dev.provider == "rxe":
            assert (vendor, model) == (None, None)
            continue
        if not modalias_file.exists():  # an SF's auxiliary parent: the PCI function's
            modalias_file = Path(os.path.realpath(Path(dev.ibdev_path) / "device")).parent \
                / "modalias"
        expected = _hwdb_query(modalias_file.read_text().strip())
        assert (vendor, model) == (expected.get(enrich.VENDOR_KEY),
                                   expected.get(enrich.MODEL_KEY)), dev.name
        assert vendor is not None


ENRICH = textwrap.dedent(
    """
    import json, sysverbs
    from sysverbs.devices import enrich
    out = []
    for d in sysverbs.get_device_list(source="udev", rdma_core="44", providers="builtin"):
        out.append({"name": d.name, "vendor_model": enrich.vendor_model(d),
                    "uverbs": dict(enrich.udev_properties(d)),
                    "ibdev": dict(enrich.udev_properties(d, of="ibdev")),
                    "parent": dict(enrich.udev_properties(d, of="parent"))})
    print(json.dumps(sorted(out, key=lambda x: x["name"])))
    """
)


def test_enrichment_from_udev_database_under_umockdev(tmp_path: Path) -> None:
    """udev's database (here: the testbed's properties) wins over the hwdb."""
    require(umockdev_reason() or hwdb_reason(), "umockdev + pyudev + udev hwdb")
    builder = (HostBuilder().mlx5(vendor_name="Acme Networks", model_name="Model X")
               .efa().rxe())
    by_name = {d["name"]: d for d in json_under_umockdev(write_host(tmp_path, builder), ENRICH,
                                                          tmp_path)}
    mlx5 = by_name["mlx5_0"]
    assert mlx5["vendor_model"] == ["Acme Networks", "Model X"]
    assert mlx5["uverbs"]["DEVNAME"] == "/dev/infiniband/uverbs0"
    assert mlx5["uverbs"]["SUBSYSTEM"] == "infiniband_verbs"
    assert mlx5["ibdev"]["NAME"] == "mlx5_0"
    assert mlx5["parent"]["PCI_SLOT_NAME"] == "0000:03:00.0"
    efa = by_name["rdmap4s0"]
    assert efa["vendor_model"][0] == "Amazon.com, Inc."  # no udev db entry: from the hwdb
    assert by_name["rxe0"]["vendor_model"] == [None, None]
    assert by_name["rxe0"]["parent"] == {}


def test_udev_properties_rejects_unknown_part(tmp_path: Path) -> None:
    require(udev_source.unavailable_reason(), "pyudev")
    devs = testing.materialize("rxe", tmp_path).get_device_list()
    with pytest.raises(ValueError):
        enrich.udev_properties(devs[0], of="nope")

"""Verdicts a fleet can page on: an XDR SMI device is what it is, EFA's NCCL network is
aws-ofi-nccl's, an unreadable or unparseable file is ``unknown`` (never a down port or a
healthy device), a finite RLIMIT_MEMLOCK is reported against what NCCL and UCX ask for.

The unreadable files are unreadable for real: the tree is read as uid 65534
(``setpriv``, the staged copy of the code: tests/staging.py), as root reads anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sysverbs import testing
from sysverbs.devices.memlock import memlock_finding
from sysverbs.devices.readable import unknown_files
from sysverbs.rank.netplugin import net_transport
from tests import staging
from tests.conftest import fast_tmpdir, require
from tests.diagnose_runs import Seen, fixture, run, run_as_nobody
from tests.test_diagnose import scenario

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------ scenarios of test_diagnose's catalogue


def _readable_by_all(root: Path) -> None:
    """Every directory of a materialized tree searchable by uid 65534."""
    for dirpath, dirnames, _ in os.walk(root):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)


def _no_uverbs(root: Path) -> Seen:
    """A device the kernel shows with no uverbs entry that is no SMI device."""
    fixture("smi")(root)
    ib = root / "sys/class/infiniband"
    os.rename(ib / "smi1", ib / "ipath1")
    return run(root, recorded=True)


@scenario(_no_uverbs)
def _(s: Seen) -> None:
    assert s.devices["ipath1"]["codes"] == ["no_uverbs_device"]
    assert not s.devices["ipath1"]["usable"] and "SMI" not in str(s.devices["ipath1"])


def _unknown(root: Path) -> Seen:
    fixture("mlx5-cx6")(root)
    _readable_by_all(root)
    os.chmod(root / "sys/class/infiniband/mlx5_2/ports/1/state", 0)
    return run_as_nobody(root)


@scenario(_unknown, needs_root=True)
def _(s: Seen) -> None:
    d = s.devices["mlx5_2"]
    assert "unknown" in d["codes"] and "port_down" not in d["codes"] and not d["usable"]
    assert "mlx5_2/ports/1/state cannot be read (EACCES: Permission denied)" in \
        d["messages"]["unknown"]
    assert d["ports"][d["codes"].index("unknown")] == 1


def _memlock_low(root: Path) -> Seen:
    fixture("mlx5-cx6")(root)
    _readable_by_all(root)
    return run_as_nobody(root, memlock=8 * 1024 * 1024)  # Debian's default


@scenario(_memlock_low, needs_root=True)
def _(s: Seen) -> None:
    assert "memlock" not in s.host
    assert "8388608 bytes (8 MiB)" in s.host["memlock_low"]
    assert "no CAP_IPC_LOCK" in s.host["memlock_low"]


@pytest.fixture(scope="module")
def root_only() -> None:
    require(None if os.geteuid() == 0 else "needs root (setpriv to uid 65534)", "root")


@pytest.mark.parametrize("build", [_no_uverbs, _unknown, _memlock_low],
                         ids=["no_uverbs", "unknown", "memlock_low"])
def test_scenario(build: Any, root_only: None) -> None:
    from tests.test_diagnose import SCENARIOS

    check = next(c for n, b, c, _ in SCENARIOS if b is build)
    with fast_tmpdir("sv-verdict-") as tmp:
        os.chmod(tmp, 0o755)
        check(build(tmp))


# -------------------------------------------------------------------------- SMI devices


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    run_env = dict(os.environ, PYTHONPATH=str(ROOT), LC_ALL="C.UTF-8")
    for name in [k for k in run_env if k.startswith("NCCL_")] + ["SYSFS_PATH"]:
        run_env.pop(name, None)
    run_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                          text=True, env=run_env, timeout=120)


def test_doctor_passes_the_smi_fixture() -> None:
    """The XDR SMI device is a management device (a note): doctor exits 0, and the
    metrics and node labels have no problem and no usable series for it."""
    p = _cli("doctor", "--fixture", "smi")
    assert p.returncode == 0, p.stdout
    assert "smi1: management device, no verbs: note:" in p.stdout
    doc = json.loads(_cli("doctor", "--fixture", "smi", "--json").stdout)
    assert doc["usable"] is True
    smi = next(d for d in doc["devices"] if d["name"] == "smi1")
    assert [(r["code"], r["severity"]) for r in smi["reasons"]] == [("management_device",
                                                                      "note")]
    nfd = _cli("nfd", "--fixture", "smi").stdout
    assert "problem" not in nfd and "smi1.usable" not in nfd
    assert "rdma.usable-devices=1" in nfd
    metrics = json.loads(_cli("metrics", "--fixture", "smi", "--json").stdout)
    series = {(f["name"], s["labels"].get("device"), s["labels"].get("reason")): s["value"]
              for f in metrics["families"] for s in f["samples"]}
    assert series[("sysverbs_rdma_device_listed", "smi1", None)] == 0
    assert ("sysverbs_rdma_device_usable", "smi1", None) not in series
    assert not [k for k, v in series.items()
                if k[0] == "sysverbs_rdma_device_problem" and v == 1]


def test_a_device_without_uverbs_that_is_no_smi_device_is_still_an_error() -> None:
    with fast_tmpdir("sv-verdict-") as tmp:
        s = _no_uverbs(tmp)
    assert s.devices["ipath1"]["codes"] == ["no_uverbs_device"]


# ------------------------------------------------------------------- NCCL's net plugins


@pytest.mark.parametrize("env,ib,efa,want", [
    ({}, False, True, "ofi"),                                 # EFA: aws-ofi-nccl
    ({}, True, False, "ib"),
    ({}, False, False, "socket"),
    ({"NCCL_NET_PLUGIN": "none"}, False, True, "socket"),     # no plugin: IB skips EFA
    ({"NCCL_NET_PLUGIN": "aws-ofi"}, False, True, "ofi"),
    ({"NCCL_NET_PLUGIN": "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"}, False, True, "ofi"),
    ({"NCCL_NET_PLUGIN": "sharp"}, True, False, "plugin"),    # another plugin comes first
    ({"NCCL_NET": "Socket"}, True, True, "socket"),
    ({"NCCL_NET": "IB"}, True, True, "ib"),
    ({"NCCL_NET": "IB"}, False, True, ""),                    # no IB device: init fails
    ({"NCCL_NET": "AWS Libfabric"}, False, True, "ofi"),
    ({"NCCL_NET": "libfabric"}, False, True, "ofi"),          # names compare without case
    ({"NCCL_NET": "Libfabric"}, True, False, ""),             # no EFA: no aws-ofi network
    ({"NCCL_NET": "Bogus"}, True, True, ""),
])
def test_net_transport(env: dict[str, str], ib: bool, efa: bool, want: str) -> None:
    assert net_transport(env, ib_ports=ib, efa_devices=efa) == want


def test_efa_nccl_transport_is_the_plugins() -> None:
    """``nfd --fixture efa``: aws-ofi-nccl's network, not sockets; NCCL_NET_PLUGIN=none
    (no plugin: NCCL's IB transport skips EFA's link layer) is sockets; NCCL_NET naming a
    network nobody has is ``none`` (NCCL fails to initialise)."""
    assert "nccl.transport=ofi" in _cli("nfd", "--fixture", "efa").stdout
    off = _cli("nfd", "--fixture", "efa", env={"NCCL_NET_PLUGIN": "none"}).stdout
    assert "nccl.transport=socket" in off
    bogus = _cli("nfd", "--fixture", "efa", env={"NCCL_NET": "Bogus"}).stdout
    assert "nccl.transport=none" in bogus
    assert "nccl.transport=ib" in _cli("nfd", "--fixture", "gpu-dgx-b200").stdout


# ---------------------------------------------------------------------------- memlock


def test_memlock_rule() -> None:
    assert memlock_finding(None, ipc_lock=False) is None
    assert memlock_finding(-1, ipc_lock=False) is None
    assert memlock_finding(32768, ipc_lock=False)[0] == "memlock"  # type: ignore[index]
    assert memlock_finding(32768, ipc_lock=True)[0] == "memlock"  # type: ignore[index]
    assert memlock_finding(32768, ipc_lock=True, root=True) is None
    assert memlock_finding(32769, ipc_lock=False)[0] == "memlock_low"  # type: ignore[index]
    assert memlock_finding(32768, ipc_lock=False, root=True)[0] == "no_ipc_lock"  # type: ignore[index]
    assert memlock_finding(1 << 40, ipc_lock=True) is None


# --------------------------------------------------------------- unreadable, unparseable


def _nodes(host: testing.FakeHost) -> None:
    """Real char devices with the uverbs entries' numbers, so that every device is usable
    (with --no-open: no uverbs driver stands behind them here)."""
    verbs = Path(host.sysfs) / "class/infiniband_verbs"
    for entry in sorted(verbs.iterdir()):
        dev = entry / "dev"
        if not dev.exists():
            continue
        major, minor = map(int, dev.read_text().split(":"))
        node = Path(host.dev) / entry.name
        if node.exists():
            node.unlink()
        os.mknod(node, 0o666 | 0o020000, os.makedev(major, minor))
        os.chmod(node, 0o666)


@pytest.fixture
def a100(root_only: None) -> Iterator[testing.FakeHost]:
    """gpu-dgx-a100, readable by all, with real device nodes."""
    with fast_tmpdir("sv-verdict-") as tmp:
        os.chmod(tmp, 0o755)
        host = testing.materialize(testing.fixture_path("gpu-dgx-a100"), str(tmp / "h"))
        _readable_by_all(tmp)
        _nodes(host)
        yield host


def _as_nobody(host: testing.FakeHost, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m sysverbs ARGV`` on ``host`` as uid 65534 (the staged code)."""
    where = ["--sysfs-path", host.sysfs, "--dev-dir", host.dev, "--providers", "builtin",
             "--rdma-core", "44"]
    cmd = [*staging.AS_NOBODY, staging.user_python(), "-m", "sysverbs", *argv, *where]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd="/",
                          env=staging.user_env({"LC_ALL": "C.UTF-8"}))


def _device(host: testing.FakeHost, name: str) -> Path:
    return (Path(host.sysfs) / "class/infiniband" / name).resolve()


def test_unreadable_files_are_unknown_everywhere(a100: testing.FakeHost) -> None:
    """mlx5_0's node_guid, its port 1's state and its PCI function's numa_node at mode 000,
    read as uid 65534: each command names the files (path and errno); metrics exits 1
    with the discovery collector failed; nothing says the port is down."""
    before = _as_nobody(a100, "metrics")
    assert before.returncode == 0 and 'collector_success{collector="discovery"} 1.0' in \
        before.stdout, before.stderr
    dev = _device(a100, "mlx5_0")
    files = [dev / "node_guid", dev / "ports/1/state", dev / "device/numa_node"]
    for f in files:
        os.chmod(f, 0)
    shown = [str(f) for f in [Path(a100.sysfs) / "class/infiniband/mlx5_0/node_guid",
                              Path(a100.sysfs) / "class/infiniband/mlx5_0/ports/1/state",
                              Path(a100.sysfs) / "class/infiniband/mlx5_0/device/numa_node"]]

    doctor = _as_nobody(a100, "doctor", "--json", "--no-open")
    assert doctor.returncode == 1, doctor.stderr
    doc = json.loads(doctor.stdout)
    d = next(x for x in doc["devices"] if x["name"] == "mlx5_0")
    unknown = [r for r in d["reasons"] if r["code"] == "unknown"]
    assert [r["message"].split(" cannot be read")[0] for r in unknown] == shown
    assert all("(EACCES: Permission denied)" in r["message"] for r in unknown)
    assert [r["port"] for r in unknown] == [None, 1, None]
    assert not [r for r in d["reasons"] if r["code"] in ("port_down", "no_gids")]
    others = [x for x in doc["devices"] if x["name"] != "mlx5_0"]
    assert others and all(x["usable"] for x in others)

    verbose = _as_nobody(a100, "doctor", "-v", "--no-open").stdout
    assert "mlx5_0: unknown (provider mlx5, uverbs0)" in verbose
    assert f"{shown[1]} cannot be read (EACCES" in verbose

    metrics = _as_nobody(a100, "metrics", "--no-open")
    assert metrics.returncode == 1
    assert 'sysverbs_collector_success{collector="discovery"} 0.0' in metrics.stdout
    assert 'sysverbs_rdma_device_problem{device="mlx5_0",reason="unknown"} 1.0' in \
        metrics.stdout
    assert 'sysverbs_rdma_device_usable{device="mlx5_0"}' not in metrics.stdout
    assert 'sysverbs_rdma_device_usable{device="mlx5_1"} 1.0' in metrics.stdout
    assert shown[0] in metrics.stderr and "EACCES" in metrics.stderr

    nfd = _as_nobody(a100, "nfd", "--no-open").stdout
    assert "rdma.problem.unknown=true" in nfd and "rdma.device.mlx5_0.problem.unknown=true" in nfd
    assert "rdma.problem.port-down" not in nfd and "rdma.usable=true" in nfd

    topo = json.loads(_as_nobody(a100, "topo", "--json").stdout)
    assert [p for p in topo["problems"] if p.startswith("unknown: ")] == [
        f"unknown: {p} cannot be read (EACCES: Permission denied)" for p in shown]


def test_garbage_is_unknown(a100: testing.FakeHost) -> None:
    """Text the kernel never writes (a numa_node of -7 or of 20 digits, a local_cpulist
    0-99999999, a port state 9) is ``unknown`` with the path and the text; read as
    root."""
    garbage = {("mlx5_0", "device/numa_node"): "-7",
               ("mlx5_1", "device/numa_node"): "9" * 20,
               ("mlx5_2", "device/local_cpulist"): "0-99999999",
               ("mlx5_3", "ports/1/state"): "9: BOGUS"}
    for (name, rel), text in garbage.items():
        (_device(a100, name) / rel).write_text(text + "\n")
    where = ["--sysfs-path", a100.sysfs, "--dev-dir", a100.dev, "--providers", "builtin",
             "--rdma-core", "44"]
    doc = json.loads(_cli("doctor", "--json", "--no-open", *where).stdout)
    found = {d["name"]: [r["message"] for r in d["reasons"] if r["code"] == "unknown"]
             for d in doc["devices"]}
    for (name, rel), text in garbage.items():
        path = f"{a100.sysfs}/class/infiniband/{name}/{rel}"
        assert found[name] and found[name][0].startswith(f"{path} holds {text!r}"), found[name]
    assert not any(found[n] for n in found if n not in {n for n, _ in garbage})
    metrics = _cli("metrics", "--no-open", *where)
    assert metrics.returncode == 1
    assert 'sysverbs_collector_success{collector="discovery"} 0.0' in metrics.stdout
    gpu = Path(a100.sysfs) / "bus/pci/devices/0000:07:00.0"  # GPU0 (topo --json)
    (gpu / "local_cpulist").write_text("48-63,176-99999\n")
    topo = json.loads(_cli("topo", "--json", *where).stdout)
    assert [p for p in topo["problems"] if p.startswith("unknown: ")] == [
        f"unknown: {a100.sysfs}/class/infiniband/{name}/{rel} holds {text!r}, not "
        + ("a port state" if rel.endswith("state") else "a NUMA node (-1, or 0 to 1023)"
           if rel.endswith("numa_node") else "a CPU list (CPUs 0 to 8191)")
        for (name, rel), text in garbage.items()] + [
        f"unknown: {gpu}/local_cpulist holds '48-63,176-99999', not a CPU list (CPUs 0 to "
        "8191)"]


def test_no_bundled_fixture_has_an_unknown_file() -> None:
    """What the kernel writes passes the checks: not one finding on any fixture."""
    with fast_tmpdir("sv-verdict-") as tmp:
        for name in testing.fixture_names():
            host = testing.materialize(testing.fixture_path(name), str(tmp / name))
            ib = Path(host.sysfs) / "class/infiniband"
            for dev in sorted(ib.iterdir()) if ib.is_dir() else []:
                assert unknown_files(str(dev)) == [], (name, dev.name)


@pytest.mark.parametrize("module", ["sysverbs.devices.readable", "sysverbs.devices.memlock",
                                    "sysverbs.rank.netplugin"])
def test_module_examples(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and result.failed == 0, module


# ------------------------------------------------ the fleet view: recording rules

RULES = ROOT / "sysverbs" / "fleet" / "rules.yml"
RECORDING_TESTS = ROOT / "tests" / "data" / "recording_rules_test.yml"

#: Recording rules a little wrong, each caught by a case of recording_rules_test.yml: a
#: node with no usable device left out, a GPU's farthest port instead of its nearest, a
#: CPU node's sockets taken for a fallback, N/A taken for PIX, a degraded link's node
#: count without its zeros.
RECORDING_MUTATIONS = [
    ("          or sum without (version, rdma_core) (0 * sysverbs_build_info)\n      - record: "
     "node_role", "\n      - record: node_role"),
    ("min without (device, port, link)", "max without (device, port, link)"),
    ("            and on (instance) sysverbs_rdma_device_info\n", "\n"),
    ('6 * sysverbs_gpu_nic_assigned', '1 * sysverbs_gpu_nic_assigned'),
    ("            sysverbs_pcie_link_degraded == 1\n          )\n"
     "          or sum without (version, rdma_core) (0 * sysverbs_build_info)\n",
     "            sysverbs_pcie_link_degraded == 1\n          )\n"),
]


def _promtool_test(rules_text: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    from tests import prom

    require(prom.unavailable(prom.PROMTOOL), "promtool (Debian's prometheus package)")
    (tmp / "sysverbs" / "fleet").mkdir(parents=True)
    (tmp / "tests" / "data").mkdir(parents=True)
    (tmp / "sysverbs" / "fleet" / "rules.yml").write_text(rules_text)
    (tmp / "tests" / "data" / RECORDING_TESTS.name).write_text(RECORDING_TESTS.read_text())
    return subprocess.run([str(prom.binary(prom.PROMTOOL)), "test", "rules",
                           str(tmp / "tests" / "data" / RECORDING_TESTS.name)],
                          capture_output=True, text=True, timeout=120)


def test_recording_rules_pass_their_cases(tmp_path: Path) -> None:
    """promtool computes each fleet-view series of the shipped rules as the cases say;
    each slightly wrong rule fails them (the cases can fail)."""
    text = RULES.read_text()
    p = _promtool_test(text, tmp_path / "shipped")
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr
    for i, (old, new) in enumerate(RECORDING_MUTATIONS):
        assert text.count(old) == 1, old
        p = _promtool_test(text.replace(old, new), tmp_path / str(i))
        assert p.returncode == 1 and "FAILED" in p.stdout + p.stderr, (old, p.stdout)

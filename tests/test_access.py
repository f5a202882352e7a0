"""What keeps a process from a device: ``no_ipc_lock`` (devices/memlock.py),
``device_cgroup_denied`` and ``netns_exclusive`` (devices/access.py), as pure rules; and
no bundled fixture raises any of this task's findings.  The real kernel makes each
situation in the kernel lab (tests/kernel/scenario_access.py, test_access_lab.py: the
real ``ibv_devices``, ``ibv_rc_pingpong`` and ``ibv_devinfo`` beside ``sysverbs
doctor``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, Optional

import pytest

from sysverbs.devices.access import cgroup_denied, netns_away, netns_finding, own_cgroup
from sysverbs.devices.diagnosis import CODES, diagnose
from sysverbs.devices.memlock import NCCL_BUFFSIZE, memlock_finding, registration_verdict
from sysverbs.fleet.facts import DEVICE_REASONS, HOST_REASONS
from sysverbs.placement import acs_redirects, read_host, translated_nics
from sysverbs.testing.cache import fixture_tree
from sysverbs.testing.host import fixture_names
from tests import trees
from tests.conftest import require
from tests.diagnose_runs import Seen, null_node, rxe, seen_of_json
from tests.test_diagnose import scenario

V1 = """12:pids:/docker/abc
11:devices:/docker/abc
0::/docker/abc
"""
V2 = "0::/kubepods/pod1/ctr\n"


def test_no_ipc_lock_is_root_without_the_capability() -> None:
    code, msg = memlock_finding(65536, ipc_lock=False, root=True)  # type: ignore[misc]
    assert code == "no_ipc_lock"
    assert "65536 bytes" in msg and "less than one NCCL buffer" in msg
    assert "--cap-add=IPC_LOCK" in msg
    assert memlock_finding(65536, ipc_lock=True, root=True) is None
    assert memlock_finding(None, ipc_lock=False, root=True) is None  # unlimited
    assert memlock_finding(65536, ipc_lock=False)[0] == "memlock_low"  # type: ignore[index]
    low = memlock_finding(8 * 1024 * 1024, ipc_lock=False)
    assert low is not None and "this limit holds 2 NCCL buffers" in low[1]


def test_registration_verdict() -> None:
    assert registration_verdict(NCCL_BUFFSIZE - 1).startswith("less than one NCCL buffer")
    assert registration_verdict(8 * 1024 * 1024).startswith("2 NCCL buffers of 4194304 bytes")


def test_cgroup_denied_names_the_cgroup_and_the_rule() -> None:
    code, msg = cgroup_denied("/dev/infiniband/uverbs0", 231, 192, V1)
    assert code == "device_cgroup_denied"
    assert "/docker/abc (cgroup v1 devices)" in msg
    assert "--device-cgroup-rule='c 231:* rwm'" in msg
    assert own_cgroup(V2) == "/kubepods/pod1/ctr (cgroup v2: a BPF_CGROUP_DEVICE program)"
    assert own_cgroup(None) == own_cgroup("garbage") == "?"


def test_netns_rule() -> None:
    assert netns_finding(1, ["rxe0"], []) == {}  # shared mode: every device is here
    assert netns_finding(0, ["rxe0"], None) == {}  # the kernel did not answer
    assert netns_finding(0, ["rxe0", "rxe1"], ["rxe1"]).keys() == {"rxe0"}
    code, msg = netns_finding(0, ["rxe0"], [])["rxe0"]
    assert code == "netns_exclusive" and "rdma dev set rxe0 netns NS" in msg
    # a tree is not this machine: its devices are never compared with this kernel's
    assert netns_away(b"/tmp/tree/sys", "auto", [b"rxe0"]) == {}
    assert netns_away(b"/sys", "sysfs", [b"rxe0"]) == {}


def test_the_codes_reach_the_fleet() -> None:
    for code in ("device_cgroup_denied", "netns_exclusive"):
        assert CODES[code][0] in ("error", "warning") and code in DEVICE_REASONS
    assert "no_ipc_lock" in HOST_REASONS and "no_ipc_lock" not in DEVICE_REASONS


OURS = {"device_cgroup_denied", "netns_exclusive", "no_ipc_lock"}


@pytest.mark.parametrize("name", fixture_names())
def test_no_bundled_fixture_raises_them(name: str) -> None:
    tree = fixture_tree(name)
    host = read_host(tree.sysfs, recorded=True)
    assert acs_redirects(host) == () and translated_nics(host) == ()
    found = diagnose(sysfs_path=tree.sysfs, dev_dir=tree.dev, source="sysfs",
                     providers="builtin", recorded=True)
    codes = {r.code for d in found for r in d.reasons} | {r.code for r in found.host}
    assert not codes & OURS


# -- diagnose() scenarios (tests/test_diagnose.py's registry: every code has one) --------
#: Made only in the kernel lab (an RDMA device in exclusive netns mode): test_access_lab.py
LAB_ONLY = {"netns_exclusive"}


def _doctor(root: Path, prefix: list[str]) -> Seen:
    """``python -m sysverbs doctor --json`` on the tree, as root, behind ``prefix``."""
    cmd = [*prefix, sys.executable, "-m", "sysverbs", "doctor", "--json", "--providers",
           "builtin", "--rdma-core", "44", "--sysfs-path", str(root / "sys"), "--dev-dir",
           str(root / "dev/infiniband")]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run(cmd, capture_output=True, env=env, timeout=120, cwd="/")
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return seen_of_json(json.loads(proc.stdout))


def _no_ipc_lock(root: Path) -> Seen:
    trees.build(root, trees.host(rxe(dev="1:3\n")))
    null_node(root / "dev/infiniband/uverbs0")
    return _doctor(root, ["setpriv", "--bounding-set=-ipc_lock",
                          "prlimit", "--memlock=65536:65536"])


@scenario(_no_ipc_lock, needs_root=True)
def _(s: Seen) -> None:
    assert "65536 bytes" in s.host["no_ipc_lock"] and "memlock_low" not in s.host
    assert s.devices["rxe0"]["usable"]


def devices_v1() -> Optional[str]:
    """Where this machine mounts cgroup v1's devices controller (None: not at all)."""
    with open("/proc/self/mounts") as f:
        for line in f:
            _, where, kind, opts, *_ = line.split()
            if kind == "cgroup" and "devices" in opts.split(","):
                return where
    return None


@contextlib.contextmanager
def denying(tag: str) -> Iterator[list[str]]:
    """The real device cgroup: a child of cgroup v1's devices hierarchy (this machine's,
    or one mounted for the test: cgroup v2 has no devices controller, so a v2-only host
    such as a fresh Debian 12 can still mount it) that denies 1:3; yields the prefix
    that runs a command inside it."""
    where, mounted = devices_v1(), None
    if where is None:
        mounted = tempfile.mkdtemp(prefix="sv-devices-")
        done = subprocess.run(["mount", "-t", "cgroup", "-o", "devices", "sv-devices",
                               mounted], capture_output=True, text=True)
        if done.returncode != 0:
            os.rmdir(mounted)
        require(done.stderr.strip() or None, "cgroup v1's devices controller")
        where = mounted
    cg = Path(where) / f"sv-deny-{tag}{os.getpid()}"
    cg.mkdir()
    try:
        (cg / "devices.deny").write_text("c 1:3 rwm\n")
        yield ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh"]
    finally:
        cg.rmdir()
        if mounted:
            subprocess.run(["umount", mounted], check=False)
            os.rmdir(mounted)


def _cgroup_denied(root: Path) -> Seen:
    """The doctor moved into a cgroup that denies the node's numbers (1:3)."""
    trees.build(root, trees.host(rxe(dev="1:3\n")))
    null_node(root / "dev/infiniband/uverbs0")
    with denying("") as inside:
        return _doctor(root, inside)


@scenario(_cgroup_denied, needs_root=True)
def _(s: Seen) -> None:
    d = s.devices["rxe0"]
    assert d["codes"] == ["device_cgroup_denied"] and d["listed"] and not d["usable"]
    assert "sv-deny-" in d["messages"]["device_cgroup_denied"]


@pytest.mark.parametrize("build", [_no_ipc_lock, _cgroup_denied],
                         ids=["no_ipc_lock", "device_cgroup_denied"])
def test_scenario(build: Callable[[Path], Seen], tmp_path: Path) -> None:
    from tests.test_diagnose import SCENARIOS

    require(None if os.geteuid() == 0 else "needs root (setpriv, cgroups)", "root")
    check = next(c for _, b, c, _ in SCENARIOS if b is build)
    check(build(tmp_path))


def _cli(root: Path, prefix: list[str], *argv: str) -> str:
    """``python -m sysverbs ARGV`` on the tree, as root, behind ``prefix``: its stdout."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run([*prefix, sys.executable, "-m", "sysverbs", *argv, "--providers",
                           "builtin", "--sysfs-path", str(root / "sys"), "--dev-dir",
                           str(root / "dev/infiniband")],
                          capture_output=True, env=env, timeout=120, cwd="/")
    return proc.stdout.decode()


def test_metrics_and_nfd_show_them(tmp_path: Path) -> None:
    """The same real conditions as the scenarios: a series while found, a label."""
    require(None if os.geteuid() == 0 else "needs root (setpriv, cgroups)", "root")
    trees.build(tmp_path, trees.host(rxe(dev="1:3\n")))
    null_node(tmp_path / "dev/infiniband/uverbs0")
    nocap = ["setpriv", "--bounding-set=-ipc_lock", "prlimit", "--memlock=65536:65536"]
    assert 'sysverbs_rdma_host_problem{reason="no_ipc_lock"} 1.0' in _cli(
        tmp_path, nocap, "metrics")
    assert "/rdma.problem.no-ipc-lock=true" in _cli(tmp_path, nocap, "nfd")
    with denying("m") as inside:
        page, labels = _cli(tmp_path, inside, "metrics"), _cli(tmp_path, inside, "nfd")
    assert ('sysverbs_rdma_device_problem{device="rxe0",reason="device_cgroup_denied"} 1.0'
            in page)
    assert "/rdma.device.rxe0.problem.device-cgroup-denied=true" in labels

"""``sysverbs run``'s promises beyond the sets themselves (hwloc checks those:
tests/test_run_hwloc.py): ``exclusive`` is exclusive (fewer cores than ranks is an
error, exit 1, or ``--fallback``), ``socket`` prefers every node of its package
(MPOL_PREFERRED_MANY), a reason names the rank's share as the rank's own index, and
``--fallback`` runs the command on a host with nothing to place by (no GPU, no RDMA
device: this kernel's sysfs with its PCI devices and classes hidden)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sysverbs.ground.errors import BindingError
from sysverbs.rank.launch import plan
from sysverbs.testing import HostBuilder
from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]


def sv(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items()
            if k not in ("SYSFS_PATH", "CUDA_VISIBLE_DEVICES", "LOCAL_RANK")}
    full.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                          text=True, timeout=120, env=full)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One socket of 3 cores x 2 threads, two NUMA nodes (2 cores, then 1), four GPUs
    on node 0 and one on node 1."""
    b = HostBuilder().cpu_topology(sockets=1, cores_per_socket=3, threads_per_core=2,
                                   nodes_per_socket=1)
    hb = b.host_bridge("pci0000:00", numa_node=0)
    for i in range(4):
        b.gpu(f"{hb}/0000:{0x10 + i:02x}:00.0")
    return b.materialize(tmp_path_factory.mktemp("small"))


def test_fewer_cores_than_gpus_is_an_error(small: Any) -> None:
    """3 physical cores for 4 GPUs: exclusive cannot give each a core of its own."""
    root = str(small.sysfs)
    for mode in ("exclusive", "exclusive-nosmt"):
        for rank in range(4):
            with pytest.raises(BindingError, match="only 3 physical cores on node 0 for "
                               "the 4 GPUs of the host there") as e:
                plan(local_rank=rank, cpu=mode, sysfs_path=root, environ={}, nics=False)
            assert e.value.errno == 22
        r = sv("run", "--sysfs-path", root, "--local-rank", "3", "--cpu", mode,
               "--dry-run", "--json")
        assert r.returncode == 1 and (
            "\nsysverbs run: error: no CPU left for cpu mode " in r.stderr), r.stderr
        assert json.loads(r.stdout)["error"]["kind"] == "binding"
    # node mode shares the node, as it says
    assert plan(local_rank=3, sysfs_path=root, environ={}, nics=False).cpus_text == "0-5"


def test_the_share_is_named_by_its_own_index() -> None:
    """Local rank 2 takes share 2 (the issue: "rank 3 of 4" for local rank 2)."""
    r = sv("run", "--fixture", "gpu-hgx-h100", "--local-rank", "2", "--cpu", "exclusive",
           "--dry-run")
    assert r.returncode == 0, r.stderr
    assert ("  why cpus: 48 physical cores of node 0 split among the 4 GPUs of the host "
            "there (12 each): share 2 (of 0 to 3); with their SMT siblings\n") in r.stdout
    assert "rank 3" not in r.stdout


def test_socket_prefers_all_nodes_of_its_package(tmp_path: Path) -> None:
    """A package of two nodes: socket mode's memory is both (MPOL_PREFERRED_MANY, or
    MPOL_BIND with --mem bind); node mode's stays the GPU's node."""
    b = HostBuilder().cpu_topology(sockets=2, cores_per_socket=4, threads_per_core=1,
                                   nodes_per_socket=2)
    b.gpu(f"{b.host_bridge('pci0000:80', numa_node=3)}/0000:81:00.0")
    root = str(b.materialize(tmp_path).sysfs)
    got = plan(local_rank=0, cpu="socket", sysfs_path=root, environ={}, nics=False)
    assert (got.node, got.cpus_text, got.mems_text) == (3, "4-7", "2-3")
    assert got.reasons["mems"].startswith("MPOL_PREFERRED_MANY on nodes 2-3")
    got = plan(local_rank=0, cpu="socket", mem="bind", sysfs_path=root, environ={},
               nics=False)
    assert got.mems_text == "2-3" and got.reasons["mems"].startswith("MPOL_BIND on nodes")
    got = plan(local_rank=0, cpu="node", sysfs_path=root, environ={}, nics=False)
    assert (got.cpus_text, got.mems_text) == ("6-7", "3")


def test_exclusive_on_this_host_fails_or_falls_back() -> None:
    """This kernel: more ranks than the node has cores is exit 1 and nothing runs;
    --fallback runs the command unbound."""
    anchors = sorted(os.listdir("/sys/bus/pci/devices"))
    assert anchors, "this host has no PCI function to place by"
    too_many = str((os.cpu_count() or 1) + 1)
    args = ("run", "--near", anchors[0], "--local-rank", "0", "--local-size", too_many,
            "--cpu", "exclusive")
    shown = sv(*args, "--json", "--dry-run", "--fallback")
    if shown.returncode == 0:  # a device of unknown node: every CPU, no split
        assert json.loads(shown.stdout)["node"] is None
        pytest.skip(f"{anchors[0]}'s NUMA node is unknown on this host")
    r = sv(*args, "--", "echo", "ran")
    assert r.returncode == 1 and r.stdout == "" and "physical cores" in r.stderr
    r = sv(*args, "--fallback", "--", "echo", "ran")
    assert r.returncode == 0 and r.stdout == "ran\n", r.stderr
    assert "--fallback: running 'echo' unbound" in r.stderr


HIDE = """set -e
for d in /sys/devices/pci* /sys/class /sys/bus; do
    [ -d "$d" ] && mount -t tmpfs -o ro none "$d"
done
exec "$@"
"""


def test_fallback_runs_on_a_host_with_nothing_to_place_by() -> None:
    """No GPU and no RDMA device (this host's sysfs with its PCI devices, classes and
    buses hidden in a mount namespace): exit 1 and nothing runs; --fallback runs it."""
    reason = None if shutil.which("unshare") and os.geteuid() == 0 else \
        "unshare(1) as root is needed to hide this host's devices"
    if reason is None:
        probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True,
                               timeout=60)
        reason = None if probe.returncode == 0 else f"unshare -m: {probe.stderr.strip()}"
    require(reason, "a mount namespace")
    base = ["unshare", "-m", "--propagation", "private", "sh", "-c", HIDE, "sh",
            sys.executable, "-m", "sysverbs", "run"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SYSFS_PATH", None)
    r = subprocess.run([*base, "--", "echo", "ran"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert "no GPU and no RDMA device on this host" in r.stderr
    r = subprocess.run([*base, "--fallback", "--", "echo", "ran"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout == "ran\n", r.stderr
    assert "--fallback: running 'echo' unbound" in r.stderr
    r = subprocess.run([*base, "--fallback", "--", "/nonexistent/cmd"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 127, r.stderr


NUMACTL_AFTER = ("import os, sys; sys.path.insert(0, os.environ['PYTHONPATH']); "
                 "from sysverbs.rank.mempolicy import MPOL_PREFERRED_MANY, set_mempolicy; "
                 "set_mempolicy(MPOL_PREFERRED_MANY, [0]); "
                 "os.execvp('numactl', ['numactl', '--show'])")


def test_this_kernel_takes_preferred_many() -> None:
    """What apply() asks for a socket of several nodes, asked of this kernel (node 0),
    as numactl --show reads it back in the process it execs (MPOL_PREFERRED_MANY is
    Linux 5.15's, numactl 2.0.15's)."""
    require(None if shutil.which("numactl") else "numactl not found (Debian package "
            "numactl)", "numactl")
    r = subprocess.run([sys.executable, "-c", NUMACTL_AFTER], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    show = dict(line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)
    assert show["policy"].strip() == "preferred-many"
    assert show["preferred"].split() == ["0"]

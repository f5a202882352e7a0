"""sysverbs run / sysverbs.rank.launch: the plan on generated hosts (expected sets written out
by hand from the builder's layout), and the binding itself on this host's real kernel:
the command's own /proc/self/status and get_mempolicy, a real seccomp filter that
refuses set_mempolicy, --fallback, exec errors.  hwloc's view of the same plans is in
tests/test_run_hwloc.py, the kernel with NUMA nodes in tests/kernel/."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sysverbs.ground.errors import BindingError, NotFoundError, UsageError
from sysverbs.placement import RANK_VARIABLES, find_anchor, read_host
from sysverbs.rank.launch import Plan, plan
from sysverbs.rank.mempolicy import (
    MPOL_BIND,
    MPOL_DEFAULT,
    get_affinity,
    get_mempolicy,
    set_affinity,
    set_mempolicy,
)
from sysverbs.testing import HostBuilder

ROOT = Path(__file__).resolve().parents[1]


def two_node_host(tmp_path: Path, *, gpus: tuple[int, ...] = (0, 0, 1)) -> tuple[Any, Any]:
    """2 sockets x 8 cores x 2 threads, one node per socket, 2 L3s of 4 cores per
    socket; GPUs on the nodes given (in PCI order), an NVMe drive and an mlx5 NIC on
    node 1."""
    b = HostBuilder().cpu_topology(sockets=2, cores_per_socket=8, threads_per_core=2,
                                   cores_per_l3=4)
    hb = {0: b.host_bridge("pci0000:00", numa_node=0), 1: b.host_bridge("pci0000:80",
                                                                     numa_node=1)}
    for i, node in enumerate(gpus):
        b.gpu(f"{hb[node]}/0000:{(0x10 if node == 0 else 0x90) + i:02x}:00.0")
    nv = b.pci_device(f"{hb[1]}/0000:a0:00.0", vendor=0x144D, device=0xA824,
                      pci_class=0x010802, driver="nvme")
    b.add_device(f"{nv}/nvme/nvme0", "nvme", [("DEVNAME", "nvme0")])
    b.add_device(f"{nv}/nvme/nvme0/nvme0n1", "block", [("DEVNAME", "nvme0n1"),
                                                         ("DEVTYPE", "disk")])
    b.mlx5(path=f"{hb[1]}/0000:b0:00.0", netdev="enp176s0np0")
    return b, b.materialize(tmp_path / "host")


def cpus(*ranges: tuple[int, int]) -> frozenset[int]:
    return frozenset(c for lo, hi in ranges for c in range(lo, hi + 1))


# Linux's x86 numbering, as the builder lays it out: first threads 0-15 (socket 0:
# 0-7), second threads 16-31 (socket 0: 16-23); L3s of 4 cores: 0-3, 4-7, 8-11, 12-15.
NODE0, NODE1 = cpus((0, 7), (16, 23)), cpus((8, 15), (24, 31))


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return two_node_host(tmp_path_factory.mktemp("launch"))


def p(host: tuple[Any, Any], **kw: Any) -> Plan:
    kw.setdefault("environ", {})
    return plan(sysfs_path=str(host[1].sysfs), **kw)


def test_the_generated_layout_is_the_one_written_here(host: tuple[Any, Any]) -> None:
    b, _ = host
    assert b.numa_cpus == {0: tuple(sorted(NODE0)), 1: tuple(sorted(NODE1))}
    assert sorted(b.l3_cpus[0]) == sorted(cpus((0, 3), (16, 19)))


@pytest.mark.parametrize(("rank", "mode", "want"), [
    (0, "node", NODE0), (2, "node", NODE1),
    (0, "socket", NODE0), (2, "socket", NODE1),
    # two GPUs on node 0 share its 8 cores: 4 each, with their SMT siblings
    (0, "exclusive", cpus((0, 3), (16, 19))), (1, "exclusive", cpus((4, 7), (20, 23))),
    (2, "exclusive", NODE1),  # GPU2 is alone on node 1
    (1, "exclusive-nosmt", cpus((4, 7))),
    # L3 groups of node 0 (4 cores, 8 CPUs each): GPU0 the first, GPU1 the second
    (0, "core-complex", cpus((0, 3), (16, 19))), (1, "core-complex", cpus((4, 7), (20, 23))),
    (2, "core-complex", cpus((8, 11), (24, 27))),
])
def test_modes_by_gpu(host: tuple[Any, Any], rank: int, mode: str, want: frozenset[int]
                      ) -> None:
    got = p(host, local_rank=rank, cpu=mode, nics=False)
    assert got.cpus == want, got.reasons["cpus"]
    assert got.mems == ({0} if rank < 2 else {1})
    assert got.anchor.kind == "gpu" and got.anchor.name == f"GPU{rank}"


def test_cpu_none_and_mem_none(host: tuple[Any, Any]) -> None:
    got = p(host, local_rank=0, cpu="none", mem="none", nics=False)
    assert got.cpus == NODE0 | NODE1 and got.mems == frozenset()
    assert "left as it is" in got.reasons["cpus"] and "no memory policy" in got.reasons["mems"]


def test_odd_split_gives_the_first_ranks_one_more_core(tmp_path: Path) -> None:
    """torchrun's rule: 8 cores for 3 GPUs are 3, 3, 2."""
    _, h = two_node_host(tmp_path, gpus=(0, 0, 0))
    got = [plan(sysfs_path=str(h.sysfs), environ={}, local_rank=r, cpu="exclusive-nosmt",
                nics=False).cpus for r in range(3)]
    assert got == [cpus((0, 2)), cpus((3, 5)), cpus((6, 7))]


def test_more_ranks_than_cores_is_an_error(host: tuple[Any, Any]) -> None:
    """Node 1 has 8 physical cores: 8 ranks get one each, 10 cannot be exclusive."""
    got = [p(host, near="nvme0n1", local_rank=r, local_size=8, cpu="exclusive-nosmt",
             nics=False) for r in range(8)]
    assert [sorted(g.cpus) for g in got] == [[8 + r] for r in range(8)]
    assert got[7].reasons["cpus"].startswith(
        "8 physical cores of node 1 split among the 8 ranks placed there (1 each): share 7 "
        "(of 0 to 7)")
    for mode in ("exclusive", "exclusive-nosmt"):
        with pytest.raises(BindingError, match="only 8 physical cores on node 1 for the 10 "
                           "ranks placed there") as e:
            p(host, near="nvme0n1", local_rank=9, local_size=10, cpu=mode, nics=False)
        assert e.value.errno == 22
    assert len(p(host, near="nvme0n1", local_rank=9, local_size=10, cpu="core-complex",
                 nics=False).cpus) == 8  # one L3 group of 4 cores: shared, not exclusive


def test_near_devices(host: tuple[Any, Any]) -> None:
    h = read_host(str(host[1].sysfs))
    for name, kind in (("nvme0n1", "block"), ("nvme0", "nvme"), ("mlx5_0", "rdma"),
                       ("0000:a0:00.0", "pci"), ("a0:00.0", "pci"), ("GPU2", "gpu")):
        a = find_anchor(h, name)
        assert a.kind == kind, name
        assert a.pci.numa_node == 1
    netdevs = sorted(n for n in os.listdir(host[1].sysfs / "class" / "net") if n != "lo")
    assert [find_anchor(h, n).kind for n in netdevs] == ["netdev"] * len(netdevs) != []
    with pytest.raises(NotFoundError, match="net device lo is not below a PCI function"):
        find_anchor(h, "lo")
    with pytest.raises(NotFoundError, match="no device 'sda'"):
        find_anchor(h, "sda")
    with pytest.raises(UsageError):
        find_anchor(h, "../x")
    got = p(host, near="nvme0n1", local_rank=0, cpu="node")
    assert got.cpus == NODE1 and got.mems == {1}
    assert got.nics == ("mlx5_0:1",) and got.env["NCCL_IB_HCA"] == "=mlx5_0:1"


def test_near_list_is_indexed_by_local_rank(host: tuple[Any, Any]) -> None:
    got = [p(host, near="GPU0,nvme0n1", local_rank=r, cpu="exclusive", nics=False)
           for r in range(2)]
    assert got[0].cpus == NODE0 and got[1].cpus == NODE1  # each alone on its node
    with pytest.raises(NotFoundError, match="local rank 2 has no device"):
        p(host, near="GPU0,nvme0n1", local_rank=2)
    with pytest.raises(UsageError, match="no local rank"):
        p(host, near="GPU0,nvme0n1")


def test_one_near_device_for_every_rank_splits_by_the_local_size(host: tuple[Any, Any]
                                                                 ) -> None:
    env = {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    got = p(host, near="nvme0n1", cpu="exclusive", environ=env, nics=False)
    assert got.rank == 1 and got.cpus == cpus((12, 15), (28, 31))
    assert "OMPI_COMM_WORLD_LOCAL_SIZE=2" in got.reasons["anchor"]


@pytest.mark.parametrize("name", RANK_VARIABLES)
def test_every_launchers_rank_variable(host: tuple[Any, Any], name: str) -> None:
    assert p(host, environ={name: "2"}, nics=False).anchor.name == "GPU2"


def test_cuda_visible_devices_picks_the_gpu(host: tuple[Any, Any]) -> None:
    got = p(host, environ={"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "2"}, cpu="exclusive",
            nics=False)
    # one visible GPU: the rank shares node 1 with no other GPU of the host
    assert got.anchor.name == "GPU2" and got.cpus == NODE1


def test_allowed_cpus_shrink_the_plan_or_fail(host: tuple[Any, Any]) -> None:
    got = p(host, local_rank=0, allowed_cpus="0-3", nics=False)
    assert got.cpus == cpus((0, 3)) and got.allowed_cpus == cpus((0, 3))
    with pytest.raises(BindingError) as e:
        p(host, local_rank=2, allowed_cpus="0-3", nics=False)
    assert str(e.value) == ("GPU2 is on node 1 (numa_node): node 1's CPUs 8-15,24-31 are "
                            "all outside the allowed CPUs 0-3")
    assert e.value.errno == 22
    got = p(host, local_rank=2, allowed_mems="0", mem="bind", nics=False)
    assert got.cpus == NODE1 and got.mems == {0}
    assert "node 1 is not in the allowed memory nodes: node 0 is the nearest" in \
        got.reasons["mems"]
    with pytest.raises(BindingError, match="no memory node"):
        p(host, local_rank=2, allowed_mems="5", mem="bind", nics=False)
    with pytest.raises(UsageError):
        p(host, local_rank=0, allowed_cpus="3-1")


def test_user_variables_are_kept(host: tuple[Any, Any]) -> None:
    got = p(host, near="nvme0n1", local_rank=0, environ={"NCCL_IB_HCA": "mlx5_9"})
    assert got.kept == {"NCCL_IB_HCA": "mlx5_9"} and "NCCL_IB_HCA" not in got.env
    assert got.env["UCX_NET_DEVICES"] == "mlx5_0:1"
    assert any("already set to 'mlx5_9': kept" in w for w in got.warnings)


def _edit_numa(sysfs: Path, bdf: str, value: str) -> None:
    for f in (sysfs / "devices").rglob(f"{bdf}/numa_node"):
        f.write_text(value + "\n")


def test_numa_node_minus_one_uses_local_cpulist_or_says_unknown(tmp_path: Path) -> None:
    _, h = two_node_host(tmp_path)
    _edit_numa(h.sysfs, "0000:a0:00.0", "-1")  # nvme: local_cpulist is still node 1's
    got = plan("nvme0n1", sysfs_path=str(h.sysfs), environ={}, nics=False)
    assert got.cpus == NODE1 and "local_cpulist" in got.reasons["node"]
    for f in (h.sysfs / "devices").rglob("0000:a0:00.0/local_cpulist"):
        f.write_text("0-31\n")  # firmware gave no locality at all
    got = plan("nvme0n1", sysfs_path=str(h.sysfs), environ={}, nics=False)
    assert got.node is None and got.cpus == NODE0 | NODE1 and got.mems == frozenset()
    assert any("unknown" in w for w in got.warnings)


def test_cpu_less_node_takes_the_nearest_by_distance(tmp_path: Path) -> None:
    """An HBM/CXL node: memory, no CPUs; the device on it runs on the nearest node."""
    _, h = two_node_host(tmp_path)
    node = h.sysfs / "devices" / "system" / "node"
    (node / "node2").mkdir()
    (node / "node2" / "cpulist").write_text("\n")
    (node / "node2" / "meminfo").write_text("Node 2 MemTotal:       96000000 kB\n")
    rows = {0: "10 32 40", 1: "32 10 20", 2: "40 20 10"}
    for n, row in rows.items():
        (node / f"node{n}" / "distance").write_text(row + "\n")
    _edit_numa(h.sysfs, "0000:a0:00.0", "2")
    got = plan("nvme0n1", sysfs_path=str(h.sysfs), environ={}, nics=False)
    assert got.node == 1 and got.cpus == NODE1 and got.mems == {1}
    assert "node 2 has no CPUs" in got.reasons["node"] and "distance 20" in got.reasons["node"]


def test_bad_arguments(host: tuple[Any, Any]) -> None:
    with pytest.raises(UsageError, match="unknown cpu mode"):
        p(host, local_rank=0, cpu="numa")
    with pytest.raises(UsageError, match="unknown mem mode"):
        p(host, local_rank=0, mem="interleave")
    with pytest.raises(UsageError, match="no local rank"):
        p(host)  # three GPUs, no rank
    with pytest.raises(NotFoundError, match="local rank 3 has no GPU"):
        p(host, local_rank=3)
    with pytest.raises(UsageError, match="can be shown, not applied"):
        p(host, local_rank=0).apply()


def test_bundled_fixture_plan_and_json_schema() -> None:
    import jsonschema

    with_gpus = ["gpu-mi300x"]  # every fixture: tests/test_cli_contract.py
    schema = json.loads((ROOT / "sysverbs/cli/schemas/run.json").read_text())
    for name in with_gpus:
        r = sv("run", "--fixture", name, "--local-rank", "1", "--cpu", "core-complex",
               "--dry-run", "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        jsonschema.validate(doc, schema)
        assert doc["anchor"]["name"] == "GPU1" and doc["cpus"] and doc["mems"]


# ------------------------------------------------------------------ the real kernel


def sv(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    for name in (*RANK_VARIABLES, "NCCL_IB_HCA", "UCX_NET_DEVICES", "SYSFS_PATH"):
        if name not in env:
            full.pop(name, None)
    return subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                          text=True, timeout=120, env=full)


def live_anchor() -> str:
    """A PCI function of this host (every machine the suite runs on has one)."""
    devs = sorted(os.listdir("/sys/bus/pci/devices")) if os.path.isdir(
        "/sys/bus/pci/devices") else []
    if not devs:
        pytest.fail("this host has no PCI function to place by")
    return devs[0]


PROBE = ("import os, sys; sys.path.insert(0, os.environ['PYTHONPATH']); "
         "from sysverbs.rank.mempolicy import get_mempolicy; "
         "st = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() "
         "if ':\\t' in l); m, n = get_mempolicy(); "
         "print(st['Cpus_allowed_list'].strip(), st['Mems_allowed_list'].strip(), m, "
         "','.join(map(str, sorted(n))) or '-', os.environ.get('NCCL_IB_HCA', '-'))")


@pytest.mark.parametrize(("mode", "mem"), [("node", "preferred"), ("exclusive-nosmt", "bind"),
                                            ("none", "none")])
def test_run_binds_the_command_as_planned(mode: str, mem: str) -> None:
    """The command's own /proc/self/status and get_mempolicy equal the --dry-run plan."""
    anchor = live_anchor()
    common = ["--near", anchor, "--local-rank", "0", "--cpu", mode, "--mem", mem]
    dry = sv("run", *common, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    r = sv("run", *common, "--", sys.executable, "-c", PROBE)
    assert r.returncode == 0, r.stderr
    allowed, mems_allowed, policy, nodes, hca = r.stdout.split()
    before = get_affinity(0)
    want_cpus = planned["cpus"] if mode != "none" else planned["allowed_cpus"]
    from sysverbs.placement import cpulist_text

    assert allowed == (want_cpus if mode != "none" else cpulist_text(before))
    assert policy == {"preferred": "1", "bind": "2", "none": "0"}[mem]
    assert nodes == (planned["mems"] if mem != "none" else "-")
    assert mems_allowed  # the cpuset's, untouched


def test_run_keeps_the_exit_status_and_the_environment() -> None:
    anchor = live_anchor()
    r = sv("run", "--near", anchor, "--local-rank", "0", "--", "sh", "-c",
           'echo "$NCCL_IB_HCA"; exit 7', NCCL_IB_HCA="mine")
    assert r.returncode == 7 and r.stdout == "mine\n"


def test_run_errors_and_fallback() -> None:
    anchor = live_anchor()
    r = sv("run", "--near", anchor, "--local-rank", "0", "--", "/nonexistent/cmd")
    assert r.returncode == 127
    assert "sysverbs run: error: cannot run '/nonexistent/cmd': No such file" in r.stderr
    none = str(max(get_affinity(0)) + 1000)
    r = sv("run", "--near", anchor, "--local-rank", "0", "--allowed-cpus", none, "--",
           "echo", "ran")
    assert r.returncode == 1 and r.stdout == "" and "no CPU is allowed" in r.stderr
    r = sv("run", "--near", anchor, "--local-rank", "0", "--allowed-cpus", none,
           "--fallback", "--", "echo", "ran")
    assert r.returncode == 0 and r.stdout == "ran\n"
    assert "--fallback: running 'echo' unbound" in r.stderr
    for bad in (["--"], ["--local-rank", "-1", "--", "true"], ["--allowed-cpus", "x", "--",
                                                                "true"]):
        r = sv("run", "--near", anchor, *bad)
        assert r.returncode == 2 and r.stderr.startswith("sysverbs run: error: "), (bad, r)
    r = sv("run", "--fixture", "gpu-hgx-h100", "--local-rank", "0", "--", "true")
    assert r.returncode == 2 and "not this host" in r.stderr


@pytest.mark.parametrize("case", ["missing path", "missing name", "not executable",
                                  "directory", "bad binary", "not a directory",
                                  "PATH entry is a file"])
def test_a_command_that_cannot_run_exits_as_bash_does(case: str, tmp_path: Path) -> None:
    """127 (not found) or 126 (found, cannot be executed): what bash gives for the same
    command on this kernel, which launchers read; with or without --fallback."""
    plain = tmp_path / "plain"
    plain.write_text("x\n")
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x7fELF not really")
    bad.chmod(0o755)
    path = os.environ.get("PATH", "/usr/bin:/bin")
    command, env_path = {
        "missing path": (str(tmp_path / "nothing"), path),
        "missing name": ("sysverbs-no-such-command", path),
        "not executable": (str(plain), path),
        "directory": (str(tmp_path), path),
        "bad binary": (str(bad), path),
        "not a directory": (f"{plain}/x", path),
        "PATH entry is a file": ("sysverbs-no-such-command", f"{plain}:{path}"),
    }[case]
    shell = subprocess.run(["bash", "-c", '"$0"', command], capture_output=True, text=True,
                           env=dict(os.environ, PATH=env_path), timeout=60)
    assert shell.returncode in (126, 127), shell
    anchor = live_anchor()
    for extra in ([], ["--fallback", "--allowed-cpus", str(max(get_affinity(0)) + 1000)]):
        r = sv("run", "--near", anchor, "--local-rank", "0", *extra, "--", command,
               PATH=env_path)
        assert r.returncode == shell.returncode, (extra, r.stderr)
        assert f"sysverbs run: error: cannot run {command!r}: " in r.stderr


def test_a_refused_set_mempolicy_is_a_binding_error() -> None:
    """The kernel's EINVAL for a node that does not exist reaches the caller as a
    BindingError with that errno, and the affinity is put back (all or nothing)."""
    anchor = live_anchor()
    good = plan(anchor, local_rank=0, nics=False)
    bad = Plan(good.rank, good.anchor, "node", "bind", good.node, good.cpus,
               frozenset({1000}), good.allowed_cpus, good.allowed_mems, (), {}, {}, {}, (),
               True, "/sys")
    before = get_affinity(0)
    with pytest.raises(BindingError) as e:
        bad.apply()
    assert e.value.errno == 22 and get_affinity(0) == before


def test_affinity_without_os_sched_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyPy 3.9 has no os.sched_getaffinity: glibc's functions give the same answers."""
    import threading

    real = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    mine = get_affinity(0)
    assert mine and (real is None or mine == real)
    seen: list[frozenset[int]] = []

    def work() -> None:
        set_affinity(0, [min(mine)])
        seen.append(get_affinity(0))
        set_affinity(0, mine)
        seen.append(get_affinity(0))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [frozenset({min(mine)}), mine]
    with pytest.raises(OSError) as e:
        set_affinity(0, [max(mine) + 5000])
    assert e.value.errno == 22 and get_affinity(0) == mine


def test_mempolicy_round_trip_in_a_thread() -> None:
    import threading

    seen: list[Any] = []

    def work() -> None:
        set_mempolicy(MPOL_BIND, [0])
        seen.append(get_mempolicy())
        set_mempolicy(MPOL_DEFAULT)
        seen.append(get_mempolicy())

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [(MPOL_BIND, frozenset({0})), (MPOL_DEFAULT, frozenset())]


# A seccomp filter as Docker's default profile applies it without CAP_SYS_NICE:
# set_mempolicy answers EPERM.  Installed for real (prctl), in a child that then
# execs sysverbs run.
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SECCOMP_CHILD = r"""
import ctypes, os, sys
arch, nr = int(sys.argv[1]), int(sys.argv[2])
class F(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]
class P(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(F))]
prog = (F * 6)(F(0x20, 0, 0, 4), F(0x15, 0, 3, arch), F(0x20, 0, 0, 0),
               F(0x15, 0, 1, nr), F(0x06, 0, 0, 0x00050000 | 1), F(0x06, 0, 0, 0x7FFF0000))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
p = P(6, prog)
assert libc.prctl(22, 2, ctypes.byref(p), 0, 0) == 0, ctypes.get_errno()  # SECCOMP_MODE_FILTER
os.execv(sys.executable, [sys.executable, "-m", "sysverbs", "run", *sys.argv[3:]])
"""


def test_seccomp_refusing_set_mempolicy_fails_clearly_or_falls_back() -> None:
    machine = platform.machine()
    if machine not in AUDIT_ARCH:
        pytest.skip(f"no seccomp filter written for {machine}")
    from sysverbs.rank.mempolicy import SYSCALLS

    anchor = live_anchor()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [sys.executable, "-c", SECCOMP_CHILD, str(AUDIT_ARCH[machine]),
            str(SYSCALLS[machine][0]), "--near", anchor, "--local-rank", "0"]
    r = subprocess.run([*args, "--", "echo", "ran"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 1 and r.stdout == "", r
    assert "set_mempolicy" in r.stderr and "Operation not permitted" in r.stderr
    assert "seccomp" in r.stderr
    r = subprocess.run([*args, "--fallback", "--", "echo", "ran"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout == "ran\n", r
    r = subprocess.run([*args, "--mem", "none", "--", "echo", "ran"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout == "ran\n", r


def test_topo_near_gives_any_devices_nics(host: tuple[Any, Any]) -> None:
    root = str(host[1].sysfs)
    r = sv("topo", "--assign", "--near", "nvme0n1,GPU0", "--sysfs-path", root, "--json")
    assert r.returncode == 0, r.stderr
    a, g = json.loads(r.stdout)["assignments"]
    assert a["anchor"]["name"] == "nvme0n1" and a["anchor"]["kind"] == "block"
    # one host bridge (pci0000:80), two root buses below it: PHB
    assert [n["device"] for n in a["nics"]] == ["mlx5_0"] and a["nics"][0]["smi"] == "PHB"
    assert g["anchor"]["kind"] == "gpu" and g["gpu"]["index"] == 0
    assert [n["smi"] for n in g["nics"]] == ["SYS"]  # the NIC is on the other socket
    text = sv("topo", "--assign", "--near", "nvme0n1", "--sysfs-path", root).stdout
    assert text.startswith("nvme0n1 0000:a0:00.0 (NUMA 1) -> mlx5_0:1\n")
    for bad in (["--near", "nvme0n1"], ["--assign", "--near", "nvme0n1", "--rank", "0"]):
        r = sv("topo", *bad, "--sysfs-path", root)
        assert r.returncode == 2 and r.stderr.startswith("sysverbs topo: error: "), bad
    r = sv("topo", "--assign", "--near", "sda", "--sysfs-path", root)
    assert r.returncode == 1 and "no device 'sda'" in r.stderr

"""rank/launch.py by value (issue 41: the survivors of its mutation run).

The binding on this host's real kernel, in one child process: every thread's
``sched_getaffinity`` and the thread's ``get_mempolicy`` after :meth:`Plan.apply`, with
real seccomp filters that make the kernel refuse ``sched_setaffinity`` (ESRCH for a
thread that is not one of the process's live threads, as for one that has ended; EPERM
for all); what ``exec`` runs then, with and without ``fallback``.  A process without
/proc.  The NICs of a Grace GPU whose pairing is unresolved, a kept variable and
``nccl check``'s note, a socket with one memory node, a GPU on a CPU-less node, on
generated hosts."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sysverbs.placement import cpulist_text
from sysverbs.rank import launch
from sysverbs.rank.launch import plan
from sysverbs.rank.mempolicy import get_affinity
from sysverbs.testing.builder_grace import dgx_station_gb300
from tests.test_launch import NODE0, _edit_numa, cpus, live_anchor, two_node_host

ROOT = Path(__file__).resolve().parents[1]
#: (AUDIT_ARCH, sched_setaffinity's number): include/uapi/linux/audit.h, the x86_64
#: table and asm-generic/unistd.h
ARCH = {"x86_64": (0xC000003E, 203), "aarch64": (0xC00000B7, 122)}

CHILD = r"""
import ctypes, json, os, sys, threading, time
from sysverbs.ground.errors import BindingError, UsageError
from sysverbs.rank.launch import plan
from sysverbs.rank.mempolicy import MPOL_DEFAULT, get_affinity, get_mempolicy, set_affinity, \
    set_mempolicy

arch, nr, anchor = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)


class F(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class P(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(F))]


def refuse(errno, allowed=()):
    # sched_setaffinity answers errno unless its pid (args[0]) is one of allowed
    n = len(allowed)
    code = [F(0x20, 0, 0, 4), F(0x15, 0, n + 4, arch), F(0x20, 0, 0, 0),
            F(0x15, 0, n + 2, nr), F(0x20, 0, 0, 16)]
    code += [F(0x15, n - i, 0, pid) for i, pid in enumerate(allowed)]
    code += [F(0x06, 0, 0, 0x00050000 | errno), F(0x06, 0, 0, 0x7FFF0000)]
    prog = (F * len(code))(*code)
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    p = P(len(code), prog)
    assert libc.prctl(22, 2, ctypes.byref(p), 0, 0) == 0, ctypes.get_errno()


tids, stop = {}, threading.Event()


def start(name):
    def park():
        tids[name] = threading.get_native_id()
        stop.wait()
    threading.Thread(target=park, daemon=True).start()
    while name not in tids:
        time.sleep(0.001)


def seen():
    out = {k: sorted(get_affinity(t)) for k, t in tids.items()}
    out["main"] = sorted(get_affinity(0))
    return out


out = {}
every = sorted(get_affinity(0))
c0, c1 = every[0], every[1]
start("C")  # all the CPUs: not the caller's affinity when it binds
set_affinity(0, {c1})
start("A")
start("B")  # the caller's affinity, but "ended"
base = plan(anchor, local_rank=0, cpu="none", mem="none", nics=False)
out["allowed"] = sorted(base.allowed_cpus)
refuse(3, (0, os.getpid(), tids["A"], tids["C"]))  # ESRCH
bound = base._replace(cpu_mode="node", cpus=frozenset({c0}))
bound.apply()
out["bound"] = seen()
base._replace(cpus=frozenset({c1})).apply()
out["none"] = seen()["main"]
node = min(base.allowed_mems)
many = bound._replace(cpus=frozenset({c1}), mem_mode="preferred",
                      mems=frozenset({node, node + 1}))
many.apply()
out["many"] = [get_mempolicy()[0], seen()["main"]]
set_mempolicy(MPOL_DEFAULT)
try:
    bound._replace(mem_mode="bind", mems=frozenset({1000})).apply()
except BindingError as e:
    out["rollback"] = [e.errno, seen()["main"]]
refuse(1)  # EPERM
try:
    bound.apply()
except BindingError as e:
    out["refused"] = [e.errno, str(e)]
try:
    bound.exec(["true"], {})
except BindingError as e:
    out["exec"] = e.errno
try:
    bound.exec([])
except UsageError as e:
    out["empty"] = str(e)
print(json.dumps(out), flush=True)
bound._replace(env={"SV_SET": "set"}).exec(
    ["sh", "-c", 'echo "ran $SV_SET $SV_GIVEN $NCCL_IB_HCA"'],
    {"SV_GIVEN": "given", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}, fallback=True)
"""


def test_apply_binds_every_thread_that_had_the_callers_affinity() -> None:
    """The child's threads: A had the caller's affinity and follows it, C had another
    and keeps it, B is refused (ESRCH, as for a thread that has ended) and is left;
    PID 1's affinity is never what is read or set.  Then the policy of two nodes,
    all or nothing on a refused set_mempolicy, the kernel's EPERM, and exec."""
    machine = platform.machine()
    if machine not in ARCH:
        pytest.skip(f"no seccomp filter written for {machine}")
    every = sorted(get_affinity(0))
    if len(every) < 2:
        pytest.skip("one CPU: no binding can be told from none")
    c0, c1 = every[:2]
    r = subprocess.run([sys.executable, "-c", CHILD, *map(str, ARCH[machine]), live_anchor()],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout
    got: dict[str, Any] = json.loads(lines[0])
    assert got["allowed"] == [c1]  # sched_getaffinity of this process, not of PID 1
    assert got["bound"] == {"main": [c0], "A": [c0], "B": [c1], "C": every}
    assert got["none"] == [c0]  # cpu mode none sets no affinity
    assert got["many"] == [5, [c1]]  # MPOL_PREFERRED_MANY
    assert got["rollback"] == [22, [c1]]  # the affinity it had before
    assert got["refused"] == [1, f"the kernel refused sched_setaffinity({c0}): [Errno 1] "
                              "Operation not permitted"]
    assert got["exec"] == 1 and got["empty"] == "no command to run"
    assert lines[1] == "ran set given "  # unbound (fallback), with the plan's variable


def test_without_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mems_allowed_list as the kernel writes it; without /proc (a chroot, a container
    that has none mounted): every node of the host, and no thread to bind."""
    with open("/proc/self/status", encoding="ascii") as f:
        mine = next(x.split(":", 1)[1].strip() for x in f if x.startswith("Mems_allowed_list:"))
    assert cpulist_text(launch._live_mems() or frozenset()) == mine
    assert {int(t) for t in os.listdir("/proc/self/task")} == set(launch._threads())

    def gone(*args: Any, **kw: Any) -> Any:
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(launch, "open", gone, raising=False)
    monkeypatch.setattr(os, "listdir", gone)
    assert launch._live_mems() is None and launch._threads() == []
    monkeypatch.undo()
    monkeypatch.setattr(launch, "open", gone, raising=False)
    nodes = frozenset(int(n[4:]) for n in os.listdir("/sys/devices/system/node")
                      if n[4:].isdigit())
    p = plan(live_anchor(), local_rank=0, cpu="none", mem="none", nics=False)
    assert p.allowed_mems == nodes and p.allowed_cpus == get_affinity(0)


def test_an_unresolved_grace_pairing_gives_no_nic(tmp_path: Path) -> None:
    """Data Direct without VPD: the GPU gets no NIC and the reason is the pairing's
    (the GPU is placed as a GPU); a netdev on the GPU's function is placed as any
    device, by PCIe distance."""
    root = dgx_station_gb300(vpd=False).materialize(tmp_path / "h").root
    kw: dict[str, Any] = {"sysfs_path": str(root / "sys"), "proc_path": str(root / "proc"),
                          "environ": {}}
    gpu = plan(local_rank=0, **kw)
    assert gpu.nics == () and gpu.env == {}
    assert gpu.reasons["nics"].startswith("no NIC for GPU0: ")
    assert "its vpd is absent" in gpu.reasons["nics"]
    fn = next((root / "sys" / "devices").rglob("0009:06:00.0"))
    (fn / "net" / "eth9").mkdir(parents=True)
    (root / "sys" / "class" / "net").mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(fn / "net" / "eth9", root / "sys" / "class" / "net"),
               root / "sys" / "class" / "net" / "eth9")
    near = plan("eth9", local_rank=0, **kw)
    assert (near.anchor.kind, near.anchor.address) == ("netdev", "0009:06:00.0")
    assert near.nics == ("mlx5_0:1", "mlx5_1:1")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(two_node_host(tmp_path_factory.mktemp("rank3"))[1].sysfs)


def test_a_kept_variable_and_the_checks_note_are_no_warning(host: str) -> None:
    """NCCL_IB_HCA already set to the value env would write: kept, not said; the note
    that nccl check could not run under another root is no warning of the plan."""
    p = plan("nvme0n1", sysfs_path=host, environ={"NCCL_IB_HCA": "=mlx5_0:1"}, local_rank=0)
    assert p.kept == {"NCCL_IB_HCA": "=mlx5_0:1"} and p.env == {"UCX_NET_DEVICES": "mlx5_0:1"}
    assert p.warnings == ()


def test_a_socket_of_one_memory_node_prefers_that_node(host: str) -> None:
    p = plan(sysfs_path=host, environ={}, local_rank=2, cpu="socket", nics=False)
    assert p.mems == {1} and p.reasons["mems"] == "MPOL_PREFERRED on node 1, where the CPUs are"


def test_a_gpu_on_a_cpu_less_node_shares_the_nearest_nodes_cores(tmp_path: Path) -> None:
    """GPU1's node 2 has memory and no CPUs, node 0 is the nearest: GPU0 and GPU1 split
    node 0's cores as two GPUs of that node."""
    _, h = two_node_host(tmp_path)
    node = h.sysfs / "devices" / "system" / "node"
    (node / "node2").mkdir()
    (node / "node2" / "cpulist").write_text("\n")
    (node / "node2" / "meminfo").write_text("Node 2 MemTotal:       96000000 kB\n")
    for n, row in {0: "10 32 20", 1: "32 10 40", 2: "20 40 10"}.items():
        (node / f"node{n}" / "distance").write_text(row + "\n")
    _edit_numa(h.sysfs, "0000:11:00.0", "2")
    got = [plan(sysfs_path=str(h.sysfs), environ={}, local_rank=r, cpu="exclusive",
                nics=False) for r in (0, 1)]
    assert [g.node for g in got] == [0, 0] and got[0].cpus | got[1].cpus == NODE0
    assert got[0].cpus == cpus((0, 3), (16, 19))

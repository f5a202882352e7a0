#!/usr/bin/env python3
"""Benchmark sysverbs.get_device_list() against the real libibverbs on identical trees.

    .venv/bin/python benchmarks/bench_list.py [--sizes 1,64,256,1024,4096] [--json PATH]

For each size N an mlx5 host tree of N devices is generated, laid out like the
kernel (``tests/trees.py``), each device with its own PCI address, uverbs
node and node_guid.  Everything that lists devices runs in a private mount
namespace (``unshare -m``) with the tree's ``dev/infiniband`` bind-mounted over
``/dev/infiniband`` and ``SYSFS_PATH`` pointing at the tree's ``sys``, exactly as
the oracle tests do (``tests/oracle/harness.py``), in the system's ``python3 -I``
(see :func:`interpreter`).  Measured:

(a) the first call in a fresh process (time of the call only, printed by the
    child; one unmeasured warm-up round, then A/B alternated);
(b) the same call repeated in one process (after three warm-up calls);
    (a) and (b) go round by round through every size, so that the machine's drift
    over the run does not fall on one size: t(4096)/t(1024) compares samples taken
    side by side;
(c) ``import sysverbs`` (and ``import ctypes`` + ``CDLL("libibverbs.so.1")``) versus
    interpreter start alone;
(d) wall time of ``python -m sysverbs devices`` versus ``ibv_devices`` (64 devices);
(e) syscalls per device (``strace -f -c``), first and repeated call.

Then issue 8's targets are checked against the medians.  A "call" is: get the
device list, read every device's GUID, free the list (``ibv_get_device_list`` +
``ibv_get_device_guid`` x N + ``ibv_free_device_list`` through ctypes;
``sysverbs.get_device_list(rdma_core="44")`` + ``get_device_guid`` x N +
``free_device_list``).  Needs root, util-linux, strace and libibverbs; stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from list_report import ms, row, syscall_table, table, targets

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PY = sys.executable
#: The interpreter the measured processes run: the distribution's own Python
#: (what a user's ``python3`` is), with ``-I`` so that nothing from the environment
#: or a virtualenv's ``.pth`` hooks (the editable install's finder imports re,
#: pathlib, ...) is loaded before the measurement.  sysverbs is found through a
#: ``sys.path`` entry the child adds; it needs nothing but the standard library.
SYSTEM_PY = "/usr/bin/python3"

_NS_SCRIPT = 'set -e; mount --bind "$BENCH_DEV" /dev/infiniband; exec "$@"'
_SCRUB = ("SYSFS_PATH", "IBV_", "RDMAV_", "VERBS_", "MLX", "LD_PRELOAD", "PYTHON")

# The child that makes one call (mode "first"), many calls ("repeat") or only the
# import ("import").  It imports nothing but sys and time before its timers so that
# the first call pays for whatever it imports lazily.
_CHILD = r"""
import sys, time
impl, mode, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
clock = time.perf_counter_ns
t0 = clock()
if impl == "sysverbs":
    import sysverbs
    def call():
        devs = sysverbs.get_device_list(rdma_core="44")
        guids = [sysverbs.get_device_guid(d) for d in devs]
        sysverbs.free_device_list(devs)
        return guids
else:
    import ctypes
    lib = ctypes.CDLL("libibverbs.so.1", use_errno=True)
    lib.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
    lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.ibv_get_device_guid.restype = ctypes.c_uint64
    lib.ibv_get_device_guid.argtypes = [ctypes.c_void_p]
    lib.ibv_free_device_list.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    get_guid = lib.ibv_get_device_guid
    def call():
        num = ctypes.c_int(0)
        arr = lib.ibv_get_device_list(ctypes.byref(num))
        if not arr:
            raise OSError(ctypes.get_errno(), "ibv_get_device_list failed")
        guids = [get_guid(arr[i]) for i in range(num.value)]
        lib.ibv_free_device_list(arr)
        return guids
t1 = clock()
out = {"load_ns": t1 - t0}
guids = []
if mode == "first":
    t2 = clock()
    guids = call()
    out["call_ns"] = clock() - t2
elif mode == "repeat":
    for _ in range(3):  # warm-up: the calls right after the first are slower (GC, caches)
        guids = call()
    times = []
    for _ in range(reps):
        t2 = clock()
        guids = call()
        times.append(clock() - t2)
    out["times_ns"] = times
import hashlib, json
if impl != "sysverbs":  # __be64 in memory: the number ibv_devices prints
    guids = [int.from_bytes(g.to_bytes(8, sys.byteorder), "big") for g in guids]
out["count"] = len(guids)
out["distinct"] = len(set(guids))
out["digest"] = hashlib.sha1(",".join("%016x" % g for g in sorted(guids)).encode()).hexdigest()
print(json.dumps(out))
"""

# Times whole commands (alternating between them) from inside the namespace.
_TIMER = r"""
import json, subprocess, sys, time
reps = int(sys.argv[1])
cmds = json.loads(sys.argv[2])
last = {}
times = {str(i): [] for i in range(len(cmds))}
for r in range(reps + 1):
    order = range(len(cmds)) if r % 2 == 0 else reversed(range(len(cmds)))
    for i in order:
        t = time.perf_counter_ns()
        p = subprocess.run(cmds[i], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        dt = time.perf_counter_ns() - t
        if r:
            times[str(i)].append(dt)
        last[str(i)] = [p.returncode, p.stdout.decode(errors="replace"),
                        p.stderr.decode(errors="replace")]
print(json.dumps({"times_ns": times, "last": last}))
"""

# cProfile of sysverbs' first call and of repeated calls, inside the namespace.
_PROFILE = r"""
import cProfile, io, pstats, sys
reps, top = int(sys.argv[1]), int(sys.argv[2])
import sysverbs
def call():
    devs = sysverbs.get_device_list(rdma_core="44")
    guids = [sysverbs.get_device_guid(d) for d in devs]
    sysverbs.free_device_list(devs)
    return guids
for title, n in (("first call (fresh process, after import)", 1), ("repeated calls", reps)):
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        call()
    prof.disable()
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).strip_dirs().sort_stats(key).print_stats(top)
        print("=== %s x%d, sorted by %s ===" % (title, n, key))
        print(s.getvalue())
"""


_START = time.monotonic()


def log(msg: str) -> None:
    sys.stderr.write(f"[{time.monotonic() - _START:6.1f}s] {msg}\n")
    sys.stderr.flush()


# -- trees -------------------------------------------------------------------------------


def build_tree(root: Path, n: int) -> Path:
    """An mlx5 host of ``n`` devices under ``root`` (``root/sys``, ``root/dev``)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.trees import build, host, rdma_dev

    devices = []
    for i in range(n):
        pci = f"0000:{i >> 8:02x}:{(i >> 3) & 0x1F:02x}.{i & 7}"
        # The first 32 uverbs minors are the fixed ones (231:192..223), then a dynamic major.
        dev = f"231:{192 + i}\n" if i < 32 else f"511:{i - 32}\n"
        guid = f"0c42:a103:{(i >> 16) & 0xFFFF:04x}:{i & 0xFFFF:04x}\n"
        devices.append(rdma_dev(f"uverbs{i}", f"mlx5_{i}", pci=pci, guid=guid, dev=dev))
    return build(root, host(*devices))


# -- running -----------------------------------------------------------------------------


class Bench:
    def __init__(self, work: Path, package_root: Path = REPO) -> None:
        self.work = work
        #: The checkout whose ``sysverbs`` the measured processes import.
        self.package_root = package_root
        self.pycache = work / "pycache"
        self.pycache.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
        # Bytecode goes to a private cache (nothing is written into the source tree);
        # a warm-up import fills it, so imports are measured with a warm cache.
        env["PYTHONPYCACHEPREFIX"] = str(self.pycache)
        self.env = env
        self.python, self.flags = interpreter()
        # -I ignores PYTHONPYCACHEPREFIX; -X pycache_prefix is still honoured.
        self.flags = [*self.flags, "-X", f"pycache_prefix={self.pycache}"]

    def py(self, code: str, *args: str) -> list[str]:
        """argv that runs ``code`` in the measured interpreter, sysverbs importable."""
        preamble = f"import sys; sys.path.insert(0, {str(self.package_root)!r})\n"
        return [self.python, *self.flags, "-c", preamble + code, *args]

    def ns_run(self, tree: Path, argv: Sequence[str], timeout: float = 300) -> str:
        """Run argv in a private mount namespace on ``tree``; returns stdout."""
        env = dict(self.env)
        env["SYSFS_PATH"] = str(tree / "sys")
        env["BENCH_DEV"] = str(tree / "dev/infiniband")
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", _NS_SCRIPT, "bench"]
        proc = subprocess.run(
            [*cmd, *argv], env=env, cwd=self.work, capture_output=True, timeout=timeout
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{argv[:3]} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}"
            )
        return proc.stdout.decode()

    def child(self, tree: Path, impl: str, mode: str, reps: int = 0) -> dict[str, Any]:
        out = self.ns_run(tree, self.py(_CHILD, impl, mode, str(reps)))
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def wall(self, argv: Sequence[str], env: Optional[dict[str, str]] = None) -> float:
        """Wall time of one process started from here (no namespace), in ms."""
        t = time.perf_counter_ns()
        proc = subprocess.run(argv, env=env or self.env, cwd=self.work, capture_output=True)
        dt = (time.perf_counter_ns() - t) / 1e6
        if proc.returncode != 0:
            raise RuntimeError(f"{argv} failed: {proc.stderr.decode(errors='replace')}")
        return dt


def interpreter() -> tuple[str, list[str]]:
    """The measured interpreter and its flags: the system Python with ``-I`` when there
    is one (3.9 or newer), else this one with ``-I -S`` (no site hooks either)."""
    if os.access(SYSTEM_PY, os.X_OK):
        check = "import sys; print(sys.version_info >= (3, 9))"
        proc = subprocess.run([SYSTEM_PY, "-I", "-c", check], capture_output=True, text=True)
        if proc.stdout.strip() == "True":
            return SYSTEM_PY, ["-I"]
    return PY, ["-I", "-S"]


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    libs = sorted(Path("/usr/lib").glob("*/libibverbs.so.1.*.*"))
    return {
        "nproc": os.cpu_count(),
        "affinity": (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                     else os.cpu_count()),  # (PyPy has no sched_getaffinity)
        "cpu_model": model,
        "python": subprocess.run(
            [interpreter()[0], "-c", "import platform; print(platform.python_version())"],
            capture_output=True, text=True, check=True).stdout.strip(),
        "python_executable": " ".join([interpreter()[0], *interpreter()[1]]),
        "kernel": platform.release(),
        "libibverbs": libs[-1].name if libs else None,
        "loadavg_start": os.getloadavg()[0],
    }


def check_same(n: int, what: str, lib: dict[str, Any], ours: dict[str, Any]) -> None:
    for name, r in (("libibverbs", lib), ("sysverbs", ours)):
        if r["count"] != n or r["distinct"] != n:
            raise RuntimeError(f"{what} N={n}: {name} listed {r['count']} devices "
                               f"({r['distinct']} distinct GUIDs), expected {n}")
    if lib["digest"] != ours["digest"]:
        raise RuntimeError(f"{what} N={n}: the two implementations returned different GUIDs")


def unavailable() -> Optional[str]:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.oracle.harness import unavailable_reason

    reason: Optional[str] = unavailable_reason()
    if reason is None and shutil.which("ibv_devices") is None:
        reason = "ibv_devices is not installed (apt-get install ibverbs-utils)"
    return reason


# -- the measurements ----------------------------------------------------------------------


def measure_first(b: Bench, trees: dict[int, Path], samples: int
                  ) -> dict[int, list[dict[str, Any]]]:
    """Fresh processes, one call each.  Every round runs each size and each
    implementation once (the order alternating), so that the machine's drift over the
    run reaches every size and both sides alike: the ratios and t(4096)/t(1024) compare
    samples taken side by side."""
    impls = ("libibverbs", "sysverbs")
    calls: dict[int, dict[str, list[float]]] = {n: {i: [] for i in impls} for n in trees}
    totals: dict[int, dict[str, list[float]]] = {n: {i: [] for i in impls} for n in trees}
    results: dict[int, dict[str, dict[str, Any]]] = {n: {} for n in trees}
    for i in range(samples + 1):  # round 0: unmeasured warm-up (page cache, pyc)
        order = impls if i % 2 == 0 else impls[::-1]
        for n, tree in trees.items():
            for impl in order:
                r = b.child(tree, impl, "first")
                results[n][impl] = r
                if i:
                    calls[n][impl].append(r["call_ns"] / 1e6)
                    totals[n][impl].append((r["call_ns"] + r["load_ns"]) / 1e6)
        log(f"(a) fresh processes, round {i}/{samples}" + (" (warm-up)" if i == 0 else ""))
    rows = {}
    for n in trees:
        check_same(n, "(a)", results[n]["libibverbs"], results[n]["sysverbs"])
        rows[n] = [
            row("(a) first call, fresh process", n, calls[n]["libibverbs"],
                calls[n]["sysverbs"], rounds=(calls[n]["libibverbs"], calls[n]["sysverbs"])),
            row("(a') load/import + first call, fresh process", n, totals[n]["libibverbs"],
                totals[n]["sysverbs"],
                "libibverbs: import ctypes + CDLL; sysverbs: import sysverbs",
                rounds=(totals[n]["libibverbs"], totals[n]["sysverbs"])),
        ]
    return rows


#: Processes per size and implementation for the repeated calls (each makes
#: ``--repeats / REPEAT_ROUNDS`` measured calls after three warm-up calls).
REPEAT_ROUNDS = 5


def measure_repeat(b: Bench, trees: dict[int, Path], reps: int, rounds: int = REPEAT_ROUNDS
                   ) -> dict[int, dict[str, Any]]:
    """In-process repeated calls: in each of ``rounds`` rounds one process per size and
    implementation (A B, then B A, ...), so that a noisy moment lands on no one side
    and no one size."""
    impls = ("libibverbs", "sysverbs")
    calls = max(1, -(-reps // rounds))
    times: dict[int, dict[str, list[int]]] = {n: {i: [] for i in impls} for n in trees}
    # the median of each process's calls, round by round
    per_round: dict[int, dict[str, list[float]]] = {n: {i: [] for i in impls} for n in trees}
    got: dict[int, dict[str, dict[str, Any]]] = {n: {} for n in trees}
    for r in range(rounds):
        order = impls if r % 2 == 0 else impls[::-1]
        for n, tree in trees.items():
            for impl in order:
                got[n][impl] = b.child(tree, impl, "repeat", calls)
                times[n][impl] += got[n][impl]["times_ns"]
                per_round[n][impl].append(statistics.median(ms(got[n][impl]["times_ns"])))
        log(f"(b) repeated calls, round {r + 1}/{rounds}")
    rows = {}
    for n in trees:
        check_same(n, "(b)", got[n]["libibverbs"], got[n]["sysverbs"])
        rows[n] = row("(b) repeated call, in-process", n, ms(times[n]["libibverbs"]),
                      ms(times[n]["sysverbs"]),
                      rounds=(per_round[n]["libibverbs"], per_round[n]["sysverbs"]))
    return rows


def measure_import(b: Bench, tree: Path, samples: int) -> tuple[list[dict[str, Any]], Any]:
    lib_load: list[float] = []
    ours_import: list[float] = []
    for i in range(samples + 1):
        for impl in ("libibverbs", "sysverbs") if i % 2 == 0 else ("sysverbs", "libibverbs"):
            r = b.child(tree, impl, "import")
            if i:
                (lib_load if impl == "libibverbs" else ours_import).append(r["load_ns"] / 1e6)
    log("(c) in-process import times done")
    cmds = {
        "pass": b.py("pass"),
        "libibverbs": b.py("import ctypes; ctypes.CDLL('libibverbs.so.1')"),
        "sysverbs": b.py("import sysverbs"),
    }
    walls: dict[str, list[float]] = {k: [] for k in cmds}
    for i in range(samples + 1):
        keys = list(cmds) if i % 2 == 0 else list(reversed(cmds))
        for k in keys:
            dt = b.wall(cmds[k])
            if i:
                walls[k].append(dt)
    # Without a bytecode cache (an empty cache directory, nothing written): the
    # import of a source tree that has never been compiled.
    empty = b.work / "empty-pycache"
    empty.mkdir(exist_ok=True)
    timed = ("import time; t = time.perf_counter_ns(); import sysverbs; "
             "print(time.perf_counter_ns() - t)")
    cold = []
    for _ in range(samples):
        argv = b.py(timed)
        argv[1:1] = ["-B", "-X", f"pycache_prefix={empty}"]
        proc = subprocess.run(argv, env=b.env, cwd=b.work, capture_output=True, text=True,
                              check=True)
        cold.append(int(proc.stdout) / 1e6)
    log("(c) process wall times done")
    base = statistics.median(walls["pass"])
    rows = [
        row("(c) import, in-process", None, lib_load, ours_import,
            "libibverbs: import ctypes + CDLL + argtypes; sysverbs: import sysverbs"),
        row("(c) import sysverbs, in-process, no bytecode cache", None, None, cold,
            "every module compiled from source (-B, empty pycache_prefix)"),
        row("(c) python -c 'import X', process wall", None, walls["libibverbs"],
            walls["sysverbs"], f"interpreter start alone (python -c pass): {base:.1f} ms"),
    ]
    # Where the import goes (-X importtime, self time in us, top entries).
    argv = b.py("import sysverbs")
    argv[1:1] = ["-X", "importtime"]
    proc = subprocess.run(argv, env=b.env, cwd=b.work, capture_output=True, text=True)
    entries = []
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            entries.append((int(m.group(1)), int(m.group(2)), m.group(4)))
    top = sorted(entries, reverse=True)[:12]
    importtime = {
        "top_self_us": [{"module": e[2], "self_us": e[0], "cumulative_us": e[1]} for e in top],
        "sysverbs_cumulative_us": next((e[1] for e in entries if e[2] == "sysverbs"), None),
    }
    return rows, importtime


def measure_cli(b: Bench, tree: Path, n: int, samples: int) -> dict[str, Any]:
    ibv = shutil.which("ibv_devices") or "ibv_devices"
    # python -m sysverbs devices (runpy, as -m does; -I leaves the cwd off sys.path)
    cmds = [[ibv], b.py("import runpy; runpy.run_module('sysverbs', run_name='__main__', "
                        "alter_sys=True)", "devices")]
    log(f"N={n}: (d) ibv_devices vs python -m sysverbs devices, {samples} runs each")
    out = json.loads(b.ns_run(tree, b.py(_TIMER, str(samples), json.dumps(cmds))))
    lib_rc, lib_out, lib_err = out["last"]["0"]
    our_rc, our_out, our_err = out["last"]["1"]
    if lib_rc != 0 or our_rc != 0:
        raise RuntimeError(f"(d) failed: ibv_devices rc={lib_rc} {lib_err!r}; "
                           f"sysverbs rc={our_rc} {our_err!r}")
    lines = len(lib_out.splitlines()) - 2
    same = "identical" if (lib_out, lib_err) == (our_out, our_err) else "DIFFERENT"
    return row("(d) CLI wall: ibv_devices vs python -m sysverbs devices", n,
               ms(out["times_ns"]["0"]), ms(out["times_ns"]["1"]),
               f"{lines} devices listed; outputs {same}")


def strace_calls(b: Bench, tree: Path, impl: str, mode: str, reps: int) -> dict[str, int]:
    """Syscalls of one child process, by name (``strace -f -c``), plus ``"total"``."""
    out = b.work / f"strace-{impl}-{mode}-{reps}.txt"
    b.ns_run(tree, ["strace", "-f", "-c", "-o", str(out), *b.py(_CHILD, impl, mode, str(reps))])
    counts: dict[str, int] = {}
    for line in out.read_text().splitlines():
        fields = line.split()
        # "% time  seconds  usecs/call  calls  [errors]  syscall"; the errors column may be empty
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[3].isdigit():
            counts[fields[-1]] = int(fields[3])
    if "total" not in counts:
        raise RuntimeError(f"strace gave no total for {impl} {mode}: {out.read_text()[-500:]}")
    return counts


def measure_syscalls(b: Bench, small: tuple[int, Path], large: tuple[int, Path],
                     reps: int) -> list[dict[str, Any]]:
    """Syscalls per device: the difference between two tree sizes (first call) or
    between 0 and ``reps`` extra calls (repeated call), so interpreter start and
    library loading, which do not depend on the devices, cancel out."""
    (n1, t1), (n2, t2) = small, large
    rows = []
    for kind in ("first", "repeat"):
        per_device: dict[str, float] = {}
        detail: dict[str, Any] = {}
        for impl in ("libibverbs", "sysverbs"):
            log(f"(e) strace -c: {impl}, {kind} call")
            if kind == "first":
                a = strace_calls(b, t1, impl, "first", 0)
                z = strace_calls(b, t2, impl, "first", 0)
                span = n2 - n1
            else:
                a = strace_calls(b, t2, impl, "repeat", 0)
                z = strace_calls(b, t2, impl, "repeat", reps)
                span = n2 * reps
            per_device[impl] = (z["total"] - a["total"]) / span
            detail[impl] = {k: round((z.get(k, 0) - a.get(k, 0)) / span, 3)
                            for k in sorted(set(a) | set(z)) if k != "total"
                            and abs(z.get(k, 0) - a.get(k, 0)) / span >= 0.01}
        what = (f"first call, N={n1}->{n2}" if kind == "first"
                else f"repeated call, N={n2}, {reps} extra calls")
        rows.append({
            "measurement": f"(e) syscalls per device, {what}",
            "libibverbs": per_device["libibverbs"],
            "sysverbs": per_device["sysverbs"],
            "ratio": per_device["sysverbs"] / per_device["libibverbs"],
            "per_syscall": detail,
        })
    return rows


def profile(b: Bench, tree: Path, reps: int, top: int) -> str:
    return b.ns_run(tree, b.py(_PROFILE, str(reps), str(top)))


def fs_type(path: Path) -> str:
    """The type of the file system that holds ``path`` (from /proc/self/mounts)."""
    best, kind = "", "unknown"
    real = os.path.realpath(path)
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return kind
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mnt = fields[1].replace("\\040", " ")
        inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) >= len(best):
            best, kind = mnt, fields[2]
    return kind


def default_tmpdir() -> Optional[Path]:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and fs_type(shm) == "tmpfs":
        return shm
    return None


def parse_sizes(text: str) -> list[int]:
    sizes = [int(s) for s in text.split(",") if s.strip()]
    if not sizes or any(s < 1 for s in sizes):
        raise argparse.ArgumentTypeError("sizes must be positive integers, e.g. 1,64,1024")
    return sizes


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--sizes", type=parse_sizes, default=[1, 64, 256, 1024, 4096],
                   help="device counts, comma-separated (default 1,64,256,1024,4096)")
    p.add_argument("--samples", type=int, default=7,
                   help="fresh processes per implementation for (a), (c), (d) (default 7)")
    p.add_argument("--repeats", type=int, default=20,
                   help="in-process calls for (b), after three warm-up calls (default 20)")
    p.add_argument("--cli-size", type=int, default=64,
                   help="device count of the tree for (d) (default 64)")
    p.add_argument("--json", type=Path, default=HERE / "results.json",
                   help="where to write the results (default benchmarks/results.json)")
    p.add_argument("--tmpdir", type=Path, default=default_tmpdir(),
                   help="where the trees are built (default /dev/shm when it is a writable "
                   "tmpfs: in memory like sysfs, and much faster to build; else $TMPDIR)")
    p.add_argument("--profile", type=int, metavar="N", default=None,
                   help="also cProfile sysverbs on an N-device tree and print the top entries")
    p.add_argument("--profile-top", type=int, default=25)
    p.add_argument("--no-strace", action="store_true",
                   help="skip the syscall counts (they need strace)")
    p.add_argument("--sysverbs", type=Path, metavar="DIR", default=REPO,
                   help="measure the sysverbs package of another checkout (DIR holds "
                   "sysverbs/, e.g. a `git worktree add DIR COMMIT`) on this benchmark's "
                   "trees: two commits compared on the same trees (default: this one)")
    args = p.parse_args(argv)
    if args.samples < 1 or args.repeats < 1:
        p.error("--samples and --repeats must be at least 1")
    if not (args.sysverbs / "sysverbs" / "__init__.py").is_file():
        p.error(f"--sysverbs {args.sysverbs}: no sysverbs package there")

    reason = unavailable()
    if reason:
        sys.stderr.write(f"bench_list: cannot run: {reason}\n")
        return 2
    os.makedirs("/dev/infiniband", exist_ok=True)

    rows: list[dict[str, Any]] = []
    info = machine()
    info["tree_dir"] = str(args.tmpdir or tempfile.gettempdir())
    info["tree_fs"] = fs_type(Path(info["tree_dir"]))
    info["sysverbs_checkout"] = str(args.sysverbs.resolve())
    log(f"machine: {info['nproc']} CPUs, {info['cpu_model']}, Python {info['python']}")
    with tempfile.TemporaryDirectory(prefix="svbench-", dir=args.tmpdir) as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        b = Bench(work, args.sysverbs.resolve())
        trees: dict[int, Path] = {}

        def tree_for(n: int) -> Path:
            if n not in trees:
                t = time.monotonic()
                trees[n] = build_tree(work / f"n{n}", n)
                log(f"N={n}: tree built in {time.monotonic() - t:.1f}s")
            return trees[n]

        sized = {n: tree_for(n) for n in args.sizes}
        first = measure_first(b, sized, args.samples)
        repeated = measure_repeat(b, sized, args.repeats)
        for n in args.sizes:
            rows += first[n]
            rows.append(repeated[n])
        import_rows, importtime = measure_import(b, tree_for(args.sizes[0]), args.samples)
        rows += import_rows
        rows.append(measure_cli(b, tree_for(args.cli_size), args.cli_size, args.samples))
        sys_rows: list[dict[str, Any]] = []
        if not args.no_strace:
            if shutil.which("strace") is None:
                sys.stderr.write("bench_list: strace is not installed (apt-get install strace; "
                                 "or --no-strace)\n")
                return 2
            small = 64 if 64 in args.sizes else min(args.sizes)
            large = 1024 if 1024 in args.sizes and small < 1024 else max(args.sizes)
            if small == large:
                small = 1
            sys_rows = measure_syscalls(b, (small, tree_for(small)), (large, tree_for(large)),
                                        reps=3)
        prof = None
        if args.profile:
            log(f"N={args.profile}: cProfile of sysverbs")
            prof = profile(b, tree_for(args.profile), args.repeats, args.profile_top)

    info["loadavg_end"] = os.getloadavg()[0]
    machine_line = (f"Machine: {info['nproc']} CPUs ({info['affinity']} usable), "
                    f"{info['cpu_model']}, Python {info['python']}, Linux {info['kernel']}, "
                    f"{info['libibverbs']}; trees on {info['tree_fs']} ({info['tree_dir']}); "
                    f"load average {info['loadavg_start']:.2f} at start, "
                    f"{info['loadavg_end']:.2f} at end")
    print(table(rows))
    print()
    if sys_rows:
        print(syscall_table(sys_rows))
        print()
    print(targets(rows, sys_rows))
    print()
    print(machine_line)
    print(f"Medians; (a)/(c)/(d): {args.samples} fresh processes each after one warm-up, "
          f"A/B alternated; (b): {args.repeats} calls ({REPEAT_ROUNDS} alternated processes, each "
          f"after three warm-up calls); (a) and (b) run every size in each round, and "
          f"their ratios (and t(4096)/t(1024)) are medians of the per-round ratios.")
    top = ", ".join(f"{e['module']} {e['self_us'] / 1000:.1f}"
                    for e in importtime["top_self_us"][:6])
    print(f"import sysverbs, -X importtime self ms (top): {top}")
    if prof:
        print()
        print(prof)
    result = {
        "machine": info,
        "config": {
            "sizes": args.sizes,
            "samples": args.samples,
            "repeats": args.repeats,
            "cli_size": args.cli_size,
        },
        "rows": rows,
        "syscalls": sys_rows,
        "targets": targets(rows, sys_rows),
        "importtime": importtime,
        "profile": prof,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The differential runner: build a case twice, run libibverbs and sysverbs, compare.

Per example the runner

1. builds the tree under a tmpfs work directory (``/dev/shm``), once when the
   plan only reads it and once per implementation when a step changes it;
2. starts one fresh probe process per implementation, both at once (two CPUs),
   each in its own private mount namespace with its copy bound at the same path
   (so every path string is identical) and that copy's ``dev/infiniband`` over
   ``/dev/infiniband``;
3. compares the exit status, every JSON result line (every field, the order,
   device identity across calls, errno) and the stderr bytes.

A case with ``static`` set (:class:`tests.fuzz.model.Case`) runs, in place of the
libibverbs probe, the program linked with the static libibverbs.a and that
``RDMA_STATIC_PROVIDERS`` (tests/oracle/static_probe.c with ``--fuzz``, built once per
variant and machine by tests/oracle/static.py), in the same namespace, environment,
config directory, rlimit and user; sysverbs gets the option ``static_providers``.

Two ways to start a probe:

* ``fork`` (default): a fork server per implementation (:mod:`tests.fuzz.zygote`)
  forks a fresh child per example; ~10 ms instead of ~150 ms (the static program:
  the libibverbs server's child executes it after its mounts).
* ``exec``: a new interpreter through :func:`tests.oracle.harness.run_in_ns`
  (``unshare``/``mount``/``setpriv``/``prlimit`` as the hand-written oracle tests
  do).  ``SYSVERBS_FUZZ_SPAWN=exec`` selects it; the test suite also runs a slice
  of examples in both modes to show they agree.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tests import staging
from tests.fuzz.model import Case, build_tree, relocate, sys_dir_for, sysfs_value
from tests.oracle import harness, static

REPO = Path(__file__).resolve().parents[2]
IMPLS = ("libibverbs", "sysverbs")
OPTIONS = {"rdma_core": "44"}
PROBE_TIMEOUT = 60.0
#: Keys of Case.modes under this prefix apply to the config directory.
CONF = "etc/libibverbs.d"
SETPRIV = {
    "nobody": staging.SETPRIV_NOBODY,
    "setuid": "--ruid=65534",
}


@dataclass
class Outcome:
    """What both implementations did on one case."""

    real: harness.Run
    ours: harness.Run
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: What ran as the oracle ("libibverbs", or "static" for a static case).
    oracle: str = "libibverbs"

    def differences(self) -> list[str]:
        """Human-readable differences; empty when the two agree exactly."""
        out = []
        real, ours, name = self.real, self.ours, self.oracle
        if real.returncode != 0:
            out.append(f"{name} probe exited {real.returncode}: {real.stderr[-2000:]!r}")
        if ours.returncode != real.returncode:
            out.append(
                f"exit status: {name} {real.returncode}, sysverbs {ours.returncode}: "
                f"{ours.stderr[-3000:].decode(errors='replace')}"
            )
        rl, ol = real.stdout.splitlines(), ours.stdout.splitlines()
        pad = " " * max(len(name) - len("sysverbs"), 0)
        for i in range(max(len(rl), len(ol))):
            a = rl[i] if i < len(rl) else "<missing>"
            b = ol[i] if i < len(ol) else "<missing>"
            if a != b and not _unspecified_errno(a, b):
                out.append(f"step {i}:\n  {name:8} {a}\n  sysverbs {pad}{b}")
        if real.stderr != ours.stderr:
            out.append(f"stderr:\n  {name:8} {real.stderr!r}\n  sysverbs {pad}{ours.stderr!r}")
        return out


def _unspecified_errno(real: str, ours: str) -> bool:
    """An ``open`` that libibverbs failed without setting errno (the probe reports
    null) matches any failure of sysverbs: the C errno is whatever was there before."""
    if '"errno": null' not in real:
        return False
    try:
        a, b = json.loads(real), json.loads(ours)
    except ValueError:
        return False
    return a == {"op": "open", "errno": None} and b.get("op") == "open" and bool(b.get("errno"))


class _Zygote:
    def __init__(self, impl: str) -> None:
        self.impl = impl
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.zygote", impl],
            cwd=str(REPO),
            env=harness.base_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        self._buf = b""

    def _line(self, deadline: Optional[float] = None) -> str:
        """The next line from the server (unbuffered, so select() sees every byte);
        None-deadline waits forever; past the deadline returns ""."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            if deadline is not None:
                ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
                if not ready:
                    return ""
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"{self.impl} fork server died")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode()

    def send(self, req: dict[str, Any]) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req).encode() + b"\n")
        line = self._line()
        if not line.startswith("pid "):
            raise RuntimeError(f"{self.impl} fork server: {line!r}")
        return int(line.split()[1])

    def wait(self, pid: int, deadline: float) -> int:
        """The child's exit status; a child still running at ``deadline`` is killed
        (it hung: its status is then -9)."""
        line = self._line(deadline)
        if not line:
            try:
                os.kill(pid, signal.SIGKILL)  # the fork server's child, started for us
            except ProcessLookupError:
                pass
            line = self._line()
        if not line.startswith("rc "):
            raise RuntimeError(f"{self.impl} fork server: {line!r}")
        return int(line.split()[1])

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Runner:
    """Runs cases; keep one for many examples (it owns the fork servers and a work dir)."""

    def __init__(self, mode: Optional[str] = None, workdir: Optional[Path] = None) -> None:
        self.mode = mode or os.environ.get("SYSVERBS_FUZZ_SPAWN", "fork")
        if self.mode not in ("fork", "exec"):
            raise ValueError(f"SYSVERBS_FUZZ_SPAWN must be fork or exec, not {self.mode!r}")
        base = Path("/dev/shm") if os.path.isdir("/dev/shm") else None
        self.work = workdir or Path(tempfile.mkdtemp(prefix="svfz-", dir=base))
        os.chmod(self.work, 0o755)
        self.dst = self.work / "root"
        self.dst.mkdir(exist_ok=True)
        os.chmod(self.dst, 0o755)
        self.zygotes: dict[str, _Zygote] = {}
        self.static_binaries: dict[str, Path] = {}
        self.examples = 0
        self.seconds = 0.0

    def close(self) -> None:
        for z in self.zygotes.values():
            z.close()
        self.zygotes.clear()
        shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def static_binary(self, variant: str) -> Path:
        """The static program for ``static=variant`` ("": no RDMA_STATIC_PROVIDERS)."""
        binary = self.static_binaries.get(variant)
        if binary is None:
            binary = self.static_binaries[variant] = static.build(variant or None)
        return binary

    # -- one example ---------------------------------------------------------------
    def _prepare(self, case: Case) -> tuple[dict[str, Path], Optional[Path], Path, dict[str, str]]:
        for name in ("libibverbs", "sysverbs", "shared", "conf", "out"):
            p = self.work / name
            if os.path.lexists(p):
                shutil.rmtree(p)
        root = str(self.dst)
        sys_dir = sys_dir_for(case, root)
        srcs: dict[str, Path] = {}
        copies = IMPLS if case.mutates else ("shared",)
        tree_modes = {k: v for k, v in case.modes.items() if not k.startswith(CONF)}
        for name in copies:
            src = self.work / name
            src.mkdir()
            os.chmod(src, 0o755)
            build_tree(src, case.tree, sys_dir, tree_modes)
            srcs[name] = src
        for impl in IMPLS:
            srcs.setdefault(impl, srcs.get("shared", self.work / impl))
        conf: Optional[Path] = None
        if case.config is not None:
            conf = self.work / "conf"
            conf_modes = {
                k[len(CONF) :].lstrip("/"): v for k, v in case.modes.items() if k.startswith(CONF)
            }
            build_tree(conf, case.config, modes=conf_modes, dev=False)
        out = self.work / "out"
        out.mkdir()
        os.chmod(out, 0o755)
        options: dict[str, Any] = dict(OPTIONS)
        if case.static is not None:
            options["static_providers"] = case.static
        plan = {
            "root": root,
            "steps": [_relocate_step(s, sys_dir) for s in case.steps],
            "options": options,
        }
        plan_file = out / "plan.json"
        plan_file.write_text(json.dumps(plan), encoding="utf-8")
        os.chmod(plan_file, 0o644)
        env = harness.base_env()
        env["SYSFS_PATH"] = sysfs_value(case, root)
        env.update(case.env)
        if case.static is not None:
            env["STATIC_PROBE_ROOT"] = root
        return srcs, conf, plan_file, env

    def _static_argv(self, case: Case, plan_file: Path) -> Optional[list[str]]:
        """The static program's command line for a static case (None: not one)."""
        if case.static is None:
            return None
        steps = json.loads(plan_file.read_text(encoding="utf-8"))["steps"]
        return [str(self.static_binary(case.static)), "--fuzz", *static.plan_ops(steps)]

    def run(self, case: Case) -> Outcome:
        t0 = time.monotonic()
        srcs, conf, plan_file, env = self._prepare(case)
        # A static case runs in a fresh process under setpriv (exec mode) whatever the
        # mode: the fork server's in-process drop to another user made the static program
        # fail (EACCES) where the same program under setpriv, as a user runs it, does not.
        if self.mode == "fork" and case.static is None:
            real, ours = self._run_fork(case, srcs, conf, plan_file, env)
        else:
            real, ours = self._run_exec(case, srcs, conf, plan_file)
        dt = time.monotonic() - t0
        self.examples += 1
        self.seconds += dt
        return Outcome(real, ours, dt, oracle="libibverbs" if case.static is None else "static")

    def _run_fork(
        self,
        case: Case,
        srcs: dict[str, Path],
        conf: Optional[Path],
        plan_file: Path,
        env: dict[str, str],
    ) -> tuple[harness.Run, harness.Run]:
        pids = {}
        static_argv = self._static_argv(case, plan_file)
        for impl in IMPLS:
            z = self.zygotes.get(impl)
            if z is None or z.proc.poll() is not None:
                z = self.zygotes[impl] = _Zygote(impl)
            req = {
                "plan": str(plan_file),
                "src": str(srcs[impl]),
                "dst": str(self.dst),
                "conf": str(conf) if conf else "",
                "env": env,
                "out": str(self.work / "out" / f"{impl}.out"),
                "err": str(self.work / "out" / f"{impl}.err"),
                "user": case.user,
                "memlock": case.memlock,
            }
            if impl == "libibverbs" and static_argv is not None:
                req["exec"] = static_argv
            pids[impl] = z.send(req)
        deadline = time.monotonic() + PROBE_TIMEOUT
        runs = []
        for impl in IMPLS:
            rc = self.zygotes[impl].wait(pids[impl], deadline)
            stdout = (self.work / "out" / f"{impl}.out").read_bytes()
            stderr = (self.work / "out" / f"{impl}.err").read_bytes()
            runs.append(harness.Run(rc, stdout.decode(errors="surrogateescape"), stderr))
        return runs[0], runs[1]

    def _run_exec(
        self, case: Case, srcs: dict[str, Path], conf: Optional[Path], plan_file: Path
    ) -> tuple[harness.Run, harness.Run]:
        root = str(self.dst)
        results: dict[str, harness.Run] = {}

        setpriv = SETPRIV.get(case.user)
        # another user may not enter this checkout: it runs the staged copy
        python, code = staging.python_and_code(bool(setpriv))
        static_argv = self._static_argv(case, plan_file)

        def one(impl: str) -> None:
            argv = [python, "-m", "tests.fuzz.probe", impl, str(plan_file)]
            env = {**case.env, "PYTHONPATH": str(code)}
            if impl == "libibverbs" and static_argv is not None:
                argv = static_argv
                env = {**case.env, "STATIC_PROBE_ROOT": root}
            results[impl] = harness.run_in_ns(
                srcs[impl],
                self.dst,
                argv,
                env=env,
                config_dir=conf,
                setpriv=setpriv,
                memlock=case.memlock,
                sysfs_path=sysfs_value(case, root),
            )

        threads = [threading.Thread(target=one, args=(impl,)) for impl in IMPLS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results["libibverbs"], results["sysverbs"]


def _relocate_step(step: dict[str, Any], sys_dir: str) -> dict[str, Any]:
    out = dict(step)
    for key in ("path", "to", "like"):
        if key in out:
            out[key] = relocate(out[key], sys_dir)
    return out

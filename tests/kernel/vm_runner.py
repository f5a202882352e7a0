"""Runs inside the kernel-lab VM: every scenario of a plan, in one Python process.

    python -m tests.kernel.vm_runner PLAN.json OUTDIR

Starting Python costs seconds under emulation, so this process starts once,
imports everything, and *forks* a fresh worker for each emulated process.  A
worker is one libibverbs (real, through ctypes) or one sysverbs, with its own
environment, user, memlock limit, network namespace and RDMA-netlink blocking
(``SV_NLBLOCK``, honoured by the LD_PRELOADed ``nlblock.c`` when this process
was started with it).  The parent never calls into either library, so every
worker starts from a clean, never-initialised state.

Workers of a scenario run in lockstep: each ``list``/``free``/``open`` step is
sent to all of them, and ``sh`` steps change the kernel between steps, so all
implementations see exactly the same kernel state at every call.

Plan: ``{"scenarios": [{"name": ..., "steps": [...]}]}``.  Steps:

* ``{"op": "sh", "cmd": ...}``: a shell command as root (no LD_PRELOAD);
* ``{"op": "py", "code": ...}``: a Python snippet for file set-up, run in this
  process (much faster than many small shell commands under emulation);
* ``{"op": "start", "worker": W, "impl": "libibverbs"|"sysverbs", "options": {...},
  "env": {...}, "user": UID, "memlock": BYTES, "block": MODE, "netns": NAME}``;
* ``{"op": "list"|"free"|"open", "workers": [W...] (default all), ...}`` as in
  ``tests/oracle/probe.py``; ``{"op": "fork"}``: ``ibv_is_fork_initialized()``;
* ``{"op": "cmd", "name": N, "argv": [...], ...}``: run a program (``env``, ``block``,
  ``netns``, ``user`` as for workers; ``timeout`` in seconds, default ``STEP_TIMEOUT``;
  ``$SV_STEP_DIR`` names the scenario's directory, where each earlier ``cli`` step's
  output is ``NAME.cli.stdout``);
* ``{"op": "cli", "name": N, "args": [...], ...}``: ``sysverbs.cli.main(args)`` in a
  fresh fork;
* ``{"op": "stop"}``: end the workers (also done at the end of a scenario).

Results go to ``OUTDIR/results.json`` after every scenario.
"""

from __future__ import annotations

import _socket  # noqa: F401  (imported before any fork: workers may not be allowed to)
import ctypes
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
import traceback
from typing import Any, Optional

# Imported once here, before any fork: sysverbs and what the ``cli`` steps' commands
# import (env, devinfo, doctor, netdev, snapshot, topo).  Under emulation each fork
# imported them again from the host's disk: the 30 ``cli`` steps took 74 s, 49 s with
# most of these imported here (the lab booted beside two CPU burners).  Importing
# changes no answer: no module reads the options or the environment at import.
import sysverbs
import sysverbs.cli  # noqa: F401
import sysverbs.cli.devinfo  # noqa: F401
import sysverbs.cli.env  # noqa: F401
import sysverbs.cli.tools  # noqa: F401
import sysverbs.cli.topo  # noqa: F401
import sysverbs.devices.diagnosis  # noqa: F401
import sysverbs.devices.location  # noqa: F401
import sysverbs.placement  # noqa: F401
import sysverbs.providers._data  # noqa: F401
import sysverbs.rank.environment  # noqa: F401
import sysverbs.sources.netlink.queries  # noqa: F401
import sysverbs.sources.netlink.scan  # noqa: F401
import sysverbs.testing.recorder  # noqa: F401
from tests.oracle.probe import Libibverbs, Sysverbs

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_REC = 0x4000
MS_SLAVE = 1 << 19
MNT_DETACH = 2
STEP_TIMEOUT = 120.0

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def enter_netns(name: str) -> None:
    """What ``ip netns exec`` does: join the netns, private mounts, a fresh /sys."""
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(fd, CLONE_NEWNET), "setns")
    finally:
        os.close(fd)
    _check(_libc.unshare(CLONE_NEWNS), "unshare")
    _check(_libc.mount(b"", b"/", b"none", MS_SLAVE | MS_REC, None), "mount --make-rslave /")
    _check(_libc.umount2(b"/sys", MNT_DETACH), "umount /sys")
    _check(_libc.mount(name.encode(), b"/sys", b"sysfs", 0, None), "mount sysfs")


def _apply_spec(spec: dict[str, Any]) -> None:
    """In a fresh fork: environment, netns, memlock, user."""
    for k, v in spec.get("env", {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    if spec.get("block"):
        os.environ["SV_NLBLOCK"] = spec["block"]
    else:
        os.environ.pop("SV_NLBLOCK", None)
    if spec.get("netns"):
        enter_netns(spec["netns"])
    if spec.get("memlock") is not None:
        v = int(spec["memlock"])
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (v, v))
    if spec.get("user") is not None:
        uid = int(spec["user"])
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)


def _redirect(path: str, fd: int) -> None:
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, fd)
    os.close(out)


#: Pipe ends the parent holds for running workers: a new fork must close them, or
#: a worker would never see EOF on its command pipe.
_PARENT_FDS: set[int] = set()


class Worker:
    """A forked process holding one library instance, driven step by step."""

    def __init__(self, name: str, spec: dict[str, Any], outdir: str) -> None:
        self.name = name
        self.stderr_path = os.path.join(outdir, f"{name}.stderr")
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            code = 0
            try:
                os.close(cmd_w)
                os.close(res_r)
                for fd in _PARENT_FDS:
                    os.close(fd)
                _redirect(self.stderr_path, 2)
                _redirect(os.path.join(outdir, f"{name}.stdout"), 1)
                _serve(spec, cmd_r, res_w)
            except BaseException:
                traceback.print_exc()
                code = 70
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(cmd_r)
        os.close(res_w)
        _PARENT_FDS.update((cmd_w, res_r))
        self.pid = pid
        self.cmd = os.fdopen(cmd_w, "w")
        self.res = os.fdopen(res_r, "r")
        self.dead: Optional[str] = None

    def send(self, step: dict[str, Any]) -> None:
        if self.dead:
            return
        try:
            self.cmd.write(json.dumps(step) + "\n")
            self.cmd.flush()
        except OSError as e:
            self.dead = f"pipe error {e}"

    def receive(self, step: dict[str, Any], deadline: float) -> dict[str, Any]:
        if self.dead:
            return {"op": step["op"], "dead": self.dead}
        line = ""
        try:
            ready, _, _ = select.select([self.res], [], [], max(0.0, deadline - time.monotonic()))
            line = self.res.readline() if ready else ""
        except OSError as e:
            self.dead = f"pipe error {e}"
        if not line:
            self.dead = self.dead or ("timeout" if not ready else "worker died")
            return {"op": step["op"], "dead": self.dead}
        result: dict[str, Any] = json.loads(line)
        return result

    def stop(self) -> dict[str, Any]:
        _PARENT_FDS.difference_update((self.cmd.fileno(), self.res.fileno()))
        try:
            self.cmd.close()
        except OSError:
            pass
        status = _reap(self.pid, 30.0)
        self.res.close()
        with open(self.stderr_path, "rb") as f:
            stderr = f.read()
        return {"status": status, "stderr": stderr.decode("latin-1"), "dead": self.dead}


def broadcast(workers: list[Worker], step: dict[str, Any]) -> dict[str, Any]:
    """Send a step to several workers at once (they run in parallel), then collect."""
    for w in workers:
        w.send(step)
    deadline = time.monotonic() + STEP_TIMEOUT
    return {w.name: w.receive(step, deadline) for w in workers}


def _reap(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)


def _serve(spec: dict[str, Any], cmd_fd: int, res_fd: int) -> None:
    _apply_spec(spec)
    impl: Any
    if spec["impl"] == "libibverbs":
        impl = Libibverbs()
    else:
        impl = Sysverbs(spec.get("options", {}))
    labels: dict[int, str] = {}
    lists: list[Any] = []
    with os.fdopen(cmd_fd, "r") as cmds, os.fdopen(res_fd, "w") as res:
        for line in cmds:
            step = json.loads(line)
            op = step["op"]
            result: dict[str, Any]
            if op == "list":
                got = impl.get_list()
                if isinstance(got, int):
                    result = {"op": "list", "errno": got}
                else:
                    handle, devs = got
                    lists.append((handle, len(devs)))
                    items = []
                    for ident, fields in devs:
                        label = labels.setdefault(ident, f"d{len(labels)}")
                        items.append({"id": label, **fields})
                    result = {"op": "list", "devices": items}
            elif op == "open":
                if step["list"] >= len(lists) or step["device"] >= lists[step["list"]][1]:
                    result = {"op": "open", "error": "no such list or device"}
                else:
                    handle = lists[step["list"]][0]
                    result = {"op": "open", "errno": impl.open_close(handle, step["device"])}
            elif op == "fork":  # ibv_is_fork_initialized (asks netlink for copy-on-fork)
                if spec["impl"] == "libibverbs":
                    status = int(impl.lib.ibv_is_fork_initialized())
                else:
                    status = int(sysverbs.is_fork_initialized())
                result = {"op": "fork", "status": status}
            elif op == "free":
                impl.free(lists[step["list"]][0])
                result = {"op": "free"}
            else:
                result = {"op": op, "error": "unknown op"}
            sys.stderr.flush()
            res.write(json.dumps(result, sort_keys=True) + "\n")
            res.flush()


def _child_env(spec: dict[str, Any], preload: Optional[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "SV_NLBLOCK")}
    for k, v in spec.get("env", {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    if spec.get("block") and preload:
        env["LD_PRELOAD"] = preload
        env["SV_NLBLOCK"] = spec["block"]
    return env


def run_cmd(step: dict[str, Any], preload: Optional[str], sdir: str) -> dict[str, Any]:
    argv = list(step["argv"])
    if step.get("user") is not None:
        u = str(step["user"])
        argv = ["setpriv", f"--reuid={u}", f"--regid={u}", "--clear-groups", *argv]
    if step.get("netns"):
        argv = ["ip", "netns", "exec", step["netns"], *argv]
    try:
        proc = subprocess.run(
            argv,
            env={**_child_env(step, preload), "SV_STEP_DIR": sdir},
            capture_output=True,
            timeout=float(step.get("timeout", STEP_TIMEOUT)),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"rc": -1, "stdout": "", "stderr": f"{type(e).__name__}: {e}"}
    return {
        "rc": proc.returncode,
        "stdout": proc.stdout.decode("latin-1"),
        "stderr": proc.stderr.decode("latin-1"),
    }


def run_cli(step: dict[str, Any], outdir: str, name: str) -> dict[str, Any]:
    out_path = os.path.join(outdir, f"{name}.cli.stdout")
    err_path = os.path.join(outdir, f"{name}.cli.stderr")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 70
        try:
            for fd in _PARENT_FDS:
                os.close(fd)
            _redirect(out_path, 1)
            _redirect(err_path, 2)
            _apply_spec(step)
            from sysverbs import cli

            try:
                code = int(cli.main(list(step["args"])) or 0)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    rc = _reap(pid, STEP_TIMEOUT)
    with open(out_path, "rb") as f:
        stdout = f.read().decode("latin-1")
    with open(err_path, "rb") as f:
        stderr = f.read().decode("latin-1")
    return {"rc": rc, "stdout": stdout, "stderr": stderr}


def run_py(code: str) -> dict[str, Any]:
    """A Python snippet run in this process (file set-up only; it must not touch
    libibverbs or sysverbs).  What it prints is kept; an exception is a failure."""
    import contextlib
    import io

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<scenario step>", "exec"), {"__name__": "__step__"})
    except Exception:
        return {"rc": 1, "stdout": out.getvalue(), "stderr": traceback.format_exc()}
    return {"rc": 0, "stdout": out.getvalue(), "stderr": ""}


def run_scenario(scen: dict[str, Any], outdir: str, preload: Optional[str]) -> dict[str, Any]:
    sdir = os.path.join(outdir, scen["name"])
    os.makedirs(sdir, exist_ok=True)
    workers: dict[str, Worker] = {}
    events: list[dict[str, Any]] = []
    finished: dict[str, Any] = {}
    start = time.monotonic()

    def stop_all() -> None:
        for name, w in workers.items():
            finished[name] = w.stop()
        workers.clear()

    try:
        for step in scen["steps"]:
            op = step["op"]
            t_step = time.monotonic()
            if op == "sh":
                proc = subprocess.run(
                    ["sh", "-c", step["cmd"]],
                    env=_child_env({}, None),
                    capture_output=True,
                    timeout=STEP_TIMEOUT,
                )
                events.append(
                    {
                        "op": "sh",
                        "cmd": step["cmd"],
                        "rc": proc.returncode,
                        "stdout": proc.stdout.decode("latin-1"),
                        "stderr": proc.stderr.decode("latin-1"),
                    }
                )
            elif op == "py":
                events.append({"op": "py", "cmd": step["code"][:200], **run_py(step["code"])})
            elif op == "start":
                workers[step["worker"]] = Worker(step["worker"], step, sdir)
                events.append({"op": "start", "worker": step["worker"]})
            elif op in ("list", "free", "open", "fork"):
                names = step.get("workers") or list(workers)
                results = broadcast([workers[n] for n in names], step)
                events.append({"op": op, "results": results})
            elif op == "cmd":
                events.append({"op": "cmd", "name": step["name"], **run_cmd(step, preload, sdir)})
            elif op == "cli":
                events.append(
                    {"op": "cli", "name": step["name"], **run_cli(step, sdir, step["name"])}
                )
            elif op == "stop":
                stop_all()
                events.append({"op": "stop"})
            else:
                events.append({"op": op, "error": "unknown step"})
            events[-1]["t"] = round(time.monotonic() - t_step, 3)
    except Exception:
        events.append({"op": "crash", "error": traceback.format_exc()})
    finally:
        stop_all()
    return {"events": events, "workers": finished, "seconds": time.monotonic() - start}


def _uptime() -> str:
    with open("/proc/uptime") as f:
        return f.read().split()[0]


def main() -> None:
    plan_path, outdir = sys.argv[1], sys.argv[2]
    print(f"runner started at uptime {_uptime()}", flush=True)
    with open(plan_path) as f:
        plan = json.load(f)
    preload = os.environ.get("LD_PRELOAD") or None
    os.environ.pop("SV_NLBLOCK", None)
    # Warm what is cached process-wide and costs 9p round trips, without calling any
    # stateful part of sysverbs (the workers must start clean).
    from sysverbs.providers import table as providers

    providers.libibverbs_library()
    results: dict[str, Any] = {"preload": preload, "scenarios": {}}
    out = os.path.join(outdir, "results.json")
    for scen in plan["scenarios"]:
        t0 = time.monotonic()
        results["scenarios"][scen["name"]] = run_scenario(scen, outdir, preload)
        print(f"scenario {scen['name']}: {time.monotonic() - t0:.1f} s", flush=True)
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
        os.replace(tmp, out)


if __name__ == "__main__":
    main()

"""Host side of the kernel lab: build the plan, boot once, hand back the results.

:func:`run_lab` compiles the netlink-blocking interposer (``nlblock.c``, needs a C
compiler), stages a copy of the code with its bytecode for the VM (tests/staging.py),
writes the plan, boots the VM once through :mod:`tests.kernel.vmlab` and loads
``results.json``.  Everything is kept under one temporary directory, whose path
every failure message names.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from tests import staging
from tests.kernel import scenario_metrics, scenarios, vmlab
from tests.scratch import scratch_dir

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
#: PATH in the VM
VM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class LabResults:
    """The outcome of one boot with every scenario."""

    workdir: Path
    seconds: float
    accel: str
    preload: bool
    preload_reason: Optional[str]
    plan: list[dict[str, Any]]
    scenarios: dict[str, Any]
    console: str

    def scenario(self, name: str) -> dict[str, Any]:
        if name not in self.scenarios:
            raise KeyError(
                f"scenario {name!r} did not run (VM output incomplete; logs: {self.workdir})"
            )
        result: dict[str, Any] = self.scenarios[name]
        return result


def build_preload(workdir: Path) -> tuple[Optional[Path], Optional[str]]:
    """Compile ``nlblock.c``; (path, None) or (None, why not)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None, "no C compiler (apt-get install gcc libc6-dev)"
    out = workdir / "libnlblock.so"
    proc = subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(out), str(HERE / "nlblock.c"), "-ldl"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return None, f"compiling nlblock.c failed: {proc.stderr.strip()[-500:]}"
    os.chmod(out, 0o755)
    return out, None


def stage_code(workdir: Path) -> Path:
    """The code the VM runs: a copy in ``workdir/code`` with its bytecode (the VM's
    view of this disk is read-only and slow), readable by the unprivileged workers
    wherever the checkout lies (a clone under a 0700 directory: tests/staging.py)."""
    if not staging.searchable_by_others(workdir):
        raise vmlab.VmError(
            "unavailable",
            f"the unprivileged workers could not reach {workdir}: a directory above it "
            "lacks the others' search bit",
        )
    code = workdir / "code"
    shutil.rmtree(code, ignore_errors=True)
    scenario_metrics.stage_prometheus_client(code)  # (the exporter's one dependency)
    return staging.stage_into(code)


def load_results(workdir: Path) -> LabResults:
    """The results of an earlier run kept in ``workdir`` (no boot)."""
    data = json.loads((workdir / "out" / "results.json").read_text())
    plan = json.loads((workdir / "plan.json").read_text())["scenarios"]
    preload = (workdir / "libnlblock.so").exists()
    return LabResults(
        workdir=workdir,
        seconds=0.0,
        accel="reused",
        preload=preload,
        preload_reason=None if preload else "no libnlblock.so in the reused run",
        plan=plan,
        scenarios=data["scenarios"],
        console="",
    )


def unavailable_reason() -> Optional[str]:
    """Why the lab cannot run here (None if it may): the VM, or the real tools the
    scenarios compare with (the VM runs this machine's disk)."""
    reason = vmlab.unavailable_reason()
    if reason:
        return reason
    for tool in ("rdma", "ip", "ibv_devices", "ibv_devinfo"):
        if shutil.which(tool, path=VM_PATH) is None:
            return f"{tool} is not installed (apt-get install iproute2 ibverbs-utils)"
    return None


def lab_workdir(workdir: Optional[Path], prefix: str) -> Path:
    """A boot's work directory, made and opened to the VM's workers: ``workdir``, or
    a new one (``prefix``...) where the VM sees it; :class:`vmlab.VmError` when the VM
    cannot see it."""
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix=prefix, dir=vmlab.visible_tmp()))
    if vmlab.hidden_in_vm(workdir):
        raise vmlab.VmError("unavailable", f"the VM cannot see the work directory {workdir}: "
                            f"it mounts its own {', '.join(vmlab.VM_OWN_MOUNTS)}")
    # its name may be a fixed one in /var/tmp: made and opened without following a link
    workdir.parent.mkdir(parents=True, exist_ok=True)
    scratch_dir(str(workdir.parent), workdir.name, 0o755)
    return workdir


def run_lab(workdir: Optional[Path] = None) -> LabResults:
    """Boot once, run every scenario; raises :class:`vmlab.VmError`."""
    reason = unavailable_reason()
    if reason:
        raise vmlab.VmError("unavailable", reason)
    workdir = lab_workdir(workdir, "sysverbs-kernel-lab-")
    preload, preload_reason = build_preload(workdir)
    plan = scenarios.build(preload is not None)
    only = os.environ.get("SV_LAB_ONLY")
    if only:  # debugging: a subset (later scenarios may depend on earlier ones)
        plan = [s for s in plan if s["name"] in only.split(",")]
    plan_path = workdir / "plan.json"
    plan_path.write_text(json.dumps({"scenarios": plan}, indent=1))
    os.chmod(plan_path, 0o644)
    code = stage_code(workdir)
    env = [
        f"export PYTHONPATH={shlex.quote(str(code))}",
        "export PYTHONDONTWRITEBYTECODE=1",
        f"export PATH={VM_PATH}",
        "unset SYSFS_PATH IBV_SHOW_WARNINGS RDMAV_DRIVERS IBV_DRIVERS LD_PRELOAD",
    ]
    if preload:
        env.append(f"export LD_PRELOAD={shlex.quote(str(preload))}")
    script = "\n".join(
        [
            f"cd {shlex.quote(str(code))}",
            *env,
            "echo VM-PYTHON-START",
            # -S: the site machinery (.pth files of the venv) costs many 9p round trips.
            f"{shlex.quote(sys.executable)} -S -m tests.kernel.vm_runner "
            f"{shlex.quote(str(plan_path))} /run/vmout",
            "rc=$?",
            "echo VM-PYTHON-END rc=$rc",
            "exit $rc",
            "",
        ]
    )
    result = vmlab.run(script, workdir)
    out = result.outdir / "results.json"
    if not out.exists():
        raise vmlab.VmError(
            "script",
            f"the scenario runner wrote no results (exit status {result.exit_status}); "
            f"console ends {result.console.strip().splitlines()[-5:]!r}",
            workdir,
        )
    data = json.loads(out.read_text())
    if result.exit_status != 0:
        raise vmlab.VmError(
            "script",
            f"the scenario runner failed with status {result.exit_status}; "
            f"console ends {result.console.strip().splitlines()[-8:]!r}",
            workdir,
        )
    return LabResults(
        workdir=workdir,
        seconds=result.seconds,
        accel=result.accel,
        preload=preload is not None,
        preload_reason=preload_reason,
        plan=plan,
        scenarios=data["scenarios"],
        console=result.console,
    )


def boot(workdir: Optional[Path] = None) -> tuple[dict[str, str], Optional[LabResults]]:
    """One boot, and how it ended: ``({"kind": "ok"}, results)``,
    ``({"kind": "unavailable", "message": ...}, None)`` (the VM cannot run here: a skip,
    or a failure under CI=true) or ``({"kind": "fail", "message": ...}, None)`` (the VM
    ran and the scenario runner broke)."""
    reason = unavailable_reason()
    if reason:
        return {"kind": "unavailable", "message": reason}, None
    try:
        return {"kind": "ok"}, run_lab(workdir)
    except vmlab.VmError as e:
        # the VM ran, the scenario runner broke: a real failure; else the VM could not
        # boot, timed out or lacks modules
        return {"kind": "fail" if e.kind == "script" else "unavailable", "message": str(e)}, None


def shared_boot(
    base: Path, boot_in: Optional[Callable[[Path], dict[str, str]]] = None
) -> dict[str, str]:
    """Boot once for everyone who asks with the same ``base`` directory.

    The first caller takes the lock ``base/lock``, boots into ``base/lab`` and writes
    ``base/outcome.json``; later callers wait on the lock and read the outcome, that of
    :func:`boot` (``fail`` also when anything else went wrong).
    ``make pytest`` calls this before pytest starts, so that the boot, which takes
    minutes under TCG, runs beside the rest of the suite instead of after it.
    ``boot_in``: another machine's boot (``numa_vm.boot``), given its directory.
    """
    base.mkdir(parents=True, exist_ok=True)
    # The lab's own directory (made by `mktemp -d`: 0700) holds only the lab's files;
    # the VM's unprivileged workers must reach the staged code below it.
    os.chmod(base, 0o755)
    outcome = base / "outcome.json"
    with open(base / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not outcome.exists():
            try:
                done = boot_in(base / "lab") if boot_in else boot(base / "lab")[0]
            except Exception as e:  # noqa: BLE001 - reported to every waiting test
                done = {"kind": "fail", "message": f"{type(e).__name__}: {e}"}
            partial = base / "outcome.json.partial"
            partial.write_text(json.dumps(done))
            os.replace(partial, outcome)
        result: dict[str, str] = json.loads(outcome.read_text())
    return result


if __name__ == "__main__":
    # python -m tests.kernel.lab [WORKDIR]       one boot, results kept in WORKDIR
    # python -m tests.kernel.lab --shared BASE   shared_boot(BASE) (what make pytest runs)
    if sys.argv[1:2] == ["--shared"]:
        # the NUMA machine (numa_vm.py) boots beside this one, into BASE/numa
        Path(sys.argv[2]).mkdir(parents=True, exist_ok=True)
        os.chmod(sys.argv[2], 0o755)  # (shared_boot does it too, maybe after the child)
        numa = subprocess.Popen(
            [sys.executable, "-m", "tests.kernel.numa_vm", "--shared",
             str(Path(sys.argv[2]) / "numa")], cwd=REPO)
        done = shared_boot(Path(sys.argv[2]))
        print(f"kernel lab: {done['kind']} {done.get('message', '')}".rstrip(), flush=True)
        numa.wait()
        sys.exit(0)
    lab = run_lab(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    print(f"{lab.seconds:.0f} s ({lab.accel}); results in {lab.workdir}")

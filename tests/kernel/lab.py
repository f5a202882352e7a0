"""Host side of the kernel lab: build the plan, boot once, hand back the results.

:func:`run_lab` compiles the netlink-blocking interposer (``nlblock.c``, needs a C
compiler), makes sure the Python files the VM imports have bytecode (the VM's
view of this disk is read-only and slow), writes the plan, boots the VM once
through :mod:`tests.kernel.vmlab` and loads ``results.json``.  Everything is
kept under one temporary directory, whose path every failure message names.
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from tests.kernel import scenarios, vmlab

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


def _bytecode() -> None:
    """The VM imports these over 9p from a read-only view: give them fresh .pyc files."""
    for sub in ("sysverbs", "tests/oracle", "tests/kernel"):
        compileall.compile_dir(str(REPO / sub), quiet=1, maxlevels=2)
    compileall.compile_file(str(REPO / "tests/__init__.py"), quiet=1)


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


def run_lab(workdir: Optional[Path] = None) -> LabResults:
    """Boot once, run every scenario; raises :class:`vmlab.VmError`."""
    reason = unavailable_reason()
    if reason:
        raise vmlab.VmError("unavailable", reason)
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="sysverbs-kernel-lab-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chmod(workdir, 0o755)
    preload, preload_reason = build_preload(workdir)
    plan = scenarios.build(preload is not None)
    only = os.environ.get("SV_LAB_ONLY")
    if only:  # debugging: a subset (later scenarios may depend on earlier ones)
        plan = [s for s in plan if s["name"] in only.split(",")]
    plan_path = workdir / "plan.json"
    plan_path.write_text(json.dumps({"scenarios": plan}, indent=1))
    os.chmod(plan_path, 0o644)
    _bytecode()
    env = [
        f"export PYTHONPATH={REPO}",
        "export PYTHONDONTWRITEBYTECODE=1",
        f"export PATH={VM_PATH}",
        "unset SYSFS_PATH IBV_SHOW_WARNINGS RDMAV_DRIVERS IBV_DRIVERS LD_PRELOAD",
    ]
    if preload:
        env.append(f"export LD_PRELOAD={preload}")
    script = "\n".join(
        [
            f"cd {REPO}",
            *env,
            "echo VM-PYTHON-START",
            # -S: the site machinery (.pth files of the venv) costs many 9p round trips.
            f"{sys.executable} -S -m tests.kernel.vm_runner {plan_path} /run/vmout",
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


if __name__ == "__main__":  # manual use: python -m tests.kernel.lab [WORKDIR]
    lab = run_lab(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    print(f"{lab.seconds:.0f} s ({lab.accel}); results in {lab.workdir}")

"""Run the real libibverbs and sysverbs on the same tree, in private mount namespaces.

Each implementation gets its own copy of the tree, bind-mounted at the same path
so that every path string is identical, with that copy's ``dev/infiniband``
bind-mounted over ``/dev/infiniband`` (libibverbs stats the real /dev, not one
under SYSFS_PATH) and, optionally, a config directory over /etc/libibverbs.d.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from tests import staging

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROBE = HERE / "probe.py"
NETLINK_RDMA = 20

_SCRIPT = r"""
set -e
mount --bind "$ORACLE_SRC" "$ORACLE_DST"
mount --bind "$ORACLE_DST/dev/infiniband" /dev/infiniband
if [ -n "$ORACLE_CONF" ]; then mount --bind "$ORACLE_CONF" /etc/libibverbs.d; fi
if [ -n "$ORACLE_MEMLOCK" ]; then prlimit --pid $$ --memlock="$ORACLE_MEMLOCK"; fi
if [ -n "$ORACLE_SETPRIV" ]; then
  # shellcheck disable=SC2086
  exec setpriv $ORACLE_SETPRIV "$@"
fi
exec "$@"
"""


@dataclass(frozen=True)
class Run:
    """What one implementation printed."""

    returncode: int
    stdout: str
    stderr: bytes

    def results(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines()]


def unavailable_reason() -> Optional[str]:
    """Why the libibverbs oracle cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "the libibverbs oracle needs root (unshare -m and bind mounts)"
    for tool in ("unshare", "mount", "setpriv", "prlimit"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not ctypes.util.find_library("ibverbs"):
        return "libibverbs is not installed (apt-get install libibverbs1 ibverbs-providers)"
    try:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_RDMA)
    except OSError:
        pass
    else:
        s.close()
        return (
            "this host has RDMA netlink (ib_core loaded), so libibverbs ignores the "
            "fixture tree; run the oracle on a host without RDMA kernel support"
        )
    try:
        os.makedirs("/dev/infiniband", exist_ok=True)
    except OSError as e:
        return f"cannot create /dev/infiniband as a mount point: {e}"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True
    )
    if probe.returncode != 0:
        return f"unshare -m failed: {probe.stderr.decode(errors='replace').strip()}"
    return None


_SCRUB = ("SYSFS_PATH", "IBV_", "RDMAV_", "VERBS_", "MLX", "LD_PRELOAD")


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
    env["PYTHONPATH"] = str(REPO)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_in_ns(
    src: Path,
    dst: Path,
    argv: Sequence[str],
    *,
    env: Optional[Mapping[str, Optional[str]]] = None,
    config_dir: Optional[Path] = None,
    setpriv: Optional[str] = None,
    memlock: Optional[int] = None,
    sysfs_path: Optional[str] = None,
) -> Run:
    """Run argv in a private mount namespace with ``src`` mounted at ``dst``."""
    full = base_env()
    full["SYSFS_PATH"] = sysfs_path if sysfs_path is not None else str(dst / "sys")
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    full["ORACLE_SRC"] = str(src)
    full["ORACLE_DST"] = str(dst)
    full["ORACLE_CONF"] = str(config_dir) if config_dir else ""
    full["ORACLE_SETPRIV"] = setpriv or ""
    full["ORACLE_MEMLOCK"] = f"{memlock}:{memlock}" if memlock is not None else ""
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", _SCRIPT, "oracle", *argv]
    proc = subprocess.run(cmd, env=full, capture_output=True, timeout=120)
    return Run(proc.returncode, proc.stdout.decode(errors="surrogateescape"), proc.stderr)


def run_impl(
    impl: str,
    src: Path,
    dst: Path,
    steps: Sequence[Mapping[str, Any]],
    *,
    options: Optional[Mapping[str, Any]] = None,
    **kw: Any,
) -> Run:
    """Run a probe plan with one implementation ("libibverbs" or "sysverbs")."""
    plan = {"root": str(dst), "steps": list(steps), "options": dict(options or {})}
    # Another user may not enter this checkout (a clone under a 0700 directory): that
    # user runs a staged copy of the code (tests/staging.py).
    python, code = staging.python_and_code(bool(kw.get("setpriv")))
    argv = [python, str(code / PROBE.relative_to(REPO)), impl, json.dumps(plan)]
    kw["env"] = {"PYTHONPATH": str(code), **(kw.get("env") or {})}
    return run_in_ns(src, dst, argv, **kw)


def materialize_pair(tmp: Path, build: Callable[[Path], Any]) -> tuple[Path, Path, Path]:
    """Two copies of a tree (for libibverbs and for sysverbs) and the shared mount point."""
    tmp.mkdir(parents=True, exist_ok=True)
    os.chmod(tmp, 0o755)
    dst = tmp / "root"
    dst.mkdir(parents=True, exist_ok=True)
    os.chmod(dst, 0o755)
    copies = []
    for impl in ("libibverbs", "sysverbs"):
        src = tmp / impl
        src.mkdir()
        os.chmod(src, 0o755)
        build(src)
        (src / "dev/infiniband").mkdir(parents=True, exist_ok=True)
        copies.append(src)
    return copies[0], copies[1], dst


def compare(
    tmp: Path,
    build: Callable[[Path], Any],
    steps: Sequence[Mapping[str, Any]] = ({"op": "list"},),
    **kw: Any,
) -> tuple[Run, Run]:
    """Build the tree twice (one copy each), run both, return (libibverbs, sysverbs)."""
    real_src, ours_src, dst = materialize_pair(tmp, build)
    real = run_impl("libibverbs", real_src, dst, steps, **kw)
    ours = run_impl("sysverbs", ours_src, dst, steps, **kw)
    return real, ours


def assert_same(real: Run, ours: Run) -> None:
    """Every step's result and the stderr bytes must be identical."""
    assert real.returncode == 0, f"libibverbs probe failed: {real.stderr!r}"
    assert ours.returncode == 0, f"sysverbs probe failed: {ours.stderr.decode(errors='replace')}"
    assert ours.results() == real.results()
    assert ours.stderr == real.stderr

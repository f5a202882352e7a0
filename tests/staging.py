"""The checkout's code, staged where an unprivileged user can read it.

Several tests run something as uid 65534 (the oracle probes with ``setpriv``,
``sysverbs doctor`` as a user, the kernel lab's unprivileged workers).  A clone may lie
where that user cannot enter (root's own home, anything made by ``mktemp -d``: mode
0700), and nothing in the user's tree is made world-readable to help it.  So those
children run a copy of the code instead: :func:`stage` copies ``sysverbs/`` and the
Python files of ``tests/`` into a new directory that every user can read, below a
directory every user can search, once per process, and removes it at exit.

:func:`user_python` names an interpreter that uid 65534 can start: the running one if
it can, else the file it links to (a virtualenv's ``python`` inside a 0700 clone is a
link to the base interpreter).  The staged children need nothing but the standard
library and sysverbs itself.
"""

from __future__ import annotations

import atexit
import compileall
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534
#: ``setpriv``'s options that make uid/gid 65534 with no groups (harness.run_in_ns's
#: ``setpriv``), and the command that runs ``argv`` so.
SETPRIV_NOBODY = f"--reuid={NOBODY} --regid={NOBODY} --clear-groups"
AS_NOBODY = ["setpriv", *SETPRIV_NOBODY.split()]
#: What a staged copy holds: the package (with its data) and the tests' Python files.
_PACKAGE = "sysverbs"


class StagingError(RuntimeError):
    """No place or no interpreter for an unprivileged child (the message says why)."""


def searchable_by_others(path: Path) -> bool:
    """Whether other users reach ``path``: every directory from ``/`` down to it has
    the others' search bit (and ``path``, if a file, their read bit)."""
    path = path.resolve()
    try:
        mode = os.stat(path).st_mode
        if not mode & (stat.S_IXOTH if stat.S_ISDIR(mode) else stat.S_IROTH):
            return False
        return all(os.stat(p).st_mode & stat.S_IXOTH for p in path.parents)
    except OSError:
        return False


def _base_dir() -> Path:
    for candidate in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"):
        p = Path(candidate)
        if p.is_dir() and searchable_by_others(p) and os.access(p, os.W_OK):
            return p
    raise StagingError(
        "no temporary directory that every user can search (tried $TMPDIR, /tmp, "
        "/var/tmp, /dev/shm): the unprivileged tests cannot stage their code"
    )


def stage_into(dest: Path) -> Path:
    """Copy the code into ``dest`` (created), with bytecode, every directory 0755 and
    every file 0644; returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    os.chmod(dest, 0o755)
    for top, only_py in ((_PACKAGE, False), ("tests", True)):
        for dirpath, dirnames, filenames in os.walk(REPO / top):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rel = Path(dirpath).relative_to(REPO)
            (dest / rel).mkdir(exist_ok=True)
            for name in filenames:
                if not only_py or name.endswith(".py"):
                    shutil.copyfile(Path(dirpath) / name, dest / rel / name)
    try:  # sysverbs metrics' optional dependency (pure Python), for `metrics` as nobody
        import prometheus_client
    except ImportError:
        pass
    else:
        src = Path(prometheus_client.__file__).parent
        shutil.copytree(src, dest / src.name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(str(dest), quiet=1)
    for dirpath, dirnames, filenames in os.walk(dest):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)
    return dest


@functools.cache
def stage() -> Path:
    """This process's staged copy (made on first use, removed at exit)."""
    dest = Path(tempfile.mkdtemp(prefix="sysverbs-staged-", dir=_base_dir()))
    os.chmod(dest, 0o755)
    atexit.register(shutil.rmtree, dest, True)
    return stage_into(dest / "code")


def _runs_as_nobody(python: str) -> bool:
    try:
        proc = subprocess.run(
            [*AS_NOBODY, python, "-S", "-c", "import ctypes, json, socket"],
            capture_output=True, timeout=60, cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


@functools.cache
def user_python() -> str:
    """An interpreter uid 65534 can run (:class:`StagingError` if there is none)."""
    tried: list[str] = []
    for python in (sys.executable, os.path.realpath(sys.executable),
                   getattr(sys, "_base_executable", None)):
        if not python or python in tried:
            continue
        tried.append(python)
        if _runs_as_nobody(python):
            return python
    raise StagingError(
        f"uid {NOBODY} cannot start any of these interpreters: {', '.join(tried)} "
        "(the unprivileged tests need one outside a directory only root can enter)"
    )


def python_and_code(unprivileged: bool) -> tuple[str, Path]:
    """The interpreter and the code root (for PYTHONPATH) a child runs: this one and
    the checkout for root, :func:`user_python` and :func:`stage` for uid 65534."""
    if unprivileged:
        return user_python(), stage()
    return sys.executable, REPO


def user_env(extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    """A minimal environment for an unprivileged child that imports the staged code."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(stage()),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra or {})
    return env

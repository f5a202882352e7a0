"""A fork server that starts each probe as a fresh process in its own mount namespace.

    python -m tests.fuzz.zygote libibverbs|sysverbs

Starting a Python interpreter and importing the probe costs ~100 ms; forking a
process that has already imported them costs ~1 ms.  The server imports the
probe's modules (and, for sysverbs, the ``sysverbs`` package) but never calls
them: libibverbs is not even loaded (``ctypes.CDLL`` happens in the child), and
sysverbs keeps its process-wide state (the device list, SYSFS_PATH, init) only
from its first ``get_device_list`` call, which happens in the child.  So each
child is a fresh process as far as either library can tell; ``runner.py``'s
``exec`` mode (a new interpreter through ``unshare``, as tests/oracle/harness.py
does) is the cross-check.

Protocol (one JSON object per line on stdin): ``{"impl", "plan", "src", "dst",
"conf", "env", "out", "err", "user", "memlock"}``.  For each request the server
forks, answers ``pid <n>``, waits and answers ``rc <exit status>``.  The child:

1. ``unshare(CLONE_NEWNS)``, makes ``/`` private, binds ``src`` on ``dst``,
   ``dst/dev/infiniband`` on ``/dev/infiniband`` and ``conf`` (if any) on
   ``/etc/libibverbs.d`` (as the harness's shell script does);
2. sets ``RLIMIT_MEMLOCK``, the environment (exactly ``env``), stdout/stderr
   (files ``out``/``err``), the cwd (``/``) and the user (as ``setpriv`` would);
3. runs :func:`tests.fuzz.probe.run` and exits; or, when the request has ``"exec"``
   (an argv: the static probe, tests/oracle/static_probe.c), executes that program
   there instead, with the same mounts, limit, environment, files and user.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
import traceback
from typing import Any

from tests.fuzz import probe

CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
_libc.unshare.argtypes = [ctypes.c_int]

NOBODY = 65534


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _bind(src: str, dst: str) -> None:
    _check(_libc.mount(os.fsencode(src), os.fsencode(dst), None, MS_BIND, None), "mount")


def _child(req: dict[str, Any]) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    out = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (null, out, err):
        os.close(fd)
    _check(_libc.unshare(CLONE_NEWNS), "unshare")
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount private")
    _bind(req["src"], req["dst"])
    _bind(req["dst"] + "/dev/infiniband", "/dev/infiniband")
    if req.get("conf"):
        _bind(req["conf"], "/etc/libibverbs.d")
    if req.get("memlock") is not None:
        m = int(req["memlock"])
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (m, m))
    os.chdir("/")
    os.environ.clear()
    os.environ.update(req["env"])
    user = req.get("user", "root")
    if user == "nobody":  # setpriv --reuid=65534 --regid=65534 --clear-groups
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    elif user == "setuid":  # setpriv --ruid=65534
        os.setresuid(NOBODY, 0, 0)
    if req.get("exec"):
        argv = req["exec"]
        os.execve(argv[0], argv, dict(os.environ))
    with open(req["plan"], encoding="utf-8") as f:
        plan = json.load(f)
    probe.run(req["impl"], plan)


def preload(impl: str) -> None:
    """Import (never call) every module the probe might import later.

    A child that drops to uid 65534 may be unable to read the interpreter's own
    library (here Python lives under /root, mode 0700), so a lazy ``import`` in
    sysverbs would fail only in the fork server's children.  So every module that
    any ``import`` statement of sysverbs (or the probes) names is imported here,
    as a fork server preloads its classes.  Importing sets up no library state:
    sysverbs' process-wide state starts with the first ``get_device_list`` call.
    """
    import ast
    import importlib
    import importlib.util
    import sysconfig
    from pathlib import Path

    sysconfig.get_config_vars()  # loads _sysconfigdata_* (read by sysverbs.providers.table)
    repo = Path(__file__).resolve().parents[2]
    files = [repo / "tests/fuzz/probe.py", repo / "tests/oracle/probe.py"]
    if impl == "sysverbs":
        files += sorted(p for p in (repo / "sysverbs").rglob("*.py") if p.stem != "__main__")
    for path in files:
        parts = path.relative_to(repo).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if parts[-1] == "__init__" else module.rpartition(".")[0]
        names = [module]
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                try:
                    target = importlib.util.resolve_name(base, package) if node.level else base
                except ImportError:
                    continue
                names.append(target)
                names += [f"{target}.{a.name}" for a in node.names]  # submodules
        for name in names:
            if name == "__future__" or (impl != "sysverbs" and name.startswith("sysverbs")):
                continue
            try:
                importlib.import_module(name)
            except ImportError:
                pass  # not a module (a name in one), or an optional dependency


def serve(impl: str) -> None:
    preload(impl)
    for line in sys.stdin:
        req = json.loads(line)
        req["impl"] = impl
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _child(req)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = 1
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        sys.stdout.write(f"pid {pid}\n")
        sys.stdout.flush()
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(f"rc {os.waitstatus_to_exitcode(status)}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve(sys.argv[1])

"""The real STATIC libibverbs as an oracle: tests/oracle/static_probe.c linked with
``gcc -static`` against Debian's libibverbs.a and librdmacm.a (libibverbs-dev,
librdmacm-dev), run on a tree in a private mount namespace (:func:`harness.run_in_ns`).

In a static program the providers are the ones linked in: the program names them at
compile time with ``-DRDMA_STATIC_PROVIDERS=a,b`` (``all``: every provider of the
build; ``none``: none), which makes its ``ibv_get_device_list`` reference
``verbs_provider_a``...  :func:`build` compiles one variant and keeps the binary on
disk, once per machine, in a directory named by the SHA-256 of the source, the
compiler's flags and pkg-config's link line (``/var/cache/sysverbs-test/static-probes``
for root, ``~/.cache/sysverbs-test/static-probes`` for anyone else, like the
Makefile's NCCL cache).  A name that is not a provider does not build:
:func:`build_error` returns what gcc said.  The link line is pkg-config's own
(``pkg-config --static --libs libibverbs librdmacm``): it names libibverbs.a after
the provider archives and again after them, so ``all`` links with it too
(/work/notes/static-findings.md; tests/test_static_probe_build.py).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from tests.oracle import harness

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "static_probe.c"
#: What SOURCE includes from this directory (part of every binary's key).
HEADERS = (HERE / "static_tree.h",)
BINARY = "static_probe"
CFLAGS = ("-O2", "-Wall")
#: The packages whose archives and headers the build needs.
PACKAGES = ("libibverbs", "librdmacm")


class StaticBuildError(RuntimeError):
    """gcc failed; the message is its output."""


def cache_root() -> Path:
    """Where the binaries are kept (one directory per variant below it)."""
    if os.geteuid() == 0:
        return Path("/var/cache/sysverbs-test/static-probes")
    return Path.home() / ".cache" / "sysverbs-test" / "static-probes"


def _pkg_config(*args: str) -> list[str]:
    proc = subprocess.run(["pkg-config", *args, *PACKAGES], capture_output=True, text=True)
    if proc.returncode != 0:
        raise StaticBuildError(f"pkg-config {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.split()


@functools.cache
def link_line() -> tuple[str, ...]:
    """``pkg-config --static --libs libibverbs librdmacm``, word by word."""
    return tuple(_pkg_config("--static", "--libs"))


@functools.cache
def include_flags() -> tuple[str, ...]:
    return tuple(_pkg_config("--static", "--cflags"))


def unavailable_reason() -> Optional[str]:
    """Why the static oracle cannot run here (None when it can)."""
    reason = harness.unavailable_reason()
    if reason is not None:
        return reason
    for tool in ("gcc", "pkg-config"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    exists = subprocess.run(["pkg-config", "--exists", *PACKAGES], capture_output=True)
    if exists.returncode != 0:
        return "libibverbs-dev and librdmacm-dev are not installed (pkg-config knows neither)"
    libdir = subprocess.run(["pkg-config", "--variable=libdir", "libibverbs"],
                            capture_output=True, text=True).stdout.strip()
    for archive in ("libibverbs.a", "librdmacm.a", "libnl-3.a", "libnl-route-3.a"):
        if not (Path(libdir) / archive).is_file():
            return f"{libdir}/{archive} is missing (apt-get install libibverbs-dev " \
                   "librdmacm-dev libnl-3-dev libnl-route-3-dev)"
    try:
        build(None)
    except (StaticBuildError, OSError) as e:
        return f"the static probe does not build: {e}"
    return None


def compile_argv(defines: Optional[str], out: Path, *, no_ibv_call: bool = False) -> list[str]:
    """The gcc command for one variant (``defines`` None: no RDMA_STATIC_PROVIDERS at
    all; any string, the empty one included: ``-DRDMA_STATIC_PROVIDERS=<defines>``)."""
    flags = list(CFLAGS)
    if defines is not None:
        flags.append(f"-DRDMA_STATIC_PROVIDERS={defines}")
    if no_ibv_call:
        flags.append("-DPROBE_NO_IBV_CALL")
    return ["gcc", "-static", *flags, *include_flags(), "-o", str(out), str(SOURCE),
            *link_line()]


@functools.cache
def _archives() -> str:
    """The archives' sizes and times: a library upgraded under the same link line
    makes new binaries."""
    libdir = Path(_pkg_config("--variable=libdir")[0])
    stats = []
    for name in sorted({w[2:] for w in link_line() if w.startswith("-l")}):
        archive = libdir / f"lib{name}.a"
        if archive.is_file():
            st = archive.stat()
            stats.append(f"{archive.name} {st.st_size} {st.st_mtime_ns}")
    return "\n".join(stats)


def _key(defines: Optional[str], no_ibv_call: bool) -> str:
    """SHA-256 of the source and its header, the gcc command and the link line (in it),
    the archives."""
    h = hashlib.sha256()
    for path in (SOURCE, *HEADERS):
        h.update(path.read_bytes() + b"\0")
    h.update(b"\0" + repr(compile_argv(defines, Path("OUT"), no_ibv_call=no_ibv_call)).encode())
    h.update(b"\0" + _archives().encode())
    return h.hexdigest()


def _compile(
    defines: Optional[str], out: Path, no_ibv_call: bool
) -> subprocess.CompletedProcess[str]:
    # LC_ALL=C: gcc's messages in ASCII quotes ('verbs_provider_foo'), the same everywhere.
    env = {**os.environ, "LC_ALL": "C"}
    return subprocess.run(compile_argv(defines, out, no_ibv_call=no_ibv_call),
                          capture_output=True, text=True, timeout=300, env=env)


def build(defines: Optional[str], *, no_ibv_call: bool = False) -> Path:
    """The binary of one variant, compiled once per machine (see the module docstring)."""
    final = cache_root() / _key(defines, no_ibv_call)
    binary = final / BINARY
    if binary.is_file():
        return binary
    cache_root().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=cache_root()))
    try:
        proc = _compile(defines, work / BINARY, no_ibv_call)
        if proc.returncode != 0:
            raise StaticBuildError(proc.stdout + proc.stderr)
        (work / "command").write_text(
            " ".join(compile_argv(defines, final / BINARY, no_ibv_call=no_ibv_call)) + "\n")
        os.chmod(work, 0o755)  # the unprivileged runs (setpriv) start it too
        try:
            os.rename(work, final)
        except OSError:
            if not binary.is_file():  # not another process's build that won the race
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


def build_error(defines: Optional[str], *, no_ibv_call: bool = False) -> str:
    """What gcc prints when this variant is built ("" when it builds)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = _compile(defines, Path(tmp) / BINARY, no_ibv_call)
    return "" if proc.returncode == 0 else proc.stdout + proc.stderr


def run(
    binary: Path,
    src: Path,
    dst: Path,
    ops: Sequence[str],
    *,
    env: Optional[Mapping[str, Optional[str]]] = None,
    **kw: Any,
) -> harness.Run:
    """``binary OP...`` on the tree ``src`` mounted at ``dst`` (SYSFS_PATH=dst/sys;
    the tree changes' paths are relative to ``dst``)."""
    full = {"STATIC_PROBE_ROOT": str(dst), **(env or {})}
    return harness.run_in_ns(src, dst, [str(binary), *ops], env=full, **kw)


#: The operations that take arguments, and the probe.py step keys those are, in order.
ARGS: dict[str, tuple[str, ...]] = {
    "free": ("list",), "rdma_free": ("list",), "open": ("list", "device"),
    "write": ("path", "data"), "remove": ("path",), "touch": ("path", "seconds"),
    "symlink": ("path", "target"), "mkdir": ("path",), "rename": ("path", "to"),
    "utime": ("path", "like"), "chmod": ("path", "mode"), "mknod": ("path", "major", "minor"),
}
_NUMBERS = ("list", "device", "seconds", "major", "minor")


def plan_steps(ops: Sequence[str]) -> list[dict[str, Any]]:
    """The probe.py/rdmacm_probe.py steps of the static probe's ``ops``."""
    steps: list[dict[str, Any]] = []
    it = iter(ops)
    for op in it:
        step: dict[str, Any] = {"op": op}
        for key in ARGS.get(op, ()):
            word = next(it)
            step[key] = int(word) if key in _NUMBERS else word
        steps.append(step)
    return steps


def plan_ops(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """The static probe's operations for probe.py steps (the inverse of
    :func:`plan_steps`; ``touch`` with probe.py's default of 1 second).  A path that is
    not UTF-8 stays a ``str`` with surrogate escapes, which subprocess and os.execv
    give the program as the original bytes."""
    out: list[str] = []
    for step in steps:
        out.append(step["op"])
        for key in ARGS.get(step["op"], ()):
            value = step.get(key, 1 if key == "seconds" else None)
            if value is None:
                raise ValueError(f"{step['op']} step without {key!r}: {step}")
            out.append(str(value))
    return out

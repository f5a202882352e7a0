"""NCCL_IB_HCA's InfiniBand side against the real NCCL: only on a machine with a GPU.

Not collected by the suite (its name is not ``test_*.py``): ``make device-check``
runs it on a machine with an NVIDIA GPU and a driver, where the real NCCL can build a
communicator.  Without a GPU, NCCL never starts its IB transport (``ncclCommInitRank``
needs CUDA; no exported function reaches ``ncclIbInitDevices``), so the suite's NCCL
oracle (tests/test_nccl_oracle.py) sees only the socket side; docs/nccl.md, "Proof",
says which rules rest on which.

For each NCCL_IB_HCA value built from this host's RDMA ports (none, each device, each
device:port, ``^`` and ``=`` forms, a prefix, an unknown name), a child process loads
libnccl, builds a one-rank communicator with ``NCCL_DEBUG=INFO`` and prints NCCL's
log; the test compares NCCL's ``NET/IB : Using ...`` (or ``No device found.``) line up
to ``; OOB`` with ``sysverbs.rank.nccl.predict_ib(env).lines()`` for the release loaded.
On a host with no RDMA device this still checks the no-device lines.

libnccl: ``$SYSVERBS_NCCL_LIB``, else the ``nvidia.nccl`` package of the interpreter
(``nvidia/**/lib/libnccl.so.2`` on ``sys.path``: PyTorch's CUDA wheels bring
it), else the test cache of ``make nccl-oracle``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from sysverbs.rank import nccl

_CHILD = r"""
import ctypes, sys
class UniqueId(ctypes.Structure):  # ncclUniqueId: char internal[128], passed by value
    _fields_ = [("internal", ctypes.c_char * 128)]
lib = ctypes.CDLL(sys.argv[1])
lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId,
                                 ctypes.c_int]
uid = UniqueId()
assert lib.ncclGetUniqueId(ctypes.byref(uid)) == 0, "ncclGetUniqueId failed"
comm = ctypes.c_void_p()
rc = lib.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0)
print("\nDEVICE-CHECK-RC", rc, flush=True)
if rc == 0:
    lib.ncclCommDestroy(comm)
"""

_LINE = re.compile(r"NCCL INFO (NET/IB : (?:Using.*|No device found\.))$")


def _library() -> Optional[str]:
    env = os.environ.get("SYSVERBS_NCCL_LIB")
    if env:
        return env
    for entry in sys.path:  # nvidia-nccl-cu12/cu13 wheels: site-packages/nvidia/.../lib
        if entry and os.path.isdir(os.path.join(entry, "nvidia")):
            found = sorted(Path(entry, "nvidia").glob("**/lib/libnccl.so.2"))
            if found:
                return str(found[0])
    from tests.oracle import nccl as oracle

    return oracle.library()


def _gpu_reason() -> Optional[str]:
    gpus = "/proc/driver/nvidia/gpus"
    if os.path.exists("/dev/nvidia0") or (os.path.isdir(gpus) and os.listdir(gpus)):
        return None
    return f"no NVIDIA GPU (no /dev/nvidia0, {gpus} empty or missing)"


@pytest.fixture(scope="module")
def library() -> str:
    reason = _gpu_reason()
    if reason:
        pytest.fail(f"make device-check needs a GPU machine: {reason}")
    lib = _library()
    if lib is None:
        pytest.fail("no libnccl.so.2 (set SYSVERBS_NCCL_LIB, or install nvidia-nccl-cu12)")
    return lib


def _version(lib: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import ctypes,sys; v=ctypes.c_int(); "
         "ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v)); print(v.value)", lib],
        capture_output=True, text=True, timeout=60, check=True)
    code = int(out.stdout)
    major, rest = divmod(code, 10000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def _values() -> list[Optional[str]]:
    try:
        ports = nccl.host_ports()
    except OSError:  # no RDMA here (ENOSYS): NCCL's no-device lines are still checked
        ports = []
    names = sorted({p.device for p in ports})
    values: list[Optional[str]] = [None, "no_such_device", "^no_such_device"]
    for p in ports:
        values += [p.device, f"={p.device}", f"^{p.device}", f"{p.device}:{p.port}",
                   f"={p.device}:{p.port}"]
    if names:
        values += [names[0].rstrip("0123456789"), ",".join(names), "=" + ",".join(names[:2])]
    return list(dict.fromkeys(values))


def _nccl_lines(lib: str, value: Optional[str]) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET")
    if value is not None:
        env["NCCL_IB_HCA"] = value
    proc = subprocess.run([sys.executable, "-c", _CHILD, lib], capture_output=True,
                          text=True, env=env, timeout=300)
    assert "DEVICE-CHECK-RC 0" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = [m.group(1) for line in (proc.stdout + proc.stderr).splitlines()
             if (m := _LINE.search(line))]
    return [line.split("; OOB")[0].rstrip() for line in found]


@pytest.mark.parametrize("value", _values())
def test_using_line_is_nccls(library: str, value: Optional[str]) -> None:
    env = {} if value is None else {"NCCL_IB_HCA": value}
    version = _version(library)
    want = [line.split("; OOB")[0].rstrip()
            for line in nccl.predict_ib(env, nccl_version=version).lines()]
    got = _nccl_lines(library, value)
    assert got == want, json.dumps({"NCCL_IB_HCA": value, "nccl": version,
                                    "real": got, "sysverbs": want}, indent=1)

"""The memory policy of the calling thread, by the ``set_mempolicy(2)`` and
``get_mempolicy(2)`` system calls from Python (ctypes; no libnuma, no numactl), and
the CPU affinity (``os.sched_getaffinity``/``os.sched_setaffinity``, or glibc's
functions of those names where Python lacks them: PyPy 3.9 does).

The policy is the thread's own: it survives ``execve(2)`` and is inherited by the
threads and processes the thread creates (set_mempolicy(2)), so ``sysverbs run`` sets
it in its one thread just before it ``exec``s the command.

>>> before = get_mempolicy()
>>> set_mempolicy(MPOL_PREFERRED, [0])
>>> MODE_NAMES[get_mempolicy()[0]], sorted(get_mempolicy()[1])
('preferred', [0])
>>> set_mempolicy(*before)
"""

from __future__ import annotations

import os
import platform

from ..ground.errors import BindingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional

__all__ = ["MPOL_BIND", "MPOL_DEFAULT", "MPOL_PREFERRED", "MPOL_PREFERRED_MANY", "MODE_NAMES",
           "get_affinity", "get_mempolicy", "set_affinity", "set_mempolicy"]

#: include/uapi/linux/mempolicy.h
MPOL_DEFAULT, MPOL_PREFERRED, MPOL_BIND, MPOL_PREFERRED_MANY = 0, 1, 2, 5
#: The policies as ``numactl --show`` names them.
MODE_NAMES = {0: "default", 1: "preferred", 2: "bind", 3: "interleave", 4: "local",
              5: "preferred-many", 6: "weighted-interleave"}
#: (set_mempolicy, get_mempolicy) by ``platform.machine()``: x86_64 from
#: arch/x86/entry/syscalls/syscall_64.tbl, the others use asm-generic/unistd.h (both
#: as Debian 12's linux-libc-dev installs them).  Elsewhere: ENOSYS, said clearly.
SYSCALLS = {"x86_64": (238, 239), "aarch64": (237, 236), "arm64": (237, 236),
            "riscv64": (237, 236), "loongarch64": (237, 236)}
_BITS = 64  # a C unsigned long on the 64-bit machines above
_MAX_NODES = 1024  # the mask get_mempolicy fills (the kernel's MAX_NUMNODES is lower)


def _call(index: int, what: str, *args: object) -> int:
    import ctypes

    numbers = SYSCALLS.get(platform.machine())
    if numbers is None:
        raise BindingError(f"{what}: sysverbs does not know its system call number on "
                           f"{platform.machine()} (it knows {', '.join(sorted(SYSCALLS))})",
                           38)  # ENOSYS
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ret = int(libc.syscall(ctypes.c_long(numbers[index]), *args))
    if ret < 0:
        err = ctypes.get_errno()
        why = os.strerror(err)
        hint = (" (a seccomp filter refuses it: Docker's default profile does unless the "
                "container has CAP_SYS_NICE)" if err == 1 else "")
        raise BindingError(f"the kernel refused {what}: [Errno {err}] {why}{hint}", err)
    return ret


def set_mempolicy(mode: int, nodes: Iterable[int] = ()) -> None:
    """Set the calling thread's memory policy (``MPOL_DEFAULT`` with no nodes,
    ``MPOL_PREFERRED`` with one, ``MPOL_BIND`` or ``MPOL_PREFERRED_MANY`` (Linux 5.15)
    with one or more);
    :class:`~sysverbs.ground.errors.BindingError` with the kernel's errno when it refuses."""
    import ctypes

    wanted = sorted(set(nodes))
    if any(n < 0 or n >= _MAX_NODES for n in wanted):
        raise BindingError(f"node numbers must be 0 to {_MAX_NODES - 1}: {wanted}")
    words = (wanted[-1] // _BITS + 1) if wanted else 1
    mask = (ctypes.c_ulong * words)()
    for n in wanted:
        mask[n // _BITS] |= 1 << (n % _BITS)
    # maxnode: the kernel reads maxnode - 1 bits (mm/mempolicy.c get_nodes)
    what = f"set_mempolicy({MODE_NAMES.get(mode, mode)}, nodes {wanted or 'none'})"
    _call(0, what, ctypes.c_int(mode), mask if wanted else None,
          ctypes.c_ulong(words * _BITS + 1 if wanted else 0))


def get_mempolicy() -> tuple[int, frozenset[int]]:
    """The calling thread's policy mode and its nodes (``MODE_NAMES`` names the mode)."""
    import ctypes

    mode = ctypes.c_int(0)
    words = _MAX_NODES // _BITS
    mask = (ctypes.c_ulong * words)()
    _call(1, "get_mempolicy", ctypes.byref(mode), mask, ctypes.c_ulong(_MAX_NODES),
          None, ctypes.c_ulong(0))
    nodes = frozenset(w * _BITS + b for w in range(words) for b in range(_BITS)
                      if mask[w] >> b & 1)
    return mode.value, nodes


_AFFINITY_BYTES = 1024  # a cpu_set_t of 8192 CPUs (the kernel's NR_CPUS is at most that)


def _libc_affinity(name: str, tid: int, cpus: Optional[Iterable[int]]) -> frozenset[int]:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    mask = (ctypes.c_ubyte * _AFFINITY_BYTES)()
    if cpus is not None:
        for c in cpus:
            if not 0 <= c < _AFFINITY_BYTES * 8:
                raise OSError(22, f"CPU {c} is out of range")
            mask[c // 8] |= 1 << (c % 8)
    func = getattr(libc, name)
    if func(ctypes.c_int(tid), ctypes.c_size_t(_AFFINITY_BYTES), mask) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return frozenset(i * 8 + b for i in range(_AFFINITY_BYTES) for b in range(8)
                     if mask[i] >> b & 1)


def get_affinity(tid: int = 0) -> frozenset[int]:
    """The CPUs thread ``tid`` (0: the calling one) may run on."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is not None:
        return frozenset(getter(tid))
    return _libc_affinity("sched_getaffinity", tid, None)


def set_affinity(tid: int, cpus: Iterable[int]) -> None:
    """Bind thread ``tid`` (0: the calling one) to ``cpus``; ``OSError`` with the
    kernel's errno when it refuses (EINVAL: none of them is allowed)."""
    setter = getattr(os, "sched_setaffinity", None)
    if setter is not None:
        setter(tid, set(cpus))
        return
    _libc_affinity("sched_setaffinity", tid, list(cpus))

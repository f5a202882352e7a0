"""RLIMIT_MEMLOCK against what RDMA jobs need: libibverbs' own floor, and NCCL's and UCX's.

Registering memory (``ibv_reg_mr``) pins it, and the kernel counts pinned pages against
the soft RLIMIT_MEMLOCK unless the process has ``CAP_IPC_LOCK``.  Three findings:

* ``memlock``: at most 32768 bytes, where libibverbs itself warns (``init.c``) and
  registration fails at once (for a non-root caller, libibverbs' rule);
* ``no_ipc_lock``: root without ``CAP_IPC_LOCK`` (Docker's default capabilities drop it)
  and a finite limit: libibverbs trusts root and says nothing, yet the kernel counts
  every registered page against the limit (``ibv_reg_mr`` fails with EPERM/ENOMEM past
  it, as ``ibv_rc_pingpong -s`` shows in the kernel lab);
* ``memlock_low``: any other finite limit, for a process without ``CAP_IPC_LOCK``.  NCCL's
  and UCX's documentation ask for ``ulimit -l unlimited``; NCCL registers its network
  buffers of ``NCCL_BUFFSIZE`` bytes (4 MiB by default) for each channel of each
  connection, so a job of a few peers and channels pins hundreds of MiB, past a limit
  like Debian's default of 8 MiB (``ulimit -l`` 8192 here).  No finite figure is
  documented as enough, so the threshold is the documented one: unlimited.

:func:`memlock_finding` is the pure rule; :func:`current` reads this process's limit.

>>> memlock_finding(None, ipc_lock=False) is None
True
>>> memlock_finding(8 * 1024 * 1024, ipc_lock=True) is None
True
>>> memlock_finding(8 * 1024 * 1024, ipc_lock=False)[0]
'memlock_low'
"""

from __future__ import annotations

import os
from typing import Optional

__all__ = ["IBV_MEMLOCK_FLOOR", "NCCL_BUFFSIZE", "current", "memlock_finding",
           "registration_verdict"]

#: libibverbs warns at this soft limit or below (``init.c: ibverbs_init``).
IBV_MEMLOCK_FLOOR = 32768
#: NCCL's default ``NCCL_BUFFSIZE`` (NCCL's environment variables documentation).
NCCL_BUFFSIZE = 4 * 1024 * 1024
_CAP_IPC_LOCK = 14


def _mib(n: int) -> str:
    return f"{n} bytes ({n / 1048576:g} MiB)" if n >= 1048576 else f"{n} bytes"


def registration_verdict(soft: int) -> str:
    """What a soft limit of ``soft`` bytes lets NCCL register: less than one of its
    buffers (the first registration fails), or how many of them."""
    if soft < NCCL_BUFFSIZE:
        return (f"less than one NCCL buffer ({_mib(NCCL_BUFFSIZE)}): NCCL's and UCX's first "
                "large registration fails")
    return (f"{soft // NCCL_BUFFSIZE} NCCL buffers of {_mib(NCCL_BUFFSIZE)}, one per "
            "channel of each connection")


def memlock_finding(soft: Optional[int], *, ipc_lock: bool, root: bool = False
                    ) -> Optional[tuple[str, str]]:
    """``(code, message)`` for a soft RLIMIT_MEMLOCK of ``soft`` bytes (None: unlimited,
    -1: unreadable, said by nobody), or None when it is enough.  ``ipc_lock``: the process has
    ``CAP_IPC_LOCK`` (the limit does not apply); ``root``: euid 0 (libibverbs does not
    warn)."""
    fix = ("raise it (ulimit -l unlimited, /etc/security/limits.conf, LimitMEMLOCK=infinity "
           "in a systemd unit, or docker run --ulimit memlock=-1)")
    if soft is None or soft < 0:  # unlimited, or unreadable (libibverbs says nothing)
        return None
    if soft <= IBV_MEMLOCK_FLOOR and not root:  # libibverbs' rule, capabilities aside
        return ("memlock", f"RLIMIT_MEMLOCK is {soft} bytes, so memory registration will "
                f"fail: {fix}.")
    if ipc_lock:
        return None
    if root:
        return ("no_ipc_lock",
                f"This process runs as root without CAP_IPC_LOCK (a container's default "
                "capabilities drop it): libibverbs does not warn, yet every registered page "
                f"counts against RLIMIT_MEMLOCK, {_mib(soft)}, {registration_verdict(soft)}: "
                "add the capability (docker run --cap-add=IPC_LOCK; Kubernetes: "
                f"securityContext.capabilities.add IPC_LOCK) or {fix}.")
    return ("memlock_low",
            f"RLIMIT_MEMLOCK is {_mib(soft)} and this process has no CAP_IPC_LOCK: NCCL and "
            "UCX ask for unlimited (NCCL registers NCCL_BUFFSIZE, "
            f"{_mib(NCCL_BUFFSIZE)} by default, for each channel of each connection; this "
            f"limit holds {registration_verdict(soft)}), so their jobs can fail to register "
            f"memory: {fix}.")


def _has_ipc_lock() -> bool:
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_IPC_LOCK & 1)
    except (OSError, ValueError, IndexError):
        pass
    return os.geteuid() == 0  # no /proc: root's capabilities are taken for granted


def current() -> Optional[tuple[str, str]]:
    """:func:`memlock_finding` for this process."""
    import resource

    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (OSError, ValueError):
        soft = -1
    limit = None if soft == resource.RLIM_INFINITY else int(soft)
    return memlock_finding(limit, ipc_lock=_has_ipc_lock(), root=os.geteuid() == 0)

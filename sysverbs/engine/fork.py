"""``ibv_fork_init()`` and ``ibv_is_fork_initialized()`` (``verbs.c``, ``memory.c``;
docs/behaviour.md: Fork).

sysverbs registers no memory, so fork safety changes nothing it does; the state
is kept because programs read it, and because libibverbs' first list call turns
it on from ``RDMAV_FORK_SAFE``/``IBV_FORK_SAFE``.

>>> import sysverbs
>>> sysverbs.is_fork_initialized() in (sysverbs.ForkStatus.DISABLED, sysverbs.ForkStatus.ENABLED)
True
"""

from __future__ import annotations

import enum
import errno
import mmap
import os
import threading
from collections.abc import Mapping

__all__ = ["ForkStatus", "fork_init", "is_fork_initialized", "fork_env_requested"]


class ForkStatus(enum.IntEnum):
    """``enum ibv_fork_status``."""

    DISABLED = 0
    ENABLED = 1
    UNNEEDED = 2


_lock = threading.Lock()
_enabled = False
_huge_pages = False


def _kernel_copy_on_fork() -> bool:
    """Whether the kernel reports copy-on-fork over RDMA netlink (never without netlink)."""
    from ..sources.netlink import queries as netlink_source

    query = getattr(netlink_source, "query_copy_on_fork", None)
    if query is None:
        return False
    try:
        return bool(query())
    except OSError:
        return False


def fork_init() -> int:
    """``ibv_fork_init()``: returns 0; raises OSError with the code libibverbs returns.

    ``RDMAV_HUGEPAGES_SAFE`` (present, any value) is noted on every call, as in
    libibverbs; it only changes page sizing of memory registrations, which
    sysverbs does not do.  The copy-on-fork short cut of rdma-core 51+ needs RDMA
    netlink; without it the madvise(MADV_DONTFORK) probe decides, as libibverbs.
    """
    global _enabled, _huge_pages
    with _lock:
        if "RDMAV_HUGEPAGES_SAFE" in os.environ:
            _huge_pages = True
        if _enabled:
            return 0
        if _kernel_copy_on_fork():
            return 0
        try:
            page = mmap.mmap(-1, mmap.PAGESIZE)
        except OSError:
            raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM)) from None
        try:
            page.madvise(mmap.MADV_DONTFORK)
            page.madvise(mmap.MADV_DOFORK)
        except (OSError, AttributeError):
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS)) from None
        finally:
            page.close()
        _enabled = True
        return 0


def is_fork_initialized() -> ForkStatus:
    """``ibv_is_fork_initialized()``."""
    if _kernel_copy_on_fork():
        return ForkStatus.UNNEEDED
    return ForkStatus.ENABLED if _enabled else ForkStatus.DISABLED


def fork_env_requested(env: Mapping[str, str]) -> bool:
    """``RDMAV_FORK_SAFE`` or ``IBV_FORK_SAFE`` set to anything but ``"0"`` (empty counts)."""
    return any(env.get(k) not in (None, "0") for k in ("RDMAV_FORK_SAFE", "IBV_FORK_SAFE"))

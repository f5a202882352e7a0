"""pyverbs' ``fork``: ``fork_init()`` and ``is_fork_initialized()``
(:func:`sysverbs.fork_init` and :func:`sysverbs.is_fork_initialized` underneath).

>>> from sysverbs.compat.pyverbs import fork
>>> fork.is_fork_initialized() in (0, 1, 2), type(fork.is_fork_initialized()).__name__
(True, 'int')
"""

from __future__ import annotations

from ...engine.fork import fork_init as ibv_fork_init
from ...engine.fork import is_fork_initialized as ibv_is_fork_initialized
from ...ground.errors import PyverbsRDMAError

__all__ = ["fork_init", "is_fork_initialized"]


def fork_init() -> None:
    """``ibv_fork_init()``; where it fails, :class:`PyverbsRDMAError`
    ``"Failed to init fork support"`` with its code, as pyverbs."""
    try:
        ibv_fork_init()
    except OSError as e:
        code = -1 if e.errno is None else e.errno
        raise PyverbsRDMAError("Failed to init fork support", code) from e


def is_fork_initialized() -> int:
    """``ibv_is_fork_initialized()`` as a plain int, as pyverbs returns it: 0 disabled,
    1 enabled, 2 unneeded (:class:`~sysverbs.compat.pyverbs.enums.ibv_fork_status`)."""
    return int(ibv_is_fork_initialized())

"""The public import path of :mod:`sysverbs.engine.fork` (the code is there).

``ibv_fork_init()`` and ``ibv_is_fork_initialized()`` as libibverbs gives them
(docs/behaviour.md).
"""

from .engine.fork import *  # noqa: F403
from .engine.fork import __all__ as __all__

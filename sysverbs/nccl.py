"""The public import path of :mod:`sysverbs.rank.nccl` (the code is there).

NCCL's device filters and device choice, exactly as NCCL reads them (docs/nccl.md).
"""

from .rank.nccl import *  # noqa: F403
from .rank.nccl import __all__ as __all__

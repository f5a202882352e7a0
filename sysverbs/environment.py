"""The public import path of :mod:`sysverbs.rank.environment` (the code is there).

The environment for one rank: NCCL's and UCX's variables, and NCCL's GID index.
"""

from .rank.environment import *  # noqa: F403
from .rank.environment import __all__ as __all__

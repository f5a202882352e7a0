"""The public import path of :mod:`sysverbs.rank.launch` (the code is there).

Start a rank on its CPUs, memory node and NICs: :func:`plan` and :class:`Plan`.
"""

from .rank.launch import *  # noqa: F403
from .rank.launch import __all__ as __all__

"""The public import path of :mod:`sysverbs.ground.enums` (the code is there).

libibverbs' enums, with the same numeric values as ``<infiniband/verbs.h>``.
"""

from .ground.enums import *  # noqa: F403
from .ground.enums import __all__ as __all__

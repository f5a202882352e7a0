"""The public import path of :mod:`sysverbs.ground.errors` (the code is there).

Every exception and warning class of sysverbs, one base per kind.
"""

from .ground.errors import *  # noqa: F403
from .ground.errors import __all__ as __all__

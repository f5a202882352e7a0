"""The public import path of :mod:`sysverbs.devices.enrich` (the code is there).

What udev knows about a device beyond libibverbs' fields.
"""

from .devices.enrich import *  # noqa: F403
from .devices.enrich import __all__ as __all__

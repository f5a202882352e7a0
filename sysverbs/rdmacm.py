"""The public import path of :mod:`sysverbs.devices.rdmacm` (the code is there).

librdmacm's device list, ``rdma_get_devices()``.
"""

from .devices.rdmacm import *  # noqa: F403
from .devices.rdmacm import __all__ as __all__

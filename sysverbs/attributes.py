"""The public import path of :mod:`sysverbs.devices.attributes` (the code is there).

What sysfs says about an RDMA device and its ports, typed and parsed carefully.
"""

from .devices.attributes import *  # noqa: F403
from .devices.attributes import __all__ as __all__

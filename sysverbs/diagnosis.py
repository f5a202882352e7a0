"""The public import path of :mod:`sysverbs.devices.diagnosis` (the code is there).

Why is my RDMA device missing? One answer per device the kernel shows.
"""

from .devices.diagnosis import *  # noqa: F403
from .devices.diagnosis import __all__ as __all__

"""The public import path of :mod:`sysverbs.devices.topology` (the code is there).

Where an RDMA device sits: its PCI function, auxiliary device, netdevs and character
devices.
"""

from .devices.topology import *  # noqa: F403
from .devices.topology import __all__ as __all__

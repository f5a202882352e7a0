"""The public import path of :mod:`sysverbs.rank.environment` (the code is there).

The environment for one rank: NCCL_IB_HCA, UCX_NET_DEVICES, NCCL_SOCKET_IFNAME and
"""

from .rank.environment import *  # noqa: F403
from .rank.environment import __all__ as __all__

"""pyverbs' ``enums`` for discovery: ``ibv_node_type``, ``ibv_transport_type`` and
``ibv_fork_status``, with their members also as module constants, as in rdma-core 44's
``pyverbs.enums`` (``IntEnum`` classes with the C names and values).

>>> from sysverbs.compat.pyverbs import enums
>>> enums.IBV_NODE_RNIC, int(enums.IBV_TRANSPORT_IWARP), enums.ibv_node_type(1).name
(<ibv_node_type.IBV_NODE_RNIC: 4>, 1, 'IBV_NODE_CA')

The values are those of :class:`sysverbs.ground.enums.NodeType`,
:class:`sysverbs.ground.enums.TransportType` and :class:`sysverbs.ForkStatus`, except that
pyverbs has no ``IBV_TRANSPORT_UNSPECIFIED`` (4).  pyverbs' other constants (access
flags, QP states, work completion codes...) are about opened devices: importing one
raises :class:`~sysverbs.ground.errors.OutOfScopeError`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, NoReturn

from ._scope import out_of_scope

__all__ = [
    "ibv_node_type", "ibv_transport_type", "ibv_fork_status",
    "IBV_NODE_UNKNOWN", "IBV_NODE_CA", "IBV_NODE_SWITCH", "IBV_NODE_ROUTER",
    "IBV_NODE_RNIC", "IBV_NODE_USNIC", "IBV_NODE_USNIC_UDP", "IBV_NODE_UNSPECIFIED",
    "IBV_TRANSPORT_UNKNOWN", "IBV_TRANSPORT_IB", "IBV_TRANSPORT_IWARP",
    "IBV_TRANSPORT_USNIC", "IBV_TRANSPORT_USNIC_UDP",
    "IBV_FORK_DISABLED", "IBV_FORK_ENABLED", "IBV_FORK_UNNEEDED",
]


class ibv_node_type(enum.IntEnum):
    """``enum ibv_node_type`` (pyverbs' class names are C's)."""

    IBV_NODE_UNKNOWN = -1
    IBV_NODE_CA = 1
    IBV_NODE_SWITCH = 2
    IBV_NODE_ROUTER = 3
    IBV_NODE_RNIC = 4
    IBV_NODE_USNIC = 5
    IBV_NODE_USNIC_UDP = 6
    IBV_NODE_UNSPECIFIED = 7


class ibv_transport_type(enum.IntEnum):
    """``enum ibv_transport_type`` as pyverbs has it (without ``UNSPECIFIED``)."""

    IBV_TRANSPORT_UNKNOWN = -1
    IBV_TRANSPORT_IB = 0
    IBV_TRANSPORT_IWARP = 1
    IBV_TRANSPORT_USNIC = 2
    IBV_TRANSPORT_USNIC_UDP = 3


class ibv_fork_status(enum.IntEnum):
    """``enum ibv_fork_status``."""

    IBV_FORK_DISABLED = 0
    IBV_FORK_ENABLED = 1
    IBV_FORK_UNNEEDED = 2


IBV_NODE_UNKNOWN = ibv_node_type.IBV_NODE_UNKNOWN
IBV_NODE_CA = ibv_node_type.IBV_NODE_CA
IBV_NODE_SWITCH = ibv_node_type.IBV_NODE_SWITCH
IBV_NODE_ROUTER = ibv_node_type.IBV_NODE_ROUTER
IBV_NODE_RNIC = ibv_node_type.IBV_NODE_RNIC
IBV_NODE_USNIC = ibv_node_type.IBV_NODE_USNIC
IBV_NODE_USNIC_UDP = ibv_node_type.IBV_NODE_USNIC_UDP
IBV_NODE_UNSPECIFIED = ibv_node_type.IBV_NODE_UNSPECIFIED
IBV_TRANSPORT_UNKNOWN = ibv_transport_type.IBV_TRANSPORT_UNKNOWN
IBV_TRANSPORT_IB = ibv_transport_type.IBV_TRANSPORT_IB
IBV_TRANSPORT_IWARP = ibv_transport_type.IBV_TRANSPORT_IWARP
IBV_TRANSPORT_USNIC = ibv_transport_type.IBV_TRANSPORT_USNIC
IBV_TRANSPORT_USNIC_UDP = ibv_transport_type.IBV_TRANSPORT_USNIC_UDP
IBV_FORK_DISABLED = ibv_fork_status.IBV_FORK_DISABLED
IBV_FORK_ENABLED = ibv_fork_status.IBV_FORK_ENABLED
IBV_FORK_UNNEEDED = ibv_fork_status.IBV_FORK_UNNEEDED

if not TYPE_CHECKING:  # (type checkers keep reporting unknown names)

    def __getattr__(name: str) -> NoReturn:
        # Every other public name of pyverbs.enums is an IBV_ constant or an ibv_ enum.
        if name.startswith(("IBV_", "ibv_", "_IBV_")):
            raise out_of_scope(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

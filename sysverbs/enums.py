"""libibverbs' enums, with the same numeric values as ``<infiniband/verbs.h>``."""

from __future__ import annotations

import enum

__all__ = ["NodeType", "TransportType", "transport_for"]


class NodeType(enum.IntEnum):
    """``enum ibv_node_type``."""

    UNKNOWN = -1
    CA = 1
    SWITCH = 2
    ROUTER = 3
    RNIC = 4
    USNIC = 5
    USNIC_UDP = 6
    UNSPECIFIED = 7


class TransportType(enum.IntEnum):
    """``enum ibv_transport_type``."""

    UNKNOWN = -1
    IB = 0
    IWARP = 1
    USNIC = 2
    USNIC_UDP = 3
    UNSPECIFIED = 4


_TRANSPORT = {
    NodeType.CA: TransportType.IB,
    NodeType.SWITCH: TransportType.IB,
    NodeType.ROUTER: TransportType.IB,
    NodeType.RNIC: TransportType.IWARP,
    NodeType.USNIC: TransportType.USNIC,
    NodeType.USNIC_UDP: TransportType.USNIC_UDP,
    NodeType.UNSPECIFIED: TransportType.UNSPECIFIED,
}


def node_type_from_number(value: int) -> NodeType:
    """Decode the number read from ``node_type`` (already truncated to 32 bits)."""
    try:
        node = NodeType(value)
    except ValueError:
        return NodeType.UNKNOWN
    return NodeType.UNKNOWN if node is NodeType.UNKNOWN else node


def transport_for(node_type: NodeType) -> TransportType:
    """The transport libibverbs derives from a node type."""
    return _TRANSPORT.get(node_type, TransportType.UNKNOWN)

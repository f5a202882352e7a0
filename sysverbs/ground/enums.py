"""libibverbs' enums, with the same numeric values as ``<infiniband/verbs.h>``.

Devices and records hold the plain numbers (:mod:`sysverbs.ground.records`); these
classes are what the public API hands out.
"""

from __future__ import annotations

import enum

from .records import node_type_number, transport_number

__all__ = ["NodeType", "TransportType", "transport_for", "node_type_from_number"]


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


def node_type_from_number(value: int) -> NodeType:
    """Decode the number read from ``node_type`` (already truncated to 32 bits)."""
    return NodeType(node_type_number(value))


def transport_for(node_type: int) -> TransportType:
    """The transport libibverbs derives from a node type."""
    return TransportType(transport_number(node_type))

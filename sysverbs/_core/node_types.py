"""Node types and transports as the plain numbers of ``<infiniband/verbs.h>``.

Records and devices keep these numbers; :mod:`sysverbs.enums` turns them into the
``NodeType``/``TransportType`` enums when a caller asks (``import enum`` is left out
of ``import sysverbs``).
"""

from __future__ import annotations

__all__ = ["UNKNOWN", "node_type_number", "transport_number"]

#: IBV_NODE_UNKNOWN and IBV_TRANSPORT_UNKNOWN.
UNKNOWN = -1
#: The defined ``enum ibv_node_type`` values (CA .. UNSPECIFIED).
_NODE_TYPES = frozenset(range(1, 8))
#: Node type -> ``enum ibv_transport_type``, as libibverbs derives it.
_TRANSPORT = {1: 0, 2: 0, 3: 0, 4: 1, 5: 2, 6: 3, 7: 4}


def node_type_number(value: int) -> int:
    """Decode the number read from ``node_type`` (already truncated to 32 bits):
    a defined node type, else UNKNOWN (-1)."""
    return value if value in _NODE_TYPES else UNKNOWN


def transport_number(node_type: int) -> int:
    """The transport libibverbs derives from a node type (UNKNOWN when none)."""
    return _TRANSPORT.get(node_type, UNKNOWN)

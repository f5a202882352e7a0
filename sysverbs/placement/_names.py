"""Names in the PCI tree: PCI addresses (BDFs) and host bridges, and their sort keys
(shared by the model, the distances and the matrix)."""

from __future__ import annotations

import re

__all__ = ["bdf_key", "is_bdf", "is_host_bridge", "name_kind", "natural_key"]

_BDF = re.compile(r"([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])")
_HOST_BRIDGE = re.compile(r"pci([0-9a-f]{4,8}):([0-9a-f]{2})")


def bdf_key(address: str) -> tuple[int, str]:
    """Sort key of a PCI address: its domain as a number, then bus, device and function
    as sysfs spells them (fixed width, lower case: they sort as numbers)."""
    if name_kind(address) != 1:
        address = address.lower()
        if _BDF.fullmatch(address) is None:
            return (1 << 32, "")
    domain, _, rest = address.partition(":")
    return (int(domain, 16), rest)


_KIND: dict[str, int] = {}  # path component -> 1 BDF, 2 host bridge, 0 other


def name_kind(name: str) -> int:
    """1: a BDF, 2: a host bridge (``pci0000:00``), 0: anything else."""
    kind = _KIND.get(name)
    if kind is None:
        kind = 1 if _BDF.fullmatch(name) else 2 if _HOST_BRIDGE.fullmatch(name) else 0
        if len(_KIND) < 65536:
            _KIND[name] = kind
    return kind


def is_bdf(name: str) -> bool:
    return name_kind(name) == 1


def is_host_bridge(name: str) -> bool:
    return name_kind(name) == 2


def natural_key(name: str) -> tuple[object, ...]:
    """``mlx5_2`` before ``mlx5_10``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))

"""Two sysfs text formats shared by :mod:`sysverbs.devices.location`,
:mod:`sysverbs.devices.attributes` and :mod:`sysverbs.placement`, in a module that
imports nothing else (placement reads them on the path of ``sysverbs topo`` and must
not import those modules).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional

__all__ = ["RATE", "cpulist_text", "parse_cpulist", "rate_fields"]

#: The kernel's ``ports/N/rate`` text: ``"200 Gb/sec (4X HDR)"``, ``"2.5 Gb/sec (1X SDR)"``.
RATE = re.compile(r"(\d{1,9})(\.5)? Gb/sec \((\d{1,3})X(?: ([A-Z][A-Z0-9]*))?\)")
_CPU_RANGE = re.compile(r"(\d{1,5})(?:-(\d{1,5}))?")


def rate_fields(text: Optional[str]) -> Optional[tuple[float, int, Optional[str]]]:
    """(Gb/s, lanes, speed name) of a ``rate`` text; None unless in the kernel's format."""
    if text is None:
        return None
    m = RATE.fullmatch(text)
    if m is None:
        return None
    return int(m.group(1)) + (0.5 if m.group(2) else 0.0), int(m.group(3)), m.group(4)


def parse_cpulist(text: Optional[str]) -> Optional[frozenset[int]]:
    """``"0-3,8,10-11"`` -> {0, 1, 2, 3, 8, 10, 11}; None unless well formed.

    >>> sorted(parse_cpulist("0-2,8"))
    [0, 1, 2, 8]
    >>> parse_cpulist("3-1") is None, parse_cpulist("") == frozenset()
    (True, True)
    """
    if text is None:
        return None
    if text == "":
        return frozenset()
    cpus: set[int] = set()
    for part in text.split(","):
        m = _CPU_RANGE.fullmatch(part)
        if m is None:
            return None
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            return None
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def cpulist_text(cpus: Iterable[int]) -> str:
    """The kernel's list format (``cpulist``, ``Cpus_allowed_list``), which
    nvidia-smi's CPU Affinity column also uses; :func:`parse_cpulist`'s inverse.

    >>> cpulist_text({0, 1, 2, 3, 8, 10, 11}), cpulist_text(())
    ('0-3,8,10-11', '')
    """
    out: list[str] = []
    start = prev = None
    for c in sorted(set(cpus)):
        if prev is not None and c == prev + 1:
            prev = c
            continue
        if start is not None:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = c
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)

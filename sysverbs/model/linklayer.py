"""One link layer for every rank of a host, said aloud.

NCCL cannot join an InfiniBand port to a RoCE port, so on a host with both, placement
gives every rank the link layer :func:`~sysverbs.placement.host_link_layer` picks (more
ports, InfiniBand on a tie).  That choice costs some ranks their nearest NIC, and it may
leave a rank none: :func:`link_layer_verdict` names those ranks, from the two
assignments (every rank on the picked layer, and every rank on the other one).
``topo --assign``, ``env`` and ``run`` print its warnings, and fail (exit 1) when no
single link layer serves every rank.  Pure over the assignments.
"""

from __future__ import annotations

from ..ground.records import FrozenRecord, init

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Optional

    from ..placement import Assignment, NicChoice, Topology

__all__ = ["LinkLayerVerdict", "link_layer_verdict", "host_link_layer_verdict"]


class LinkLayerVerdict(FrozenRecord):
    """``layer``: the link layer every rank uses, ``other``: the one left out;
    ``changed``: (rank, why) of each rank that ``other`` would give a port as near as, or
    nearer than, the one ``layer`` gives it (its own rail, say: it shares another);
    ``unserved``: the ranks ``layer`` gives no NIC while ``other`` would (no single link
    layer serves every rank when there is one)."""

    __slots__ = _fields = ("layer", "other", "changed", "unserved")
    layer: str
    other: str
    changed: tuple[tuple[int, str], ...]
    unserved: tuple[int, ...]

    def __init__(self, layer: str, other: str, changed: tuple[tuple[int, str], ...],
                 unserved: tuple[int, ...]) -> None:
        init(self, layer, other, changed, unserved)

    def ok(self) -> bool:
        """Every rank has a NIC of the one link layer."""
        return not self.unserved

    def warnings(self, ranks: Optional[Sequence[int]] = None) -> list[str]:
        """The warning lines, the changed ranks among ``ranks`` only when given (a
        command of one rank), and the unserved ones always (the failure is the host's).
        A rank is a GPU's index: the local rank when every GPU is visible."""
        out = [why for r, why in self.changed if ranks is None or r in ranks]
        if self.unserved:  # the host's, whichever rank asks
            names = ", ".join(f"rank {r}" for r in self.unserved)
            out.append(f"no single link layer serves every rank of this host: {self.layer} "
                       f"gives {names} no NIC and {self.other} cannot be joined to it in "
                       "one communicator (choose with --link-layer, or name the NICs)")
        return out


def _near(n: NicChoice) -> tuple[int, int]:
    from ..placement import Distance

    return Distance(n.smi, n.nccl, n.hops, "").rank


def _name(rank: int, a: Assignment) -> str:
    return f"rank {rank} (GPU{a.gpu.index})" if a.gpu is not None else f"rank {rank}"


def link_layer_verdict(layer: str, other: str, chosen: Sequence[Assignment],
                       others: Sequence[Assignment]) -> LinkLayerVerdict:
    """The verdict from ``chosen`` (every rank's NICs on ``layer``) and ``others``
    (every rank's on ``other``), rank by rank in the same order."""
    changed: list[tuple[int, str]] = []
    unserved: list[int] = []
    for rank, (a, b) in enumerate(zip(chosen, others)):
        if not b.nics:
            continue
        theirs = b.nics[0]
        if not a.nics:
            unserved.append(rank)
            continue
        mine = a.nics[0]
        if _near(theirs) <= _near(mine) and theirs.device != mine.device:
            near = "nearer" if _near(theirs) < _near(mine) else "as near"
            changed.append((rank, (
                f"{_name(rank, a)}: port {theirs.device}:{theirs.port}, {near} ("
                f"{theirs.smi}, {theirs.hops} hops), is {other}: left out because every rank "
                f"of this host uses {layer} (NCCL cannot join InfiniBand and RoCE ports; "
                f"{layer} has more, InfiniBand on a tie): it gets {mine.device}:{mine.port} "
                f"({mine.smi}, {mine.hops} hops) instead")))
    return LinkLayerVerdict(layer, other, tuple(changed), tuple(unserved))


def host_link_layer_verdict(host: Topology, **filters: Any) -> Optional[LinkLayerVerdict]:
    """The verdict of ``host``'s GPUs (each GPU a rank, in index order) under the NIC
    ``filters`` of :func:`~sysverbs.placement.assign`; None when the host's usable ports
    are of one link layer, or ``filters`` names one."""
    from ..placement import assign

    if filters.get("link_layer") is not None or not host.gpus:
        return None
    chosen = assign(host, **filters)
    left = {(f.device, f.port) for a in chosen for f in a.filtered if f.code == "link_layer"}
    other = next((p.link_layer for n in host.nics for p in n.ports
                  if (n.name, p.port) in left and p.link_layer), None)
    if other not in ("InfiniBand", "Ethernet"):
        return None
    layer = "Ethernet" if other == "InfiniBand" else "InfiniBand"
    return link_layer_verdict(layer, other, chosen,
                              assign(host, **{**filters, "link_layer": other}))

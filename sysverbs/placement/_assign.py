"""Which RDMA device (and port) each GPU, or each local rank, should use.

Pure functions over a :class:`~sysverbs.placement.Topology` (plus ``diagnose()``
for the optional *usable* filter and the environment for ranks).
"""

from __future__ import annotations

import re

from ..engine.api import environ_arg, index_arg, items_arg
from ..ground.errors import NotFoundError, UsageError, WrongTypeError
from ..ground.records import FrozenRecord, init
from ._distance import Distance, smi_rank
from ._names import bdf_key, natural_key
from ._pairing import nic_roles, pairing
from ._topology import Anchor, Gpu, Nic, Port, Topology, endpoints, host_arg, smi_between

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Optional, TypedDict, Union

    from typing_extensions import Unpack

    from ._layout import Layout
    from ._pairing import GpuPairing

    Target = Union[Gpu, Anchor]

    class NicFilters(TypedDict, total=False):
        """The NIC filters of :func:`assign` and :func:`assign_rank`, declared once;
        :func:`assign` says what they mean and their defaults."""

        link_layer: Optional[str]
        min_rate_gbps: Optional[float]
        require_active: bool
        require_usable: bool
        include_vfs: bool
        include_bond_slaves: bool
        include_non_compute: bool

#: The launchers' local rank, the first set wins: torchrun, Open MPI, Slurm, MPICH's
#: Hydra (and Intel MPI), HPE/Cray PALS, MVAPICH2, IBM's jsrun.
RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                  "MPI_LOCALRANKID", "PALS_LOCAL_RANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                  "JSM_NAMESPACE_LOCAL_RANK")
#: The names of the NIC filters (``NicFilters``, for the type checker).
FILTER_NAMES = ("link_layer", "min_rate_gbps", "require_active", "require_usable",
                "include_vfs", "include_bond_slaves", "include_non_compute")
_LINK_LAYERS = {"ib": "InfiniBand", "infiniband": "InfiniBand", "eth": "Ethernet",
                "ethernet": "Ethernet", "roce": "Ethernet"}
#: The link layers NCCL's IB transport cannot join in one communicator.
_FABRICS = ("InfiniBand", "Ethernet")


def host_link_layer(layers: Sequence[Optional[str]]) -> Optional[str]:
    """The one link layer every rank of a host uses when its ports are both InfiniBand
    and Ethernet (RoCE), or None when they are not mixed: the one with more ports,
    InfiniBand on a tie.  NCCL cannot join an InfiniBand port to a RoCE port (``NET/IB :
    Remote RoCE device is incompatible``), so ranks of one host that got different link
    layers fail across hosts.  Pure; ``topo --assign``, ``env`` and ``run`` all take it.

    >>> host_link_layer(["Ethernet", "InfiniBand", "Ethernet"])
    'Ethernet'
    >>> host_link_layer(["Ethernet", "InfiniBand"]), host_link_layer(["Ethernet"]) is None
    ('InfiniBand', True)
    """
    counts = [sum(1 for x in layers if x == f) for f in _FABRICS]
    if not all(counts):
        return None
    return _FABRICS[0] if counts[0] >= counts[1] else _FABRICS[1]


class NicChoice(FrozenRecord):
    """One RDMA device port: ``device`` (the ibdev name), ``port`` (1-based),
    ``link_layer``, ``netdevs``; its distance to the GPU and why it was chosen."""

    __slots__ = _fields = ("device", "port", "link_layer", "netdevs", "address",
                           "rate_gbps", "smi", "nccl", "hops", "reason", "dma_function")
    device: str
    port: int
    link_layer: Optional[str]
    netdevs: tuple[str, ...]
    address: Optional[str]
    rate_gbps: Optional[float]
    smi: Optional[str]
    nccl: Optional[str]
    hops: Optional[int]
    reason: str
    dma_function: Optional[str]  # its CX-8's Data Direct DMA function (Grace, CX-8)

    def __init__(self, device: str, port: int, link_layer: Optional[str],
                 netdevs: tuple[str, ...], address: Optional[str], rate_gbps: Optional[float],
                 smi: Optional[str], nccl: Optional[str], hops: Optional[int], reason: str,
                 dma_function: Optional[str] = None) -> None:
        init(self, device, port, link_layer, netdevs, address, rate_gbps, smi, nccl, hops,
             reason, dma_function)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "device": self.device, "port": self.port, "link_layer": self.link_layer,
            "netdevs": list(self.netdevs), "address": self.address,
            "rate_gbps": self.rate_gbps, "smi": self.smi, "nccl": self.nccl,
            "hops": self.hops, "reason": self.reason}
        if self.dma_function is not None:
            out["dma_function"] = self.dma_function
        return out


class Filtered(FrozenRecord):
    """A port left out, and why (``code``: ``port_not_active``, ``link_layer``,
    ``rate``, ``not_usable``, ``vf``, ``bond_slave``, ``unplaced``, ``no_ports``)."""

    __slots__ = _fields = ("device", "port", "code", "reason")
    device: str
    port: Optional[int]
    code: str
    reason: str

    def __init__(self, device: str, port: Optional[int], code: str, reason: str) -> None:
        init(self, device, port, code, reason)

    def as_dict(self) -> dict[str, object]:
        return {"device": self.device, "port": self.port, "code": self.code,
                "reason": self.reason}


class Assignment(FrozenRecord):
    """The NICs of one GPU (or one local rank): ``nics`` in the order to use them.

    ``gpu`` is None when the rank's GPU could not be decided (``reason`` says why);
    ``nics`` is then empty.  ``rank`` is the local rank this was asked for, if any.
    ``anchor``: the device the NICs were chosen for when it was given as an
    :class:`~sysverbs.placement.Anchor` (``gpu`` is then its GPU, if it is one).
    """

    __slots__ = _fields = ("gpu", "rank", "nics", "reason", "filtered", "anchor",
                           "pairing")
    gpu: Optional[Gpu]
    rank: Optional[int]
    nics: tuple[NicChoice, ...]
    reason: str
    filtered: tuple[Filtered, ...]
    anchor: Optional[Anchor]
    pairing: Optional[GpuPairing]  # the Grace rule the NICs follow (placement/_pairing)

    def __init__(self, gpu: Optional[Gpu], rank: Optional[int], nics: tuple[NicChoice, ...],
                 reason: str, filtered: tuple[Filtered, ...] = (),
                 anchor: Optional[Anchor] = None, pairing: Optional[GpuPairing] = None
                 ) -> None:
        init(self, gpu, rank, nics, reason, filtered, anchor, pairing)

    def as_dict(self) -> dict[str, object]:
        g = self.gpu
        out: dict[str, object] = {
            "rank": self.rank,
            "gpu": None if g is None else {"index": g.index, "address": g.address,
                                           "uuid": g.uuid, "numa_node": g.pci.numa_node},
            "nics": [n.as_dict() for n in self.nics],
            "reason": self.reason,
            "filtered": [f.as_dict() for f in self.filtered],
        }
        if self.anchor is not None:
            out["anchor"] = self.anchor.as_dict()
        if self.pairing is not None:
            out["pairing"] = self.pairing.as_dict()
        return out


class _Candidate(FrozenRecord):
    __slots__ = _fields = ("nic", "port")
    nic: Nic
    port: Port

    def __init__(self, nic: Nic, port: Port) -> None:
        init(self, nic, port)

    @property
    def key(self) -> tuple[object, ...]:
        return (bdf_key(self.nic.address or ""), natural_key(self.nic.name), self.port.port)


def _norm_link_layer(value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    norm = _LINK_LAYERS.get(value.strip().lower())
    if norm is None:
        raise UsageError(f"link layer must be InfiniBand or Ethernet, not {value!r}")
    return norm


def _usable_names(host: Topology) -> tuple[Optional[frozenset[str]], str]:
    try:
        from ..devices.diagnosis import diagnose

        found = diagnose(source="sysfs", sysfs_path=host.sysfs_path, dev_dir=host.dev_dir,
                         recorded=host.recorded)
    except (OSError, ValueError) as e:
        return None, f"diagnose() failed: {e}"
    return frozenset(d.name for d in found if d.usable), ""


def candidates(host: Topology, *, drop: Optional[Mapping[str, str]] = None,
               **filters: Unpack[NicFilters]) -> tuple[list[_Candidate], list[Filtered]]:
    """The ports the filters keep (in PCI address order) and those they leave out;
    ``drop``: devices left out by role (name -> why: not a compute NIC)."""
    unknown = sorted(set(filters) - set(FILTER_NAMES))
    if unknown:
        raise WrongTypeError(f"unexpected keyword argument {unknown[0]!r}")
    link_layer = filters.get("link_layer")
    min_rate_gbps = filters.get("min_rate_gbps")
    require_active = filters.get("require_active", True)
    require_usable = filters.get("require_usable", False)
    include_vfs = filters.get("include_vfs", False)
    include_bond_slaves = filters.get("include_bond_slaves", False)
    if link_layer is not None and not isinstance(link_layer, str):
        raise WrongTypeError(f"link_layer must be a str or None, not {link_layer!r}")
    if min_rate_gbps is not None and (isinstance(min_rate_gbps, bool)
                                      or not isinstance(min_rate_gbps, (int, float))):
        raise WrongTypeError(f"min_rate_gbps must be a number or None, not {min_rate_gbps!r}")
    ll = _norm_link_layer(link_layer)
    usable: Optional[frozenset[str]] = None
    usable_err = ""
    if require_usable:
        usable, usable_err = _usable_names(host)
    keep: list[_Candidate] = []
    out: list[Filtered] = []
    for nic in host.nics:
        if nic.address is None:
            out.append(Filtered(nic.name, None, "unplaced", f"not placed: {nic.placement}"))
            continue
        if nic.kind in ("vf", "sf") and not include_vfs:
            what = "an SR-IOV VF" if nic.kind == "vf" else "a sub-function"
            out.append(Filtered(nic.name, None, "vf", f"{what} (include_vfs to use it)"))
            continue
        if drop and nic.name in drop:
            out.append(Filtered(nic.name, None, "role", f"not a compute NIC: {drop[nic.name]} "
                                "(include_non_compute to use it)"))
            continue
        if nic.bond_slave and not include_bond_slaves:
            out.append(Filtered(nic.name, None, "bond_slave",
                                "its netdev is a bond slave (use the bond)"))
            continue
        if require_usable and (usable is None or nic.name not in usable):
            why = usable_err or "diagnose() says it cannot be used (sysverbs doctor)"
            out.append(Filtered(nic.name, None, "not_usable", why))
            continue
        if not nic.ports:
            out.append(Filtered(nic.name, None, "no_ports", "no ports in sysfs"))
            continue
        for port in nic.ports:
            if require_active and port.state != "ACTIVE":
                out.append(Filtered(nic.name, port.port, "port_not_active",
                                    f"port state {port.state or 'unknown'}, not ACTIVE"))
            elif ll is not None and port.link_layer != ll:
                out.append(Filtered(nic.name, port.port, "link_layer",
                                    f"link layer {port.link_layer or 'unknown'}, not {ll}"))
            elif min_rate_gbps is not None and (
                port.rate_gbps is None or port.rate_gbps < min_rate_gbps
            ):
                rate = f"{port.rate_gbps:g} Gb/s" if port.rate_gbps is not None else "unknown"
                out.append(Filtered(nic.name, port.port, "rate",
                                    f"rate {rate} below {min_rate_gbps:g} Gb/s"))
            else:
                keep.append(_Candidate(nic, port))
    keep.sort(key=lambda c: c.key)
    one = None if ll is not None else host_link_layer([c.port.link_layer for c in keep])
    if one is not None:
        for c in keep:
            if c.port.link_layer != one:
                out.append(Filtered(
                    c.nic.name, c.port.port, "link_layer",
                    f"link layer {c.port.link_layer or 'unknown'}: this host's ports are "
                    "InfiniBand and Ethernet (RoCE), which NCCL cannot join, so every rank "
                    f"uses {one} (more ports, InfiniBand on a tie; link_layer= chooses)"))
        keep = [c for c in keep if c.port.link_layer == one]
    return keep, out


def _choice(c: _Candidate, d: Distance, reason: str, dma: Optional[str] = None
            ) -> NicChoice:
    return NicChoice(c.nic.name, c.port.port, c.port.link_layer, c.port.netdevs,
                     c.nic.address, c.port.rate_gbps, d.smi, d.nccl, d.hops, reason, dma)


def _hops(n: Optional[int]) -> str:
    return "unknown hops" if n is None else f"{n} hop" + ("" if n == 1 else "s")


def _cls(d: Distance) -> str:
    return d.smi or "undecidable"


def _groups(gpus: Sequence[Target], best: Mapping[str, list[int]],
            order: Mapping[str, tuple[int, int]]) -> list[list[Target]]:
    """The GPUs whose candidate ports overlap, transitively (in GPU order)."""
    groups: list[tuple[set[int], list[Target]]] = []
    for g in gpus:
        ports = set(best[g.address])
        joined = [grp for grp in groups if grp[0] & ports]
        for grp in joined:
            groups.remove(grp)
            ports |= grp[0]
        members = sorted([g, *(m for grp in joined for m in grp[1])],
                         key=lambda x: order[x.address])
        groups.append((ports, members))
    return sorted((grp[1] for grp in groups), key=lambda m: order[m[0].address])


def _names(gpus: Sequence[Target]) -> str:
    return ", ".join(g.name for g in gpus)


def _share(group: Sequence[Target], best: Mapping[str, list[int]], split_ties: bool,
           order: Mapping[str, tuple[int, int]]
           ) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Each GPU of ``group`` its ports (indices) and the reason's note.

    One GPU: all its candidates (multi-rail).  Several (``split_ties``): each the same
    number of ports -- m ports for k GPUs, m // k each, in PCI address order (the GPU
    with the fewest candidates first, then by index), the m % k left over shared, one
    more each; fewer ports than GPUs: one each, round-robin.  ``split_ties=False``:
    each GPU all its candidates."""
    k = len(group)
    noun = "GPUs" if all(isinstance(g, Gpu) for g in group) else "devices"
    ports = sorted({i for g in group for i in best[g.address]})
    m = len(ports)
    if k == 1 or not split_ties:
        shared = f" (shared by {k} {noun}: {_names(group)})" if k > 1 else ""
        return ({g.address: list(best[g.address]) for g in group},
                {g.address: ("the one port" if len(best[g.address]) == 1 else
                             f"all {len(best[g.address])} ports")
                 + f" at its nearest class{shared}" for g in group})
    by_need = sorted(group, key=lambda g: (len(best[g.address]), order[g.address]))
    load = {i: 0 for i in ports}
    primary: set[int] = set()
    mine: dict[str, list[int]] = {g.address: [] for g in group}
    each = max(1, m // k)

    def take(g: Target, prefer_unshared: bool) -> None:
        free = [i for i in best[g.address] if i not in mine[g.address]]
        if not free:
            return
        i = min(free, key=lambda i: (load[i], prefer_unshared and i in primary, i))
        mine[g.address].append(i)
        load[i] += 1

    for g in by_need:
        for _ in range(each):
            take(g, False)
        primary.update(mine[g.address])
    if m > k and m % k:
        for g in by_need:
            take(g, True)
    users: dict[int, list[Target]] = {i: [] for i in ports}
    for g in group:
        for i in mine[g.address]:
            users[i].append(g)
    notes: dict[str, str] = {}
    for g in group:
        peers = sorted({o.address: o for i in mine[g.address] for o in users[i]
                        if o.address != g.address}.values(),
                       key=lambda o: order[o.address])
        also = f"; shares a port with {_names(peers)}" if peers else ""
        if m < k:
            notes[g.address] = (f"fewer NIC ports ({m}) than {noun} ({k}: {_names(group)}) "
                                f"at the nearest class: shared round-robin{also}")
        else:
            notes[g.address] = (f"{m} ports at the nearest class shared out among {k} "
                                f"{noun} ({_names(group)}), {len(mine[g.address])} each, "
                                f"in PCI address order{also}")
    return mine, notes


def assign(
    host: Topology,
    gpus: Optional[Sequence[Target]] = None,
    *,
    split_ties: bool = True,
    layout: Optional[Layout] = None,
    **filters: Unpack[NicFilters],
) -> tuple[Assignment, ...]:
    """One :class:`Assignment` per GPU (``gpus``: default all, in index order).

    The NIC filters (keywords, each port left out says why in ``filtered``):
    ``link_layer`` (``"InfiniBand"``/``"Ethernet"``, also ``"ib"``, ``"eth"``,
    ``"roce"``; default None: any), ``min_rate_gbps`` (None), ``require_active`` (True:
    the port is ACTIVE), ``require_usable`` (False; True: the device is usable as
    :func:`sysverbs.diagnose` says), ``include_vfs`` (False: SR-IOV VFs and
    sub-functions are left out), ``include_bond_slaves`` (False).

    Each GPU's candidates are the ports at its nearest class (``PIX`` < ``PXB`` <
    ``PHB`` < ``NODE`` < ``SYS``; bridge hops do not split a class, as NCCL's path
    types do not).  A GPU whose candidates no other GPU has gets them all (multi-rail).
    GPUs whose candidates overlap share them out: m ports for k GPUs, each GPU m // k
    of them in PCI address order (one rail each when m == k), the m % k left over
    shared, one more each; with fewer ports than GPUs, one each, round-robin, and the
    reason says so (``split_ties=False``: each gets all its candidates).  Within a GPU,
    ports are listed nearest first (fewest hops), then by PCI address, so the answer
    does not depend on readdir order.  A GPU that is not one of the host's is a
    :class:`~sysverbs.ground.errors.NotFoundError`.

    ``gpus`` may also hold :class:`~sysverbs.placement.Anchor` objects
    (:func:`~sysverbs.placement.find_anchor`: an NVMe drive, a NIC, any PCI function):
    each gets NICs as a GPU would, in the order given, after the GPUs; two anchors on
    one PCI function get the same NICs.

    On a Grace host the layout (``layout``, default :func:`read_layout` of the host)
    decides instead of PCIe distance (:mod:`._pairing`): with Data Direct each GPU gets
    all ports of the CX-8 whose DMA function sits below its switch, or none when that
    CX-8 is unresolved (``pairing`` says why and names the candidates); NUMA-based,
    the compute NICs of its CPU node, shared out as above (that 1:1 split is sysverbs'
    own tie-break).  There only compute NICs are candidates (``include_non_compute``:
    BlueField and other NICs too).
    """
    host_arg(host)
    given = list(host.gpus) if gpus is None else items_arg(gpus, "gpus")
    if not all(isinstance(g, (Gpu, Anchor)) for g in given):
        raise WrongTypeError("gpus must be the host's Gpu objects (or Anchor objects)")
    known = {g.address for g in host.gpus}
    for g in given:
        if isinstance(g, Gpu) and g.address not in known:
            raise NotFoundError(f"{g.name} ({g.address}) is not a GPU of this host")
        if isinstance(g, Anchor) and g.address not in host.pci:
            raise NotFoundError(f"{g.name} ({g.address}) is not a PCI function of this host")
    order: dict[str, tuple[int, int]] = {}
    gpu_list: list[Target] = []
    for pos, g in enumerate(given):
        if g.address not in order:
            order[g.address] = (0, g.index) if isinstance(g, Gpu) else (1, pos)
            gpu_list.append(g)
    if layout is None:
        from ._layout import read_layout

        layout = read_layout(host)
    pairs = pairing(host, layout)
    drop: dict[str, str] = {}
    if pairs and not filters.get("include_non_compute", False):
        drop = {n: r.reason for n, r in nic_roles(host).items() if r.role != "compute"}
    keep, filtered = candidates(host, drop=drop, **filters)
    ftuple = tuple(filtered)
    if not gpu_list:
        return ()
    if not keep:
        why = "no NIC port left after the filters" if filtered else "no RDMA device"
        return tuple(_assignment(g, (), why, ftuple, pairs.get(g.address)) for g in given)
    # Every pair is ranked by its nvidia-smi class and hops; the full distance (with
    # NCCL's path type) is computed only for the pairs chosen.
    rank: dict[str, list[tuple[int, int]]] = {}  # GPU -> the rank of each port
    nic_ends = endpoints(host, [c.nic for c in keep])
    for g, gpu_end in zip(gpu_list, endpoints(host, gpu_list)):
        rank[g.address] = [smi_rank(*smi_between(host, gpu_end, nic_end)[:2])
                           for nic_end in nic_ends]
    full: dict[tuple[str, int], Distance] = {}

    def dist_of(g: Target, i: int) -> Distance:
        d = full.get((g.address, i))
        if d is None:
            d = full[g.address, i] = host.distance(g, keep[i].nic)
        return d

    # Each GPU's candidates: the ports at its nearest class (hops do not split a class:
    # NCCL's ncclTopoGetLocal ranks by path type and bandwidth only).  GPUs whose
    # candidates overlap share them out (_share); the ports of each GPU nearest first.
    best: dict[str, list[int]] = {}
    for g in gpu_list:
        ranks = rank[g.address]
        top = min(r[0] for r in ranks)
        best[g.address] = sorted((i for i, r in enumerate(ranks) if r[0] == top),
                                 key=lambda i: keep[i].key)
    out: dict[str, Assignment] = {}
    paired = {g.address: pairs[g.address] for g in gpu_list
              if isinstance(g, Gpu) and g.address in pairs}
    for a, p in paired.items():  # the Grace rule, not PCIe distance
        best[a] = [i for i, c in enumerate(keep) if c.nic.name in p.nics]
        if not best[a]:
            why = "" if p.status == "unresolved" else (
                "; none of its NICs' ports is left after the filters")
            out[a] = _assignment(next(g for g in gpu_list if g.address == a), (),
                                 p.reason + why, ftuple, p)
    for group in _groups([g for g in gpu_list if g.address not in out], best, order):
        mine, notes = _share(group, best, split_ties, order)
        for g in group:
            gp = paired.get(g.address)
            if gp is not None:
                out[g.address] = _paired(g, gp, mine[g.address], keep, notes[g.address],
                                         len(group), dist_of, ftuple)
                continue
            picked = sorted(mine[g.address], key=lambda i: rank[g.address][i])
            choices = []
            for i in picked:
                d = dist_of(g, i)
                choices.append(_choice(keep[i], d, f"{_cls(d)}, {_hops(d.hops)}: {d.reason}"))
            first = dist_of(g, picked[0])
            head = f"nearest class {_cls(first)}, {_hops(first.hops)}"
            nearer = min(best[g.address], key=lambda i: rank[g.address][i])
            if rank[g.address][nearer] < rank[g.address][picked[0]]:
                c = keep[nearer]
                head += (f" ({c.nic.name}:{c.port.port} is nearer, "
                         f"{_hops(dist_of(g, nearer).hops)}, but hops do not split a class, "
                         "as NCCL's path types do not)")
            out[g.address] = _assignment(g, tuple(choices), f"{head}; {notes[g.address]}",
                                         ftuple)
    done = [out[g.address] for g in given]
    return tuple(a if a.anchor is g or (a.anchor is None and isinstance(g, Gpu))
                 else _assignment(g, a.nics, a.reason, ftuple) for g, a in zip(given, done))


def _paired(g: Target, p: GpuPairing, mine: list[int], keep: list[_Candidate], note: str,
            k: int, dist_of: Callable[[Target, int], Distance],
            ftuple: tuple[Filtered, ...]) -> Assignment:
    """The Assignment of a GPU paired by the Grace rule (``mine``: its ports)."""
    choices = []
    for i in sorted(mine, key=lambda i: keep[i].key):
        c, d = keep[i], dist_of(g, i)
        choices.append(_choice(c, d, f"{p.rule} pairing ({_cls(d)} by PCIe "
                               f"distance): {d.reason}", p.dma_function))
    reason = p.reason
    if k > 1:
        reason += ("; " + note.replace("at the nearest class", "on the node") +
                   "; this 1:1 split is sysverbs' own tie-break: no NVIDIA rule pairs "
                   "them 1:1 (split_ties=False gives each GPU all)")
    return _assignment(g, tuple(choices), reason, ftuple, p)


def _assignment(g: Target, nics: tuple[NicChoice, ...], reason: str,
                filtered: tuple[Filtered, ...], pairing: Optional[GpuPairing] = None
                ) -> Assignment:
    if isinstance(g, Anchor):
        return Assignment(g.gpu, None, nics, reason, filtered, g)
    return Assignment(g, None, nics, reason, filtered, pairing=pairing)


# ------------------------------------------------------------------------ ranks, CUDA


def local_rank(env: Optional[Mapping[str, str]] = None) -> tuple[Optional[int], str]:
    """The local rank from the first of :data:`RANK_VARIABLES` that is set (LOCAL_RANK,
    OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID...); (None, why) when none is set or it is
    not a number."""
    env = environ_arg(env)
    for name in RANK_VARIABLES:
        value = env.get(name)
        if value is None:
            continue
        if re.fullmatch(r"\s*[0-9]{1,6}\s*", value):
            return int(value), f"{name}={value.strip()}"
        return None, f"{name}={value!r} is not a local rank"
    return None, "none of " + ", ".join(RANK_VARIABLES) + " is set"


def _select(pool: Sequence[Gpu], name: str, value: str, notes: list[str]) -> list[Gpu]:
    """The GPUs a device list names: indices into ``pool`` or UUIDs (a unique ``GPU-``
    prefix); stops at the first entry that names none or repeats one, as CUDA does."""
    out: list[Gpu] = []
    for entry in value.split(","):
        entry = entry.strip()
        gpu: Optional[Gpu] = None
        if re.fullmatch(r"[0-9]{1,4}", entry):
            gpu = pool[int(entry)] if int(entry) < len(pool) else None
        elif entry.upper().startswith("GPU-"):
            matches = [g for g in pool if g.uuid and g.uuid.lower().startswith(entry.lower())]
            gpu = matches[0] if len(matches) == 1 else None
            if len(matches) > 1:
                notes.append(f"{entry} is an ambiguous UUID prefix")
            elif not matches and not any(g.uuid for g in pool):
                notes.append(f"{entry}: no GPU UUID known (no /proc/driver/nvidia)")
        if gpu is None or any(g.address == gpu.address for g in out):
            notes.append(f"{name} stops at {entry!r} (as CUDA does)")
            break
        out.append(gpu)
    return out


def visible_gpus(host: Topology, env: Optional[Mapping[str, str]] = None
                 ) -> tuple[tuple[Gpu, ...], str]:
    """The GPUs a CUDA process would see, in its index order, and how that was decided.

    NVIDIA_VISIBLE_DEVICES (the container runtime's: ``all``, ``none``/``void``/empty,
    or host indices / UUIDs) selects the container's GPUs from the host's; then
    CUDA_VISIBLE_DEVICES selects from those: indices into that list, or UUIDs (``GPU-``
    and a unique prefix, as CUDA accepts); as CUDA does, a list stops at the first
    entry that names no GPU or repeats one.  Indices are PCI bus order
    (``CUDA_DEVICE_ORDER=PCI_BUS_ID``, nvidia-smi's order); CUDA's default order,
    FASTEST_FIRST, is the same on a host whose GPUs are all one model, and is said to be
    undecidable otherwise.
    """
    env = environ_arg(env)
    notes: list[str] = []
    pool: list[Gpu] = list(host_arg(host).gpus)
    said: list[str] = []
    nvidia = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvidia is not None:
        value = nvidia.strip()
        said.append(f"NVIDIA_VISIBLE_DEVICES={value}")
        if value.lower() in ("", "none", "void"):
            return (), f"NVIDIA_VISIBLE_DEVICES={value!r}: no GPU in this container"
        if value.lower() != "all":
            pool = _select(pool, "NVIDIA_VISIBLE_DEVICES", value, notes)
    cuda = env.get("CUDA_VISIBLE_DEVICES")
    if cuda is not None:
        value = cuda.strip()
        said.append(f"CUDA_VISIBLE_DEVICES={value}")
        if value == "" or value.lower() == "nodevfiles":
            return (), f"CUDA_VISIBLE_DEVICES={value!r}: no GPU visible"
        models = {(g.pci.vendor, g.pci.device) for g in pool}
        if env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") != "PCI_BUS_ID" and len(models) > 1:
            notes.append("CUDA_DEVICE_ORDER is not PCI_BUS_ID and the GPUs differ: CUDA's "
                         "FASTEST_FIRST index order cannot be known from sysfs; PCI bus "
                         "order is assumed")
        pool = _select(pool, "CUDA_VISIBLE_DEVICES", value, notes)
    if not said:
        said.append("all GPUs (no CUDA_VISIBLE_DEVICES)")
    return tuple(pool), "; ".join([*said, *notes])


def assign_rank(
    host: Topology,
    rank: Optional[int] = None,
    env: Optional[Mapping[str, str]] = None,
    **filters: Unpack[NicFilters],
) -> Assignment:
    """The NICs of one local rank (default: from the environment).

    The rank's GPU is ``visible[rank]`` (or the only visible GPU when the launcher
    gives each rank one); NICs are balanced over the visible GPUs (all GPUs when a
    rank sees one), so every rank computes the same plan.  A ``rank`` that is not an int
    is a :class:`~sysverbs.ground.errors.WrongTypeError`, a negative one a
    :class:`~sysverbs.ground.errors.UsageError`; a rank that has no GPU (no visible GPU, or
    ``rank`` >= the number of visible GPUs when more than one is visible) a
    :class:`~sysverbs.ground.errors.NotFoundError`.  No rank at all (none given, none in
    ``env``) gives an :class:`Assignment` with ``gpu`` None and the reason.  ``env``
    must map str to str.
    """
    if rank is not None:
        index_arg(rank, "rank")
    why_rank = f"rank {rank} (given)"
    if rank is None:
        rank, why_rank = local_rank(env)
    visible, why_vis = visible_gpus(host, env)
    if rank is None:
        return Assignment(None, None, (), f"no local rank: {why_rank}")
    if not visible:
        raise NotFoundError(f"local rank {rank} has no GPU: {why_rank}, but no GPU is "
                            f"visible ({why_vis})")
    if len(visible) == 1:
        gpu, pool = visible[0], host.gpus
    elif rank < len(visible):
        gpu, pool = visible[rank], visible
    else:
        raise NotFoundError(f"local rank {rank} has no GPU: {why_rank}, but only "
                            f"{len(visible)} GPUs are visible ({why_vis}), ranks 0 to "
                            f"{len(visible) - 1}")
    plan = assign(host, pool, **filters)
    for a in plan:
        if a.gpu is not None and a.gpu.address == gpu.address:
            return Assignment(gpu, rank, a.nics,
                              f"{why_rank} -> GPU{gpu.index} ({gpu.address}; {why_vis}); "
                              f"{a.reason}", a.filtered, pairing=a.pairing)
    return Assignment(gpu, rank, (), "internal: GPU not in plan")  # pragma: no cover

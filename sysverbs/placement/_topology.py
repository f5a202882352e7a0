"""The host model's records: GPUs, RDMA devices and their ports, and the :class:`Topology`
that holds them with the PCI tree, and the distances between its devices."""

from __future__ import annotations

from ..ground.records import FrozenRecord, init
from ._distance import Distance, nccl_distance, numa_affinity, smi_distance

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Optional, Union

    from ._pci import PciDevice

    Endpoint = Union[str, "Gpu", "Nic", "Anchor"]

__all__ = ["Anchor", "Gpu", "Topology", "Nic", "Port", "endpoints", "host_arg", "smi_between",
           "smi_hops"]


class Gpu(FrozenRecord):
    """A GPU found by PCI vendor and class (no driver library).  ``index``: its position
    in PCI bus order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``); ``uuid`` and ``minor`` from
    ``<proc>/driver/nvidia/gpus/<bdf>/information`` when that exists."""

    __slots__ = _fields = ("index", "address", "vendor", "pci", "uuid", "minor", "model")
    index: int
    address: str
    vendor: str  # "nvidia" | "amd"
    pci: PciDevice
    uuid: Optional[str]
    minor: Optional[int]
    model: Optional[str]

    def __init__(self, index: int, address: str, vendor: str, pci: PciDevice,
                 uuid: Optional[str], minor: Optional[int], model: Optional[str]) -> None:
        init(self, index, address, vendor, pci, uuid, minor, model)

    @property
    def name(self) -> str:
        return f"GPU{self.index}"


class Port(FrozenRecord):
    """One port of an RDMA device: ``state`` (``"ACTIVE"``...), ``link_layer``
    (``"InfiniBand"``/``"Ethernet"``), ``rate_gbps``, the netdevs found for it."""

    __slots__ = _fields = ("port", "state", "link_layer", "rate_gbps", "rate", "netdevs")
    port: int
    state: Optional[str]
    link_layer: Optional[str]
    rate_gbps: Optional[float]
    rate: Optional[str]
    netdevs: tuple[str, ...]

    def __init__(self, port: int, state: Optional[str], link_layer: Optional[str],
                 rate_gbps: Optional[float], rate: Optional[str], netdevs: tuple[str, ...]
                 ) -> None:
        init(self, port, state, link_layer, rate_gbps, rate, netdevs)


class Nic(FrozenRecord):
    """An RDMA device (``class/infiniband/<name>``) and where it sits.

    ``kind``: ``"pf"``, ``"vf"`` (SR-IOV, ``physfn``), ``"sf"`` (a sub-function on the
    auxiliary bus), ``"aux"`` (another auxiliary device, e.g. irdma's ``ice.roce.0``),
    ``"bond"``, ``"soft"`` (rxe/siw placed at its netdev's PCI function) or
    ``"unplaced"``.  ``address``: the PCI function it is placed at (None: unplaced, with
    the reason in ``placement``).  ``bond_slave``: a netdev of it is enslaved to a bond.
    """

    __slots__ = _fields = ("name", "address", "kind", "placement", "parent", "ports",
                           "bond_slave", "node_guid", "uverbs")
    name: str
    address: Optional[str]
    kind: str
    placement: str
    parent: Optional[str]  # the directory name the device hangs on (PCI, aux, netdev)
    ports: tuple[Port, ...]
    bond_slave: bool
    node_guid: Optional[str]
    uverbs: Optional[int]  # N of its uverbsN char device (registration order)

    def __init__(self, name: str, address: Optional[str], kind: str, placement: str,
                 parent: Optional[str], ports: tuple[Port, ...], bond_slave: bool,
                 node_guid: Optional[str], uverbs: Optional[int] = None) -> None:
        init(self, name, address, kind, placement, parent, ports, bond_slave, node_guid,
             uverbs)

    @property
    def netdevs(self) -> tuple[str, ...]:
        out: list[str] = []
        for p in self.ports:
            out.extend(n for n in p.netdevs if n not in out)
        return tuple(out)


class Anchor(FrozenRecord):
    """A device placement starts from: ``name`` as given, ``kind`` (``"gpu"``,
    ``"pci"``, ``"rdma"``, ``"netdev"``, ``"block"``, ``"nvme"``), ``address`` the PCI
    function it sits on, ``pci`` that function, ``gpu`` the GPU when it is one, and
    ``via`` how it was found."""

    __slots__ = _fields = ("name", "kind", "address", "pci", "gpu", "via")
    name: str
    kind: str
    address: str
    pci: PciDevice
    gpu: Optional[Gpu]
    via: str

    def __init__(self, name: str, kind: str, address: str, pci: PciDevice,
                 gpu: Optional[Gpu], via: str) -> None:
        init(self, name, kind, address, pci, gpu, via)

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "kind": self.kind, "address": self.address,
                "numa_node": self.pci.numa_node, "via": self.via}


class Topology(FrozenRecord):
    """What :func:`read_host` found (see ``docs/placement.md``)."""

    _fields = ("sysfs_path", "proc_path", "dev_dir", "pci", "host_bridges", "numa_nodes",
               "gpus", "nics", "problems", "recorded")
    __slots__ = (*_fields, "_cache")
    sysfs_path: str
    proc_path: str
    dev_dir: str
    pci: Mapping[str, PciDevice]
    host_bridges: tuple[str, ...]
    numa_nodes: Mapping[int, frozenset[int]]
    gpus: tuple[Gpu, ...]
    nics: tuple[Nic, ...]
    problems: tuple[str, ...]
    #: the tree is a recording of another host (a bundled fixture): its device nodes
    #: are stand-ins, judged as :func:`sysverbs.devices.diagnosis.diagnose` ``recorded=True`` does
    recorded: bool
    _cache: dict[object, object]  # what the distances computed (not compared, not shown)

    def __init__(self, sysfs_path: str, proc_path: str, dev_dir: str,
                 pci: Mapping[str, PciDevice], host_bridges: tuple[str, ...],
                 numa_nodes: Mapping[int, frozenset[int]], gpus: tuple[Gpu, ...],
                 nics: tuple[Nic, ...], problems: tuple[str, ...] = (),
                 recorded: bool = False) -> None:
        init(self, sysfs_path, proc_path, dev_dir, pci, host_bridges, numa_nodes, gpus, nics,
             problems, recorded)
        object.__setattr__(self, "_cache", {})

    def gpu(self, key: Union[int, str]) -> Optional[Gpu]:
        """A GPU by index, BDF, ``GPU<n>`` or UUID (``GPU-`` prefix, as CUDA accepts)."""
        for g in self.gpus:
            if key == g.index or key == g.address or key == g.name or (
                isinstance(key, str) and g.uuid is not None and key.startswith("GPU-")
                and g.uuid.lower().startswith(key.lower())
            ):
                return g
        return None

    def nic(self, name: str) -> Optional[Nic]:
        by_name = self._cache.get("nics")
        if by_name is None:
            by_name = self._cache["nics"] = {n.name: n for n in self.nics}
        assert isinstance(by_name, dict)
        found = by_name.get(name)
        return found if isinstance(found, Nic) else None

    def _endpoint(self, x: Endpoint) -> tuple[Optional[PciDevice], bool, str]:
        if isinstance(x, (Gpu, Anchor)):
            return x.pci, False, x.name
        if isinstance(x, Nic):
            dev = self.pci.get(x.address) if x.address is not None else None
            return dev, True, x.name
        nic = self.nic(x)
        if nic is not None:
            return self._endpoint(nic)
        return self.pci.get(x), False, x

    def distance(self, a: Endpoint, b: Endpoint) -> Distance:
        """nvidia-smi class, NCCL path type and bridge hops between two devices (a BDF,
        an RDMA device name, a :class:`Gpu` or a :class:`Nic`)."""
        smi, hops, why, ends = smi_hops(self, a, b)
        if ends is None:
            return Distance(None, None, None, why)
        (da, nic_a), (db, nic_b) = ends
        nccl = nccl_distance(da, db, self.pci, nic_a, nic_b, self._cache)
        return Distance(smi, nccl, hops, why)

    def smi_class(self, a: Endpoint, b: Endpoint) -> Optional[str]:
        """nvidia-smi's class (X, PIX, PXB, PHB, NODE, SYS) or None when undecidable."""
        return smi_hops(self, a, b)[0]

    def numa_affinity(self, x: Endpoint) -> tuple[Optional[int], str]:
        """The NUMA node of a device (a BDF, an RDMA device name, a :class:`Gpu` or a
        :class:`Nic`) as nvidia-smi's ``NUMA Affinity`` column names it, and its source:
        ``"numa_node"``; ``"local_cpulist"`` (``numa_node`` -1 or missing: the one node
        whose CPUs hold the device's local CPUs, as on a host of one node); or
        ``"unknown"`` (None)."""
        dev = self._endpoint(x)[0]
        if dev is None:
            return None, "unknown"
        return numa_affinity(dev, self.numa_nodes)

    def nccl_path(self, a: Endpoint, b: Endpoint) -> Optional[str]:
        """NCCL's path type (LOC, PIX, PXB, PHB, SYS)."""
        return self.distance(a, b).nccl


def host_arg(host: object) -> Topology:
    """``host`` if it is a :class:`Topology`, else
    :class:`~sysverbs.ground.errors.WrongTypeError`."""
    if not isinstance(host, Topology):
        from ..ground.errors import WrongTypeError

        raise WrongTypeError(f"host must be a Topology from read_host(), not {type(host).__name__}")
    return host


def smi_hops(host: Topology, a: Endpoint, b: Endpoint) -> tuple[
        Optional[str], Optional[int], str,
        Optional[tuple[tuple[PciDevice, bool], tuple[PciDevice, bool]]]]:
    """The nvidia-smi part of :meth:`Topology.distance` (class, hops, reason) without NCCL's
    path type, and the two placed PCI functions (None when one is not placed): what the
    matrix and the ranking of :func:`assign` need for every pair."""
    return smi_between(host, host._endpoint(a), host._endpoint(b))


def endpoints(host: Topology, ends: Iterable[Endpoint]
              ) -> list[tuple[Optional[PciDevice], bool, str]]:
    """Each of ``ends`` as :func:`smi_between` takes it (the matrix and :func:`assign`
    look each device up once, not once per pair)."""
    return [host._endpoint(x) for x in ends]


def smi_between(host: Topology, a: tuple[Optional[PciDevice], bool, str],
                b: tuple[Optional[PciDevice], bool, str]) -> tuple[
        Optional[str], Optional[int], str,
        Optional[tuple[tuple[PciDevice, bool], tuple[PciDevice, bool]]]]:
    """:func:`smi_hops` of two :func:`endpoints`."""
    da, nic_a, name_a = a
    db, nic_b, name_b = b
    if da is None or db is None:
        which = name_a if da is None else name_b
        return None, None, f"{which} is not placed on a PCI function", None
    smi, hops, why = smi_distance(da, db, host.numa_nodes)
    if smi == "X" and nic_a and nic_b and name_a != name_b:
        # two RDMA devices of one function (a PF and its SF, a bond on its PF)
        smi, why = "PIX", "two RDMA devices on one PCI function"
    return smi, hops, why, ((da, nic_a), (db, nic_b))

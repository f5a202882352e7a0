"""The host model: PCI functions and bridges, NUMA nodes, GPUs and RDMA devices, from sysfs.

Every value is read with :func:`sysverbs.sysfs_read.read_sysfs_file`; links are read
with ``readlink`` and resolved by hand inside the given root, so that nothing outside
``sysfs_path`` (and ``proc_path``) is ever read: a link that leaves the root counts as
dangling.  Whatever cannot be decided is left ``None`` and said in ``Host.problems``.
"""

from __future__ import annotations

import os
import re
import sys
from stat import S_ISDIR, S_ISLNK

from ..engine.api import path_arg
from ..ground.sysfs_read import read_sysfs_file
from ..ground.text import parse_cpulist, rate_fields
from ._distance import Distance, nccl_distance, numa_affinity, smi_distance
from ._names import bdf_key, is_bdf, is_host_bridge, name_kind, natural_key
from ._record import FrozenRecord, init

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Mapping
    from typing import Optional, Union

    PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
    Endpoint = Union[str, "Gpu", "Nic"]
    #: Where a PCI function sits: its ancestors (from the top), its bridges (nearest
    #: first), its host bridge, the VMD endpoint above that, the outermost host bridge.
    _Place = tuple[tuple[str, ...], tuple[str, ...], Optional[str], Optional[str],
                   Optional[str]]

_HEX = re.compile(r"0x([0-9a-fA-F]{1,8})")
_INT = re.compile(r"-?[0-9]{1,10}")
_NODE = re.compile(r"node([0-9]{1,5})")
_UVERBS = re.compile(rb"uverbs([0-9]{1,5})")
_ATTR = 4096
_MAX_DEPTH = 64  # path components below devices/: deeper is a broken tree
_MAX_LINK_HOPS = 8
#: os.fsdecode's codec, called directly (hundreds of names per host).
_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()

NVIDIA, AMD = 0x10DE, 0x1002
#: PCI class codes (class >> 8) that make a GPU / accelerator, per vendor.
GPU_CLASSES: Mapping[int, frozenset[int]] = {
    NVIDIA: frozenset({0x0300, 0x0302, 0x0380, 0x1200}),
    AMD: frozenset({0x0300, 0x0302, 0x0380, 0x1200}),
}
BRIDGE_CLASS = 0x0604
_TOP: _Place = ((), (), None, None, None)  # devices/ itself


def _text(path: bytes, size: int = _ATTR) -> Optional[str]:
    value = read_sysfs_file(path, size)
    return None if value is None else value.decode("utf-8", "replace")


#: readlinkat and fstatat: the bus walk looks names up from open directories (a
#: shorter walk for the kernel than from the root, twice per PCI function).
_AT = os.readlink in os.supports_dir_fd and os.stat in os.supports_dir_fd
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


def _open_dir(path: bytes) -> Optional[int]:
    """A descriptor of the directory ``path`` (None: not a directory, or no ``*at``
    calls on this platform)."""
    if not _AT:
        return None
    try:
        return os.open(path, _DIR_FLAGS)
    except (OSError, ValueError):
        return None


def _is_dir(path: bytes) -> bool:
    """A directory, not a link to one (a link could lead out of the root)."""
    try:
        return S_ISDIR(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


def _hexnum(text: Optional[str]) -> Optional[int]:
    m = _HEX.fullmatch(text.strip()) if text is not None else None
    return int(m.group(1), 16) if m else None


def _int(text: Optional[str]) -> Optional[int]:
    return int(text) if text is not None and _INT.fullmatch(text.strip()) else None


class _Root:
    """A sysfs-like root: readlink and lexical resolution that never leave it."""

    def __init__(self, root: bytes) -> None:
        self.root = root.rstrip(b"/") or b"/"
        self._prefix = self.root.rstrip(b"/") + b"/"

    def inside(self, path: bytes) -> bool:
        return path == self.root or path.startswith(self._prefix)

    def readlink(self, path: bytes) -> Optional[bytes]:
        try:
            return os.readlink(path)
        except (OSError, ValueError):
            return None

    def resolve(self, link: bytes, known: Container[bytes] = ()) -> Optional[bytes]:
        """The directory the symlink ``link`` points to, resolved lexically (sysfs
        links are relative and their directories are real), followed while it is
        itself a link; None when dangling, a loop, outside the root or no directory.
        A path in ``known`` (directories just found to be such) is not looked up."""
        path = link
        for _ in range(_MAX_LINK_HOPS):
            try:
                target = os.readlink(path)
            except (OSError, ValueError):
                return None
            if target.startswith(b"/"):
                # An absolute target means the real /sys: map it into this root.
                if self.root != b"/sys" and target.startswith(b"/sys/"):
                    target = self.root + target[4:]
                path = os.path.normpath(target)
            else:
                rest = target
                ups = 1  # the link's own name
                while rest.startswith(b"../"):
                    ups, rest = ups + 1, rest[3:]
                base = path.rsplit(b"/", ups)[0] if path.count(b"/") > ups else b""
                path = base + b"/" + rest
                if b"/." in path or b"//" in path or rest.startswith(b"."):
                    path = os.path.normpath(path)
            if not self.inside(path):
                return None
            if path in known:
                return path
            try:
                mode = os.lstat(path).st_mode
            except (OSError, ValueError):
                return None  # dangling
            if not S_ISLNK(mode):
                return path if S_ISDIR(mode) else None
        return None

    def listdir(self, path: bytes) -> list[bytes]:
        try:
            return sorted(n for n in os.listdir(path) if not n.startswith(b"."))
        except (OSError, ValueError):
            return []


class PciDevice:
    """One PCI function (bridges included).

    ``bridges``: the BDFs of the PCI bridges above it, nearest first, root port last,
    inside its own PCI domain (for a device behind VMD the chain stops at the root port
    of the VMD domain; ``vmd`` is the VMD endpoint).  ``host_bridge``: the ``pciDDDD:BB``
    it hangs under.  ``ancestors``: every PCI node above it from the top, host bridges
    included (``("pci0000:00", "0000:00:01.0", ...)``), as the distance uses it.
    ``numa_node`` is None for -1, missing or unreadable (``numa_raw`` keeps the text).

    The ids come from the device's ``uevent`` (one read; the ``vendor``, ``class``...
    files when it has none), ``numa_node``, ``local_cpulist`` and ``physfn`` are each
    read on first use: a host has hundreds of functions and placement needs them for a
    few.
    """

    __slots__ = ("address", "bridges", "host_bridge", "ancestors", "vmd", "listed",
                 "top_host_bridge", "_bpath", "_fs", "_ids", "_more")

    def __init__(self, address: str, path: bytes, place: _Place, listed: bool, fs: _Root
                 ) -> None:
        self.address = address
        #: ``top_host_bridge``: the outermost host bridge (for VMD, the one above the
        #: VMD endpoint).
        self.ancestors, self.bridges, self.host_bridge, self.vmd, self.top_host_bridge = place
        self.listed = listed
        self._bpath = path
        self._fs = fs
        self._ids: Optional[dict[str, object]] = None
        self._more: dict[str, object] = {}

    @property
    def path(self) -> str:
        """The function's directory (``<sysfs>/devices/pci0000:00/...``)."""
        return self._bpath.decode(_FS_ENCODING, _FS_ERRORS)

    def __repr__(self) -> str:
        return f"PciDevice({self.address!r}, host_bridge={self.host_bridge!r})"

    def _id(self, key: str) -> object:
        if self._ids is None:
            self._ids = _read_ids(self._bpath, self._fs)
        return self._ids.get(key)

    def _extra(self, key: str) -> object:
        more = self._more
        if key not in more:
            path = self._bpath
            if key == "local_cpus":
                more[key] = parse_cpulist(_text(path + b"/local_cpulist"))
            elif key == "physfn":
                physfn = self._fs.readlink(path + b"/physfn")
                more[key] = os.fsdecode(os.path.basename(physfn)) if physfn else None
            else:
                raw = _text(path + b"/numa_node")
                numa = _int(raw)
                more["numa_raw"] = raw
                more["numa_node"] = numa if numa is not None and numa >= 0 else None
        return more[key]

    @property
    def vendor(self) -> Optional[int]:
        """PCI vendor id."""
        return self._id("vendor")  # type: ignore[return-value]

    @property
    def device(self) -> Optional[int]:
        """PCI device id."""
        return self._id("device")  # type: ignore[return-value]

    @property
    def subsystem_vendor(self) -> Optional[int]:
        """Subsystem vendor id."""
        return self._id("subsystem_vendor")  # type: ignore[return-value]

    @property
    def subsystem_device(self) -> Optional[int]:
        """Subsystem device id."""
        return self._id("subsystem_device")  # type: ignore[return-value]

    @property
    def pci_class(self) -> Optional[int]:
        """The 24-bit class code (``0x030200``)."""
        return self._id("pci_class")  # type: ignore[return-value]

    @property
    def driver(self) -> Optional[str]:
        """The bound driver's name."""
        return self._id("driver")  # type: ignore[return-value]

    @property
    def numa_node(self) -> Optional[int]:
        """``numa_node`` (None for -1, missing, unreadable)."""
        more = self._more  # (read for most pairs of the matrix: inlined)
        return (more["numa_node"] if "numa_node" in more  # type: ignore[return-value]
                else self._extra("numa_node"))

    @property
    def numa_raw(self) -> Optional[str]:
        """The text of ``numa_node``."""
        return self._extra("numa_raw")  # type: ignore[return-value]

    @property
    def local_cpus(self) -> Optional[frozenset[int]]:
        """The CPUs of ``local_cpulist``."""
        return self._extra("local_cpus")  # type: ignore[return-value]

    @property
    def physfn(self) -> Optional[str]:
        """The PF's address, for an SR-IOV VF."""
        return self._extra("physfn")  # type: ignore[return-value]

    @property
    def is_bridge(self) -> bool:
        cls = self.pci_class
        return isinstance(cls, int) and cls >> 8 == BRIDGE_CLASS

    @property
    def is_vf(self) -> bool:
        return self.physfn is not None



_UEVENT_HEX = re.compile(r"[0-9A-Fa-f]{1,6}")
_UEVENT_KEYS = re.compile(r"^(DRIVER|PCI_CLASS|PCI_ID|PCI_SUBSYS_ID)=(.*)$", re.M)
#: A PCI ``uevent`` exactly as the kernel writes it (``pci_uevent``, after the driver
#: core's ``DRIVER=``): read in one match.  Whatever else is parsed line by line.
_KERNEL_UEVENT = re.compile(
    rb"(?:DRIVER=([^\n]*)\n)?PCI_CLASS=([0-9A-F]{1,6})\nPCI_ID=([0-9A-F]{4}):([0-9A-F]{4})\n"
    rb"PCI_SUBSYS_ID=([0-9A-F]{4}):([0-9A-F]{4})(?:\nPCI_SLOT_NAME=[^\n]*)?"
    rb"(?:\nMODALIAS=[^\n]*)?")


def _read_ids(path: bytes, fs: _Root) -> dict[str, object]:
    """vendor, device, subsystem ids, class and driver: from ``uevent`` (PCI_ID,
    PCI_SUBSYS_ID, PCI_CLASS, DRIVER), else from the attribute files."""
    raw = read_sysfs_file(path + b"/uevent", _ATTR)
    m = _KERNEL_UEVENT.fullmatch(raw) if raw is not None else None
    if m is not None:
        driver, cls, vendor, device, sub_vendor, sub_device = m.groups()
        return {"vendor": int(vendor, 16), "device": int(device, 16),
                "subsystem_vendor": int(sub_vendor, 16),
                "subsystem_device": int(sub_device, 16), "pci_class": int(cls, 16),
                "driver": driver.decode("utf-8", "replace") if driver else None}
    return _parse_ids(None if raw is None else raw.decode("utf-8", "replace"), path, fs)


def _parse_ids(uevent: Optional[str], path: bytes, fs: _Root) -> dict[str, object]:
    """:func:`_read_ids` of a ``uevent`` in any other form, or of none."""
    ids: dict[str, object] = {}
    if uevent and "PCI_ID=" in uevent:
        kv = dict(_UEVENT_KEYS.findall(uevent))
        v, _, d = kv.get("PCI_ID", "").partition(":")
        sv, _, sd = kv.get("PCI_SUBSYS_ID", "").partition(":")
        for key, text in (("vendor", v), ("device", d), ("subsystem_vendor", sv),
                          ("subsystem_device", sd), ("pci_class", kv.get("PCI_CLASS", ""))):
            ids[key] = int(text, 16) if _UEVENT_HEX.fullmatch(text) else None
        ids["driver"] = kv.get("DRIVER") or None
        return ids
    for key, attr in (("vendor", b"vendor"), ("device", b"device"),
                      ("subsystem_vendor", b"subsystem_vendor"),
                      ("subsystem_device", b"subsystem_device"), ("pci_class", b"class")):
        ids[key] = _hexnum(_text(path + b"/" + attr))
    driver = fs.readlink(path + b"/driver")
    ids["driver"] = os.fsdecode(os.path.basename(driver)) if driver else None
    return ids


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


class Host(FrozenRecord):
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
    #: are stand-ins, judged as :func:`sysverbs.diagnosis.diagnose` ``recorded=True`` does
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
        if isinstance(x, Gpu):
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


def host_arg(host: object) -> Host:
    """``host`` if it is a :class:`Host`, else :class:`~sysverbs.errors.WrongTypeError`."""
    if not isinstance(host, Host):
        from ..ground.errors import WrongTypeError

        raise WrongTypeError(f"host must be a Host from read_host(), not {type(host).__name__}")
    return host


def smi_hops(host: Host, a: Endpoint, b: Endpoint) -> tuple[
        Optional[str], Optional[int], str,
        Optional[tuple[tuple[PciDevice, bool], tuple[PciDevice, bool]]]]:
    """The nvidia-smi part of :meth:`Host.distance` (class, hops, reason) without NCCL's
    path type, and the two placed PCI functions (None when one is not placed): what the
    matrix and the ranking of :func:`assign` need for every pair."""
    return smi_between(host, host._endpoint(a), host._endpoint(b))


def endpoints(host: Host, ends: Iterable[Endpoint]
              ) -> list[tuple[Optional[PciDevice], bool, str]]:
    """Each of ``ends`` as :func:`smi_between` takes it (the matrix and :func:`assign`
    look each device up once, not once per pair)."""
    return [host._endpoint(x) for x in ends]


def smi_between(host: Host, a: tuple[Optional[PciDevice], bool, str],
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


# --------------------------------------------------------------------------- reading


class _Reader:
    def __init__(self, sysfs: bytes, proc: bytes) -> None:
        self.fs = _Root(sysfs)
        self.sys = self.fs.root
        self.proc = proc.rstrip(b"/") or b"/"
        self.problems: list[str] = []
        self.pci: dict[str, PciDevice] = {}
        self.paths: dict[str, bytes] = {}
        self.host_bridges: set[str] = set()
        self.devices = self.sys + b"/devices"
        self._prefix = self.devices + b"/"
        self._chains: dict[bytes, Union[_Place, str]] = {}
        #: The PCI functions' directories the bus walk found to be real directories.
        self.real_dirs: set[bytes] = set()

    def note(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)

    # ---------------------------------------------------------------- the PCI tree
    def components(self, path: bytes) -> Optional[list[str]]:
        prefix = self.devices + b"/"
        if not path.startswith(prefix):
            return None
        parts = os.fsdecode(path[len(prefix):]).split("/")
        return parts if len(parts) <= _MAX_DEPTH else None

    def add_path(self, path: bytes, listed: bool) -> Optional[str]:
        """Add the PCI function at ``path`` (and the bridges above it); its BDF."""
        prefix = self._prefix
        if not path.startswith(prefix) or path.count(b"/", len(prefix)) >= _MAX_DEPTH:
            return None
        parent, _, last = path.rpartition(b"/")
        address = last.decode(_FS_ENCODING, _FS_ERRORS)
        if name_kind(address) != 1:
            return None
        known = self.paths.get(address)
        if known is not None:
            if known != path:
                self.note(f"{address}: two sysfs paths ({os.fsdecode(known)} and "
                          f"{os.fsdecode(path)}); the first is used")
            elif listed:
                self.pci[address].listed = True
            return address
        place = self._above(parent)
        if isinstance(place, str):
            self.note(f"{address}: {place} appears twice on its path (a loop); not placed")
            return None
        if address in place[0]:
            self.note(f"{address}: appears on its own path (a loop); not placed")
            return None
        self._add(address, path, place, listed)
        return address

    def _above(self, directory: bytes) -> Union[_Place, str]:
        """Where a PCI function directly in ``directory`` (a path below ``devices/``)
        sits: the PCI nodes above it (BDFs, host bridges) from the top, its bridges
        nearest first up to its host bridge, that host bridge, the VMD endpoint above
        it, the outermost host bridge.  Each BDF on the way is added as a device.  A
        name that appears twice: that name (a loop).  Kept per directory, so that the
        bridges a host's functions share are walked once."""
        hit = self._chains.get(directory)
        if hit is not None:
            return hit
        place: Union[_Place, str]
        if directory == self.devices:
            place = _TOP
        else:
            head, _, last = directory.rpartition(b"/")
            up = self._above(head)
            name = last.decode(_FS_ENCODING, _FS_ERRORS)
            kind = name_kind(name)
            if isinstance(up, str) or kind == 0:
                place = up
            elif name in up[0]:
                place = name
            else:
                ancestors, bridges, host_bridge, vmd, top = up
                if kind == 1:
                    if name not in self.paths:
                        self._add(name, directory, up, False)
                    place = ((*ancestors, name), (name, *bridges), host_bridge, vmd, top)
                else:
                    self.host_bridges.add(name)
                    vmd = ancestors[-1] if ancestors and is_bdf(ancestors[-1]) else None
                    place = ((*ancestors, name), (), name, vmd, top or name)
        self._chains[directory] = place
        return place

    def _add(self, address: str, path: bytes, place: _Place, listed: bool) -> None:
        if place[2] is None:
            self.note(f"{address}: no host bridge (pciDDDD:BB) above it in sysfs")
        self.paths[address] = path
        self.pci[address] = PciDevice(address, path, place, listed, self.fs)

    def read_pci(self) -> None:
        bus = self.sys + b"/bus/pci/devices/"
        entries = self.fs.listdir(bus)
        bus_fd, devices_fd = _open_dir(bus), _open_dir(self.devices)
        try:
            for entry in entries:
                target = self._bus_target(bus, entry, bus_fd, devices_fd)
                if target is None:
                    self.note(f"bus/pci/devices/{os.fsdecode(entry)}: dangling link (or "
                              "outside the root, or to no directory)")
                    continue
                self.real_dirs.add(target)
                if target.rpartition(b"/")[2] != entry:
                    self.note(f"bus/pci/devices/{os.fsdecode(entry)}: points to "
                              f"{os.fsdecode(target)}")
                elif self.add_path(target, True) is None and is_bdf(os.fsdecode(entry)):
                    self.note(f"{os.fsdecode(entry)}: no PCI path below devices/")
        finally:
            for fd in (bus_fd, devices_fd):
                if fd is not None:
                    os.close(fd)
        if not entries:
            self._walk(self.devices, 0)

    def _bus_target(self, bus: bytes, entry: bytes, bus_fd: Optional[int],
                    devices_fd: Optional[int]) -> Optional[bytes]:
        """:meth:`_Root.resolve` of the ``bus/pci/devices`` entry ``entry``.  The
        kernel's own link, ``../../../devices/`` and plain names, needs no lexical work:
        it is taken as it is when it leads to a directory (looked up from the open
        ``bus`` and ``devices`` directories when given); anything else is resolved in
        full."""
        try:
            target = (os.readlink(bus + entry) if bus_fd is None
                      else os.readlink(entry, dir_fd=bus_fd))
        except (OSError, ValueError):
            return None
        rest = target[17:]
        if target.startswith(b"../../../devices/") and b"/." not in rest and (
                b"//" not in rest and not rest.startswith(b".")):
            path = self._prefix + rest
            try:
                st = (os.lstat(path) if devices_fd is None
                      else os.lstat(rest, dir_fd=devices_fd))
            except (OSError, ValueError):
                return None  # dangling
            if S_ISDIR(st.st_mode):
                return path
        return self.fs.resolve(bus + entry)

    def _walk(self, path: bytes, depth: int, in_pci: bool = False) -> None:
        """Find PCI functions below ``devices/`` when ``bus/pci/devices`` lists none:
        inside a host bridge only BDF and host-bridge (VMD) directories are entered;
        above one, the first levels (platform/ACPI parents of host bridges)."""
        if depth > _MAX_DEPTH:
            return
        for entry in self.fs.listdir(path):
            name = os.fsdecode(entry)
            child = path + b"/" + entry
            kind = name_kind(name)
            if kind == 0 and (in_pci or depth > 2 or name in ("virtual", "system")):
                continue
            if not _is_dir(child):
                continue
            if kind == 1:
                self.add_path(child, True)
            self._walk(child, depth + 1, in_pci or kind != 0)

    def pci_at(self, path: bytes) -> Optional[str]:
        """The PCI function at or above a device directory."""
        last = path.rpartition(b"/")[2].decode(_FS_ENCODING, _FS_ERRORS)
        if self.paths.get(last) == path:
            return last  # a PCI function already read
        parts = self.components(path)
        if parts is None:
            return None
        for i in range(len(parts), 0, -1):
            if is_bdf(parts[i - 1]):
                return self.add_path(self.devices + b"/" + os.fsencode("/".join(parts[:i])),
                                     False)
        return None

    # ---------------------------------------------------------------- NUMA
    def numa_nodes(self) -> dict[int, frozenset[int]]:
        base = self.sys + b"/devices/system/node"
        nodes: dict[int, frozenset[int]] = {}
        for entry in self.fs.listdir(base):
            m = _NODE.fullmatch(os.fsdecode(entry))
            if m is None:
                continue
            cpus = parse_cpulist(_text(base + b"/" + entry + b"/cpulist"))
            if cpus is None:
                self.note(f"devices/system/node/{os.fsdecode(entry)}/cpulist unreadable")
                cpus = frozenset()
            nodes[int(m.group(1))] = cpus
        return dict(sorted(nodes.items()))

    # ---------------------------------------------------------------- GPUs
    def gpus(self) -> tuple[Gpu, ...]:
        found: list[PciDevice] = []
        parents = {d.ancestors[-1] for d in self.pci.values() if d.ancestors}
        for dev in self.pci.values():
            if dev.address in parents:
                continue  # a bridge (it has PCI functions below it)
            vendor = dev.vendor
            classes = GPU_CLASSES.get(vendor) if vendor is not None else None
            cls = dev.pci_class if classes else None
            if classes and cls is not None and cls >> 8 in classes:
                found.append(dev)
        found.sort(key=lambda d: bdf_key(d.address))
        out: list[Gpu] = []
        for i, dev in enumerate(found):
            uuid = minor = model = None
            if dev.vendor == NVIDIA:
                info = _text(self.proc + b"/driver/nvidia/gpus/" + dev.address.encode()
                             + b"/information", 8192)
                if info is not None:
                    fields = {}
                    for line in info.splitlines():
                        k, sep, v = line.partition(":")
                        if sep:
                            fields[k.strip()] = v.strip()
                    uuid = fields.get("GPU UUID") or None
                    minor = _int(fields.get("Device Minor"))
                    model = fields.get("Model") or None
            out.append(Gpu(i, dev.address, "nvidia" if dev.vendor == NVIDIA else "amd", dev,
                           uuid, minor, model))
        return tuple(out)

    # ---------------------------------------------------------------- RDMA devices
    def _netdev_pci(self, ifname: str) -> tuple[Optional[str], str]:
        link = self.sys + b"/class/net/" + os.fsencode(ifname)
        target = self.fs.resolve(link)
        if target is None:
            return None, f"netdev {ifname} not found in class/net"
        parts = self.components(target)
        if parts is None or parts[:1] == ["virtual"]:
            return None, f"netdev {ifname} is virtual (no PCI device)"
        address = self.pci_at(os.path.dirname(os.path.dirname(target)))
        if address is None:
            return None, f"netdev {ifname} has no PCI ancestor"
        return address, f"via netdev {ifname}"

    def _ports(self, ibdev: bytes, parent_dir: Optional[bytes], parent_net: list[bytes]
               ) -> tuple[Port, ...]:
        out: list[Port] = []
        base = ibdev + b"/ports"
        numbers = sorted(int(n) for n in self.fs.listdir(base) if n.isdigit())
        for n in numbers:
            p = base + b"/%d" % n
            state = _text(p + b"/state", 64)
            ll = _text(p + b"/link_layer", 64)
            rate_text = _text(p + b"/rate", 128)
            rate = rate_fields(rate_text)
            # The netdev of GID 0 (else 1): the port's default GIDs, whose netdev is
            # the port's.  An InfiniBand port has none (the kernel answers EINVAL).
            netdevs: list[str] = []
            if ll != "InfiniBand":
                ndevs = p + b"/gid_attrs/ndevs/"
                v = _text(ndevs + b"0", 64) or _text(ndevs + b"1", 64)
                if v:
                    netdevs.append(v)
            if not netdevs and parent_net:
                if len(numbers) == 1:
                    netdevs = [os.fsdecode(x) for x in parent_net]
                else:
                    for x in parent_net:
                        dp = _int(_text(parent_dir + b"/net/" + x + b"/dev_port", 32)
                                  if parent_dir else None)
                        if dp == n - 1:
                            netdevs.append(os.fsdecode(x))
            out.append(Port(
                port=n,
                state=state.partition(":")[2].strip() if state and ":" in state else state,
                link_layer=ll,
                rate_gbps=rate[0] if rate is not None else None,
                rate=rate_text,
                netdevs=tuple(netdevs),
            ))
        return tuple(out)

    def _bond_slave(self, netdevs: tuple[str, ...], parent_dir: Optional[bytes],
                    parent_net: list[bytes]) -> bool:
        """A netdev of the device (of a port, or of its PCI function) is enslaved to a
        bond: it has a ``master`` link (the kernel makes one for any upper device) and
        ``bonding_slave/``, or that master has ``bonding/``."""
        bases = [parent_dir + b"/net/" + n for n in parent_net] if parent_dir else []
        own = {os.fsdecode(n) for n in parent_net} if parent_dir else set()
        for name in netdevs:
            if name not in own:
                base = self.fs.resolve(self.sys + b"/class/net/" + os.fsencode(name))
                if base is not None:
                    bases.append(base)
        for base in bases:
            master = self.fs.readlink(base + b"/master")
            if master is None:
                continue
            if _is_dir(base + b"/bonding_slave"):
                return True
            upper = self.fs.resolve(self.sys + b"/class/net/" + os.path.basename(master))
            if upper is not None and _is_dir(upper + b"/bonding"):
                return True
        return False

    def uverbs_of(self) -> dict[str, int]:
        base = self.sys + b"/class/infiniband_verbs"
        found: dict[str, int] = {}
        for entry in self.fs.listdir(base):
            m = _UVERBS.fullmatch(entry)
            if m is None:
                continue
            ibdev = read_sysfs_file(base + b"/" + entry + b"/ibdev", 64)
            if ibdev:
                name = ibdev.split(b"\0", 1)[0].decode("utf-8", "replace")
                n = int(m.group(1))
                if name not in found or n < found[name]:
                    found[name] = n
        return found

    def nics(self) -> tuple[Nic, ...]:
        cls = self.sys + b"/class/infiniband"
        out: list[Nic] = []
        uverbs = self.uverbs_of()
        for entry in self.fs.listdir(cls):
            name = os.fsdecode(entry)
            ibdev = self.fs.resolve(cls + b"/" + entry)
            if ibdev is None:
                if _is_dir(cls + b"/" + entry):
                    ibdev = cls + b"/" + entry
                else:
                    self.note(f"class/infiniband/{name}: dangling link")
                    continue
            dev_link = ibdev + b"/device"
            parent_dir = self.fs.resolve(dev_link, self.real_dirs)
            address: Optional[str] = None
            parent: Optional[str] = None
            kind = "unplaced"
            placement = ""
            if parent_dir is not None:
                parent = os.fsdecode(os.path.basename(parent_dir))
                address = self.pci_at(parent_dir)
                if address is None:
                    placement = f"its device ({parent}) has no PCI ancestor"
                elif is_bdf(parent):
                    dev = self.pci[address]
                    kind = "vf" if dev.is_vf else "pf"
                    if "bond" in name:
                        kind = "bond"
                    placement = f"at PCI function {address}"
                else:
                    kind = "sf" if ".sf." in parent else "aux"
                    placement = f"{parent} on PCI function {address}"
            elif os.path.lexists(dev_link):
                placement = ("its device link is dangling (or leaves the root, or leads to "
                             "no directory)")
            else:
                ifname = _text(ibdev + b"/parent", 64)
                if ifname:
                    address, placement = self._netdev_pci(ifname)
                    parent = ifname
                    kind = "soft" if address is not None else "unplaced"
                else:
                    placement = "no device link and no parent netdev"
            if address is None:
                self.note(f"{name}: unplaced: {placement}")
            net_dir = parent_dir if kind in ("pf", "vf", "bond") else None
            parent_net = self.fs.listdir(net_dir + b"/net") if net_dir is not None else []
            ports = self._ports(ibdev, net_dir, parent_net)
            nd = tuple(n for p in ports for n in p.netdevs)
            guid = _text(ibdev + b"/node_guid", 64)
            slave = kind != "bond" and self._bond_slave(
                nd, parent_dir if kind in ("pf", "vf") else None, parent_net)
            out.append(Nic(name, address, kind, placement, parent, ports, slave, guid,
                           uverbs.get(name)))
        out.sort(key=lambda n: natural_key(n.name))
        return tuple(out)


def _bytes_path(value: Optional[PathArg], default: bytes, what: str) -> bytes:
    if value is None:
        return default
    raw = path_arg(value, what)  # WrongTypeError (a TypeError), UsageError (a ValueError)
    return os.path.abspath(raw).rstrip(b"/") or b"/"


def read_host(
    sysfs_path: Optional[PathArg] = None,
    proc_path: Optional[PathArg] = None,
    dev_dir: Optional[PathArg] = None,
    *,
    recorded: bool = False,
) -> Host:
    """Read the host's PCI tree, NUMA nodes, GPUs and RDMA devices (see :class:`Host`).

    ``sysfs_path`` stands for ``/sys`` (default ``$SYSFS_PATH``, else ``/sys``),
    ``proc_path`` for ``/proc`` (only ``driver/nvidia/gpus/*/information`` is read
    there), ``dev_dir`` for ``/dev/infiniband`` (kept for the usable filter of
    :func:`assign`; ``recorded``: the tree is a recording, such as a bundled fixture,
    whose device nodes are stand-ins).  Nothing outside these roots is read.  Errors in
    the tree never raise: they are in ``problems``.
    """
    if sysfs_path is None:
        from ..engine.api import env_sysfs_root

        sysfs_path = env_sysfs_root()  # $SYSFS_PATH, else /sys (as libibverbs)
    if not isinstance(recorded, bool):
        from ..ground.errors import WrongTypeError

        raise WrongTypeError(f"recorded must be a bool, not {type(recorded).__name__}")
    sysfs = _bytes_path(sysfs_path, b"/sys", "sysfs_path")
    proc = _bytes_path(proc_path, b"/proc", "proc_path")
    dev = _bytes_path(dev_dir, b"/dev/infiniband", "dev_dir")
    r = _Reader(sysfs, proc)
    r.read_pci()
    numa = r.numa_nodes()
    nics = r.nics()
    gpus = r.gpus()
    # Four-digit domains (all but VMD's): the addresses, of one width, sort as text.
    order = (sorted(r.pci) if all(len(a) == 12 for a in r.pci)
             else sorted(r.pci, key=bdf_key))
    pci = {a: r.pci[a] for a in order}
    return Host(
        sysfs_path=os.fsdecode(sysfs),
        proc_path=os.fsdecode(proc),
        dev_dir=os.fsdecode(dev),
        pci=pci,
        host_bridges=tuple(sorted(r.host_bridges, key=lambda h: bdf_key(
            h[3:] + ":00.0" if is_host_bridge(h) else h))),
        numa_nodes=numa,
        gpus=gpus,
        nics=nics,
        problems=tuple(r.problems),
        recorded=recorded,
    )

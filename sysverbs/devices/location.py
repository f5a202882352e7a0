"""Where an RDMA device sits: its PCI function, NUMA node and CPUs, SR-IOV and
auxiliary-bus relations, the netdevs of each port and its char devices.

Everything comes from sysfs links and attribute files (each value read by
:func:`sysverbs.ground.sysfs_read.read_sysfs_file` with a bounded size) plus a ``stat``
of the ``/dev`` nodes.  Missing pieces are ``None`` or empty, never an error.

Netdevs of a port:

* Ethernet (RoCE): the netdevs of the port's GIDs (``gid_attrs/ndevs``), the
  ``parent`` netdev of a software device (rxe, siw); when neither names one (no
  GIDs yet, old kernels), the Ethernet netdevs in the parent device's ``net/``
  (for a multi-port device only those whose ``dev_port`` is the port's).
* InfiniBand (IPoIB): the IPoIB netdevs in the parent device's ``net/`` whose
  hardware address ends in the **port** GUID (GID 0's interface id; on a
  multi-port HCA it differs from the node GUID).

>>> import tempfile
>>> from sysverbs import testing
>>> from sysverbs.devices.location import device_location
>>> with tempfile.TemporaryDirectory() as tmp:
...     host = testing.materialize(testing.fixture_path("mlx4"), tmp)
...     topo = device_location("mlx4_0", sysfs_path=host.sysfs, dev_dir=host.dev)
>>> topo.pci.address, hex(topo.pci.vendor), topo.pci.numa_node, len(topo.pci.virtfns)
('0000:04:00.0', '0x15b3', 0, 8)
>>> topo.port_netdevs(1), topo.port_netdevs(2)
(('ib0',), ('ib1',))
>>> [c.name for c in topo.char_devices if c.kind == "uverbs"]
['uverbs0']
"""

from __future__ import annotations

import os
import re
import stat
from contextvars import ContextVar, Token

from ..engine.device import makedev
from ..ground.errors import WrongTypeError
from ..ground.hostroot import HostRoot
from ..ground.records import FrozenRecord, init
from ..ground.sysfs_read import ABI_SIZE, DEV_SIZE, IBDEV_SIZE, cstr, read_sysfs_file, scan_u_u
from ..ground.text import parse_cpulist
from .attributes import LinkLayer, RawText, device_status, read_text, resolve_ibdev

# no typing or dataclasses at run time (devices/attributes.py says why)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from .attributes import DeviceArg, PathArg

__all__ = [
    "AuxDevice",
    "CharDevice",
    "Netdev",
    "PciFunction",
    "DeviceLocation",
    "LocationScan",
    "device_location",
    "ipoib_netdevs",
    "parse_cpulist",
]

# Patterns, compiled by re on first use (devices/attributes.py says why).
_BDF = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_AUX_RDMA = r".+\.(?:rdma|roce|iwarp)(?:-rep)?\.\d+"
_HEXNUM = r"0x([0-9a-fA-F]{1,8})"
_INT = r"-?[0-9]{1,10}"
ARPHRD_INFINIBAND = 32
_MAX_UP = 16  # how many directories up from the parent device a PCI function is looked for


class PciFunction(FrozenRecord):
    """The PCI function an RDMA device belongs to (for a sub-function: its PF).

    ``numa_node`` is the kernel's value (-1: no NUMA affinity).  ``local_cpus`` is the
    set of CPUs of ``local_cpulist`` (else of the ``local_cpus`` mask).  ``physfn`` is
    the PF's address when this is an SR-IOV VF; ``virtfns`` the VFs' addresses in VF
    order when this is a PF.  ``raw`` keeps the text of each attribute file.
    """

    __slots__ = _fields = ("address", "path", "vendor", "device", "subsystem_vendor",
                           "subsystem_device", "pci_class", "driver", "numa_node", "local_cpus",
                           "physfn", "virtfns", "sriov_numvfs", "sriov_totalvfs", "raw")
    address: str
    path: str
    vendor: Optional[int]
    device: Optional[int]
    subsystem_vendor: Optional[int]
    subsystem_device: Optional[int]
    pci_class: Optional[int]
    driver: Optional[str]
    numa_node: Optional[int]
    local_cpus: Optional[frozenset[int]]
    physfn: Optional[str]
    virtfns: tuple[str, ...]
    sriov_numvfs: Optional[int]
    sriov_totalvfs: Optional[int]
    raw: RawText

    def __init__(self, address: str, path: str, vendor: Optional[int], device: Optional[int],
                 subsystem_vendor: Optional[int], subsystem_device: Optional[int],
                 pci_class: Optional[int], driver: Optional[str], numa_node: Optional[int],
                 local_cpus: Optional[frozenset[int]], physfn: Optional[str],
                 virtfns: tuple[str, ...], sriov_numvfs: Optional[int],
                 sriov_totalvfs: Optional[int], raw: RawText) -> None:
        init(self, address, path, vendor, device, subsystem_vendor, subsystem_device, pci_class,
             driver, numa_node, local_cpus, physfn, virtfns, sriov_numvfs, sriov_totalvfs, raw)

    @property
    def is_vf(self) -> bool:
        return self.physfn is not None


class AuxDevice(FrozenRecord):
    """An auxiliary-bus device: the one the RDMA driver bound to (``mlx5_core.rdma.0``,
    ``ice.roce.0``), or the sub-function the RDMA device hangs on (``mlx5_core.sf.2``)."""

    __slots__ = _fields = ("name", "driver", "path")
    name: str
    driver: Optional[str]
    path: str

    def __init__(self, name: str, driver: Optional[str], path: str) -> None:
        init(self, name, driver, path)


class Netdev(FrozenRecord):
    """A network interface of one port and how it was found (``via``: ``"gid_attrs"``,
    ``"parent"``, ``"device/net"`` or ``"port_guid"`` for IPoIB)."""

    __slots__ = _fields = ("name", "port", "via", "ifindex", "operstate", "address")
    name: str
    port: int
    via: str
    ifindex: Optional[int]
    operstate: Optional[str]
    address: Optional[str]

    def __init__(self, name: str, port: int, via: str, ifindex: Optional[int],
                 operstate: Optional[str], address: Optional[str]) -> None:
        init(self, name, port, via, ifindex, operstate, address)


class CharDevice(FrozenRecord):
    """A char device of the RDMA device: ``uverbs`` (verbs), ``umad``/``issm`` (MADs,
    per port) or ``rdma_cm`` (librdmacm's, shared by all devices).

    ``dev`` is ``(major, minor)`` from sysfs; ``node`` the path in the /dev directory;
    ``node_ok`` says that the node exists and is that char device.
    """

    __slots__ = _fields = ("kind", "name", "port", "dev", "abi_version", "node", "node_exists",
                           "node_is_chardev", "node_ok")
    kind: str
    name: str
    port: Optional[int]
    dev: Optional[tuple[int, int]]
    abi_version: Optional[int]
    node: str
    node_exists: bool
    node_is_chardev: bool
    node_ok: bool

    def __init__(self, kind: str, name: str, port: Optional[int], dev: Optional[tuple[int, int]],
                 abi_version: Optional[int], node: str, node_exists: bool, node_is_chardev: bool,
                 node_ok: bool) -> None:
        init(self, kind, name, port, dev, abi_version, node, node_exists, node_is_chardev, node_ok)


class DeviceLocation(FrozenRecord):
    """Where the device ``name`` sits (see the module docstring)."""

    __slots__ = _fields = ("name", "parent", "parent_subsystem", "pci", "auxiliary",
                           "pf_rdma_devices", "vf_rdma_devices", "netdevs", "char_devices")
    name: str
    parent: Optional[str]
    parent_subsystem: Optional[str]
    pci: Optional[PciFunction]
    auxiliary: Optional[AuxDevice]
    pf_rdma_devices: tuple[str, ...]
    vf_rdma_devices: tuple[str, ...]
    netdevs: tuple[Netdev, ...]
    char_devices: tuple[CharDevice, ...]

    def __init__(self, name: str, parent: Optional[str], parent_subsystem: Optional[str],
                 pci: Optional[PciFunction], auxiliary: Optional[AuxDevice],
                 pf_rdma_devices: tuple[str, ...], vf_rdma_devices: tuple[str, ...],
                 netdevs: tuple[Netdev, ...], char_devices: tuple[CharDevice, ...]) -> None:
        init(self, name, parent, parent_subsystem, pci, auxiliary, pf_rdma_devices, vf_rdma_devices,
             netdevs, char_devices)

    @property
    def numa_node(self) -> Optional[int]:
        return self.pci.numa_node if self.pci is not None else None

    def port_netdevs(self, port: int) -> tuple[str, ...]:
        """The names of the netdevs of one port."""
        return tuple(n.name for n in self.netdevs if n.port == port)


# ------------------------------------------------------------------------------ helpers


def _parse_cpumask(text: Optional[str]) -> Optional[frozenset[int]]:
    """``local_cpus``: comma-separated 32-bit hex words, most significant first."""
    if not text or not re.fullmatch(r"[0-9a-fA-F]{1,8}(?:,[0-9a-fA-F]{1,8}){0,255}", text):
        return None
    value = 0
    for word in text.split(","):
        value = (value << 32) | int(word, 16)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def _hexnum(text: Optional[str]) -> Optional[int]:
    m = re.fullmatch(_HEXNUM, text) if text is not None else None
    return int(m.group(1), 16) if m else None


def _int(text: Optional[str]) -> Optional[int]:
    return int(text) if text is not None and re.fullmatch(_INT, text) else None


def _link_name(path: bytes) -> Optional[str]:
    """The last component of a symlink's target (``driver`` -> ``mlx5_core``), or None."""
    from ..ground import inputs

    try:
        target = inputs.readlink(path)
    except (OSError, ValueError):
        return None
    name = os.path.basename(target.rstrip(b"/"))
    return os.fsdecode(name) if name else None


def _listdir(path: bytes) -> list[bytes]:
    from ..ground.sysfs_read import listdir

    try:
        return sorted(n for n in listdir(path) if not n.startswith(b"."))
    except (OSError, ValueError):
        return []


def _subsystem(path: bytes) -> Optional[str]:
    return _link_name(path + b"/subsystem")


def _sysfs_root(ibdev_path: bytes, name: bytes) -> Optional[bytes]:
    suffix = b"/class/infiniband/" + name
    return ibdev_path[: -len(suffix)] if ibdev_path.endswith(suffix) else None


def _pci_function(start: bytes) -> Optional[bytes]:
    """The nearest directory at or above ``start`` that is a PCI device."""
    path = start
    for _ in range(_MAX_UP):
        subsystem = _subsystem(path)
        if subsystem == "pci" or (
            subsystem is None and re.fullmatch(_BDF, os.fsdecode(os.path.basename(path)))
        ):
            return path
        parent = os.path.dirname(path)
        if parent == path or os.path.basename(parent) in (b"devices", b""):
            return None
        path = parent
    return None


def _pci(path: bytes) -> PciFunction:
    raw: dict[str, Optional[str]] = {}
    for attr in ("vendor", "device", "subsystem_vendor", "subsystem_device", "class",
                 "numa_node", "local_cpulist", "local_cpus", "sriov_numvfs", "sriov_totalvfs"):
        raw[attr] = read_text(path + b"/" + attr.encode())
    virtfns = []
    for name in _listdir(path):
        m = re.fullmatch(rb"virtfn(\d{1,6})", name)
        if m:
            target = _link_name(path + b"/" + name)
            if target is not None:
                virtfns.append((int(m.group(1)), target))
    cpus = parse_cpulist(raw["local_cpulist"])
    if cpus is None:
        cpus = _parse_cpumask(raw["local_cpus"])
    return PciFunction(
        address=os.fsdecode(os.path.basename(path)),
        path=os.fsdecode(path),
        vendor=_hexnum(raw["vendor"]),
        device=_hexnum(raw["device"]),
        subsystem_vendor=_hexnum(raw["subsystem_vendor"]),
        subsystem_device=_hexnum(raw["subsystem_device"]),
        pci_class=_hexnum(raw["class"]),
        driver=_link_name(path + b"/driver"),
        numa_node=_int(raw["numa_node"]),
        local_cpus=cpus,
        physfn=_link_name(path + b"/physfn"),
        virtfns=tuple(t for _, t in sorted(virtfns)),
        sriov_numvfs=_int(raw["sriov_numvfs"]),
        sriov_totalvfs=_int(raw["sriov_totalvfs"]),
        raw=RawText(raw),
    )


def _rdma_devices_of(pci_dir: bytes) -> tuple[str, ...]:
    return tuple(os.fsdecode(n) for n in _listdir(pci_dir + b"/infiniband"))


def _auxiliary(parent: Optional[bytes], subsystem: Optional[str]) -> Optional[AuxDevice]:
    if parent is None:
        return None
    if subsystem == "auxiliary":
        return AuxDevice(os.fsdecode(os.path.basename(parent)),
                         _link_name(parent + b"/driver"), os.fsdecode(parent))
    for name in _listdir(parent):
        if re.fullmatch(_AUX_RDMA, os.fsdecode(name)) and _subsystem(parent + b"/" + name) == (
            "auxiliary"
        ):
            path = parent + b"/" + name
            return AuxDevice(os.fsdecode(name), _link_name(path + b"/driver"), os.fsdecode(path))
    return None


def _netdev(root: Optional[bytes], net_dir: Optional[bytes], name: str, port: int,
            via: str) -> Netdev:
    from ..ground import inputs

    base: Optional[bytes] = None
    enc = os.fsencode(name)
    if net_dir is not None and inputs.isdir(net_dir + b"/" + enc):
        base = net_dir + b"/" + enc
    elif root is not None and b"/" not in enc:
        base = root + b"/class/net/" + enc
    if base is None:
        return Netdev(name, port, via, None, None, None)
    return Netdev(
        name, port, via,
        _int(read_text(base + b"/ifindex", 32)),
        read_text(base + b"/operstate", 64) or None,
        read_text(base + b"/address", 256) or None,
    )


def _ipoib_guid(address: Optional[str]) -> Optional[int]:
    """The GUID in an IPoIB hardware address (20 bytes: QPN, then the 16-byte GID)."""
    if address is None or not re.fullmatch(r"[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){19}", address):
        return None
    return int(address.replace(":", "")[-16:], 16)


def _char_node(dev_dir: bytes, name: bytes, dev: Optional[tuple[int, int]]
               ) -> tuple[str, bool, bool, bool]:
    from ..ground import inputs

    node = dev_dir + b"/" + name
    try:
        st = inputs.stat(node)
    except (OSError, ValueError):
        return os.fsdecode(node), False, False, False
    is_chr = stat.S_ISCHR(st.st_mode)
    ok = is_chr and dev is not None and (
        dev == (0, 0) or st.st_rdev == makedev(dev[0], dev[1])
    )
    return os.fsdecode(node), True, is_chr, ok


def _dev_of(entry: bytes) -> Optional[tuple[int, int]]:
    value = read_sysfs_file(entry + b"/dev", DEV_SIZE)
    return scan_u_u(value) if value else None


#: A char-device class directory's entries by device: cstr(ibdev) -> [(entry, path)],
#: in listing order.
_Index = dict[bytes, list[tuple[bytes, bytes]]]


class LocationScan:
    """One pass of :func:`device_location` over many devices: each char-device class
    directory (``infiniband_verbs``, ``infiniband_mad``) is listed and its ``ibdev``
    files read once, at the first device that needs it, instead of once per device, so
    that N devices cost O(N) reads, not O(N*N).  Give it as ``scan=`` or enter it
    (``with LocationScan():``): every call inside uses it.  Its answers are those
    directories as they were at that first read; without a scan every call reads them
    afresh.
    """

    def __init__(self) -> None:
        self._indexes: dict[bytes, _Index] = {}
        self._tokens: list[Token[Optional[LocationScan]]] = []

    def __enter__(self) -> LocationScan:
        self._tokens.append(_SCAN.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _SCAN.reset(self._tokens.pop())

    def entries(self, class_dir: bytes, name: bytes, prefixes: tuple[bytes, ...] = ()
                ) -> list[tuple[bytes, bytes]]:
        """The entries of ``class_dir`` whose ``ibdev`` is ``name`` (see :func:`_class_index`)."""
        index = self._indexes.get(class_dir)
        if index is None:
            index = self._indexes[class_dir] = _class_index(class_dir, prefixes)
        return index.get(name, [])


_SCAN: ContextVar[Optional[LocationScan]] = ContextVar("sysverbs_topology_scan", default=None)


def _class_index(class_dir: bytes, prefixes: tuple[bytes, ...] = ()) -> _Index:
    """Each entry of ``class_dir`` (only those starting with one of ``prefixes``, when
    given) under the device its ``ibdev`` file names; entries without one are left out."""
    index: _Index = {}
    for entry in _listdir(class_dir):
        if prefixes and not entry.startswith(prefixes):
            continue
        path = class_dir + b"/" + entry
        ibdev = read_sysfs_file(path + b"/ibdev", IBDEV_SIZE)
        if ibdev is not None:
            index.setdefault(cstr(ibdev), []).append((entry, path))
    return index


def _char_devices(root: Optional[bytes], ibdev_path: bytes, name: bytes, dev_dir: bytes,
                  scan: LocationScan) -> list[CharDevice]:
    out: list[CharDevice] = []
    if root is not None:
        uverbs_dir = root + b"/class/infiniband_verbs"
    else:  # libibverbs' netlink-mode fallback: the parent device's infiniband_verbs/
        uverbs_dir = ibdev_path + b"/device/infiniband_verbs"
    for entry, path in scan.entries(uverbs_dir, name):
        dev = _dev_of(path)
        abi_text = read_text(path + b"/abi_version", ABI_SIZE)
        out.append(CharDevice("uverbs", os.fsdecode(entry), None, dev, _int(abi_text),
                              *_char_node(dev_dir, entry, dev)))
    if root is not None:
        mad_dir = root + b"/class/infiniband_mad"
        for entry, path in scan.entries(mad_dir, name, (b"umad", b"issm")):
            kind = "umad" if entry.startswith(b"umad") else "issm"
            dev = _dev_of(path)
            port = _int(read_text(path + b"/port", 32))
            out.append(CharDevice(kind, os.fsdecode(entry), port, dev, None,
                                  *_char_node(dev_dir, entry, dev)))
        from ..ground import inputs

        cm = root + b"/class/misc/rdma_cm"
        if inputs.isdir(cm):
            dev = _dev_of(cm)
            abi_text = read_text(cm + b"/abi_version", 8)
            out.append(CharDevice("rdma_cm", "rdma_cm", None, dev, _int(abi_text),
                                  *_char_node(dev_dir, b"rdma_cm", dev)))
    return out


def _parent(ibdev_path: bytes) -> Optional[bytes]:
    """The device directory an IB device hangs on (``device`` resolved), or None."""
    from ..ground import inputs

    if not inputs.lexists(ibdev_path + b"/device"):
        return None
    parent = inputs.realpath(ibdev_path + b"/device")
    return parent if inputs.isdir(parent) else None


def _ipoib_names(parent_net: list[tuple[bytes, bytes]], guid: Optional[int]) -> list[str]:
    """The IPoIB netdevs among the parent's (``(name, path)``) of the port whose GUID
    is ``guid``: of type ARPHRD_INFINIBAND, with that GUID in their hardware address."""
    return [os.fsdecode(n) for n, base in parent_net
            if _int(read_text(base + b"/type", 32)) == ARPHRD_INFINIBAND
            and guid is not None and _ipoib_guid(read_text(base + b"/address", 256)) == guid]


def ipoib_netdevs(device: DeviceArg, port_guid: Optional[int], *,
                  sysfs_path: Optional[PathArg] = None) -> tuple[str, ...]:
    """The netdevs of an InfiniBand port whose port GUID (its GID 0's interface id) is
    ``port_guid``, as :func:`device_location` finds them (``via="port_guid"``), without
    reading the rest of the device: what ``sysverbs env`` and ``run`` need of an
    InfiniBand port whose GID table they already read."""
    ibdev_path, _ = resolve_ibdev(device, sysfs_path)
    parent = _parent(ibdev_path)
    if parent is None:
        return ()
    net_dir = parent + b"/net"
    return tuple(_ipoib_names([(n, net_dir + b"/" + n) for n in _listdir(net_dir)],
                              port_guid))


def device_location(
    device: DeviceArg,
    *,
    sysfs_path: Optional[PathArg] = None,
    dev_dir: Optional[PathArg] = None,
    scan: Optional[LocationScan] = None,
) -> DeviceLocation:
    """The topology of a device (a :class:`~sysverbs.Device`, an IB device name looked
    up in ``<sysfs_path>/class/infiniband``, or an IB device directory).

    ``dev_dir`` is where the char device nodes are (default: the device's, else
    ``/dev/infiniband``).  ``scan``: a :class:`LocationScan` to share the char-device
    directories' reads with other calls (default: the one entered, if any).
    """
    from ..engine.device import Device
    from ..ground import inputs

    if scan is not None and not isinstance(scan, LocationScan):
        raise WrongTypeError(f"scan is a LocationScan, not {type(scan).__name__}")
    ibdev_path, name = resolve_ibdev(device, sysfs_path)
    if dev_dir is None and isinstance(device, Device):
        ddir = os.fsencode(device.dev_dir)
    else:
        ddir = HostRoot.resolve(sysfs_path, dev_dir).dev
    root = _sysfs_root(ibdev_path, name)
    parent = _parent(ibdev_path)
    subsystem = _subsystem(parent) if parent is not None else None
    pci_dir = _pci_function(parent) if parent is not None else None
    pci = _pci(pci_dir) if pci_dir is not None else None
    pf_devs: tuple[str, ...] = ()
    vf_devs: list[str] = []
    if pci_dir is not None and pci is not None:
        if pci.physfn is not None:
            pf_devs = _rdma_devices_of(inputs.realpath(pci_dir + b"/physfn"))
        for vf in pci.virtfns:
            vf_devs.extend(_rdma_devices_of(os.path.dirname(pci_dir) + b"/" + os.fsencode(vf)))

    attrs = device_status(ibdev_path)
    net_dir = parent + b"/net" if parent is not None else None
    parent_net = [(n, net_dir + b"/" + n) for n in _listdir(net_dir)] if net_dir else []
    multi_port = len(attrs.ports) > 1
    netdevs: list[Netdev] = []
    for port in attrs.ports:
        names: list[tuple[str, str]] = []

        def add(n: str, via: str, names: list[tuple[str, str]] = names) -> None:
            if n not in (x for x, _ in names):
                names.append((n, via))

        if port.link_layer is LinkLayer.INFINIBAND:
            for ipoib in _ipoib_names(parent_net, port.port_guid):
                add(ipoib, "port_guid")
        else:
            for gid in port.gids:
                if gid.ndev is not None:
                    add(gid.ndev, "gid_attrs")
            if attrs.parent is not None:
                add(attrs.parent, "parent")
            if not names:
                for n, base in parent_net:
                    if _int(read_text(base + b"/type", 32)) == ARPHRD_INFINIBAND:
                        continue
                    if multi_port and _int(read_text(base + b"/dev_port", 32)) != port.port - 1:
                        continue
                    add(os.fsdecode(n), "device/net")
        netdevs.extend(_netdev(root, net_dir, n, port.port, via) for n, via in names)

    return DeviceLocation(
        name=os.fsdecode(name),
        parent=os.fsdecode(parent) if parent is not None else None,
        parent_subsystem=subsystem,
        pci=pci,
        auxiliary=_auxiliary(parent, subsystem),
        pf_rdma_devices=pf_devs,
        vf_rdma_devices=tuple(vf_devs),
        netdevs=tuple(netdevs),
        char_devices=tuple(_char_devices(root, ibdev_path, name, ddir,
                                        scan or _SCAN.get() or LocationScan())),
    )

"""``HostBuilder``: fake RDMA hosts in code, as umockdev recordings
(``HostBuilder().mlx5(vfs=8).efa().rxe()``)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, TypedDict, Union, cast

from ..ground.errors import UsageError
from . import layout
from . import umockdev as recording
from .host import FakeHost, materialize
from .layout import (  # noqa: F401 (LO_PATH, NODE_TYPES, UVERBS_*: once defined here)
    ETH_CLASS,
    IB_CLASS,
    LO_PATH,
    NODE_TYPES,
    UVERBS_DYN_MAJOR,
    UVERBS_MAJOR,
    Value,
    guid_text,
    kernel_link,
)
from .layout import cpulist as _cpulist
from .layout import cpumask as _cpumask
from .layout import encode as _value
from .layout import encode_node_type as _node_type
from .umockdev import Attribute, Record, Recording

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["HostBuilder", "FakeDevice", "PciModel", "MLX5_MODELS", "MLX4_MODELS", "EFA_MODELS",
           "GPU_MODELS", "GpuModel", "DeviceOptions", "PciRdmaOptions", "Driver", "DRIVERS"]


@dataclass(frozen=True)
class PciModel:
    """PCI ids of one adapter model (and of its virtual functions)."""

    device: int
    vf_device: Optional[int]
    name: str


#: mlx5 models by short name: PCI device id, VF device id, marketing name.
MLX5_MODELS: Mapping[str, PciModel] = {
    "cx4": PciModel(0x1013, 0x1014, "ConnectX-4"),
    "cx4lx": PciModel(0x1015, 0x1016, "ConnectX-4 Lx"),
    "cx5": PciModel(0x1017, 0x1018, "ConnectX-5"),
    "cx6": PciModel(0x101B, 0x101C, "ConnectX-6"),
    "cx6dx": PciModel(0x101D, 0x101E, "ConnectX-6 Dx"),
    "cx6lx": PciModel(0x101F, 0x101E, "ConnectX-6 Lx"),
    "cx7": PciModel(0x1021, 0x101E, "ConnectX-7"),
    "bf3": PciModel(0xA2DC, 0x101E, "BlueField-3"),
}
MLX4_MODELS: Mapping[str, PciModel] = {
    "cx3": PciModel(0x1003, 0x1004, "ConnectX-3"),
    "cx3pro": PciModel(0x1007, 0x1004, "ConnectX-3 Pro"),
}
EFA_MODELS: Mapping[str, PciModel] = {
    "efa0": PciModel(0xEFA0, None, "EFA"),
    "efa1": PciModel(0xEFA1, None, "EFA"),
    "efa2": PciModel(0xEFA2, None, "EFA"),
}


class PciRdmaOptions(TypedDict, total=False):
    """:class:`DeviceOptions` but ``name`` (which :meth:`HostBuilder.pci_rdma` takes
    as an argument)."""

    uverbs: Optional[int]  # the N of uverbsN (default: the next free one)
    verbs: bool  # False: no uverbs device (like an XDR smi device)
    abi_version: Value  # the uverbs abi_version file
    node_type: Value  # 1..7 or any Value (raw bytes for broken files)
    node_guid: Union[int, Value]  # an int, a raw value; None: a made-up one
    dev_node: bool  # False: no /dev/infiniband/uverbsN
    ib_attrs: Optional[Mapping[str, Value]]  # more or replaced files of the ib device
    uverbs_attrs: Optional[Mapping[str, Value]]  # ... of the uverbs device


class DeviceOptions(PciRdmaOptions, total=False):
    """The options every device method of :class:`HostBuilder` takes; a missing one
    is the driver's default (its row of :data:`DRIVERS`)."""

    name: Optional[str]  # the IB device name (default: the driver's own naming)


_OPTIONS = frozenset(DeviceOptions.__annotations__)


@dataclass(frozen=True)
class Driver:
    """How one driver's RDMA devices look: a row of :data:`DRIVERS`."""

    driver: str  # the IB driver (FakeDevice.driver)
    name: str  # the default IB device name, formatted with index, bus and ifname
    abi_version: int  # the driver's uverbs ABI (include/uapi/rdma/*-abi.h)
    node_type: int
    fw_ver: str
    link_layer: str
    guid_base: Optional[int]  # made-up node GUIDs: base + a sequence number
    node_guid: Union[int, Value] = None  # the default node_guid (None: made up)
    #: vendor, device, sub vendor, sub device (None: the device id), class, PCI driver
    pci: Optional[tuple[int, int, int, Optional[int], int, str]] = None
    aux: Optional[tuple[str, str]] = None  # the auxiliary device: name (with index), driver
    ib_files: tuple[tuple[str, str], ...] = ()  # more ib device files (with device)


#: Every driver HostBuilder lays out, by the key its methods use.
DRIVERS: Mapping[str, Driver] = {
    "mlx5": Driver("mlx5", "mlx5_{index}", 1, 1, "20.39.1002", "InfiniBand",
                   0xB8599F0300A20000,
                   pci=(0x15B3, 0x101B, 0x15B3, 0x0007, IB_CLASS, "mlx5_core"),
                   aux=("mlx5_core.rdma.{index}", "mlx5_ib.rdma"),
                   ib_files=(("hca_type", "MT{device}"), ("board_id", "MT_0000000222"),
                             ("hw_rev", "0x0"))),
    "mlx5-sf": Driver("mlx5", "mlx5_{index}", 1, 1, "32.43.1014", "Ethernet",
                      0x02AC5D0300000000, aux=("mlx5_core.rdma.{index}", "mlx5_ib.rdma"),
                      ib_files=(("hca_type", "MT41692"), ("hw_rev", "0x0"))),
    "mlx5-bond": Driver("mlx5", "mlx5_bond_{index}", 1, 1, "28.43.1014", "Ethernet",
                        0xB8599F0300B10000,
                        ib_files=(("hca_type", "MT{device}"), ("hw_rev", "0x0"))),
    "mlx4": Driver("mlx4", "mlx4_{index}", 4, 1, "2.42.5000", "InfiniBand", 0x0002C90300A10000,
                   pci=(0x15B3, 0x1003, 0x15B3, 0x0006, IB_CLASS, "mlx4_core"),
                   ib_files=(("hca_type", "MT{device}"), ("board_id", "MT_1090120019"))),
    "efa": Driver("efa", "rdmap{bus}s0", 1, 7, "0.0.0.0", "Unspecified", None, node_guid=0,
                  pci=(0x1D0F, 0xEFA1, 0x1D0F, None, ETH_CLASS, "efa")),
    "irdma": Driver("irdma", "irdma{index}", 5, 1, "1.71", "Ethernet", 0xB49691FFFED27E00,
                    pci=(0x8086, 0x1593, 0x8086, 0x0002, ETH_CLASS, "ice"),
                    aux=("ice.roce.{index}", "irdma")),
    "irdma-iwarp": Driver("irdma", "irdma{index}", 5, 4, "1.71", "Ethernet", 0xB49691FFFED27E00,
                          pci=(0x8086, 0x1593, 0x8086, 0x0002, ETH_CLASS, "ice"),
                          aux=("ice.iwarp.{index}", "irdma")),
    "bnxt_re": Driver("bnxt_re", "bnxt_re{index}", 1, 1, "227.0.131.0", "Ethernet",
                      0x0A0B0CFFFE0D0000,
                      pci=(0x14E4, 0x16D7, 0x14E4, 0x1402, ETH_CLASS, "bnxt_en"),
                      aux=("bnxt_en.rdma.{index}", "bnxt_re")),
    "rxe": Driver("rxe", "rxe{index}", 2, 1, "", "Ethernet", None),
    "siw": Driver("siw", "siw_{ifname}", 1, 4, "0.0.0", "Ethernet", 0x5254006500000000),
}


@dataclass(frozen=True)
class GpuModel:
    """PCI identity of one GPU model, and what the NVIDIA driver's /proc file says."""

    vendor: int
    device: int
    sub_device: int
    pci_class: int
    driver: str
    name: str
    vbios: str = "??.??.??.??.??"
    link: tuple[str, int] = ("16.0 GT/s PCIe", 16)


#: GPU models by short name (ids as ``lspci -nn`` shows them on the real machines).
GPU_MODELS: Mapping[str, GpuModel] = {
    "a100": GpuModel(0x10DE, 0x20B0, 0x134F, 0x030200, "nvidia", "NVIDIA A100-SXM4-40GB",
                     "92.00.36.00.02"),
    "a100-80g": GpuModel(0x10DE, 0x20B2, 0x1463, 0x030200, "nvidia", "NVIDIA A100-SXM4-80GB",
                         "92.00.45.00.03"),
    "h100": GpuModel(0x10DE, 0x2330, 0x16C1, 0x030200, "nvidia", "NVIDIA H100 80GB HBM3",
                     "96.00.74.00.0B", ("32.0 GT/s PCIe", 16)),
    "h100-pcie": GpuModel(0x10DE, 0x2331, 0x1626, 0x030200, "nvidia", "NVIDIA H100 PCIe",
                          "96.00.30.00.01", ("32.0 GT/s PCIe", 16)),
    "h200": GpuModel(0x10DE, 0x2335, 0x18BE, 0x030200, "nvidia", "NVIDIA H200",
                     "96.00.99.00.01", ("32.0 GT/s PCIe", 16)),
    "b200": GpuModel(0x10DE, 0x2901, 0x1999, 0x030200, "nvidia", "NVIDIA B200",
                     "97.00.4B.00.01", ("32.0 GT/s PCIe", 16)),
    "l40s": GpuModel(0x10DE, 0x26B9, 0x1851, 0x030200, "nvidia", "NVIDIA L40S",
                     "95.02.66.00.02"),
    "rtx6000ada": GpuModel(0x10DE, 0x26B1, 0x16A1, 0x030000, "nvidia",
                           "NVIDIA RTX 6000 Ada Generation", "95.02.5D.00.03"),
    "mi300x": GpuModel(0x1002, 0x74A1, 0x74A1, 0x120000, "amdgpu", "AMD Instinct MI300X",
                       link=("32.0 GT/s PCIe", 16)),
}

#: PCIe capability device/port types of the bridge ports (PCI_EXP_TYPE_*).
_PORT_TYPES: Mapping[str, int] = {"root": 4, "upstream": 5, "downstream": 6, "pci": 7}
_BDF_RE = re.compile(r"([0-9a-f]{4,8}):([0-9a-f]{2}):[0-9a-f]{2}\.[0-7]")


def _bdf_of(path: str) -> str:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if not path.startswith("/devices/") or _BDF_RE.fullmatch(name) is None:
        raise UsageError(f"{path!r} is not a PCI function path (/devices/.../DDDD:BB:DD.F)")
    return name


def _le16(v: int) -> bytes:
    return bytes((v & 0xFF, (v >> 8) & 0xFF))


def _bridge_config(rec: Record, bus: int, secondary: int, subordinate: int, port_type: int,
                   link: tuple[int, int]) -> bytes:
    """256 bytes of a type-1 (bridge) config header with a PCIe capability at 0x40."""

    def num(name: str) -> int:
        raw = rec.value(name)
        return int(raw, 16) if raw else 0

    cfg = bytearray(256)
    cls = num("class")
    cfg[0:2], cfg[2:4] = _le16(num("vendor")), _le16(num("device"))
    cfg[4:6], cfg[6:8] = _le16(0x0407), _le16(0x0010)  # I/O, memory, master; cap list
    cfg[8] = num("revision") & 0xFF
    cfg[9], cfg[10], cfg[11] = cls & 0xFF, (cls >> 8) & 0xFF, (cls >> 16) & 0xFF
    cfg[0x0C], cfg[0x0E] = 0x10, 0x01  # cache line 64 bytes; header type 1
    cfg[0x18], cfg[0x19], cfg[0x1A] = bus, secondary, subordinate
    cfg[0x34] = 0x40
    cfg[0x3C], cfg[0x3D] = 0xFF, 0x01
    gen, width = link
    cfg[0x40], cfg[0x41] = 0x10, 0x00  # PCI Express, last capability
    cfg[0x42:0x44] = _le16(0x0002 | (port_type << 4) | (0x100 if port_type in (4, 6) else 0))
    cfg[0x4C:0x4E] = _le16(gen | (width << 4))
    cfg[0x52:0x54] = _le16(gen | (width << 4))
    return bytes(cfg)


@dataclass(frozen=True)
class _CpuLayout:
    sockets: int
    cores: int  # per socket
    threads: int
    nodes_per_socket: int
    mem_kb: int
    distances: Optional[tuple[tuple[int, ...], ...]]

    @property
    def total_cores(self) -> int:
        return self.sockets * self.cores

    def cpu(self, thread: int, core: int) -> int:
        return thread * self.total_cores + core

    def node_of(self, core: int) -> int:
        socket, c = divmod(core, self.cores)
        return socket * self.nodes_per_socket + c // (self.cores // self.nodes_per_socket)

    def node_cpus(self) -> dict[int, tuple[int, ...]]:
        out: dict[int, list[int]] = {}
        for core in range(self.total_cores):
            for t in range(self.threads):
                out.setdefault(self.node_of(core), []).append(self.cpu(t, core))
        return {n: tuple(sorted(c)) for n, c in sorted(out.items())}

    def distance(self, a: int, b: int) -> int:
        if self.distances is not None:
            return self.distances[a][b]
        if a == b:
            return 10
        return 12 if a // self.nodes_per_socket == b // self.nodes_per_socket else 32

    def records(self) -> list[Record]:
        n = self.total_cores * self.threads
        every = _cpulist(range(n))
        node_cpus = self.node_cpus()
        recs: list[Record] = []
        for cpu in range(n):
            thread, core = divmod(cpu, self.total_cores)
            socket = core // self.cores
            siblings = [self.cpu(t, core) for t in range(self.threads)]
            package = [self.cpu(t, c) for t in range(self.threads)
                       for c in range(socket * self.cores, (socket + 1) * self.cores)]
            attrs: list[tuple[str, str]] = []
            if cpu == 0:
                attrs += [("../online", every), ("../possible", every), ("../present", every),
                          ("../offline", ""), ("../kernel_max", str(max(n - 1, 8191)))]
            else:
                attrs.append(("online", "1"))
            for key, value in (("core_cpus", siblings), ("thread_siblings", siblings),
                               ("die_cpus", package), ("package_cpus", package),
                               ("core_siblings", package)):
                attrs += [(f"topology/{key}", _cpumask(value, n)),
                          (f"topology/{key}_list", _cpulist(value))]
            attrs += [("topology/core_id", str(core % self.cores)), ("topology/die_id", "0"),
                      ("topology/physical_package_id", str(socket))]
            path = f"/devices/system/cpu/cpu{cpu}"
            node = self.node_of(core)
            recs.append(Record(path, (("SUBSYSTEM", "cpu"),),
                               tuple(Attribute(k, f"{v}\n".encode()) for k, v in attrs)
                               + (Attribute(f"node{node}", b"", f"../../node/node{node}"),)))
        nodes = sorted(node_cpus)
        for node in nodes:
            cpus = node_cpus[node]
            kb = self.mem_kb
            meminfo = "".join(f"Node {node} {key + ':':<15} {val:8d} kB\n" for key, val in (
                ("MemTotal", kb), ("MemFree", kb * 9 // 10), ("MemUsed", kb - kb * 9 // 10),
                ("Active", 0), ("Inactive", 0), ("HugePages_Total", 0), ("HugePages_Free", 0)))
            attrs = []
            if node == nodes[0]:
                every_node = _cpulist(nodes)
                attrs += [(f"../{key}", every_node) for key in
                          ("online", "possible", "has_cpu", "has_memory", "has_normal_memory")]
            attrs += [("cpulist", _cpulist(cpus)), ("cpumap", _cpumask(cpus, n)),
                      ("distance", " ".join(str(self.distance(node, o)) for o in nodes))]
            files = [Attribute(k, f"{v}\n".encode()) for k, v in attrs]
            files.append(Attribute("meminfo", meminfo.encode()))
            links = tuple(Attribute(f"cpu{c}", b"", f"../../cpu/cpu{c}") for c in cpus)
            recs.append(Record(f"/devices/system/node/node{node}", (("SUBSYSTEM", "node"),),
                               tuple(files) + links))
        return recs


@dataclass(frozen=True)
class FakeDevice:
    """One RDMA device a :class:`HostBuilder` added.

    ``uverbs`` is None for an IB device without a uverbs char device;
    ``dev_node`` says whether ``/dev/infiniband/<uverbs>`` exists.
    """

    ibdev: str
    uverbs: Optional[str]
    driver: str
    parent: Optional[str]  # the parent device's path ("/devices/pci...") or None (virtual)
    dev_node: bool
    pci: Optional[str] = None  # the PCI function ("0000:3b:00.0") if any
    vf_of: Optional[str] = None  # the PF's PCI function, for an SR-IOV VF


class HostBuilder:
    """Build a fake RDMA host in code; :meth:`build` gives its :class:`Recording`.

    Every method adds hardware and returns the builder, so calls chain::

        host = HostBuilder().mlx5(vfs=8).efa().rxe().build()

    What is laid out is what the kernel lays out (the bundled fixtures' layout): a
    PCI function under ``/devices/pci0000:00/...`` with its modalias, driver link and
    SR-IOV links; ``infiniband/<name>`` and ``infiniband_verbs/uverbsN`` below it
    (``/devices/virtual/...`` for rxe and siw); ``/dev/infiniband/uverbsN`` and its
    ``by-ibdev`` link; and ``/sys/class/infiniband_verbs/abi_version``.

    Options every device method takes (:class:`DeviceOptions`; a missing one is the
    driver's default, from its row of :data:`DRIVERS`):

    * ``name``: the IB device name (default: the driver's own naming);
    * ``uverbs``: the uverbs number (default: the next free one); ``verbs=False``
      leaves the uverbs device out (like an XDR ``smi`` device);
    * ``abi_version``: the uverbs ``abi_version`` file (default: the driver's);
    * ``node_type``: 1..7 or any :data:`Value` (raw bytes for broken files);
    * ``node_guid``: an int (default: a unique made-up GUID) or a raw value;
    * ``dev_node``: False leaves ``/dev/infiniband/uverbsN`` out;
    * ``ib_attrs`` / ``uverbs_attrs``: more or replaced files of the IB device / the
      uverbs device (``{"dev": b"junk"}``, ``{"ibdev": None}`` to remove one).

    ``HostBuilder(class_abi=...)`` sets the class ``abi_version`` (None: no file);
    ``first_bus`` the PCI bus of the first adapter (each adapter gets a bus and a root
    port of its own), so that a second builder can add devices to a host written
    by a first one (with ``build(loopback=False)`` and distinct ``uverbs=`` numbers).
    """

    def __init__(self, *, class_abi: Value = 6, first_bus: int = 3) -> None:
        if not 1 <= first_bus <= 0xFF:
            raise UsageError("first_bus must be 1..255")
        self.class_abi = class_abi
        self._records: list[Record] = []
        self._devices: list[FakeDevice] = []
        self._uverbs_used: set[int] = set()
        self._bus = first_bus - 1  # the last PCI bus given out
        self._port = max(0, first_bus - 3)  # the last root port given out
        self._counts: dict[str, int] = {}
        self._ifindex = 1
        self._guid_seq = 0
        self._cpu: Optional[_CpuLayout] = None
        self._host_bridges: dict[str, int] = {}
        self._bridges: dict[str, tuple[str, tuple[int, int]]] = {}
        self._tree_functions: set[str] = set()
        self._proc_files: list[tuple[str, Attribute]] = []
        self._extra_links: list[tuple[str, str, str]] = []

    # ------------------------------------------------------------------ results
    @property
    def devices(self) -> tuple[FakeDevice, ...]:
        """The RDMA devices added so far, in the order they were added."""
        return tuple(self._devices)

    def build(self, *, loopback: bool = True) -> Recording:
        """The host as a recording: the loopback interface first, carrying the class
        files, as in the bundled fixtures; ``loopback=False`` leaves it (and the class
        files) out, to add these devices to a host that has them already."""
        lo = layout.loopback(verbs_abi=self.class_abi)
        records = self._finish(self._records)
        return Recording((lo, *records) if loopback else tuple(records))

    def dumps(self) -> str:
        """The recording as umockdev text."""
        return recording.dumps(self.build())

    def write(self, path: Union[str, os.PathLike[str]]) -> Path:
        """Write the recording to ``path`` (for ``umockdev-run -d``); returns the path."""
        out = Path(path)
        out.write_text(self.dumps(), encoding="utf-8", errors="surrogateescape")
        return out

    def materialize(self, root: Union[str, os.PathLike[str]]) -> FakeHost:
        """Write the host below ``root`` (see :func:`materialize`)."""
        return materialize(self, root)

    def add_record(self, record: Record) -> HostBuilder:
        """Add any record as it is (another device, a broken one...)."""
        self._records.append(record)
        return self

    # ------------------------------------------------------------------ numbering
    def _count(self, key: str) -> int:
        n = self._counts.get(key, 0)
        self._counts[key] = n + 1
        return n

    def _next_uverbs(self, wanted: Optional[int]) -> int:
        if wanted is not None:
            if wanted in self._uverbs_used:
                raise UsageError(f"uverbs{wanted} is already used")
            self._uverbs_used.add(wanted)
            return wanted
        n = 0
        while n in self._uverbs_used:
            n += 1
        self._uverbs_used.add(n)
        return n

    def _guid(self, base: int) -> int:
        self._guid_seq += 1
        return base + self._guid_seq

    def _new_bus(self) -> tuple[str, int]:
        """A fresh root port and bus: (parent path, bus number)."""
        self._port += 1
        self._bus += 1
        if self._bus > 0xFF:
            raise UsageError("no PCI bus left (at most 253 adapters per builder)")
        port = self._port % 0x20
        return f"/devices/pci0000:00/0000:00:{port:02x}.{self._port // 0x20}", self._bus

    # ------------------------------------------------------------------ records
    def add_device(self, path: str, subsystem: str, props: Iterable[tuple[str, str]] = (),
                   attrs: Iterable[tuple[str, Optional[bytes]]] = (),
                   links: Iterable[tuple[str, str]] = (), node: Optional[str] = None,
                   dev_links: Iterable[str] = ()) -> str:
        """One device record at ``path`` (:func:`layout.device
        <sysverbs.testing.layout.device>`): its uevent keys, attributes (None: left
        out), links, ``/dev`` node and node links; returns ``path``."""
        self._records.append(layout.device(path, subsystem, props, attrs, links, node,
                                           dev_links))
        return path

    def add_pci_function(self, path: str, vendor: int, device: int, sub_vendor: int,
                         sub_device: int, pci_class: int, driver: Optional[str], *,
                         numa_node: int = 0, extra: Iterable[tuple[str, Optional[bytes]]] = (),
                         links: Iterable[tuple[str, str]] = (),
                         vendor_name: Optional[str] = None, model_name: Optional[str] = None,
                         revision: int = 0) -> str:
        """A PCI function's record (:func:`layout.pci_function
        <sysverbs.testing.layout.pci_function>`): uevent keys, modalias and
        attributes, driver link; returns ``path``."""
        self._records.append(layout.pci_function(
            path, vendor, device, sub_vendor, sub_device, pci_class, driver,
            numa_node=numa_node, extra=extra, links=links, vendor_name=vendor_name,
            model_name=model_name, revision=revision))
        return path

    def add_aux_device(self, parent: str, name: str, driver: str) -> str:
        """An auxiliary device ``<parent>/<name>`` bound to ``driver``; its path."""
        rec = layout.aux_device(parent, name, driver)
        self._records.append(rec)
        return rec.path

    def _net(self, parent: Optional[str], ifname: str, mac: str) -> str:
        path = f"{parent}/net/{ifname}" if parent else f"/devices/virtual/net/{ifname}"
        if any(r.path == path for r in self._records):
            return path
        self._ifindex += 1
        self._records.append(layout.net_device(parent, ifname, self._ifindex,
                                               layout.net_attrs(mac, self._ifindex)))
        return path

    def _rdma(self, spec: Driver, options: DeviceOptions, *, parent: Optional[str],
              index: int = 0, bus: int = 0, ifname: str = "", device_id: int = 0,
              link_layer: Optional[str] = None, netdev: Optional[str] = None,
              mac: Optional[str] = None, guid_fallback: Optional[int] = None,
              ib_attrs: Optional[Mapping[str, Value]] = None, pci: Optional[str] = None,
              vf_of: Optional[str] = None) -> FakeDevice:
        """The one body of every device method: ``spec``'s auxiliary device below
        ``parent``, the netdev, the ib device and its uverbs device, each option of
        ``options`` in place of ``spec``'s default."""
        unknown = set(options) - _OPTIONS
        if unknown:
            raise UsageError(f"unknown device option(s): {', '.join(sorted(unknown))} "
                             f"(have: {', '.join(sorted(_OPTIONS))})")
        if spec.aux is not None and parent is not None:
            self.add_aux_device(parent, spec.aux[0].format(index=index), spec.aux[1])
        node_guid = options.get("node_guid", spec.node_guid)
        if node_guid is None:
            if guid_fallback is not None:
                node_guid = guid_fallback
            elif spec.guid_base is not None:
                node_guid = self._guid(spec.guid_base)
        if netdev is not None and (mac is not None or isinstance(node_guid, int)):
            if mac is None:
                assert isinstance(node_guid, int)
                mac = ":".join(f"{(node_guid >> s) & 0xFF:02x}" for s in (56, 48, 40, 16, 8, 0))
            self._net(parent, netdev, mac)
        name = options.get("name") or spec.name.format(index=index, bus=bus, ifname=ifname)
        if not name or "/" in name:
            raise UsageError(f"invalid IB device name {name!r}")
        if isinstance(node_guid, int) and not isinstance(node_guid, bool):
            guid: Optional[bytes] = _value(guid_text(node_guid))
            guid_int = node_guid
        else:
            guid = _value(node_guid)
            guid_int = 0
        ll = link_layer or spec.link_layer
        ib = ll == "InfiniBand"
        files: dict[str, Optional[bytes]] = dict(sorted([
            ("fw_ver", _value(spec.fw_ver)),
            ("node_desc", _value(f"fakehost {name}")),
            ("node_guid", guid),
            ("node_type", _node_type(options.get("node_type", spec.node_type))),
            ("sys_image_guid", guid),
            *((key, _value(text.format(device=device_id))) for key, text in spec.ib_files),
        ]))
        files.update([
            ("ports/1/link_layer", _value(ll)),
            ("ports/1/phys_state", _value("5: LinkUp")),
            ("ports/1/state", _value("4: ACTIVE")),
            ("ports/1/rate", _value("100 Gb/sec (4X EDR)" if ib else "25 Gb/sec (1X EDR)")),
            ("ports/1/lid", _value("0x1" if ib else "0x0")),
            ("ports/1/sm_lid", _value("0x1" if ib else "0x0")),
            ("ports/1/gids/0", _value("fe80:0000:0000:0000:" + guid_text(guid_int))),
            ("ports/1/pkeys/0", _value("0xffff")),
        ])
        for key, val in {**(ib_attrs or {}), **(options.get("ib_attrs") or {})}.items():
            files[key] = _value(val)
        self._records.append(layout.ib_device(parent, name, files.items()))
        verbs = options.get("verbs", True)
        dev_node = options.get("dev_node", True)
        uverbs_name: Optional[str] = None
        if verbs:
            uverbs_name = self.add_uverbs(parent, self._next_uverbs(options.get("uverbs")), name,
                                          options.get("abi_version", spec.abi_version),
                                          dev_node=dev_node, pci=pci,
                                          attrs=options.get("uverbs_attrs"))
        fake = FakeDevice(name, uverbs_name, spec.driver, parent, dev_node and verbs, pci, vf_of)
        self._devices.append(fake)
        return fake

    def add_uverbs(self, parent: Optional[str], index: int, ibdev: str, abi_version: Value, *,
                dev_node: bool = True, pci: Optional[str] = None,
                attrs: Optional[Mapping[str, Value]] = None) -> str:
        """``infiniband_verbs/uverbs<index>`` of ``ibdev``, its /dev node (unless
        ``dev_node`` is False) and rdma-core's by-ibdev (and, for a PCI function
        ``pci``, by-path) links; returns the uverbs name."""
        uverbs_name = f"uverbs{index}"
        self._records.append(layout.uverbs_device(parent, index, ibdev, abi_version,
                                                  dev_node=dev_node, pci=pci, attrs=attrs))
        return uverbs_name

    def _spec_function(self, spec: Driver, path: str, *, device: Optional[int] = None,
                       pci_class: Optional[int] = None, numa_node: int = 0,
                       extra: Iterable[tuple[str, Optional[bytes]]] = (),
                       links: Iterable[tuple[str, str]] = (), vendor_name: Optional[str] = None,
                       model_name: Optional[str] = None) -> int:
        """``spec``'s PCI function at ``path`` (``device``: another device id, whose
        sub device id it is too where the table says so); returns its device id."""
        assert spec.pci is not None
        vendor, dev, sub_vendor, sub_device, cls, driver = spec.pci
        dev = dev if device is None else device
        self.add_pci_function(path, vendor, dev, sub_vendor, dev if sub_device is None
                              else sub_device, cls if pci_class is None else pci_class,
                              driver, numa_node=numa_node, extra=extra, links=links,
                              vendor_name=vendor_name, model_name=model_name)
        return dev

    def _place(self, path: Optional[str]) -> tuple[str, str, int]:
        """(function path, BDF, NUMA node): at ``path`` below a :meth:`host_bridge`,
        or on a root port and bus of its own."""
        if path is not None:
            slot = _bdf_of(path)
            return path, slot, self._tree_numa(path, None)
        root, bus = self._new_bus()
        slot = f"0000:{bus:02x}:00.0"
        return f"{root}/{slot}", slot, 0

    # ------------------------------------------------------------------ hardware
    def mlx5(
        self,
        *,
        model: str = "cx6",
        vfs: int = 0,
        link_layer: str = "InfiniBand",
        vf_dev_nodes: bool = True,
        netdev: Optional[str] = None,
        numa_node: Optional[int] = None,
        vendor_name: Optional[str] = None,
        model_name: Optional[str] = None,
        path: Optional[str] = None,
        sfs: int = 0,
        **options: Unpack[DeviceOptions],
    ) -> HostBuilder:
        """An NVIDIA/Mellanox mlx5 adapter (``model``: a key of :data:`MLX5_MODELS`) as
        a PCI function with its auxiliary ``mlx5_core.rdma.N`` device, and ``vfs``
        SR-IOV virtual functions, each an mlx5 device of its own (``mlx5_<N+1>``...).

        ``vendor_name``/``model_name`` add udev's hwdb properties to the PCI
        function's udev record (seen under umockdev); ``vf_dev_nodes=False`` leaves
        the VFs' ``/dev`` nodes out.  ``path`` puts the PF at that sysfs path (below
        a :meth:`host_bridge`, whose NUMA node it takes unless ``numa_node`` is
        given; its VFs beside it on the same bus) instead of on a root port of its
        own; ``sfs`` adds that many sub-functions (:meth:`mlx5_sf`).  The PF takes
        the :class:`DeviceOptions`; the VFs only ``abi_version`` and ``node_type``.
        """
        if model not in MLX5_MODELS:
            raise UsageError(f"unknown mlx5 model {model!r} (have: {', '.join(MLX5_MODELS)})")
        if link_layer not in ("InfiniBand", "Ethernet"):
            raise UsageError("link_layer must be 'InfiniBand' or 'Ethernet'")
        spec = DRIVERS["mlx5"]
        pm = MLX5_MODELS[model]
        if path is not None:
            pf_slot = _bdf_of(path)
            root = path.rsplit("/", 1)[0]
            pf_path = path
            numa_node = self._tree_numa(path, numa_node)
            prefix = pf_slot.rsplit(":", 1)[0]
        else:
            root, bus = self._new_bus()
            prefix = f"0000:{bus:02x}"
            pf_slot = f"{prefix}:00.0"
            pf_path = f"{root}/{pf_slot}"
        if numa_node is None:
            numa_node = 0
        vf_slots = [f"{prefix}:{(2 + i) >> 3:02x}.{(2 + i) & 7}" for i in range(vfs)]
        pci_class = IB_CLASS if link_layer == "InfiniBand" else ETH_CLASS
        extra: list[tuple[str, Optional[bytes]]] = []
        pf_links: list[tuple[str, str]] = []
        if vfs:
            extra += [("sriov_numvfs", _value(vfs)), ("sriov_totalvfs", _value(max(vfs, 8))),
                      ("sriov_offset", _value(2)), ("sriov_stride", _value(1)),
                      ("sriov_vf_device", _value(f"{pm.vf_device or pm.device:x}"))]
            pf_links += [(f"virtfn{i}", f"../{s}") for i, s in enumerate(vf_slots)]
        vf_options: DeviceOptions = {"dev_node": vf_dev_nodes}
        if "abi_version" in options:
            vf_options["abi_version"] = options["abi_version"]
        if "node_type" in options:
            vf_options["node_type"] = options["node_type"]
        functions: list[tuple[str, str, int, list[tuple[str, Optional[bytes]]],
                              list[tuple[str, str]], DeviceOptions, Optional[str],
                              Optional[str]]]
        functions = [(pf_path, pf_slot, pm.device, extra, pf_links, options, netdev, None)]
        functions += [(f"{root}/{slot}", slot, pm.vf_device or pm.device, [],
                       [("physfn", f"../{pf_slot}")], vf_options, None, pf_slot)
                      for slot in vf_slots]
        for fn_path, slot, device, fn_extra, links, opts, fn_netdev, vf_of in functions:
            index = self._count("mlx5")
            self._spec_function(spec, fn_path, device=device, pci_class=pci_class,
                                numa_node=numa_node, extra=fn_extra, links=links,
                                vendor_name=vendor_name, model_name=model_name)
            self._rdma(spec, opts, parent=fn_path, index=index, device_id=device,
                       link_layer=link_layer, netdev=fn_netdev, pci=slot, vf_of=vf_of)
        if path is not None:
            self._tree_functions.update([pf_path] + [f"{root}/{slot}" for slot in vf_slots])
        for n in range(sfs):
            self.mlx5_sf(pf_path, n + 1, link_layer=link_layer)
        return self

    def mlx4(self, *, model: str = "cx3", vfs: int = 0,
             **options: Unpack[DeviceOptions]) -> HostBuilder:
        """A ConnectX-3 (``mlx4_core``) with ``vfs`` virtual functions; one ``mlx4_N``
        IB device per function (the VFs take ``abi_version``, ``node_type`` and
        ``dev_node`` of the :class:`DeviceOptions`)."""
        if model not in MLX4_MODELS:
            raise UsageError(f"unknown mlx4 model {model!r} (have: {', '.join(MLX4_MODELS)})")
        spec = DRIVERS["mlx4"]
        pm = MLX4_MODELS[model]
        root, bus = self._new_bus()
        pf_slot = f"0000:{bus:02x}:00.0"
        vf_slots = [f"0000:{bus:02x}:00.{1 + i}" if i < 7 else
                    f"0000:{bus:02x}:{(1 + i) >> 3:02x}.{(1 + i) & 7}" for i in range(vfs)]
        vf_options: DeviceOptions = {}
        if "abi_version" in options:
            vf_options["abi_version"] = options["abi_version"]
        if "node_type" in options:
            vf_options["node_type"] = options["node_type"]
        if "dev_node" in options:
            vf_options["dev_node"] = options["dev_node"]
        functions: list[tuple[str, int, list[tuple[str, str]], Optional[str], DeviceOptions]]
        functions = [(pf_slot, pm.device,
                      [(f"virtfn{i}", f"../{s}") for i, s in enumerate(vf_slots)], None, options)]
        functions += [(s, pm.vf_device or pm.device, [("physfn", f"../{pf_slot}")], pf_slot,
                       vf_options) for s in vf_slots]
        for slot, device, links, vf_of, opts in functions:
            index = self._count("mlx4")
            path = f"{root}/{slot}"
            self._spec_function(spec, path, device=device, links=links)
            self._rdma(spec, opts, parent=path, index=index, device_id=device, pci=slot,
                       vf_of=vf_of)
        return self

    def efa(self, *, model: str = "efa1", **options: Unpack[DeviceOptions]) -> HostBuilder:
        """An AWS Elastic Fabric Adapter (``efa`` PCI driver), named ``rdmap<bus>s<slot>``
        as rdma-core's udev rules rename it; node type 7 (unspecified), GUID 0."""
        if model not in EFA_MODELS:
            raise UsageError(f"unknown EFA model {model!r} (have: {', '.join(EFA_MODELS)})")
        spec = DRIVERS["efa"]
        root, bus = self._new_bus()
        slot = f"0000:{bus:02x}:00.0"
        path = f"{root}/{slot}"
        self._spec_function(spec, path, device=EFA_MODELS[model].device)
        self._rdma(spec, options, parent=path, index=self._count("efa"), bus=bus, pci=slot)
        return self

    def irdma(self, *, iwarp: bool = False, path: Optional[str] = None,
              **options: Unpack[DeviceOptions]) -> HostBuilder:
        """An Intel E810 (``ice``) with its ``irdma`` auxiliary device: RoCE (node type
        1), or iWARP (``iwarp=True``: node type 4, RNIC).  ``path``: at that sysfs path
        below a :meth:`host_bridge` (as for :meth:`mlx5`)."""
        spec = DRIVERS["irdma-iwarp" if iwarp else "irdma"]
        if options.get("node_type", None) is None:  # None: the driver's
            options.pop("node_type", None)
        if path is not None:
            self._tree_functions.add(path)
        path, slot, numa = self._place(path)
        index = self._count("irdma")
        self._spec_function(spec, path, numa_node=numa)
        self._rdma(spec, options, parent=path, index=index, pci=slot)
        return self

    def bnxt_re(self, **options: Unpack[DeviceOptions]) -> HostBuilder:
        """A Broadcom NetXtreme-E (``bnxt_en``) with its ``bnxt_re`` RoCE device."""
        spec = DRIVERS["bnxt_re"]
        path, slot, _ = self._place(None)
        index = self._count("bnxt_re")
        self._spec_function(spec, path)
        self._rdma(spec, options, parent=path, index=index, pci=slot)
        return self

    def rxe(self, *, netdev: Optional[str] = None,
            **options: Unpack[DeviceOptions]) -> HostBuilder:
        """A soft-RoCE device (``rdma link add rxe0 type rxe netdev eth0``): under
        ``/devices/virtual``, its GUID the EUI-64 of the netdev's MAC, matched by name."""
        index = self._count("rxe")
        ifname = netdev or f"eth{index}"
        mac_tail = 0x123456 + index
        mac = f"52:54:00:{(mac_tail >> 16) & 0xFF:02x}:{(mac_tail >> 8) & 0xFF:02x}:" \
              f"{mac_tail & 0xFF:02x}"
        self._rdma(DRIVERS["rxe"], options, parent=None, index=index, netdev=ifname, mac=mac,
                   guid_fallback=0x505400FFFE000000 | mac_tail,
                   ib_attrs={"parent": ifname, "ports/1/gid_attrs/ndevs/0": ifname,
                             "ports/1/gid_attrs/types/0": "RoCE v2"})
        return self

    def siw(self, *, netdev: Optional[str] = None,
            **options: Unpack[DeviceOptions]) -> HostBuilder:
        """A software iWARP device (``siw``): libibverbs matches it only by driver id,
        which sysfs does not carry, so sysfs mode finds it but no provider claims it."""
        index = self._count("siw")
        ifname = netdev or f"eth{index}"
        self._rdma(DRIVERS["siw"], options, parent=None, index=index, ifname=ifname,
                   netdev=ifname, mac=f"52:54:00:65:00:{index:02x}",
                   ib_attrs={"parent": ifname})
        return self

    def pci_rdma(
        self,
        driver: str,
        name: str,
        *,
        vendor: int,
        device: int,
        sub_vendor: Optional[int] = None,
        sub_device: Optional[int] = None,
        pci_class: int = ETH_CLASS,
        pci_driver: Optional[str] = None,
        aux: Optional[str] = None,
        link_layer: str = "Ethernet",
        **options: Unpack[PciRdmaOptions],
    ) -> HostBuilder:
        """Any PCI RDMA device: ``driver`` names the IB driver, ``vendor``/``device``
        the PCI ids libibverbs matches on, ``aux`` an auxiliary device between them
        (``"bnxt_en.rdma.0"``): a row of :data:`DRIVERS` made from the arguments."""
        spec = Driver(driver, name, 1, 1, "1.0", link_layer, 0x0011220000000000,
                      pci=(vendor, device, vendor if sub_vendor is None else sub_vendor,
                           device if sub_device is None else sub_device, pci_class,
                           pci_driver or driver),
                      aux=None if aux is None else (aux.replace("{", "{{").replace("}", "}}"),
                                                    driver))
        path, slot, _ = self._place(None)
        self._spec_function(spec, path)
        opts = cast(DeviceOptions, dict(options))
        opts["name"] = name
        self._rdma(spec, opts, parent=path, pci=slot)
        return self

    # ------------------------------------------------------------------ PCI topology
    # Hosts with a real PCI tree (bridges, GPUs, NUMA nodes) for placement and hwloc:
    # every method takes the device's full sysfs path, so that a fixture can follow a
    # real machine's tree exactly; build() then derives what depends on the whole tree
    # (each bridge's bus range in its config space, each function's local CPUs).

    def cpu_topology(
        self,
        *,
        sockets: int = 1,
        cores_per_socket: int = 4,
        threads_per_core: int = 1,
        nodes_per_socket: int = 1,
        mem_per_node_kb: int = 64 << 20,
        distances: Optional[Sequence[Sequence[int]]] = None,
    ) -> HostBuilder:
        """CPUs and NUMA nodes (``/sys/devices/system/cpu`` and ``.../node``), laid out
        as Linux numbers them on x86: the first threads of all cores (socket by
        socket, node by node), then the second threads in the same order (DGX A100:
        node 3 = CPUs 48-63,176-191).  Each ``cpuN`` has ``topology/`` files (package,
        die, core ids and sibling masks/lists); each ``nodeN`` its ``cpumap``,
        ``cpulist``, ``distance`` (10 local, 12 same socket, 32 remote unless
        ``distances`` is given) and ``meminfo``.  PCI functions added with
        :meth:`host_bridge` trees get ``local_cpus``/``local_cpulist`` of their node
        (all CPUs for ``numa_node`` -1)."""
        if min(sockets, cores_per_socket, threads_per_core, nodes_per_socket) < 1:
            raise UsageError("counts must be >= 1")
        if cores_per_socket % nodes_per_socket:
            raise UsageError("cores_per_socket must be a multiple of nodes_per_socket")
        nodes = sockets * nodes_per_socket
        if distances is not None and (len(distances) != nodes
                                      or any(len(row) != nodes for row in distances)):
            raise UsageError(f"distances must be a {nodes}x{nodes} matrix")
        self._cpu = _CpuLayout(sockets, cores_per_socket, threads_per_core, nodes_per_socket,
                               mem_per_node_kb,
                               tuple(tuple(r) for r in distances) if distances else None)
        return self

    @property
    def numa_cpus(self) -> Mapping[int, tuple[int, ...]]:
        """The CPUs of each NUMA node of :meth:`cpu_topology` (empty without one)."""
        return self._cpu.node_cpus() if self._cpu is not None else {}

    def host_bridge(self, name: str = "pci0000:00", *, numa_node: int = 0,
                    parent: Optional[str] = None) -> str:
        """A PCI host bridge (root bus) ``pciDDDD:BB``; returns its path
        (``/devices/pci0000:00``) for the devices below it.  ``numa_node`` is what
        the functions below it show by default (-1: unknown, as in many VMs);
        ``parent`` puts the bridge below a device (a VMD endpoint's domain:
        ``host_bridge("pci10000:00", parent=vmd_path)``).  Host bridge directories
        are no devices (no ``uevent``), so this adds no record."""
        m = re.fullmatch(r"pci([0-9a-f]{4,8}):([0-9a-f]{2})", name)
        if m is None:
            raise UsageError(f"invalid host bridge name {name!r} (pciDDDD:BB)")
        path = f"{parent}/{name}" if parent else f"/devices/{name}"
        self._host_bridges[path] = numa_node
        return path

    def _tree_numa(self, path: str, numa_node: Optional[int]) -> int:
        if numa_node is not None:
            return numa_node
        best = ""
        for hb in self._host_bridges:
            if path.startswith(hb + "/") and len(hb) > len(best):
                best = hb
        if not best:
            raise UsageError(f"{path} is below no host_bridge()")
        return self._host_bridges[best]

    def pci_bridge(
        self,
        path: str,
        *,
        port: str = "downstream",
        vendor: int = 0x1000,
        device: int = 0xC010,
        sub_vendor: Optional[int] = None,
        sub_device: Optional[int] = None,
        revision: int = 0xB0,
        driver: Optional[str] = "pcieport",
        numa_node: Optional[int] = None,
        link: tuple[int, int] = (4, 16),
    ) -> str:
        """A PCI-to-PCI bridge (class 0x060400) at ``path``: a root port
        (``port="root"``), a PCIe switch's upstream or downstream port (default: a
        Broadcom PEX88096 downstream port, 1000:c010, as on a DGX A100).  Its config
        space (256 bytes, header type 1, a PCIe capability with this port type and
        ``link`` = (generation, width)) gets the bus numbers at :meth:`build`: the
        secondary bus is the bus of the functions directly below it, the subordinate
        bus the highest bus below it (both 0, unassigned, for a bridge with nothing
        below).  Returns ``path``."""
        if port not in _PORT_TYPES:
            raise UsageError(f"port must be one of {', '.join(_PORT_TYPES)}")
        _bdf_of(path)
        numa = self._tree_numa(path, numa_node)
        self.add_pci_function(path, vendor, device, vendor if sub_vendor is None else sub_vendor,
                  device if sub_device is None else sub_device, 0x060400, driver,
                  numa_node=numa, revision=revision)
        self._bridges[path] = (port, link)
        self._tree_functions.add(path)
        return path

    def pci_device(
        self,
        path: str,
        *,
        vendor: int,
        device: int,
        pci_class: int,
        driver: Optional[str] = None,
        sub_vendor: Optional[int] = None,
        sub_device: Optional[int] = None,
        revision: int = 0,
        numa_node: Optional[int] = None,
        attrs: Optional[Mapping[str, Value]] = None,
        links: Sequence[tuple[str, str]] = (),
        link: Optional[tuple[str, int]] = None,
    ) -> str:
        """Any PCI function at ``path`` (below a :meth:`host_bridge`): NVMe, audio,
        NVSwitch, a management endpoint...  ``numa_node`` defaults to the host
        bridge's; ``attrs`` adds or replaces files, ``links`` adds symlinks,
        ``link`` = (``current_link_speed``, ``current_link_width``), e.g.
        ``("16.0 GT/s PCIe", 16)``.  Returns ``path``."""
        _bdf_of(path)
        numa = self._tree_numa(path, numa_node)
        extra: list[tuple[str, Optional[bytes]]] = []
        if link is not None:
            extra += [("current_link_speed", _value(link[0])),
                      ("current_link_width", _value(link[1])),
                      ("max_link_speed", _value(link[0])), ("max_link_width", _value(link[1]))]
        for key, val in (attrs or {}).items():
            extra = [(k, v) for k, v in extra if k != key] + [(key, _value(val))]
        self.add_pci_function(path, vendor, device, vendor if sub_vendor is None else sub_vendor,
                  device if sub_device is None else sub_device, pci_class, driver,
                  numa_node=numa, revision=revision, extra=extra, links=links)
        self._tree_functions.add(path)
        return path

    def gpu(
        self,
        path: str,
        *,
        model: str = "a100",
        numa_node: Optional[int] = None,
        driver: Optional[str] = None,
        uuid: Optional[str] = None,
        minor: Optional[int] = None,
        proc: bool = True,
    ) -> str:
        """A GPU at ``path``: ``model`` is a key of :data:`GPU_MODELS` (NVIDIA: class
        0x0302 3D controller or 0x0300 VGA; AMD Instinct: 0x1200 processing
        accelerator).  An NVIDIA GPU also gets, unless ``proc=False``, the driver's
        ``/proc/driver/nvidia/gpus/<bdf>/information`` (model, UUID, bus location,
        device minor: by default the GPU's index among the NVIDIA GPUs added so far),
        written to the proc root by :func:`materialize`.  Returns ``path``."""
        if model not in GPU_MODELS:
            raise UsageError(f"unknown GPU model {model!r} (have: {', '.join(GPU_MODELS)})")
        gm = GPU_MODELS[model]
        bdf = _bdf_of(path)
        nvidia = gm.vendor == 0x10DE
        index = self._count("gpu-nvidia" if nvidia else "gpu-other")
        self.pci_device(path, vendor=gm.vendor, device=gm.device, pci_class=gm.pci_class,
                        driver=gm.driver if driver is None else driver,
                        sub_vendor=gm.vendor, sub_device=gm.sub_device, revision=0xA1,
                        numa_node=numa_node, link=gm.link)
        if nvidia and proc:
            digest = hashlib.sha256(f"{gm.name} {bdf}".encode()).hexdigest()
            gpu_uuid = uuid or (f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-"
                                f"{digest[16:20]}-{digest[20:32]}")
            info = (f"Model: \t\t {gm.name}\nIRQ:   \t\t {200 + index}\n"
                    f"GPU UUID: \t {gpu_uuid}\nVideo BIOS: \t {gm.vbios}\n"
                    f"Bus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\n"
                    f"Bus Location: \t {bdf}\n"
                    f"Device Minor: \t {index if minor is None else minor}\n"
                    f"GPU Excluded:\t No\n")
            self.proc_file(path, f"/proc/driver/nvidia/gpus/{bdf}/information", info)
        return path

    def proc_file(self, record_path: str, target: str, value: Union[str, bytes]) -> HostBuilder:
        """A ``/proc`` file (``target``, e.g. ``/proc/cpuinfo``), carried by the record
        at ``record_path`` (see :func:`sysverbs.recording.proc_file`)."""
        data = value.encode() if isinstance(value, str) else value
        self._proc_files.append((record_path, recording.proc_file(record_path, target, data)))
        return self

    def mlx5_sf(self, pf_path: str, sf: int, *, name: Optional[str] = None,
                netdev: Optional[str] = None, uverbs: Optional[int] = None,
                link_layer: str = "Ethernet") -> HostBuilder:
        """An mlx5 sub-function of the PF at ``pf_path``: the auxiliary device
        ``mlx5_core.sf.<sf>`` below it with its own ``mlx5_core.rdma`` auxiliary
        device, ib device (``mlx5_<N>``) and uverbs device, all below the SF (so
        the ib device's ``device`` link leads to an auxiliary device, not a PCI
        function)."""
        sf_path = self.add_aux_device(pf_path, f"mlx5_core.sf.{sf}", "mlx5_core.sf")
        opts: DeviceOptions = {"name": name, "uverbs": uverbs}
        self._rdma(DRIVERS["mlx5-sf"], opts, parent=sf_path, index=self._count("mlx5"),
                   link_layer=link_layer, netdev=netdev)
        return self

    def mlx5_bond(self, pf_paths: Sequence[str], *, bond: str = "bond0",
                  name: Optional[str] = None, uverbs: Optional[int] = None,
                  model: str = "cx7") -> HostBuilder:
        """A RoCE LAG: the mlx5 PFs at ``pf_paths`` (functions of one card), their
        netdevs enslaved to the bond ``bond`` (``/devices/virtual/net/bond0`` with
        ``lower_*``/``master`` links), and one ib device ``mlx5_bond_<N>`` on the
        first PF, as mlx5_ib registers it when bonding is active (the PFs' own ib
        devices are gone then)."""
        if len(pf_paths) < 2:
            raise UsageError("a bond needs at least two PFs")
        pm = MLX5_MODELS[model]
        bond_path = f"/devices/virtual/net/{bond}"
        slaves: list[tuple[str, str]] = []
        for n, pf in enumerate(pf_paths):
            index = self._count("mlx5")
            self.add_pci_function(pf, 0x15B3, pm.device, 0x15B3, 0x0007, ETH_CLASS, "mlx5_core",
                      numa_node=self._tree_numa(pf, None) if self._host_bridges else 0)
            if self._host_bridges:
                self._tree_functions.add(pf)
            self.add_aux_device(pf, f"mlx5_core.eth.{index}", "mlx5_core.eth")
            self.add_aux_device(pf, f"mlx5_core.rdma.{index}", "mlx5_ib.rdma")
            ifname = f"{bond}s{n}"
            guid = self._guid(0xB8599F0300B00000)
            mac = ":".join(f"{(guid >> s) & 0xFF:02x}" for s in (56, 48, 40, 16, 8, 0))
            net = self._net(pf, ifname, mac)
            slaves.append((ifname, net))
        self._ifindex += 1
        attrs = [*layout.net_attrs("02:00:00:00:00:01", self._ifindex),
                 ("bonding/mode", _value("802.3ad 4")),
                 ("bonding/slaves", _value(" ".join(s for s, _ in slaves)))]
        links = [(f"lower_{ifname}", kernel_link(bond_path, net)) for ifname, net in slaves]
        self._records.append(layout.net_device(None, bond, self._ifindex, attrs, links))
        for _ifname, net in slaves:
            self._extra_links.append((net, "master", kernel_link(net, bond_path)))
        first = pf_paths[0]
        self._rdma(DRIVERS["mlx5-bond"], {"name": name, "uverbs": uverbs}, parent=first,
                   index=self._count("mlx5_bond"), device_id=pm.device,
                   ib_attrs={"ports/1/gid_attrs/ndevs/0": bond}, pci=first.rsplit("/", 1)[1])
        return self

    def _finish(self, records: Sequence[Record]) -> list[Record]:
        """What depends on the whole host: bridge bus numbers, local CPUs, links added
        to earlier records, /proc files, and the CPU/NUMA records."""
        if not (self._bridges or self._tree_functions or self._proc_files or self._extra_links
                or self._cpu is not None or self._host_bridges):
            return list(records)
        pci_buses: dict[str, tuple[int, int]] = {}
        for rec in records:
            if rec.subsystem == "pci":
                m = _BDF_RE.fullmatch(rec.name)
                if m:
                    pci_buses[rec.path] = (int(m.group(1), 16), int(m.group(2), 16))
        node_cpus = self._cpu.node_cpus() if self._cpu is not None else {}
        all_cpus = tuple(sorted(c for cpus in node_cpus.values() for c in cpus))
        ncpus = len(all_cpus)
        out: list[Record] = []
        for rec in records:
            extra: list[Attribute] = []
            if rec.path in self._bridges:
                domain, bus = pci_buses[rec.path]
                direct = [b for p, (d, b) in pci_buses.items()
                          if d == domain and p.rsplit("/", 1)[0] == rec.path]
                below = [b for p, (d, b) in pci_buses.items()
                         if d == domain and p.startswith(rec.path + "/")]
                secondary = min(direct) if direct else 0
                subordinate = max(below) if below else 0
                port, link = self._bridges[rec.path]
                extra.append(Attribute("config", _bridge_config(
                    rec, bus, secondary, subordinate, _PORT_TYPES[port], link), binary=True))
                extra += [Attribute("secondary_bus_number", _value(secondary) or b""),
                          Attribute("subordinate_bus_number", _value(subordinate) or b"")]
            if ncpus and rec.path in pci_buses and (
                    rec.path in self._tree_functions
                    or any(rec.path.startswith(hb + "/") for hb in self._host_bridges)):
                raw = rec.value("numa_node")
                numa = int(raw) if raw is not None else -1
                cpus = node_cpus.get(numa, all_cpus)
                extra += [Attribute("local_cpulist", _value(_cpulist(cpus)) or b""),
                          Attribute("local_cpus", _value(_cpumask(cpus, ncpus)) or b"")]
            extra += [a for p, a in self._proc_files if p == rec.path]
            extra += [Attribute(name, b"", target)
                      for p, name, target in self._extra_links if p == rec.path]
            if extra:
                files = [a for a in rec.attributes if a.link is None]
                link_attrs = [a for a in rec.attributes if a.link is not None]
                rec = replace(rec, attributes=tuple(files + [a for a in extra if a.link is None]
                                                    + link_attrs
                                                    + [a for a in extra if a.link is not None]))
            out.append(rec)
        if self._cpu is not None:
            out += self._cpu.records()
        return out

"""``HostBuilder``: fake RDMA hosts in code, as umockdev recordings
(``HostBuilder().mlx5(vfs=8).efa().rxe()``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from ..errors import UsageError
from . import umockdev as recording
from .host import FakeHost, materialize
from .umockdev import Attribute, Record, Recording

__all__ = ["HostBuilder", "FakeDevice", "PciModel", "MLX5_MODELS", "MLX4_MODELS", "EFA_MODELS"]

#: A value for a sysfs attribute: ``int`` and ``str`` get the newline the kernel's
#: ``show()`` adds; ``bytes`` are written exactly (for broken values); ``None``
#: leaves the file out.
Value = Union[int, str, bytes, None]

NODE_TYPES = {
    1: "1: CA",
    2: "2: switch",
    3: "3: router",
    4: "4: RNIC",
    5: "5: usNIC",
    6: "6: usNIC UDP",
    7: "7: unspecified",
}
UVERBS_MAJOR = 231  # IB_UVERBS_MAJOR: uverbs0..31 are 231:192..223
UVERBS_DYN_MAJOR = 238  # what alloc_chrdev_region() gave uverbs32+ on the captured hosts
IB_CLASS, ETH_CLASS = 0x020700, 0x020000
LO_PATH = "/devices/virtual/net/lo"


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


def _value(v: Value) -> Optional[bytes]:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v
    return f"{v}\n".encode("utf-8", "surrogateescape")


def _node_type(v: Value) -> Optional[bytes]:
    if isinstance(v, int) and not isinstance(v, bool) and v in NODE_TYPES:
        return _value(NODE_TYPES[v])
    return _value(v)


def guid_text(value: int) -> str:
    """A GUID as sysfs shows it (``0c42:a103:00a5:1c30``)."""
    return ":".join(f"{(value >> s) & 0xFFFF:04x}" for s in (48, 32, 16, 0))


def kernel_link(link_dir: str, target: str) -> str:
    """The relative link the kernel writes from directory ``link_dir`` to ``target``
    (both ``/devices/...``-style paths below /sys)."""
    base = link_dir.strip("/").split("/")
    tparent = target.strip("/").split("/")[:-1]
    ups = 0
    while base and tparent[: len(base)] != base:
        base = base[:-1]
        ups += 1
    rest = target.strip("/").split("/")[len(base):]
    return "../" * ups + "/".join(rest)


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

    Options every device method takes:

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

    # ------------------------------------------------------------------ results
    @property
    def devices(self) -> tuple[FakeDevice, ...]:
        """The RDMA devices added so far, in the order they were added."""
        return tuple(self._devices)

    def build(self, *, loopback: bool = True) -> Recording:
        """The host as a recording: the loopback interface first, carrying the class
        files, as in the bundled fixtures; ``loopback=False`` leaves it (and the class
        files) out, to add these devices to a host that has them already."""
        lo_attrs: list[Attribute] = [
            Attribute(n, v.encode())
            for n, v in (
                ("addr_len", "6\n"),
                ("address", "00:00:00:00:00:00\n"),
                ("flags", "0x9\n"),
                ("ifindex", "1\n"),
                ("mtu", "65536\n"),
                ("operstate", "unknown\n"),
                ("type", "772\n"),
            )
        ]
        abi = _value(self.class_abi)
        if abi is not None:
            lo_attrs.append(
                recording.class_file(LO_PATH, "/class/infiniband_verbs/abi_version", abi)
            )
        lo = Record(LO_PATH, (("SUBSYSTEM", "net"), ("INTERFACE", "lo"), ("IFINDEX", "1")),
                    tuple(lo_attrs))
        return Recording((lo, *self._records) if loopback else tuple(self._records))

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
        """One device record at ``path``: its uevent keys, attributes (None: left
        out), links, ``/dev`` node and node links; returns ``path``."""
        attributes = [Attribute(n, v) for n, v in attrs if v is not None]
        attributes += [Attribute(n, b"", target) for n, target in links]
        rec = Record(path, (("SUBSYSTEM", subsystem), *props), tuple(attributes), node, None,
                     tuple(dev_links))
        self._records.append(rec)
        return path

    def add_pci_function(self, path: str, vendor: int, device: int, sub_vendor: int,
                         sub_device: int, pci_class: int, driver: Optional[str], *,
                         numa_node: int = 0, extra: Iterable[tuple[str, Optional[bytes]]] = (),
                         links: Iterable[tuple[str, str]] = (),
                         vendor_name: Optional[str] = None, model_name: Optional[str] = None,
                         revision: int = 0) -> str:
        """A PCI function's record: uevent keys, modalias and attributes, driver link
        (also what ``tools/make_fixtures.py`` builds the bundled fixtures with)."""
        slot = path.rsplit("/", 1)[1]
        modalias = (f"pci:v{vendor:08X}d{device:08X}sv{sub_vendor:08X}sd{sub_device:08X}"
                    f"bc{pci_class >> 16:02X}sc{(pci_class >> 8) & 0xFF:02X}"
                    f"i{pci_class & 0xFF:02X}")
        props: list[tuple[str, str]] = []
        if driver:
            props.append(("DRIVER", driver))
        props += [
            ("PCI_CLASS", f"{pci_class:X}"),
            ("PCI_ID", f"{vendor:04X}:{device:04X}"),
            ("PCI_SUBSYS_ID", f"{sub_vendor:04X}:{sub_device:04X}"),
            ("PCI_SLOT_NAME", slot),
            ("MODALIAS", modalias),
        ]
        # What udevd's hwdb lookup adds (in udev's database only, never in the
        # uevent file: umockdev shows them to libudev, materialize() leaves them out).
        if vendor_name is not None:
            props.append(("ID_VENDOR_FROM_DATABASE", vendor_name))
        if model_name is not None:
            props.append(("ID_MODEL_FROM_DATABASE", model_name))
        attrs: list[tuple[str, Optional[bytes]]] = [
            ("class", _value(f"0x{pci_class:06x}")),
            ("device", _value(f"0x{device:04x}")),
            ("enable", _value(1)),
            ("modalias", _value(modalias)),
            ("numa_node", _value(numa_node)),
            ("revision", _value(f"0x{revision:02x}")),
            ("subsystem_device", _value(f"0x{sub_device:04x}")),
            ("subsystem_vendor", _value(f"0x{sub_vendor:04x}")),
            ("vendor", _value(f"0x{vendor:04x}")),
            *extra,
        ]
        all_links = list(links)
        if driver:
            all_links.insert(0, ("driver", kernel_link(path, f"/bus/pci/drivers/{driver}")))
        return self.add_device(path, "pci", props, sorted(attrs), all_links)

    def add_aux_device(self, parent: str, name: str, driver: str) -> str:
        """An auxiliary device ``<parent>/<name>`` bound to ``driver``; its path."""
        path = f"{parent}/{name}"
        link = kernel_link(path, f"/bus/auxiliary/drivers/{driver}")
        return self.add_device(path, "auxiliary",
                         [("DRIVER", driver), ("MODALIAS", "auxiliary:" + name.rsplit(".", 1)[0])],
                         [], [("driver", link)])

    def _net(self, parent: Optional[str], ifname: str, mac: str) -> str:
        path = f"{parent}/net/{ifname}" if parent else f"/devices/virtual/net/{ifname}"
        if any(r.path == path for r in self._records):
            return path
        self._ifindex += 1
        attrs = [
            ("addr_len", _value(6)),
            ("address", _value(mac)),
            ("ifindex", _value(self._ifindex)),
            ("mtu", _value(1500)),
            ("operstate", _value("up")),
            ("type", _value(1)),
        ]
        links = [("device", kernel_link(path, parent))] if parent else []
        return self.add_device(path, "net",
                               [("INTERFACE", ifname), ("IFINDEX", str(self._ifindex))],
                               attrs, links)

    def _rdma(self, *, parent: Optional[str], driver: str, name: str, uverbs: Optional[int],
              verbs: bool, abi_version: Value, node_type: Value, node_guid: Union[int, Value],
              dev_node: bool, link_layer: str, fw_ver: str,
              ib_extra: Sequence[tuple[str, Optional[bytes]]] = (),
              ib_attrs: Optional[Mapping[str, Value]] = None,
              uverbs_attrs: Optional[Mapping[str, Value]] = None,
              pci: Optional[str] = None, vf_of: Optional[str] = None) -> FakeDevice:
        if not name or "/" in name:
            raise UsageError(f"invalid IB device name {name!r}")
        if isinstance(node_guid, int) and not isinstance(node_guid, bool):
            guid: Optional[bytes] = _value(guid_text(node_guid))
            guid_int = node_guid
        else:
            guid = _value(node_guid)
            guid_int = 0
        ib_path = f"{parent}/infiniband/{name}" if parent else f"/devices/virtual/infiniband/{name}"
        port = [
            ("ports/1/link_layer", _value(link_layer)),
            ("ports/1/phys_state", _value("5: LinkUp")),
            ("ports/1/state", _value("4: ACTIVE")),
            ("ports/1/rate", _value("100 Gb/sec (4X EDR)" if link_layer == "InfiniBand"
                                    else "25 Gb/sec (1X EDR)")),
            ("ports/1/lid", _value("0x1" if link_layer == "InfiniBand" else "0x0")),
            ("ports/1/sm_lid", _value("0x1" if link_layer == "InfiniBand" else "0x0")),
            ("ports/1/gids/0", _value("fe80:0000:0000:0000:" + guid_text(guid_int))),
            ("ports/1/pkeys/0", _value("0xffff")),
        ]
        files: dict[str, Optional[bytes]] = dict(sorted([
            ("fw_ver", _value(fw_ver)),
            ("node_desc", _value(f"fakehost {name}")),
            ("node_guid", guid),
            ("node_type", _node_type(node_type)),
            ("sys_image_guid", guid),
            *ib_extra,
        ]))
        files.update(port)
        for key, val in (ib_attrs or {}).items():
            files[key] = _value(val)
        links = [("device", kernel_link(ib_path, parent))] if parent else []
        self.add_device(ib_path, "infiniband", [("NAME", name)], files.items(), links)
        uverbs_name: Optional[str] = None
        if verbs:
            uverbs_name = self.add_uverbs(parent, self._next_uverbs(uverbs), name, abi_version,
                                       dev_node=dev_node, pci=pci, attrs=uverbs_attrs)
        fake = FakeDevice(name, uverbs_name, driver, parent, dev_node and verbs, pci, vf_of)
        self._devices.append(fake)
        return fake

    def add_uverbs(self, parent: Optional[str], index: int, ibdev: str, abi_version: Value, *,
                dev_node: bool = True, pci: Optional[str] = None,
                attrs: Optional[Mapping[str, Value]] = None) -> str:
        """``infiniband_verbs/uverbs<index>`` of ``ibdev``, its /dev node (unless
        ``dev_node`` is False) and rdma-core's by-ibdev (and, for a PCI function
        ``pci``, by-path) links; returns the uverbs name."""
        uverbs_name = f"uverbs{index}"
        uv_path = (f"{parent}/infiniband_verbs/{uverbs_name}" if parent
                   else f"/devices/virtual/infiniband_verbs/{uverbs_name}")
        major, minor = ((UVERBS_MAJOR, 192 + index) if index < 32
                        else (UVERBS_DYN_MAJOR, index - 32))
        uv_files: dict[str, Optional[bytes]] = {
            "abi_version": _value(abi_version),
            "dev": _value(f"{major}:{minor}"),
            "ibdev": _value(ibdev),
        }
        for key, val in (attrs or {}).items():
            uv_files[key] = _value(val)
        dev_links = [f"infiniband/by-ibdev/uverbs-{ibdev}"] if dev_node else []
        if dev_node and pci is not None:
            dev_links.append(f"infiniband/by-path/pci-{pci}")
        uv_links = [("device", kernel_link(uv_path, parent))] if parent else []
        self.add_device(uv_path, "infiniband_verbs",
                  [("MAJOR", str(major)), ("MINOR", str(minor)),
                   ("DEVNAME", f"/dev/infiniband/{uverbs_name}"), ("DEVMODE", "0666")],
                  uv_files.items(), uv_links,
                  node=f"infiniband/{uverbs_name}" if dev_node else None,
                  dev_links=dev_links)
        return uverbs_name

    # ------------------------------------------------------------------ hardware
    def mlx5(
        self,
        *,
        model: str = "cx6",
        vfs: int = 0,
        link_layer: str = "InfiniBand",
        name: Optional[str] = None,
        uverbs: Optional[int] = None,
        verbs: bool = True,
        abi_version: Value = 1,
        node_type: Value = 1,
        node_guid: Union[int, Value] = None,
        dev_node: bool = True,
        vf_dev_nodes: bool = True,
        netdev: Optional[str] = None,
        numa_node: int = 0,
        vendor_name: Optional[str] = None,
        model_name: Optional[str] = None,
        ib_attrs: Optional[Mapping[str, Value]] = None,
        uverbs_attrs: Optional[Mapping[str, Value]] = None,
    ) -> HostBuilder:
        """An NVIDIA/Mellanox mlx5 adapter (``model``: a key of :data:`MLX5_MODELS`) as
        a PCI function with its auxiliary ``mlx5_core.rdma.N`` device, and ``vfs``
        SR-IOV virtual functions, each an mlx5 device of its own (``mlx5_<N+1>``...).

        ``vendor_name``/``model_name`` add udev's hwdb properties to the PCI
        function's udev record (seen under umockdev); ``vf_dev_nodes=False`` leaves
        the VFs' ``/dev`` nodes out.
        """
        if model not in MLX5_MODELS:
            raise UsageError(f"unknown mlx5 model {model!r} (have: {', '.join(MLX5_MODELS)})")
        if link_layer not in ("InfiniBand", "Ethernet"):
            raise UsageError("link_layer must be 'InfiniBand' or 'Ethernet'")
        pm = MLX5_MODELS[model]
        root, bus = self._new_bus()
        pf_slot = f"0000:{bus:02x}:00.0"
        pf_path = f"{root}/{pf_slot}"
        vf_slots = [f"0000:{bus:02x}:{(2 + i) >> 3:02x}.{(2 + i) & 7}" for i in range(vfs)]
        pci_class = IB_CLASS if link_layer == "InfiniBand" else ETH_CLASS
        extra: list[tuple[str, Optional[bytes]]] = []
        pf_links: list[tuple[str, str]] = []
        if vfs:
            extra += [("sriov_numvfs", _value(vfs)), ("sriov_totalvfs", _value(max(vfs, 8))),
                      ("sriov_offset", _value(2)), ("sriov_stride", _value(1)),
                      ("sriov_vf_device", _value(f"{pm.vf_device or pm.device:x}"))]
            pf_links += [(f"virtfn{i}", f"../{s}") for i, s in enumerate(vf_slots)]
        self._mlx5_function(pf_path, pf_slot, pm.device, pci_class, link_layer, name=name,
                            uverbs=uverbs, verbs=verbs, abi_version=abi_version,
                            node_type=node_type, node_guid=node_guid, dev_node=dev_node,
                            netdev=netdev, numa_node=numa_node, extra=extra, links=pf_links,
                            vendor_name=vendor_name, model_name=model_name,
                            ib_attrs=ib_attrs, uverbs_attrs=uverbs_attrs, vf_of=None)
        for slot in vf_slots:
            self._mlx5_function(f"{root}/{slot}", slot, pm.vf_device or pm.device, pci_class,
                                link_layer, name=None, uverbs=None, verbs=True,
                                abi_version=abi_version, node_type=node_type, node_guid=None,
                                dev_node=vf_dev_nodes, netdev=None, numa_node=numa_node,
                                extra=[], links=[("physfn", f"../{pf_slot}")],
                                vendor_name=vendor_name, model_name=model_name,
                                ib_attrs=None, uverbs_attrs=None, vf_of=pf_slot)
        return self

    def _mlx5_function(self, path: str, slot: str, device: int, pci_class: int,
                       link_layer: str, *, name: Optional[str], uverbs: Optional[int],
                       verbs: bool, abi_version: Value, node_type: Value,
                       node_guid: Union[int, Value], dev_node: bool, netdev: Optional[str],
                       numa_node: int, extra: Sequence[tuple[str, Optional[bytes]]],
                       links: Sequence[tuple[str, str]], vendor_name: Optional[str],
                       model_name: Optional[str], ib_attrs: Optional[Mapping[str, Value]],
                       uverbs_attrs: Optional[Mapping[str, Value]],
                       vf_of: Optional[str]) -> None:
        index = self._count("mlx5")
        self.add_pci_function(path, 0x15B3, device, 0x15B3, 0x0007, pci_class, "mlx5_core",
                  numa_node=numa_node, extra=extra, links=links, vendor_name=vendor_name,
                  model_name=model_name)
        self.add_aux_device(path, f"mlx5_core.rdma.{index}", "mlx5_ib.rdma")
        guid = node_guid if node_guid is not None else self._guid(0xB8599F0300A20000)
        if netdev is not None and isinstance(guid, int):
            mac = ":".join(f"{(guid >> s) & 0xFF:02x}" for s in (56, 48, 40, 16, 8, 0))
            self._net(path, netdev, mac)
        self._rdma(parent=path, driver="mlx5", name=name or f"mlx5_{index}", uverbs=uverbs,
                   verbs=verbs, abi_version=abi_version, node_type=node_type, node_guid=guid,
                   dev_node=dev_node, link_layer=link_layer, fw_ver="20.39.1002",
                   ib_extra=[("hca_type", _value(f"MT{device}")),
                             ("board_id", _value("MT_0000000222")),
                             ("hw_rev", _value("0x0"))],
                   ib_attrs=ib_attrs, uverbs_attrs=uverbs_attrs, pci=slot, vf_of=vf_of)

    def mlx4(
        self,
        *,
        model: str = "cx3",
        vfs: int = 0,
        name: Optional[str] = None,
        uverbs: Optional[int] = None,
        abi_version: Value = 4,
        node_type: Value = 1,
        node_guid: Union[int, Value] = None,
        dev_node: bool = True,
        ib_attrs: Optional[Mapping[str, Value]] = None,
        uverbs_attrs: Optional[Mapping[str, Value]] = None,
    ) -> HostBuilder:
        """A ConnectX-3 (``mlx4_core``) with ``vfs`` virtual functions; one ``mlx4_N``
        IB device per function."""
        if model not in MLX4_MODELS:
            raise UsageError(f"unknown mlx4 model {model!r} (have: {', '.join(MLX4_MODELS)})")
        pm = MLX4_MODELS[model]
        root, bus = self._new_bus()
        pf_slot = f"0000:{bus:02x}:00.0"
        vf_slots = [f"0000:{bus:02x}:00.{1 + i}" if i < 7 else
                    f"0000:{bus:02x}:{(1 + i) >> 3:02x}.{(1 + i) & 7}" for i in range(vfs)]
        functions: list[tuple[str, int, list[tuple[str, str]], Optional[str]]] = [
            (pf_slot, pm.device, [(f"virtfn{i}", f"../{s}") for i, s in enumerate(vf_slots)],
             None)]
        functions += [(s, pm.vf_device or pm.device, [("physfn", f"../{pf_slot}")], pf_slot)
                      for s in vf_slots]
        for i, (slot, device, links, vf_of) in enumerate(functions):
            index = self._count("mlx4")
            path = f"{root}/{slot}"
            self.add_pci_function(path, 0x15B3, device, 0x15B3, 0x0006, IB_CLASS, "mlx4_core",
                      links=links)
            first = i == 0
            self._rdma(parent=path, driver="mlx4", name=(name if first and name else
                                                        f"mlx4_{index}"),
                       uverbs=uverbs if first else None, verbs=True, abi_version=abi_version,
                       node_type=node_type,
                       node_guid=(node_guid if first and node_guid is not None
                                  else self._guid(0x0002C90300A10000)),
                       dev_node=dev_node, link_layer="InfiniBand", fw_ver="2.42.5000",
                       ib_extra=[("hca_type", _value(f"MT{device}")),
                                 ("board_id", _value("MT_1090120019"))],
                       ib_attrs=ib_attrs if first else None,
                       uverbs_attrs=uverbs_attrs if first else None, pci=slot, vf_of=vf_of)
        return self

    def efa(
        self,
        *,
        model: str = "efa1",
        name: Optional[str] = None,
        uverbs: Optional[int] = None,
        abi_version: Value = 1,
        node_type: Value = 7,
        node_guid: Union[int, Value] = 0,
        dev_node: bool = True,
        ib_attrs: Optional[Mapping[str, Value]] = None,
        uverbs_attrs: Optional[Mapping[str, Value]] = None,
    ) -> HostBuilder:
        """An AWS Elastic Fabric Adapter (``efa`` PCI driver), named ``rdmap<bus>s<slot>``
        as rdma-core's udev rules rename it; node type 7 (unspecified), GUID 0."""
        if model not in EFA_MODELS:
            raise UsageError(f"unknown EFA model {model!r} (have: {', '.join(EFA_MODELS)})")
        pm = EFA_MODELS[model]
        root, bus = self._new_bus()
        slot = f"0000:{bus:02x}:00.0"
        path = f"{root}/{slot}"
        self.add_pci_function(path, 0x1D0F, pm.device, 0x1D0F, pm.device, ETH_CLASS, "efa")
        self._count("efa")
        self._rdma(parent=path, driver="efa", name=name or f"rdmap{bus}s0", uverbs=uverbs,
                   verbs=True, abi_version=abi_version, node_type=node_type,
                   node_guid=node_guid, dev_node=dev_node, link_layer="Unspecified",
                   fw_ver="0.0.0.0", ib_attrs=ib_attrs, uverbs_attrs=uverbs_attrs, pci=slot)
        return self

    def irdma(
        self,
        *,
        name: Optional[str] = None,
        iwarp: bool = False,
        uverbs: Optional[int] = None,
        abi_version: Value = 5,
        node_type: Value = None,
        node_guid: Union[int, Value] = None,
        dev_node: bool = True,
        ib_attrs: Optional[Mapping[str, Value]] = None,
        uverbs_attrs: Optional[Mapping[str, Value]] = None,
    ) -> HostBuilder:
        """An Intel E810 (``ice``) with its ``irdma`` auxiliary device: RoCE (node type
        1), or iWARP (``iwarp=True``: node type 4, RNIC)."""
        root, bus = self._new_bus()
        slot = f"0000:{bus:02x}:00.0"
        path = f"{root}/{slot}"
        index = self._count("irdma")
        self.add_pci_function(path, 0x8086, 0x1593, 0x8086, 0x0002, ETH_CLASS, "ice")
        self.add_aux_device(path, f"ice.{'iwarp' if iwarp else 'roce'}.{index}", "irdma")
        self._rdma(parent=path, driver="irdma", name=name or f"irdma{index}", uverbs=uverbs,
                   verbs=True, abi_version=abi_version,
                   node_type=(4 if iwarp else 1) if node_type is None else node_type,
                   node_guid=self._guid(0xB49691FFFED27E00) if node_guid is None else node_guid,
                   dev_node=dev_node, link_layer="Ethernet", fw_ver="1.71",
                   ib_attrs=ib_attrs, uverbs_attrs=uverbs_attrs, pci=slot)
        return self

    def bnxt_re(
        self,
        *,
        name: Optional[str] = None,
        uverbs: Optional[int] = None,
        abi_version: Value = 1,
        node_type: Value = 1,
        node_guid: Union[int, Value] = None,
        dev_node: bool = True,
        ib_attrs: Optional[Mapping[str, Value]] = None,
        uverbs_attrs: Optional[Mapping[str, Value]] = None,
    ) -> HostBuilder:
        """A Broadcom NetXtreme-E (``bnxt_en``) with its ``bnxt_re`` RoCE device."""
        root, bus = self._new_bus()
        slot = f"0000:{bus:02x}:00.0"
        path = f"{root}/{slot}"
        index = self._count("bnxt_re")
        self.add_pci_function(path, 0x14E4, 0x16D7, 0x14E4, 0x1402, ETH_CLASS, "bnxt_en")
        self.add_aux_device(path, f"bnxt_en.rdma.{index}", "bnxt_re")
        self._rdma(parent=path, driver="bnxt_re", name=name or f"bnxt_re{index}",
                   uverbs=uverbs, verbs=True, abi_version=abi_version, node_type=node_type,
                   node_guid=self._guid(0x0A0B0CFFFE0D0000) if node_guid is None else node_guid,
                   dev_node=dev_node, link_layer="Ethernet", fw_ver="227.0.131.0",
                   ib_attrs=ib_attrs, uverbs_attrs=uverbs_attrs, pci=slot)
        return self

    def rxe(
        self,
        *,
        name: Optional[str] = None,
        netdev: Optional[str] = None,
        uverbs: Optional[int] = None,
        abi_version: Value = 2,
        node_type: Value = 1,
        node_guid: Union[int, Value] = None,
        dev_node: bool = True,
        ib_attrs: Optional[Mapping[str, Value]] = None,
        uverbs_attrs: Optional[Mapping[str, Value]] = None,
    ) -> HostBuilder:
        """A soft-RoCE device (``rdma link add rxe0 type rxe netdev eth0``): under
        ``/devices/virtual``, its GUID the EUI-64 of the netdev's MAC, matched by name."""
        index = self._count("rxe")
        ifname = netdev or f"eth{index}"
        mac_tail = 0x123456 + index
        mac = f"52:54:00:{(mac_tail >> 16) & 0xFF:02x}:{(mac_tail >> 8) & 0xFF:02x}:" \
              f"{mac_tail & 0xFF:02x}"
        self._net(None, ifname, mac)
        eui = 0x505400FFFE000000 | mac_tail
        attrs: dict[str, Value] = {"parent": ifname, "ports/1/gid_attrs/ndevs/0": ifname,
                                   "ports/1/gid_attrs/types/0": "RoCE v2"}
        attrs.update(ib_attrs or {})
        self._rdma(parent=None, driver="rxe", name=name or f"rxe{index}", uverbs=uverbs,
                   verbs=True, abi_version=abi_version, node_type=node_type,
                   node_guid=eui if node_guid is None else node_guid, dev_node=dev_node,
                   link_layer="Ethernet", fw_ver="", ib_attrs=attrs, uverbs_attrs=uverbs_attrs)
        return self

    def siw(
        self,
        *,
        name: Optional[str] = None,
        netdev: Optional[str] = None,
        uverbs: Optional[int] = None,
        abi_version: Value = 1,
        node_type: Value = 4,
        dev_node: bool = True,
    ) -> HostBuilder:
        """A software iWARP device (``siw``): libibverbs matches it only by driver id,
        which sysfs does not carry, so sysfs mode finds it but no provider claims it."""
        index = self._count("siw")
        ifname = netdev or f"eth{index}"
        self._net(None, ifname, f"52:54:00:65:00:{index:02x}")
        self._rdma(parent=None, driver="siw", name=name or f"siw_{ifname}", uverbs=uverbs,
                   verbs=True, abi_version=abi_version, node_type=node_type,
                   node_guid=self._guid(0x5254006500000000), dev_node=dev_node,
                   link_layer="Ethernet", fw_ver="0.0.0",
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
        uverbs: Optional[int] = None,
        verbs: bool = True,
        abi_version: Value = 1,
        node_type: Value = 1,
        node_guid: Union[int, Value] = None,
        dev_node: bool = True,
        link_layer: str = "Ethernet",
        ib_attrs: Optional[Mapping[str, Value]] = None,
        uverbs_attrs: Optional[Mapping[str, Value]] = None,
    ) -> HostBuilder:
        """Any PCI RDMA device: ``driver`` names the IB driver, ``vendor``/``device``
        the PCI ids libibverbs matches on, ``aux`` an auxiliary device between them
        (``"bnxt_en.rdma.0"``)."""
        root, bus = self._new_bus()
        slot = f"0000:{bus:02x}:00.0"
        path = f"{root}/{slot}"
        self.add_pci_function(path, vendor, device, vendor if sub_vendor is None else sub_vendor,
                  device if sub_device is None else sub_device, pci_class,
                  pci_driver or driver)
        if aux is not None:
            self.add_aux_device(path, aux, driver)
        self._rdma(parent=path, driver=driver, name=name, uverbs=uverbs, verbs=verbs,
                   abi_version=abi_version, node_type=node_type,
                   node_guid=self._guid(0x0011220000000000) if node_guid is None else node_guid,
                   dev_node=dev_node, link_layer=link_layer, fw_ver="1.0",
                   ib_attrs=ib_attrs, uverbs_attrs=uverbs_attrs, pci=slot)
        return self



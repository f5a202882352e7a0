"""The ground floor of :class:`~sysverbs.testing.HostBuilder`: its state, the
numbering it gives out (uverbs devices, PCI buses, GUIDs) and the records every
device method lays out (a PCI function, an auxiliary device, a netdev, an RDMA
device with its ib and uverbs devices)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Optional

from ..ground.errors import UsageError
from . import layout
from .builder_machine import CpuLayout
from .builder_tables import DEVICE_OPTION_NAMES, DeviceOptions, Driver
from .layout import Value, guid_text
from .layout import encode as _value
from .layout import encode_node_type as _node_type
from .umockdev import Attribute, Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["FakeDevice", "BuilderBase"]


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


class BuilderBase:
    """What every :class:`~sysverbs.testing.HostBuilder` method builds on: the records
    and devices added so far, the numbers given out, and the record layouts (see
    :class:`~sysverbs.testing.HostBuilder` for the arguments)."""

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
        self._cpu: Optional[CpuLayout] = None
        self._host_bridges: dict[str, int] = {}
        self._bridges: dict[str, tuple[str, tuple[int, int]]] = {}
        self._tree_functions: set[str] = set()
        self._proc_files: list[tuple[str, Attribute]] = []
        self._extra_links: list[tuple[str, str, str]] = []
        self._extra_files: list[tuple[str, Attribute]] = []

    # ------------------------------------------------------------------ results
    @property
    def devices(self) -> tuple[FakeDevice, ...]:
        """The RDMA devices added so far, in the order they were added."""
        return tuple(self._devices)

    def add_record(self, record: Record) -> Self:
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
        unknown = set(options) - DEVICE_OPTION_NAMES
        if unknown:
            raise UsageError(f"unknown device option(s): {', '.join(sorted(unknown))} "
                             f"(have: {', '.join(sorted(DEVICE_OPTION_NAMES))})")
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

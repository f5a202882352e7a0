"""The fake-host model: how the kernel lays out sysfs, as functions from data to
:class:`~sysverbs.testing.umockdev.Record` objects.

A host is a :class:`~sysverbs.testing.umockdev.Recording`: device records (a path below
``/sys``, uevent keys, attribute files, links, a ``/dev`` node).  This module is the
one place that knows what each kind of record holds and where it lives:

* :func:`pci_function`: a PCI function's uevent keys, modalias, attributes and
  driver link;
* :func:`aux_device`: an auxiliary-bus device (``mlx5_core.rdma.0``);
* :func:`net_device`: ``net/<ifname>`` (:func:`net_attrs` gives the files);
* :func:`ib_device`: ``infiniband/<name>`` with its ports (:class:`Port`,
  :func:`port_files`);
* :func:`uverbs_device`, :func:`mad_device`: ``infiniband_verbs/uverbsN`` and
  ``infiniband_mad/umadN``/``issmN`` with their ``/dev`` nodes;
* :func:`loopback`: the loopback interface, which carries the class files.

:class:`~sysverbs.testing.HostBuilder` adds these records from its per-driver table;
``tools/make_fixtures.py`` lays the bundled fixtures out with them.
:func:`~sysverbs.testing.materialize` is the one writer that turns any recording into
a sysfs tree.

>>> from sysverbs.testing import layout
>>> rec = layout.aux_device("/devices/pci0000:00/0000:00:01.0/0000:03:00.0",
...                         "mlx5_core.rdma.0", "mlx5_ib.rdma")
>>> rec.subsystem, rec.property("MODALIAS"), rec.attribute("driver").link
('auxiliary', 'auxiliary:mlx5_core.rdma', '../../../../../bus/auxiliary/drivers/mlx5_ib.rdma')
>>> layout.kernel_link("/devices/virtual/net/bond0", "/devices/pci0000:00/0000:03:00.0/net/p0")
'../../../pci0000:00/0000:03:00.0/net/p0'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, TypedDict, Union

from .umockdev import Attribute, Record, class_file

__all__ = [
    "Value", "NODE_TYPES", "UVERBS_MAJOR", "UVERBS_DYN_MAJOR", "UMAD_MAJOR", "IB_CLASS",
    "ETH_CLASS", "LO_PATH", "encode", "encode_node_type", "guid_text", "kernel_link",
    "cpulist", "cpumask",
    "device", "pci_function", "aux_device", "net_attrs", "net_device", "Port", "port_files",
    "ipv4_gid", "GidTable", "roce_gids",
    "ib_device", "uverbs_device", "mad_device", "loopback",
]

#: A value for a sysfs attribute: ``int`` and ``str`` get the newline the kernel's
#: ``show()`` adds; ``bytes`` are written exactly (for broken values); ``None``
#: leaves the file out.
Value = Union[int, str, bytes, None]

#: ``node_type`` texts by number (the kernel's ``node_type_show()``).
NODE_TYPES: Mapping[int, str] = {
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
UMAD_MAJOR = 231  # umadN = 231:N, issmN = 231:64+N
IB_CLASS, ETH_CLASS = 0x020700, 0x020000
LO_PATH = "/devices/virtual/net/lo"

Files = Iterable[tuple[str, Optional[bytes]]]


def encode(v: Value) -> Optional[bytes]:
    """A :data:`Value` as the file's bytes (None: no file)."""
    if v is None:
        return None
    if isinstance(v, bytes):
        return v
    return f"{v}\n".encode("utf-8", "surrogateescape")


def encode_node_type(v: Value) -> Optional[bytes]:
    """``node_type``: a number of :data:`NODE_TYPES` as its text, anything else as
    :func:`encode` has it."""
    if isinstance(v, int) and not isinstance(v, bool) and v in NODE_TYPES:
        return encode(NODE_TYPES[v])
    return encode(v)


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


def cpulist(cpus: Iterable[int]) -> str:
    """``0-15,128-143``: the kernel's ``%*pbl`` format."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def cpumask(cpus: Iterable[int], nbits: int) -> str:
    """``0000ffff,00000000``: the kernel's ``%*pb`` format for ``nbits`` CPUs (32-bit
    groups, most significant first, the first group only as wide as needed)."""
    value = 0
    for c in cpus:
        value |= 1 << c
    groups = max(1, (nbits + 31) // 32)
    words = [(value >> (32 * i)) & 0xFFFFFFFF for i in reversed(range(groups))]
    first_bits = nbits - 32 * (groups - 1)
    first = f"{words[0]:0{max(1, (first_bits + 3) // 4)}x}"
    return ",".join([first] + [f"{w:08x}" for w in words[1:]])


def _below(parent: Optional[str], kind: str, name: str) -> str:
    """``<parent>/<kind>/<name>``, or ``/devices/virtual/<kind>/<name>`` without one."""
    return f"{parent}/{kind}/{name}" if parent else f"/devices/virtual/{kind}/{name}"


def _device_link(path: str, parent: Optional[str]) -> list[tuple[str, str]]:
    return [("device", kernel_link(path, parent))] if parent else []


# ---------------------------------------------------------------------- records


def device(path: str, subsystem: str, props: Iterable[tuple[str, str]] = (),
           attrs: Files = (), links: Iterable[tuple[str, str]] = (),
           node: Optional[str] = None, dev_links: Iterable[str] = ()) -> Record:
    """One device record at ``path``: its uevent keys, attributes (None: left out),
    links, ``/dev`` node and node links."""
    attributes = [Attribute(n, v) for n, v in attrs if v is not None]
    attributes += [Attribute(n, b"", target) for n, target in links]
    return Record(path, (("SUBSYSTEM", subsystem), *props), tuple(attributes), node, None,
                  tuple(dev_links))


def pci_function(path: str, vendor: int, device_id: int, sub_vendor: int, sub_device: int,
                 pci_class: int, driver: Optional[str], *, numa_node: int = 0,
                 extra: Files = (), links: Iterable[tuple[str, str]] = (),
                 vendor_name: Optional[str] = None, model_name: Optional[str] = None,
                 revision: int = 0) -> Record:
    """A PCI function's record: uevent keys, modalias and attributes (sorted, with
    ``extra`` among them), the driver link and ``links``."""
    slot = path.rsplit("/", 1)[1]
    modalias = (f"pci:v{vendor:08X}d{device_id:08X}sv{sub_vendor:08X}sd{sub_device:08X}"
                f"bc{pci_class >> 16:02X}sc{(pci_class >> 8) & 0xFF:02X}"
                f"i{pci_class & 0xFF:02X}")
    props: list[tuple[str, str]] = []
    if driver:
        props.append(("DRIVER", driver))
    props += [
        ("PCI_CLASS", f"{pci_class:X}"),
        ("PCI_ID", f"{vendor:04X}:{device_id:04X}"),
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
        ("class", encode(f"0x{pci_class:06x}")),
        ("device", encode(f"0x{device_id:04x}")),
        ("enable", encode(1)),
        ("modalias", encode(modalias)),
        ("numa_node", encode(numa_node)),
        ("revision", encode(f"0x{revision:02x}")),
        ("subsystem_device", encode(f"0x{sub_device:04x}")),
        ("subsystem_vendor", encode(f"0x{sub_vendor:04x}")),
        ("vendor", encode(f"0x{vendor:04x}")),
        *extra,
    ]
    all_links = list(links)
    if driver:
        all_links.insert(0, ("driver", kernel_link(path, f"/bus/pci/drivers/{driver}")))
    return device(path, "pci", props, sorted(attrs, key=lambda a: (a[0], a[1] or b"")),
                  all_links)


def aux_device(parent: str, name: str, driver: str) -> Record:
    """An auxiliary device ``<parent>/<name>`` bound to ``driver``."""
    path = f"{parent}/{name}"
    link = kernel_link(path, f"/bus/auxiliary/drivers/{driver}")
    return device(path, "auxiliary",
                  [("DRIVER", driver), ("MODALIAS", "auxiliary:" + name.rsplit(".", 1)[0])],
                  [], [("driver", link)])


def net_attrs(address: str, ifindex: int, *, full: bool = False, arp_type: int = 1,
              mtu: int = 1500, operstate: str = "up", dev_port: int = 0,
              broadcast: Optional[str] = None) -> list[tuple[str, Optional[bytes]]]:
    """The files of ``net/<ifname>``: the six a reader needs (``addr_len``,
    ``address``, ``ifindex``, ``mtu``, ``operstate``, ``type``), or with ``full``
    all eleven a captured interface shows (``broadcast`` defaults to IPoIB's for
    ``arp_type`` 32, Ethernet's otherwise)."""
    addr_len = len(address.split(":"))
    if not full:
        return [("addr_len", encode(addr_len)), ("address", encode(address)),
                ("ifindex", encode(ifindex)), ("mtu", encode(mtu)),
                ("operstate", encode(operstate)), ("type", encode(arp_type))]
    if broadcast is None:
        broadcast = ("00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"
                     if arp_type == 32 else "ff:ff:ff:ff:ff:ff")
    return [
        ("addr_assign_type", encode(0)),
        ("addr_len", encode(addr_len)),
        ("address", encode(address)),
        ("broadcast", encode(broadcast)),
        ("dev_id", encode("0x0")),
        ("dev_port", encode(dev_port)),
        ("ifindex", encode(ifindex)),
        ("iflink", encode(ifindex)),
        ("mtu", encode(mtu)),
        ("operstate", encode(operstate)),
        ("type", encode(arp_type)),
    ]


def net_device(parent: Optional[str], ifname: str, ifindex: int, attrs: Files,
               links: Iterable[tuple[str, str]] = ()) -> Record:
    """A network interface ``net/<ifname>`` below ``parent`` (None: a virtual one),
    with its ``device`` link and ``links``."""
    path = _below(parent, "net", ifname)
    return device(path, "net", [("INTERFACE", ifname), ("IFINDEX", str(ifindex))], attrs,
                  [*_device_link(path, parent), *links])


@dataclass(frozen=True)
class Port:
    """One ``ports/N`` directory of an ib device, all the files the kernel shows."""

    link_layer: str = "InfiniBand"
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    rate: str = "100 Gb/sec (4X EDR)"
    lid: str = "0x0"
    sm_lid: str = "0x0"
    lid_mask_count: str = "0"
    sm_sl: str = "0"
    cap_mask: str = "0x00000000"
    gids: Sequence[str] = ()
    gid_types: Sequence[str] = ()  # gid_attrs/types/N (only readable entries)
    gid_ndevs: Sequence[str] = ()  # gid_attrs/ndevs/N (only RoCE/iWARP ports)
    pkeys: Sequence[str] = ("0xffff",)


def ipv4_gid(ip: str) -> str:
    """The GID the kernel adds for an IPv4 address of a RoCE port's netdev
    (``::ffff:a.b.c.d``), as ``gids/N`` shows it."""
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


class GidTable(TypedDict):
    """:class:`Port`'s GID files: ``gids/N``, ``gid_attrs/types/N``, ``gid_attrs/ndevs/N``."""

    gids: tuple[str, ...]
    gid_types: tuple[str, ...]
    gid_ndevs: tuple[str, ...]


def roce_gids(link_local: str, netdev: str, ipv4: Optional[str] = None, *, v1: bool = True
              ) -> GidTable:
    """A RoCE port's GID table in the kernel's order, as :class:`Port`'s ``gids``,
    ``gid_types`` and ``gid_ndevs``: the link-local GID, then the IPv4 address's, each as
    RoCE v1 (``IB/RoCE v1``, unless ``v1`` is False) and v2, all on ``netdev``."""
    gids: list[str] = []
    types: list[str] = []
    for gid in (link_local, *((ipv4_gid(ipv4),) if ipv4 is not None else ())):
        if v1:
            gids.append(gid)
            types.append("IB/RoCE v1")
        gids.append(gid)
        types.append("RoCE v2")
    return {"gids": tuple(gids), "gid_types": tuple(types),
            "gid_ndevs": tuple(netdev for _ in gids)}


def port_files(number: int, port: Port) -> list[tuple[str, Optional[bytes]]]:
    """The files of ``ports/<number>`` (names relative to the ib device)."""
    p = f"ports/{number}"
    files = [
        (f"{p}/cap_mask", port.cap_mask),
        (f"{p}/lid", port.lid),
        (f"{p}/lid_mask_count", port.lid_mask_count),
        (f"{p}/link_layer", port.link_layer),
        (f"{p}/phys_state", port.phys_state),
        (f"{p}/rate", port.rate),
        (f"{p}/sm_lid", port.sm_lid),
        (f"{p}/sm_sl", port.sm_sl),
        (f"{p}/state", port.state),
    ]
    files += [(f"{p}/gids/{n}", g) for n, g in enumerate(port.gids)]
    files += [(f"{p}/gid_attrs/types/{n}", v) for n, v in enumerate(port.gid_types)]
    files += [(f"{p}/gid_attrs/ndevs/{n}", v) for n, v in enumerate(port.gid_ndevs)]
    files += [(f"{p}/pkeys/{n}", v) for n, v in enumerate(port.pkeys)]
    return [(name, encode(value)) for name, value in files]


def ib_device(parent: Optional[str], name: str, attrs: Files) -> Record:
    """An ib device ``infiniband/<name>`` below ``parent`` (None: a virtual one) with
    the files ``attrs`` (device files, then :func:`port_files`) and its ``device``
    link."""
    path = _below(parent, "infiniband", name)
    return device(path, "infiniband", [("NAME", name)], attrs, _device_link(path, parent))


def uverbs_device(parent: Optional[str], index: int, ibdev: str, abi_version: Value, *,
                  dev_node: bool = True, pci: Optional[str] = None,
                  attrs: Optional[Mapping[str, Value]] = None) -> Record:
    """``infiniband_verbs/uverbs<index>`` of ``ibdev``, its /dev node (unless
    ``dev_node`` is False) and rdma-core's by-ibdev (and, for a PCI function ``pci``,
    by-path) links; ``attrs`` adds or replaces files."""
    uverbs_name = f"uverbs{index}"
    path = _below(parent, "infiniband_verbs", uverbs_name)
    major, minor = ((UVERBS_MAJOR, 192 + index) if index < 32
                    else (UVERBS_DYN_MAJOR, index - 32))
    files: dict[str, Optional[bytes]] = {
        "abi_version": encode(abi_version),
        "dev": encode(f"{major}:{minor}"),
        "ibdev": encode(ibdev),
    }
    for key, val in (attrs or {}).items():
        files[key] = encode(val)
    dev_links = [f"infiniband/by-ibdev/uverbs-{ibdev}"] if dev_node else []
    if dev_node and pci is not None:
        dev_links.append(f"infiniband/by-path/pci-{pci}")
    return device(path, "infiniband_verbs",
                  [("MAJOR", str(major)), ("MINOR", str(minor)),
                   ("DEVNAME", f"/dev/infiniband/{uverbs_name}"), ("DEVMODE", "0666")],
                  files.items(), _device_link(path, parent),
                  node=f"infiniband/{uverbs_name}" if dev_node else None, dev_links=dev_links)


def mad_device(parent: Optional[str], kind: str, index: int, ibdev: str, port: int) -> Record:
    """``infiniband_mad/umad<index>`` (``kind="umad"``) or ``issm<index>`` (ib_umad)
    with its /dev node."""
    name = f"{kind}{index}"
    path = _below(parent, "infiniband_mad", name)
    minor = index if kind == "umad" else 64 + index
    props = [("MAJOR", str(UMAD_MAJOR)), ("MINOR", str(minor)),
             ("DEVNAME", f"/dev/infiniband/{name}")]
    attrs = [("dev", encode(f"{UMAD_MAJOR}:{minor}")), ("ibdev", encode(ibdev)),
             ("port", encode(port))]
    return device(path, "infiniband_mad", props, attrs, _device_link(path, parent),
                  node=f"infiniband/{name}")


def loopback(*, verbs_abi: Value = 6, mad_abi: Value = None, full: bool = False) -> Record:
    """The loopback interface, first record of a host: it carries the class files
    ``infiniband_verbs/abi_version`` and ``infiniband_mad/abi_version`` (None: no
    file).  ``full``: all the files a captured ``lo`` shows (the bundled fixtures),
    otherwise the six a reader needs."""
    names: tuple[tuple[str, Value], ...]
    if full:
        names = (("addr_assign_type", 0), ("addr_len", 6), ("address", "00:00:00:00:00:00"),
                 ("broadcast", "00:00:00:00:00:00"), ("dev_id", "0x0"), ("dev_port", 0),
                 ("flags", "0x9"), ("ifindex", 1), ("iflink", 1), ("mtu", 65536),
                 ("operstate", "unknown"), ("type", 772))
    else:
        names = (("addr_len", 6), ("address", "00:00:00:00:00:00"), ("flags", "0x9"),
                 ("ifindex", 1), ("mtu", 65536), ("operstate", "unknown"), ("type", 772))
    attrs = [Attribute(n, encode(v) or b"") for n, v in names]
    for target, value in (("/class/infiniband_verbs/abi_version", verbs_abi),
                          ("/class/infiniband_mad/abi_version", mad_abi)):
        raw = encode(value)
        if raw is not None:
            attrs.append(class_file(LO_PATH, target, raw))
    return Record(LO_PATH, (("SUBSYSTEM", "net"), ("INTERFACE", "lo"), ("IFINDEX", "1")),
                  tuple(attrs))

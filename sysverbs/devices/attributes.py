"""What sysfs says about an RDMA device and its ports, typed and parsed carefully.

libibverbs reads none of this during discovery; ``ibv_devinfo`` asks the kernel
through verbs calls.  sysverbs reads the same facts from the kernel's sysfs files
(``/sys/class/infiniband/<dev>/...``), each with :func:`sysverbs.ground.sysfs_read.read_sysfs_file`
and a bounded size, and parses them strictly: a value that is missing, empty or
not in the kernel's format becomes ``None``, and the text as read is kept in
``raw`` (``None`` there when the file could not be read).  Nothing but ``OSError``
escapes (and only from invalid arguments): a broken tree gives ``None`` values.

>>> import tempfile, sysverbs
>>> from sysverbs import testing
>>> from sysverbs.devices.attributes import device_attributes, PortState
>>> with tempfile.TemporaryDirectory() as tmp:
...     host = testing.materialize(testing.fixture_path("mlx5-cx6"), tmp)
...     attrs = device_attributes("mlx5_0", sysfs_path=host.sysfs)
>>> attrs.fw_ver, attrs.hca_type, f"{attrs.node_guid:016x}"
('20.33.1048', 'MT4123', 'b8599f0300529348')
>>> port = attrs.ports[0]
>>> port.state is PortState.ACTIVE, port.rate.gbps, port.rate.width, port.rate.speed
(True, 200.0, 4, 'HDR')
>>> port.lid, port.raw["lid"], str(port.gids[0].gid)
(37, '0x25', 'fe80::b859:9f03:52:9348')
"""

from __future__ import annotations

import enum
import ipaddress
import os
import re
from collections.abc import Mapping

from ..engine.api import int_arg, path_arg
from ..ground.records import FrozenRecord, init
from ..ground.sysfs_read import read_sysfs_file, scan_hx4
from ..ground.text import rate_fields

# Neither typing nor dataclasses at run time: ``sysverbs env`` and ``run`` load this
# module for read_text() and pay for every import (benchmarks/bench_run.py); the
# records are FrozenRecords.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Optional, Union

    from ..engine.device import Device
    from ..ground.enums import NodeType

    DeviceArg = Union["Device", str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
    PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

__all__ = [
    "ATTR_SIZE",
    "DeviceAttributes",
    "Gid",
    "GidType",
    "LinkLayer",
    "PhysState",
    "PortAttributes",
    "PortState",
    "Rate",
    "RawText",
    "DeviceStatus",
    "PortStatus",
    "device_attributes",
    "device_status",
    "port_attributes",
    "parse_rate",
]

#: The most a sysfs attribute can hold (one page); every read here is bounded by it.
ATTR_SIZE = 4096
_SMALL = 64  # GIDs, GID types, netdev names, pkeys: a few dozen bytes at most


class PortState(enum.IntEnum):
    """``enum ibv_port_state`` (the number in ``ports/N/state``)."""

    NOP = 0
    DOWN = 1
    INIT = 2
    ARMED = 3
    ACTIVE = 4
    ACTIVE_DEFER = 5


class PhysState(enum.IntEnum):
    """The IB physical port state (the number in ``ports/N/phys_state``)."""

    SLEEP = 1
    POLLING = 2
    DISABLED = 3
    PORT_CONFIGURATION_TRAINING = 4
    LINK_UP = 5
    LINK_ERROR_RECOVERY = 6
    PHY_TEST = 7


class LinkLayer(enum.IntEnum):
    """``IBV_LINK_LAYER_*``: ``ports/N/link_layer`` says ``InfiniBand``, ``Ethernet`` or
    ``Unknown``."""

    UNSPECIFIED = 0
    INFINIBAND = 1
    ETHERNET = 2


class GidType(enum.IntEnum):
    """``enum ibv_gid_type``.  The kernel's ``IB/RoCE v1`` is IB on an InfiniBand port
    and RoCE v1 on an Ethernet port, as ``ibv_query_gid_ex`` reports it."""

    IB = 0
    ROCE_V1 = 1
    ROCE_V2 = 2


class RawText(Mapping[str, "Optional[str]"]):
    """The attribute files as read: name -> text (one trailing newline removed), or
    ``None`` when the file was missing or unreadable.  Immutable and hashable."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Optional[str]]) -> None:
        self._items = tuple(items.items())

    def __getitem__(self, key: str) -> Optional[str]:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RawText):
            return self._items == other._items
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return f"RawText({dict(self._items)!r})"


#: ``IB_SPEED_*`` / ``enum ibv_port_speed``-like codes that ``ibv_devinfo`` prints in
#: ``active_speed`` (the kernel's speed name in ``rate``).
SPEED_CODES = {
    "SDR": 1,
    "DDR": 2,
    "QDR": 4,
    "FDR10": 8,
    "FDR": 16,
    "EDR": 32,
    "HDR": 64,
    "NDR": 128,
    "XDR": 256,
}
#: ``IB_WIDTH_*``: the code ``ibv_devinfo`` prints in ``active_width`` for each lane count.
WIDTH_CODES = {1: 1, 4: 2, 8: 4, 12: 8, 2: 16}


class Rate(FrozenRecord):
    """``ports/N/rate``: ``"200 Gb/sec (4X HDR)"`` is 200.0 Gb/s over 4 lanes of HDR.

    ``speed`` is None when the kernel printed no speed name (very old kernels).
    """

    __slots__ = _fields = ("gbps", "width", "speed")
    gbps: float
    width: int
    speed: Optional[str]

    def __init__(self, gbps: float, width: int, speed: Optional[str]) -> None:
        init(self, gbps, width, speed)

    @property
    def width_code(self) -> Optional[int]:
        """``active_width`` as ``ibv_devinfo`` prints it in parentheses (4X -> 2)."""
        return WIDTH_CODES.get(self.width)

    @property
    def speed_code(self) -> Optional[int]:
        """``active_speed`` as ``ibv_devinfo`` prints it in parentheses (EDR -> 32)."""
        return SPEED_CODES.get(self.speed) if self.speed is not None else None


def parse_rate(text: Optional[str]) -> Optional[Rate]:
    """Parse the kernel's ``rate`` text; None unless it has the kernel's exact format.

    >>> parse_rate("2.5 Gb/sec (1X SDR)")
    Rate(gbps=2.5, width=1, speed='SDR')
    >>> parse_rate("56 Gb/sec (4X FDR)").speed_code, parse_rate("junk") is None
    (16, True)
    """
    fields = rate_fields(text)
    if fields is None:
        return None
    return Rate(gbps=fields[0], width=fields[1], speed=fields[2])


class Gid(FrozenRecord):
    """One valid entry of a port's GID table (``ports/N/gids/<index>``).

    ``type`` is None when ``gid_attrs/types/<index>`` is missing or unknown (its text is
    ``raw_type``); ``ndev`` is the netdev of a RoCE GID (``gid_attrs/ndevs/<index>``).
    """

    __slots__ = _fields = ("index", "gid", "type", "ndev", "raw", "raw_type")
    index: int
    gid: ipaddress.IPv6Address
    type: Optional[GidType]
    ndev: Optional[str]
    raw: str
    raw_type: Optional[str]

    def __init__(self, index: int, gid: ipaddress.IPv6Address, type: Optional[GidType],
                 ndev: Optional[str], raw: str, raw_type: Optional[str]) -> None:
        init(self, index, gid, type, ndev, raw, raw_type)

    @property
    def subnet_prefix(self) -> int:
        return int(self.gid) >> 64

    @property
    def interface_id(self) -> int:
        """The low 64 bits: the port GUID for an IB GID 0."""
        return int(self.gid) & ((1 << 64) - 1)


class PortAttributes(FrozenRecord):
    """``/sys/class/infiniband/<dev>/ports/<port>``.

    ``gids`` holds the valid (non-zero) GID table entries in index order and
    ``gid_tbl_len`` the size of the table (the entries in ``gids/``); ``pkeys`` the
    non-zero P_Keys as ``(index, pkey)``.  ``raw`` keeps the text of each scalar file.
    """

    __slots__ = _fields = ("port", "state", "phys_state", "rate", "lid", "sm_lid", "sm_sl",
                     "lid_mask_count", "cap_mask", "link_layer", "gids", "gid_tbl_len",
                     "pkeys", "pkey_tbl_len", "raw")
    port: int
    state: Optional[PortState]
    phys_state: Optional[PhysState]
    rate: Optional[Rate]
    lid: Optional[int]
    sm_lid: Optional[int]
    sm_sl: Optional[int]
    lid_mask_count: Optional[int]
    cap_mask: Optional[int]
    link_layer: Optional[LinkLayer]
    gids: tuple[Gid, ...]
    gid_tbl_len: int
    pkeys: tuple[tuple[int, int], ...]
    pkey_tbl_len: int
    raw: RawText

    def __init__(self, port: int, state: Optional[PortState], phys_state: Optional[PhysState],
                 rate: Optional[Rate], lid: Optional[int], sm_lid: Optional[int],
                 sm_sl: Optional[int], lid_mask_count: Optional[int], cap_mask: Optional[int],
                 link_layer: Optional[LinkLayer], gids: tuple[Gid, ...], gid_tbl_len: int,
                 pkeys: tuple[tuple[int, int], ...], pkey_tbl_len: int, raw: RawText) -> None:
        init(self, port, state, phys_state, rate, lid, sm_lid, sm_sl, lid_mask_count, cap_mask,
             link_layer, gids, gid_tbl_len, pkeys, pkey_tbl_len, raw)

    @property
    def port_guid(self) -> Optional[int]:
        """The interface id of GID 0: the port GUID on InfiniBand (IPoIB uses it)."""
        return _gid0_interface(self.gids)


def _gid0_interface(gids: tuple[Gid, ...]) -> Optional[int]:
    for gid in gids:
        if gid.index == 0:
            return gid.interface_id
    return None


class PortStatus(FrozenRecord):
    """What the verdicts ask of a port (:func:`device_status`): its ``state``,
    ``phys_state``, ``link_layer`` and GID table, as :class:`PortAttributes` has them
    (``raw``: the text of those three files); the rest of the port is read by
    :func:`port_attributes`."""

    __slots__ = _fields = ("port", "state", "phys_state", "link_layer", "gids", "gid_tbl_len",
                           "raw")
    port: int
    state: Optional[PortState]
    phys_state: Optional[PhysState]
    link_layer: Optional[LinkLayer]
    gids: tuple[Gid, ...]
    gid_tbl_len: int
    raw: RawText

    def __init__(self, port: int, state: Optional[PortState], phys_state: Optional[PhysState],
                 link_layer: Optional[LinkLayer], gids: tuple[Gid, ...], gid_tbl_len: int,
                 raw: RawText) -> None:
        init(self, port, state, phys_state, link_layer, gids, gid_tbl_len, raw)

    @property
    def port_guid(self) -> Optional[int]:
        """The interface id of GID 0: the port GUID on InfiniBand (IPoIB uses it)."""
        return _gid0_interface(self.gids)


class DeviceStatus(FrozenRecord):
    """What the verdicts ask of a device (:func:`device_status`): ``node_type``,
    ``node_guid``, ``parent`` (``raw``: their text) and each port's
    :class:`PortStatus`, as :class:`DeviceAttributes` has them."""

    __slots__ = _fields = ("name", "node_type", "node_guid", "parent", "ports", "raw")
    name: str
    node_type: Optional[NodeType]
    node_guid: Optional[int]
    parent: Optional[str]
    ports: tuple[PortStatus, ...]
    raw: RawText

    def __init__(self, name: str, node_type: Optional[NodeType], node_guid: Optional[int],
                 parent: Optional[str], ports: tuple[PortStatus, ...], raw: RawText) -> None:
        init(self, name, node_type, node_guid, parent, ports, raw)


class DeviceAttributes(FrozenRecord):
    """``/sys/class/infiniband/<dev>``: the device attributes and its ports.

    ``parent`` is the netdev of a software device (rxe, siw).  ``raw`` keeps the
    text of each file read.
    """

    __slots__ = _fields = ("name", "node_type", "node_guid", "sys_image_guid", "fw_ver", "hw_rev",
                     "hca_type", "board_id", "node_desc", "parent", "ports", "raw")
    name: str
    node_type: Optional[NodeType]
    node_guid: Optional[int]
    sys_image_guid: Optional[int]
    fw_ver: Optional[str]
    hw_rev: Optional[int]
    hca_type: Optional[str]
    board_id: Optional[str]
    node_desc: Optional[str]
    parent: Optional[str]
    ports: tuple[PortAttributes, ...]
    raw: RawText

    def __init__(self, name: str, node_type: Optional[NodeType], node_guid: Optional[int],
                 sys_image_guid: Optional[int], fw_ver: Optional[str], hw_rev: Optional[int],
                 hca_type: Optional[str], board_id: Optional[str], node_desc: Optional[str],
                 parent: Optional[str], ports: tuple[PortAttributes, ...],
                 raw: RawText) -> None:
        init(self, name, node_type, node_guid, sys_image_guid, fw_ver, hw_rev, hca_type, board_id,
             node_desc, parent, ports, raw)

    def port(self, number: int) -> Optional[PortAttributes]:
        """The port with that number (1-based), or None."""
        for p in self.ports:
            if p.port == number:
                return p
        return None


# ----------------------------------------------------------------------------- reading


def read_text(path: bytes, size: int = ATTR_SIZE) -> Optional[str]:
    """One sysfs value as text (bytes that are not UTF-8 escaped), or None if unreadable."""
    value = read_sysfs_file(path, size)
    return None if value is None else os.fsdecode(value)


def resolve_ibdev(device: DeviceArg, sysfs_path: Optional[PathArg] = None) -> tuple[bytes, bytes]:
    """``(ibdev_path, name)`` of a :class:`~sysverbs.Device`, an IB device name (looked
    up in ``<sysfs_path>/class/infiniband``, default the effective sysfs root) or the
    path of an IB device directory."""
    from ..engine.device import Device

    if isinstance(device, Device):
        path = os.fsencode(device.ibdev_path)
        return path, os.fsencode(device.name)
    raw = path_arg(device, "device")
    if b"/" in raw:
        return raw.rstrip(b"/"), os.path.basename(raw.rstrip(b"/"))
    if sysfs_path is None:
        from ..engine.api import env_sysfs_root

        root = env_sysfs_root()
    else:
        root = path_arg(sysfs_path, "sysfs_path").rstrip(b"/")
    return root + b"/class/infiniband/" + raw, raw


def numbered_entries(path: bytes) -> list[int]:
    """The entries of a directory whose names are decimal numbers, sorted (a missing or
    unreadable directory has none)."""
    from ..ground.sysfs_read import listdir

    try:
        names = listdir(path)
    except (OSError, ValueError):
        return []
    out = []
    for name in names:
        if name.isdigit() and name.isascii() and len(name) < 10:
            out.append(int(name))
    return sorted(out)


# ----------------------------------------------------------------------------- parsing

# Patterns, compiled by re on first use (and kept in its cache): a command that reads
# no attribute file does not pay for compiling them at import (benchmarks/bench_run.py).
_HEX = r"0x([0-9a-fA-F]{1,16})"
_DEC = r"[0-9]{1,10}"
_GID = r"[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}"
_NUMBERED = r"(\d{1,10}): (\S.*)"
_BARE_HEX = r"(?:0x)?([0-9a-fA-F]{1,16})"


def _hex(text: Optional[str]) -> Optional[int]:
    m = re.fullmatch(_HEX, text) if text is not None else None
    return int(m.group(1), 16) if m else None


def _dec(text: Optional[str]) -> Optional[int]:
    return int(text) if text is not None and re.fullmatch(_DEC, text) else None


def parse_guid(text: Optional[str]) -> Optional[int]:
    """``"b859:9f03:0052:9348"`` -> int, parsed as libibverbs parses ``node_guid``
    (``device.c: ibv_get_device_guid``: ``sscanf("%hx:%hx:%hx:%hx")``, each field cut
    to 16 bits, anything after the fourth ignored); None when that fails."""
    if text is None:
        return None
    parts = scan_hx4(os.fsencode(text))
    if parts is None:
        return None
    return parts[0] << 48 | parts[1] << 32 | parts[2] << 16 | parts[3]


def parse_gid(text: Optional[str]) -> Optional[ipaddress.IPv6Address]:
    """A GID as the kernel prints it (``%pI6``: eight groups of four hex digits)."""
    if text is None or not re.fullmatch(_GID, text):
        return None
    return ipaddress.IPv6Address(bytes.fromhex(text.replace(":", "")))


def _numbered(text: Optional[str]) -> Optional[int]:
    """``"4: ACTIVE"`` -> 4 (the kernel's ``%d: %s`` format)."""
    m = re.fullmatch(_NUMBERED, text) if text is not None else None
    return int(m.group(1)) if m else None


def _port_state(number: Optional[int]) -> Optional[PortState]:
    return PortState(number) if number is not None and 0 <= number <= 5 else None


def _phys_state(number: Optional[int]) -> Optional[PhysState]:
    return PhysState(number) if number is not None and 1 <= number <= 7 else None


def _node_type(number: Optional[int]) -> Optional[NodeType]:
    from ..ground.enums import NodeType, node_type_from_number

    if number is None:
        return None
    node = node_type_from_number(number)
    return None if node is NodeType.UNKNOWN else node


def _string(text: Optional[str]) -> Optional[str]:
    """A free-text value: None when missing, empty or holding a NUL byte."""
    if not text or "\0" in text:
        return None
    return text


_LINK_LAYERS = {
    "InfiniBand": LinkLayer.INFINIBAND,
    "Ethernet": LinkLayer.ETHERNET,
    "Unknown": LinkLayer.UNSPECIFIED,
}


def _gid_type(text: Optional[str], link_layer: Optional[LinkLayer]) -> Optional[GidType]:
    if text == "RoCE v2":
        return GidType.ROCE_V2
    if text == "IB/RoCE v1":
        return GidType.ROCE_V1 if link_layer is LinkLayer.ETHERNET else GidType.IB
    return None


# ----------------------------------------------------------------------------- public


def _port_status(ibdev_path: bytes, number: int) -> PortStatus:
    base = ibdev_path + b"/ports/%d" % number
    raw = {name: read_text(base + b"/" + name) for name in (b"state", b"phys_state",
                                                            b"link_layer")}
    link_layer = _LINK_LAYERS.get(raw[b"link_layer"] or "")
    gids: list[Gid] = []
    gid_indexes = numbered_entries(base + b"/gids")
    for index in gid_indexes:
        text = read_text(base + b"/gids/%d" % index, _SMALL)
        if text == "0000:0000:0000:0000:0000:0000:0000:0000":
            continue  # the kernel's unused entry (most of a table): not parsed
        gid = parse_gid(text)
        if gid is None or text is None or int(gid) == 0:
            continue  # the kernel shows unused entries as the zero GID
        raw_type = read_text(base + b"/gid_attrs/types/%d" % index, _SMALL)
        ndev = _string(read_text(base + b"/gid_attrs/ndevs/%d" % index, _SMALL))
        gids.append(Gid(index, gid, _gid_type(raw_type, link_layer), ndev, text, raw_type))
    return PortStatus(number, _port_state(_numbered(raw[b"state"])),
                      _phys_state(_numbered(raw[b"phys_state"])), link_layer, tuple(gids),
                      len(gid_indexes), RawText({k.decode(): v for k, v in raw.items()}))


def _port(ibdev_path: bytes, status: PortStatus) -> PortAttributes:
    """The port ``status`` is the status of, the rest of its files read."""
    base = ibdev_path + b"/ports/%d" % status.port
    raw: dict[str, Optional[str]] = {}
    for name in ("state", "phys_state", "rate", "lid", "sm_lid", "sm_sl", "lid_mask_count",
                 "cap_mask", "link_layer"):
        raw[name] = (status.raw[name] if name in status.raw
                     else read_text(base + b"/" + name.encode()))
    pkeys: list[tuple[int, int]] = []
    pkey_indexes = numbered_entries(base + b"/pkeys")
    for index in pkey_indexes:
        value = _hex(read_text(base + b"/pkeys/%d" % index, _SMALL))
        if value:
            pkeys.append((index, value))
    return PortAttributes(
        port=status.port,
        state=status.state,
        phys_state=status.phys_state,
        rate=parse_rate(raw["rate"]),
        lid=_hex(raw["lid"]),
        sm_lid=_hex(raw["sm_lid"]),
        sm_sl=_dec(raw["sm_sl"]),
        lid_mask_count=_dec(raw["lid_mask_count"]),
        cap_mask=_hex(raw["cap_mask"]),
        link_layer=status.link_layer,
        gids=status.gids,
        gid_tbl_len=status.gid_tbl_len,
        pkeys=tuple(pkeys),
        pkey_tbl_len=len(pkey_indexes),
        raw=RawText(raw),
    )


def port_attributes(
    device: DeviceArg, port: int, *, sysfs_path: Optional[PathArg] = None
) -> PortAttributes:
    """The attributes of one port (1-based) of a device (a :class:`~sysverbs.Device`,
    an IB device name or an IB device directory).  A port that does not exist gives
    ``None`` values; a ``port`` that is not an int a
    :class:`~sysverbs.ground.errors.WrongTypeError`."""
    ibdev_path, _ = resolve_ibdev(device, sysfs_path)
    return _port(ibdev_path, _port_status(ibdev_path, int_arg(port, "port")))


def device_attributes(
    device: DeviceArg, *, sysfs_path: Optional[PathArg] = None
) -> DeviceAttributes:
    """The attributes of a device and all its ports.

    ``device`` is a :class:`~sysverbs.Device`, an IB device name (``"mlx5_0"``, looked
    up in ``<sysfs_path>/class/infiniband``; default: the effective sysfs root) or the
    path of an IB device directory.
    """
    from ..ground.sysfs_read import derived

    ibdev_path, name = resolve_ibdev(device, sysfs_path)
    # made of the reads alone: once per device in a read-once scope (the diagnosis, the
    # device's location and the fleet's facts each ask for it)
    return derived("device_attributes", ibdev_path + b"/",
                   lambda: _device_attributes(ibdev_path, name))


def device_status(device: DeviceArg, *, sysfs_path: Optional[PathArg] = None) -> DeviceStatus:
    """What the verdicts ask of a device and its ports (:class:`DeviceStatus`): the
    files of :func:`device_attributes` the diagnosis, the device's location and the
    fleet's facts depend on, and no others (a long-running exporter asks again at every
    scrape whether each file it read changed).  ``device`` as for
    :func:`device_attributes`."""
    from ..ground.sysfs_read import derived

    ibdev_path, name = resolve_ibdev(device, sysfs_path)
    return derived("device_status", ibdev_path + b"/",
                   lambda: _device_status(ibdev_path, name))


def _device_status(ibdev_path: bytes, name: bytes) -> DeviceStatus:
    raw = {attr: read_text(ibdev_path + b"/" + attr.encode())
           for attr in ("node_type", "node_guid", "parent")}
    return DeviceStatus(
        name=os.fsdecode(name),
        node_type=_node_type(_numbered(raw["node_type"])),
        node_guid=parse_guid(raw["node_guid"]),
        parent=_string(raw["parent"]),
        ports=tuple(_port_status(ibdev_path, n)
                    for n in numbered_entries(ibdev_path + b"/ports")),
        raw=RawText(raw),
    )


def _device_attributes(ibdev_path: bytes, name: bytes) -> DeviceAttributes:
    status = device_status(ibdev_path)
    raw: dict[str, Optional[str]] = {}
    for attr in ("node_type", "node_guid", "sys_image_guid", "fw_ver", "hw_rev", "hca_type",
                 "board_id", "node_desc", "parent"):
        raw[attr] = (status.raw[attr] if attr in status.raw
                     else read_text(ibdev_path + b"/" + attr.encode()))
    hw = re.fullmatch(_BARE_HEX, raw["hw_rev"] or "")
    return DeviceAttributes(
        name=os.fsdecode(name),
        node_type=status.node_type,
        node_guid=status.node_guid,
        sys_image_guid=parse_guid(raw["sys_image_guid"]),
        fw_ver=_string(raw["fw_ver"]),
        hw_rev=int(hw.group(1), 16) if hw else None,
        hca_type=_string(raw["hca_type"]),
        board_id=_string(raw["board_id"]),
        node_desc=_string(raw["node_desc"]),
        parent=status.parent,
        ports=tuple(_port(ibdev_path, p) for p in status.ports),
        raw=RawText(raw),
    )

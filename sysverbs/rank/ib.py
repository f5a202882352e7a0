"""NCCL's IB transport: the device table ``ncclIbInitDevices`` builds from a host's
ports (:func:`select_ib`), the ports of this host or of a sysfs tree
(:func:`host_ports`), and both with NCCL's config files (:func:`predict_ib`)."""

from __future__ import annotations

import os
import re

from ..engine.api import environ_arg, items_arg
from ..ground.errors import WrongTypeError
from ..ground.records import FrozenRecord, RecordTuple, init
from .conf import nccl_environment
from .ctext import load_param
from .hca import parse_hca
from .versions import (
    V_LINE_2048,
    V_MERGE_RETRY,
    V_MERGED_IN_INIT,
    V_NO_DEVICE_USING,
    V_PCI_ORDER,
    V_PLANE_TEXT,
    V_RO,
    V_STRTOK_PARSER,
    Version,
    max_ib_devs,
    parse_version,
)

# no typing or dataclasses at run time (rank/environment.py says why)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Optional

    from typing_extensions import Unpack

    from ..engine.api import ListOptions
    from .gid import GidTable
    from .versions import VersionArg

__all__ = [
    "PLANE_MAX_INDEX",
    "IbPort",
    "IbDevice",
    "IbSelection",
    "select_ib",
    "host_ports",
    "predict_ib",
    "no_device_list_note",
]

#: ``NCCL_IB_PLANE_MAX_INDEX`` (src/transport/net_ib/init.cc, v2.30.7-1 line 95).
PLANE_MAX_INDEX = 14


class IbPort(RecordTuple, tuple[str, int, bool, "Optional[str]", str, int, bool, str,
                                 "Optional[GidTable]"]):
    """One port of a device as NCCL's ``ncclIbInitDevices`` sees it.

    ``link_layer`` is sysfs' text (``InfiniBand``, ``Ethernet``...), ``full_pci_path``
    the ``realpath`` of ``<sysfs>/class/infiniband/<dev>/device`` ("" when it has
    none), ``opens`` whether ``ibv_open_device`` succeeds, ``gids`` the GID table of
    an ACTIVE Ethernet port when it was read (``host_ports(gid_tables=True)``: the
    linter then judges the GID NCCL would use, :func:`sysverbs.rank.gid.gid_verdict`).
    """

    __slots__ = ()
    _fields = ("device", "port", "active", "link_layer", "full_pci_path", "sys_image_guid",
               "opens", "state", "gids")

    def __new__(cls, device: str, port: int, active: bool, link_layer: Optional[str],
                full_pci_path: str, sys_image_guid: int = 0, opens: bool = True,
                state: str = "", gids: Optional[GidTable] = None) -> IbPort:
        return tuple.__new__(cls, (device, port, active, link_layer, full_pci_path,
                                   sys_image_guid, opens, state, gids))

    @property
    def device(self) -> str:
        return self[0]

    @property
    def port(self) -> int:
        return self[1]

    @property
    def active(self) -> bool:
        return self[2]

    @property
    def link_layer(self) -> Optional[str]:
        return self[3]

    @property
    def full_pci_path(self) -> str:
        return self[4]

    @property
    def sys_image_guid(self) -> int:
        return self[5]

    @property
    def opens(self) -> bool:
        return self[6]

    @property
    def state(self) -> str:
        return self[7]

    @property
    def gids(self) -> Optional[GidTable]:
        return self[8]


class IbDevice(RecordTuple, tuple[int, str, int, str, str, int, int]):
    """One entry of NCCL's device table: ``[index]device:port[:rail[:plane]]/link``."""

    __slots__ = ()
    _fields = ("slot", "device", "port", "link", "pci_path", "rail", "plane")

    def __new__(cls, slot: int, device: str, port: int, link: str, pci_path: str,
                rail: int = -1, plane: int = -1) -> IbDevice:
        return tuple.__new__(cls, (slot, device, port, link, pci_path, rail, plane))

    @property
    def slot(self) -> int:
        return self[0]

    @property
    def device(self) -> str:
        return self[1]

    @property
    def port(self) -> int:
        return self[2]

    @property
    def link(self) -> str:
        """``"IB"`` or ``"RoCE"`` (NCCL_IB_LLSTR)."""
        return self[3]

    @property
    def pci_path(self) -> str:
        return self[4]

    @property
    def rail(self) -> int:
        return self[5]

    @property
    def plane(self) -> int:
        return self[6]

    def label(self) -> str:
        """``[0]mlx5_0:1/IB`` as ``ncclIbInitDevices`` prints it."""
        text = f"[{self.slot}]{self.device}:{self.port}"
        if self.rail != -1:
            text += f":{self.rail}"
        elif self.plane != -1:
            text += ":"
        if self.plane != -1:
            text += f":{self.plane}"
        return f"{text}/{self.link}"


class IbSelection(FrozenRecord):
    """The IB transport's device table: ``devices`` in NCCL's order (the indexes it
    prints), ``merged`` the virtual devices of merged multi-port NICs (lists of
    indexes into ``devices``), ``notes`` what NCCL would warn about."""

    __slots__ = _fields = ("devices", "merged", "version", "disabled", "notes",
                           "incompatible", "unread", "overflow", "failure")
    devices: tuple[IbDevice, ...]
    merged: tuple[tuple[int, ...], ...]
    version: Version
    disabled: bool
    notes: tuple[str, ...]
    #: Merges of ports of different link layers NCCL attempts (indexes into ``devices``).
    incompatible: tuple[tuple[int, int], ...]
    #: The devices NCCL does not read because its table is full (``MAX_IB_DEVS``), and
    #: whether the last one read overflows the table (its ports go past the end).
    unread: tuple[str, ...]
    overflow: bool
    #: The warning with which ``ncclIbInitDevices`` fails after building the table (a
    #: plane ID NCCL cannot use, since 2.30.7): the IB transport then does not start and
    #: NCCL falls back to its next network, sockets.  "" when it does not fail.
    failure: str

    def __init__(self, devices: tuple[IbDevice, ...], merged: tuple[tuple[int, ...], ...],
                 version: Version, disabled: bool = False, notes: tuple[str, ...] = (),
                 incompatible: tuple[tuple[int, int], ...] = (), unread: tuple[str, ...] = (),
                 overflow: bool = False, failure: str = "") -> None:
        init(self, devices, merged, version, disabled, notes, incompatible, unread, overflow,
             failure)

    def using_line(self, oob: Optional[str] = None, relaxed_ordering: bool = True) -> str:
        """NCCL's ``NET/IB : Using ...`` INFO line (``ncclIbInitDevices``,
        src/transport/net_ib/init.cc; ``ncclIbInit`` in src/transport/net_ib.cc before
        2.29), without the ``host:pid:tid [cudaDev] NCCL INFO`` prefix.

        ``oob`` is the socket interface and address (``eth0:10.0.0.1<0>``, from
        NCCL_SOCKET_IFNAME, see :func:`socket_interface`); unknown, it is shown as
        ``?``.  ``[RO]`` appears when relaxed ordering is usable: libibverbs has
        ``ibv_reg_mr_iova2`` (rdma-core 22 and later) and NCCL_IB_PCI_RELAXED_ORDERING
        is 1 or 2 (default 2).  Before 2.24 nothing is printed when no device is found;
        later NCCL prints ``NET/IB : No device found.`` and then this line.
        """
        if self.disabled:
            return ""
        parts = []
        merged_era = V_MERGED_IN_INIT[0] <= self.version < V_MERGED_IN_INIT[1]
        if merged_era:
            for vi, group in enumerate(self.merged):
                if len(group) > 1:
                    inner = ", ".join(
                        f"[{d}] {self.devices[d].device}:{self.devices[d].port}/"
                        f"{self.devices[d].link}" for d in group)
                    parts.append(f" [{vi}]={{{inner}}}")
                else:
                    d = self.devices[group[0]]
                    parts.append(f" [{d.slot}]{d.device}:{d.port}/{d.link}")
        else:
            parts = [" " + d.label() for d in self.devices]
        line = "".join(parts)
        # snprintf(line + strlen(line), size - strlen(line), ...) into char line[1024]
        # (2048 since 2.20; before 2.24 the size passed is one less)
        room = 1023 if self.version < V_LINE_2048 else 2047
        if self.version < V_MERGED_IN_INIT[1]:
            room -= 1
        line = line.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "surrogateescape")
        if self.version < V_RO:
            return f"NET/IB : Using{line} ; OOB {oob or '?'}"
        ro = "[RO]" if relaxed_ordering else ""
        return f"NET/IB : Using{line} {ro}; OOB {oob or '?'}"

    def lines(self, oob: Optional[str] = None, relaxed_ordering: bool = True) -> list[str]:
        """The lines NCCL prints: ``No device found.`` (then, since 2.24, the Using
        line), or the Using line."""
        if self.disabled:
            return ["(NCCL_IB_DISABLE is set: NCCL does not start its IB transport, which "
                    "prints nothing)"]
        if self.failure:  # before the Using line; then ncclNetPluginInit's INFO line
            return [self.failure, "Failed to initialize NET plugin IB"]
        if not self.devices:
            out = ["NET/IB : No device found."]
            if self.version >= V_NO_DEVICE_USING:
                out.append(self.using_line(oob, relaxed_ordering))
            return out
        return [self.using_line(oob, relaxed_ordering)]

    def virtual_names(self) -> list[str]:
        """The merged devices' names (``mlx5_0+mlx5_1``), as ``Made virtual device``."""
        return ["+".join(self.devices[d].device for d in g) for g in self.merged]


def _pci_key(path: str) -> int:
    """``pciPathToInt64`` + ``busIdToInt64`` (src/misc/utils.cc): the hex digits of the
    last path component (``.`` and ``:`` skipped, at most 16), as a number."""
    comp = path.rstrip("/").rsplit("/", 1)[-1] if path else ""
    hexs: list[str] = []
    for c in comp:
        if len(hexs) >= 16:
            break
        if c in ".:":
            continue
        if c in "0123456789abcdefABCDEF":
            hexs.append(c)
        else:
            break
    if not hexs:
        return 0
    value = int("".join(hexs), 16)
    return min(value, (1 << 63) - 1)  # strtol clamps at LONG_MAX


def _merge_path(path: str, merge_vfs: bool) -> str:
    """``ncclIbGetPciPath``: the PCI path with the function digit (and with
    NCCL_IB_MERGE_VFS, the two device digits) set to 0, so that the ports and VFs of
    one NIC compare equal."""
    if not path:
        return ""
    p = list(path)
    p[-1] = "0"
    if merge_vfs and len(p) >= 4:
        p[-3] = p[-4] = "0"
    return "".join(p)


def select_ib(ports: Sequence[IbPort], env: Optional[Mapping[str, str]] = None, *,
              nccl_version: VersionArg = None) -> IbSelection:
    """NCCL's IB device table from the host's ports, in libibverbs' device order
    (``ncclIbInitDevices``, src/transport/net_ib/init.cc; ``ncclIbInit`` in
    src/transport/net_ib.cc before 2.29).

    For each device that opens (``Unable to open device`` otherwise), each port
    1..phys_port_cnt that is ACTIVE with an InfiniBand or Ethernet link layer and that
    NCCL_IB_HCA selects, until MAX_IB_DEVS (:func:`max_ib_devs`) are kept.  Since
    2.29.7 the table is sorted by PCI path (NCCL_IB_DEVICE_PCI_ORDER, default 1;
    devices without one last; ports of a device keep their order, as glibc's merge
    sort does).
    ``merged`` groups the ports of one NIC (same PCI path up to the function digit,
    and VFs with NCCL_IB_MERGE_VFS=1; from 2.20 to 2.23 also the same
    ``sys_image_guid`` and link layer) unless NCCL_IB_MERGE_NICS=0: before 2.24
    ``ncclIbInit`` merged them and printed ``[0]={...}``; since 2.24 the topology
    merges them (NCCL_NET_MERGE_LEVEL=PORT, the default) into virtual devices after
    the Using line.

    >>> pci = "/sys/devices/pci0000:00/0000:00:01.0/"
    >>> ports = [IbPort("mlx5_1", 1, True, "Ethernet", pci + "0000:12:00.0"),
    ...          IbPort("mlx5_0", 1, True, "InfiniBand", pci + "0000:0c:00.0")]
    >>> select_ib(ports, {"NCCL_IB_HCA": "mlx5"}).using_line("eth0:10.0.0.1<0>")
    'NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>'
    """
    version = parse_version(nccl_version)
    env = environ_arg(env)
    ports = items_arg(ports, "ports")
    if not all(isinstance(p, IbPort) for p in ports):
        raise WrongTypeError("ports must be IbPort objects (see host_ports())")
    if load_param(env, "NCCL_IB_DISABLE", 0):
        return IbSelection((), (), version, disabled=True)
    filt = parse_hca(env.get("NCCL_IB_HCA"), nccl_version=version)
    notes: list[str] = []
    rows: list[tuple[IbPort, int]] = []
    seen_devices: list[str] = []
    by_device: dict[str, list[IbPort]] = {}
    for p in ports:
        if p.device not in by_device:
            seen_devices.append(p.device)
            by_device[p.device] = []
        by_device[p.device].append(p)
    cap = max_ib_devs(version)
    unread: list[str] = []
    for dev in seen_devices:
        dev_ports = sorted(by_device[dev], key=lambda q: q.port)
        usable = [q for q in dev_ports
                  if q.active and q.link_layer in ("InfiniBand", "Ethernet")
                  and filt.matches(q.device, q.port)]
        if len(rows) >= cap:
            notes.append(f"{dev}: not read, NCCL keeps at most {cap} device ports")
            if usable and all(q.opens for q in dev_ports):
                unread.append(dev)
            continue
        if not all(q.opens for q in dev_ports):
            notes.append(f"NET/IB : Unable to open device {dev}")
            continue
        for q in usable:
            rows.append((q, filt.match_index(q.device, q.port) if not filt.negate else -1))
    overflow = len(rows) > cap
    if overflow:
        notes.append(f"the last device's ports go past NCCL's {cap}-entry table "
                     "(ncclIbDevs overflows)")
        rows = rows[:cap]
    if version >= V_PCI_ORDER and load_param(env, "NCCL_IB_DEVICE_PCI_ORDER", 1):
        rows.sort(key=lambda r: (r[0].full_pci_path == "", _pci_key(r[0].full_pci_path)))
    new_fields = version >= V_STRTOK_PARSER
    devices = []
    for i, (q, ent) in enumerate(rows):
        rail = filt.entries[ent].rail if (ent >= 0 and new_fields) else -1
        plane = filt.entries[ent].plane if (ent >= 0 and new_fields) else -1
        devices.append(IbDevice(i, q.device, q.port,
                                "IB" if q.link_layer == "InfiniBand" else "RoCE",
                                q.full_pci_path, rail, plane))
    failure = _plane_failure(devices, version) if new_fields else ""
    merge_vfs = bool(load_param(env, "NCCL_IB_MERGE_VFS", 1))
    merge = bool(load_param(env, "NCCL_IB_MERGE_NICS", 1)) and version >= V_MERGED_IN_INIT[0]
    in_init = version < V_MERGED_IN_INIT[1]
    groups: list[list[int]] = []
    incompatible: list[tuple[int, int]] = []
    if in_init:
        # ncclIbFindMatchingDev: the first merged device with the same PCI path,
        # sys_image_guid and link layer, and room (NCCL_IB_MAX_DEVS_PER_NIC = 2)
        keys: list[tuple[str, int, str]] = []
        for i, (q, _ent) in enumerate(rows):
            key = (_merge_path(q.full_pci_path, merge_vfs), q.sys_image_guid, devices[i].link)
            found = next((g for g, k in enumerate(keys) if merge and key[0] and k == key
                          and len(groups[g]) < 2), -1)
            if found < 0:
                groups.append([i])
                keys.append(key)
            else:
                groups[found].append(i)
    else:
        # ncclTopoAutoMerge: the unplaced ports of one NIC (PATH_PORT) together, at most
        # 8; a merge of different link layers fails, and its first port stays alone
        nics: dict[str, list[int]] = {}
        for i, (q, _ent) in enumerate(rows):
            path = _merge_path(q.full_pci_path, merge_vfs)
            nics.setdefault(path if (merge and path) else f"\0{i}", []).append(i)
        for members in nics.values():
            rest = list(members)
            while rest:
                cand = rest[:8]
                if all(devices[j].link == devices[cand[0]].link for j in cand):
                    groups.append(cand)
                    rest = rest[len(cand):]
                    continue
                d0, d1 = devices[cand[0]], next(devices[j] for j in cand
                                                 if devices[j].link != devices[cand[0]].link)
                if version >= V_MERGE_RETRY:
                    notes.append(f"NET/IB : Attempted to merge incompatible devices: "
                                 f"[{d0.slot}]{d0.device}:{d0.port}/{d0.link} and "
                                 f"[{d1.slot}]{d1.device}:{d1.port}/{d1.link}. Try selecting "
                                 "NICs of only one link type using NCCL_IB_HCA")
                elif not incompatible:  # the first failure ends ncclTopoGetSystem
                    ll = {"IB": 1, "RoCE": 2}  # IBV_LINK_LAYER_INFINIBAND, _ETHERNET
                    notes.append(
                        "NET/IB : Trying to merge multiple devices together with different "
                        f"link_layer properties {d0.device} -> {ll[d0.link]}, {d1.device} -> "
                        f"{ll[d1.link]}. Try only selecting NICs with one type of link using "
                        "NCCL_IB_HCA")
                    notes.append("TOPO/NET : Tried merging multiple devices together and "
                                 "failed. Try setting NCCL_NET_MERGE_LEVEL=LOC")
                incompatible.append((d0.slot, d1.slot))
                groups.append([cand[0]])
                rest = rest[1:]
        groups.sort(key=lambda g: g[0])
    return IbSelection(tuple(devices), tuple(tuple(g) for g in groups), version,
                       notes=tuple(notes), incompatible=tuple(incompatible),
                       unread=tuple(unread), overflow=overflow, failure=failure)


def _plane_failure(devices: Sequence[IbDevice], version: Version) -> str:
    """``ncclIbGetPlaneIndex`` (src/transport/net_ib/init.cc, v2.30.7-1 lines 98-114),
    called for each device in table order: the warning with which it fails, or "".

    The distinct plane IDs start as ``{-1}`` (none given); a new one when there are
    already ``PLANE_MAX_INDEX - 1`` (13) fails, as does a new one other than -1 with
    bit 14 (``NCCL_IB_PLANE_VIRT_BIT``) set."""
    planes = [-1]
    for d in devices:
        if d.plane in planes:
            continue
        if len(planes) == PLANE_MAX_INDEX - 1:
            if version >= V_PLANE_TEXT:
                return (f"NCCL cannot use more than {PLANE_MAX_INDEX - 2} user-defined "
                        "plane IDs.")
            return f"NCCL cannot use more than {PLANE_MAX_INDEX} plane IDs."
        if d.plane & (1 << PLANE_MAX_INDEX):  # (-1 is in planes from the start)
            return f"NCCL cannot use a plane ID that is {d.plane}."
        planes.append(d.plane)
    return ""


def _state_number(text: str) -> Optional[int]:
    """``"4: ACTIVE"`` -> 4 (the kernel's ``%d: %s`` format of a port's ``state``)."""
    m = re.fullmatch(r"(\d{1,10}): (\S.*)", text)
    return int(m.group(1)) if m else None


def _realpath(path: str) -> str:
    """``realpath(3)``, "" when the path does not resolve: :func:`sysverbs.ground.inputs.realpath`
    (the kernel's name of an ``O_PATH`` descriptor; inside a read-once scope, the
    scope's input)."""
    from ..ground import inputs

    # (exists() is False for a path with a NUL byte)
    return os.fsdecode(inputs.realpath(path)) if inputs.exists(path) else ""


def host_ports(*, open_devices: Optional[bool] = None, gid_tables: bool = False,
               **options: Unpack[ListOptions]) -> list[IbPort]:
    """The ports of this host's RDMA devices (or a sysfs tree's), in libibverbs'
    device order, with what :func:`select_ib` needs.

    ``options`` are those of :func:`sysverbs.get_device_list`.  ``open_devices``:
    whether to try ``ibv_open_device`` on each device (NCCL skips those that fail);
    default: only on this host (``sysfs_path`` None), since the nodes of a recorded
    tree are not the devices NCCL would open.  ``gid_tables``: also read the GID table
    of each ACTIVE Ethernet port (``IbPort.gids``), for the linter's GID verdict."""
    if open_devices is None:
        open_devices = options.get("sysfs_path") is None
    from ..devices.attributes import numbered_entries, parse_guid, read_text
    from ..engine import api
    from ..engine.api import resolve
    from ..engine.device import open_device

    sysfs = resolve(**options).sysfs_path
    devices = api.get_device_list(**options)
    out: list[IbPort] = []
    try:
        for dev in devices:
            # only what ncclIbInitDevices reads: not the GID tables (attributes does)
            ibdev = os.fsencode(os.path.join(sysfs, "class", "infiniband", dev.name))
            full = _realpath(os.path.join(sysfs, "class", "infiniband", dev.name, "device"))
            guid = parse_guid(read_text(ibdev + b"/sys_image_guid")) or 0
            opens = True
            if open_devices:
                try:
                    open_device(dev).close()
                except OSError:
                    opens = False
            for num in numbered_entries(ibdev + b"/ports"):
                base = ibdev + b"/ports/%d/" % num
                state = read_text(base + b"state") or ""
                link = read_text(base + b"link_layer")
                gids = None
                if gid_tables and link == "Ethernet" and _state_number(state) == 4:
                    from .gid import read_gid_table

                    gids = read_gid_table(dev.name, num, sysfs_path=sysfs, link_layer=link)
                out.append(IbPort(dev.name, num, _state_number(state) == 4, link, full,
                                  guid, opens, state.strip(), gids))
    finally:
        api.free_device_list(devices)
    return out


def predict_ib(env: Optional[Mapping[str, str]] = None, *, conf_root: Optional[str] = None,
               nccl_version: VersionArg = None,
               **options: Unpack[ListOptions]) -> IbSelection:
    """:func:`select_ib` on this host (or a sysfs tree: ``options`` are those of
    :func:`sysverbs.get_device_list`), with the environment NCCL would see after
    reading its config files (:func:`nccl_environment`)."""
    full_env, _ = nccl_environment(env, root=conf_root, nccl_version=nccl_version)
    try:
        ports = host_ports(open_devices=options.get("sysfs_path") is None, **options)
    except OSError as e:
        sel = select_ib([], full_env, nccl_version=nccl_version)
        return sel._replace(notes=(*sel.notes, no_device_list_note(e)))
    return select_ib(ports, full_env, nccl_version=nccl_version)


def no_device_list_note(err: OSError) -> str:
    """What NCCL does when ``ibv_get_device_list`` returns NULL (``wrap_ibv_get_device_list``,
    src/misc/ibvwrap.cc): it counts no device, prints ``No device found.`` and falls
    back to sockets."""
    return (f"ibv_get_device_list fails here ({os.strerror(err.errno or 0)}): NCCL counts "
            "no IB device")

"""The PCI tree from sysfs: one PCI function (:class:`PciDevice`, bridges included) and
the bus walk that finds them all (:class:`PciReader`).

Every value is read with :func:`sysverbs.sysfs_read.read_sysfs_file`; links are read
with ``readlink`` and resolved by hand inside the given root, so that nothing outside
``sysfs_path`` (and ``proc_path``) is ever read: a link that leaves the root counts as
dangling.  Whatever cannot be decided is left ``None`` and said in ``Topology.problems``.
"""

from __future__ import annotations

import os
import re
import sys
from stat import S_IFDIR, S_IFLNK, S_IFMT

from ..ground import inputs
from ..ground.sysfs_read import current, listdir, read_sysfs_file
from ..ground.text import parse_cpulist
from ._names import is_bdf, name_kind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Container
    from typing import Optional, Union

    #: Where a PCI function sits: its ancestors (from the top), its bridges (nearest
    #: first), its host bridge, the VMD endpoint above that, the outermost host bridge.
    _Place = tuple[tuple[str, ...], tuple[str, ...], Optional[str], Optional[str],
                   Optional[str]]

__all__ = ["BRIDGE_CLASS", "LINK_FILES", "PciDevice", "PciReader", "is_dir", "read_text",
           "resolve_link", "to_int"]

_HEX = re.compile(r"0x[0-9a-fA-F]{1,8}")
_INT = re.compile(r"-?[0-9]{1,10}")
_ATTR = 4096
_MAX_DEPTH = 64  # path components below devices/: deeper is a broken tree
_MAX_LINK_HOPS = 8
#: os.fsdecode's codec, called directly (hundreds of names per host).
_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()

BRIDGE_CLASS = 0x0604
#: The link files of :attr:`PciDevice.link`, in its order.
LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
_LINK_FILES = tuple(os.fsencode(n) for n in LINK_FILES)
_TOP: _Place = ((), (), None, None, None)  # devices/ itself


def read_text(path: bytes, size: int = _ATTR) -> Optional[str]:
    value = read_sysfs_file(path, size)
    return None if value is None else value.decode("utf-8", "replace")


#: readlinkat and fstatat: the bus walk looks names up from open directories (a
#: shorter walk for the kernel than from the root, twice per PCI function).
_AT = os.readlink in os.supports_dir_fd and os.stat in os.supports_dir_fd
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


def _open_dir(path: bytes) -> Optional[int]:
    """A descriptor of the directory ``path`` (None: not a directory, no ``*at``
    calls on this platform, or a read-once scope, whose inputs are asked by path)."""
    if not _AT or current() is not None:
        return None
    try:
        return os.open(path, _DIR_FLAGS)
    except (OSError, ValueError):
        return None


def is_dir(path: bytes) -> bool:
    """A directory, not a link to one (a link could lead out of the root)."""
    try:
        return inputs.ltype(path) == S_IFDIR
    except (OSError, ValueError):
        return False


def _hexnum(text: Optional[str]) -> Optional[int]:
    m = _HEX.fullmatch(text.strip()) if text is not None else None
    return int(m.group(), 16) if m else None  # (int() takes the 0x)


def to_int(text: Optional[str]) -> Optional[int]:
    return int(text) if text is not None and _INT.fullmatch(text.strip()) else None


def resolve_link(root: bytes, link: bytes) -> Optional[bytes]:
    """The directory the symlink ``link`` (below ``root``) points to, resolved as the
    PCI walk resolves links: lexically, never leaving ``root``; None when it does not
    resolve there."""
    return _Root(root).resolve(link)


class _Root:
    """A sysfs-like root: readlink and lexical resolution that never leave it."""

    def __init__(self, root: bytes) -> None:
        self.root = root.rstrip(b"/") or b"/"
        self._prefix = self.root.rstrip(b"/") + b"/"

    def inside(self, path: bytes) -> bool:
        return path == self.root or path.startswith(self._prefix)

    def readlink(self, path: bytes) -> Optional[bytes]:
        try:
            return inputs.readlink(path)
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
                target = inputs.readlink(path)
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
                # (an absolute path: going above "/" leaves b"")
                path = path.rsplit(b"/", ups)[0] + b"/" + rest
                if b"/." in path or b"//" in path:  # (rest starting with "." too)
                    path = os.path.normpath(path)
            if not self.inside(path):
                return None
            if path in known:
                return path
            try:
                mode = inputs.ltype(path)
            except (OSError, ValueError):
                return None  # dangling
            if mode != S_IFLNK:
                return path if mode == S_IFDIR else None
        return None

    def listdir(self, path: bytes) -> list[bytes]:
        try:
            return sorted(n for n in listdir(path) if not n.startswith(b"."))
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
                more[key] = parse_cpulist(read_text(path + b"/local_cpulist"))
            elif key == "physfn":
                physfn = self._fs.readlink(path + b"/physfn")
                more[key] = os.fsdecode(os.path.basename(physfn)) if physfn else None
            elif key == "link":
                more[key] = tuple(read_text(path + b"/" + name, 64) for name in _LINK_FILES)
            else:
                raw = read_text(path + b"/numa_node")
                numa = to_int(raw)
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
    def link(self) -> tuple[Optional[str], ...]:
        """The texts of ``current_link_speed``, ``current_link_width``,
        ``max_link_speed``, ``max_link_width`` (None: absent or unreadable)."""
        return self._extra("link")  # type: ignore[return-value]

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
        ids[key] = _hexnum(read_text(path + b"/" + attr))
    driver = fs.readlink(path + b"/driver")
    ids["driver"] = os.fsdecode(os.path.basename(driver)) if driver else None
    return ids


class PciReader:
    """The PCI functions below a sysfs root's ``devices/`` (``pci``: BDF -> device), the
    host bridges above them, and what could not be decided (``problems``): the bus walk
    of :func:`~sysverbs.placement.read_host`."""

    def __init__(self, sysfs: bytes) -> None:
        self.fs = _Root(sysfs)
        self.sys = self.fs.root
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
        try:  # (no NUL byte: the names are a listing's, the root listed)
            target = (inputs.readlink(bus + entry) if bus_fd is None
                      else os.readlink(entry, dir_fd=bus_fd))
        except OSError:
            return None
        rest = target[16:]  # "/" and what follows devices
        if target.startswith(b"../../../devices/") and b"/." not in rest and (
                b"//" not in rest):
            path = self.devices + rest
            try:
                kind = (inputs.ltype(path) if devices_fd is None
                        else S_IFMT(os.lstat(rest[1:], dir_fd=devices_fd).st_mode))
            except OSError:
                return None  # dangling
            if kind == S_IFDIR:
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
            if not is_dir(child):
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

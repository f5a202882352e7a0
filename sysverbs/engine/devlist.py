"""The process-wide device list: ``init.c: ibverbs_get_device_list``
(docs/behaviour.md: The device list across calls).

One :class:`Library` object plays the part of one loaded libibverbs: it keeps
the global ABI value, whether providers were loaded, the driver list and the
persistent, ordered list of matched devices across calls.  Each distinct set of
options (sysfs root, /dev directory, config directory, provider mode, release)
gets its own ``Library``, created on first use and kept for the process.

Which source a call reads is chosen here too: the registry of sources (sysfs, netlink,
udev) and libibverbs' order of trying them (``source="auto"``: each source in
:data:`AUTO_ORDER` is tried and the first that does not raise
:class:`~sysverbs.ground.errors.SourceUnavailable` is used).
"""

from __future__ import annotations

import errno
import os
from _thread import RLock, allocate_lock

from ..ground.errors import KernelAbiFatal, NoDriverWarning, ScanError, SourceUnavailable
from ..ground.messages import emit
from ..ground.records import transport_number
from ..providers.matching import Matcher
from ..sources.base import Scan
from ..sources.sysfs import read_class_abi, scan_sysfs
from .device import Device

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Callable

    from ..ground.records import DeviceRecord
    from ..providers.table import Provider
    from ..sources.base import LibraryKey

    SourceFunc = Callable[[LibraryKey], Scan]

__all__ = ["Library", "library_for", "MIN_ABI", "MAX_ABI", "register_source", "source_names",
           "scan_source", "AUTO_ORDER"]

#: IB_USER_VERBS_MIN_ABI_VERSION / IB_USER_VERBS_MAX_ABI_VERSION.
MIN_ABI = 3
MAX_ABI = 6

_SOURCES: dict[str, SourceFunc] = {}
#: Sources tried in turn by ``source="auto"`` (netlink goes first once registered).
AUTO_ORDER: list[str] = []


def register_source(name: str, func: SourceFunc, *, auto_position: int | None = None) -> None:
    """Register a source; ``auto_position`` inserts it into :data:`AUTO_ORDER`."""
    _SOURCES[name] = func
    if auto_position is not None and name not in AUTO_ORDER:
        AUTO_ORDER.insert(auto_position, name)


def source_names() -> tuple[str, ...]:
    """Every accepted ``source=`` value."""
    return ("auto", *_SOURCES)


def scan_source(key: LibraryKey) -> Scan:
    """Run the source the key names (``auto``: the first available in AUTO_ORDER)."""
    if key.source != "auto":
        return _SOURCES[key.source](key)
    last: SourceUnavailable | None = None
    for name in AUTO_ORDER:
        try:
            return _SOURCES[name](key)
        except SourceUnavailable as e:
            last = e
    raise last or SourceUnavailable("no source available")


def _sysfs(key: LibraryKey) -> Scan:
    # abi_version and node_type are read later, only for records that are matched
    # (not for devices that survive from an earlier call).
    return Scan(scan_sysfs(key.sysfs_root, key.dev_dir, lazy=True))


def _netlink(key: LibraryKey) -> Scan:
    from ..sources.netlink import scan_netlink

    return scan_netlink(key)


def _udev(key: LibraryKey) -> Scan:
    from ..sources.udev import scan_udev

    return scan_udev(key)


register_source("sysfs", _sysfs, auto_position=0)
register_source("netlink", _netlink, auto_position=0)  # libibverbs asks netlink first
register_source("udev", _udev)


class Library:
    """One emulated libibverbs: its process-wide state and enumeration."""

    def __init__(self, key: LibraryKey) -> None:
        self.key = key
        self.lock = RLock()
        self.abi_ver = 0
        self.drivers_loaded = False
        self.driver_list: tuple[Provider, ...] = ()
        self.matcher = Matcher(self.driver_list)
        self.devices: list[Device] = []
        if key.providers == "static":
            # A static libibverbs: the linked providers registered themselves from
            # constructors at program start.  Its load_drivers() does nothing, but the
            # first call that leaves a device unclaimed still tries them all again
            # (and repeats their ABI warnings), as enumerate() does.
            self._load_drivers({})

    # -- provider loading ----------------------------------------------------------
    def _load_drivers(self, env: Mapping[str, str]) -> None:
        from ..providers.drivers import load_for_mode

        key = self.key
        load = load_for_mode(key.providers, key.release, key.config_dir, env, key.static)
        for body, category in load.messages:
            emit(body, category)
        known = list(self.driver_list)
        for prov in load.providers:
            if prov not in known:
                known.append(prov)
        self.driver_list = tuple(known)
        self.matcher = Matcher(self.driver_list)

    # -- matching -------------------------------------------------------------------
    def _try_all(self, records: list[DeviceRecord]) -> None:
        """One matching pass: each match is prepended to the persistent list."""
        remaining = []
        matched = []
        match = self.matcher.match
        for rec in records:
            prov = match(rec)
            if prov is None:
                remaining.append(rec)
                continue
            node_type = rec.node_type
            matched.append(
                Device(
                    name=rec.ibdev_name,
                    dev_name=rec.dev_name,
                    dev_path=rec.dev_path,
                    ibdev_path=rec.ibdev_path,
                    node_type=node_type,
                    transport_type=transport_number(node_type),
                    provider=prov.name,
                    abi_ver=rec.abi_ver,
                    cdev=rec.cdev,
                    index=rec.ibdev_idx,
                    guid=rec.node_guid,
                    dev_dir=self.key.dev_dir,
                    time_created_ns=rec.time_created_ns,
                ),
            )
        # Prepending one by one (as libibverbs' list_add does) is quadratic in Python.
        matched.reverse()
        self.devices[:0] = matched
        records[:] = remaining

    def _check_abi(self) -> None:
        if self.abi_ver:
            return
        root = self.key.sysfs_root
        path = root + b"/class/infiniband_verbs/abi_version"
        abi = read_class_abi(root)
        if abi is None:
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), os.fsdecode(path))
        self.abi_ver = abi
        if abi < MIN_ABI or abi > MAX_ABI:
            emit(
                b"Fatal: kernel ABI version %d doesn't match library version %d.\n"
                % (abi, MAX_ABI),
                KernelAbiFatal,
            )
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), os.fsdecode(path))

    def enumerate(self, env: Mapping[str, str]) -> list[Device]:
        """``ibverbs_get_device_list``: update the persistent list and return it."""
        try:
            found = scan_source(self.key)
        except ScanError as e:
            raise OSError(e.errno, os.strerror(e.errno), os.fsdecode(e.path)) from None
        except SourceUnavailable as e:  # a source asked for by name
            why = f"source {self.key.source!r} unavailable: {e}"
            if isinstance(e, OSError):  # UdevUnavailable: the same exception everywhere
                raise type(e)(why, e.errno) from None
            raise OSError(e.errno, why) from None
        records = found.records
        if found.netlink:
            self.abi_ver = MAX_ABI  # netlink mode forces the global ABI (``ibdev_nl.c``)
        if records:
            self._check_abi()
        # For each listed device (in list order) the first record that is the same
        # device survives it; the others are new.  same_sysfs_dev: the uverbs name and
        # the kernel index, plus the mtime of ibdev_path when there is no index.  Keyed,
        # not nested loops, so a repeated call stays linear in the number of devices.
        first: dict[tuple[bytes, int, int], int] = {}
        more: dict[tuple[bytes, int, int], list[int]] = {}  # same key again (rare)
        for i, rec in enumerate(records):
            index = rec.ibdev_idx
            key = (rec.dev_name, index, rec.time_created_ns if index == -1 else 0)
            if key in first:
                more.setdefault(key, []).append(i)
            else:
                first[key] = i
        taken: list[int] = []
        survivors: list[Device] = []
        for dev in self.devices:
            key = dev.identity
            i = first.pop(key, -1)
            if i < 0:
                continue
            rest = more.get(key)
            if rest:
                first[key] = rest.pop(0)
            taken.append(i)
            survivors.append(dev)
        self.devices = survivors
        if len(taken) == len(records):
            records = []
        elif taken:
            gone = set(taken)
            records = [rec for i, rec in enumerate(records) if i not in gone]
        self._try_all(records)
        if records and not self.drivers_loaded:
            self._load_drivers(env)
            self.drivers_loaded = True
            self._try_all(records)
        if "IBV_SHOW_WARNINGS" in env:
            for rec in records:
                emit(
                    b"Warning: no userspace device-specific driver found for %s\n" % rec.ibdev_name,
                    NoDriverWarning,
                )
        return list(self.devices)



_libraries: dict[LibraryKey, Library] = {}
_libraries_lock = allocate_lock()


def library_for(key: LibraryKey) -> Library:
    """The process-wide ``Library`` for these options."""
    with _libraries_lock:
        lib = _libraries.get(key)
        if lib is None:
            lib = _libraries[key] = Library(key)
        return lib

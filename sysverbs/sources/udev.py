"""The udev source (``source="udev"``) and sysverbs' one typed boundary around pyudev.

**The source.**  udev tells *which* uverbs devices exist; everything else is
libibverbs' algorithm, run by the very code of the sysfs source.  libibverbs'
order is the ``readdir`` order of ``<S>/class/infiniband_verbs`` and udev's
enumeration order differs (libudev sorts), so :func:`scan_udev` runs
:func:`sysverbs.sources.sysfs.scan_sysfs` (same order, same skip rules, every value
read by :func:`sysverbs.ground.sysfs_read.read_sysfs_file`) and keeps the entries whose
resolved directory udev enumerated in the ``infiniband_verbs`` subsystem.  On a
kernel-made ``/sys`` both sets are the same, so the list equals the sysfs
source's, field for field; an entry udev does not know (no ``uevent`` file, which
only a hand-made tree can have) is left out.

udev describes the live ``/sys`` only (libudev has no other root; under
``umockdev-run`` that ``/sys`` is the testbed's), so a call whose ``sysfs_path``
is not udev's sysfs root is refused with ``EINVAL`` rather than mixing two hosts.

**The boundary.**  pyudev has no type annotations and needs libudev (``libudev1``)
at run time.  Every use of pyudev in sysverbs goes through the functions below,
which import it lazily (``import sysverbs`` never imports pyudev), turn its
objects into typed snapshots (:class:`UdevDevice`) and turn "no pyudev" and
"no libudev" into :class:`UdevUnavailable`, whose text says why and what to
install.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from ..ground.errors import UdevUnavailable
from .base import Scan
from .sysfs import scan_sysfs

if TYPE_CHECKING:
    from .base import LibraryKey

__all__ = [
    "UdevUnavailable",
    "UdevDevice",
    "UdevMonitor",
    "scan_udev",
    "unavailable_reason",
    "sys_root",
    "list_devices",
    "device_at",
    "ancestors",
    "hwdb_lookup",
    "open_monitor",
    "udevd_running",
    "in_umockdev",
]


_EMPTY: Mapping[str, str] = MappingProxyType({})


class UdevDevice(NamedTuple):
    """A typed snapshot of one ``pyudev.Device`` (or of one monitor event)."""

    sys_path: str  # /sys/devices/.../infiniband_verbs/uverbs0
    sys_name: str  # uverbs0
    subsystem: Optional[str]
    devpath: str  # DEVPATH, the sys_path without the sysfs root
    properties: Mapping[str, str] = _EMPTY
    action: Optional[str] = None  # only for monitor events
    seqnum: int = 0  # only for monitor events (0 otherwise)


# ------------------------------------------------------------------- loading pyudev

_lock = threading.Lock()
_state: dict[str, Any] = {}


def _load() -> tuple[ModuleType, Any]:
    """(pyudev, a shared pyudev.Context); raises UdevUnavailable, remembering why."""
    from ..ground.inputs import opaque

    opaque("udev's answers")  # libudev reads past the read-once scope: not recorded
    with _lock:
        if "error" in _state:
            raise UdevUnavailable(_state["error"])
        if "context" in _state:
            return _state["module"], _state["context"]
        try:
            import pyudev  # type: ignore[import-untyped]
        except ImportError as e:
            _state["error"] = (
                f"pyudev is not installed ({e}); install it with 'pip install pyudev' "
                "(the sysfs source does not need it)"
            )
            raise UdevUnavailable(_state["error"]) from None
        try:
            context = pyudev.Context()
        except ImportError as e:  # pyudev raises ImportError when libudev is missing
            _state["error"] = (
                f"libudev cannot be loaded ({e}); install libudev1 (Debian/Ubuntu) or "
                "systemd-libs (Fedora) (the sysfs source does not need it)"
            )
            raise UdevUnavailable(_state["error"]) from None
        except OSError as e:
            _state["error"] = f"libudev failed to start: {e}"
            raise UdevUnavailable(_state["error"]) from None
        _state["module"], _state["context"] = pyudev, context
        return pyudev, context


def _reset() -> None:
    """Forget the loaded pyudev (tests use it to simulate a missing libudev)."""
    with _lock:
        _state.clear()


def unavailable_reason() -> Optional[str]:
    """Why udev features cannot be used in this process (None when they can)."""
    try:
        _load()
    except UdevUnavailable as e:
        return str(e)
    return None


def sys_root() -> str:
    """The sysfs root libudev reads (``/sys``)."""
    _, ctx = _load()
    return str(ctx.sys_path)


def udevd_running() -> bool:
    """Whether a udev daemon runs here (its control socket exists)."""
    return os.path.exists("/run/udev/control")


def in_umockdev() -> bool:
    """Whether this process runs under umockdev's preload (``umockdev-run`` or
    ``umockdev-wrapper``), which fakes udevd's event messages."""
    return "umockdev-preload" in os.environ.get("LD_PRELOAD", "")


# ----------------------------------------------------------------------- snapshots


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return os.fsdecode(value)
    return str(value)


def _snapshot(dev: Any, *, event: bool = False) -> UdevDevice:
    props: dict[str, str] = {}
    raw = dev.properties
    for key in raw:
        props[_text(key)] = _text(raw[key])
    subsystem = dev.subsystem
    return UdevDevice(
        sys_path=_text(dev.sys_path),
        sys_name=_text(dev.sys_name),
        subsystem=None if subsystem is None else _text(subsystem),
        devpath=_text(dev.device_path),
        properties=MappingProxyType(props),
        action=_text(dev.action) or None if event else None,
        seqnum=int(dev.sequence_number or 0) if event else 0,
    )


def list_devices(subsystem: str) -> list[UdevDevice]:
    """Every device udev enumerates in ``subsystem`` (libudev's order)."""
    _, ctx = _load()
    return [_snapshot(d) for d in ctx.list_devices(subsystem=subsystem)]


def device_at(sys_path: str) -> Optional[UdevDevice]:
    """The device at ``sys_path`` (below :func:`sys_root`), or None if udev has none."""
    pyudev, ctx = _load()
    try:
        dev = pyudev.Devices.from_sys_path(ctx, sys_path)
    except (pyudev.DeviceNotFoundError, ValueError, OSError):
        return None
    return _snapshot(dev)


def ancestors(sys_path: str) -> list[UdevDevice]:
    """The parents udev knows of the device at ``sys_path``, nearest first."""
    pyudev, ctx = _load()
    try:
        dev = pyudev.Devices.from_sys_path(ctx, sys_path)
    except (pyudev.DeviceNotFoundError, ValueError, OSError):
        return []
    out: list[UdevDevice] = []
    parent = dev.parent
    while parent is not None and len(out) < 64:
        out.append(_snapshot(parent))
        parent = parent.parent
    return out


def hwdb_lookup(modalias: bytes) -> dict[str, str]:
    """udev's hardware database entries for ``modalias`` (``ID_VENDOR_FROM_DATABASE``,
    ``ID_MODEL_FROM_DATABASE``...); empty when there is no match or no ``hwdb.bin``."""
    if not modalias or b"\0" in modalias:
        return {}
    pyudev, ctx = _load()
    lib = ctx._libudev
    if not hasattr(lib, "udev_hwdb_new"):
        return {}
    hwdb = lib.udev_hwdb_new(ctx)
    if not hwdb:
        return {}
    try:
        entry = lib.udev_hwdb_get_properties_list_entry(hwdb, modalias, 0)
        from pyudev._util import udev_list_iterate  # type: ignore[import-untyped]

        return {_text(k): _text(v) for k, v in udev_list_iterate(lib, entry)}
    finally:
        lib.udev_hwdb_unref(hwdb)


class UdevMonitor:
    """A started libudev netlink monitor on some subsystems (typed wrapper)."""

    def __init__(self, monitor: Any, source: str) -> None:
        self._monitor: Any = monitor
        self.source = source

    def fileno(self) -> int:
        if self._monitor is None:
            raise ValueError("the monitor is closed")
        return int(self._monitor.fileno())

    def receive(self) -> Optional[UdevDevice]:
        """The next queued event, or None if none is queued (never blocks)."""
        if self._monitor is None:
            return None
        dev = self._monitor.poll(timeout=0)
        return None if dev is None else _snapshot(dev, event=True)

    def close(self) -> None:
        """Drop the monitor (libudev closes its socket)."""
        self._monitor = None


def open_monitor(subsystems: Iterable[str], source: str) -> UdevMonitor:
    """A started monitor for ``subsystems`` on netlink group ``source``
    (``"kernel"``: raw kernel uevents, no udevd needed; ``"udev"``: udevd's events)."""
    pyudev, ctx = _load()
    try:
        mon = pyudev.Monitor.from_netlink(ctx, source=source)
        for sub in subsystems:
            mon.filter_by(sub)
        mon.start()
    except OSError as e:
        raise UdevUnavailable(f"cannot open a udev monitor ({source} events): {e}") from None
    return UdevMonitor(mon, source)


# ------------------------------------------------------------------------- the source


def _known_paths(devices: Iterable[UdevDevice]) -> Iterator[bytes]:
    for d in devices:
        yield os.fsencode(d.sys_path)


def scan_udev(key: LibraryKey) -> Scan:
    """The udev source: the sysfs source's records for the devices udev enumerates.

    Raises :class:`UdevUnavailable` without pyudev or libudev, or (``EINVAL``) when
    the call's sysfs root is not the one udev describes; the sysfs source's
    ``ScanError`` (ENOSYS, ENOMEM) otherwise, exactly as libibverbs fails.
    """
    root = os.fsencode(sys_root())
    if key.sysfs_root != root:
        raise UdevUnavailable(
            f"udev describes the live {os.fsdecode(root)} only, not sysfs_path="
            f"{os.fsdecode(key.sysfs_root)!r}; use source='sysfs' for other trees",
            errno.EINVAL,
        )
    known = set(_known_paths(list_devices("infiniband_verbs")))
    records = scan_sysfs(key.sysfs_root, key.dev_dir)
    class_dir = key.sysfs_root + b"/class/infiniband_verbs/"
    return Scan([r for r in records if os.path.realpath(class_dir + r.dev_name) in known])

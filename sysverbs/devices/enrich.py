"""What udev knows about a device beyond libibverbs' fields: its properties and the
vendor and model names of udev's hardware database.

These are *extra* facts: nothing here changes a device list, and every sysfs
value that is read (the ``modalias`` handed to the hardware database) is read by
:func:`sysverbs.ground.sysfs_read.read_sysfs_file`, with libibverbs' buffer size.

* :func:`udev_properties`: the udev properties of the device's uverbs char device
  (``DEVNAME``, ``DEVLINKS``, ``ID_PATH``...), of its IB device, or of its parent
  bus device (``PCI_SLOT_NAME``, ``ID_VENDOR_FROM_DATABASE``...).  Empty when udev
  does not know the device: devices of another sysfs tree than the live ``/sys``
  (a fixture tree through ``sysfs_path``) are unknown to udev.
* :func:`vendor_model`: ``ID_VENDOR_FROM_DATABASE`` and ``ID_MODEL_FROM_DATABASE``,
  from udev's database when udevd recorded them for the device or an ancestor
  (nearest first), else from a lookup of the ``modalias`` in udev's hardware
  database (``hwdb.bin``), which also works without udevd and for fixture trees.

Both raise :class:`sysverbs.ground.errors.UdevUnavailable` (its text says why and
what to install) when pyudev or libudev is missing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Optional

from ..engine.device import Device, device_arg
from ..ground.errors import UsageError
from ..ground.sysfs_read import MODALIAS_SIZE, cstr, read_sysfs_file
from ..sources import udev as udev_source

__all__ = ["udev_properties", "vendor_model", "VENDOR_KEY", "MODEL_KEY"]

VENDOR_KEY = "ID_VENDOR_FROM_DATABASE"
MODEL_KEY = "ID_MODEL_FROM_DATABASE"
_WHICH = ("uverbs", "ibdev", "parent")
_EMPTY: Mapping[str, str] = MappingProxyType({})
#: How far up from ``<ibdev>/device`` a modalias is looked for (an mlx5 sub-function's
#: auxiliary device has no PCI modalias; its parent PCI function has).
_MAX_UP = 4


def _live_path(path: str) -> Optional[str]:
    """``path`` resolved, if it lies in the sysfs udev describes; else None."""
    root = udev_source.sys_root().rstrip("/")
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    if not real.startswith(root + "/devices/"):
        return None
    return real


def udev_properties(dev: Device, *, of: str = "uverbs") -> Mapping[str, str]:
    """The udev properties of one part of ``dev`` (a read-only mapping).

    ``of`` is ``"uverbs"`` (the char device ``dev.dev_path`` names, the default),
    ``"ibdev"`` (the IB device at ``dev.ibdev_path``) or ``"parent"`` (the nearest
    ancestor of the IB device that udev knows: the PCI function, an auxiliary or
    vmbus device...).  Empty when udev does not know that device.
    """
    if of not in _WHICH:
        raise UsageError(f"of must be one of {', '.join(_WHICH)}, not {of!r}")
    path = device_arg(dev).dev_path if of == "uverbs" else dev.ibdev_path
    real = _live_path(path)
    if real is None:
        return _EMPTY
    if of == "parent":
        parents = udev_source.ancestors(real)
        return parents[0].properties if parents else _EMPTY
    found = udev_source.device_at(real)
    return found.properties if found is not None else _EMPTY


def _from_udev_db(dev: Device) -> tuple[Optional[str], Optional[str]]:
    vendor: Optional[str] = None
    model: Optional[str] = None
    chain: list[Mapping[str, str]] = []
    for path in (dev.ibdev_path, dev.dev_path):
        real = _live_path(path)
        if real is None:
            continue
        found = udev_source.device_at(real)
        if found is not None:
            chain.append(found.properties)
    ib_real = _live_path(dev.ibdev_path)
    if ib_real is not None:
        chain += [p.properties for p in udev_source.ancestors(ib_real)]
    for props in chain:
        if vendor is None:
            vendor = props.get(VENDOR_KEY) or None
        if model is None:
            model = props.get(MODEL_KEY) or None
        if vendor is not None and model is not None:
            break
    return vendor, model


def _modaliases(dev: Device) -> list[bytes]:
    """``<ibdev>/device/modalias`` and those of the device's ancestors, nearest first."""
    out: list[bytes] = []
    base = os.fsencode(dev.ibdev_path) + b"/device"
    first = read_sysfs_file(base + b"/modalias", MODALIAS_SIZE)
    if first:
        out.append(cstr(first))
    try:
        if not os.path.isdir(base):
            return out  # no parent device (rxe, siw)
        cur = os.path.realpath(base)
    except (OSError, ValueError):
        return out
    for _ in range(_MAX_UP):
        cur = os.path.dirname(cur)
        if os.path.basename(cur) in (b"devices", b""):
            break
        value = read_sysfs_file(cur + b"/modalias", MODALIAS_SIZE)
        if value:
            out.append(cstr(value))
    return out


def vendor_model(dev: Device) -> tuple[Optional[str], Optional[str]]:
    """``(vendor, model)`` names from udev, each None when udev does not know it.

    udev's database entries for the device (or its nearest ancestor that has them)
    come first; otherwise the modalias of the device's parent (``device/modalias``,
    then the ancestors') is looked up in udev's hardware database, as udev itself
    does for PCI and USB devices.  rxe and siw devices have no hardware: ``(None,
    None)``.
    """
    vendor, model = _from_udev_db(device_arg(dev))
    if vendor is not None and model is not None:
        return vendor, model
    for modalias in _modaliases(dev):
        entries = udev_source.hwdb_lookup(modalias)
        if vendor is None:
            vendor = entries.get(VENDOR_KEY) or None
        if model is None:
            model = entries.get(MODEL_KEY) or None
        if vendor is not None or model is not None:
            break
    return vendor, model

"""sysverbs: RDMA device discovery in pure Python, exactly as libibverbs does it.

>>> import sysverbs
>>> devices = sysverbs.get_device_list()          # doctest: +SKIP
>>> [(d.name, f"{sysverbs.get_device_guid(d):016x}") for d in devices]  # doctest: +SKIP
[('mlx5_0', '0c42a10300a51c30')]
>>> sysverbs.free_device_list(devices)            # doctest: +SKIP
"""

from __future__ import annotations

from .api import (
    DeviceList,
    close_device,
    effective_options,
    free_device_list,
    get_device_guid,
    get_device_index,
    get_device_list,
    get_device_name,
    open_device,
)
from .device import Context, Device, DeviceFreedError
from .enums import NodeType, TransportType
from .fork import ForkStatus, fork_init, is_fork_initialized
from .messages import (
    AbiWarning,
    ConfigWarning,
    DriverLoadWarning,
    ForkWarning,
    KernelAbiFatal,
    MemlockWarning,
    NoDriverWarning,
    SysverbsWarning,
    set_stderr,
)
from .monitor import DeviceEvent, DeviceMonitor, monitor
from .options import Options
from .udev_source import UdevUnavailable

__version__ = "0.1.0"

__all__ = [
    "get_device_list",
    "free_device_list",
    "get_device_name",
    "get_device_guid",
    "get_device_index",
    "open_device",
    "close_device",
    "effective_options",
    "fork_init",
    "is_fork_initialized",
    "ForkStatus",
    "Device",
    "DeviceList",
    "Context",
    "DeviceFreedError",
    "NodeType",
    "TransportType",
    "Options",
    "SysverbsWarning",
    "NoDriverWarning",
    "AbiWarning",
    "KernelAbiFatal",
    "ConfigWarning",
    "DriverLoadWarning",
    "MemlockWarning",
    "ForkWarning",
    "set_stderr",
    "monitor",
    "DeviceMonitor",
    "DeviceEvent",
    "UdevUnavailable",
]

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
from .device import Context, Device
from .errors import (
    AbiWarning,
    ConfigWarning,
    DeviceFreedError,
    DriverLoadWarning,
    ForkWarning,
    KernelAbiFatal,
    MemlockWarning,
    NoDriverWarning,
    SourceUnavailable,
    SysverbsError,
    SysverbsWarning,
    UdevUnavailable,
    UsageError,
)
from .messages import set_stderr
from .options import Options

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .attributes import (
        DeviceAttributes,
        Gid,
        GidType,
        LinkLayer,
        PhysState,
        PortAttributes,
        PortState,
        Rate,
        device_attributes,
        port_attributes,
    )
    from .diagnosis import Diagnosis, DiagnosisList, Reason, diagnose
    from .enums import NodeType, TransportType
    from .fork import ForkStatus, fork_init, is_fork_initialized
    from .monitor import DeviceEvent, DeviceMonitor, monitor
    from .rdmacm import ContextList, rdma_free_devices, rdma_get_devices
    from .topology import AuxDevice, CharDevice, Netdev, PciFunction, Topology, device_topology

__version__ = "0.1.0"

# Imported on first use, so that ``import sysverbs`` stays cheap (issue 8): these
# modules pull in enum, threading, typing, dataclasses, ipaddress or re.
_LAZY = {
    **dict.fromkeys(
        (
            "device_attributes", "port_attributes", "DeviceAttributes", "PortAttributes",
            "Gid", "GidType", "LinkLayer", "PortState", "PhysState", "Rate",
        ),
        "attributes",
    ),
    **dict.fromkeys(
        ("device_topology", "Topology", "PciFunction", "AuxDevice", "Netdev", "CharDevice"),
        "topology",
    ),
    **dict.fromkeys(("diagnose", "Diagnosis", "DiagnosisList", "Reason"), "diagnosis"),
    **dict.fromkeys(("NodeType", "TransportType"), "enums"),
    **dict.fromkeys(("ForkStatus", "fork_init", "is_fork_initialized"), "fork"),
    **dict.fromkeys(("monitor", "DeviceMonitor", "DeviceEvent"), "monitor"),
    **dict.fromkeys(("rdma_get_devices", "rdma_free_devices", "ContextList"), "rdmacm"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sysverbs' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
    "SysverbsError",
    "UsageError",
    "SourceUnavailable",
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
    "rdma_get_devices",
    "rdma_free_devices",
    "ContextList",
    # imported on first use (see _LAZY)
    "device_attributes",
    "port_attributes",
    "DeviceAttributes",
    "PortAttributes",
    "Gid",
    "GidType",
    "LinkLayer",
    "PortState",
    "PhysState",
    "Rate",
    "device_topology",
    "Topology",
    "PciFunction",
    "AuxDevice",
    "Netdev",
    "CharDevice",
    "diagnose",
    "Diagnosis",
    "DiagnosisList",
    "Reason",
]

"""sysverbs: RDMA device discovery in pure Python, exactly as libibverbs does it.

>>> import sysverbs
>>> devices = sysverbs.get_device_list()          # doctest: +SKIP
>>> [(d.name, f"{d.guid:016x}") for d in devices]  # doctest: +SKIP
[('mlx5_0', '0c42a10300a51c30')]
>>> sysverbs.free_device_list(devices)            # doctest: +SKIP

The public names are those of :data:`_API` below.  The modules of the first call are
imported with the package; the others when one of their names is first used, so
that ``import sysverbs`` stays cheap (tests/test_layout.py lists the modules it loads).
Every other public name is imported from the module where its code lives (each layer's
folder, docs/architecture.md): :mod:`sysverbs.ground.errors`, :mod:`sysverbs.ground.enums`,
:mod:`sysverbs.engine.fork`, :mod:`sysverbs.devices.attributes`,
:mod:`sysverbs.devices.location`, :mod:`sysverbs.devices.diagnosis`,
:mod:`sysverbs.devices.rdmacm`, :mod:`sysverbs.devices.monitor`,
:mod:`sysverbs.devices.enrich`, :mod:`sysverbs.placement`, :mod:`sysverbs.rank.nccl`,
:mod:`sysverbs.rank.environment`, :mod:`sysverbs.rank.launch`, :mod:`sysverbs.testing`
(its recording format: :mod:`sysverbs.testing.umockdev`) and :mod:`sysverbs.compat.pyverbs`.
"""

from __future__ import annotations

from .ground import __version__ as __version__

#: Every public name, by the module that defines it (relative to this package).
#: The one table: it drives the imports, ``__all__`` and ``__dir__``.
_API: dict[str, tuple[str, ...]] = {
    "engine.api": (
        "get_device_list", "free_device_list", "get_device_name", "get_device_guid",
        "get_device_index", "open_device", "close_device", "effective_options",
        "DeviceList", "Options",
    ),
    "engine.device": ("Device", "Context"),
    "ground.messages": ("set_stderr",),
    "ground.errors": (
        "SysverbsError", "UsageError", "DeviceFreedError", "SourceUnavailable",
        "UdevUnavailable", "SysverbsWarning", "NoDriverWarning", "AbiWarning",
        "KernelAbiFatal", "ConfigWarning", "DriverLoadWarning", "MemlockWarning",
        "ForkWarning",
    ),
    # imported on first use:
    "engine.fork": ("fork_init", "is_fork_initialized", "ForkStatus"),
    "ground.enums": ("NodeType", "TransportType"),
    "devices.monitor": ("monitor", "DeviceMonitor", "DeviceEvent"),
    "devices.rdmacm": ("rdma_get_devices", "rdma_free_devices", "ContextList"),
    "devices.attributes": (
        "device_attributes", "port_attributes", "DeviceAttributes", "PortAttributes",
        "Gid", "GidType", "LinkLayer", "PortState", "PhysState", "Rate",
    ),
    "devices.location": (
        "device_location", "DeviceLocation", "PciFunction", "AuxDevice", "Netdev", "CharDevice",
    ),
    "devices.diagnosis": ("diagnose", "Diagnosis", "DiagnosisList", "Reason"),
}
#: The modules on the path of ``import sysverbs`` and of the first call.
_EAGER = ("engine.api", "engine.device", "ground.messages", "ground.errors")

TYPE_CHECKING = False
if TYPE_CHECKING:  # the same names, for type checkers (tests/test_layout.py compares)
    from typing import Any

    from .devices.attributes import (
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
    from .devices.diagnosis import Diagnosis, DiagnosisList, Reason, diagnose
    from .devices.location import (
        AuxDevice,
        CharDevice,
        DeviceLocation,
        Netdev,
        PciFunction,
        device_location,
    )
    from .devices.monitor import DeviceEvent, DeviceMonitor, monitor
    from .devices.rdmacm import ContextList, rdma_free_devices, rdma_get_devices
    from .engine.api import (
        DeviceList,
        Options,
        close_device,
        effective_options,
        free_device_list,
        get_device_guid,
        get_device_index,
        get_device_list,
        get_device_name,
        open_device,
    )
    from .engine.device import Context, Device
    from .engine.fork import ForkStatus, fork_init, is_fork_initialized
    from .ground.enums import NodeType, TransportType
    from .ground.errors import (
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
    from .ground.messages import set_stderr

_MODULE_OF = {name: module for module, names in _API.items() for name in names}
__all__ = list(_MODULE_OF)


def _load(module: str) -> None:
    """Import ``module`` and bind its public names here."""
    mod = __import__(f"{__name__}.{module}", None, None, ("_",), 0)
    for name in _API[module]:
        globals()[name] = getattr(mod, name)


for _module in _EAGER:
    _load(_module)
del _module


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _load(module)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

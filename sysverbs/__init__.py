"""sysverbs: RDMA device discovery in pure Python, exactly as libibverbs does it.

>>> import sysverbs
>>> devices = sysverbs.get_device_list()          # doctest: +SKIP
>>> [(d.name, f"{d.guid:016x}") for d in devices]  # doctest: +SKIP
[('mlx5_0', '0c42a10300a51c30')]
>>> sysverbs.free_device_list(devices)            # doctest: +SKIP

The public names are those of :data:`_API` below.  The modules of the first call are
imported with the package; the others when one of their names is first used, so
that ``import sysverbs`` stays cheap (tests/test_layout.py holds it to 15 ms).
Public modules: :mod:`sysverbs.errors`, :mod:`sysverbs.attributes`,
:mod:`sysverbs.topology`, :mod:`sysverbs.diagnosis`, :mod:`sysverbs.rdmacm`,
:mod:`sysverbs.fork`, :mod:`sysverbs.monitor`, :mod:`sysverbs.enrich`,
:mod:`sysverbs.enums`, :mod:`sysverbs.nccl`, :mod:`sysverbs.environment`,
:mod:`sysverbs.placement`, :mod:`sysverbs.recording` and :mod:`sysverbs.testing`.
"""

from __future__ import annotations

__version__ = "0.1.0"

#: Every public name, by the module that defines it (relative to this package).
#: The one table: it drives the imports, ``__all__`` and ``__dir__``.
_API: dict[str, tuple[str, ...]] = {
    "_core.api": (
        "get_device_list", "free_device_list", "get_device_name", "get_device_guid",
        "get_device_index", "open_device", "close_device", "effective_options",
        "DeviceList", "Options",
    ),
    "_core.device": ("Device", "Context"),
    "_core.messages": ("set_stderr",),
    "errors": (
        "SysverbsError", "UsageError", "DeviceFreedError", "SourceUnavailable",
        "UdevUnavailable", "SysverbsWarning", "NoDriverWarning", "AbiWarning",
        "KernelAbiFatal", "ConfigWarning", "DriverLoadWarning", "MemlockWarning",
        "ForkWarning",
    ),
    # imported on first use:
    "fork": ("fork_init", "is_fork_initialized", "ForkStatus"),
    "enums": ("NodeType", "TransportType"),
    "monitor": ("monitor", "DeviceMonitor", "DeviceEvent"),
    "rdmacm": ("rdma_get_devices", "rdma_free_devices", "ContextList"),
    "attributes": (
        "device_attributes", "port_attributes", "DeviceAttributes", "PortAttributes",
        "Gid", "GidType", "LinkLayer", "PortState", "PhysState", "Rate",
    ),
    "topology": (
        "device_topology", "Topology", "PciFunction", "AuxDevice", "Netdev", "CharDevice",
    ),
    "diagnosis": ("diagnose", "Diagnosis", "DiagnosisList", "Reason"),
}
#: The modules on the path of ``import sysverbs`` and of the first call.
_EAGER = ("_core.api", "_core.device", "_core.messages", "errors")

TYPE_CHECKING = False
if TYPE_CHECKING:  # the same names, for type checkers (tests/test_layout.py compares)
    from typing import Any

    from ._core.api import (
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
    from ._core.device import Context, Device
    from ._core.messages import set_stderr
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
    from .fork import ForkStatus, fork_init, is_fork_initialized
    from .monitor import DeviceEvent, DeviceMonitor, monitor
    from .rdmacm import ContextList, rdma_free_devices, rdma_get_devices
    from .topology import AuxDevice, CharDevice, Netdev, PciFunction, Topology, device_topology

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

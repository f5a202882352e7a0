"""pyverbs' ``device`` module for discovery: :func:`get_device_list`,
:func:`rdma_get_devices` and :class:`Device`, as rdma-core 44's pyverbs gives them.

Called with no argument, :func:`get_device_list` is ``pyverbs.device.get_device_list()``
under libibverbs' defaults (``$SYSFS_PATH`` or ``/sys``, ``/dev/infiniband``, the
installed providers): the same devices in the same order, the same values and
``str()``, the same ``libibverbs:`` messages on stderr, the same exception
(``tests/test_pyverbs_oracle.py`` runs the real pyverbs beside it).  sysverbs' listing
options (:func:`sysverbs.get_device_list`) may be given as keywords; a bundled
fixture host stands in for ``/sys`` here:

>>> import tempfile
>>> from sysverbs import testing
>>> from sysverbs.compat.pyverbs import device
>>> with tempfile.TemporaryDirectory() as tmp:
...     host = testing.materialize(testing.fixture_path("cxgb4"), tmp)
...     devices = device.get_device_list(source="sysfs", sysfs_path=host.sysfs,
...                                      dev_dir=host.dev, providers="builtin")
>>> for dev in devices:
...     print(dev)
Device cxgb4_0, node type RNIC, transport type IWARP, guid 7434a8b500000, index -1
>>> dev = devices[0]
>>> dev.name, hex(dev.guid), dev.node_type, dev.transport_type, dev.index
(b'cxgb4_0', '0x7434a8b500000', 4, 1, -1)

``guid`` is ``ibv_get_device_guid()`` turned to host order, as pyverbs does: the
number :attr:`sysverbs.Device.guid` is, whose 16 hex digits ``ibv_devices`` prints
(``0007434a8b500000`` here); ``str()`` prints it with :func:`guid_to_hex`, without
the leading zeros.  When the list
cannot be made, :class:`PyverbsRDMAError` has pyverbs' text and ``error_code`` -1
(pyverbs passes no errno); its ``errno`` is libibverbs':

>>> try:
...     device.get_device_list(source="sysfs", sysfs_path="/nonexistent")
... except device.PyverbsRDMAError as e:
...     print(e, e.error_code, e.errno)
Failed to get devices list -1 38

The rest of pyverbs' module (``Context``, ``DeviceAttr``, ``PortAttr``, ``DM``, the
attribute formatters...) is about an opened device: importing it raises
:class:`~sysverbs.ground.errors.OutOfScopeError`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NoReturn

from ...devices.rdmacm import rdma_free_devices
from ...devices.rdmacm import rdma_get_devices as rdmacm_get_devices
from ...engine.api import free_device_list, get_device_guid, get_device_index
from ...engine.api import get_device_list as ibv_get_device_list
from ...ground.errors import PyverbsError, PyverbsRDMAError, PyverbsUserError
from ._scope import out_of_scope

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ...engine.api import ListOptions
    from ...engine.device import Device as IbvDevice

__all__ = [
    "Device",
    "get_device_list",
    "rdma_get_devices",
    "translate_node_type",
    "translate_transport_type",
    "guid_to_hex",
    "PyverbsError",
    "PyverbsRDMAError",
    "PyverbsUserError",
]

#: rdma-core 44's ``pyverbs.device`` names that need an opened device.
OUT_OF_SCOPE = frozenset({
    "AllocDmAttr", "AsyncEvent", "CQModerationCaps", "Context", "DM", "DMMR",
    "DeviceAttr", "DeviceAttrEx", "GIDEntry", "ODPCaps", "PCIAtomicCaps",
    "PacketPacingCaps", "PortAttr", "PyverbsRDMAErrno", "QueryDeviceExInput", "RSSCaps",
    "TMCaps", "TSOCaps", "gid_str", "guid_format", "phys_state_to_str",
    "port_state_to_str", "speed_to_str", "str_from_flags", "translate_device_caps",
    "translate_event_type", "translate_gid_type", "translate_link_layer", "translate_mtu",
    "translate_port_cap_flags", "translate_port_cap_flags2", "width_to_str",
})

_NODE_TYPES = {1: "CA", 2: "Switch", 3: "Router", 4: "RNIC", 5: "USNIC", 6: "USNIC UDP"}
_TRANSPORT_TYPES = {0: "IB", 1: "IWARP", 2: "USNIC", 3: "USNIC UDP"}


def translate_node_type(node_type: int) -> str:
    """pyverbs' name of a node type number (``"CA"``... ``"USNIC UDP"``), else
    ``"Unknown"`` (the unspecified type 7 too).

    >>> translate_node_type(1), translate_node_type(4), translate_node_type(7)
    ('CA', 'RNIC', 'Unknown')
    """
    return _NODE_TYPES.get(node_type, "Unknown")


def translate_transport_type(transport_type: int) -> str:
    """pyverbs' name of a transport type number (``"IB"``... ``"USNIC UDP"``), else
    ``"Unknown"`` (the unspecified type 4 too).

    >>> translate_transport_type(0), translate_transport_type(4)
    ('IB', 'Unknown')
    """
    return _TRANSPORT_TYPES.get(transport_type, "Unknown")


def guid_to_hex(node_guid: int) -> str:
    """The GUID in hex without ``0x`` or leading zeros, as pyverbs' ``str()`` prints it.

    >>> guid_to_hex(0x0010e00001c88150)
    '10e00001c88150'
    """
    return f"{node_guid:x}"


class Device:
    """pyverbs' ``Device``: what ``get_device_list()`` gives of one ``struct ibv_device``.

    ``name`` (bytes), ``guid`` (host order), ``node_type`` and ``transport_type``
    (the numbers of :class:`sysverbs.ground.enums.NodeType` and
    :class:`sysverbs.ground.enums.TransportType`) and ``index`` (-1 in sysfs mode).  Unlike a
    :class:`sysverbs.Device` it stays valid after the list is gone (it holds values,
    no device), and it is read-only.

    >>> dev = Device(b"mlx4_0", 0x10e00001c88150, 1, 0, -1)
    >>> print(dev)
    Device mlx4_0, node type CA, transport type IB, guid 10e00001c88150, index -1
    >>> dev.guid
    4749890261909840
    """

    __slots__ = ("_name", "_guid", "_node_type", "_transport_type", "_index")
    _name: bytes
    _guid: int
    _node_type: int
    _transport_type: int
    _index: int

    def __init__(self, name: bytes, guid: int, node_type: int, transport_type: int,
                 index: int) -> None:
        for slot, value in zip(self.__slots__, (name, guid, node_type, transport_type, index)):
            object.__setattr__(self, slot, value)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        if isinstance(getattr(type(self), name, None), property):  # Python 3.11's words
            raise AttributeError(f"property {name!r} of 'Device' object has no setter")
        raise AttributeError(f"Device objects are read-only (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Device objects are read-only (cannot delete {name!r})")

    @property
    def name(self) -> bytes:
        """The IB device name, bytes (``b"mlx5_0"``)."""
        return self._name

    @property
    def node_type(self) -> int:
        """``ibv_device.node_type``: 1 CA, 2 switch, 3 router, 4 RNIC... -1 unknown."""
        return self._node_type

    @property
    def transport_type(self) -> int:
        """``ibv_device.transport_type``: 0 IB, 1 iWARP... -1 unknown."""
        return self._transport_type

    @property
    def guid(self) -> int:
        """The node GUID as a host-order integer; 0 without a readable ``node_guid``."""
        return self._guid

    @property
    def index(self) -> int:
        """``ibv_get_device_index()``: the kernel's index, -1 in sysfs mode."""
        return self._index

    def __str__(self) -> str:
        return (f"Device {self._name.decode()}, node type "
                f"{translate_node_type(self._node_type)}, transport type "
                f"{translate_transport_type(self._transport_type)}, guid "
                f"{guid_to_hex(self._guid)}, index {self._index}")


def _device(dev: IbvDevice) -> Device:
    return Device(os.fsencode(dev.name), get_device_guid(dev), int(dev.node_type),
                  int(dev.transport_type), get_device_index(dev))


def get_device_list(**options: Unpack[ListOptions]) -> list[Device]:
    """``pyverbs.device.get_device_list()``: a :class:`Device` for each device
    ``ibv_get_device_list()`` lists, in its order; ``[]`` when there is none.

    Raises :class:`PyverbsRDMAError` ``"Failed to get devices list"`` (``error_code``
    -1, ``errno`` libibverbs': ENOSYS, ENOMEM...) where libibverbs returns NULL.  The
    keywords are :func:`sysverbs.get_device_list`'s options (none: libibverbs'
    defaults); a wrong one raises :class:`sysverbs.ground.errors.UsageError`.
    """
    try:
        devices = ibv_get_device_list(**options)
    except OSError as e:
        raise PyverbsRDMAError("Failed to get devices list", errno=e.errno) from e
    try:
        return [_device(d) for d in devices]
    finally:
        free_device_list(devices)


def rdma_get_devices(**options: Unpack[ListOptions]) -> list[Device]:
    """``pyverbs.device.rdma_get_devices()``: a :class:`Device` for each device
    librdmacm's ``rdma_get_devices()`` returns (:func:`sysverbs.rdma_get_devices`: the
    devices that could be opened, by kernel index or GUID).

    Raises :class:`PyverbsRDMAError` ``"Failed to get device list"`` with the errno in
    ``error_code`` and the text (``". Errno: 19, No such device"`` when libibverbs
    lists nothing), as pyverbs.
    """
    try:
        contexts = rdmacm_get_devices(**options)
    except OSError as e:
        code = -1 if e.errno is None else e.errno
        raise PyverbsRDMAError("Failed to get device list", code) from e
    try:
        return [_device(ctx.device) for ctx in contexts]
    finally:
        rdma_free_devices(contexts)


if not TYPE_CHECKING:  # (type checkers keep reporting unknown names)

    def __getattr__(name: str) -> NoReturn:
        if name in OUT_OF_SCOPE:
            raise out_of_scope(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

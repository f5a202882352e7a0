"""The record types of the import path.

* :class:`RecordTuple`: the base of sysverbs' small record types that are tuples
  (:class:`sysverbs.Options`, the provider table's rows, the sources' keys);
* :class:`FrozenRecord` (with :func:`init`): the base of the immutable records that are
  no sequence (placement's ``Gpu``, ``Nic``, ``Distance``...);
* node types and transports as the plain numbers of ``<infiniband/verbs.h>``
  (:func:`node_type_number`, :func:`transport_number`).  Records and devices keep these
  numbers; :mod:`sysverbs.ground.enums` turns them into the ``NodeType``/``TransportType``
  enums when a caller asks (``import enum`` is left out of ``import sysverbs``);
* :class:`DeviceRecord`: what a source (sysfs, netlink, udev) reports about one
  uverbs device, before matching.

One module, not several: each module on the path of ``import sysverbs`` costs the
finding and loading of its ``.pyc`` (tests/test_layout.py holds the budget).
"""

from __future__ import annotations

from .sysfs_read import ABI_SIZE, NODE_TYPE_SIZE, read_sysfs_file, strtoul

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, TypeVar

    R = TypeVar("R", bound="RecordTuple")
    F = TypeVar("F", bound="FrozenRecord")

__all__ = ["RecordTuple", "FrozenRecord", "init", "UNKNOWN", "node_type_number",
           "transport_number", "DeviceRecord", "read_abi_version", "read_node_type",
           "abi_number"]


# Two bases, because they give their users different semantics: a RecordTuple is a
# tuple (len, unpacking, equal to a plain tuple of its fields), as Options and the table
# rows are documented to be; a FrozenRecord is none (placement's records are documented
# so), and a tuple subclass cannot stop being a sequence.  Each is also the faster at
# what its users do most.  Measured 2026-12-02 on this machine (AMD EPYC, CPython
# 3.11.7, timeit, ns per operation less an empty loop's, 4-field records): field read
# RecordTuple ~50 (a property over self[i]), FrozenRecord ~5 (a slot); construction
# ~260 and ~800 (init's setattr per field); == ~20 and ~1000, hash ~45 and ~600
# (FrozenRecord builds a tuple of its fields each time): keys and table rows are hashed
# and compared, placement's records are read.
class RecordTuple(tuple[object, ...]):
    """The base of sysverbs' small record types (:class:`sysverbs.Options`, the provider
    table's rows, the sources' key...): a tuple whose subclass spells out its fields.

    Each subclass writes its ``__new__`` (the signature, the defaults), one read-only
    property per field and ``_fields``; this base adds what ``collections.namedtuple``
    would, from ``_fields``: the repr, ``_asdict``, ``_replace`` and pickling.  A plain
    class, because the alternatives cost more on the path of ``import sysverbs``
    (``import collections`` or ``import typing`` each cost about as much as the rest of
    the import; tests/test_layout.py holds the budget)::

        class Point(RecordTuple, tuple[int, int]):
            __slots__ = ()
            _fields = ("x", "y")

            def __new__(cls, x: int, y: int = 0) -> Point:
                return tuple.__new__(cls, (x, y))

            @property
            def x(self) -> int:
                return self[0]
            ...

    tests/test_tuples.py checks every subclass in the package against its ``_fields``.
    """

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
        return f"{type(self).__name__}({inner})"

    def _asdict(self) -> dict[str, Any]:
        """The fields by name, in order."""
        return dict(zip(self._fields, self))

    def _replace(self: R, **changes: Any) -> R:
        """A copy with the given fields replaced (``ValueError`` for an unknown name)."""
        unknown = [name for name in changes if name not in self._fields]
        if unknown:
            raise ValueError(f"Got unexpected field names: {unknown!r}")
        return type(self)(**{**self._asdict(), **changes})

    def __getnewargs__(self) -> tuple[object, ...]:  # pickle and copy: __new__(cls, *fields)
        return tuple(self)


_set = object.__setattr__


def init(record: FrozenRecord, *values: object) -> None:
    """Set the fields of ``record`` (``_fields``, in order) to ``values``."""
    for name, value in zip(record._fields, values):
        _set(record, name, value)


class FrozenRecord:
    """An immutable record with named fields, no sequence: the base of placement's
    records (``Gpu``, ``Nic``, ``Distance``...).

    What ``@dataclass(frozen=True)`` gave them, at no import cost (``import dataclasses``
    imports ``inspect``, ``ast`` and ``dis``: more than the rest of ``sysverbs topo``'s
    import, and decorating each class costs about a millisecond more).  Each subclass
    lists its fields in ``__slots__`` (the compared and shown ones, in order, in
    ``_fields``), annotates them, and sets them in its ``__init__`` with :func:`init`::

        class Point(FrozenRecord):
            __slots__ = _fields = ("x", "y")
            x: int
            y: int

            def __init__(self, x: int, y: int = 0) -> None:
                init(self, x, y)

    As a frozen dataclass: equal to a record of the same class with equal fields, hashed
    from the fields, ``Point(x=1, y=0)`` as repr, and assigning or deleting an attribute
    raises ``AttributeError``; copy and pickle call the class again with the fields, and
    ``_replace(**changes)`` with the fields by name (so ``__init__`` names them as
    ``_fields`` does).
    Unlike a named tuple it is no sequence (no ``len``, no unpacking, never equal to a
    plain tuple).
    """

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def _replace(self: F, **changes: Any) -> F:
        """A copy with the given fields replaced, as ``dataclasses.replace`` makes it
        (the class called again with every field by name; ``ValueError`` for an unknown
        name)."""
        unknown = [name for name in changes if name not in self._fields]
        if unknown:
            raise ValueError(f"Got unexpected field names: {unknown!r}")
        return type(self)(**{**dict(zip(self._fields, self._values())), **changes})

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, FrozenRecord)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), self._values()


#: IBV_NODE_UNKNOWN and IBV_TRANSPORT_UNKNOWN.
UNKNOWN = -1
#: The defined ``enum ibv_node_type`` values (CA .. UNSPECIFIED).
_NODE_TYPES = frozenset(range(1, 8))
#: Node type -> ``enum ibv_transport_type``, as libibverbs derives it.
_TRANSPORT = {1: 0, 2: 0, 3: 0, 4: 1, 5: 2, 6: 3, 7: 4}


def node_type_number(value: int) -> int:
    """Decode the number read from ``node_type`` (already truncated to 32 bits):
    a defined node type, else UNKNOWN (-1)."""
    return value if value in _NODE_TYPES else UNKNOWN


def transport_number(node_type: int) -> int:
    """The transport libibverbs derives from a node type (UNKNOWN when none)."""
    return _TRANSPORT.get(node_type, UNKNOWN)


def read_node_type(ibdev_path: bytes) -> int:
    """``<ibdev_path>/node_type``: result ``<= 0`` is UNKNOWN, else strtoul as uint32
    (a :func:`node_type_number`)."""
    value = read_sysfs_file(ibdev_path + b"/node_type", NODE_TYPE_SIZE)
    if not value:
        return UNKNOWN
    return node_type_number(strtoul(value) & 0xFFFFFFFF)


def abi_number(value: Optional[bytes]) -> int:
    """An ``abi_version`` read: strtoul as uint32, 0 when unreadable or empty."""
    return strtoul(value) & 0xFFFFFFFF if value else 0


def read_abi_version(entry_path: bytes) -> int:
    """``<entry_path>/abi_version`` of a ``class/infiniband_verbs`` entry."""
    return abi_number(read_sysfs_file(entry_path + b"/abi_version", ABI_SIZE))


class DeviceRecord:
    """libibverbs' ``struct verbs_sysfs_dev``.  Names and paths are bytes, as in C.

    A plain class with slots (not a dataclass: ``import dataclasses`` alone costs
    more than the rest of ``import sysverbs``).

    ``abi_ver`` and ``node_type`` may be given as None: they are then read from sysfs
    (``<S>/class/infiniband_verbs/<dev_name>/abi_version``, ``<ibdev_path>/node_type``)
    the first time they are used.  A failed read of either only gives 0 or UNKNOWN
    and never skips a device, so reading them late changes nothing but the order of
    the reads, and a device that survives from an earlier call never needs them.
    """

    __slots__ = (
        "dev_name",
        "ibdev_name",
        "ibdev_path",
        "sysfs_root",
        "cdev",
        "_abi_ver",
        "_node_type",
        "time_created_ns",
        "ibdev_idx",
        "driver_id",
        "node_guid",
        "modalias",
        "modalias_read",
    )

    def __init__(
        self,
        dev_name: bytes,  # the uverbs entry name, e.g. b"uverbs0"
        ibdev_name: bytes,  # the IB device name, e.g. b"mlx5_0" (may be empty)
        ibdev_path: bytes,  # <S>/class/infiniband/<ibdev_name>
        sysfs_root: bytes,  # <S>, used to build dev_path
        cdev: tuple[int, int],  # (major, minor) of the char device
        abi_ver: Optional[int],  # per-device uverbs ABI, unsigned 32-bit; None: read later
        node_type: Optional[int],  # a node_type_number value (-1: unknown); None: read later
        time_created_ns: int,  # st_mtime in ns of ibdev_path (sysfs mode identity)
        ibdev_idx: int = -1,  # kernel index in netlink mode, -1 in sysfs mode
        driver_id: int = 0,  # RDMA_DRIVER_UNKNOWN unless the kernel said (netlink)
        node_guid: Optional[int] = None,  # pre-cached GUID (netlink mode)
        modalias: Optional[bytes] = None,  # cache for matching
        modalias_read: bool = False,
    ) -> None:
        self.dev_name = dev_name
        self.ibdev_name = ibdev_name
        self.ibdev_path = ibdev_path
        self.sysfs_root = sysfs_root
        self.cdev = cdev
        self._abi_ver = abi_ver
        self._node_type = node_type
        self.time_created_ns = time_created_ns
        self.ibdev_idx = ibdev_idx
        self.driver_id = driver_id
        self.node_guid = node_guid
        self.modalias = modalias
        self.modalias_read = modalias_read

    @property
    def dev_path(self) -> bytes:
        """``<S>/class/infiniband_verbs/<dev_name>``: libibverbs' ``sysfs_path`` of the
        device (``ibv_device.dev_path``)."""
        return self.sysfs_root + b"/class/infiniband_verbs/" + self.dev_name

    @property
    def abi_ver(self) -> int:
        value = self._abi_ver
        if value is None:
            value = self._abi_ver = read_abi_version(self.dev_path)
        return value

    @abi_ver.setter
    def abi_ver(self, value: int) -> None:
        self._abi_ver = value

    @property
    def node_type(self) -> int:
        value = self._node_type
        if value is None:
            value = self._node_type = read_node_type(self.ibdev_path)
        return value

    @node_type.setter
    def node_type(self, value: int) -> None:
        self._node_type = value

    _FIELDS = (
        "dev_name", "ibdev_name", "ibdev_path", "sysfs_root", "cdev", "abi_ver", "node_type",
        "time_created_ns", "ibdev_idx", "driver_id", "node_guid",
    )

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, k) for k in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeviceRecord):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._FIELDS)
        return f"DeviceRecord({inner})"

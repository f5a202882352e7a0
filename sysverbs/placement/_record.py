"""The base of placement's immutable records (``Gpu``, ``Nic``, ``Distance``...).

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
raises ``AttributeError``; copy and pickle call the class again with the fields.
Unlike a named tuple it is no sequence (no ``len``, no unpacking, never equal to a
plain tuple).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["FrozenRecord", "init"]

_set = object.__setattr__


def init(record: FrozenRecord, *values: object) -> None:
    """Set the fields of ``record`` (``_fields``, in order) to ``values``."""
    for name, value in zip(record._fields, values):
        _set(record, name, value)


class FrozenRecord:
    """An immutable record with named fields; see the module docstring."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._fields])

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

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

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    R = TypeVar("R", bound="RecordTuple")

__all__ = ["RecordTuple"]


class RecordTuple(tuple[object, ...]):
    """A tuple with named fields (``_fields``, in order); see the module docstring."""

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

"""What sysverbs needs from :mod:`typing` at run time, without importing ``typing``.

``import typing`` pulls in ``re``, ``contextlib`` and ``collections`` and costs more
than all of ``import sysverbs`` (issue 8: the import must add at most 15 ms to
interpreter start).  The modules on the import path therefore import typing only
for the type checker::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import Optional

(mypy treats any ``TYPE_CHECKING`` name as true) and take :class:`NamedTuple` from
here.  For the type checker it *is* ``typing.NamedTuple``; at run time it builds the
same class with :func:`collections.namedtuple`: fields and defaults from the class
annotations, then the docstring, methods and properties of the class body.
"""

from __future__ import annotations

TYPE_CHECKING = False

__all__ = ["NamedTuple", "TYPE_CHECKING"]

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    # typing.NamedTuple refuses these names in a class body; so does this.
    _PROHIBITED = frozenset(
        {"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
         "_field_defaults", "_make", "_replace", "_asdict", "_source"}
    )
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__", "__qualname__"})

    class _NamedTupleMeta(type):
        def __new__(mcs, name, bases, ns):  # noqa: N804
            if ns.get("_sv_root"):
                return super().__new__(mcs, name, bases, ns)
            from collections import namedtuple

            fields = tuple(ns.get("__annotations__", {}))
            defaults = []
            for field in fields:
                if field in ns:
                    defaults.append(ns[field])
                elif defaults:
                    raise TypeError(
                        f"Non-default namedtuple field {field} cannot follow default field"
                    )
            cls = namedtuple(name, fields, defaults=defaults, module=ns["__module__"])
            cls.__annotations__ = dict(ns.get("__annotations__", {}))
            cls.__qualname__ = ns.get("__qualname__", name)
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
                if key not in _SPECIAL and key not in fields:
                    setattr(cls, key, value)
            return cls

    class NamedTuple(metaclass=_NamedTupleMeta):
        """Base class: ``class Point(NamedTuple): x: int; y: int = 0``."""

        _sv_root = True

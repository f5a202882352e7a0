"""What sysverbs needs from :mod:`typing` at run time, without importing ``typing``.

``import typing`` pulls in ``re``, ``contextlib`` and ``collections`` and costs more
than all of ``import sysverbs`` (the import must add at most 15 ms to
interpreter start).  The modules on the import path therefore import typing only
for the type checker::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import Optional

(mypy treats any ``TYPE_CHECKING`` name as true) and take :class:`NamedTuple` from
here.  For the type checker it *is* ``typing.NamedTuple``.  At run time it builds
the same kind of class (a tuple subclass with ``_fields``, ``_field_defaults``,
``_make``, ``_replace``, ``_asdict``, read-only field properties, the same
signature, repr, errors and pickling) without :func:`collections.namedtuple`, which
compiles a ``__new__`` for every class (about 0.15 ms each, and ``import
collections`` costs more than that): every class shares one ``__new__`` that reads
its fields from the class.  ``tests/test_typing_light.py`` compares the two.
"""

from __future__ import annotations

TYPE_CHECKING = False

__all__ = ["NamedTuple", "TYPE_CHECKING"]

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    from _operator import itemgetter as _itemgetter

    try:
        from _collections import _tuplegetter
    except ImportError:  # not CPython: the pure form
        def _tuplegetter(index, doc):
            return property(_itemgetter(index), doc=doc)

    # typing.NamedTuple refuses these names in a class body; so does this.
    _PROHIBITED = frozenset(
        {"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
         "_field_defaults", "_make", "_replace", "_asdict", "_source"}
    )
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__", "__qualname__"})
    _tuple_new = tuple.__new__
    _MATCH_ARGS = __import__("sys").version_info >= (3, 10)

    def _bind(cls, args, kwargs):
        """The field values of ``cls(*args, **kwargs)``, with Python's call errors."""
        fields = cls._fields
        where = f"{cls.__name__}.__new__()"
        if len(args) > len(fields):
            required = len(fields) - len(cls._field_defaults)
            takes = (f"{required + 1}" if required == len(fields)
                     else f"from {required + 1} to {len(fields) + 1}")
            raise TypeError(f"{where} takes {takes} positional arguments "
                            f"but {len(args) + 1} were given")
        values = list(args)
        for name in kwargs:
            if name not in fields:
                raise TypeError(f"{where} got an unexpected keyword argument {name!r}")
            if fields.index(name) < len(args):
                raise TypeError(f"{where} got multiple values for argument {name!r}")
        missing = []
        defaults = cls._field_defaults
        for name in fields[len(args):]:
            if name in kwargs:
                values.append(kwargs[name])
            elif name in defaults:
                values.append(defaults[name])
            else:
                missing.append(name)
        if missing:
            names = [repr(m) for m in missing]
            listed = names[0] if len(names) == 1 else (
                ", ".join(names[:-1]) + (", and " if len(names) > 2 else " and ") + names[-1])
            plural = "argument" if len(names) == 1 else "arguments"
            raise TypeError(f"{where} missing {len(names)} required positional {plural}: {listed}")
        return values

    def __new__(_cls, *args, **kwargs):  # noqa: N807
        if not kwargs and len(args) == len(_cls._fields):
            return _tuple_new(_cls, args)
        return _tuple_new(_cls, _bind(_cls, args, kwargs))

    def _make(cls, iterable):
        result = _tuple_new(cls, iterable)
        if len(result) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(result)}")
        return result

    def _replace(self, /, **kwds):
        result = self._make(map(kwds.pop, self._fields, self))
        if kwds:
            raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
        return result

    def __repr__(self):
        inner = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
        return f"{self.__class__.__name__}({inner})"

    def _asdict(self):
        return dict(zip(self._fields, self))

    def __getnewargs__(self):
        return tuple(self)

    class _Signature:
        """``cls.__signature__`` for :mod:`inspect` (imported by whoever asks)."""

        def __get__(self, obj, cls):
            import inspect

            param = inspect.Parameter
            notes = cls.__annotations__
            return inspect.Signature([
                param(name, param.POSITIONAL_OR_KEYWORD,
                      default=cls._field_defaults.get(name, param.empty),
                      annotation=notes.get(name, param.empty))
                for name in cls._fields
            ])

    _SHARED = {
        "__slots__": (),
        "__new__": __new__,
        "_make": classmethod(_make),
        "_replace": _replace,
        "__repr__": __repr__,
        "_asdict": _asdict,
        "__getnewargs__": __getnewargs__,
        "__signature__": _Signature(),
    }

    class _NamedTupleMeta(type):
        def __new__(mcs, name, bases, ns):  # noqa: N804
            if ns.get("_sv_root"):
                return super().__new__(mcs, name, bases, ns)
            notes = ns.get("__annotations__", {})
            fields = tuple(notes)
            defaults = {}
            for field in fields:
                if field in ns:
                    defaults[field] = ns[field]
                elif defaults:
                    raise TypeError(
                        f"Non-default namedtuple field {field} cannot follow default field"
                    )
            body = dict(_SHARED)
            body["__doc__"] = ns.get("__doc__") or f"{name}({', '.join(fields)})"
            body["_fields"] = fields
            body["_field_defaults"] = defaults
            if _MATCH_ARGS:  # as typing.NamedTuple: only where there is a match statement
                body["__match_args__"] = fields
            for index, field in enumerate(fields):
                body[field] = _tuplegetter(index, f"Alias for field number {index}")
            body["__module__"] = ns["__module__"]
            body["__qualname__"] = ns.get("__qualname__", name)
            body["__annotations__"] = dict(notes)
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
                if key not in _SPECIAL and key not in fields and key != "__doc__":
                    body[key] = value
            return type.__new__(type, name, (tuple,), body)

    class NamedTuple(metaclass=_NamedTupleMeta):
        """Base class: ``class Point(NamedTuple): x: int; y: int = 0``."""

        _sv_root = True

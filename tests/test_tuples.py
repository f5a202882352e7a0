"""The record tuples (subclasses of ``sysverbs.ground.records.RecordTuple``: Options,
LibraryKey, Provider, ...) behave as named tuples: each class's ``__new__``, its field
properties and its ``_fields`` agree, and the repr, ``_replace``, ``_asdict``, pickling
and equality with plain tuples work from them."""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import pickle
from pathlib import Path

import pytest

import sysverbs
from sysverbs.ground.records import RecordTuple

PACKAGE = Path(sysverbs.__file__).resolve().parent


def _record_classes() -> list[type[RecordTuple]]:
    """Every class of the package whose bases name RecordTuple (found in the source,
    so that a new one is checked without being listed here)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and b.id == "RecordTuple" for b in node.bases):
                parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts.pop()
                found.append(getattr(importlib.import_module(".".join(parts)), node.name))
    return found


CLASSES = _record_classes()


def test_the_record_classes_are_found() -> None:
    assert {c.__name__ for c in CLASSES} >= {
        "Options", "LibraryKey", "Provider", "MatchEntry", "Skipped", "DriverLoad"}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_fields_new_and_properties_agree(cls: type[RecordTuple]) -> None:
    params = inspect.signature(cls).parameters
    assert tuple(params) == cls._fields
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params.values())
    values = [f"value {i}" for i in range(len(cls._fields))]
    by_keyword = cls(**dict(zip(cls._fields, values)))
    by_position = cls(*values)
    assert type(by_keyword) is cls and by_keyword == by_position == tuple(values)
    assert hash(by_keyword) == hash(tuple(values))
    for i, name in enumerate(cls._fields):
        assert getattr(by_keyword, name) == values[i] == by_keyword[i], name
        with pytest.raises(AttributeError):
            setattr(by_keyword, name, "other")
    assert not hasattr(by_keyword, "__dict__")  # every class of the MRO has __slots__
    defaults = {n: p.default for n, p in params.items() if p.default is not p.empty}
    required = [v for n, v in zip(cls._fields, values) if n not in defaults]
    assert cls(*required)._asdict() == {**dict(zip(cls._fields, values)), **defaults}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_repr_replace_asdict_pickle_copy(cls: type[RecordTuple]) -> None:
    values = [f"value {i}" for i in range(len(cls._fields))]
    record = cls(*values)
    inner = ", ".join(f"{n}={v!r}" for n, v in zip(cls._fields, values))
    assert repr(record) == f"{cls.__name__}({inner})"
    assert record._asdict() == dict(zip(cls._fields, values))
    last = cls._fields[-1]
    changed = record._replace(**{last: "new"})
    assert type(changed) is cls and changed == (*values[:-1], "new") and record == tuple(values)
    with pytest.raises(ValueError, match="unexpected field names: \\['nope'\\]"):
        record._replace(nope=1)
    for clone in (pickle.loads(pickle.dumps(record)), copy.copy(record), copy.deepcopy(record)):
        assert type(clone) is cls and clone == record


def test_public_options_is_a_named_tuple() -> None:
    opts = sysverbs.effective_options(sysfs_path="/x", providers="builtin", rdma_core="44")
    assert opts._fields[:2] == ("source", "sysfs_path")
    assert opts._replace(source="sysfs").source == "sysfs"
    source, sysfs_path, *_ = opts
    assert (source, sysfs_path) == (opts.source, "/x")
    assert repr(opts).startswith("Options(source='auto', sysfs_path='/x', ")

"""typing_light.NamedTuple builds the same class as typing.NamedTuple (sysverbs uses it so
that ``import sysverbs`` does not import typing)."""

from __future__ import annotations

import copy
import inspect
import pickle
import re
import sys
import typing
from typing import Any, Callable

import pytest

import sysverbs
from sysverbs._core.typing_light import NamedTuple


class Light(NamedTuple):
    """A docstring."""

    a: int
    b: str = "x"

    def double(self) -> int:
        return self.a * 2

    @property
    def upper(self) -> str:
        return self.b.upper()


class Heavy(typing.NamedTuple):
    """A docstring."""

    a: int
    b: str = "x"

    def double(self) -> int:
        return self.a * 2

    @property
    def upper(self) -> str:
        return self.b.upper()


def test_same_behaviour_as_typing_namedtuple() -> None:
    for cls in (Light, Heavy):
        v = cls(2)
        assert (v, v.a, v.b, v.double(), v.upper) == ((2, "x"), 2, "x", 4, "X")
        assert cls._fields == ("a", "b") and cls._field_defaults == {"b": "x"}
        assert cls.__doc__ == "A docstring." and cls.__module__ == __name__
        assert v._replace(b="y") == (2, "y") and v._asdict() == {"a": 2, "b": "x"}
        assert repr(v) == f"{cls.__name__}(a=2, b='x')"
        assert pickle.loads(pickle.dumps(v)) == v
        assert isinstance(v, tuple) and list(cls.__annotations__) == ["a", "b"]
    with pytest.raises(TypeError):
        Light()  # type: ignore[call-arg]


def _outcome(make: Callable[[], Any]) -> tuple[str, str]:
    """The error (kind, message) or the repr.  Messages name the method as "__new__()",
    without the class ("Light.__new__()" since CPython 3.10, "__new__()" before and on
    PyPy 3.9); typing_light always names the class."""
    try:
        return "ok", repr(make())
    except (TypeError, ValueError, AttributeError) as e:
        return type(e).__name__, re.sub(r"^\w+\.__new__\(\)", "__new__()", str(e))


def test_same_signature_errors_and_details() -> None:
    """What a caller can see: the signature, every call error with its message, _make,
    _replace, copies, read-only fields, no instance dict, the generated docstrings."""
    # (typing wraps the string annotations in ForwardRef; the parameters are the same)
    assert str(inspect.signature(Light)) == "(a: 'int', b: 'str' = 'x')"
    assert [(p.name, p.kind, p.default) for p in inspect.signature(Light).parameters.values()] \
        == [(p.name, p.kind, p.default) for p in inspect.signature(Heavy).parameters.values()]
    for cls in (Light, Heavy):
        # __match_args__ came with the match statement (3.10)
        match_args = ("a", "b") if sys.version_info >= (3, 10) else None
        assert getattr(cls, "__match_args__", None) == match_args and cls.__slots__ == ()
        assert cls.a.__doc__ == "Alias for field number 0"
        v = cls(1, "q")
        assert copy.copy(v) == v and copy.deepcopy(v) == v and hash(v) == hash((1, "q"))
        assert not hasattr(v, "__dict__")

    def calls(cls: Any) -> list[tuple[str, str]]:
        return [
            _outcome(lambda: cls()),
            _outcome(lambda: cls(1, "y", 3)),
            _outcome(lambda: cls(1, c=2)),
            _outcome(lambda: cls(1, a=2)),
            _outcome(lambda: cls(b="y")),
            _outcome(lambda: cls(b="y", a=3)),
            _outcome(lambda: cls._make([1])),
            _outcome(lambda: cls._make([1, "z"])),
            _outcome(lambda: cls(1)._replace(c=1)),
            _outcome(lambda: setattr(cls(1), "a", 2)),
        ]

    light, heavy = calls(Light), calls(Heavy)
    assert [(kind, text.replace("Light", "Heavy")) for kind, text in light] == heavy

    class NoDoc(NamedTuple):
        x: int
        y: int
        z: int

    class NoDocHeavy(typing.NamedTuple):
        x: int
        y: int
        z: int

    assert NoDoc.__doc__ == "NoDoc(x, y, z)" and NoDocHeavy.__doc__ == "NoDocHeavy(x, y, z)"
    assert _outcome(lambda: NoDoc()) == _outcome(lambda: NoDocHeavy()) == (  # type: ignore
        "TypeError", "__new__() missing 3 required positional arguments: 'x', 'y', and 'z'")


def test_refuses_what_typing_refuses() -> None:
    with pytest.raises(TypeError):
        class Bad(NamedTuple):  # noqa: F841
            a: int = 1
            b: int  # type: ignore[misc]
    with pytest.raises(AttributeError):
        class Worse(NamedTuple):  # noqa: F841
            a: int

            def _replace(self) -> None:  # type: ignore[override]
                pass


def test_public_options_is_a_namedtuple() -> None:
    opts = sysverbs.effective_options(sysfs_path="/x", providers="builtin", rdma_core="44")
    assert opts._fields[:2] == ("source", "sysfs_path")
    assert opts._replace(source="sysfs").source == "sysfs"

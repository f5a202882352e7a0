"""typing_light.NamedTuple builds the same class as typing.NamedTuple (sysverbs uses it so
that ``import sysverbs`` does not import typing)."""

from __future__ import annotations

import pickle
import typing

import pytest

import sysverbs
from sysverbs.typing_light import NamedTuple


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

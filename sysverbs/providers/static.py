"""A statically linked libibverbs: which providers ``RDMA_STATIC_PROVIDERS`` links in.

libibverbs' manual: "If libibverbs is statically linked to the application then all
provider drivers must also be statically linked. [...] set the RDMA_STATIC_PROVIDERS
define to the comma separated list of desired providers".  What the real static library
does (Debian's ``libibverbs.a``, rdma-core 44; docs/static-linking.md, with the tests that
show each point):

* the define only makes the application's ``ibv_get_device_list`` refer to the symbol
  ``verbs_provider_NAME`` of each name, so that the linker pulls that provider's object
  out of its archive; the provider then registers itself from a constructor, at program
  start, in the order the objects were linked: the order of the archives on
  ``pkg-config --static --libs libibverbs``, not the order of the names;
* ``all`` links every provider of the build, ``none`` nothing; a name that is not a
  provider does not compile;
* the define takes as many names as verbs.h's macro has slots; names after them are
  dropped without a word;
* no provider library is ever loaded: the config directory, ``RDMAV_DRIVERS`` and the
  driver files do not matter.

The per-release facts (the names in link order, the slots) are data: ``static.json``,
derived from rdma-core's git by ``tools/check_static_providers.py``.
"""

from __future__ import annotations

from ..ground.errors import UsageError, WrongTypeError
from ..ground.records import RecordTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from .table import Provider

__all__ = ["StaticLink", "static_link", "static_names", "static_drivers", "static_since",
           "unmodeled"]

_loaded: dict[str, Any] = {}


def _data() -> dict[str, Any]:
    data: Optional[dict[str, Any]] = _loaded.get("data")
    if data is None:
        import json
        import os

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static.json")
        with open(path, "rb") as f:
            data = _loaded["data"] = json.loads(f.read())
    assert data is not None
    return data


def static_since() -> int:
    """The first rdma-core release with a static libibverbs (21)."""
    return int(_data()["since"])


def static_names(release: int) -> tuple[str, ...]:
    """The providers a static link of ``release`` can take, in link order."""
    return tuple(
        str(row["name"]) for row in _data()["link_order"]
        if int(row["since"]) <= release and ("until" not in row or release < int(row["until"]))
    )


def _slots(release: int) -> int:
    slots = 0
    for first, count in _data()["slots"]:
        if int(first) <= release:
            slots = int(count)
    return slots


class StaticLink(RecordTuple, tuple[str, "tuple[str, ...]", "tuple[str, ...]"]):
    """One static link: the define as given, the providers it links (in link order) and
    the names the define dropped (past its slots)."""

    __slots__ = ()
    _fields = ("given", "linked", "dropped")

    def __new__(cls, given: str, linked: tuple[str, ...], dropped: tuple[str, ...]
                ) -> StaticLink:
        return tuple.__new__(cls, (given, linked, dropped))

    @property
    def given(self) -> str:
        """The names as one RDMA_STATIC_PROVIDERS value (``""``: no define)."""
        return self[0]

    @property
    def linked(self) -> tuple[str, ...]:
        """The providers linked in, in the order they register."""
        return self[1]

    @property
    def dropped(self) -> tuple[str, ...]:
        """Names after the define's last slot, which the preprocessor drops."""
        return self[2]


def _names(value: object) -> list[str]:
    if isinstance(value, str):
        text = value
    elif isinstance(value, (bytes, bytearray)) or not hasattr(value, "__iter__"):
        raise WrongTypeError("static_providers must be a str such as 'mlx4,mlx5', a list "
                             f"of names or None, not {type(value).__name__}")
    else:
        items = list(value)
        for item in items:
            if not isinstance(item, str):
                raise WrongTypeError("static_providers must list names as str, not "
                                     f"{type(item).__name__}")
        text = ",".join(items)
    if not text.strip():
        return []
    return [name.strip() for name in text.split(",")]


def static_link(value: object, release: int) -> StaticLink:
    """What ``RDMA_STATIC_PROVIDERS=value`` links with rdma-core ``release``.

    ``value``: the define's text (``"mlx4,mlx5"``, ``"all"``), a sequence of names, or
    ``""`` (a static link without the define: no provider).  A name that is not a
    provider of the release is a :class:`~sysverbs.ground.errors.UsageError` (the real
    compiler stops on it).

    >>> static_link("mlx5,mlx4", 44).linked
    ('mlx4', 'mlx5')
    >>> len(static_link("all", 44).linked)
    17
    """
    since = static_since()
    if release < since:
        raise UsageError(f"static_providers: rdma-core {release} has no static libibverbs "
                         f"(RDMA_STATIC_PROVIDERS came with rdma-core {since})")
    names = _names(value)
    order = static_names(release)
    slots = _slots(release)
    used, dropped = names[:slots], names[slots:]
    for name in used:
        if name not in order and name not in ("all", "none"):
            shown = repr(name) if name else "an empty name"
            raise UsageError(
                f"static_providers: {shown} is not a provider of rdma-core {release} "
                f"(a static link fails on it); valid: all, none, {', '.join(order)}")
    if "all" in used:
        linked = order
    else:
        linked = tuple(name for name in order if name in used)
    return StaticLink(",".join(names), linked, tuple(dropped))


def static_drivers(release: int, linked: tuple[str, ...]) -> tuple[Provider, ...]:
    """The driver list of a static link: the table's providers whose library is linked,
    in link order (a linked provider that the table lacks matches nothing)."""
    from .table import provider_table

    by_library = {prov.library: prov for prov in provider_table(release)}
    return tuple(by_library[name] for name in linked if name in by_library)


def unmodeled(release: int, linked: tuple[str, ...]) -> tuple[str, ...]:
    """Linked providers that sysverbs has no match table for (rdma-core dropped them
    before the release the data was read at: cxgb3, nes, i40iw)."""
    from .table import provider_table

    known = {prov.library for prov in provider_table(release)}
    return tuple(name for name in linked if name not in known)

"""The differential fuzzer's raw material (tests/fuzz/strategies.py builds cases from it):
the draw helper :class:`G`, file contents at and around libibverbs' buffer sizes and
parse rules, device names, modaliases of every provider's PCI ids and near misses, GUIDs.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from hypothesis import strategies as st

from tests.fuzz.model import Dir, Entry, Link

T = TypeVar("T")
Draw = Callable[[st.SearchStrategy[Any]], Any]

_DATA = json.loads(
    (Path(__file__).resolve().parents[2] / "sysverbs/providers/providers.json").read_text("utf-8")
)
#: Every (vendor, device) any rdma-core release matched, with its provider's ABI range.
PCI_IDS: tuple[tuple[int, int, str, int, int], ...] = tuple(
    sorted(
        {
            (int(e["vendor"], 16), int(e["device"], 16), p["name"], p["min_abi"], p["max_abi"])
            for p in _DATA["providers"]
            for e in p["match"]
            if e["kind"] == "pci"
        }
    )
)
LIBRARIES: tuple[str, ...] = tuple(sorted({p["library"] for p in _DATA["providers"]}))
VMBUS = b"vmbus:3daf2e8ca732094bab99bd1f1c86b501"

# libibverbs' buffer sizes (docs/behaviour.md: Reading sysfs files)
IBDEV, DEV, ABI, NODE_TYPE, CLASS_ABI, MODALIAS, NODE_GUID = 64, 32, 32, 32, 8, 512, 24

BOUNDARIES = (
    0,
    1,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**32 + 1,
    2**32 + 6,
    2**63 - 1,
    2**63,
    2**64 - 1,
    2**64,
    2**64 + 1,
    10**25,
)
JUNK_WORDS = (b"junk", b"\x00", b"\xff\xfe", b" ", b"\t\n", b"0x", b"-", b"::::", b"\n\n")


@functools.cache
def ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


@functools.cache
def binary(min_size: int, max_size: int) -> st.SearchStrategy[bytes]:
    return st.binary(min_size=min_size, max_size=max_size)


class G:
    """The ``draw`` function with cheap, cached choices (strategy objects are reused)."""

    def __init__(self, draw: Draw) -> None:
        self.draw = draw

    def pick(self, options: Sequence[T]) -> T:
        """One of ``options``; shrinks towards the first."""
        return options[self.integer(0, len(options) - 1)]

    def weighted(self, *pairs: tuple[int, T]) -> T:
        """One of the values, each ``weight`` times as likely; shrinks towards the first."""
        items: list[T] = []
        for weight, value in pairs:
            items += [value] * weight
        return self.pick(items)

    def integer(self, lo: int, hi: int) -> int:
        value: int = self.draw(ints(lo, hi))
        return value

    def coin(self, odds: int = 1) -> bool:
        """True with probability 1/(odds+1) (1/2 by default)."""
        return self.integer(0, odds) == 0 if odds > 1 else self.pick((False, True))

    def binary(self, max_size: int, min_size: int = 0) -> bytes:
        value: bytes = self.draw(binary(min_size, max_size))
        return value

    def junk(self) -> bytes:
        if self.coin():
            return self.pick(JUNK_WORDS)
        return self.binary(40)


# -- contents ----------------------------------------------------------------------------------


def c_integer(g: G, typical: Sequence[int] = (0, 1, 2, 3, 4, 5, 6, 7, 8)) -> bytes:
    """Text for strtoul/strtol/scanf: whitespace, sign, digits (or junk), trailing junk."""
    lead = g.weighted((8, b""), (1, b" "), (1, b"  "), (1, b"\t"), (1, b" \n"), (1, b"\v\f\r"))
    sign = g.weighted((8, b""), (1, b"+"), (1, b"-"), (1, b"+-"))
    kind = g.weighted((4, "typical"), (2, "boundary"), (1, "big"), (1, "odd"))
    if kind == "typical":
        body = b"%d" % g.pick(tuple(typical))
    elif kind == "boundary":
        body = b"%d" % g.pick(BOUNDARIES)
    elif kind == "big":
        body = b"%d" % g.integer(0, 2**70)
    else:
        body = g.pick((b"0x10", b"0X1f", b"0006", b"00", b"", b"0x", b"junk", b"1e3"))
    tail = g.weighted((8, b""), (1, b"junk"), (1, b" 7"), (1, b":"), (1, b"\x00tail"))
    return lead + sign + body + tail


def sized(g: G, core: bytes, size: int, allow_empty: bool = True, normal: int = 12) -> bytes:
    """File contents around ``core`` for a ``size``-byte read (docs/behaviour.md: Reading
    sysfs files): every ending and every length from size-2 to size+2.
    ``allow_empty=False`` never gives b""; ``normal`` weighs the plain ``core + b"\\n"``."""
    kind = g.weighted(
        (normal, "nl"),
        (2, "raw"),
        (1, "nlnl"),
        (1, "crlf"),
        (1, "space"),
        (1, "nul"),
        (4, "length"),
        (1, "newline"),
        (1, "junk"),
        (1 if allow_empty else 0, "empty"),
    )
    if kind == "nl":
        data = core + b"\n"
    elif kind == "raw":
        data = core
    elif kind == "nlnl":
        data = core + b"\n\n"
    elif kind == "crlf":
        data = core + b"\r\n"
    elif kind == "space":
        data = g.pick((b" " + core + b"\n", core + b" \n", b"\t" + core))
    elif kind == "nul":
        data = core + b"\x00" + g.junk() + b"\n"
    elif kind == "length":
        length = g.integer(max(size - 2, 1), size + 2)
        fill = g.pick((b" ", b"x", b"0", b"\t", b"\n"))
        body = (core + fill * (length + size))[: length + size]
        end = g.pick(("nl", "none", "nl_at_last_index", "nl_after_buffer"))
        if end == "nl":
            data = body[: length - 1] + b"\n"
        elif end == "none":
            data = body[:length]
        elif end == "nl_at_last_index":  # accepted: the value is the first size-1 bytes
            data = body[: size - 1] + b"\n" + g.junk()
        else:  # rejected: size bytes with no newline at index size-1
            data = body[:size] + b"\n"
    elif kind == "newline":
        data = b"\n"
    elif kind == "junk":
        data = g.junk()
    else:
        data = b""
    if not allow_empty and not data:
        data = b"\n"
    return data


@dataclass(frozen=True)
class FileSpec:
    """How one file libibverbs reads is present: ``form`` and (for files/links) content."""

    form: str  # file, missing, dir, dangling, loop, link
    content: bytes = b""


MISSING = FileSpec("missing")


def file_spec(
    g: G, content: Callable[[], bytes], missing_weight: int = 1, file_weight: int = 24
) -> FileSpec:
    """A file (weight ``file_weight``), missing, a directory, a dangling or looping link,
    or a link to a file with the content."""
    form = g.weighted(
        (file_weight, "file"),
        (missing_weight, "missing"),
        (1, "dir"),
        (1, "dangling"),
        (1, "loop"),
        (1, "link"),
    )
    data = content() if form in ("file", "link") else b""
    return FileSpec(form, data)


def put_file(tree: dict[str, Entry], path: str, spec: FileSpec) -> None:
    """Render a FileSpec at ``path``."""
    base = os.path.basename(path)
    if spec.form == "file":
        tree[path] = spec.content
    elif spec.form == "dir":
        tree[path] = Dir()
    elif spec.form == "dangling":
        tree[path] = Link("nonexistent-" + base)
    elif spec.form == "loop":
        tree[path] = Link(base)
    elif spec.form == "link":
        tree[path + ".real"] = spec.content
        tree[path] = Link(base + ".real")


# -- names and modaliases ---------------------------------------------------------------------

NAME_BYTES = tuple(bytes([c]) for c in b"abcdefxyz_019-. NRXE\t\n\x01\x7f\x80\xc3\xa9\xff:%")


def no_sep(b: bytes) -> bytes:
    return b.replace(b"/", b"_").replace(b"\x00", b"_")


def names(g: G, prefix: Optional[bytes] = None) -> bytes:
    """An odd IB device name (0 to 70 bytes)."""
    kind = g.weighted((3, "rxe"), (3, "odd"), (3, "length"), (1, "binary"), (1, "path"))
    if kind == "rxe":
        n = g.integer(0, 99)
        return g.pick(
            (b"rxe%d" % n, b"rxe_%d" % n, b"fooNrxe", b"xrxe", b"RXE0", b"rxe", b"Nrxe", b"r")
        )
    if kind == "odd":
        return b"".join(g.pick(NAME_BYTES) for _ in range(g.integer(0, 70)))
    if kind == "length":
        length = g.pick((61, 62, 63, 64, 65, 70, 0, 1))
        start = prefix or g.pick((b"rxe", b"mlx5_", b"q"))
        return (start + b"y" * 70)[:length]
    if kind == "binary":
        return no_sep(g.binary(70))
    return g.pick((b"", b".", b"..", b"../infiniband_verbs", b"a/b", b"../x", b"./y"))


def entry_names(g: G, number: int) -> bytes:
    """An odd ``class/infiniband_verbs`` entry name (never ``.`` or ``..``; no ``/``)."""
    kind = g.pick(("odd", "length", "dot"))
    if kind == "odd":
        raw = no_sep(g.binary(70, min_size=1))
    elif kind == "length":
        raw = (b"uverbs%d_" % number + b"v" * 70)[: g.pick((62, 63, 64, 65))]
    else:
        raw = b".uverbs%d" % number
    return raw if raw not in (b".", b"..") else b"uverbs%d." % number


def modalias_core(g: G, exact: bool = False) -> tuple[bytes, tuple[int, int]]:
    """A modalias (without newline) and the ABI range of the provider it is meant for;
    ``exact``: only a provider's exact PCI or vmbus form."""
    vendor, device, _prov, lo, hi = g.pick(PCI_IDS)
    sv, sd = g.integer(0, 0xFFFF), g.integer(0, 0xFFFF)
    good = b"pci:v%08Xd%08Xsv%08Xsd%08Xbc02sc00i00" % (vendor, device, sv, sd)
    if exact:
        if g.coin(odds=12):
            return VMBUS, (2, 4)
        return good, (lo, hi)
    kind = g.pick(
        (
            "lower",
            "no_sv",
            "ends_sv",
            "truncated",
            "off_by_one",
            "vmbus",
            "vmbus_near",
            "rdma_device",
            "two_lines",
            "junk",
        )
    )
    abi = (lo, hi)
    if kind == "lower":
        text = good.lower()
    elif kind == "no_sv":
        text = b"pci:v%08Xd%08X" % (vendor, device)
    elif kind == "ends_sv":
        text = b"pci:v%08Xd%08Xsv" % (vendor, device)
    elif kind == "truncated":
        text = good[: g.integer(0, 24)]
    elif kind == "off_by_one":
        text = b"pci:v%08Xd%08Xsv%08X" % (vendor, (device + 1) & 0xFFFF, sv)
    elif kind == "vmbus":
        text, abi = VMBUS, (2, 4)
    elif kind == "vmbus_near":
        text = g.pick(
            (VMBUS + b"x", VMBUS.upper(), VMBUS[:-1], b"vmbus:" + VMBUS, VMBUS[6:], VMBUS + b"*")
        )
    elif kind == "rdma_device":
        text = g.pick((b"rdma_device:Nrxe", b"rdma_device:Nrxe0", b"rdma_device:N"))
        abi = (1, 2)
    elif kind == "two_lines":
        text = good + b"\n" + g.pick((b"second line", b"", b"pci:"))
    else:
        text = g.junk()
    return text, abi


def guid_text(g: G, good_only: bool = False) -> bytes:
    """A node_guid value (no newline): ``%04x:%04x:%04x:%04x`` or a variant."""
    good = b"%04x:%04x:%04x:%04x" % (
        g.integer(0, 0xFFFF),
        g.integer(0, 0xFFFF),
        g.integer(0, 0xFFFF),
        g.integer(0, 0xFFFF),
    )
    if good_only:
        return good
    kind = g.weighted(
        (4, "good"), (1, "upper"), (1, "short"), (1, "signed"), (1, "wide"), (1, "junk")
    )
    if kind == "good":
        return good
    if kind == "upper":
        return good.upper()
    if kind == "short":
        return good[: g.integer(0, len(good))]
    if kind == "signed":
        return g.pick((b"-0x10:0X1f:+3:ffffffff", b" 2: 3:4:5", b"1 :2:3:4", b"+0x:1:2:3"))
    if kind == "wide":
        return g.pick((b"12345:0:0:1", b"0002:c903:0000:12340000", b"1:2:3:4:5:6", b"fe80::1"))
    return g.junk()

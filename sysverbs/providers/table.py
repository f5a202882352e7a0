"""Provider match tables: from ``providers.json``, derived per rdma-core release.

The data file records, for every rdma-core provider and every entry of its match
table, the first rdma-core release that shipped it (``since``) and, for entries
that were dropped, the first release without it (``until``).  The table of any
release is therefore a pure function of the data: :func:`provider_table`.

``_data.py`` holds each release's table already derived, and the release span and
PABI list, as Python literals: it loads from its ``.pyc`` with no parse at run time
and is the same on every interpreter.  ``tools/write_provider_data.py`` writes it
from ``providers.json`` (:func:`render_data_module`); a test checks it is current.
"""

from __future__ import annotations

import os
import sys

from ..ground.errors import UsageError, WrongTypeError
from ..ground.records import RecordTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Optional, Union

__all__ = [
    "Provider",
    "MatchEntry",
    "provider_table",
    "known_releases",
    "match_entries",
    "latest_release",
    "pabi_for",
    "resolve_release",
    "installed_release",
    "libibverbs_library",
    "provider_dir",
]

if TYPE_CHECKING:
    Release = Union[int, str, None]


class MatchEntry(RecordTuple, tuple[str, int, int, bytes, int, str]):
    """One ``verbs_match_ent``."""

    __slots__ = ()
    _fields = ("kind", "vendor", "device", "pattern", "driver_id", "driver_id_name")

    def __new__(cls, kind: str, vendor: int = 0, device: int = 0, pattern: bytes = b"",
                driver_id: int = 0, driver_id_name: str = "") -> MatchEntry:
        return tuple.__new__(cls, (kind, vendor, device, pattern, driver_id, driver_id_name))

    @property
    def kind(self) -> str:
        """"pci", "modalias", "name" or "driver_id"."""
        return self[0]

    @property
    def vendor(self) -> int:
        return self[1]

    @property
    def device(self) -> int:
        return self[2]

    @property
    def pattern(self) -> bytes:
        return self[3]

    @property
    def driver_id(self) -> int:
        return self[4]

    @property
    def driver_id_name(self) -> str:
        return self[5]


class Provider(RecordTuple, tuple[str, str, int, int, "frozenset[bytes]", "tuple[bytes, ...]",
                                  "frozenset[int]"]):
    """One provider (``verbs_device_ops``) as registered by its library, with its match
    table in the form matching uses (:func:`match_entries` gives the entries)."""

    __slots__ = ()
    _fields = ("name", "library", "min_abi", "max_abi", "pci_prefixes", "patterns",
               "driver_ids")

    def __new__(cls, name: str, library: str, min_abi: int, max_abi: int,
                pci_prefixes: frozenset[bytes], patterns: tuple[bytes, ...],
                driver_ids: frozenset[int]) -> Provider:
        return tuple.__new__(cls, (name, library, min_abi, max_abi, pci_prefixes, patterns,
                                   driver_ids))

    @property
    def name(self) -> str:
        """The ops name, as libibverbs' messages print it (e.g. "pvrdma")."""
        return self[0]

    @property
    def library(self) -> str:
        """The library/driver name (e.g. "vmw_pvrdma" for libvmw_pvrdma-rdmav34.so)."""
        return self[1]

    @property
    def min_abi(self) -> int:
        return self[2]

    @property
    def max_abi(self) -> int:
        return self[3]

    @property
    def pci_prefixes(self) -> frozenset[bytes]:
        """``b"pci:v%08Xd%08Xsv"`` for each PCI entry."""
        return self[4]

    @property
    def patterns(self) -> tuple[bytes, ...]:
        """The MODALIAS and NAME entries: fnmatch patterns."""
        return self[5]

    @property
    def driver_ids(self) -> frozenset[int]:
        return self[6]


def _checked_pattern(pattern: bytes) -> bytes:
    """A MODALIAS/NAME pattern :func:`sysverbs.ground.sysfs_read.fnmatch` can match exactly."""
    if b"[" in pattern or b"\\" in pattern or b"\0" in pattern:
        raise ValueError(f"unsupported fnmatch pattern {pattern!r}")
    return pattern


_DATA_DIR = os.path.dirname(os.path.abspath(__file__))
_JSON_PATH = os.path.join(_DATA_DIR, "providers.json")
_loaded: dict[str, Any] = {}

if TYPE_CHECKING:
    #: One provider of a release, as ``_data.py`` stores it: the fields of
    #: :class:`Provider`, with sorted tuples for the sets.
    TableRow = tuple[str, str, int, int, tuple[bytes, ...], tuple[bytes, ...], tuple[int, ...]]


def _table_rows(data: dict[str, Any], release: int) -> list[TableRow]:
    """The providers of ``release`` (the pure derivation from the data)."""
    rows: list[TableRow] = []
    for raw in data["providers"]:
        if not _alive(raw, release):
            continue
        min_abi, max_abi = int(raw["min_abi"]), int(raw["max_abi"])
        for first, lo, hi in raw.get("abi_history", []):
            if int(first) <= release:
                min_abi, max_abi = int(lo), int(hi)
        prefixes: list[bytes] = []
        patterns: list[bytes] = []
        driver_ids: list[int] = []
        for e in raw["match"]:
            if not _alive(e, release):
                continue
            kind = e["kind"]
            if kind == "pci":
                prefixes.append(b"pci:v%08Xd%08Xsv" % (int(e["vendor"], 16), int(e["device"], 16)))
            elif kind == "driver_id":
                driver_ids.append(int(e["value"]))
            elif kind in ("modalias", "name"):
                patterns.append(_checked_pattern(e["pattern"].encode()))
            else:
                raise ValueError(f"unknown match kind {kind!r}")
        rows.append((raw["name"], raw["library"], min_abi, max_abi, tuple(sorted(prefixes)),
                     tuple(patterns), tuple(sorted(driver_ids))))
    return rows


def _span_of(data: dict[str, Any]) -> tuple[int, int]:
    return min(int(p["since"]) for p in data["providers"]), int(data["latest"])


def _read_file(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _data() -> dict[str, Any]:
    """The whole provider data, parsed from providers.json (once)."""
    data: Optional[dict[str, Any]] = _loaded.get("data")
    if data is None:
        import json

        data = _loaded["data"] = json.loads(_read_file(_JSON_PATH))
    assert data is not None
    return data


def render_data_module(data: Optional[dict[str, Any]] = None) -> str:
    """The text of ``_data.py`` for ``data`` (default: providers.json)."""
    data = _data() if data is None else data
    first, last = _span_of(data)
    rows: list[TableRow] = []  # every distinct provider row, once
    tables: list[tuple[int, ...]] = []  # each distinct table: indexes into rows
    table_of: dict[int, int] = {}
    for release in range(first, last + 1):
        table = []
        for row in _table_rows(data, release):
            if row not in rows:
                rows.append(row)
            table.append(rows.index(row))
        if tuple(table) not in tables:
            tables.append(tuple(table))
        table_of[release] = tables.index(tuple(table))
    lines = [
        '"""Provider tables derived from providers.json, one per rdma-core release.',
        "",
        "Written by tools/write_provider_data.py (sysverbs.providers.table.render_data_module);",
        'do not edit: tests/test_provider_data.py checks that it is current."""',
        "",
        f"SPAN = {(first, last)!r}",
        f"PABI = {tuple(tuple(int(v) for v in pair) for pair in data['pabi'])!r}",
        "#: release -> its table in TABLES",
        f"TABLE_OF = {table_of!r}",
        "#: each table: its providers, as indexes into ROWS, in registration order",
        "TABLES = (",
        *(f"    {table!r}," for table in tables),
        ")",
        "#: (name, library, min_abi, max_abi, PCI prefixes, patterns, driver ids)",
        "ROWS = (",
        *(f"    {row!r}," for row in rows),
        ")",
    ]
    return "\n".join(lines) + "\n"


def _head() -> tuple[tuple[int, int], tuple[tuple[int, int], ...]]:
    """The release span and the PABI list."""
    from . import _data as generated

    return generated.SPAN, generated.PABI


def latest_release() -> int:
    """The newest rdma-core release the data covers."""
    return _span()[1]


def known_releases() -> list[int]:
    """Releases the data can derive a table for (the oldest ``since`` up to latest)."""
    first, last = _span()
    return list(range(first, last + 1))


def _span() -> tuple[int, int]:
    """The first and last release of :func:`known_releases` (computed once)."""
    return _head()[0]


def resolve_release(release: Release) -> int:
    """``"44"``, ``44``, ``"latest"`` or None (the installed release, else latest)."""
    if release is None:
        found = installed_release()
        return min(found, latest_release()) if found is not None else latest_release()
    if isinstance(release, str):
        text = release.strip().lower()
        if text == "latest":
            return latest_release()
        if text.startswith("v"):
            text = text[1:]
        text = text.split(".")[0]
        if not text.isdigit():
            raise UsageError(f"rdma_core must be a release number or 'latest', not {release!r}")
        release = int(text)
    if isinstance(release, bool) or not isinstance(release, int):
        raise WrongTypeError(f"rdma_core must be an int or str, not {type(release).__name__}")
    first, last = _span()
    if release < first or release > last:
        raise UsageError(
            f"rdma_core={release}: the provider data covers releases "
            f"{first} to {last} ('latest')"
        )
    return release


def pabi_for(release: int) -> int:
    """The provider ABI suffix (``lib<name>-rdmav<PABI>.so``) of a release."""
    pabi = 0
    for first, value in _head()[1]:
        if int(first) <= release:
            pabi = int(value)
    return pabi


def _entry(raw: dict[str, Any]) -> MatchEntry:
    kind = raw["kind"]
    if kind == "pci":
        return MatchEntry(kind, vendor=int(raw["vendor"], 16), device=int(raw["device"], 16))
    if kind in ("modalias", "name"):
        return MatchEntry(kind, pattern=raw["pattern"].encode())
    if kind == "driver_id":
        return MatchEntry(kind, driver_id=int(raw["value"]), driver_id_name=raw["id"])
    raise ValueError(f"unknown match kind {kind!r}")


def match_entries(name: str, release: int) -> tuple[MatchEntry, ...]:
    """The match table of provider ``name`` in ``release``, entry by entry (empty when
    the release has no such provider)."""
    for raw in _data()["providers"]:
        if raw["name"] == name and _alive(raw, release):
            return tuple(_entry(e) for e in raw["match"] if _alive(e, release))
    return ()


def _alive(raw: dict[str, Any], release: int) -> bool:
    until = raw.get("until")
    return int(raw["since"]) <= release and (until is None or release < int(until))


_tables: dict[int, tuple[Provider, ...]] = {}


def provider_table(release: int) -> tuple[Provider, ...]:
    """Every provider of ``release``, in the default (Debian) registration order."""
    table = _tables.get(release)
    if table is None:
        table = _tables[release] = _derive_table(release)
    return table


def _derive_table(release: int) -> tuple[Provider, ...]:
    from . import _data as generated

    index = generated.TABLE_OF.get(release)
    if index is None:
        rows: Sequence[TableRow] = _table_rows(_data(), release)
    else:
        every = generated.ROWS
        rows = [every[i] for i in generated.TABLES[index]]
    return tuple(
        Provider(name, library, min_abi, max_abi, frozenset(prefixes), patterns,
                 frozenset(driver_ids))
        for name, library, min_abi, max_abi, prefixes, patterns, driver_ids in rows
    )


def lib_dirs() -> list[str]:
    """The library directories searched for provider libraries (the multiarch one
    first)."""
    dirs = []
    multiarch = getattr(sys.implementation, "_multiarch", None)
    if not multiarch:
        import sysconfig

        multiarch = sysconfig.get_config_var("MULTIARCH")
    if not multiarch:
        machine = os.uname().machine
        multiarch = f"{machine}-linux-gnu"
    for base in ("/usr/lib", "/lib"):
        dirs.append(f"{base}/{multiarch}")
    dirs += ["/usr/lib64", "/lib64", "/usr/lib", "/lib"]
    return dirs


_LIB_PREFIX = "libibverbs.so.1."


def libibverbs_library() -> Optional[str]:
    """Path of the installed ``libibverbs.so.1.<x>.<release>.<y>``, if there is one: in
    the first library directory that has one, the file its ``libibverbs.so.1`` link
    names (what the dynamic linker loads), else the last such file in sorted order."""
    if "lib" not in _loaded:
        found: Optional[str] = None
        for d in lib_dirs():
            try:  # one readlink instead of listing a directory of thousands of files
                target = os.path.join(d, os.readlink(os.path.join(d, "libibverbs.so.1")))
                name = os.path.basename(target)
                if (name.startswith(_LIB_PREFIX) and "." in name[len(_LIB_PREFIX):]
                        and os.path.isfile(target)):
                    found = target
                    break
            except OSError:
                pass
            try:
                names = os.listdir(d)
            except OSError:
                continue
            # glob("libibverbs.so.1.*.*"): the prefix, then anything with a dot in it.
            hits = [n for n in names if n.startswith(_LIB_PREFIX) and "." in n[len(_LIB_PREFIX):]]
            if hits:
                found = os.path.join(d, max(hits))
                break
        _loaded["lib"] = found
    lib: Optional[str] = _loaded["lib"]
    return lib


def installed_release() -> Optional[int]:
    """The rdma-core release of the installed libibverbs (its file name carries it)."""
    lib = libibverbs_library()
    if lib is None:
        return None
    # libibverbs.so.1.<x>.<release>[.<y>], each a decimal number.
    parts = os.path.basename(lib)[len(_LIB_PREFIX):].split(".")
    if len(parts) in (2, 3) and all(p.isascii() and p.isdigit() for p in parts):
        return int(parts[1])
    return None


def provider_dir() -> str:
    """``VERBS_PROVIDER_DIR``: where the provider libraries live."""
    lib = libibverbs_library()
    if lib is not None:
        return os.path.join(os.path.dirname(lib), "libibverbs")
    return os.path.join(lib_dirs()[0], "libibverbs")

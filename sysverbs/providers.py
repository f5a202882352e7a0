"""Provider match tables: loaded from ``data/providers.json``, derived per rdma-core release.

The data file records, for every rdma-core provider and every entry of its match
table, the first rdma-core release that shipped it (``since``) and, for entries
that were dropped, the first release without it (``until``).  The table of any
release is therefore a pure function of the data: :func:`provider_table`.

``data/providers.marshal`` holds the same data in :mod:`marshal` form, and each
release's table already derived (marshalled on its own), only because loading and
deriving cost more than a whole first call at 64 devices (``import json`` alone
imports ``re``).  It carries a copy of the ``providers.json`` it was made from and
is used only while that copy is byte for byte the file beside it; otherwise the JSON
is parsed and the tables derived from it.  Regenerate it with
``tools/write_provider_cache.py`` (a test checks it is current and that its tables
are the derived ones).
"""

from __future__ import annotations

import os
import sys

from .errors import UsageError, WrongTypeError
from .typing_light import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, Union

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


class MatchEntry(NamedTuple):
    """One ``verbs_match_ent``."""

    kind: str  # "pci", "modalias", "name" or "driver_id"
    vendor: int = 0
    device: int = 0
    pattern: bytes = b""
    driver_id: int = 0
    driver_id_name: str = ""


class Provider(NamedTuple):
    """One provider (``verbs_device_ops``) as registered by its library, with its match
    table in the form matching uses (:func:`match_entries` gives the entries)."""

    name: str  # the ops name, as libibverbs' messages print it (e.g. "pvrdma")
    library: str  # the library/driver name (e.g. "vmw_pvrdma" for libvmw_pvrdma-rdmav34.so)
    min_abi: int
    max_abi: int
    pci_prefixes: frozenset[bytes]  # b"pci:v%08Xd%08Xsv" for each PCI entry
    patterns: tuple[bytes, ...]  # MODALIAS and NAME entries: fnmatch patterns
    driver_ids: frozenset[int]


def _checked_pattern(pattern: bytes) -> bytes:
    """A MODALIAS/NAME pattern :func:`sysverbs.cparse.fnmatch` can match exactly."""
    if b"[" in pattern or b"\\" in pattern or b"\0" in pattern:
        raise ValueError(f"unsupported fnmatch pattern {pattern!r}")
    return pattern


_DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
_JSON_PATH = os.path.join(_DATA_DIR, "providers.json")
_CACHE_PATH = os.path.join(_DATA_DIR, "providers.marshal")
_CACHE_TAG = "sysverbs-providers-cache-2"
_loaded: dict[str, Any] = {}

if TYPE_CHECKING:
    #: One provider of a release, as the cache stores it: the fields of :class:`Provider`,
    #: with lists for the sets.
    TableRow = tuple[str, str, int, int, list[bytes], tuple[bytes, ...], list[int]]


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
        rows.append((raw["name"], raw["library"], min_abi, max_abi, prefixes,
                     tuple(patterns), driver_ids))
    return rows


def _span_of(data: dict[str, Any]) -> tuple[int, int]:
    return min(int(p["since"]) for p in data["providers"]), int(data["latest"])


class _Cache(NamedTuple):
    """A current ``providers.marshal``: its head, and where each part lies in the file."""

    head: dict[str, Any]  # "span": (first, last release), "pabi": the PABI list
    tables: dict[int, int]  # release -> the part that holds its marshalled table
    spans: list[tuple[int, int]]  # (offset, size) of each part


def _cache_blob(raw: bytes, data: dict[str, Any]) -> bytes:
    """The cache of one providers.json (``raw``, parsed: ``data``).

    Eight ASCII digits give the length of the marshalled head that follows: the tag,
    the release span and PABI list, which part holds each release's table, and the
    size of each part.  The parts follow: ``raw`` itself (the cache is used only while
    providers.json is byte for byte the same), the marshalled table of each release
    (each on its own, so that a first call loads just one; releases with the same
    table share a part), and last the whole data, marshalled."""
    import marshal

    first, last = _span_of(data)
    parts = [raw]
    part_of: dict[bytes, int] = {}
    tables: dict[int, int] = {}
    for release in range(first, last + 1):
        blob = marshal.dumps(_table_rows(data, release))
        if blob not in part_of:
            part_of[blob] = len(parts)
            parts.append(blob)
        tables[release] = part_of[blob]
    parts.append(marshal.dumps(data))
    head = marshal.dumps((_CACHE_TAG, {"span": (first, last), "pabi": data["pabi"]}, tables,
                          [len(part) for part in parts]))
    return b"%08d" % len(head) + head + b"".join(parts)


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


def _read_part(spans: list[tuple[int, int]], part: int) -> bytes:
    """Part ``part`` of the cache file, read on its own."""
    offset, size = spans[part]
    fd = os.open(_CACHE_PATH, os.O_RDONLY | os.O_CLOEXEC)
    try:
        blob = os.pread(fd, size, offset)
    finally:
        os.close(fd)
    if len(blob) != size:
        raise ValueError("providers.marshal is cut short")
    return blob


def _cache() -> Optional[_Cache]:
    """The cache when it was made from the providers.json beside it, else None (looked
    at once).  Reads its head and its copy of providers.json, not the tables."""
    if "cache" not in _loaded:
        import marshal

        found = None
        try:
            fd = os.open(_CACHE_PATH, os.O_RDONLY | os.O_CLOEXEC)
            try:
                start = os.pread(fd, 4096, 0)  # the head (a larger read costs more)
                end = 8 + int(start[:8])
                if end > len(start):
                    start = os.pread(fd, end, 0)
                tag, head, tables, sizes = marshal.loads(start[8:end])
                spans = []
                for size in sizes:
                    spans.append((end, size))
                    end += size
                offset, size = spans[0]
                copy = (start[offset:offset + size] if offset + size <= len(start)
                        else os.pread(fd, size, offset))
            finally:
                os.close(fd)
            if tag == _CACHE_TAG and len(copy) == size:
                fd = os.open(_JSON_PATH, os.O_RDONLY | os.O_CLOEXEC)
                try:  # one byte more than the copy: a longer file differs too
                    same = os.read(fd, size + 1) == copy
                finally:
                    os.close(fd)
                if same:
                    found = _Cache(head, tables, spans)
        except (OSError, ValueError, EOFError, TypeError):
            pass
        _loaded["cache"] = found
    cache: Optional[_Cache] = _loaded["cache"]
    return cache


def _cached(part: Callable[[_Cache], Optional[int]]) -> Any:
    """The unmarshalled cache part that ``part`` picks, or None (no current cache, no
    such part, or it cannot be read)."""
    import marshal

    cache = _cache()
    n = part(cache) if cache is not None else None
    if cache is None or n is None:
        return None
    try:
        return marshal.loads(_read_part(cache.spans, n))
    except (OSError, ValueError, EOFError, TypeError, IndexError):
        return None


def _data() -> dict[str, Any]:
    """The whole provider data: from the cache when it is current, else providers.json."""
    data: Optional[dict[str, Any]] = _loaded.get("data")
    if data is None:
        data = _cached(lambda cache: len(cache.spans) - 1)
        if data is None:  # no cache, or one made from another providers.json
            import json

            data = json.loads(_read_file(_JSON_PATH))
        _loaded["data"] = data
    assert data is not None
    return data


def _head() -> dict[str, Any]:
    """The release span and the PABI list, without loading the whole data if possible."""
    head: Optional[dict[str, Any]] = _loaded.get("head")
    if head is None:
        cache = _cache()
        if cache is not None:
            head = cache.head
        else:
            data = _data()
            head = {"span": _span_of(data), "pabi": data["pabi"]}
        _loaded["head"] = head
    return head


def write_cache() -> str:
    """Rewrite ``data/providers.marshal`` from ``data/providers.json``; its path."""
    import json

    with open(_JSON_PATH, "rb") as f:
        raw = f.read()
    with open(_CACHE_PATH, "wb") as f:
        f.write(_cache_blob(raw, json.loads(raw)))
    return _CACHE_PATH


def latest_release() -> int:
    """The newest rdma-core release the data covers."""
    return _span()[1]


def known_releases() -> list[int]:
    """Releases the data can derive a table for (the oldest ``since`` up to latest)."""
    first, last = _span()
    return list(range(first, last + 1))


def _span() -> tuple[int, int]:
    """The first and last release of :func:`known_releases` (computed once)."""
    first, last = _head()["span"]
    return int(first), int(last)


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
    for first, value in _head()["pabi"]:
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
    rows: Optional[list[TableRow]] = _cached(lambda cache: cache.tables.get(release))
    if rows is None:
        rows = _table_rows(_data(), release)
    return tuple(
        Provider(name, library, min_abi, max_abi, frozenset(prefixes), patterns,
                 frozenset(driver_ids))
        for name, library, min_abi, max_abi, prefixes, patterns, driver_ids in rows
    )


def _lib_dirs() -> list[str]:
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
        for d in _lib_dirs():
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
    return os.path.join(_lib_dirs()[0], "libibverbs")

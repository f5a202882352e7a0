"""Provider match tables: loaded from ``data/providers.json``, derived per rdma-core release.

The data file records, for every rdma-core provider and every entry of its match
table, the first rdma-core release that shipped it (``since``) and, for entries
that were dropped, the first release without it (``until``).  The table of any
release is therefore a pure function of the data: :func:`provider_table`.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union

if TYPE_CHECKING:
    import re

__all__ = [
    "Provider",
    "MatchEntry",
    "provider_table",
    "known_releases",
    "latest_release",
    "pabi_for",
    "resolve_release",
    "installed_release",
    "libibverbs_library",
    "provider_dir",
]

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
    """One provider (``verbs_device_ops``) as registered by its library."""

    name: str  # the ops name, as libibverbs' messages print it (e.g. "pvrdma")
    library: str  # the library/driver name (e.g. "vmw_pvrdma" for libvmw_pvrdma-rdmav34.so)
    min_abi: int
    max_abi: int
    entries: tuple[MatchEntry, ...]
    pci_prefixes: frozenset[bytes]  # b"pci:v%08Xd%08Xsv" for each PCI entry
    patterns: tuple[re.Pattern[bytes], ...]  # compiled MODALIAS and NAME entries
    driver_ids: frozenset[int]


def _translate(pattern: bytes) -> re.Pattern[bytes]:
    """fnmatch(pattern, s, 0) for patterns made of literals, ``*`` and ``?``."""
    import re

    out = []
    for ch in pattern:
        if ch == 0x2A:
            out.append(b".*")
        elif ch == 0x3F:
            out.append(b".")
        elif ch in b"[\\":
            raise ValueError(f"unsupported fnmatch pattern {pattern!r}")
        else:
            out.append(re.escape(bytes([ch])))
    return re.compile(b"".join(out), re.DOTALL)


@functools.lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    import json

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "providers.json")
    with open(path, encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def latest_release() -> int:
    """The newest rdma-core release the data covers."""
    return int(_data()["latest"])


def known_releases() -> list[int]:
    """Releases the data can derive a table for (the oldest ``since`` up to latest)."""
    first = min(int(p["since"]) for p in _data()["providers"])
    return list(range(first, latest_release() + 1))


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
            raise ValueError(f"rdma_core must be a release number or 'latest', not {release!r}")
        release = int(text)
    if isinstance(release, bool) or not isinstance(release, int):
        raise TypeError(f"rdma_core must be an int or str, not {type(release).__name__}")
    releases = known_releases()
    if release < releases[0] or release > releases[-1]:
        raise ValueError(
            f"rdma_core={release}: the provider data covers releases "
            f"{releases[0]} to {releases[-1]} ('latest')"
        )
    return release


def pabi_for(release: int) -> int:
    """The provider ABI suffix (``lib<name>-rdmav<PABI>.so``) of a release."""
    pabi = 0
    for first, value in _data()["pabi"]:
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


def _alive(raw: dict[str, Any], release: int) -> bool:
    until = raw.get("until")
    return int(raw["since"]) <= release and (until is None or release < int(until))


@functools.cache
def provider_table(release: int) -> tuple[Provider, ...]:
    """Every provider of ``release``, in the default (Debian) registration order."""
    result = []
    for raw in _data()["providers"]:
        if not _alive(raw, release):
            continue
        min_abi, max_abi = int(raw["min_abi"]), int(raw["max_abi"])
        for first, lo, hi in raw.get("abi_history", []):
            if int(first) <= release:
                min_abi, max_abi = int(lo), int(hi)
        entries = tuple(_entry(e) for e in raw["match"] if _alive(e, release))
        result.append(
            Provider(
                name=raw["name"],
                library=raw["library"],
                min_abi=min_abi,
                max_abi=max_abi,
                entries=entries,
                pci_prefixes=frozenset(
                    b"pci:v%08Xd%08Xsv" % (e.vendor, e.device) for e in entries if e.kind == "pci"
                ),
                patterns=tuple(
                    _translate(e.pattern) for e in entries if e.kind in ("modalias", "name")
                ),
                driver_ids=frozenset(e.driver_id for e in entries if e.kind == "driver_id"),
            )
        )
    return tuple(result)


def _lib_dirs() -> list[str]:
    import sysconfig

    dirs = []
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if not multiarch:
        machine = os.uname().machine
        multiarch = f"{machine}-linux-gnu"
    for base in ("/usr/lib", "/lib"):
        dirs.append(f"{base}/{multiarch}")
    dirs += ["/usr/lib64", "/lib64", "/usr/lib", "/lib"]
    return dirs


@functools.lru_cache(maxsize=1)
def libibverbs_library() -> Optional[str]:
    """Path of the installed ``libibverbs.so.1.<x>.<release>.<y>``, if there is one."""
    import glob

    for d in _lib_dirs():
        found = sorted(glob.glob(os.path.join(d, "libibverbs.so.1.*.*")))
        if found:
            return found[-1]
    return None


def installed_release() -> Optional[int]:
    """The rdma-core release of the installed libibverbs (its file name carries it)."""
    lib = libibverbs_library()
    if lib is None:
        return None
    import re

    m = re.search(r"libibverbs\.so\.1\.\d+\.(\d+)(?:\.\d+)?$", lib)
    return int(m.group(1)) if m else None


def provider_dir() -> str:
    """``VERBS_PROVIDER_DIR``: where the provider libraries live."""
    lib = libibverbs_library()
    if lib is not None:
        return os.path.join(os.path.dirname(lib), "libibverbs")
    return os.path.join(_lib_dirs()[0], "libibverbs")

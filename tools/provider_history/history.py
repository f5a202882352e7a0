"""Per provider, across the releases: the releases it shipped in, its ABI ranges and
every entry's runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .extract import Entry, ReleaseSnap

# ---------------------------------------------------------------------------
# history


@dataclass
class EntryHistory:
    entry: Entry
    present: list[int]  # releases containing it


@dataclass
class ProviderHistory:
    library: str
    name: str
    releases: list[int]
    abi: dict[int, tuple[Optional[int], Optional[int]]]
    entries: list[EntryHistory]
    problems: list[str]


Instance = tuple[Entry, int]  # an entry and its run number (0, 1, ... if re-added)


def _merge_order(merged: list[Instance], table: list[Instance]) -> list[Instance]:
    """Fold one more (newer) table into the running order: the newer table's order wins
    for what it contains, and instances it lacks stay right after the instance that
    preceded them."""
    new = list(table)
    members = set(table)
    for idx, inst in enumerate(merged):
        if inst in members:
            continue
        pos = 0
        for k in range(idx - 1, -1, -1):
            if merged[k] in new:
                pos = new.index(merged[k]) + 1
                break
        new.insert(pos, inst)
    return new


def build_history(snaps: list[ReleaseSnap]) -> dict[str, ProviderHistory]:
    """Per provider library: the releases it shipped in, its ABI ranges, and every entry
    run (an entry that vanished and came back later gets a second run)."""
    libs: dict[str, ProviderHistory] = {}
    for snap in snaps:
        for lib, p in snap.providers.items():
            h = libs.get(lib)
            if h is None:
                h = libs[lib] = ProviderHistory(lib, p.name or lib, [], {}, [], [])
            h.releases.append(snap.release)
            if p.name:
                h.name = p.name
            h.abi[snap.release] = (p.min_abi, p.max_abi)
            if len(set(p.entries)) != len(p.entries):
                h.problems.append(f"{lib}: duplicate entries in release {snap.release}")
    for lib, h in libs.items():
        merged: list[Instance] = []
        alive: dict[Entry, Instance] = {}
        runs: dict[Entry, int] = {}
        present: dict[Instance, list[int]] = {}
        for snap in snaps:
            if lib not in snap.providers:
                continue
            now: dict[Entry, Instance] = {}
            table: list[Instance] = []
            for e in snap.providers[lib].entries:
                if e in now:
                    continue
                inst = alive.get(e)
                if inst is None:
                    inst = (e, runs.get(e, 0))
                    runs[e] = inst[1] + 1
                now[e] = inst
                table.append(inst)
                present.setdefault(inst, []).append(snap.release)
            alive = now
            merged = _merge_order(merged, table)
        for inst in merged:
            h.entries.append(EntryHistory(inst[0], present[inst]))
            if inst[1] > 0:
                h.problems.append(f"{lib}: {inst[0].kind} {inst[0].key} came back in "
                                  f"{present[inst][0]} after a gap; it has {inst[1] + 1} runs")
        if h.releases != [r for r in (s.release for s in snaps) if h.releases[0] <= r
                          <= h.releases[-1]]:
            h.problems.append(f"{lib}: provider not present in a contiguous run of releases")
    return libs


def abi_rows(h: ProviderHistory) -> list[list[int]]:
    """[release, min, max] rows whenever the range changes.

    Releases before rdma-core 16 checked the ABI in each provider's driver_init; they
    get the first range declared in a verbs_device_ops (the conversion kept the checks).
    """
    rows: list[list[int]] = []
    last: Optional[tuple[int, int]] = None
    known = [h.abi[r] for r in h.releases if None not in h.abi[r]]
    for r in h.releases:
        lo, hi = h.abi[r]
        if lo is None or hi is None:
            if not known:
                continue
            lo, hi = known[0]
            assert lo is not None and hi is not None
        if (lo, hi) != last:
            rows.append([r, lo, hi])
            last = (lo, hi)
    return rows


def pabi_rows(snaps: list[ReleaseSnap]) -> list[list[int]]:
    rows: list[list[int]] = []
    for s in snaps:
        if not rows or rows[-1][1] != s.pabi:
            rows.append([s.release, s.pabi])
    return rows

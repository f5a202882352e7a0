"""The data file (sysverbs/providers/providers.json): derived from the release
snapshots, compared with the committed one, and written out."""

from __future__ import annotations

import json
from typing import Any

from .extract import Entry, ReleaseSnap, entry_from_json
from .history import Instance, abi_rows, build_history, pabi_rows

# ---------------------------------------------------------------------------
# data file

DEFAULT_COMMENT = (
    "libibverbs provider match tables with per-entry history: since/until = first rdma-core "
    "major release whose tag (vN.0/vN; v12-rc3 for 12, the first tagged release) has/lacks the "
    "entry; latest = HEAD 691953d8 (65.0). Before v16 only the static PCI tables count. Read "
    "from linux-rdma/rdma-core git by tools/check_provider_history.py; releases 44 and latest "
    "reproduce shared/spec/providers-{v44,latest}.json"
)


def derived_data(snaps: list[ReleaseSnap], order: list[str], comment: str) -> dict[str, Any]:
    """Build a whole data file from the snapshots; ``order`` lists provider names."""
    hist = build_history(snaps)
    latest = snaps[-1]
    # enum spellings: the first enum name for a value, overridden by the spelling the
    # provider's own source used last (aliases: RDMA_DRIVER_IRDMA = RDMA_DRIVER_I40IW)
    enum_names: dict[int, str] = {}
    for snap in snaps:
        for k, v in snap.driver_ids.items():
            enum_names.setdefault(v, k)
    by_name = {h.name: h for h in hist.values() if latest.release in h.releases}
    providers: list[dict[str, Any]] = []
    for name in order:
        h = by_name[name]
        id_names = dict(enum_names)
        for snap in snaps:
            if h.library in snap.providers:
                id_names.update(snap.providers[h.library].id_names)
        rows = abi_rows(h)
        lo, hi = h.abi[latest.release]
        p: dict[str, Any] = {"name": h.name, "library": h.library, "min_abi": lo,
                             "max_abi": hi, "since": h.releases[0]}
        if len(rows) > 1:
            p["abi_history"] = rows
        match: list[dict[str, Any]] = []
        for eh in h.entries:
            m = eh.entry.to_json(id_names)
            m["since"] = eh.present[0]
            if eh.present[-1] != latest.release:
                later = [r for r in h.releases if r > eh.present[-1]]
                m["until"] = later[0]
            match.append(m)
        p["match"] = match
        providers.append(p)
    return {"format": 1, "comment": comment, "latest": latest.release,
            "pabi": pabi_rows(snaps), "providers": providers}


def _instances(match: list[dict[str, Any]]) -> list[tuple[Instance, dict[str, Any]]]:
    """Pair each match entry with its run number, counted in order of ``since``."""
    seen: dict[Entry, int] = {}
    out: list[tuple[Instance, dict[str, Any]]] = []
    for m in sorted(match, key=lambda m: int(m.get("since", 0))):
        e = entry_from_json(m)
        out.append(((e, seen.get(e, 0)), m))
        seen[e] = seen.get(e, 0) + 1
    index = {id(m): inst for inst, m in out}
    return [(index[id(m)], m) for m in match]


def compare(data: dict[str, Any], derived: dict[str, Any]) -> list[str]:
    diffs: list[str] = []
    for key in ("latest", "pabi"):
        if data.get(key) != derived.get(key):
            diffs.append(f"{key}: data {data.get(key)!r} != git {derived.get(key)!r}")
    have = {p["name"]: p for p in data.get("providers", [])}
    want = {p["name"]: p for p in derived["providers"]}
    for name in have.keys() - want.keys():
        diffs.append(f"provider {name}: in data file, not found in git")
    for name in want.keys() - have.keys():
        diffs.append(f"provider {name}: in git, missing from data file")
    for name, w in want.items():
        d = have.get(name)
        if d is None:
            continue
        for key in ("library", "min_abi", "max_abi", "since", "abi_history"):
            if d.get(key) != w.get(key):
                diffs.append(f"{name}.{key}: data {d.get(key)!r} != git {w.get(key)!r}")
        dm = _instances(d["match"])
        wm = _instances(w["match"])
        if [i for i, _ in dm] != [i for i, _ in wm]:
            diffs.append(f"{name}: entry order/set differs:\n"
                         f"  data {[i[0].key for i, _ in dm]}\n"
                         f"  git  {[i[0].key for i, _ in wm]}")
        wmap = dict(wm)
        for inst, m in dm:
            g = wmap.get(inst)
            if g is None:
                diffs.append(f"{name} {inst[0].kind} {inst[0].key}: not found in git")
                continue
            for key in ("since", "until", "id", "value", "pattern", "prefix"):
                if m.get(key) != g.get(key):
                    diffs.append(f"{name} {inst[0].kind} {inst[0].key}: {key} data "
                                 f"{m.get(key)!r} != git {g.get(key)!r}")
        for inst, _ in wm:
            if inst not in dict(dm):
                diffs.append(f"{name} {inst[0].kind} {inst[0].key}: missing from data file")
    return diffs


def dump_data(data: dict[str, Any]) -> str:
    """The data file layout: one match entry per line."""
    lines = ["{"]
    lines.append(f'  "format": {json.dumps(data["format"])},')
    lines.append(f'  "comment": {json.dumps(data["comment"])},')
    lines.append(f'  "latest": {json.dumps(data["latest"])},')
    lines.append(f'  "pabi": {json.dumps(data["pabi"])},')
    lines.append('  "providers": [')
    for n, p in enumerate(data["providers"]):
        lines.append("    {")
        for key in ("name", "library", "min_abi", "max_abi", "since", "abi_history"):
            if key in p:
                lines.append(f'      {json.dumps(key)}: {json.dumps(p[key])},')
        lines.append('      "match": [')
        for k, m in enumerate(p["match"]):
            sep = "," if k + 1 < len(p["match"]) else ""
            lines.append(f"        {json.dumps(m)}{sep}")
        lines.append("      ]")
        lines.append("    }" + ("," if n + 1 < len(data["providers"]) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines)

#!/usr/bin/env python3
"""Re-derive ``sysverbs/providers/static.json`` (static linking) from rdma-core's git.

Usage::

    tools/check_static_providers.py /path/to/rdma-core(.git) [--data FILE] [--head REF]
    tools/check_static_providers.py /path/to/rdma-core --emit > static.json

For every rdma-core major release (the refs of tools/check_provider_history.py) that has
``libibverbs/static_driver.c`` (a static libibverbs: rdma-core 21 and later) it reads
straight out of the git object store:

* the names ``RDMA_STATIC_PROVIDERS`` accepts: the ``verbs_provider_NAME`` symbols
  ``libibverbs/verbs.h`` declares (``all`` and ``none`` aside);
* the number of names the define takes: the named parameters of verbs.h's
  ``_RDMA_STATIC_PREFIX_`` macro (names after them fall into its ``...`` and are dropped);
* the link order: the providers in the order of the top-level CMakeLists.txt's
  ``add_subdirectory(providers/NAME)``, which is the order of ``RDMA_PROVIDER_LIST``,
  so of the archives on ``pkg-config --static --libs libibverbs``; each linked
  provider registers itself from a constructor, in that order.

It prints every difference from the data file (exit status 1 if any).  Nothing here
uses rdma-core code; it reads names and counts out of it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from provider_history.git import Git, release_refs  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "sysverbs" / "providers" / "static.json"
COMMENT = (
    "Static linking (RDMA_STATIC_PROVIDERS) per rdma-core release, read from "
    "linux-rdma/rdma-core git by tools/check_static_providers.py: since = the first "
    "release with libibverbs/static_driver.c; slots = [first release, how many names "
    "the define takes (verbs.h _RDMA_STATIC_PREFIX_)]; link_order = the providers in "
    "CMakeLists.txt's add_subdirectory order (the archives' order on pkg-config's line), "
    "each with the first release that has it and the first without it."
)

_DECL = re.compile(r"extern\s+const\s+struct\s+verbs_device_ops\s+verbs_provider_(\w+)\s*;")
_PREFIX = re.compile(r"#define\s+_RDMA_STATIC_PREFIX_\(([^)]*)\)")
_SUBDIR = re.compile(r"^add_subdirectory\(providers/(\w+)\)", re.M)


def read_release(git: Git, ref: str) -> Optional[dict[str, Any]]:
    """The static-link facts of one release, or None before static linking."""
    if git.file(ref, "libibverbs/static_driver.c") is None:
        return None
    header = git.file(ref, "libibverbs/verbs.h") or ""
    declared = [n for n in _DECL.findall(header) if n not in ("all", "none")]
    m = _PREFIX.search(header.replace("\\\n", " "))
    if m is None:
        raise SystemExit(f"{ref}: no _RDMA_STATIC_PREFIX_ in libibverbs/verbs.h")
    slots = sum(1 for p in m.group(1).split(",") if p.strip() not in ("", "..."))
    order = _SUBDIR.findall(git.file(ref, "CMakeLists.txt") or "")
    if sorted(order) != sorted(declared):
        raise SystemExit(f"{ref}: verbs.h declares {sorted(declared)} but CMake builds "
                         f"{sorted(order)}")
    return {"slots": slots, "order": order}


def derive(git: Git, head: Optional[str]) -> dict[str, Any]:
    releases: dict[int, dict[str, Any]] = {}
    for release, ref in release_refs(git, head).items():
        facts = read_release(git, ref)
        if facts is not None:
            releases[release] = facts
    first, last = min(releases), max(releases)
    slots: list[list[int]] = []
    merged: list[str] = []
    for release in range(first, last + 1):
        facts = releases.get(release)
        if facts is None:
            raise SystemExit(f"no ref for release {release}")
        if not slots or slots[-1][1] != facts["slots"]:
            slots.append([release, facts["slots"]])
        at = 0
        for name in facts["order"]:
            if name in merged:
                if merged.index(name) < at:
                    raise SystemExit(f"release {release}: {name} moved in the link order")
                at = merged.index(name) + 1
            else:
                merged.insert(at, name)
                at += 1
    link_order = []
    for name in merged:
        present = [r for r in range(first, last + 1) if name in releases[r]["order"]]
        since, until = present[0], present[-1] + 1
        if present != list(range(since, until)):
            raise SystemExit(f"{name}: not in one run of releases ({present})")
        row: dict[str, Any] = {"name": name, "since": since}
        if until <= last:
            row["until"] = until
        link_order.append(row)
    return {"format": 1, "comment": COMMENT, "since": first, "latest": last,
            "slots": slots, "link_order": link_order}


def dump(data: dict[str, Any]) -> str:
    """The data file's text: one line per slot change and per provider."""
    rows = ",\n".join(f"    {json.dumps(row)}" for row in data["link_order"])
    head = {k: v for k, v in data.items() if k not in ("slots", "link_order")}
    text = json.dumps(head, indent=2)
    return (text[:-2] + f',\n  "slots": {json.dumps(data["slots"])},\n'
            f'  "link_order": [\n{rows}\n  ]\n}}')


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("repo", help="rdma-core git repository (bare or with work tree)")
    ap.add_argument("--data", type=Path, default=DATA, help="data file to check")
    ap.add_argument("--head", default="HEAD",
                    help="ref for the newest, possibly untagged, release ('none': tags only)")
    ap.add_argument("--emit", action="store_true", help="print a derived data file instead")
    args = ap.parse_args(argv)
    git = Git(args.repo)
    try:
        derived = derive(git, None if args.head == "none" else args.head)
    finally:
        git.close()
    if args.emit:
        print(dump(derived))
        return 0
    data = json.loads(args.data.read_text(encoding="utf-8"))
    diffs = [f"{key}: data {data.get(key)!r}, derived {derived[key]!r}"
             for key in derived if key != "comment" and data.get(key) != derived[key]]
    for d in diffs:
        print(d)
    print("no differences" if not diffs else f"{len(diffs)} difference(s)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())

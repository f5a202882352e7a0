#!/usr/bin/env python3
"""Re-derive the release history in ``sysverbs/providers/providers.json`` from rdma-core's git.

Usage::

    tools/check_provider_history.py /path/to/rdma-core(.git) [--data FILE] [--head REF]
    tools/check_provider_history.py /path/to/rdma-core --emit > providers.json

For every rdma-core major release (one tag per release: ``vN.0``/``vN``, else the last
``vN-rcM``; the newest release may be an untagged ``--head`` whose CMake
``PACKAGE_VERSION`` names it) the script reads the provider sources straight out of the
git object store, runs a small C preprocessor over them (object- and function-like
macros, ``#``/``##``, ``#if``/``#ifdef``, quoted includes and ``<rdma/*.h>`` from
``kernel-headers``) and extracts:

* the provider's device-match table: the ``verbs_match_ent`` array named by
  ``.match_table`` (rdma-core >= 16), or, before that, the static ``{vendor, device}``
  PCI table the provider's ``driver_init`` walked (PCI entries only; providers that
  matched in code, e.g. rxe by name or vmw_pvrdma by a single ID, have no table then);
* ``.match_min_abi_version`` / ``.match_max_abi_version`` (rdma-core >= 16);
* the library name from ``rdma_provider()`` in the provider's CMakeLists.txt;
* the PABI number (``IBVERBS_PABI_VERSION``, or the ``rdmavN`` library extension of
  the releases before it existed).

From those per-release snapshots it derives ``since``/``until`` for every provider and
entry, the ABI history and the PABI table, and prints every difference from the data
file.  The exit status is 0 when there are none, 1 otherwise.  With ``--emit`` it prints
a freshly derived data file instead (provider order and the ``comment`` are taken from
the existing data file, or from ``--order FILE``, a list shaped like the spec dumps).

Nothing here uses rdma-core code; it only reads the facts (IDs, ranges) out of it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional, Union

sys.path.insert(0, str(Path(__file__).resolve().parent))

# The parts are in tools/provider_history/; tests/test_provider_history.py reads the C
# preprocessor and the constant expressions here (Preprocessor, tokenize, eval_int,
# ExprError).
from provider_history.cexpr import ExprError as ExprError  # noqa: E402
from provider_history.cexpr import eval_int as eval_int  # noqa: E402
from provider_history.cpp import Preprocessor as Preprocessor  # noqa: E402
from provider_history.ctokens import tokenize as tokenize  # noqa: E402
from provider_history.data_file import (  # noqa: E402
    DEFAULT_COMMENT,
    compare,
    derived_data,
    dump_data,
)
from provider_history.extract import Entry, ReleaseSnap, entry_from_json, extract_release  # noqa: E402
from provider_history.git import TAG_RE, Git, release_refs  # noqa: E402
from provider_history.history import build_history  # noqa: E402


def stable_backports(git: Git, data: dict[str, Any], verbose: bool) -> list[str]:
    """Entries that a stable point release vN.M (M > 0) carried outside since..until."""
    runs: dict[tuple[str, Entry], list[tuple[int, int]]] = {}
    libs = {str(p["library"]) for p in data["providers"]}
    for p in data["providers"]:
        for m in p["match"]:
            key = (str(p["library"]), entry_from_json(m))
            runs.setdefault(key, []).append((int(m["since"]), int(m.get("until", 1 << 30))))
    found: dict[tuple[str, Entry, int], list[str]] = {}
    for tag in git.tags():
        tm = TAG_RE.match(tag)
        if not tm or tm.group(2) in (None, "0") or tm.group(4) is not None:
            continue
        major = int(tm.group(1))
        if verbose:
            print(f"reading {tag}", file=sys.stderr)
        snap = extract_release(git, major, tag)
        for lib, prov in snap.providers.items():
            if lib not in libs:
                continue
            for e in prov.entries:
                spans = runs.get((lib, e), [])
                if not any(a <= major < b for a, b in spans):
                    found.setdefault((lib, e, major), []).append(tag)
    out = []
    for (lib, e, _), tags in sorted(found.items(), key=lambda kv: (kv[0][2], kv[0][0])):
        tags.sort(key=lambda t: [int(x) for x in t[1:].split(".")])
        shown = ", ".join(f"{a}.." + ("" if b == 1 << 30 else f"{b - 1}")
                          for a, b in runs.get((lib, e), []))
        out.append(f"{lib} {e.kind} {e.key}: in stable {tags[0]}..{tags[-1]} "
                   f"({len(tags)} tags), outside its releases {shown or 'none'}")
    return out


def collect(git: Git, head: Optional[str], verbose: bool) -> list[ReleaseSnap]:
    snaps: list[ReleaseSnap] = []
    for release, ref in release_refs(git, head).items():
        if verbose:
            print(f"reading {ref} (release {release})", file=sys.stderr)
        snaps.append(extract_release(git, release, ref))
    return snaps


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("repo", help="rdma-core git repository (bare or with work tree)")
    default_data = Path(__file__).resolve().parents[1] / "sysverbs" / "providers" / "providers.json"
    ap.add_argument("--data", type=Path, default=default_data, help="data file to check")
    ap.add_argument("--head", default="HEAD",
                    help="ref for the newest, possibly untagged, release (default HEAD; "
                         "'none' to use tags only)")
    ap.add_argument("--emit", action="store_true", help="print a derived data file instead")
    ap.add_argument("--order", type=Path,
                    help="JSON provider list giving the provider order for --emit")
    ap.add_argument("--stable", action="store_true",
                    help="also report entries that stable point releases (vN.M) carried "
                         "outside since..until (backports; informational, slow)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    git = Git(args.repo)
    try:
        snaps = collect(git, None if args.head == "none" else args.head, args.verbose)
    finally:
        git.close()
    hist = build_history(snaps)
    problems = [p for h in hist.values() for p in h.problems]

    data: Optional[dict[str, Any]] = None
    if args.data.exists():
        data = json.loads(args.data.read_text())
    order_src: Union[list[Any], None] = None
    if args.order is not None:
        order_src = json.loads(args.order.read_text())
    elif data is not None:
        order_src = data["providers"]
    if order_src is None:
        print("no provider order: give --order or an existing --data file", file=sys.stderr)
        return 2
    order = [str(p["name"]) for p in order_src]
    comment = str(data["comment"]) if data is not None else DEFAULT_COMMENT
    derived = derived_data(snaps, order, comment)

    if args.emit:
        for p in problems:
            print(f"warning: {p}", file=sys.stderr)
        print(dump_data(derived))
        return 0
    if data is None:
        print(f"{args.data}: not found", file=sys.stderr)
        return 2
    gone = sorted(h.library for h in hist.values() if snaps[-1].release not in h.releases)
    print(f"releases {snaps[0].release}..{snaps[-1].release} ({len(snaps)} refs); "
          f"providers no longer shipped (not in the data file): {', '.join(gone)}")
    for p in problems:
        print(f"warning: {p}")
    diffs = compare(data, derived)
    for d in diffs:
        print(d)
    if args.stable:
        git = Git(args.repo)
        try:
            for line in stable_backports(git, data, args.verbose):
                print(f"backport: {line}")
        finally:
            git.close()
    print("no differences" if not diffs else f"{len(diffs)} difference(s)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())

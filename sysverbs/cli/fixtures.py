"""``sysverbs fixtures``: the bundled fixture hosts, one line each (docs/cli.md).

    dgx-demo          19 RDMA devices, 0 GPUs: the demo host: ...

The counts are read from the recordings themselves (RDMA devices: the records below an
``infiniband/`` directory; GPUs: PCI functions of NVIDIA or AMD whose class placement
counts as a GPU, :data:`sysverbs.placement.GPU_CLASSES`); the descriptions are the data
file ``sysverbs/testing/fixtures/index.json``.  Nothing is unpacked.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

__all__ = ["register", "run", "describe"]


def register(subparsers: Any, parents: list[Any]) -> None:
    """Add ``fixtures`` to the ``sysverbs`` parser."""
    f = subparsers.add_parser(
        "fixtures", parents=parents, help="list the bundled fixture hosts (--fixture NAME)",
        description="The bundled fixture hosts that every command's --fixture NAME runs on: "
        "one line each, with its RDMA devices and GPUs and what host it records.",
        epilog="exit status: 0; 2 for a usage error.")
    f.set_defaults(func=run)


def _counts(path: Any) -> tuple[int, int]:
    """(RDMA devices, GPUs) of a recording, from its ``P:`` and ``E:`` lines."""
    from ..placement import GPU_CLASSES

    devices = gpus = 0
    pci_class: Optional[int] = None
    vendor: Optional[int] = None
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        for line in [*fh, "P: \n"]:
            if line.startswith("P: "):
                classes = GPU_CLASSES.get(vendor) if vendor is not None else None
                if classes and pci_class is not None and pci_class >> 8 in classes:
                    gpus += 1
                pci_class = vendor = None
                parts = line[3:].rstrip("\n").rsplit("/", 2)
                devices += len(parts) == 3 and parts[1] == "infiniband"
            elif line.startswith("E: PCI_CLASS="):
                pci_class = int(line[13:], 16)
            elif line.startswith("E: PCI_ID="):
                vendor = int(line[10:].split(":")[0], 16)
    return devices, gpus


def describe() -> list[dict[str, Any]]:
    """Every bundled fixture: ``name``, ``rdma_devices``, ``gpus``, ``description``."""
    from ..testing.host import FIXTURE_DIR, fixture_names, fixture_path

    index = json.loads((FIXTURE_DIR / "index.json").read_text(encoding="utf-8"))
    out = []
    for name in fixture_names():
        devices, gpus = _counts(fixture_path(name))
        out.append({"name": name, "rdma_devices": devices, "gpus": gpus,
                    "description": index["fixtures"].get(name, "")})
    return out


def run(args: Any, opts: dict[str, Any]) -> int:
    rows = describe()
    if args.json:
        sys.stdout.write(json.dumps({"schema": "sysverbs.fixtures/1", "fixtures": rows},
                                    indent=2) + "\n")
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        d, g = r["rdma_devices"], r["gpus"]
        sys.stdout.write(f"{r['name']:<{width}}  {d:>2} RDMA device{'s' if d != 1 else ''}, "
                         f"{g} GPU{'s' if g != 1 else ''}: {r['description']}\n")
    return 0

"""libfabric's ``fi_info -p verbs`` (Debian's libfabric-bin) read as data, beside
``sysverbs doctor --predict --json``'s ``libfabric-verbs`` prediction: the real
provider's domains and the predicted ones, as (provider, domain, endpoint type) sets
(tests/test_predict_fabric.py on this host, tests/kernel/test_access_lab.py in the VM)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["fi_info_entries", "predicted"]


def fi_info_entries(stdout: str) -> set[tuple[str, str, str]]:
    """``fi_info``'s blocks (``provider: verbs;ofi_rxm``, ``    domain: mlx5_0``,
    ``    type: FI_EP_RDM``...) as (provider, domain, type); its HMEM duplicates and one
    info per address of a domain are one entry."""
    out: set[tuple[str, str, str]] = set()
    block: dict[str, str] = {}
    for line in stdout.splitlines():
        key, _, value = line.strip().partition(": ")
        if key == "provider":
            block = {"provider": value}
        elif key in ("domain", "type") and block:
            block[key] = value
        if len(block) == 3:
            out.add((block["provider"], block["domain"], block["type"]))
            block = {}
    return out


def predicted(stdout: str) -> tuple[dict[str, Any], set[tuple[str, str, str]]]:
    """The ``libfabric-verbs`` prediction of a ``doctor --predict --json`` output, and
    its details (``provider domain type`` lines) as entries."""
    doc = json.loads(stdout)
    pred: dict[str, Any] = next(p for p in doc["predict"] if p["library"] == "libfabric-verbs")
    entries = set()
    for line in pred["details"]:
        provider, domain, kind = line.split()
        entries.add((provider, domain, kind))
    return pred, entries

"""deploy/'s Kubernetes objects against the Kubernetes API's own schemas.

kubernetes-validate (PyPI) carries the OpenAPI schemas of every Kubernetes release;
each object of deploy/sysverbs-daemonset.yaml must validate strictly (no unknown field)
against every release the manifest says it runs on (1.30 with the RecursiveReadOnlyMounts
gate, 1.31 and later: the manifest's header and docs/fleet.md), and the release before
must reject it for the field that needs it, so that the documented minimum is the real
one.  A misspelled field fails too: the check is not a formality.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import require

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "deploy" / "sysverbs-daemonset.yaml"

try:
    import kubernetes_validate
except ImportError:  # pragma: no cover - the dev extra installs it
    kubernetes_validate = None


def validator() -> Any:
    require(None if kubernetes_validate is not None else
            "kubernetes-validate is not installed (pip install -e '.[dev]')",
            "the Kubernetes API schemas (kubernetes-validate)")
    return kubernetes_validate


def objects() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def minimum() -> tuple[int, int]:
    """The oldest release the manifest's header names (``Kubernetes >= 1.31 (1.30 with
    the ... feature gate)``): 1.30, whose schema has the field."""
    head = MANIFEST.read_text().split("apiVersion:", 1)[0]
    m = re.search(r"Kubernetes >= 1\.(\d+) \(1\.(\d+) with the RecursiveReadOnlyMounts", head)
    assert m, "the manifest's header names no minimum Kubernetes release"
    return (1, int(m.group(2)))


def releases(kv: Any) -> list[str]:
    """Every minor release the schemas cover from the manifest's minimum on."""
    have = sorted({tuple(int(x) for x in d.name[1:].split("-")[0].split(".")[:2])
                   for d in (Path(kv.__file__).parent / "kubernetes-json-schema").iterdir()
                   if re.fullmatch(r"v1\.\d+\.\d+-local-strict", d.name)})
    low = minimum()
    return [f"{a}.{b}.0" for a, b in have if (a, b) >= low]


def test_every_object_validates_on_every_documented_release() -> None:
    kv = validator()
    kinds = [o["kind"] for o in objects()]
    assert kinds == ["DaemonSet", "NetworkPolicy"]
    versions = releases(kv)
    assert len(versions) >= 2 and versions[0] == "1.30.0"
    for version in versions:
        for obj in objects():
            kv.validate(obj, version, strict=True)


def test_the_release_before_the_minimum_rejects_recursive_read_only() -> None:
    kv = validator()
    daemonset = objects()[0]
    low = minimum()
    before = f"1.{low[1] - 1}.0"
    with pytest.raises(kv.ValidationError, match="recursiveReadOnly"):
        kv.validate(daemonset, before, strict=True)


@pytest.mark.parametrize("where", ["container", "securityContext", "volumeMount"])
def test_a_misspelled_field_fails(where: str) -> None:
    kv = validator()
    daemonset = copy.deepcopy(objects()[0])
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    target = {"container": container, "securityContext": container["securityContext"],
              "volumeMount": container["volumeMounts"][0]}[where]
    target["readOnlyRootFileSystem"] = True  # the real field is readOnlyRootFilesystem
    with pytest.raises(kv.ValidationError, match="readOnlyRootFileSystem"):
        kv.validate(daemonset, "1.31.0", strict=True)

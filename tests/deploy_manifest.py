"""deploy/sysverbs-daemonset.yaml as data, for tests/test_deploy.py and
tests/test_deploy_mounts.py: its documents, the pod template, each container and its
command as the kubelet runs it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DAEMONSET = ROOT / "deploy" / "sysverbs-daemonset.yaml"
FEATURES_D = "/etc/kubernetes/node-feature-discovery/features.d"  # NFD's local source
POD_IP = "10.1.2.3"


def documents() -> dict[str, dict[str, Any]]:
    """The manifest's documents by kind: the DaemonSet and its NetworkPolicy."""
    docs = [d for d in yaml.safe_load_all(DAEMONSET.read_text()) if d is not None]
    assert [d["kind"] for d in docs] == ["DaemonSet", "NetworkPolicy"]
    return {d["kind"]: d for d in docs}


def daemonset() -> dict[str, Any]:
    return documents()["DaemonSet"]


def pod() -> dict[str, Any]:
    spec: dict[str, Any] = daemonset()["spec"]["template"]["spec"]
    return spec


def containers() -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod()["containers"]}


def expand(container: dict[str, Any]) -> list[str]:
    """The command as the kubelet runs it: ``$(VAR)`` from the container's env."""
    values = {}
    for e in container.get("env", []):
        ref = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        values[e["name"]] = {"status.podIP": POD_IP}.get(ref, e.get("value"))
    words = []
    for word in container["command"] + container.get("args", []):
        assert isinstance(word, str), word
        for name in re.findall(r"\$\((\w+)\)", word):
            assert values.get(name) is not None, f"{container['name']}: $({name}) undefined"
        words.append(re.sub(r"\$\((\w+)\)", lambda m: str(values[m.group(1)]), word))
    return words


def effective(container: dict[str, Any], field: str) -> Any:
    """A security setting as it applies to the container: its own value, else the pod's
    (Kubernetes' rule for the fields both levels have)."""
    return container["securityContext"].get(field, pod()["securityContext"].get(field))

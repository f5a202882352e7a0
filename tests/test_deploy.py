"""deploy/sysverbs-daemonset.yaml and deploy/prometheus-scrape.yml (docs/fleet.md).

The DaemonSet parses (PyYAML), its containers' commands are ``sysverbs`` command lines
the real parser takes once Kubernetes has put the downward API's values in, and the nfd
container's command, pointed at a bundled fixture's tree, writes a feature file; it asks
for nothing beyond the host's /sys and /dev/infiniband read-only and NFD's features.d
(no privileges, every capability dropped, limits).  The scrape configuration passes
``promtool check config`` (Debian's promtool is built without Kubernetes service
discovery: the check runs with a static target in place of ``kubernetes_sd_configs``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sysverbs.cli import _parser
from sysverbs.fleet.nfd import NAMESPACE
from sysverbs.testing.cache import fixture_tree
from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]
DAEMONSET = ROOT / "deploy" / "sysverbs-daemonset.yaml"
SCRAPE = ROOT / "deploy" / "prometheus-scrape.yml"
FEATURES_D = "/etc/kubernetes/node-feature-discovery/features.d"  # NFD's local source
POD_IP = "10.1.2.3"


def _daemonset() -> dict[str, Any]:
    docs = list(yaml.safe_load_all(DAEMONSET.read_text()))
    assert len(docs) == 1
    doc: dict[str, Any] = docs[0]
    return doc


def _pod() -> dict[str, Any]:
    spec: dict[str, Any] = _daemonset()["spec"]["template"]["spec"]
    return spec


def _containers() -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in _pod()["containers"]}


def _expand(container: dict[str, Any]) -> list[str]:
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


def test_it_is_a_daemonset() -> None:
    ds = _daemonset()
    assert (ds["apiVersion"], ds["kind"]) == ("apps/v1", "DaemonSet")
    selector = ds["spec"]["selector"]["matchLabels"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    assert set(_containers()) == {"metrics", "nfd"}


@pytest.mark.parametrize("name", ["metrics", "nfd"])
def test_commands_are_sysverbs_command_lines(name: str) -> None:
    """The real parser takes each command (after the kubelet's substitution), with the
    options the design needs: the host's /sys read as sysfs, no open()."""
    words = _expand(_containers()[name])
    assert words[:2] == ["sysverbs", name]
    args = _parser(name).parse_args(words[1:])
    assert args.command == name
    assert (args.sysfs_path, args.source, args.no_open) == ("/host/sys", "sysfs", True)
    if name == "metrics":
        assert args.listen == (POD_IP, 9947)
        port = _containers()[name]["ports"][0]
        assert (port["name"], port["containerPort"]) == ("metrics", args.listen[1])
    else:
        assert (args.features_dir, args.interval, args.once) == (FEATURES_D, 60.0, False)


def test_help_of_each_command() -> None:
    for name in ("metrics", "nfd"):
        p = subprocess.run([sys.executable, "-m", "sysverbs", name, "--help"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert p.returncode == 0 and p.stdout.startswith("usage: sysverbs " + name), p.stderr


def test_the_nfd_container_writes_its_file(tmp_path: Path) -> None:
    """The nfd container's command, once, on a fixture's tree in place of the node's
    /sys and /dev/infiniband: the file is written and names the fixture's devices."""
    host = fixture_tree("gpu-hgx-h100")
    words = _expand(_containers()["nfd"])
    words = [{"/host/sys": os.fsdecode(host.sysfs), FEATURES_D: str(tmp_path)}.get(w, w)
             for w in words]
    p = subprocess.run([sys.executable, "-m", *words, "--once", "--dev-dir",
                        os.fsdecode(host.dev)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "sysverbs").read_text()
    assert f"{NAMESPACE}/rdma.devices=8\n" in text
    assert f"{NAMESPACE}/gpu-nic.worst-link=PIX\n" in text
    assert sorted(os.listdir(tmp_path)) == ["sysverbs"]


def test_no_privileges_beyond_the_mounts() -> None:
    pod = _pod()
    assert pod["automountServiceAccountToken"] is False
    assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert {n: v["hostPath"]["path"] for n, v in volumes.items()} == {
        "sys": "/sys", "dev-infiniband": "/dev/infiniband", "features-d": FEATURES_D}
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert not sc.get("privileged") and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["readOnlyRootFilesystem"] is True
        limits = c["resources"]["limits"]
        assert set(limits) == {"cpu", "memory"}
        for m in c["volumeMounts"]:
            assert m["name"] in volumes
            writable = m["name"] == "features-d"
            assert m.get("readOnly", False) is not writable, (c["name"], m)
            assert writable == (c["name"] == "nfd" and m["mountPath"] == FEATURES_D)
    containers = _containers()
    assert containers["metrics"]["securityContext"]["runAsNonRoot"] is True
    assert not any(m["name"] == "features-d" for m in containers["metrics"]["volumeMounts"])


def test_scrape_config_selects_the_daemonsets_port() -> None:
    """The relabelling keeps the DaemonSet's metrics port (its regex, on the pod label and
    port name the manifest has) and sets instance to the node's name."""
    doc = yaml.safe_load(SCRAPE.read_text())
    (job,) = doc["scrape_configs"]
    keep, instance = job["relabel_configs"]
    labels = _daemonset()["spec"]["template"]["metadata"]["labels"]
    value = f"{labels['app.kubernetes.io/name']};{_containers()['metrics']['ports'][0]['name']}"
    assert keep["action"] == "keep" and re.fullmatch(keep["regex"], value)
    assert instance == {"source_labels": ["__meta_kubernetes_pod_node_name"],
                        "target_label": "instance"}


@pytest.mark.oracle
def test_promtool_checks_the_scrape_config(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    require(None if promtool else "no promtool on PATH (apt-get install prometheus)",
            "promtool (Prometheus' config checker)")
    assert promtool is not None
    text = SCRAPE.read_text()
    sd = "    kubernetes_sd_configs:\n      - role: pod\n"
    assert sd in text
    (tmp_path / "prometheus.yml").write_text(
        text.replace(sd, "    static_configs:\n      - targets: ['10.1.2.3:9947']\n"))
    shutil.copy(ROOT / "sysverbs" / "fleet" / "rules.yml", tmp_path / "sysverbs-rules.yml")
    p = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 1 rule files found" in p.stdout and "SUCCESS: 4 rules found" in p.stdout

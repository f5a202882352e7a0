"""deploy/sysverbs-daemonset.yaml and deploy/prometheus-scrape.yml (docs/fleet.md).

The DaemonSet parses (PyYAML), its containers' commands are ``sysverbs`` command lines
the real parser takes once Kubernetes has put the downward API's values in, and the nfd
container's command, pointed at a bundled fixture's tree, writes a feature file; it asks
for nothing beyond the host's /sys and /dev/infiniband read-only (recursively) and NFD's
features.d (uid 65534, no capability, limits), and its NetworkPolicy admits only
Prometheus to the metrics port (tests/test_deploy_mounts.py runs the commands as uid
65534 on mounts made as the manifest asks).  The scrape configuration passes
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
from tests import deploy_manifest as manifest
from tests.conftest import require
from tests.deploy_manifest import FEATURES_D, POD_IP, expand

ROOT = Path(__file__).resolve().parents[1]
SCRAPE = ROOT / "deploy" / "prometheus-scrape.yml"


def test_it_is_a_daemonset() -> None:
    ds = manifest.daemonset()
    assert (ds["apiVersion"], ds["kind"]) == ("apps/v1", "DaemonSet")
    selector = ds["spec"]["selector"]["matchLabels"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    assert set(manifest.containers()) == {"metrics", "nfd"}


@pytest.mark.parametrize("name", ["metrics", "nfd"])
def test_commands_are_sysverbs_command_lines(name: str) -> None:
    """The real parser takes each command (after the kubelet's substitution), with the
    options the design needs: the host's /sys read as sysfs, no open()."""
    words = expand(manifest.containers()[name])
    assert words[:2] == ["sysverbs", name]
    args = _parser(name).parse_args(words[1:])
    assert args.command == name
    assert (args.sysfs_path, args.source, args.no_open) == ("/host/sys", "sysfs", True)
    if name == "metrics":
        assert args.listen == (POD_IP, 9947)
        port = manifest.containers()[name]["ports"][0]
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
    words = expand(manifest.containers()["nfd"])
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


#: What a security setting must be in every container (its own value, else the pod's).
SECURITY = {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"}}


def test_no_privileges_beyond_the_mounts() -> None:
    """Both containers run as nobody (not root: uid 0 without capabilities still passes
    every permission check on files root owns), with no capability and the runtime's
    seccomp profile; every mount but nfd's features.d is read-only, recursively (a plain
    read-only hostPath leaves the mounts beneath /sys, /sys/fs/cgroup among them,
    writable: tests/test_deploy_mounts.py shows both on this kernel)."""
    pod = manifest.pod()
    assert pod["automountServiceAccountToken"] is False
    assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    assert "initContainers" not in pod and "hostUsers" not in pod
    assert not set(pod["securityContext"]) - set(SECURITY)  # no supplementalGroups, fsGroup
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert {n: v["hostPath"]["path"] for n, v in volumes.items()} == {
        "sys": "/sys", "dev-infiniband": "/dev/infiniband", "features-d": FEATURES_D}
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert {f: manifest.effective(c, f) for f in SECURITY} == SECURITY, c["name"]
        assert not sc.get("privileged") and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["readOnlyRootFilesystem"] is True
        limits = c["resources"]["limits"]
        assert set(limits) == {"cpu", "memory"}
        for m in c["volumeMounts"]:
            assert m["name"] in volumes
            writable = m["name"] == "features-d"
            assert m.get("readOnly", False) is not writable, (c["name"], m)
            assert m.get("recursiveReadOnly") == (None if writable else "Enabled"), m
            assert "mountPropagation" not in m and "subPath" not in m, m
            assert writable == (c["name"] == "nfd" and m["mountPath"] == FEATURES_D)
    containers = manifest.containers()
    assert not any(m["name"] == "features-d" for m in containers["metrics"]["volumeMounts"])


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector of matchLabels only (the policy must use no other form)."""
    assert set(selector) == {"matchLabels"}, selector
    return bool(selector["matchLabels"].items() <= labels.items())


def _admits(policy: dict[str, Any], namespace: dict[str, str], pod: dict[str, str],
            port: int) -> bool:
    """Whether the policy lets a pod (its namespace's labels and its own) reach the
    DaemonSet's pods on a TCP port: a peer with both selectors needs both, a named port
    is the container port of that name."""
    ports = {p["name"]: p["containerPort"] for c in manifest.pod()["containers"]
             for p in c.get("ports", [])}
    for rule in policy["spec"].get("ingress", []):
        peers = [all(_selects(sel, {"namespaceSelector": namespace, "podSelector": pod}[k])
                     for k, sel in peer.items()) for peer in rule["from"]]
        open_ports = [ports.get(p["port"], p["port"]) for p in rule["ports"]
                      if p["protocol"] == "TCP"]
        if any(peers) and port in open_ports:
            return True
    return False


def test_the_network_policy_admits_only_the_scraper() -> None:
    """The policy covers the DaemonSet's pods, both directions: Prometheus' pods in its
    namespace reach the metrics port, nothing else reaches anything, and the pods reach
    nothing (no egress rule)."""
    policy = manifest.documents()["NetworkPolicy"]
    assert policy["apiVersion"] == "networking.k8s.io/v1"
    labels = manifest.daemonset()["spec"]["template"]["metadata"]["labels"]
    assert _selects(policy["spec"]["podSelector"], labels)
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["egress"] == []
    (rule,) = policy["spec"]["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"namespaceSelector", "podSelector"}  # one peer: both must match
    listen = _parser("metrics").parse_args(expand(manifest.containers()["metrics"])[1:]).listen[1]
    monitoring = {"kubernetes.io/metadata.name": "monitoring"}
    prometheus = {"app.kubernetes.io/name": "prometheus", "pod-template-hash": "x"}
    assert _admits(policy, monitoring, prometheus, listen)
    for namespace, pod, port in [(monitoring, prometheus, 22), (monitoring, prometheus, 9100),
                                 ({"kubernetes.io/metadata.name": "default"}, prometheus, listen),
                                 (monitoring, {"app.kubernetes.io/name": "grafana"}, listen),
                                 (monitoring, {}, listen), ({}, {}, listen)]:
        assert not _admits(policy, namespace, pod, port), (namespace, pod, port)


def test_scrape_config_selects_the_daemonsets_port() -> None:
    """The relabelling keeps the DaemonSet's metrics port (its regex, on the pod label and
    port name the manifest has) and sets instance to the node's name."""
    doc = yaml.safe_load(SCRAPE.read_text())
    (job,) = doc["scrape_configs"]
    keep, instance = job["relabel_configs"]
    labels = manifest.daemonset()["spec"]["template"]["metadata"]["labels"]
    port = manifest.containers()["metrics"]["ports"][0]["name"]
    value = f"{labels['app.kubernetes.io/name']};{port}"
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
    rules = sum(len(g["rules"]) for g in yaml.safe_load(
        (Path(__file__).resolve().parent.parent / "sysverbs" / "fleet" / "rules.yml")
        .read_text())["groups"])
    assert rules >= 4
    assert "SUCCESS: 1 rule files found" in p.stdout
    assert f"SUCCESS: {rules} rules found" in p.stdout

"""The DaemonSet's mounts on this kernel: what cannot be written, and what still works.

The problem: ``readOnly: true`` on a hostPath makes its top mount read-only and nothing
beneath it, and uid 0 with every capability dropped still passes the permission checks on
files root owns: such a container could write the host's cgroup files through
``/host/sys/fs/cgroup``.  tests/mount_probe.py mounts, in a private mount namespace, a
stand-in host ``/sys`` (a fixture's tree with a tmpfs beneath it at ``fs/cgroup``) as
runc does, and writes through it with the credentials the manifest gives:

* the old way (``readOnly`` alone): the submount's ``pids.max`` is written by uid 0
  without a capability, and ``open-to-all`` (mode 0666) by uid 65534;
* each container's mounts as deploy/sysverbs-daemonset.yaml asks (read from it:
  ``recursiveReadOnly: Enabled`` is ``mount_setattr(AT_RECURSIVE, MOUNT_ATTR_RDONLY)``,
  what runc does for it): every write into ``/host/sys`` and ``/dev/infiniband``, top or
  submount, fails with EROFS, as uid 0 without capabilities and as uid 65534; and the
  container's own command (from the manifest, paths moved into the view, ``--listen``
  left out, ``--once`` for nfd's loop) works as uid 65534: metrics reads the devices, nfd
  writes its file in the features directory, the only writable mount.

The kernel is the oracle.  It needs root, util-linux's ``unshare`` and ``setpriv`` and
Linux >= 5.12 (``mount_setattr``); without them the test skips, and fails under CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

from sysverbs.fleet.nfd import NAMESPACE
from sysverbs.testing.cache import fixture_tree
from tests import deploy_manifest as manifest
from tests import staging
from tests.conftest import fast_tmpdir, require

FIXTURE = "rxe"  # two devices, rxe0 and rxe1
#: Where each volume of the manifest lies on the stand-in host (tests/mount_probe.py).
SOURCES = {"sys": "sys", "dev-infiniband": "dev", "features-d": "features"}
#: What each writes in a read-only mount: uid 0 a file root owns (mode 0644, which root
#: may write without a capability), uid 65534 ``open-to-all`` (mode 0666) beside it.
WRITES = {"sys": [("submount", "fs/cgroup/pids.max"), ("top", "root-only")],
          "dev": [("dev", "root-only")]}


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "not root (the mounts need CAP_SYS_ADMIN)"
    for tool in ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH (util-linux)"
    return None


def _mode(mount: dict[str, Any]) -> str:
    if not mount.get("readOnly"):
        return "rw"
    return "rro" if mount.get("recursiveReadOnly") == "Enabled" else "ro"


def _view(work: str, container: dict[str, Any]) -> list[dict[str, str]]:
    """The container's volume mounts, as the probe makes them under ``work/<name>``."""
    return [{"source": SOURCES[m["name"]], "mode": _mode(m), "path": m["mountPath"],
             "target": os.path.join(work, container["name"], m["mountPath"].lstrip("/"))}
            for m in container["volumeMounts"]]


def _command(view: list[dict[str, str]], container: dict[str, Any]) -> list[str]:
    """The container's command with each mount's path moved into its view, for one run:
    ``--listen ADDR`` left out (metrics prints once), ``--once`` in place of nfd's
    ``--interval S``."""
    words = manifest.expand(container)
    moved = {m["path"]: m["target"] for m in view}
    argv = [moved.get(w, w) for w in words]
    for option in ("--listen", "--interval"):
        if option in argv:
            i = argv.index(option)
            del argv[i:i + 2]
    if container["name"] == "nfd":
        argv.append("--once")
    assert argv[0] == "sysverbs", argv
    return argv


def _plan(work: str) -> dict[str, Any]:
    tree = fixture_tree(FIXTURE)
    python, code = staging.python_and_code(unprivileged=True)
    containers = manifest.containers()
    views = {name: _view(work, c) for name, c in containers.items()}
    views["old"] = [{"source": "sys", "mode": "ro", "path": "/host/sys",
                     "target": os.path.join(work, "old", "host", "sys")}]
    writes = []
    for name, view in views.items():
        for m in view:
            for where, file in WRITES.get(m["source"], ()):
                writes.append({"view": name, "as": "root", "where": where,
                               "path": os.path.join(m["target"], file)})
                writes.append({"view": name, "as": "nobody", "where": where,
                               "path": os.path.join(m["target"], os.path.dirname(file),
                                                    "open-to-all")})
    commands = []
    for name, c in containers.items():
        argv = _command(views[name], c)
        dev = next(m["target"] for m in views[name] if m["source"] == "dev")
        who = {0: "root", staging.NOBODY: "nobody"}[manifest.effective(c, "runAsUser")]
        commands.append({"name": name, "as": who, "argv": [*argv, "--dev-dir", dev]})
    return {"work": work, "sysfs": os.fsdecode(tree.sysfs), "dev": os.fsdecode(tree.dev),
            "python": python, "env": staging.user_env(), "code": str(code),
            "views": views, "writes": writes, "commands": commands}


def _probe(plan: dict[str, Any]) -> dict[str, Any]:
    p = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, "-m",
                        "tests.mount_probe", json.dumps(plan)], capture_output=True, text=True,
                       timeout=300, cwd=manifest.ROOT,
                       env=dict(os.environ, PYTHONPATH=str(manifest.ROOT)))
    assert p.returncode == 0, p.stderr
    result: dict[str, Any] = json.loads(p.stdout)
    return result


def test_mounts_as_the_manifest_asks_cannot_be_written() -> None:
    require(_missing(), "a private mount namespace (root, unshare, setpriv)")
    with fast_tmpdir("sv-mounts-") as work:
        plan = _plan(str(work))
        result = _probe(plan)
    require(result.get("unsupported"), "recursive read-only mounts (mount_setattr, Linux 5.12)")
    got = {(w["view"], w["as"], w["where"]): r for w, r in zip(plan["writes"], result["writes"])}
    # the issue, reproduced: readOnly alone leaves the submount writable
    assert got[("old", "root", "submount")] == "written"
    assert got[("old", "nobody", "submount")] == "written"
    assert got[("old", "root", "top")] == got[("old", "nobody", "top")] == "EROFS"
    assert result["pids.max"] == "5\n"  # the host's file was changed
    # the manifest's mounts: nothing below /host/sys or /dev/infiniband, as anyone
    mine = {k: v for k, v in got.items() if k[0] != "old"}
    assert {k[0] for k in mine} == {"metrics", "nfd"}
    assert {k[2] for k in mine} == {"submount", "top", "dev"}
    assert set(mine.values()) == {"EROFS"}, mine


def test_each_container_command_works_as_nobody_on_those_mounts() -> None:
    """Each container's command from the manifest, run as uid 65534 without a capability
    on its mounts (recursively read-only, the features directory the only writable one):
    metrics reports both devices, nfd writes its file and nothing else."""
    require(_missing(), "a private mount namespace (root, unshare, setpriv)")
    with fast_tmpdir("sv-mounts-") as work:
        plan = _plan(str(work))
        plan["writes"] = []
        result = _probe(plan)
    require(result.get("unsupported"), "recursive read-only mounts (mount_setattr, Linux 5.12)")
    runs = {c["name"]: r for c, r in zip(plan["commands"], result["commands"])}
    assert [(c["argv"][:2], c["as"]) for c in plan["commands"]] == [
        (["sysverbs", "metrics"], "nobody"), (["sysverbs", "nfd"], "nobody")]
    for name, r in runs.items():
        assert r["rc"] == 0, (name, r["stderr"])
    for device in ("rxe0", "rxe1"):
        assert f'sysverbs_rdma_device_listed{{device="{device}"}} 1' in runs["metrics"]["stdout"]
    assert list(result["features"]) == ["sysverbs"]
    assert f"{NAMESPACE}/rdma.devices=2\n" in result["features"]["sysverbs"]

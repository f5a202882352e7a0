"""What the diagnose tests share: a diagnose run in a form both in-process and
subprocess runs give (``Seen``), and the trees they build."""

from __future__ import annotations

import importlib
import json
import os
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from sysverbs import testing
from sysverbs.devices.diagnosis import DiagnosisList, diagnose
from sysverbs.testing import umockdev
from tests import staging, trees

ROOT = os.geteuid() == 0
REPO = Path(__file__).resolve().parents[1]
diagnose_module = importlib.import_module("sysverbs.devices.diagnosis")
PROVIDER_LIB = "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so"


@dataclass
class Seen:
    """What a diagnose run found, in a form both in-process and subprocess runs give."""

    host: dict[str, str] = field(default_factory=dict)  # code -> message
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)

    def codes(self) -> set[str]:
        out = set(self.host)
        for d in self.devices.values():
            out.update(d["codes"])
        return out


def seen_of(result: DiagnosisList) -> Seen:
    s = Seen({r.code: r.message for r in result.host})
    for d in result:
        s.devices[d.name] = {
            "listed": d.listed,
            "usable": d.usable,
            "provider": d.provider,
            "codes": [r.code for r in d.reasons],
            "messages": {r.code: r.message for r in d.reasons},
            "ports": [r.port for r in d.reasons],
        }
    return s


def seen_of_json(doc: dict[str, Any]) -> Seen:
    s = Seen({r["code"]: r["message"] for r in doc["host"]})
    for d in doc["devices"]:
        s.devices[d["name"]] = {
            "listed": d["listed"],
            "usable": d["usable"],
            "provider": d["provider"],
            "codes": [r["code"] for r in d["reasons"]],
            "messages": {r["code"]: r["message"] for r in d["reasons"]},
            "ports": [r["port"] for r in d["reasons"]],
        }
    return s


def run(root: Path, **kw: Any) -> Seen:
    if "static_providers" not in kw:
        kw.setdefault("providers", "builtin")
    kw.setdefault("rdma_core", "44")
    return seen_of(diagnose(sysfs_path=root / "sys", dev_dir=root / "dev/infiniband", **kw))


def run_as_nobody(root: Path, memlock: Optional[int] = None) -> Seen:
    """python -m sysverbs doctor --json as uid 65534 (for access and memlock checks)."""
    cmd = [
        staging.user_python(),  # this checkout may be where uid 65534 cannot enter
        "-m",
        "sysverbs",
        "doctor",
        "--json",
        "--providers",
        "builtin",
        "--rdma-core",
        "44",
        "--sysfs-path",
        str(root / "sys"),
        "--dev-dir",
        str(root / "dev/infiniband"),
    ]
    cmd = [*staging.AS_NOBODY, *cmd]
    if memlock is not None:  # set by root, inherited by the unprivileged process
        cmd = ["prlimit", f"--memlock={memlock}:{memlock}", *cmd]
    proc = subprocess.run(cmd, capture_output=True, env=staging.user_env(), timeout=120, cwd="/")
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return seen_of_json(json.loads(proc.stdout))


def null_node(path: Path, major: int = 1, minor: int = 3, mode: int = 0o666) -> None:
    if os.path.lexists(path):
        path.unlink()
    os.mknod(path, mode | stat.S_IFCHR, os.makedev(major, minor))
    os.chmod(path, mode)


def rxe(uverbs: str = "uverbs0", name: str = "rxe0", **kw: Any) -> trees.Tree:
    return trees.rxe_dev(uverbs, name, **kw)


def fixture(name: str) -> Callable[[Path], testing.FakeHost]:
    return lambda root: testing.materialize(testing.fixture_path(name), root)


# -- scenarios: (id, build the tree, diagnose it, check) ------------------------------------


def without_node(rec: umockdev.Recording, uverbs: str) -> umockdev.Recording:
    """``rec`` without the N: (and S:) lines of uverbs device ``uverbs``."""
    import dataclasses

    out = [dataclasses.replace(r, node=None, links=())
           if r.subsystem == "infiniband_verbs" and r.path.endswith("/" + uverbs) else r
           for r in rec]
    assert out != list(rec)
    return umockdev.Recording(tuple(out))

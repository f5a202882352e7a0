"""Permission denied, for real: the library and the command line as uid 65534.

As root, ``chmod 0`` denies nothing, so a permission test run as root tests nothing.
Here the same tree is read as root and as uid 65534 (``setpriv``, running the staged
copy of the code: tests/staging.py), with some of its files made unreadable, and the
difference is exactly what the docs say an unreadable file means:

* ``device_attributes``: the field is None, a GID entry is left out
  (docs/behaviour.md: a read that fails is an absent value);
* ``diagnose``: a device whose ``ibdev`` cannot be read is not listed, as the real
  libibverbs run as the same user does not list it (compared below);
* ``placement.read_host``: ``numa_node`` unreadable is None (its docstring);
* ``rank_environment``: a GID entry it cannot read is never chosen;
* ``sysverbs devices`` / ``devinfo -l`` as the user: byte for byte what the real
  ``ibv_devices`` / ``ibv_devinfo -l`` print as the same user on the same tree; the
  other commands: no traceback, an exit status of the contract (docs/cli.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sysverbs import testing
from tests import staging
from tests.conftest import fast_tmpdir, require
from tests.oracle import harness

AS_USER = staging.AS_NOBODY
SETPRIV = staging.SETPRIV_NOBODY


@pytest.fixture(scope="module")
def root_only() -> None:
    require(None if os.geteuid() == 0 else "needs root (setpriv to uid 65534)", "root")


def _probe(request: dict[str, Any], user: bool) -> dict[str, Any]:
    python, code = staging.python_and_code(user)
    argv = [*(AS_USER if user else []), python, str(code / "tests/unprivileged_probe.py")]
    proc = subprocess.run([*argv, json.dumps(request)], capture_output=True, text=True,
                          env=staging.user_env({"PYTHONPATH": str(code)}), cwd="/",
                          timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def both(request: dict[str, Any]) -> tuple[Any, Any]:
    """(as root, as uid 65534): what the call returned."""
    root, user = _probe(request, user=False), _probe(request, user=True)
    assert "ok" in root and "ok" in user, (root, user)
    return root["ok"], user["ok"]


@pytest.fixture
def a100(root_only: None) -> Iterator[testing.FakeHost]:
    """The gpu-dgx-a100 fixture host (InfiniBand NICs, and RoCE mlx5_9), readable by
    all; a RoCE v2 GID with an IPv4-mapped address added at index 2 of mlx5_9."""
    with fast_tmpdir("sv-unpriv-") as tmp:
        host = testing.materialize(testing.fixture_path("gpu-dgx-a100"), str(tmp / "h"))
        for dirpath, dirnames, _ in os.walk(tmp):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
        port = _device(host, "mlx5_9") / "ports/1"
        (port / "gids/2").write_text("0000:0000:0000:0000:0000:ffff:0a00:0001\n")
        (port / "gid_attrs/types/2").write_text("RoCE v2\n")
        shutil.copyfile(port / "gid_attrs/ndevs/1", port / "gid_attrs/ndevs/2")
        for p in (port / "gids/2", port / "gid_attrs/types/2", port / "gid_attrs/ndevs/2"):
            os.chmod(p, 0o444)
        yield host


def _device(host: testing.FakeHost, name: str) -> Path:
    return (Path(host.sysfs) / "class/infiniband" / name).resolve()


def _unreadable(*paths: Path) -> None:
    for p in paths:
        assert p.exists(), p
        os.chmod(p, 0)


def test_attributes_unreadable_fields_are_absent(a100: testing.FakeHost) -> None:
    dev = _device(a100, "mlx5_0")
    _unreadable(dev / "node_guid", dev / "ports/1/state", dev / "ports/1/gids/0")
    root, user = both({"call": "attributes", "device": str(dev)})
    assert root["node_guid"] is not None and root["ports"][0]["state"] == "ACTIVE"
    assert root["ports"][0]["gids"], "the fixture's port has GID 0"
    assert user["node_guid"] is None
    assert user["ports"][0]["state"] is None
    assert len(user["ports"][0]["gids"]) == len(root["ports"][0]["gids"]) - 1
    # what stays readable is read the same
    assert user["sys_image_guid"] == root["sys_image_guid"] and user["fw_ver"] == root["fw_ver"]


def test_diagnose_unlisted_as_user_as_libibverbs_is(a100: testing.FakeHost) -> None:
    sysfs = Path(a100.sysfs)
    _unreadable(sysfs / "class/infiniband_verbs/uverbs1/ibdev")
    request = {"call": "diagnose", "sysfs": str(a100.sysfs), "dev": str(a100.dev)}
    root, user = both(request)
    victim = (sysfs / "class/infiniband_verbs/uverbs1/device/infiniband").resolve()
    (name,) = os.listdir(victim)
    assert root[name]["listed"] and not user[name]["listed"]
    assert user[name]["reasons"] == ["no_uverbs_device"]
    assert {n for n, d in user.items() if not d["listed"]} == {name}
    # the real libibverbs as the same user on a copy of the same tree lists the same
    require(harness.unavailable_reason(), "the libibverbs oracle")
    with fast_tmpdir("sv-unpriv-ns-") as tmp:
        real_src, _, dst = harness.materialize_pair(tmp, lambda r: _copy_host(a100, r))
        run = harness.run_impl("libibverbs", real_src, dst, [{"op": "list"}], setpriv=SETPRIV)
        assert run.returncode == 0, run.stderr
        (listed,) = run.results()
        real = {d["name"] for d in listed["devices"]}
    assert real == {n for n, d in user.items() if d["listed"]}


def _copy_host(host: testing.FakeHost, root: Path) -> None:
    for sub in ("sys", "dev"):
        shutil.copytree(Path(host.sysfs).parent / sub, root / sub, symlinks=True,
                        dirs_exist_ok=True)


def test_read_host_unreadable_numa_node_is_none(a100: testing.FakeHost) -> None:
    request = {"call": "read_host", "sysfs": str(a100.sysfs), "dev": str(a100.dev)}
    root, _ = both(request)
    gpu = sorted(root["gpus"])[0]
    assert root["gpus"][gpu] is not None
    _unreadable(Path(a100.sysfs) / "bus/pci/devices" / gpu / "numa_node")
    root, user = both(request)
    assert root["gpus"][gpu] is not None and user["gpus"][gpu] is None
    assert {g: n for g, n in user["gpus"].items() if g != gpu} == {
        g: n for g, n in root["gpus"].items() if g != gpu}
    assert user["nics"] == root["nics"]


def test_rank_environment_never_chooses_an_unreadable_gid(a100: testing.FakeHost) -> None:
    request = {"call": "rank_environment", "nics": ["mlx5_9:1"], "sysfs": str(a100.sysfs),
               "dev": str(a100.dev)}
    gid2 = _device(a100, "mlx5_9") / "ports/1/gids/2"
    os.chmod(gid2, 0o444)
    root, _ = both(request)
    # NCCL's ncclIbGetGidIndex (default NCCL_IB_ADDR_FAMILY AF_INET, RoCE v2
    # preferred): GIDs 0 and 1 are fe80:: link-local (not AF_INET), GID 2 is the
    # IPv4-mapped ::ffff:10.0.0.1 of type RoCE v2: index 2.
    assert root["variables"]["NCCL_IB_GID_INDEX"] == "2" and root["warnings"] == []
    _unreadable(gid2)
    try:
        _, user = both(request)
    finally:
        os.chmod(gid2, 0o444)
    assert user["variables"]["NCCL_IB_GID_INDEX"] != "2"
    assert any("no valid AF_INET RoCE v2 GID" in w for w in user["warnings"]), user


def _user_cli(*args: str) -> list[str]:
    return [staging.user_python(), "-m", "sysverbs", *args]


@pytest.mark.oracle
@pytest.mark.parametrize("tool", [["devices"], ["devinfo", "-l"]])
def test_cli_as_user_is_the_real_tool_as_user(root_only: None, tool: list[str]) -> None:
    """The oracle tree of tests/test_oracle_core.py::test_unreadable_files_as_user."""
    require(harness.unavailable_reason(), "the libibverbs oracle")
    require(None if shutil.which("ibv_devices") else "ibverbs-utils is not installed",
            "ibverbs-utils")
    from tests.test_oracle_core import UNREADABLE_STEPS, UNREADABLE_TREE, chmod_build

    with fast_tmpdir("sv-unpriv-cli-") as tmp:
        real_src, ours_src, dst = harness.materialize_pair(
            tmp, lambda r: chmod_build(r, UNREADABLE_TREE, UNREADABLE_STEPS))
        env = {"IBV_SHOW_WARNINGS": "1"}
        real = harness.run_in_ns(real_src, dst, ["ibv_" + tool[0], *tool[1:]], env=env,
                                 setpriv=SETPRIV)
        ours = harness.run_in_ns(ours_src, dst, _user_cli(*tool), setpriv=SETPRIV,
                                 env={**env, "PYTHONPATH": str(staging.stage())})
    assert b"Traceback" not in ours.stderr
    assert (ours.returncode, ours.stdout, ours.stderr) == (real.returncode, real.stdout,
                                                           real.stderr)
    assert "rxe1" in real.stdout  # listed: only its node_guid is unreadable


#: Every other command, as uid 65534 on the tree with unreadable files: the exit
#: statuses docs/cli.md allows for it, never a traceback.
OTHER_COMMANDS = {
    "netdev": (["netdev"], {0, 1}),
    "doctor": (["doctor", "--providers", "builtin"], {0, 1}),
    "doctor-json": (["doctor", "--json", "--providers", "builtin"], {0, 1}),
    "topo": (["topo"], {0, 1}),
    "env": (["env", "--device", "mlx5_9:1"], {0, 1}),
    "nccl-check": (["nccl", "check", "mlx5_9"], {0, 1, 2}),
    "snapshot": (["snapshot", "-o", "-"], {0, 1}),
}


@pytest.mark.parametrize("command", sorted(OTHER_COMMANDS))
def test_every_command_as_user_on_unreadable_files(a100: testing.FakeHost, command: str) -> None:
    args, allowed = OTHER_COMMANDS[command]
    sysfs = Path(a100.sysfs)
    dev = _device(a100, "mlx5_9")
    _unreadable(sysfs / "class/infiniband_verbs/uverbs1/ibdev", dev / "node_guid",
                dev / "ports/1/state")
    proc = subprocess.run(
        [*AS_USER, *_user_cli(*args, "--sysfs-path", str(a100.sysfs), "--dev-dir", str(a100.dev))],
        capture_output=True, text=True, env=staging.user_env(), cwd="/", timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in allowed, (proc.returncode, proc.stderr[-2000:])
    if command == "doctor-json":
        json.loads(proc.stdout)

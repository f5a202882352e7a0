"""Hotplug events from a real kernel: rxe devices added, renamed and removed in the
kernel lab VM (../shared/kernel-lab/run-in-vm.sh beside the checkout), one boot.

Inside the VM there is no udevd, so the monitor's udev backend takes the kernel's
own uevents (``netlink="kernel"``); a second monitor polls sysfs.  Both run in the
background while ``rdma link add``/``rdma dev set ... name``/``rdma link del``
change the devices.  The same boot also checks that the udev source equals the
sysfs source on a kernel-made /sys.

Skipped when the VM cannot start (no qemu, no kernel image, not root), except under
``CI=true``, where that is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.conftest import require
from tests.kernel_recipe import RUN_IN_VM, vm_reason

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[1]

MONITOR = textwrap.dedent(
    """
    import json, os, sys
    from sysverbs.monitor import monitor
    kind = sys.argv[1]
    if kind == "udev":
        mon = monitor(timeout=120, actions=None)
    else:
        mon = monitor(timeout=120, backend="poll", poll_interval=0.1)
    print(json.dumps({"backend": mon.backend, "reason": mon.reason}), flush=True)
    open("/run/sv/ready-" + kind, "w").close()
    for e in mon:
        print(json.dumps([e.action, e.subsystem, e.name, e.ibdev, e.seqnum > 0,
                          e.properties.get("DEVPATH_OLD", "").rsplit("/", 1)[-1]]), flush=True)
        if (e.action, e.subsystem, e.name) == ("remove", "infiniband", "rxefoo"):
            break
    """
)

SOURCES = textwrap.dedent(
    """
    import json, sysverbs
    def listing(source):
        devs = sysverbs.get_device_list(source=source, providers="builtin")
        return [(d.name, d.dev_name, d.dev_path, d.ibdev_path, int(d.node_type), d.provider,
                 sysverbs.get_device_guid(d)) for d in devs]
    print(json.dumps({"udev": listing("udev"), "sysfs": listing("sysfs")}))
    """
)

VM_SCRIPT = textwrap.dedent(
    """
    export PYTHONPATH={repo} PYTHONDONTWRITEBYTECODE=1
    PY={python}
    mkdir -p /run/sv
    $PY {scripts}/monitor.py udev > /run/sv/udev.jsonl 2> /run/sv/udev.err &
    U=$!
    $PY {scripts}/monitor.py poll > /run/sv/poll.jsonl 2> /run/sv/poll.err &
    P=$!
    start=$(date +%s)
    while [ ! -e /run/sv/ready-udev ] || [ ! -e /run/sv/ready-poll ]; do
      [ $(( $(date +%s) - start )) -gt 150 ] && break
      {{ kill -0 $U && kill -0 $P; }} 2>/dev/null || break
      sleep 0.2
    done
    rdma link add rxe0 type rxe netdev dummy0
    sleep 1.5
    echo "===SOURCES"; $PY {scripts}/sources.py
    rdma dev set rxe0 name rxefoo
    sleep 1.5
    rdma link del rxefoo
    wait $U $P
    echo "===UDEV"; cat /run/sv/udev.jsonl /run/sv/udev.err
    echo "===POLL"; cat /run/sv/poll.jsonl /run/sv/poll.err
    echo "===END"
    """
)


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current: Optional[str] = None
    for line in text.splitlines():
        if line.startswith("===") and line[3:].isalpha():
            current = line[3:]
            out[current] = []
        elif current is not None and line.strip():
            out[current].append(line)
    return out


@pytest.fixture(scope="module")
def vm_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require(vm_reason(), "kernel lab VM")
    scripts = tmp_path_factory.mktemp("vm")  # below /tmp: the VM sees it, read-only
    os.chmod(scripts, 0o755)
    (scripts / "monitor.py").write_text(MONITOR)
    (scripts / "sources.py").write_text(SOURCES)
    script = VM_SCRIPT.format(repo=ROOT, python=sys.executable, scripts=scripts)
    seconds = int(os.environ.get("VM_TIMEOUT", "1500"))
    env = dict(os.environ, VM_TIMEOUT=str(seconds))
    proc = subprocess.run([str(RUN_IN_VM), script], capture_output=True, text=True,
                          timeout=seconds + 60, env=env)
    if "===END" not in proc.stdout:
        reason = (f"the VM did not run the script (exit {proc.returncode}): "
                  f"{(proc.stderr or proc.stdout)[-2000:]}")
        if proc.returncode in (2, 3):  # run-in-vm.sh: no kernel / no boot
            require(reason, "kernel lab VM")
        pytest.fail(reason)
    sections = _sections(proc.stdout)
    return {"raw": proc.stdout, **sections}


def _events(lines: list[str]) -> tuple[dict[str, str], list[list[Any]]]:
    head = json.loads(lines[0])
    events = [json.loads(line) for line in lines[1:] if line.startswith("[")]
    return head, events


def test_kernel_uevents(vm_run: dict[str, Any]) -> None:
    head, events = _events(vm_run["UDEV"])
    assert head["backend"] == "kernel", vm_run["raw"]
    assert "no udevd" in head["reason"]
    # ib_register_device() suppresses the IB device's "add" until its clients (uverbs)
    # are set up, so the kernel announces uverbs0 first.
    assert events == [
        ["add", "infiniband_verbs", "uverbs0", "rxe0", True, ""],
        ["add", "infiniband", "rxe0", "rxe0", True, ""],
        ["move", "infiniband", "rxefoo", "rxefoo", True, "rxe0"],
        ["remove", "infiniband_verbs", "uverbs0", "rxefoo", True, ""],
        ["remove", "infiniband", "rxefoo", "rxefoo", True, ""],
    ], vm_run["raw"]


def test_polling_sees_the_same_devices(vm_run: dict[str, Any]) -> None:
    head, events = _events(vm_run["POLL"])
    assert head["backend"] == "poll"
    assert events == [
        ["add", "infiniband", "rxe0", "rxe0", False, ""],
        ["add", "infiniband_verbs", "uverbs0", "rxe0", False, ""],
        # a rename is a remove and an add to a poller
        ["remove", "infiniband", "rxe0", "rxe0", False, ""],
        ["add", "infiniband", "rxefoo", "rxefoo", False, ""],
        ["remove", "infiniband_verbs", "uverbs0", "rxefoo", False, ""],
        ["remove", "infiniband", "rxefoo", "rxefoo", False, ""],
    ], vm_run["raw"]


def test_udev_source_equals_sysfs_source_on_a_real_kernel(vm_run: dict[str, Any]) -> None:
    (line,) = [x for x in vm_run["SOURCES"] if x.startswith("{")]
    result = json.loads(line)
    assert result["udev"] == result["sysfs"]
    assert [d[0] for d in result["udev"]] == ["rxe0"]
    assert result["udev"][0][5] == "rxe"

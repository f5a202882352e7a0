"""The kernel lab's ``access`` scenario (``scenario_access.py``): each situation made
for real, the real tool's outcome beside ``sysverbs doctor --json``'s finding (code and
evidence) in the same VM, under the same conditions.

* ``netns_exclusive``: in ns2 (exclusive mode) with the VM's own /sys, /sys shows rxea,
  ``ibv_devices`` lists nothing, sysverbs says ``netns_exclusive`` for rxea; in
  init_net ``ibv_devices`` lists it and sysverbs finds it usable;
* ``no_ipc_lock``: root without CAP_IPC_LOCK, 64 KiB memlock: ``ibv_rc_pingpong`` cannot
  register its 1 MiB buffer and sysverbs says ``no_ipc_lock``; with the capability the
  same command registers (it fails later, connecting) and sysverbs says nothing;
* ``device_cgroup_denied``: in a cgroup v1 devices child that denies ``c 231:*``,
  ``ibv_devinfo -d rxea`` cannot open the device and sysverbs says
  ``device_cgroup_denied``, naming the cgroup;
* no provider config: ``ibv_devices`` lists nothing, sysverbs says
  ``no_providers_installed``.
"""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import pytest

from tests.conftest import require
from tests.kernel.lab import LabResults
from tests.kernel.lab_checks import ibv_devices_rows, run
from tests.kernel.scenario_access import CGROUP, DEVICE, MEMLOCK, STEPS

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(3600)]


def _steps(lab: LabResults) -> dict[str, dict[str, Any]]:
    scen = lab.scenario("access")
    setup = scen["events"][0]
    assert setup["op"] == "sh" and setup["rc"] == 0, (setup, lab.workdir)
    assert "netns exclusive" in setup["stdout"], setup["stdout"]
    return {name: run(scen, name) for name, _ in STEPS}


def _doctor(step: dict[str, Any]) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """The host findings (code -> message) and the devices of a ``doctor --json``."""
    assert step["rc"] in (0, 1), step
    doc = json.loads(step["stdout"])
    return ({h["code"]: h["message"] for h in doc["host"]},
            {d["name"]: d for d in doc["devices"]})


def _codes(device: dict[str, Any]) -> list[str]:
    return [r["code"] for r in device["reasons"]]


def test_netns_exclusive(lab: LabResults) -> None:
    # (the lockstep scenarios before it may leave devices of their own in init_net)
    s = _steps(lab)
    in_init = {n for n, _ in ibv_devices_rows(s["init:ibv_devices"]["stdout"])}
    seen = set(s["ns:ls"]["stdout"].split())  # /sys, mounted in init_net, shows them
    assert DEVICE in in_init and seen == in_init
    assert ibv_devices_rows(s["ns:ibv_devices"]["stdout"]) == []  # libibverbs does not
    _, devices = _doctor(s["ns:doctor"])
    assert set(devices) == seen
    for d in devices.values():
        assert _codes(d) == ["netns_exclusive"] and not d["listed"] and not d["usable"]
        assert "exclusive netns mode" in d["reasons"][0]["message"]
    _, devices = _doctor(s["init:doctor"])
    assert devices[DEVICE]["usable"]
    assert not any("netns_exclusive" in _codes(d) for d in devices.values())


def test_no_ipc_lock(lab: LabResults) -> None:
    s = _steps(lab)
    caps = dict(line.split(":\t") for line in s["nocap:caps"]["stdout"].splitlines())
    assert not int(caps["CapEff"], 16) >> 14 & 1 and not int(caps["CapBnd"], 16) >> 14 & 1
    assert s["nocap:pingpong"]["rc"] != 0
    assert "Couldn't register MR" in s["nocap:pingpong"]["stderr"]
    host, devices = _doctor(s["nocap:doctor"])
    assert f"RLIMIT_MEMLOCK, {MEMLOCK} bytes" in host["no_ipc_lock"]
    assert "memlock_low" not in host and devices[DEVICE]["usable"]
    # with CAP_IPC_LOCK the same limit does not apply: registered, then no server
    assert "Couldn't register MR" not in s["cap:pingpong"]["stderr"]
    assert "Couldn't connect" in s["cap:pingpong"]["stderr"]
    host, _ = _doctor(s["cap:doctor"])
    assert not {"no_ipc_lock", "memlock", "memlock_low"} & set(host)


def test_device_cgroup_denied(lab: LabResults) -> None:
    s = _steps(lab)
    assert s["cg:devinfo"]["rc"] != 0
    assert "Failed to open device" in s["cg:devinfo"]["stderr"]
    _, devices = _doctor(s["cg:doctor"])
    d = devices[DEVICE]
    assert _codes(d) == ["device_cgroup_denied"] and d["listed"] and not d["usable"]
    cgroup = CGROUP.rsplit("/", 1)[-1]
    assert f"/{cgroup} (cgroup v1 devices)" in d["reasons"][0]["message"]


def test_provider_config_removed(lab: LabResults) -> None:
    s = _steps(lab)
    real = s["noconf:ibv_devices"]
    assert real["rc"] == 0 and ibv_devices_rows(real["stdout"]) == []
    host, devices = _doctor(s["noconf:doctor"])
    d = devices[DEVICE]
    assert not d["listed"] and not d["usable"] and "no_providers_installed" in host


def test_ucx_sees_what_libibverbs_sees(lab: LabResults) -> None:
    """UCX's view (ucx-utils: the VM runs this machine's disk) in ns2 and in init_net."""
    require(None if shutil.which("ucx_info") else "ucx_info is not installed "
            "(apt-get install ucx-utils)", "UCX (ucx-utils)")
    s = _steps(lab)
    devices = {where: set(re.findall(r"#\s+Device: (\S+)", s[f"{where}:ucx_info"]["stdout"]))
               for where in ("ns", "init")}
    assert f"{DEVICE}:1" in devices["init"], devices
    assert not {d for d in devices["ns"] if d.split(":")[0] == DEVICE}, devices

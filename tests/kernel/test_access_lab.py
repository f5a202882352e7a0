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
  ``no_providers_installed``;
* libfabric's verbs provider: in each of these situations, and with FI_VERBS_IFACE,
  FI_VERBS_DEVICE_NAME, rdma_cm loaded or not, sva0 with or without an address, and on
  the roce scenario's addressed wire, Debian's ``fi_info -p verbs`` lists the
  (provider, domain, type) entries ``doctor --predict`` predicts.
"""

from __future__ import annotations

import json
import re
import shutil
from typing import Any, Optional

import pytest

from tests.conftest import require
from tests.fabric_oracle import fi_info_entries, predicted
from tests.kernel.lab import VM_PATH, LabResults
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


# ------------------------------------------------- libfabric's verbs provider (fi_info)

NONE = "no verbs domain (fi_getinfo -61)"
MSG = ("verbs", "rxea", "FI_EP_MSG")
DGRAM = {("verbs", "rxea-dgram", "FI_EP_DGRAM"), ("verbs;ofi_rxd", "rxea-dgram", "FI_EP_RDM")}
#: rxea's entries in each situation (scenario_access.FABRIC and fabric_steps), and how the
#: prediction's reason ends where every device shares it (None: other devices the earlier
#: scenarios left in init_net may give theirs).  No rdma_cm but in cm-noaddr: no ofi_rxm.
FABRIC_WANT: dict[str, tuple[set[tuple[str, str, str]], Optional[str]]] = {
    "ns": (set(), "netns_exclusive"),
    "init": ({MSG, *DGRAM}, None),       # the GID (AF_IB) without any IPv4 address
    "nocap": ({MSG, *DGRAM}, None),      # listing registers no memory
    "cg": (set(), ": device_cgroup_denied"),
    "noconf": (set(), "provider_not_installed"),
    "devname": ({MSG, *DGRAM}, "no_rdma_cm: no ofi_rxm (its rdma_create_id fails)"),
    "cm-noaddr": (DGRAM, ": FI_VERBS_IFACE=sva0 leaves it no address"),
}
#: the roce scenario's wire set-up, rdma_cm loaded, FI_VERBS_IFACE=vc: rxec (on vc) has
#: MSG and ofi_rxm through vc's addresses, rxed (on vd) DGRAM only
WIRE_WANT = {(p, f"rxec{s}", t) for p, s, t in (
    ("verbs", "", "FI_EP_MSG"), ("verbs;ofi_rxm", "", "FI_EP_RDM"),
    ("verbs", "-dgram", "FI_EP_DGRAM"), ("verbs;ofi_rxd", "-dgram", "FI_EP_RDM"))} | {
    ("verbs", "rxed-dgram", "FI_EP_DGRAM"), ("verbs;ofi_rxd", "rxed-dgram", "FI_EP_RDM")}


def _fabric(scen: dict[str, Any], name: str) -> tuple[dict[str, Any], dict[str, Any],
                                                     set[tuple[str, str, str]]]:
    """fi_info's step, the prediction of the situation's doctor step, and the entries
    both list (asserted equal)."""
    require(None if shutil.which("fi_info", path=VM_PATH) else "fi_info is not installed "
            "(apt-get install libfabric-bin)", "libfabric's fi_info")
    real, ours = run(scen, f"{name}:fi_info"), run(scen, f"{name}:doctor")
    assert real["rc"] in (0, 61) and ours["rc"] in (0, 1), (real, ours)
    pred, entries = predicted(ours["stdout"])
    assert fi_info_entries(real["stdout"]) == entries, (name, real["stdout"], pred)
    assert (real["rc"] == 61) == (pred["outcome"] == NONE), (real["rc"], pred)
    return real, pred, entries


@pytest.mark.parametrize("name", list(FABRIC_WANT))
def test_fi_info_lists_what_doctor_predicts(lab: LabResults, name: str) -> None:
    """``fi_info -p verbs`` and ``doctor --predict`` in each access situation: the same
    (provider, domain, type) entries, rxea's as read in libfabric's source."""
    scen = lab.scenario("access")
    real, pred, entries = _fabric(scen, name)
    want, reason = FABRIC_WANT[name]
    assert {e for e in entries if e[1].split("-")[0] == DEVICE} == want, (name, pred)
    if reason is not None:
        assert pred["reason"].endswith(reason), pred
    if name == "devname":  # FI_VERBS_DEVICE_NAME=RXEA: a prefix, case ignored
        assert {e[1].split("-")[0] for e in entries} == {DEVICE}
    if name == "cm-noaddr":  # rdma_cm there, sva0 without any address: the provider says
        assert run(scen, "cm:load")["rc"] == 0 and run(scen, "cm:noaddr")["stdout"] == ""
        assert f"skipping device: {DEVICE} for FI_EP_MSG" in real["stderr"]


def test_fi_info_on_addresses(lab: LabResults) -> None:
    """The roce scenario's wire set-up (rxec on vc, rxed on vd, IPv4 and IPv6 addresses),
    rdma_cm loaded, FI_VERBS_IFACE=vc: only rxec has MSG endpoints, through vc's address,
    and ofi_rxm on them."""
    scen = lab.scenario("roce")
    _, pred, entries = _fabric(scen, "wire:cm-iface")
    assert {e for e in entries if e[1].startswith(("rxec", "rxed"))} == WIRE_WANT, pred
    assert pred["reason"] == "rxed: no MSG domain: FI_VERBS_IFACE=vc leaves it no address"
    assert run(scen, "wire:cm:load")["rc"] == 0 and run(scen, "wire:cm:unload")["rc"] == 0

"""What every kernel-lab scenario must satisfy, and how its results are read
(tests/kernel/test_kernel_lab.py's checks: each group of emulated processes agrees,
the real tools' outputs beside sysverbs')."""

from __future__ import annotations

import base64
import json
import pickle
from typing import Any

from sysverbs.devices.attributes import DeviceAttributes
from tests.kernel import parsing
from tests.kernel.conftest import unavailable
from tests.kernel.lab import LabResults


def where(lab: LabResults) -> str:
    return f"\n(kernel lab logs and results: {lab.workdir})"


def groups_of(lab: LabResults, name: str) -> dict[str, list[str]]:
    for scen in lab.plan:
        if scen["name"] == name:
            groups: dict[str, list[str]] = scen["groups"]
            return groups
    raise KeyError(name)


def short_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) < 3000 else text[:3000] + "..."


def check(lab: LabResults, name: str) -> dict[str, Any]:
    """Every generic requirement of one scenario; returns its results."""
    scen = lab.scenario(name)
    groups = groups_of(lab, name)
    problems: list[str] = []
    for i, e in enumerate(scen["events"]):
        if e["op"] == "crash":
            problems.append(f"runner crashed: {e['error']}")
        elif e["op"] == "sh" and e["rc"] != 0:
            problems.append(f"setup step failed ({e['rc']}): {e['cmd']!r}: {e['stderr']}")
        elif e["op"] in ("list", "open", "free", "fork"):
            for gname, members in groups.items():
                got = {m: e["results"][m] for m in members if m in e["results"]}
                for m, r in got.items():
                    if "dead" in r:
                        problems.append(f"event {i} {e['op']}: worker {m}: {r}")
                if not got:
                    continue
                ref_name, ref = next(iter(got.items()))
                for m, r in got.items():
                    if r != ref:
                        problems.append(
                            f"event {i} {e['op']} in group {gname}: {m} differs from {ref_name}:\n"
                            f"  {ref_name}: {short_json(ref)}\n  {m}: {short_json(r)}"
                        )
    for gname, members in groups.items():
        workers = {m: scen["workers"][m] for m in members}
        ref_name = members[0]
        for m, w in workers.items():
            if w["status"] != 0:
                problems.append(f"worker {m} exited with {w['status']}: {w['stderr'][-2000:]}")
            if w["stderr"] != workers[ref_name]["stderr"]:
                problems.append(
                    f"stderr of {m} differs from {ref_name} (group {gname}):\n"
                    f"  {ref_name}: {workers[ref_name]['stderr']!r}\n  {m}: {w['stderr']!r}"
                )
    runs = {e["name"]: e for e in scen["events"] if e["op"] in ("cmd", "cli")}
    for real, ours in (("ibv_devices", "sv_devices"), ("ibv_devinfo", "sv_devinfo")):
        for key, e in runs.items():
            if not key.endswith(":" + real):
                continue
            mine = runs[key[: -len(real)] + ours]
            got = (mine["rc"], mine["stdout"], mine["stderr"])
            want = (e["rc"], e["stdout"], e["stderr"])
            if got != want:
                problems.append(f"{key} vs sysverbs: {want!r} != {got!r}")
    assert not problems, "\n".join(problems) + where(lab)
    return scen


def lists(scen: dict[str, Any], worker: str) -> list[dict[str, Any]]:
    """The worker's ``list`` results, in order."""
    return [
        e["results"][worker] for e in scen["events"] if e["op"] == "list" and worker in e["results"]
    ]


def names(result: dict[str, Any]) -> list[str]:
    return [d["name"] for d in result["devices"]]


def run(scen: dict[str, Any], name: str) -> dict[str, Any]:
    for e in scen["events"]:
        if e["op"] in ("cmd", "cli") and e["name"] == name:
            return dict(e)
    raise KeyError(name)


def ibv_devices_rows(stdout: str) -> list[tuple[str, str]]:
    rows = []
    for line in stdout.splitlines()[2:]:
        name, guid = line.split()
        rows.append((name, guid))
    return rows


def check_rdma(
    lab: LabResults, scen: dict[str, Any], tag: str, expect: int, missing: tuple[str, ...] = ()
) -> None:
    """``rdma -j dev`` lists the same devices, GUIDs and order as ``ibv_devices``
    (but for ``missing``)."""
    rdma = run(scen, f"{tag}:rdma")
    ibv = run(scen, f"{tag}:ibv_devices")
    assert rdma["rc"] == 0 and ibv["rc"] == 0, (rdma, ibv, where(lab))
    kernel = [(d["ifname"], d["node_guid"].replace(":", "")) for d in json.loads(rdma["stdout"])]
    assert {name for name, _ in kernel} >= set(missing), where(lab)
    kernel = [row for row in kernel if row[0] not in missing]
    assert ibv_devices_rows(ibv["stdout"]) == kernel, where(lab)
    assert len(kernel) == expect, where(lab)


def check_indices(lab: LabResults, scen: dict[str, Any], tag: str, result: dict[str, Any]) -> None:
    """A first netlink-mode list is in kernel index order, with the kernel's indices."""
    rdma = json.loads(run(scen, f"{tag}:rdma")["stdout"])
    kernel = [(d["ifname"], d["ifindex"], d["node_guid"].replace(":", "")) for d in rdma]
    ours = [(d["name"], d["index"], d["guid"]) for d in result["devices"]]
    assert ours == kernel, where(lab)


def needs_preload(lab: LabResults) -> None:
    if not lab.preload:
        unavailable(f"these scenarios block RDMA netlink with LD_PRELOAD: {lab.preload_reason}")


# -- the attributes scenario's results ---------------------------------------------------------


def attributes(lab: LabResults) -> tuple[dict[str, str], dict[str, Any]]:
    """What the real tools printed (by step name) and what sysverbs said (unpickled)."""
    scen = check(lab, "attributes")
    vm: dict[str, str] = {}
    for e in scen["events"]:
        if e["op"] == "cmd":
            assert e["rc"] == 0, f"{e['name']} failed ({e['rc']}): {e['stderr'][-2000:]}" + where(
                lab
            )
            vm[e["name"]] = e["stdout"]
    ours: dict[str, Any] = pickle.loads(base64.b64decode(vm["pickle"].strip().splitlines()[-1]))
    return vm, ours


def attrs_of(ours: dict[str, Any], name: str) -> DeviceAttributes:
    a: DeviceAttributes = ours["attributes"][name]
    return a


# -- the roce scenario's runs (tests/kernel/scenario_roce.py) --------------------------------


#: The IPv4 address of each rxe device's netdev in the scenario.
ROCE_IPV4 = {"rxea": "192.168.60.1", "rxeb": "192.168.60.2",
             "rxec": "192.168.61.1", "rxed": "192.168.61.2"}


def roce(lab: LabResults) -> dict[str, dict[str, Any]]:
    """``{name: {"rc", "stdout", "stderr"}}`` of the roce scenario's runs (setup checked)."""
    scen = check(lab, "roce")
    return {e["name"]: {"rc": e["rc"], "stdout": parsing.utf8(e["stdout"]),
                        "stderr": parsing.utf8(e["stderr"])}
            for e in scen["events"] if e["op"] in ("cmd", "cli")}


def marked(text: str, mark: str) -> dict[str, str]:
    """``===MARK a=1 b=2`` -> {"a": "1", "b": "2"}."""
    for line in text.splitlines():
        if line.startswith(f"==={mark} "):
            return dict(kv.split("=", 1) for kv in line.split()[1:])
    raise AssertionError(f"no ==={mark} line in {text[-2000:]!r}")


def trials(text: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for block in text.split("===TRIAL ")[1:]:
        head, _, rest = block.partition("\n")
        name, *fields = head.split()
        info: dict[str, Any] = dict(f.split("=", 1) for f in fields)
        client, _, server = rest.partition("---server\n")
        info["client"] = client.replace("---client\n", "", 1)
        info["server"] = server.split("===")[0]
        out[name] = info
    return out


def env_docs(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    docs = {}
    for key in ("ns:env-a", "ns:env-b", "wire:env", "wire:env-all", "wire:env6"):
        assert runs[key]["rc"] == 0, runs[key]["stderr"]
        docs[key] = json.loads(runs[key]["stdout"])
    return docs

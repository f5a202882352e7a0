"""sysverbs against the real libibverbs under a real kernel (rxe devices in a qemu VM).

One VM boot runs every scenario of ``scenarios.py`` (the ``lab`` fixture).  For
each scenario, every group of emulated processes must agree exactly: every
``list``/``open``/``free`` result (names, paths, node and transport types, GUID,
index, device identity across calls, errno) and the stderr bytes.  The real
libibverbs is in every group; ``ibv_devices``/``ibv_devinfo -l`` must equal
``sysverbs devices``/``devinfo -l`` byte for byte, and ``rdma -j dev`` must
agree with the netlink-mode lists.  Each test also checks what libibverbs itself
did where that is the point of the scenario, so that a broken harness cannot
pass by comparing two empty results.
"""

from __future__ import annotations

import errno
import json
from typing import Any

import pytest

from tests.kernel.conftest import unavailable
from tests.kernel.lab import LabResults

pytestmark = pytest.mark.kernel


def where(lab: LabResults) -> str:
    return f"\n(kernel lab logs and results: {lab.workdir})"


def groups_of(lab: LabResults, name: str) -> dict[str, list[str]]:
    for scen in lab.plan:
        if scen["name"] == name:
            groups: dict[str, list[str]] = scen["groups"]
            return groups
    raise KeyError(name)


def _short(value: Any) -> str:
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
                            f"  {ref_name}: {_short(ref)}\n  {m}: {_short(r)}"
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


# -- scenarios --------------------------------------------------------------------------------


def test_zero_devices(lab: LabResults) -> None:
    scen = check(lab, "zero_devices")
    assert lists(scen, "nl_lib") == [{"devices": [], "op": "list"}] * 2, where(lab)
    check_rdma(lab, scen, "t", 0)


def test_one_device(lab: LabResults) -> None:
    scen = check(lab, "one_device")
    (first,) = lists(scen, "nl_lib")
    assert names(first) == ["solo"], where(lab)
    check_indices(lab, scen, "t", first)
    check_rdma(lab, scen, "t", 1)


def _readdir(scen: dict[str, Any]) -> list[str]:
    out = [e for e in scen["events"] if e["op"] == "sh" and "ls -f" in e["cmd"]][0]["stdout"]
    return [n for n in out.split() if n.startswith("uverbs")][: out.count("uverbs")]


def test_order8(lab: LabResults) -> None:
    scen = check(lab, "order8")
    first, second = lists(scen, "nl_lib")
    assert len(first["devices"]) == 8 and second == first, where(lab)
    (fork,) = [e["results"] for e in scen["events"] if e["op"] == "fork"]
    assert fork["nl_lib"]["status"] == 2, where(lab)  # UNNEEDED: the kernel has copy-on-fork
    if "fb_lib" in fork:
        assert fork["fb_lib"]["status"] == 0, where(lab)  # no netlink: DISABLED
    check_indices(lab, scen, "t", first)
    check_rdma(lab, scen, "t", 8)
    # The point of the scenario: index order, name order and readdir order all differ.
    by_uverbs = {d["dev_name"]: d["name"] for d in first["devices"]}
    readdir = [by_uverbs[u] for u in _readdir(scen) if u in by_uverbs]
    assert len(readdir) == 8, where(lab)
    index_order = names(first)
    assert len({tuple(index_order), tuple(readdir), tuple(sorted(index_order))}) == 3, where(lab)
    if not lab.preload:
        return
    # Fallback (sysfs) mode: readdir order, index -1, and rxe devices found by name only.
    fb = lists(scen, "fb_lib")[0]["devices"]
    assert [d["name"] for d in fb] == [n for n in readdir if n.startswith("rxe")], where(lab)
    assert all(d["index"] == -1 for d in fb), where(lab)
    warned = [
        line.rsplit(" ", 1)[1]
        for line in scen["workers"]["fb_lib"]["stderr"].splitlines()
        if "no userspace device-specific driver" in line
    ]
    unmatched = [n for n in reversed(readdir) if not n.startswith("rxe")]
    assert warned == unmatched * 2, where(lab)  # reverse readdir order, on each call


def test_lifetime(lab: LabResults) -> None:
    scen = check(lab, "lifetime")
    l0, l1, l2, l3, l4 = lists(scen, "nl_lib")
    ids0 = [(d["id"], d["name"]) for d in l0["devices"]]
    assert [x for x in ids0 if x[1] != "rxe4"] == [(d["id"], d["name"]) for d in l1["devices"]]
    # re-added: a new device (new index, new identity) in front, the others kept
    assert l2["devices"][0]["name"] == "rxe4", where(lab)
    assert l2["devices"][0]["id"] not in {i for i, _ in ids0}, where(lab)
    assert l2["devices"][0]["index"] > max(d["index"] for d in l0["devices"]), where(lab)
    assert l2["devices"][1:] == l1["devices"], where(lab)
    assert names(l3)[0] == "new_1" and l3["devices"][1:] == l2["devices"], where(lab)
    assert l4 == l2, where(lab)
    check_rdma(lab, scen, "t", 8)


def test_rename(lab: LabResults) -> None:
    scen = check(lab, "rename")
    l0, l1, l2, l3 = lists(scen, "nl_lib")
    # Same index and uverbs name: libibverbs keeps the device object and its old name.
    assert l1 == l0 and l2 == l0 and l3 == l0, where(lab)
    assert "omega" in names(l0), where(lab)
    check_rdma(lab, scen, "t1", 8)
    assert "renamed_omega" in run(scen, "t1:ibv_devices")["stdout"], where(lab)
    assert "qq " in run(scen, "t2:ibv_devices")["stdout"], where(lab)


def test_dev_nodes(lab: LabResults) -> None:
    scen = check(lab, "dev_nodes")
    l0, l1, l2 = lists(scen, "nl_lib")
    # libibverbs stats /dev/infiniband/<uverbs> in netlink mode too: a missing node
    # drops the device; an unreadable one does not.
    assert "yy" in names(l0) and names(l1) == [n for n in names(l0) if n != "yy"], where(lab)
    assert l2 == l1, where(lab)
    (u0,) = lists(scen, "u_nl_lib")
    assert names(u0) == names(l1), where(lab)
    opens = [
        e["results"]["u_nl_lib"]
        for e in scen["events"]
        if e["op"] == "open" and "u_nl_lib" in e["results"]
    ]
    a0 = names(u0).index("a0")
    assert opens[a0]["errno"] != 0, where(lab)  # mode 000 node, unprivileged
    assert all(o["errno"] == 0 for i, o in enumerate(opens[: len(u0["devices"])]) if i != a0)
    check_rdma(lab, scen, "t", 7, missing=("yy",))


def test_unprivileged(lab: LabResults) -> None:
    scen = check(lab, "unprivileged")
    assert scen["workers"]["nl_lib"]["stderr"].startswith(
        "libibverbs: Warning: RLIMIT_MEMLOCK is 32768 bytes.\n"
    ), where(lab)
    l0, l1 = lists(scen, "nl_lib")
    assert len(l0["devices"]) == 8 and l1 == l0, where(lab)


def test_chardev_blocked_real_sysfs(lab: LabResults) -> None:
    needs_preload(lab)
    scen = check(lab, "chardev_blocked_sysfs")
    # rxe devices have no <ibdev_path>/device link: the fallback fails for each one.
    assert lists(scen, "cd_sys_lib") == [{"devices": [], "op": "list"}] * 2, where(lab)


def test_chardev_fallback(lab: LabResults) -> None:
    needs_preload(lab)
    scen = check(lab, "chardev_fallback")
    l0, l1 = lists(scen, "chardev_fallback_lib")
    assert l0["devices"] and l1 == l0, where(lab)
    assert all(d["index"] >= 0 and d["dev_path"].startswith("/run/fake6/") for d in l0["devices"])
    stderr = scen["workers"]["chardev_fallback_lib"]["stderr"]
    assert "does not support the kernel ABI of 7" in stderr, where(lab)


def test_chardev_fallback_class_abi(lab: LabResults) -> None:
    needs_preload(lab)
    scen = check(lab, "chardev_fallback_abi7")
    l0, l1 = lists(scen, "chardev_fallback_abi7_lib")
    # No GET_CHARDEV reply was accepted, so the global ABI is read from sysfs: 7 is
    # fatal on the first call and (cached, non-zero) accepted on the second.
    assert l0 == {"errno": errno.ENOSYS, "op": "list"} and l1["devices"], where(lab)
    assert scen["workers"]["chardev_fallback_abi7_lib"]["stderr"].startswith(
        "libibverbs: Fatal: kernel ABI version 7 doesn't match library version 6.\n"
    ), where(lab)


def test_dump_blocked(lab: LabResults) -> None:
    needs_preload(lab)
    scen = check(lab, "dump_blocked")
    l0, l1 = lists(scen, "dump_lib")
    assert l0["devices"] and l1 == l0, where(lab)
    assert all(d["index"] == -1 for d in l0["devices"]), where(lab)  # sysfs mode
    assert lists(scen, "dump_nl")[0] == {"errno": errno.EINVAL, "op": "list"}, where(lab)


def test_long_sysfs_path_no_room(lab: LabResults) -> None:
    scen = check(lab, "long_root_a")
    l0, l1 = lists(scen, "long_root_a_nl_lib")
    assert l0 == l1 == {"devices": [], "op": "list"}, where(lab)
    assert "no userspace device-specific driver" in scen["workers"]["long_root_a_nl_lib"]["stderr"]


def test_long_sysfs_path_cut_dump(lab: LabResults) -> None:
    scen = check(lab, "long_root_b")
    l0, l1 = lists(scen, "long_root_b_nl_lib")
    assert 0 < len(l0["devices"]) < 8 and l1 == l0, where(lab)


def test_netns(lab: LabResults) -> None:
    scen = check(lab, "netns")
    (shared,) = lists(scen, "ns1_nl_lib")
    (exclusive,) = lists(scen, "ex_nl_lib")
    (init,) = lists(scen, "init_nl_lib")
    assert len(shared["devices"]) == 8 and names(init) == names(shared), where(lab)
    assert exclusive == {"devices": [], "op": "list"}, where(lab)
    check_rdma(lab, scen, "shared", 8)
    check_rdma(lab, scen, "exclusive", 0)
    check_rdma(lab, scen, "exclusive_init", 8)


def test_no_ib_core(lab: LabResults) -> None:
    scen = check(lab, "no_ib_core")
    assert lists(scen, "nl_lib") == [{"errno": errno.ENOSYS, "op": "list"}], where(lab)
    assert lists(scen, "nl_nl") == [{"errno": errno.EPROTONOSUPPORT, "op": "list"}], where(lab)
    assert run(scen, "t:ibv_devices")["rc"] == 1, where(lab)

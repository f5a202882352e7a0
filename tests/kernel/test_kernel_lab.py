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

The same boot first runs three scenarios that compare sysverbs with the real tools
(their tests are at the end of this file):

* ``hotplug``: kernel uevents (no udevd in the VM: the monitor's udev backend takes
  the kernel's own) and a polling monitor while rxe0 is added, renamed and removed;
  the udev source equals the sysfs source;
* ``attributes``: attributes, topology and diagnose against ``rdma -j link``,
  ``ibv_devinfo -v`` and ``cat`` of the sysfs files; ``rdma_get_devices`` against the
  real librdmacm;
* ``cli_tools``: the ``sysverbs`` command against ``ibv_devices``, ``ibv_devinfo``
  (every variant, error paths byte-identical) and ``rdma link``; ``doctor``,
  ``devinfo --json``, ``snapshot``.

How a scenario's results are checked and read is tests/kernel/lab_checks.py's.  The
boot's other scenarios have their own files (test_metrics_lab.py, test_numa_lab.py).
"""

from __future__ import annotations

import errno
import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import pytest

from sysverbs.cli.devinfo import QUERY_ONLY_DEVICE, QUERY_ONLY_PORT, UNAVAILABLE
from sysverbs.devices.attributes import GidType, LinkLayer, PhysState, PortState
from tests.kernel import parsing
from tests.kernel.lab import LabResults
from tests.kernel.lab_checks import (
    ROCE_IPV4,
    attributes,
    attrs_of,
    check,
    check_indices,
    check_rdma,
    env_docs,
    lists,
    marked,
    names,
    needs_preload,
    roce,
    run,
    trials,
    where,
)
from tests.kernel.scenarios import CLI_PAIRS

# The first test waits for the lab's boot (minutes under TCG; at most SV_VM_TIMEOUT,
# 1200 s by default, per boot, whose own limit ends a stuck VM): more than the 300 s
# that pyproject.toml gives every other test.
pytestmark = [pytest.mark.kernel, pytest.mark.timeout(3600)]


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


# -- hotplug: kernel uevents and polling ------------------------------------------------------


def hotplug(lab: LabResults) -> dict[str, Any]:
    """The sections the ``hotplug`` script printed (and ``raw``: all of it)."""
    scen = check(lab, "hotplug")
    e = run(scen, "hotplug")
    raw = f"{e['stdout']}\n(stderr) {e['stderr']}{where(lab)}"
    assert "===END" in e["stdout"], f"the hotplug script did not finish (rc {e['rc']}): {raw}"
    return {"raw": raw, **parsing.sections(e["stdout"])}


def test_kernel_uevents(lab: LabResults) -> None:
    vm = hotplug(lab)
    head, events = parsing.events(vm["UDEV"])
    assert head["backend"] == "kernel", vm["raw"]
    assert "no udevd" in head["reason"]
    # ib_register_device() suppresses the IB device's "add" until its clients (uverbs)
    # are set up, so the kernel announces uverbs0 first.
    assert events == [
        ["add", "infiniband_verbs", "uverbs0", "rxe0", True, ""],
        ["add", "infiniband", "rxe0", "rxe0", True, ""],
        ["move", "infiniband", "rxefoo", "rxefoo", True, "rxe0"],
        ["remove", "infiniband_verbs", "uverbs0", "rxefoo", True, ""],
        ["remove", "infiniband", "rxefoo", "rxefoo", True, ""],
    ], vm["raw"]


def test_polling_sees_the_same_devices(lab: LabResults) -> None:
    vm = hotplug(lab)
    head, events = parsing.events(vm["POLL"])
    assert head["backend"] == "poll"
    assert events == [
        ["add", "infiniband", "rxe0", "rxe0", False, ""],
        ["add", "infiniband_verbs", "uverbs0", "rxe0", False, ""],
        # a rename is a remove and an add to a poller
        ["remove", "infiniband", "rxe0", "rxe0", False, ""],
        ["add", "infiniband", "rxefoo", "rxefoo", False, ""],
        ["remove", "infiniband_verbs", "uverbs0", "rxefoo", False, ""],
        ["remove", "infiniband", "rxefoo", "rxefoo", False, ""],
    ], vm["raw"]


def test_udev_source_equals_sysfs_source_on_a_real_kernel(lab: LabResults) -> None:
    vm = hotplug(lab)
    (line,) = [x for x in vm["SOURCES"] if x.startswith("{")]
    result = json.loads(line)
    assert result["udev"] == result["sysfs"]
    assert [d[0] for d in result["udev"]] == ["rxe0"]
    assert result["udev"][0][5] == "rxe"


# -- attributes, topology, diagnose, rdma_get_devices -----------------------------------------
# rxe0 on dummy0 (up, IPv4 and IPv6 addresses), rxe1 on a veth whose peer is down.


def test_two_devices_seen(lab: LabResults) -> None:
    vm, ours = attributes(lab)
    assert sorted(ours["attributes"]) == ["rxe0", "rxe1"]
    assert sorted(parsing.devinfo(vm["devinfo"])) == ["rxe0", "rxe1"]


def test_ports_match_rdma_link(lab: LabResults) -> None:
    vm, ours = attributes(lab)
    links = json.loads(vm["rdma_link"])
    assert len(links) == 2
    for link in links:
        attrs = attrs_of(ours, link["ifname"])
        port = attrs.port(link["port"])
        assert port is not None
        assert port.state is not None and port.state.name == link["state"]
        assert port.phys_state is not None and port.phys_state.name == link["physical_state"]
        topo = ours["topology"][link["ifname"]]
        assert topo.port_netdevs(link["port"])[0] == link["netdev"]
        assert topo.netdevs[0].ifindex == link["netdev_index"]
    states = {n: a.ports[0].state for n, a in ours["attributes"].items()}
    assert states == {"rxe0": PortState.ACTIVE, "rxe1": PortState.DOWN}
    assert attrs_of(ours, "rxe1").ports[0].phys_state is PhysState.POLLING


def test_attributes_match_ibv_devinfo(lab: LabResults) -> None:
    vm, ours = attributes(lab)
    info = parsing.devinfo(vm["devinfo"])
    paren = parsing.paren
    for name, dev in info.items():
        attrs = attrs_of(ours, name)
        assert f"{attrs.node_guid:016x}" == dev["dev"]["node_guid"].replace(":", "")
        assert f"{attrs.sys_image_guid:016x}" == dev["dev"]["sys_image_guid"].replace(":", "")
        assert len(attrs.ports) == int(dev["dev"]["phys_port_cnt"])
        for number, p in dev["ports"].items():
            port = attrs.port(number)
            assert port is not None and port.rate is not None
            assert port.state is not None and int(port.state) == paren(p["state"])
            assert port.phys_state is not None and int(port.phys_state) == paren(p["phys_state"])
            assert port.rate.width_code == paren(p["active_width"])
            assert port.rate.speed_code == paren(p["active_speed"])
            assert port.lid == int(p["port_lid"], 0) and port.sm_lid == int(p["sm_lid"], 0)
            assert port.lid_mask_count == int(p["port_lmc"], 16)
            assert port.sm_sl == int(p["sm_sl"])
            assert port.cap_mask == int(p["port_cap_flags"], 16)
            assert port.link_layer is LinkLayer.ETHERNET and p["link_layer"] == "Ethernet"
            assert port.gid_tbl_len == int(p["gid_tbl_len"])
            assert port.pkey_tbl_len == int(p["pkey_tbl_len"])
            types = {"RoCE v2": GidType.ROCE_V2, "RoCE v1": GidType.ROCE_V1, "IB": GidType.IB}
            assert [(g.index, g.gid, g.type) for g in port.gids] == [
                (i, gid, types[t]) for i, gid, t in p["gids"]
            ]
    rxe0 = attrs_of(ours, "rxe0").ports[0]
    assert ipaddress.IPv6Address("::ffff:192.168.7.1") in [g.gid for g in rxe0.gids]
    assert ipaddress.IPv6Address("fd00::1") in [g.gid for g in rxe0.gids]


def test_raw_text_is_what_cat_prints(lab: LabResults) -> None:
    vm, ours = attributes(lab)
    checked = 0
    for line in vm["cat"].splitlines():
        parts = line.split("\t", 2)
        if len(parts) != 3:
            continue
        dev, rel, text = parts
        text = text[:-1] if text.endswith("|") else text  # cat's newline
        attrs = attrs_of(ours, dev)
        if rel.startswith("ports/1/"):
            sub = rel[len("ports/1/") :]
            port = attrs.ports[0]
            if sub in port.raw:
                assert port.raw[sub] == text, (dev, rel)
            elif sub == "gids/0":
                assert port.gids[0].raw == text
            elif sub == "gid_attrs/types/0":
                assert port.gids[0].raw_type == text
            elif sub == "gid_attrs/ndevs/0":
                assert port.gids[0].ndev == text
            elif sub == "pkeys/0":
                assert port.pkeys[0] == (0, int(text, 16))
        else:
            assert attrs.raw[rel] == text, (dev, rel)
        checked += 1
    assert checked >= 30


def test_topology_of_soft_roce(lab: LabResults) -> None:
    _, ours = attributes(lab)
    for name, netdev in (("rxe0", "dummy0"), ("rxe1", "v0")):
        topo = ours["topology"][name]
        assert topo.pci is None and topo.auxiliary is None  # virtual devices
        assert [(n.name, n.via) for n in topo.netdevs] == [(netdev, "gid_attrs")]
        uverbs = [c for c in topo.char_devices if c.kind == "uverbs"]
        assert len(uverbs) == 1 and uverbs[0].node_ok  # the kernel's own /dev node
        assert attrs_of(ours, name).parent == netdev
    cm = [c for c in ours["topology"]["rxe0"].char_devices if c.kind == "rdma_cm"]
    if cm:  # rdma_ucm could be loaded
        assert cm[0].node_ok and cm[0].abi_version == 4


def test_diagnose_under_a_real_kernel(lab: LabResults) -> None:
    _, ours = attributes(lab)
    devices, host = ours["diagnose"]
    by_name = {d.name: d for d in devices}
    assert sorted(by_name) == ["rxe0", "rxe1"]
    for d in devices:
        assert d.listed and d.usable and d.provider == "rxe", d
    assert [r.code for r in by_name["rxe0"].reasons] == []
    assert [(r.code, r.port) for r in by_name["rxe1"].reasons] == [("port_down", 1)]
    assert all(r.severity == "warning" for r in host)


def test_rdma_get_devices_against_real_librdmacm(lab: LabResults) -> None:
    """The real librdmacm (netlink mode) orders by kernel index: rxe0, rxe1.  sysverbs
    orders by index when its device list has kernel indexes (the netlink source) and by
    node GUID otherwise (sysfs source): then rxe1 (…:0001) comes before rxe0 (…:0002)."""
    vm, ours = attributes(lab)
    real = parsing.probe_lines(vm["librdmacm"])
    mine = parsing.probe_lines(vm["sysverbs_rdmacm"])
    real_names = [c["name"] for c in real[0]["contexts"]]
    our_names = [c["name"] for c in mine[0]["contexts"]]
    assert real_names == ["rxe0", "rxe1"]
    assert sorted(real[1]["result"]) == sorted(mine[1]["result"]) == ["rxe0", "rxe1"]
    assert {c["name"]: c["guid"] for c in real[0]["contexts"]} == {
        c["name"]: c["guid"] for c in mine[0]["contexts"]
    }
    if all(i >= 0 for i in ours["indexes"].values()):  # sysverbs used netlink
        assert our_names == real_names
    else:
        assert set(ours["indexes"].values()) == {-1}
        assert our_names == ["rxe1", "rxe0"]
    # sysfs mode, as librdmacm would order them without netlink: by node GUID
    sysfs = parsing.probe_lines(vm["sysverbs_rdmacm_sysfs"])
    assert [c["name"] for c in sysfs[0]["contexts"]] == ["rxe1", "rxe0"]


# -- the sysverbs command against the real tools ----------------------------------------------
# rxe0 on dummy0 and rxe1 on a veth with an IPv4 address (an IPv4-mapped RoCE v2 GID).
# libibverbs in the VM uses RDMA netlink, and so does ``sysverbs`` with the default
# ``--source auto``; ``--source sysfs`` is checked too.


def cli_tools(lab: LabResults) -> dict[str, Any]:
    """``{key: {"real": [rc, stdout, stderr], "ours": [...]}}`` for each pair of
    ``CLI_PAIRS``, ``[rc, stdout, stderr]`` of the other runs, ``operstate``."""
    scen = check(lab, "cli_tools")
    runs = {
        e["name"]: [e["rc"], parsing.utf8(e["stdout"]), parsing.utf8(e["stderr"])]
        for e in scen["events"]
        if e["op"] in ("cmd", "cli")
    }
    vm: dict[str, Any] = {
        key: {"real": runs[f"{key}:real"], "ours": runs[f"{key}:ours"]} for key, _, _ in CLI_PAIRS
    }
    for key in ("rdma-link", "netdev", "netdev-json", "doctor", "devinfo-json", "snapshot"):
        vm[key] = runs[key]
    rc, text, err = runs["operstate"]
    assert rc == 0, err + where(lab)
    vm["operstate"] = dict(zip(("dummy0", "v0"), text.split()))
    return vm


@pytest.mark.parametrize(
    "key",
    [
        "devices",
        "devices-sysfs",
        "devinfo-l",
        "devinfo-l-sysfs",
        "devinfo-i2",
        "devinfo-nope",
        "devinfo-i0",
        "devinfo-l-i0",
    ],
)
def test_cli_byte_identical(lab: LabResults, key: str) -> None:
    vm = cli_tools(lab)
    real, ours = vm[key]["real"], vm[key]["ours"]
    assert ours == real
    if key.startswith("devices"):
        assert "rxe0" in real[1] and "rxe1" in real[1]
    if key == "devinfo-i2":
        assert real[0] == 4


_DEVICE_ONLY = {name for name, _ in QUERY_ONLY_DEVICE}
#: the lines of plain ibv_devinfo that only a device query knows
PLAIN_UNAVAILABLE = {"vendor_id", "vendor_part_id", "hw_ver", "max_mtu", "active_mtu", "fw_ver"}


@pytest.mark.parametrize("key", ["devinfo", "devinfo-v", "devinfo-v-sysfs", "devinfo-d-i"])
def test_cli_devinfo_same_where_sysfs_knows(lab: LabResults, key: str) -> None:
    vm = cli_tools(lab)
    label, compare_lines = parsing.label, parsing.compare_lines
    real, ours = vm[key]["real"], vm[key]["ours"]
    assert (ours[0], ours[2]) == (real[0], real[2]) == (0, "")
    rb, ob = parsing.blocks(real[1]), parsing.blocks(ours[1])
    assert [h[0] for h, _ in ob] == [h[0] for h, _ in rb]
    assert len(rb) == (1 if key == "devinfo-d-i" else 2)
    seen: set[str] = set()
    for (rhead, rports), (ohead, oports) in zip(rb, ob):
        # the device lines up to phys_port_cnt; -v's capability block only a query knows
        cut = [label(x) for x in rhead].index("phys_port_cnt") + 1
        seen.update(compare_lines(rhead[:cut], ohead[:cut], PLAIN_UNAVAILABLE))
        if "-v" in key:
            assert [label(x) for x in ohead[cut:]] == [name for name, _ in QUERY_ONLY_DEVICE]
            assert all(x.endswith(UNAVAILABLE) for x in ohead[cut:])
        assert len(oports) == len(rports)
        for rp, op in zip(rports, oports):
            seen.update(compare_lines(rp, op, PLAIN_UNAVAILABLE | set(QUERY_ONLY_PORT)))
            if "-v" in key:
                gids = [x for x in rp if "GID[" in x]
                assert gids and all(x in op for x in gids)
    # rxe's sysfs fw_ver is empty while its provider formats "0.0.0"
    expected = {"vendor_id", "vendor_part_id", "hw_ver", "max_mtu", "active_mtu", "fw_ver"}
    if "-v" in key or key == "devinfo-d-i":
        expected |= set(QUERY_ONLY_PORT)
    assert seen == expected
    assert not (_DEVICE_ONLY & seen)


def test_cli_devinfo_shows_an_ipv4_mapped_gid_as_inet_ntop(lab: LabResults) -> None:
    vm = cli_tools(lab)
    real = vm["devinfo-d-i"]["real"][1]
    assert "::ffff:192.168.77.1, RoCE v2" in real
    assert "::ffff:192.168.77.1, RoCE v2" in vm["devinfo-d-i"]["ours"][1]


def test_cli_netdev_matches_rdma_link(lab: LabResults) -> None:
    vm = cli_tools(lab)
    rc, text, err = vm["rdma-link"]
    assert rc == 0, err
    expected = []
    for line in text.splitlines():
        m = re.match(r"link (\S+)/(\d+) .*netdev (\S+)", line)
        if m:
            dev, port, nd = m.groups()
            state = "Up" if vm["operstate"][nd] == "up" else "Down"
            expected.append(f"{dev} port {port} ==> {nd} ({state})")
    assert len(expected) == 2
    assert vm["netdev"] == [0, "".join(x + "\n" for x in sorted(expected)), ""]
    doc = json.loads(vm["netdev-json"][1])
    assert doc["schema"] == "sysverbs.netdev/1"
    links = [(x["device"], x["netdev"]) for x in doc["links"]]
    assert links == [("rxe0", "dummy0"), ("rxe1", "v0")]


def test_cli_doctor_says_both_usable(lab: LabResults) -> None:
    rc, text, _ = cli_tools(lab)["doctor"]
    assert rc == 0, text
    assert "rxe0: usable (provider rxe" in text and "rxe1: usable (provider rxe" in text


def test_cli_devinfo_json(lab: LabResults) -> None:
    doc = json.loads(cli_tools(lab)["devinfo-json"][1])
    assert doc["schema"] == "sysverbs.devinfo/1"
    assert [d["hca_id"] for d in doc["devices"]] == ["rxe0", "rxe1"]
    assert doc["devices"][0]["ports"][0]["state"] == "PORT_ACTIVE"


def test_cli_snapshot_of_a_real_kernel(lab: LabResults, tmp_path: Path) -> None:
    import sysverbs
    from sysverbs import testing
    from sysverbs.testing import umockdev

    rc, text, err = cli_tools(lab)["snapshot"]
    assert rc == 0, err
    host = testing.materialize(umockdev.parse(text), tmp_path)
    devs = sysverbs.get_device_list(
        sysfs_path=host.sysfs, dev_dir=host.dev, source="sysfs", providers="builtin"
    )
    assert sorted(d.name for d in devs) == ["rxe0", "rxe1"]


# -- roce: a RoCE connection with the GID index ``sysverbs env`` picks, and UCX ----------------
# (tests/kernel/scenario_roce.py).  ``ns``: rxea/rxeb on a veth pair across two network
# namespaces; ``wire``: rxec/rxed on a veth pair in the initial namespace, policy routing
# sending the traffic over the wire.  The IPv4 GID is at index 1 in ``ns`` and 2 in ``wire``.

def test_roce_gid_index_is_the_ipv4_roce_v2_gid_of_ibv_devinfo(lab: LabResults) -> None:
    runs = roce(lab)
    picked = {}
    for key, doc in env_docs(runs).items():
        devinfo = parsing.devinfo(runs[key.split(":")[0] + ":devinfo"]["stdout"])
        for c in doc["gid_index"]:
            want = ipaddress.IPv6Address("::ffff:" + ROCE_IPV4[c["device"]])
            if key == "wire:env6":  # NCCL_IB_ADDR_FAMILY=AF_INET6: the global IPv6 GID
                want = ipaddress.IPv6Address("fd61::" + ROCE_IPV4[c["device"]][-1])
                assert c["index"] == 1 and c["gid"] == str(want)
            real = [i for i, gid, kind in devinfo[c["device"]]["ports"][1]["gids"]
                    if gid == want and kind == "RoCE v2"]
            assert real and c["index"] == real[0], (c, devinfo[c["device"]]) + (where(lab),)
            assert c["suitable"] and c["error"] is None
            if key != "wire:env6":
                picked[c["device"]] = c["index"]
        values = {v["name"]: v["value"] for v in doc["variables"]}
        assert values["NCCL_IB_GID_INDEX"] == str(doc["gid_index"][0]["index"])
    # the two layouts: addresses before the device (IPv4 at 1), IPv6 first after it (at 2)
    assert picked == {"rxea": 1, "rxeb": 1, "rxec": 2, "rxed": 2}


def test_roce_connection_with_the_picked_index(lab: LabResults) -> None:
    text = roce(lab)["wire:trials"]["stdout"]
    env = marked(text, "ENVIDX")
    assert env == {"rxec": "2", "rxed": "2"}, text
    t = trials(text)["picked"]
    assert t["index"] == "2/2"
    assert (t["client_rc"], t["server_rc"]) == ("0", "0"), t
    assert "5 iters in" in t["client"] and "5 iters in" in t["server"]
    assert "GID ::ffff:192.168.61.1" in t["client"] and "GID ::ffff:192.168.61.2" in t["client"]


def test_roce_ipv6_with_af_inet6(lab: LabResults) -> None:
    """With NCCL_IB_ADDR_FAMILY=AF_INET6, the index written is the global IPv6 RoCE v2
    GID's, and it connects (IPv6 policy routing sends it over the wire too)."""
    text = roce(lab)["wire:trials"]["stdout"]
    assert marked(text, "ENVIDX6") == {"rxec": "1", "rxed": "1"}, text
    t = trials(text)["ipv6"]
    assert (t["client_rc"], t["server_rc"]) == ("0", "0"), t
    assert "GID fd61::1" in t["client"] and "GID fd61::2" in t["client"]


def test_roce_wrong_indexes_as_they_behave(lab: LabResults) -> None:
    """What a wrong index really does here (docs/environment.md records it): an unused
    entry fails at RTR; the link-local GID (index 0, which NCCL's scan skips because it
    is not routable) connects, as both ends share one Ethernet segment.  rxe has no
    RoCE v1 GIDs at all (it registers RoCE v2 only), so the v1 case cannot be shown."""
    runs = roce(lab)
    text = runs["wire:trials"]["stdout"]
    assert marked(text, "LLIDX") == {"rxec": "0", "rxed": "0"}
    tried = trials(text)
    unused = tried["unused"]
    assert unused["client_rc"] != "0" and unused["server_rc"] != "0", unused
    assert "Failed to modify QP to RTR" in unused["server"]
    ll = tried["linklocal"]
    assert (ll["client_rc"], ll["server_rc"]) == ("0", "0"), ll
    assert "GID fe80::" in ll["client"]
    kinds = {kind for dev in ("rxec", "rxed")
             for _, _, kind in parsing.devinfo(runs["wire:devinfo"]["stdout"])[dev]["ports"][1]
             ["gids"]}
    assert kinds == {"RoCE v2"}


def test_roce_between_two_network_namespaces(lab: LabResults) -> None:
    """The VM's kernel (6.1) runs rxe in the initial network namespace only (its UDP
    socket and route lookups): between two namespaces the connection fails at the
    first send.  sysverbs' choice there is still the right one (the test above)."""
    text = roce(lab)["ns:trials"]["stdout"]
    assert marked(text, "ENVIDX") == {"rxea": "1", "rxeb": "1"}
    t = trials(text)["ns"]
    assert t["client_rc"] != "0" and "local QP operation error" in t["client"], t


def test_roce_socket_ifname_and_all_devices(lab: LabResults) -> None:
    runs = roce(lab)
    docs = env_docs(runs)
    value = {k: {v["name"]: v["value"] for v in d["variables"]} for k, d in docs.items()}
    assert value["ns:env-a"]["NCCL_SOCKET_IFNAME"] == "=va"
    assert value["ns:env-b"]["NCCL_SOCKET_IFNAME"] == "=vb"
    assert value["wire:env"]["NCCL_SOCKET_IFNAME"] == "=vc,vd"
    for nd in ("vc", "vd"):
        assert re.search(rf"\b{nd}\s+inet {ROCE_IPV4['rxe' + nd[1]]}/24", runs["wire:ip"]["stdout"])
    assert [n["device"] for n in docs["wire:env-all"]["nics"]] == ["rxec", "rxed"]
    assert value["wire:env"]["NCCL_IB_HCA"] == "=rxec:1,rxed:1"
    sh_text = runs["wire:env-sh"]["stdout"]
    assert "export NCCL_IB_HCA='=rxec:1,rxed:1'\n" in sh_text
    assert "export NCCL_IB_GID_INDEX=2\n" in sh_text


def test_ucx_knows_every_device_sysverbs_writes(lab: LabResults) -> None:
    import shutil

    from tests.conftest import require

    # the VM runs this machine's disk: UCX is there when it is installed here
    require(None if shutil.which("ucx_info") else "ucx_info is not installed "
            "(apt-get install ucx-utils)", "UCX (ucx-utils)")
    text = roce(lab)["wire:ucx"]["stdout"]
    value = text.split("===VALUE ", 1)[1].split("\n", 1)[0]
    assert value == "rxec:1,rxed:1"
    devices_part = text.split("===DEVICES", 1)[1].split("===CONTEXT", 1)[0]
    reported = set(re.findall(r"#\s+Device: (\S+)", devices_part))
    assert set(value.split(",")) <= reported, reported
    contexts = {}
    for block in text.split("===CONTEXT ")[1:]:
        head, _, rest = block.partition("\n")
        contexts[head] = rest.split("===")[0]
    assert "not available" not in contexts[value], contexts[value]
    # controls: UCX does warn, for a bare name (UCX 1.13), NCCL's '=' and a wrong name
    assert "network device 'rxec' is not available" in contexts["rxec"]
    assert "network device '=rxec:1' is not available" in contexts["=rxec:1,rxed:1"]
    assert "network device 'nosuch:1' is not available" in contexts["nosuch:1"]

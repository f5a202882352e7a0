"""Attributes, topology, diagnose and rdma_get_devices under a REAL kernel.

One boot of the kernel lab VM (../shared/kernel-lab/run-in-vm.sh: Debian's
kernel under qemu, this machine's root filesystem read-only) with two soft-RoCE
devices: rxe0 on dummy0 (up, with IPv4 and IPv6 addresses: RoCE v2 GIDs) and rxe1
on a veth whose peer is down (port DOWN).  Inside, the script records what the
real tools say (``rdma -j link``, ``ibv_devinfo -v``, ``cat`` of the sysfs files,
the real librdmacm through tests/oracle/rdmacm_probe.py) and what sysverbs says
(pickled), and the tests compare them here.

Marked ``kernel``.  When the VM cannot start, the tests skip, and fail under CI=true.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import pickle
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from sysverbs.attributes import DeviceAttributes, GidType, LinkLayer, PhysState, PortState
from tests.kernel_recipe import RUN_IN_VM

pytestmark = pytest.mark.kernel

REPO = Path(__file__).resolve().parents[1]

VM_TIMEOUT = int(os.environ.get("VM_TIMEOUT", "1500")) + 60

SETUP = r"""
modprobe rdma_ucm >/dev/null 2>&1
ip link set dummy0 address 02:00:00:00:00:02
ip link add v0 type veth peer name v1
ip link set v0 address 02:00:00:00:00:01
ip link set v0 up
rdma link add rxe0 type rxe netdev dummy0
rdma link add rxe1 type rxe netdev v0
ip addr add 192.168.7.1/24 dev dummy0
ip -6 addr add fd00::1/64 dev dummy0 nodad
sleep 1
"""

SCRIPT = r"""
set +e
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH={repo}
{setup}
echo "=====rdma_link"; rdma -j link show
echo "=====rdma_dev"; rdma -j dev show
echo "=====devinfo"; ibv_devinfo -v
echo "=====cat"
for d in /sys/class/infiniband/*; do
  for f in node_guid sys_image_guid node_type node_desc fw_ver parent \
           ports/1/state ports/1/phys_state ports/1/rate ports/1/lid ports/1/sm_lid \
           ports/1/lid_mask_count ports/1/cap_mask ports/1/link_layer ports/1/gids/0 \
           ports/1/gid_attrs/types/0 ports/1/gid_attrs/ndevs/0 ports/1/pkeys/0; do
    [ -e "$d/$f" ] || continue
    printf '%s\t%s\t' "$(basename $d)" "$f"; cat "$d/$f" | tr '\n' '|'; echo
  done
done
echo "=====librdmacm"; {python} {repo}/tests/oracle/rdmacm_probe.py librdmacm \
  '{{"steps": [{{"op": "rdma_get"}}, {{"op": "ibv_list"}}]}}'
echo "=====sysverbs_rdmacm"; {python} {repo}/tests/oracle/rdmacm_probe.py sysverbs \
  '{{"steps": [{{"op": "rdma_get"}}, {{"op": "ibv_list"}}]}}'
echo "=====sysverbs_rdmacm_sysfs"; {python} {repo}/tests/oracle/rdmacm_probe.py sysverbs \
  '{{"steps": [{{"op": "rdma_get"}}], "options": {{"source": "sysfs"}}}}'
echo "=====pickle"; {python} {dump}
echo "=====end"
"""

DUMP = r"""
import base64, os, pickle, sys
import sysverbs
from sysverbs.attributes import device_attributes
from sysverbs.topology import device_topology
from sysverbs.diagnosis import diagnose
names = sorted(os.listdir("/sys/class/infiniband"))
found = diagnose()
data = {
    "attributes": {n: device_attributes(n) for n in names},
    "topology": {n: device_topology(n) for n in names},
    "diagnose": (list(found), found.host),
    "indexes": {d.name: sysverbs.get_device_index(d) for d in sysverbs.get_device_list()},
}
sys.stdout.write(base64.b64encode(pickle.dumps(data)).decode() + "\n")
"""


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the kernel lab VM needs root"
    if not RUN_IN_VM.is_file():
        return f"{RUN_IN_VM} is missing"
    for tool in ("qemu-system-x86_64", "busybox", "cpio"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install qemu-system-x86 busybox-static cpio)"
    if not list(Path("/boot").glob("vmlinuz-*")):
        return "no kernel in /boot (apt-get install linux-image-amd64)"
    for tool in ("rdma", "ibv_devinfo"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2 ibverbs-utils)"
    return None


def _require(reason: str | None) -> None:
    from tests.conftest import require

    require(reason, "kernel lab VM")


@pytest.fixture(scope="module")
def vm() -> dict[str, str]:
    """Boot the VM once; the sections of what the script printed."""
    _require(_unavailable())
    tmp = Path(tempfile.mkdtemp(prefix="sv-vm-"))
    os.chmod(tmp, 0o755)
    try:
        (tmp / "dump.py").write_text(DUMP)
        script = SCRIPT.format(
            repo=REPO,
            setup=SETUP,
            python=os.path.realpath(REPO / ".venv/bin/python")
            if (REPO / ".venv/bin/python").exists()
            else "python3",
            dump=tmp / "dump.py",
        )
        env = dict(os.environ, VM_TIMEOUT=str(VM_TIMEOUT - 20))
        try:
            proc = subprocess.run(
                [str(RUN_IN_VM), script], capture_output=True, timeout=VM_TIMEOUT, env=env, cwd="/"
            )
        except subprocess.TimeoutExpired:
            _require(f"the VM did not finish within {VM_TIMEOUT} s")
            raise AssertionError("unreachable") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = proc.stdout.decode(errors="replace")
    if "=====end" not in out:
        _require(
            f"the VM did not run the script (exit {proc.returncode}): "
            f"{proc.stderr.decode(errors='replace')[-500:]} {out[-500:]}"
        )
    sections: dict[str, str] = {}
    for chunk in out.split("=====")[1:]:
        name, _, body = chunk.partition("\n")
        sections[name.strip()] = body
    return sections


@pytest.fixture(scope="module")
def ours(vm: dict[str, str]) -> dict[str, Any]:
    text = vm["pickle"].strip().splitlines()[-1]
    data: dict[str, Any] = pickle.loads(base64.b64decode(text))
    return data


def _devinfo(text: str) -> dict[str, dict[str, Any]]:
    """ibv_devinfo -v: {hca: {"dev": {key: value}, "ports": {n: {key: value, "gids": [...]}}}}."""
    out: dict[str, dict[str, Any]] = {}
    cur: dict[str, Any] = {}
    port: dict[str, Any] | None = None
    for line in text.splitlines():
        m = re.match(r"hca_id:\s+(\S+)", line)
        if m:
            cur = out.setdefault(m.group(1), {"dev": {}, "ports": {}})
            port = None
            continue
        m = re.match(r"\s+port:\s+(\d+)", line)
        if m and cur:
            port = cur["ports"].setdefault(int(m.group(1)), {"gids": []})
            continue
        m = re.match(r"\s+GID\[\s*(\d+)\]:\s+(\S+), (.+)$", line)
        if m and port is not None:
            port["gids"].append(
                (int(m.group(1)), ipaddress.IPv6Address(m.group(2)), m.group(3).strip())
            )
            continue
        m = re.match(r"\s+([a-z_0-9]+):\s+(.*\S)\s*$", line)
        if m and cur:
            (port if port is not None else cur["dev"])[m.group(1)] = m.group(2)
    return out


def _paren(value: str) -> int:
    m = re.search(r"\((\d+)\)", value)
    assert m, value
    return int(m.group(1))


def test_two_devices_seen(ours: dict[str, Any], vm: dict[str, str]) -> None:
    assert sorted(ours["attributes"]) == ["rxe0", "rxe1"]
    assert sorted(_devinfo(vm["devinfo"])) == ["rxe0", "rxe1"]


def test_ports_match_rdma_link(ours: dict[str, Any], vm: dict[str, str]) -> None:
    links = json.loads(vm["rdma_link"])
    assert len(links) == 2
    for link in links:
        attrs: DeviceAttributes = ours["attributes"][link["ifname"]]
        port = attrs.port(link["port"])
        assert port is not None
        assert port.state is not None and port.state.name == link["state"]
        assert port.phys_state is not None and port.phys_state.name == link["physical_state"]
        topo = ours["topology"][link["ifname"]]
        assert topo.port_netdevs(link["port"])[0] == link["netdev"]
        assert topo.netdevs[0].ifindex == link["netdev_index"]
    states = {n: a.ports[0].state for n, a in ours["attributes"].items()}
    assert states == {"rxe0": PortState.ACTIVE, "rxe1": PortState.DOWN}
    assert ours["attributes"]["rxe1"].ports[0].phys_state is PhysState.POLLING


def test_attributes_match_ibv_devinfo(ours: dict[str, Any], vm: dict[str, str]) -> None:
    info = _devinfo(vm["devinfo"])
    for name, dev in info.items():
        attrs: DeviceAttributes = ours["attributes"][name]
        assert f"{attrs.node_guid:016x}" == dev["dev"]["node_guid"].replace(":", "")
        assert f"{attrs.sys_image_guid:016x}" == dev["dev"]["sys_image_guid"].replace(":", "")
        assert len(attrs.ports) == int(dev["dev"]["phys_port_cnt"])
        for number, p in dev["ports"].items():
            port = attrs.port(number)
            assert port is not None and port.rate is not None
            assert port.state is not None and int(port.state) == _paren(p["state"])
            assert port.phys_state is not None and int(port.phys_state) == _paren(p["phys_state"])
            assert port.rate.width_code == _paren(p["active_width"])
            assert port.rate.speed_code == _paren(p["active_speed"])
            assert port.lid == int(p["port_lid"], 0) and port.sm_lid == int(p["sm_lid"], 0)
            assert port.lid_mask_count == int(p["port_lmc"], 16)
            assert port.sm_sl == int(p["sm_sl"])
            assert port.cap_mask == int(p["port_cap_flags"], 16)
            assert port.link_layer is LinkLayer.ETHERNET and p["link_layer"] == "Ethernet"
            assert port.gid_tbl_len == int(p["gid_tbl_len"])
            assert port.pkey_tbl_len == int(p["pkey_tbl_len"])
            names = {"RoCE v2": GidType.ROCE_V2, "RoCE v1": GidType.ROCE_V1, "IB": GidType.IB}
            assert [(g.index, g.gid, g.type) for g in port.gids] == [
                (i, gid, names[t]) for i, gid, t in p["gids"]
            ]
    rxe0 = attrs_of(ours, "rxe0").ports[0]
    assert ipaddress.IPv6Address("::ffff:192.168.7.1") in [g.gid for g in rxe0.gids]
    assert ipaddress.IPv6Address("fd00::1") in [g.gid for g in rxe0.gids]


def attrs_of(ours: dict[str, Any], name: str) -> DeviceAttributes:
    a: DeviceAttributes = ours["attributes"][name]
    return a


def test_raw_text_is_what_cat_prints(ours: dict[str, Any], vm: dict[str, str]) -> None:
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


def test_topology_of_soft_roce(ours: dict[str, Any]) -> None:
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


def test_diagnose_under_a_real_kernel(ours: dict[str, Any]) -> None:
    devices, host = ours["diagnose"]
    by_name = {d.name: d for d in devices}
    assert sorted(by_name) == ["rxe0", "rxe1"]
    for d in devices:
        assert d.listed and d.usable and d.provider == "rxe", d
    assert [r.code for r in by_name["rxe0"].reasons] == []
    assert [(r.code, r.port) for r in by_name["rxe1"].reasons] == [("port_down", 1)]
    assert all(r.severity == "warning" for r in host)


def _probe(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_rdma_get_devices_against_real_librdmacm(vm: dict[str, str], ours: dict[str, Any]) -> None:
    """The real librdmacm (netlink mode) orders by kernel index: rxe0, rxe1.  sysverbs
    orders by index when its device list has kernel indexes (the netlink source) and by
    node GUID otherwise (sysfs source): then rxe1 (…:0001) comes before rxe0 (…:0002)."""
    real = _probe(vm["librdmacm"])
    mine = _probe(vm["sysverbs_rdmacm"])
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
    sysfs = _probe(vm["sysverbs_rdmacm_sysfs"])
    assert [c["name"] for c in sysfs[0]["contexts"]] == ["rxe1", "rxe0"]

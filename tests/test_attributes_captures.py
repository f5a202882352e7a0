"""Attributes and topology on real machines' data: the lshca recordings in
tests/data/lshca-connectx (ConnectX-4..6 hosts, one with 40 SR-IOV VFs; see
tests/data/PROVENANCE.md).

Each recording holds the sysfs files lshca read (``os.path.exists/<path>`` -> the
file's text), the links it read and the output of ``ip address show``.  They are
written back as a sysfs tree and read with sysverbs; every value must parse, and
the concrete values below were checked by hand in the recordings.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sysverbs.devices.attributes import (
    LinkLayer,
    PhysState,
    PortState,
    Rate,
    device_attributes,
)
from sysverbs.devices.location import device_location

LSHCA = Path(__file__).resolve().parent / "data" / "lshca-connectx"
FILES = sorted(LSHCA.glob("*.decoded.json"))
assert len(FILES) == 13, f"the lshca recordings are missing from {LSHCA}"


def _text(value: Any) -> str:
    return "\n".join(value) if isinstance(value, list) else str(value)


def _listing(value: Any) -> list[str]:
    if isinstance(value, list):
        return [v for v in value if v]
    return [value] if value else []


def build_capture_tree(capture: dict[str, Any], root: Path) -> list[tuple[str, str]]:
    """Write a recording's sysfs files, links and netdevs below ``root``; returns the
    (PCI address, IB device) pairs."""
    for key, value in capture.items():
        kind, _, path = key.partition("/")
        if not path.startswith("sys/"):
            continue
        target = root / path
        if kind == "os.path.exists" and isinstance(value, str) and value:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(value)
        elif kind == "os.readlink" and isinstance(value, str) and value:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not os.path.lexists(target):
                os.symlink(value, target)
    devices = []
    for key, value in capture.items():
        m = re.fullmatch(r"os\.listdir/sys/bus/pci/devices/([^/]+)/(infiniband|net)_dir", key)
        if not m:
            continue
        bdf, what = m.groups()
        pci = root / "sys/bus/pci/devices" / bdf
        for name in _listing(value):
            if what == "infiniband":
                link = pci / "infiniband" / name / "device"
                link.parent.mkdir(parents=True, exist_ok=True)
                if not os.path.lexists(link):
                    os.symlink("../../../" + bdf, link)
                devices.append((bdf, name))
                continue
            ip = _text(capture.get(f"shell.cmd/ ip address show dev {name}", ""))
            addr = re.search(r"link/(infiniband|ether) (\S+)", ip)
            if addr is None:
                continue
            net = pci / "net" / name
            net.mkdir(parents=True, exist_ok=True)
            (net / "address").write_text(addr.group(2) + "\n")
            (net / "type").write_text("32\n" if addr.group(1) == "infiniband" else "1\n")
    return devices


def captures() -> Iterator[Any]:
    for f in FILES:
        yield pytest.param(f, id=f.name.split("--")[0].split(".swx")[0] + "-" + f.name[-30:-13])


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.parametrize("path", list(captures()))
def test_every_recorded_value_parses(tmp_path: Path, path: Path) -> None:
    capture = _load(path)
    devices = build_capture_tree(capture, tmp_path)
    assert devices
    checked = 0
    for bdf, name in devices:
        ib = tmp_path / "sys/bus/pci/devices" / bdf / "infiniband" / name
        a = device_attributes(str(ib))
        for field in ("fw_ver", "hca_type", "board_id", "sys_image_guid"):
            if a.raw[field]:
                assert getattr(a, field) is not None, (name, field, a.raw[field])
        for p in a.ports:
            for field in ("state", "phys_state", "rate", "lid", "sm_lid", "link_layer"):
                raw = p.raw[field]
                if raw:
                    assert getattr(p, field) is not None, (name, field, raw)
                    checked += 1
            # an independent reading of the same text
            if p.raw["state"]:
                number, word = p.raw["state"].split(": ")
                assert p.state == PortState(int(number)) and p.state.name == word
            if p.raw["phys_state"]:
                number, word = p.raw["phys_state"].split(": ")
                assert p.phys_state == PhysState(int(number))
                assert word.lower().replace(" ", "") == p.phys_state.name.lower().replace("_", "")
            if p.raw["lid"]:
                assert p.lid == int(p.raw["lid"], 16)
            if p.raw["rate"]:
                gbps, _, rest = p.raw["rate"].partition(" Gb/sec (")
                width, _, speed = rest.rstrip(")").partition("X ")
                assert p.rate == Rate(float(gbps), int(width), speed)
            gid0 = capture.get(
                f"os.path.exists/sys/bus/pci/devices/{bdf}/infiniband/{name}/ports/{p.port}/gids/0"
            )
            if gid0:
                assert p.gids[0].gid == ipaddress.IPv6Address(
                    bytes.fromhex(gid0.strip().replace(":", ""))
                )
    assert checked >= 5


def _capture(prefix: str) -> Path:
    for f in FILES:
        if f.name.startswith(prefix):
            return f
    pytest.fail(f"no capture {prefix}")


def test_jazz03_infiniband_values(tmp_path: Path) -> None:
    """jazz03 (ConnectX-6 HDR + ConnectX-5 EDR, MLNX_OFED 5.6), values as recorded."""
    build_capture_tree(_load(_capture("jazz03.swx.labs.mlnx--IB--")), tmp_path)
    pci = tmp_path / "sys/bus/pci/devices"

    a0 = device_attributes(str(pci / "0000:04:00.0/infiniband/mlx5_0"))
    assert (a0.fw_ver, a0.hca_type, a0.board_id) == ("20.33.1048", "MT4123", "MT_0000000228")
    assert a0.sys_image_guid == 0xB8599F0300529344
    p = a0.ports[0]
    assert (p.state, p.link_layer, p.rate) == (
        PortState.ACTIVE,
        LinkLayer.INFINIBAND,
        Rate(200.0, 4, "HDR"),
    )
    assert (p.lid, p.sm_lid) == (0x25, 0x26)  # saquery SMIR -C mlx5_0 ... 38: the SM is LID 38
    assert p.port_guid == 0xB8599F0300529348

    p1 = device_attributes(str(pci / "0000:04:00.1/infiniband/mlx5_1")).ports[0]
    assert (p1.state, p1.phys_state, p1.lid, p1.rate) == (
        PortState.DOWN,
        PhysState.DISABLED,
        0xFFFF,
        Rate(10.0, 4, "SDR"),
    )

    p2 = device_attributes(str(pci / "0000:81:00.0/infiniband/mlx5_2")).ports[0]
    assert (p2.lid, p2.sm_lid, p2.rate) == (0x280, 0x800, Rate(100.0, 4, "EDR"))
    assert p2.gids[0].subnet_prefix == 0xFE800000000000C5  # a non-default subnet prefix

    roce = device_attributes(str(pci / "0000:81:00.1/infiniband/mlx5_3")).ports[0]
    assert roce.link_layer is LinkLayer.ETHERNET and roce.lid == 0


def test_jazz03_ipoib_by_port_guid(tmp_path: Path) -> None:
    """ib0's hardware address (from ip address show) ends in mlx5_0's port GUID."""
    build_capture_tree(_load(_capture("jazz03.swx.labs.mlnx--IB--")), tmp_path)
    pci = tmp_path / "sys/bus/pci/devices"
    expected = {
        "0000:04:00.0": ("mlx5_0", "ib0"),
        "0000:04:00.1": ("mlx5_1", "ib1"),
        "0000:81:00.0": ("mlx5_2", "ib2"),
        "0000:82:00.0": ("mlx5_4", "ib3"),
        "0000:82:00.1": ("mlx5_5", "ib4"),
    }
    mapped = 0
    for bdf, (dev, net) in expected.items():
        topo = device_location(str(pci / bdf / "infiniband" / dev))
        if (pci / bdf / "net" / net / "address").is_file():  # ip address was recorded
            assert topo.port_netdevs(1) == (net,), (dev, topo.netdevs)
            assert topo.netdevs[0].via == "port_guid"
            mapped += 1
        assert topo.pci is not None and topo.pci.address == bdf
        assert topo.pci.numa_node == (0 if bdf.startswith("0000:04") else 1)
    assert mapped == 3  # ib0, ib2, ib3 (ib1 and ib4 were down: no address recorded)


def test_cloud_hv01_forty_vfs(tmp_path: Path) -> None:
    """cloud-hv01: two ConnectX-5 PFs and 40 VFs (mlx5_2..41) with physfn links."""
    capture = _load(_capture("cloud-hv01"))
    devices = build_capture_tree(capture, tmp_path)
    pci = tmp_path / "sys/bus/pci/devices"
    vfs = []
    for bdf, name in devices:
        topo = device_location(str(pci / bdf / "infiniband" / name))
        a = device_attributes(str(pci / bdf / "infiniband" / name))
        assert topo.pci is not None
        if topo.pci.is_vf:
            vfs.append(name)
            assert a.hca_type == "MT4120" and a.fw_ver == "16.27.1016"
            assert topo.pci.physfn in ("0000:5e:00.0", "0000:5e:00.1")
    assert len(vfs) == 40
    mlx5_0 = device_attributes(str(pci / "0000:5e:00.0/infiniband/mlx5_0")).ports[0]
    assert mlx5_0.port_guid == 0x248A070300A28CA4  # ib0: ...:24:8a:07:03:00:a2:8c:a4
    topo = device_location(str(pci / "0000:5e:00.0/infiniband/mlx5_0"))
    assert topo.port_netdevs(1) == ("ib0",)


def test_roce_host_netdev_from_device_net(tmp_path: Path) -> None:
    """r-aa-zorro012 (ConnectX-6 Dx, RoCE): no gid_attrs were recorded, so the port's
    netdev comes from the PCI function's net/ directory."""
    capture = _load(_capture("r-aa-zorro012"))
    build_capture_tree(capture, tmp_path)
    topo = device_location(str(tmp_path / "sys/bus/pci/devices/0000:10:00.0/infiniband/mlx5_0"))
    assert [(n.name, n.via) for n in topo.netdevs] == [("ens4f0", "device/net")]
    assert topo.netdevs[0].address == "b8:ce:f6:8e:45:06"
    a = device_attributes(str(tmp_path / "sys/bus/pci/devices/0000:10:00.0/infiniband/mlx5_0"))
    assert a.ports[0].link_layer is LinkLayer.ETHERNET
    assert a.ports[0].gids[0].gid == ipaddress.IPv6Address("fe80::bace:f6ff:fe8e:4506")
    assert a.ports[0].gids[0].type is None  # types were not recorded

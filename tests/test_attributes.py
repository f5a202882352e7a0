"""sysverbs.devices.attributes: device and port attributes from sysfs, parsed strictly.

Fixture values, the kernel's exact formats (rate_show & co. in
drivers/infiniband/core/sysfs.c), and broken trees where every value must give
``None`` (with the raw text kept) and nothing but OSError may escape.
"""

from __future__ import annotations

import doctest
import importlib
import ipaddress
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sysverbs
from sysverbs import testing
from sysverbs.devices.attributes import (
    GidType,
    LinkLayer,
    PhysState,
    PortState,
    Rate,
    RawText,
    device_attributes,
    parse_rate,
    port_attributes,
)
from sysverbs.ground.enums import NodeType
from tests import listing_hosts
from tests.bad_input import make_broken
from tests.fuzz.profiles import fuzz_settings


def test_doctests() -> None:
    result = doctest.testmod(importlib.import_module('sysverbs.devices.attributes'))
    assert result.attempted and result.failed == 0, 'sysverbs.devices.attributes'


@pytest.fixture(scope="module")
def hosts() -> Iterator[listing_hosts.LazyHosts]:
    with listing_hosts.LazyHosts.temporary() as hosts:
        yield hosts


def _ibdevs(host: testing.FakeHost) -> list[str]:
    d = host.sysfs / "class/infiniband"
    return sorted(os.listdir(d)) if d.is_dir() else []


# -- concrete values, checked by hand against the fixture files --------------------------


def test_mlx5_cx6_ib_port(hosts: listing_hosts.LazyHosts) -> None:
    a = device_attributes("mlx5_0", sysfs_path=hosts["mlx5-cx6"].sysfs)
    assert (a.name, a.node_type, a.fw_ver, a.hw_rev, a.hca_type, a.board_id) == (
        "mlx5_0",
        NodeType.CA,
        "20.33.1048",
        0,
        "MT4123",
        "MT_0000000228",
    )
    assert a.node_desc == "jazz03 mlx5_0"
    assert a.node_guid == 0xB8599F0300529348 and a.sys_image_guid == 0xB8599F0300529344
    assert a.parent is None and a.raw["parent"] is None
    (p,) = a.ports
    assert (p.port, p.state, p.phys_state, p.link_layer) == (
        1,
        PortState.ACTIVE,
        PhysState.LINK_UP,
        LinkLayer.INFINIBAND,
    )
    assert p.rate == Rate(200.0, 4, "HDR") and (p.rate.width_code, p.rate.speed_code) == (2, 64)
    assert (p.lid, p.sm_lid, p.sm_sl, p.lid_mask_count, p.cap_mask) == (
        0x25,
        0x26,
        0,
        0,
        0xA659E848,
    )
    assert [(g.index, str(g.gid), g.type, g.ndev) for g in p.gids] == [
        (0, "fe80::b859:9f03:52:9348", GidType.IB, None)
    ]
    assert p.port_guid == 0xB8599F0300529348
    assert p.pkeys == ((0, 0xFFFF),) and p.gid_tbl_len == 1 and p.pkey_tbl_len == 1
    assert p.raw["rate"] == "200 Gb/sec (4X HDR)" and p.raw["state"] == "4: ACTIVE"


def test_down_port_and_roce_gids(hosts: listing_hosts.LazyHosts) -> None:
    sysfs = hosts["mlx5-cx6"].sysfs
    down = port_attributes("mlx5_1", 1, sysfs_path=sysfs)
    assert (down.state, down.phys_state, down.lid) == (PortState.DOWN, PhysState.DISABLED, 0xFFFF)
    roce = device_attributes("mlx5_3", sysfs_path=sysfs).ports[0]
    assert roce.link_layer is LinkLayer.ETHERNET
    assert [(g.index, g.type, g.ndev) for g in roce.gids] == [
        (0, GidType.ROCE_V1, "p2p2"),
        (1, GidType.ROCE_V2, "p2p2"),
        (2, GidType.ROCE_V1, "p2p2"),
        (3, GidType.ROCE_V2, "p2p2"),
    ]
    assert roce.gids[2].gid == ipaddress.IPv6Address("::ffff:2.1.3.3")
    assert roce.gids[1].raw_type == "RoCE v2"


def test_multi_port_mlx4(hosts: listing_hosts.LazyHosts) -> None:
    a = device_attributes("mlx4_0", sysfs_path=hosts["mlx4"].sysfs)
    assert [p.port for p in a.ports] == [1, 2]
    assert a.node_guid == 0x248A070300E53D40
    # the port GUIDs differ from the node GUID (IPoIB is matched on them)
    assert [p.port_guid for p in a.ports] == [0x248A070300E53D41, 0x248A070300E53D42]
    assert a.port(2) is a.ports[1] and a.port(3) is None


def test_rxe_software_device(hosts: listing_hosts.LazyHosts) -> None:
    a = device_attributes("rxe0", sysfs_path=hosts["rxe"].sysfs)
    assert a.fw_ver is None and a.raw["fw_ver"] == ""  # rxe has an empty fw_ver
    assert a.hca_type is None and a.raw["hca_type"] is None  # and no hca_type file
    assert a.parent == "ens3"
    p = a.ports[0]
    assert p.rate == Rate(2.5, 1, "SDR") and p.gid_tbl_len == 2 and len(p.gids) == 1


def test_device_object_and_path_arguments(hosts: listing_hosts.LazyHosts) -> None:
    import sysverbs

    h = hosts["rxe"]
    devs = sysverbs.get_device_list(
        sysfs_path=h.sysfs, dev_dir=h.dev, providers="builtin", rdma_core="44"
    )
    try:
        by_obj = device_attributes(devs[0])
        by_path = device_attributes(devs[0].ibdev_path)
        by_name = device_attributes(devs[0].name, sysfs_path=str(h.sysfs) + "/")
        assert by_obj == by_path == by_name
        assert hash(by_obj) == hash(by_name)
    finally:
        sysverbs.free_device_list(devs)
    with pytest.raises(sysverbs.DeviceFreedError):
        device_attributes(devs[0])
    with pytest.raises(TypeError):
        device_attributes(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        device_attributes("mlx5\0")


def test_every_fixture_value_parses(hosts: listing_hosts.LazyHosts) -> None:
    """Fixture values are real kernel output: each one that is present parses."""
    seen = 0
    for name, host in hosts.all().items():
        for dev in _ibdevs(host):
            a = device_attributes(dev, sysfs_path=host.sysfs)
            for field in (
                "node_guid",
                "sys_image_guid",
                "hw_rev",
                "hca_type",
                "board_id",
                "node_desc",
                "node_type",
            ):
                if a.raw[field]:
                    assert getattr(a, field) is not None, (name, dev, field, a.raw[field])
            assert a.ports, (name, dev)
            for p in a.ports:
                for field in (
                    "state",
                    "phys_state",
                    "rate",
                    "lid",
                    "sm_lid",
                    "sm_sl",
                    "lid_mask_count",
                    "cap_mask",
                    "link_layer",
                ):
                    if p.raw[field] is not None:
                        assert getattr(p, field) is not None, (name, dev, field, p.raw[field])
                        seen += 1
                assert p.gids, (name, dev, p.port)
                for g in p.gids:  # iWARP devices (cxgb4) have no GID types
                    assert (g.type is None) == (g.raw_type is None), (name, dev, g)
    assert seen > 500


# -- the kernel's formats -------------------------------------------------------------------

# drivers/infiniband/core/sysfs.c rate_show: deci-Gb/s per lane, times the lane count
_SPEEDS = {
    "SDR": 25,
    "DDR": 50,
    "QDR": 100,
    "FDR10": 100,
    "FDR": 140,
    "EDR": 250,
    "HDR": 500,
    "NDR": 1000,
    "XDR": 2000,
}


@pytest.mark.parametrize("speed", sorted(_SPEEDS))
@pytest.mark.parametrize("width", [1, 2, 4, 8, 12])
def test_rate_every_kernel_value(speed: str, width: int) -> None:
    rate = _SPEEDS[speed] * width
    # sysfs_emit(buf, "%d%s Gb/sec (%dX%s)\n", rate / 10, rate % 10 ? ".5" : "", width, speed)
    text = f"{rate // 10}{'.5' if rate % 10 else ''} Gb/sec ({width}X {speed})"
    got = parse_rate(text)
    assert got == Rate(rate / 10, width, speed)
    assert got.speed_code is not None and got.width_code is not None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "200",
        "200 Gb/sec",
        "200 Gb/sec (4X HDR",
        "200 Gb/s (4X HDR)",
        " 200 Gb/sec (4X HDR)",
        "200 Gb/sec (4X HDR) ",
        "200.4 Gb/sec (4X HDR)",
        "200 Gb/sec (-4X HDR)",
        "2e2 Gb/sec (4X)",
        "200 Gb/sec (4X HDR)\n",
        "200 Gb/sec (4Xhdr)",
        "x Gb/sec (4X HDR)",
    ],
)
def test_rate_odd_values(text: str) -> None:
    assert parse_rate(text) is None


def test_rate_without_speed_name() -> None:
    assert parse_rate("10 Gb/sec (4X)") == Rate(10.0, 4, None)
    assert parse_rate("10 Gb/sec (4X)").speed_code is None  # type: ignore[union-attr]


def _write_port(root: Path, files: dict[str, Any]) -> Path:
    ib = root / "sys/class/infiniband/dev0"
    for rel, value in files.items():
        p = ib / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, str):
            p.write_text(value)
        elif isinstance(value, bytes):
            p.write_bytes(value)
        elif value == "dir":
            p.mkdir()
    (ib / "ports/1").mkdir(parents=True, exist_ok=True)
    return ib


@pytest.mark.parametrize(
    "field, text, expect",
    [
        ("state", "4: ACTIVE\n", PortState.ACTIVE),
        ("state", "0: NOP\n", PortState.NOP),
        ("state", "5: ACTIVE_DEFER\n", PortState.ACTIVE_DEFER),
        ("state", "6: UNKNOWN\n", None),
        ("state", "ACTIVE\n", None),
        ("state", "4:ACTIVE\n", None),
        ("state", "4: \n", None),
        ("phys_state", "5: LinkUp\n", PhysState.LINK_UP),
        ("phys_state", "7: Phy Test\n", PhysState.PHY_TEST),
        ("phys_state", "0: <unknown>\n", None),
        ("lid", "0x25\n", 0x25),
        ("lid", "0X25\n", None),
        ("lid", "25\n", None),
        ("lid", "0x\n", None),
        ("lid", "0x25 \n", None),
        ("cap_mask", "0x04010000\n", 0x04010000),
        ("sm_sl", "0\n", 0),
        ("sm_sl", "-1\n", None),
        ("lid_mask_count", "3\n", 3),
        ("link_layer", "InfiniBand\n", LinkLayer.INFINIBAND),
        ("link_layer", "Ethernet\n", LinkLayer.ETHERNET),
        ("link_layer", "Unknown\n", LinkLayer.UNSPECIFIED),
        ("link_layer", "ethernet\n", None),
        ("rate", "25 Gb/sec (1X EDR)\n", Rate(25.0, 1, "EDR")),
    ],
)
def test_port_field_formats(tmp_path: Path, field: str, text: str, expect: Any) -> None:
    ib = _write_port(tmp_path, {f"ports/1/{field}": text})
    p = port_attributes(str(ib), 1)
    assert getattr(p, field) == expect
    assert p.raw[field] == text[:-1]


@pytest.mark.parametrize(
    "field, text, expect",
    [
        ("node_guid", "0002:c903:0000:1234\n", 0x0002C90300001234),
        # libibverbs' sscanf("%hx:%hx:%hx:%hx") rules (tests/test_oracle_core.py checks
        # them against ibv_get_device_guid):
        ("node_guid", "2:c903:0:1234\n", 0x0002C90300001234),
        ("node_guid", "0002:c903:0000:12340000\n", 0x0002C90300000000),
        ("node_guid", "0002:c903:0000:1234:5\n", 0x0002C90300001234),
        ("node_guid", "c42:a103:a5:1c30\n", 0x0C42A10300A51C30),
        ("node_guid", "1 :2:3:4\n", None),
        ("node_guid", "junk\n", None),
        ("node_type", "1: CA\n", NodeType.CA),
        ("node_type", "4: RNIC\n", NodeType.RNIC),
        ("node_type", "0: <unknown>\n", None),
        ("node_type", "1\n", None),
        ("hw_rev", "0x0\n", 0),
        ("hw_rev", "b0\n", 0xB0),  # mlx4/hfi1/qib print %x
        ("hw_rev", "0xa1\n", 0xA1),
        ("hw_rev", "rev A\n", None),
        ("fw_ver", "16.35.2000\n", "16.35.2000"),
        ("fw_ver", "\n", None),
        ("fw_ver", b"1.2\x003\n", None),
        ("node_desc", "host mlx5_0 HCA-1\n", "host mlx5_0 HCA-1"),
    ],
)
def test_device_field_formats(tmp_path: Path, field: str, text: Any, expect: Any) -> None:
    ib = _write_port(tmp_path, {field: text})
    a = device_attributes(str(ib))
    assert getattr(a, field) == expect
    raw = text if isinstance(text, str) else os.fsdecode(text)
    assert a.raw[field] == raw[:-1]


def test_gid_table_entries(tmp_path: Path) -> None:
    ib = _write_port(
        tmp_path,
        {
            "ports/1/link_layer": "Ethernet\n",
            "ports/1/gids/0": "fe80:0000:0000:0000:5054:00ff:fe12:3456\n",
            "ports/1/gids/1": "0000:0000:0000:0000:0000:0000:0000:0000\n",  # unused entry
            "ports/1/gids/2": "fe80::1\n",  # not %pI6: odd
            "ports/1/gids/3": "0000:0000:0000:0000:0000:ffff:c0a8:0701\n",
            "ports/1/gids/10": "fd00:0000:0000:0000:0000:0000:0000:0001\n",
            "ports/1/gids/x": "junk\n",
            "ports/1/gid_attrs/types/0": "IB/RoCE v1\n",
            "ports/1/gid_attrs/types/3": "RoCE v2\n",
            "ports/1/gid_attrs/types/10": "RoCE v3\n",
            "ports/1/gid_attrs/ndevs/0": "eth0\n",
            "ports/1/gid_attrs/ndevs/3": "eth0.100\n",
            "ports/1/pkeys/0": "0xffff\n",
            "ports/1/pkeys/1": "0x0000\n",
            "ports/1/pkeys/2": "0x8001\n",
            "ports/1/pkeys/3": "ffff\n",
        },
    )
    p = port_attributes(str(ib), 1)
    assert [(g.index, g.type, g.ndev, g.raw_type) for g in p.gids] == [
        (0, GidType.ROCE_V1, "eth0", "IB/RoCE v1"),
        (3, GidType.ROCE_V2, "eth0.100", "RoCE v2"),
        (10, None, None, "RoCE v3"),
    ]
    assert p.gid_tbl_len == 5 and p.gids[1].gid == ipaddress.IPv6Address("::ffff:192.168.7.1")
    assert p.gids[0].subnet_prefix == 0xFE80000000000000
    assert p.pkeys == ((0, 0xFFFF), (2, 0x8001)) and p.pkey_tbl_len == 4


def test_raw_text_mapping() -> None:
    r = RawText({"a": "1", "b": None})
    assert r["a"] == "1" and r["b"] is None and list(r) == ["a", "b"] and len(r) == 2
    assert r == {"a": "1", "b": None} and r == RawText({"a": "1", "b": None})
    assert hash(r) == hash(RawText({"a": "1", "b": None})) and "RawText" in repr(r)
    with pytest.raises(KeyError):
        r["c"]


def test_missing_device_gives_nones(tmp_path: Path) -> None:
    a = device_attributes("nothere", sysfs_path=tmp_path)
    assert a.name == "nothere" and a.ports == () and a.node_guid is None
    assert all(v is None for v in a.raw.values())
    p = port_attributes("nothere", 1, sysfs_path=tmp_path)
    assert p.state is None and p.gids == () and p.gid_tbl_len == 0


# -- broken trees: None values, never an exception other than OSError -----------------------

_CONTENT = st.one_of(
    st.binary(max_size=70),
    st.sampled_from(
        [
            b"",
            b"\n",
            b"\0",
            b"4: ACTIVE",
            b"0x" + b"f" * 40,
            b"1" * 5000,
            b"fe80:0000:0000:0000:0000:0000:0000:0001\n",
            b"\xff\xfe\n",
        ]
    ),
)
#: "mode0": a file of mode 0, which denies nothing to root (the suite's user); what an
#: unreadable file means is tested as uid 65534 in tests/test_unprivileged.py.
_KIND = st.sampled_from(["file", "dir", "dangling", "loop", "fifo", "missing", "mode0"])
_NAMES = [
    "node_type",
    "node_guid",
    "sys_image_guid",
    "fw_ver",
    "hw_rev",
    "hca_type",
    "board_id",
    "node_desc",
    "parent",
    "ports/1/state",
    "ports/1/phys_state",
    "ports/1/rate",
    "ports/1/lid",
    "ports/1/sm_lid",
    "ports/1/cap_mask",
    "ports/1/link_layer",
    "ports/1/gids/0",
    "ports/1/gid_attrs/types/0",
    "ports/1/gid_attrs/ndevs/0",
    "ports/1/pkeys/0",
    "ports/1/lid_mask_count",
]


@pytest.mark.timeout(60)  # FIFOs in the tree: a read of one would block, fail fast
@fuzz_settings(ci=60, deep=600)
@given(st.lists(st.tuples(st.sampled_from(_NAMES), _KIND, _CONTENT), max_size=12))
def test_broken_trees_never_raise(entries: list[tuple[str, str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ib = Path(tmp) / "sys/class/infiniband/dev0"
        (ib / "ports/1").mkdir(parents=True)
        for rel, kind, content in entries:
            if not (ib / rel).exists() and not os.path.lexists(ib / rel):
                make_broken(ib / rel, kind, content)
        a = device_attributes(str(ib))
        for field in ("node_guid", "sys_image_guid", "hw_rev"):
            value = getattr(a, field)
            assert value is None or isinstance(value, int)
        for p in a.ports:
            assert p.state is None or isinstance(p.state, PortState)
            assert all(isinstance(g.gid, ipaddress.IPv6Address) for g in p.gids)
        hash(a)


def test_ports_dir_is_a_file_or_loop(tmp_path: Path) -> None:
    ib = tmp_path / "sys/class/infiniband/dev0"
    ib.mkdir(parents=True)
    (ib / "ports").write_text("1\n")
    assert device_attributes(str(ib)).ports == ()
    (ib / "ports").unlink()
    os.symlink("ports", ib / "ports")
    assert device_attributes(str(ib)).ports == ()


#: The node_guid values tests/test_oracle_core.py::test_node_guid checks against
#: libibverbs' ibv_get_device_guid (but "0002:c903:0000:123400000", too long for its
#: 24-byte read, which device_attributes' read takes).
ORACLE_GUIDS = ["0002:c903:0000:1234\n", "2:c903:0:1234\n", "c42:a103:a5:1c30\n",
                " 2: 3:4:5\n", "1 :2:3:4\n",
                "-0x10:0X1f:+3:ffffffff\n", "1:2:3:4junk\n", "1:2:3:4:5:6\n", "1:2:3\n",
                "junk\n", "0x:1:2:3\n", "12345:0:0:1\n", "fe80::1\n"]


@pytest.mark.parametrize("text", ORACLE_GUIDS)
def test_one_guid_parser(tmp_path: Path, text: str) -> None:
    """device_attributes' node_guid is the device's guid (0 there is None here)."""
    from tests import trees

    trees.build(tmp_path, trees.host(trees.rxe_dev("uverbs0", "rxe0", guid=text)))
    (dev,) = sysverbs.get_device_list(source="sysfs", sysfs_path=tmp_path / "sys",
                                      dev_dir=tmp_path / "dev/infiniband",
                                      providers="builtin")
    assert (device_attributes(dev).node_guid or 0) == dev.guid == sysverbs.get_device_guid(dev)

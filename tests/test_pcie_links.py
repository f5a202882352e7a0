"""PCIe links trained below what both ends support (sysverbs/placement/_links.py,
``pcie_link_degraded``): generated trees whose link files are written as the kernel
writes them (``current_link_speed`` "16.0 GT/s PCIe", ``current_link_width`` "16"), one
real capture (r-aa-fatty01's ``lspci -vvv``), and every bundled fixture (none raises it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import pytest

from sysverbs.placement import degraded_links, read_host
from sysverbs.placement._links import parse_speed, parse_width
from sysverbs.testing import HostBuilder
from sysverbs.testing.cache import fixture_tree
from sysverbs.testing.host import fixture_names

GEN = {3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe"}
HB = "/devices/pci0000:00"
RP_GPU, RP_NIC = f"{HB}/0000:00:01.0", f"{HB}/0000:00:02.0"
USP, DSP = f"{RP_GPU}/0000:01:00.0", f"{RP_GPU}/0000:01:00.0/0000:02:00.0"
GPU = f"{DSP}/0000:03:00.0"
NIC = f"{RP_NIC}/0000:04:00.0"

#: (current speed, current width, max speed, max width): None leaves the file out.
Link = tuple[Optional[str], Optional[str], Optional[str], Optional[str]]
FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


def _gen(gen: int, width: int, cap: Optional[tuple[int, int]] = None) -> Link:
    cg, cw = cap or (gen, width)
    return GEN[gen], str(width), GEN[cg], str(cw)


def _tree(tmp_path: Path, links: dict[str, Link], gpu: str = "h100") -> str:
    """A root port with a switch (upstream, downstream port) and a GPU below it, and a
    second root port with a ConnectX-7; ``links``: each function's link files."""
    hb = HostBuilder()
    root = hb.host_bridge("pci0000:00", numa_node=0)
    rp = hb.pci_bridge(f"{root}/0000:00:01.0", port="root")
    usp = hb.pci_bridge(f"{rp}/0000:01:00.0", port="upstream")
    dsp = hb.pci_bridge(f"{usp}/0000:02:00.0")
    hb.gpu(f"{dsp}/0000:03:00.0", model=gpu)
    rp2 = hb.pci_bridge(f"{root}/0000:00:02.0", port="root")
    hb.mlx5(path=f"{rp2}/0000:04:00.0", model="cx7", link_layer="Ethernet")
    host = hb.materialize(tmp_path)
    for path, values in links.items():
        for name, value in zip(FILES, values):
            f = host.sysfs / path.lstrip("/") / name
            if value is None:
                f.unlink(missing_ok=True)
            else:
                f.write_bytes(os.fsencode(value + "\n"))
    return str(host.sysfs)


def _healthy() -> dict[str, Link]:
    return {RP_GPU: _gen(5, 16), USP: _gen(5, 16), DSP: _gen(5, 16), GPU: _gen(5, 16),
            RP_NIC: _gen(5, 16), NIC: _gen(5, 16)}


def _found(tmp_path: Path, **changes: Link) -> list[tuple[str, str, str, object, object]]:
    links = _healthy()
    for key, value in changes.items():
        links[{"rp_gpu": RP_GPU, "usp": USP, "dsp": DSP, "gpu": GPU, "rp_nic": RP_NIC,
               "nic": NIC}[key]] = value
    host = read_host(_tree(tmp_path, links))
    return [(d.device, d.port, d.what, (d.speed, d.width), (d.capable_speed, d.capable_width))
            for d in degraded_links(host)]


def test_healthy_tree_has_no_finding(tmp_path: Path) -> None:
    assert _found(tmp_path) == []


def test_x8_on_an_x16_link(tmp_path: Path) -> None:
    # the NIC trained x8 (the port's files say the same: one link, two views)
    assert _found(tmp_path, nic=_gen(5, 8, (5, 16)), rp_nic=_gen(5, 8, (5, 16))) == [
        ("0000:04:00.0", "0000:00:02.0", "width", (32.0, 8), (32.0, 16))]


def test_gen3_on_a_gen5_link_for_a_nic(tmp_path: Path) -> None:
    found = _found(tmp_path, nic=_gen(3, 16, (5, 16)))
    assert found == [("0000:04:00.0", "0000:00:02.0", "speed", (8.0, 16), (32.0, 16))]
    host = read_host(_tree(tmp_path / "again", {**_healthy(), NIC: _gen(3, 16, (5, 16))}))
    (d,) = degraded_links(host)
    assert d.role == "nic" and d.names == ("mlx5_0",)
    msg = d.message()
    assert "8 GT/s x16, below the 32 GT/s x16" in msg and "lspci -vvv" in msg
    assert f"{host.sysfs_path}{NIC}" in msg and "current 8.0 GT/s PCIe x16" in msg


def test_idle_gpu_speed_down_training_is_no_finding(tmp_path: Path) -> None:
    # nvidia-smi: "PCIe Generation Current ... may be reduced when the GPU is not in use"
    assert _found(tmp_path, gpu=("2.5 GT/s PCIe", "16", GEN[5], "16"),
                  dsp=("2.5 GT/s PCIe", "16", GEN[5], "16")) == []


def test_gpu_width_degradation_is_a_finding(tmp_path: Path) -> None:
    assert _found(tmp_path, gpu=_gen(5, 8, (5, 16))) == [
        ("0000:03:00.0", "0000:02:00.0", "width", (32.0, 8), (32.0, 16))]


def test_a_bridge_on_the_gpu_path(tmp_path: Path) -> None:
    # the switch's upstream link at Gen3: the GPU's own link is fine
    assert _found(tmp_path, usp=_gen(3, 16, (5, 16))) == [
        ("0000:01:00.0", "0000:00:01.0", "speed", (8.0, 16), (32.0, 16))]


def test_gen4_nic_in_a_gen5_slot_is_no_finding(tmp_path: Path) -> None:
    assert _found(tmp_path, nic=_gen(4, 16)) == []
    # and a Gen5 x16 NIC in a Gen4 x8 slot: the slot is the capability
    assert _found(tmp_path / "b", nic=_gen(4, 8, (5, 16)), rp_nic=_gen(4, 8)) == []


@pytest.mark.parametrize("value", [
    ("Unknown", "16", GEN[5], "16"), ("Unknown speed", "0", "Unknown", "0"),
    (None, None, None, None), (GEN[3], "8", None, None)])
def test_unknown_and_missing_files_decide_nothing(tmp_path: Path, value: Link) -> None:
    assert _found(tmp_path, nic=value, rp_nic=value) == []
    # one end missing altogether (no port files): one end's max alone decides nothing
    assert _found(tmp_path / "b", nic=_gen(3, 8, (5, 16)), rp_nic=(None,) * 4) == []


@pytest.mark.parametrize("garbage", ["", "x", "-16", "16.0 GT/s PCIe\x00", "1e9 GT/s",
                                     "\udcff", "9" * 4000, "0x10", "3"])
def test_garbage_values(tmp_path: Path, garbage: str) -> None:
    assert parse_width(garbage) is None
    assert parse_speed(garbage) is None
    found = _found(tmp_path, nic=(garbage, garbage, GEN[5], "16"),
                   rp_nic=(garbage, garbage, garbage, garbage))
    assert found == []


def test_parsers_take_the_kernels_texts() -> None:
    assert [parse_speed(t) for t in ("2.5 GT/s PCIe", "5.0 GT/s PCIe", "8 GT/s", "64.0 GT/s PCIe",
                                     "Unknown", None)] == [2.5, 5.0, 8.0, 64.0, None, None]
    assert [parse_width(t) for t in ("16", "x8", " 4\n", "0", "7", None)] == [
        16, 8, 4, None, None, None]


@pytest.mark.parametrize("name", fixture_names())
def test_no_bundled_fixture_raises_it(name: str) -> None:
    tree = fixture_tree(name)
    assert degraded_links(read_host(tree.sysfs, recorded=True)) == ()

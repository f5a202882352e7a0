"""The testing kit's PCI-topology and CPU/NUMA hosts: layout details that the hwloc
oracle (tests/test_placement_hwloc.py) does not look at, and bad arguments."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sysverbs import testing
from sysverbs.testing import GPU_MODELS, HostBuilder, umockdev


def _host(tmp_path: Path) -> tuple[HostBuilder, Path]:
    hb = HostBuilder().cpu_topology(sockets=2, cores_per_socket=4, threads_per_core=2)
    root = hb.host_bridge("pci0000:00", numa_node=1)
    rp = hb.pci_bridge(f"{root}/0000:00:01.0", port="root", vendor=0x8086, device=0x352A)
    usp = hb.pci_bridge(f"{rp}/0000:01:00.0", port="upstream")
    dsp = hb.pci_bridge(f"{usp}/0000:02:00.0")
    hb.pci_bridge(f"{usp}/0000:02:01.0")  # an empty downstream port
    hb.mlx5(path=f"{dsp}/0000:03:00.0", model="cx7", vfs=2, sfs=1, link_layer="Ethernet")
    rp2 = hb.pci_bridge(f"{root}/0000:00:02.0", port="root")
    hb.mlx5_bond([f"{rp2}/0000:04:00.0", f"{rp2}/0000:04:00.1"])
    return hb, tmp_path


def test_cpu_numbering_is_linux_x86() -> None:
    # DGX A100 (2x EPYC 7742 NPS4): nvidia-smi shows node 3 = 48-63,176-191.
    hb = HostBuilder().cpu_topology(sockets=2, cores_per_socket=64, threads_per_core=2,
                                    nodes_per_socket=4)
    cpus = hb.numa_cpus
    assert len(cpus) == 8 and cpus[3] == (*range(48, 64), *range(176, 192))


def test_cpu_and_node_files(tmp_path: Path) -> None:
    hb, _ = _host(tmp_path)
    host = hb.materialize(tmp_path)
    system = host.sysfs / "devices/system"
    assert (system / "cpu/online").read_text() == "0-15\n"
    topo = system / "cpu/cpu9/topology"
    assert (topo / "thread_siblings_list").read_text() == "1,9\n"
    assert (topo / "core_cpus").read_text() == "0202\n"
    assert (topo / "package_cpus_list").read_text() == "0-3,8-11\n"
    assert (topo / "physical_package_id").read_text() == "0\n"
    node = system / "node/node1"
    assert (node / "cpulist").read_text() == "4-7,12-15\n"
    assert (node / "cpumap").read_text() == "f0f0\n"
    assert (node / "distance").read_text() == "32 10\n"
    assert (node / "meminfo").read_text().startswith("Node 1 MemTotal:")
    assert os.readlink(node / "cpu12") == "../../cpu/cpu12"
    assert (host.sysfs / "bus/cpu/devices/cpu0").is_symlink()
    assert (host.sysfs / "bus/node/devices/node1").is_symlink()


def test_bridges_and_locality(tmp_path: Path) -> None:
    hb, _ = _host(tmp_path)
    host = hb.materialize(tmp_path)
    pci = host.sysfs / "bus/pci/devices"

    def bus(bdf: str) -> tuple[int, int, int, int]:
        cfg = (pci / bdf / "config").read_bytes()
        return len(cfg), cfg[0x18], cfg[0x19], cfg[0x1A]

    assert bus("0000:00:01.0") == (256, 0, 1, 3)
    assert bus("0000:01:00.0") == (256, 1, 2, 3)
    assert bus("0000:02:00.0") == (256, 2, 3, 3)
    assert bus("0000:02:01.0") == (256, 2, 0, 0)  # nothing below: unassigned
    cfg = (pci / "0000:01:00.0/config").read_bytes()
    assert cfg[0x0E] == 1 and cfg[0x40] == 0x10 and (cfg[0x42] >> 4) & 0xF == 5
    assert (pci / "0000:00:02.0/subordinate_bus_number").read_text() == "4\n"
    for bdf in ("0000:03:00.0", "0000:03:00.2", "0000:04:00.1", "0000:00:01.0"):
        assert (pci / bdf / "numa_node").read_text() == "1\n"
        assert (pci / bdf / "local_cpulist").read_text() == "4-7,12-15\n"
        assert (pci / bdf / "local_cpus").read_text() == "f0f0\n"
    assert os.readlink(pci / "0000:03:00.3/physfn") == "../0000:03:00.0"


def test_sf_bond_and_proc(tmp_path: Path) -> None:
    hb, _ = _host(tmp_path)
    hb.gpu(hb.host_bridge("pci0000:80", numa_node=-1) + "/0000:80:00.0", model="a100",
           uuid="GPU-0123", minor=7)
    host = hb.materialize(tmp_path)
    ib = host.sysfs / "class/infiniband"
    names = sorted(p.name for p in ib.iterdir())
    assert names == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_bond_0"]
    sf = (ib / "mlx5_3/device").resolve()
    assert sf.name == "mlx5_core.sf.1" and sf.parent.name == "0000:03:00.0"
    assert (ib / "mlx5_bond_0/device").resolve().name == "0000:04:00.0"
    net = host.sysfs / "class/net"
    assert (net / "bond0/lower_bond0s0").resolve() == (net / "bond0s0").resolve()
    assert (net / "bond0s1/master").resolve() == (net / "bond0").resolve()
    info = (host.proc / "driver/nvidia/gpus/0000:80:00.0/information").read_text()
    assert "GPU UUID: \t GPU-0123\n" in info and "Device Minor: \t 7\n" in info
    assert "Bus Location: \t 0000:80:00.0\n" in info
    pci = host.sysfs / "bus/pci/devices/0000:80:00.0"
    assert (pci / "numa_node").read_text() == "-1\n"
    assert (pci / "local_cpulist").read_text() == "0-15\n"
    assert (pci / "class").read_text() == f"0x{GPU_MODELS['a100'].pci_class:06x}\n"


def test_proc_file_stays_in_the_proc_root(tmp_path: Path) -> None:
    attr = umockdev.proc_file("/devices/virtual/net/lo", "/proc/cpuinfo", "x\n")
    assert attr.name == "../../../../../proc/cpuinfo"
    for bad in ("/etc/passwd", "/proc/../etc/x", "/proc"):
        with pytest.raises(ValueError):
            umockdev.proc_file("/devices/virtual/net/lo", bad, "x")
    rec = umockdev.Recording((umockdev.Record(
        "/devices/virtual/net/lo", (("SUBSYSTEM", "net"),),
        (umockdev.Attribute("../../../../../etc/x", b"1"),)),))
    with pytest.raises(ValueError):
        testing.materialize(rec, tmp_path)
    assert not (tmp_path / "etc").exists()


def test_bad_topology_arguments() -> None:
    hb = HostBuilder()
    with pytest.raises(ValueError):
        hb.host_bridge("pci0:0")
    root = hb.host_bridge("pci0000:00")
    with pytest.raises(ValueError):
        hb.pci_bridge(f"{root}/0000:00:01.0", port="sideways")
    with pytest.raises(ValueError):
        hb.pci_bridge("/devices/pci0000:40/0000:40:01.0")  # below no host bridge
    with pytest.raises(ValueError):
        hb.pci_device(f"{root}/not-a-bdf", vendor=1, device=2, pci_class=3)
    with pytest.raises(ValueError):
        hb.gpu(f"{root}/0000:00:05.0", model="voodoo")
    with pytest.raises(ValueError):
        hb.cpu_topology(cores_per_socket=3, nodes_per_socket=2)
    with pytest.raises(ValueError):
        hb.cpu_topology(sockets=2, distances=[[10]])
    with pytest.raises(ValueError):
        hb.mlx5_bond([f"{root}/0000:00:06.0"])


def test_record_host_keeps_what_hwloc_needs(tmp_path: Path) -> None:
    from sysverbs.testing import record_host

    hb, _ = _host(tmp_path)
    hb.gpu(hb.host_bridge("pci0000:80", numa_node=0) + "/0000:80:00.0", model="h100")
    host = hb.materialize(tmp_path / "a")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "information").write_text("SECRET\n")
    gpus = host.proc / "driver/nvidia/gpus"
    os.symlink(str(outside), gpus / "0000:03:00.0")  # a recorded PCI function's name
    rec = record_host(host.sysfs, devices="all")
    assert "SECRET" not in umockdev.dumps(rec)
    by_name = {r.name: r for r in rec}
    assert by_name["0000:01:00.0"].attribute("config") is not None  # a bridge
    assert by_name["0000:03:00.0"].attribute("config") is None  # not a bridge
    assert by_name["cpu0"].value("../online") == b"0-15\n"
    assert by_name["node0"].value("../possible") == b"0-1\n"
    copy = testing.materialize(rec, tmp_path / "b")
    info = "driver/nvidia/gpus/0000:80:00.0/information"
    assert (copy.proc / info).read_bytes() == (host.proc / info).read_bytes()

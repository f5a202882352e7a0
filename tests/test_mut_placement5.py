"""The PCI tree and the host read (issue 41: the mutants of ``make mutation``):
placement/_pci.py's link resolution, bus walk, depth limits and lazily read
attributes, and placement/_read.py's NUMA nodes, GPUs, RDMA devices, ports and bonds,
on small hand-made trees (plain directories, files and links) and pure functions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import pytest

from sysverbs.ground.errors import WrongTypeError
from sysverbs.ground.hostroot import HostRoot
from sysverbs.ground.inputs import changed
from sysverbs.ground.sysfs_read import ReadOnce
from sysverbs.placement import read_host
from sysverbs.placement._pci import PciReader, read_text, resolve_link
from sysverbs.placement._read import read_host_at

from .pcitree import PciTree


def _b(p: Path) -> bytes:
    return os.fsencode(p)


def _chain(n: int) -> list[str]:
    """``n`` components below devices/: a host bridge, then n - 1 distinct BDFs."""
    return ["pci0000:00"] + [f"0000:{i:02x}:00.0" for i in range(n - 1)]


# ------------------------------------------------------------------ placement/_pci.py

def test_resolve_link_stays_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    (root / "devices" / "a").mkdir(parents=True)
    (root / "class").mkdir()
    os.symlink("../devices/a", root / "class" / "x")
    os.symlink("../../outside", root / "class" / "y")
    os.symlink("/xyz/devices/a", root / "class" / "z")  # absolute, not /sys: outside
    os.symlink("/sys/devices/a", root / "class" / "abs")  # the real /sys: this root
    os.symlink("../devices/./b/../a", root / "class" / "dots")
    os.symlink("..//devices/a", root / "class" / "slashes")
    (root / "devices" / "b").mkdir()
    a = _b(root / "devices" / "a")
    for name in ("x", "abs", "dots", "slashes"):
        assert resolve_link(_b(root), _b(root / "class" / name)) == a, name
    assert resolve_link(_b(root), _b(root / "class" / "y")) is None
    assert resolve_link(_b(root), _b(root / "class" / "z")) is None
    # a link two components below "/" going up to "/", in the root "/" itself
    link = f"/tmp/sysverbs-mut5-{os.getpid()}-{os.urandom(4).hex()}"
    os.symlink("../tmp", link)
    try:
        assert resolve_link(b"/", os.fsencode(link)) == b"/tmp"
    finally:
        os.unlink(link)


def test_a_chain_of_eight_links_resolves_nine_do_not(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    (root / "d").mkdir(parents=True)
    prev = "d"
    for i in range(9):
        os.symlink(prev, root / f"l{i}")
        prev = f"l{i}"
    assert resolve_link(_b(root), _b(root / "l7")) == _b(root / "d")  # 8 links
    assert resolve_link(_b(root), _b(root / "l8")) is None  # 9


def test_an_attribute_is_read_up_to_4096_bytes(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 4095)
    (tmp_path / "b").write_bytes(b"x" * 4096)
    assert read_text(_b(tmp_path / "a")) == "x" * 4095
    assert read_text(_b(tmp_path / "b")) is None  # cut: libibverbs' rule


def test_depth_limits_of_the_tree() -> None:
    """64 components below devices/ are placed, 65 are a broken tree (lexical: no
    file is read)."""
    r = PciReader(b"/nonexistent/sys")
    deep = r.devices + b"/" + "/".join(_chain(64)).encode()
    assert r.add_path(deep, True) == "0000:3e:00.0"
    assert r.pci["0000:3e:00.0"].bridges[-1] == "0000:00:00.0"
    assert len(r.pci["0000:3e:00.0"].ancestors) == 63
    assert r.add_path(r.devices + b"/" + "/".join(_chain(65)).encode(), True) is None
    fresh = PciReader(b"/nonexistent/sys")
    assert fresh.pci_at(deep + b"/infiniband/x") is None  # 66 components
    assert fresh.pci_at(deep) == "0000:3e:00.0"
    assert not any(d.listed for d in fresh.pci.values()) and len(fresh.pci) == 63
    assert fresh.components(deep) == _chain(64)


def test_vmd_endpoint_behind_a_bridge() -> None:
    r = PciReader(b"/nonexistent/sys")
    path = r.devices + b"/pci0000:00/0000:00:01.0/0000:01:00.5/pci10000:00/10000:00:02.0"
    assert r.add_path(path, True) == "10000:00:02.0"
    d = r.pci["10000:00:02.0"]
    assert (d.vmd, d.host_bridge, d.top_host_bridge, d.bridges) == (
        "0000:01:00.5", "pci10000:00", "pci0000:00", ())
    assert d.ancestors == ("pci0000:00", "0000:00:01.0", "0000:01:00.5", "pci10000:00")
    assert r.pci["0000:01:00.5"].vmd is None
    assert r.host_bridges == {"pci0000:00", "pci10000:00"}
    # a loop: a name twice on a path (a host bridge, a BDF across a host bridge, itself)
    for path, name in (("pci0000:00/0000:00:01.0/pci0000:00/0000:00:03.0", "pci0000:00"),
                       ("pci0000:00/0000:00:01.0/pci0001:00/0000:00:01.0/0000:05:00.0",
                        "0000:00:01.0")):
        assert r.add_path(r.devices + b"/" + path.encode(), True) is None
        assert r.problems[-1] == (f"{path.rsplit('/', 1)[1]}: {name} appears twice on its "
                                  "path (a loop); not placed")
    assert r.add_path(r.devices + b"/pci0002:00/0000:00:07.0/pci0003:00/0000:00:07.0",
                      True) is None
    assert r.problems[-1] == "0000:00:07.0: appears on its own path (a loop); not placed"
    assert "0000:00:03.0" not in r.pci and "0000:05:00.0" not in r.pci
    # a host bridge right below another: no VMD endpoint; a function with none above
    assert r.add_path(r.devices + b"/pci0005:00/pci0006:00/0006:00:01.0", True)
    d = r.pci["0006:00:01.0"]
    assert (d.vmd, d.host_bridge, d.top_host_bridge) == (None, "pci0006:00", "pci0005:00")
    assert r.add_path(r.devices + b"/pci0009:00/0009:00:01.0/pci000a:00/pci000b:00/"
                      b"000b:00:01.0", True)
    assert (r.pci["000b:00:01.0"].vmd, r.pci["0009:00:01.0"].vmd) == (None, None)
    assert r.add_path(r.devices + b"/0000:09:00.0", True) == "0000:09:00.0"
    assert r.problems[-1] == "0000:09:00.0: no host bridge (pciDDDD:BB) above it in sysfs"
    fresh = PciReader(b"/nonexistent/sys")
    assert fresh.pci_at(fresh.devices + b"/0000:0c:00.0/infiniband/x") == "0000:0c:00.0"


def test_walk_without_bus_pci_devices(tmp_path: Path) -> None:
    """No bus/pci/devices entry: devices/ is walked, host bridges found up to three
    levels down (platform/ACPI parents), nothing but PCI names entered inside one,
    virtual/ and system/ left alone, files and links not entered."""
    sys_ = tmp_path / "sys"
    (sys_ / "bus" / "pci" / "devices").mkdir(parents=True)
    dev = sys_ / "devices"
    found = ["pci0000:00/0000:00:01.0", "pci0000:00/0000:00:01.0/0000:01:00.0",
             "a/b/c/pci0002:00/0002:00:00.0",
             "pci0000:00/0000:00:01.0/pci10000:00/10000:00:00.0"]
    missed = ["pci0000:00/0000:00:01.0/extra/0000:09:00.0",
              "a/b/c/d/pci0003:00/0003:00:00.0", "virtual/pci0004:00/0004:00:00.0",
              "system/pci0005:00/0005:00:00.0", "a/b/c/aaa/pci0006:00/0006:00:00.0"]
    for p in found + missed:
        (dev / p).mkdir(parents=True)
    (dev / "pci0000:00" / "0000:00:00.1").write_text("")  # a file, sorted first
    os.symlink("0000:00:01.0", dev / "pci0000:00" / "0000:00:00.2")  # a link
    r = PciReader(_b(sys_))
    r.read_pci()
    assert sorted(r.pci) == ["0000:00:01.0", "0000:01:00.0", "0002:00:00.0",
                             "10000:00:00.0"]
    assert all(d.listed for d in r.pci.values())
    assert r.host_bridges == {"pci0000:00", "pci0002:00", "pci10000:00"}
    assert r.problems == []


def _fn(sys_: Path, path: str, uevent: str = "") -> Path:
    d = sys_ / "devices" / path
    d.mkdir(parents=True, exist_ok=True)
    if uevent:
        (d / "uevent").write_text(uevent)
    return d


def _bus(sys_: Path, name: str, target: str) -> None:
    bus = sys_ / "bus" / "pci" / "devices"
    bus.mkdir(parents=True, exist_ok=True)
    os.symlink(target, bus / name)


def test_bus_links_are_taken_normalized(tmp_path: Path) -> None:
    """The kernel's ``../../../devices/...`` link is taken as it is; one with ``//``,
    ``..`` or ``.`` in it is resolved, and the function's path is the directory's
    plain path; a link to another name, to a directory outside devices/ or to
    nothing is said."""
    sys_ = tmp_path / "sys"
    kernel_form = "../../../devices/pci0000:00/"
    for fn in ("0000:00:01.0", "0000:00:02.0", "0000:00:03.0", "0000:00:04.0"):
        _fn(sys_, "pci0000:00/" + fn)
    _bus(sys_, "0000:00:01.0", kernel_form + "0000:00:01.0")
    _bus(sys_, "0000:00:02.0", "../../../devices//pci0000:00/0000:00:02.0")
    _bus(sys_, "0000:00:03.0", "../../../devices/../devices/pci0000:00/0000:00:03.0")
    _bus(sys_, "0000:00:04.0", "../../../devices/./pci0000:00/0000:00:04.0")
    _bus(sys_, "0000:00:05.0", kernel_form + "0000:00:04.0")  # another name
    (sys_ / "other" / "0000:00:06.0").mkdir(parents=True)
    _bus(sys_, "0000:00:06.0", "../../../other/0000:00:06.0")
    _bus(sys_, "0000:00:07.0", kernel_form + "0000:00:07.0")  # dangling
    (sys_ / "devices" / "pci0000:00" / "0000:00:08.0").write_text("")
    # listed: a bridge found first above its function (then listed), one never listed
    for path in ("pci0000:00/0000:00:1c.0/0000:00:1b.0", "pci0000:00/0000:00:1d.0/0000:00:1e.0"):
        _fn(sys_, path)
        _bus(sys_, path.rsplit("/", 1)[1], "../../../devices/" + path)
    _bus(sys_, "0000:00:1c.0", "../../../devices/pci0000:00/0000:00:1c.0")
    _bus(sys_, "0000:00:08.0", kernel_form + "0000:00:08.0")  # no directory
    (sys_ / "bus/pci/devices/0000:00:09.0").mkdir()  # no link
    r = PciReader(_b(sys_))
    r.read_pci()
    base = sys_ / "devices" / "pci0000:00"
    assert {a: (d.path, d.listed) for a, d in r.pci.items()} == {
        **{f"0000:00:0{i}.0": (str(base / f"0000:00:0{i}.0"), True) for i in (1, 2, 3, 4)},
        "0000:00:1b.0": (str(base / "0000:00:1c.0/0000:00:1b.0"), True),
        "0000:00:1c.0": (str(base / "0000:00:1c.0"), True),
        "0000:00:1d.0": (str(base / "0000:00:1d.0"), False),
        "0000:00:1e.0": (str(base / "0000:00:1d.0/0000:00:1e.0"), True)}
    assert r.real_dirs == {_b(base / f"0000:00:0{i}.0") for i in (1, 2, 3, 4)} | {
        _b(sys_ / "other" / "0000:00:06.0"), _b(base / "0000:00:1c.0"),
        _b(base / "0000:00:1c.0/0000:00:1b.0"), _b(base / "0000:00:1d.0/0000:00:1e.0")}
    assert r.problems == [
        f"bus/pci/devices/0000:00:05.0: points to {base}/0000:00:04.0",
        "0000:00:06.0: no PCI path below devices/",
        "bus/pci/devices/0000:00:07.0: dangling link (or outside the root, or to no "
        "directory)",
        "bus/pci/devices/0000:00:08.0: dangling link (or outside the root, or to no "
        "directory)",
        "bus/pci/devices/0000:00:09.0: dangling link (or outside the root, or to no "
        "directory)"]


def test_ids_bridge_and_lazy_attributes(tmp_path: Path) -> None:
    sys_ = tmp_path / "sys"
    kernel = ("DRIVER=pcieport\nPCI_CLASS=60400\nPCI_ID=8086:347A\n"
              "PCI_SUBSYS_ID=1028:0A6B\nPCI_SLOT_NAME=0000:00:01.0\nMODALIAS=pci:v0\n")
    br = _fn(sys_, "pci0000:00/0000:00:01.0", kernel)
    # another form (keys in another order, lower case hex): parsed line by line
    nic = _fn(sys_, "pci0000:00/0000:00:01.0/0000:01:00.1",
              "PCI_ID=15b3:101d\nPCI_CLASS=20000\nPCI_SUBSYS_ID=15b3:0016\nX=1\n")
    # no uevent: the attribute files and the driver link
    gpu = _fn(sys_, "pci0000:00/0000:00:01.0/0000:02:00.0")
    for name, text in (("vendor", "0x10de"), ("device", "0x2330"), ("class", "0x030200"),
                       ("subsystem_vendor", "0x10de"), ("subsystem_device", " 0x16c1\n"),
                       ("numa_node", "1"), ("local_cpulist", "0-3,8"),
                       ("current_link_speed", "32.0 GT/s PCIe"), ("max_link_width", "16")):
        (gpu / name).write_text(text + "\n")
    (nic / "numa_node").write_text("0\n")
    (nic / "current_link_width").write_text("x" * 64)  # 64 bytes: cut (a 64-byte read)
    (nic / "max_link_speed").write_text("y" * 63)
    (sys_ / "bus" / "pci" / "drivers" / "nvidia").mkdir(parents=True)
    os.symlink("../../../../bus/pci/drivers/nvidia", gpu / "driver")
    os.symlink("../0000:01:00.1", gpu / "physfn")
    (br / "numa_node").write_text("-1\n")
    bare = _fn(sys_, "pci0000:00/0000:00:01.0/0000:03:00.0")  # nothing readable
    for d in (br, nic, gpu, bare):
        _bus(sys_, d.name, os.path.relpath(d, sys_ / "bus" / "pci" / "devices"))
    r = PciReader(_b(sys_))
    r.read_pci()
    b, n, g = (r.pci[a] for a in ("0000:00:01.0", "0000:01:00.1", "0000:02:00.0"))
    assert (b.vendor, b.device, b.subsystem_vendor, b.subsystem_device, b.pci_class,
            b.driver) == (0x8086, 0x347A, 0x1028, 0x0A6B, 0x060400, "pcieport")
    assert (n.vendor, n.device, n.subsystem_vendor, n.subsystem_device, n.pci_class,
            n.driver) == (0x15B3, 0x101D, 0x15B3, 0x0016, 0x020000, None)
    assert (g.vendor, g.device, g.subsystem_vendor, g.subsystem_device, g.pci_class,
            g.driver) == (0x10DE, 0x2330, 0x10DE, 0x16C1, 0x030200, "nvidia")
    x = r.pci["0000:03:00.0"]
    assert (x.vendor, x.device, x.subsystem_vendor, x.subsystem_device, x.pci_class,
            x.driver, x.physfn, x.link) == (None,) * 7 + ((None,) * 4,)
    assert (b.is_bridge, n.is_bridge, g.is_bridge, x.is_bridge) == (True, False, False, False)
    assert (b.numa_node, b.numa_raw, g.numa_node, g.numa_raw) == (None, "-1", 1, "1")
    assert (n.numa_node, n.numa_raw, n.local_cpus) == (0, "0", None)
    assert n.link == (None, None, "y" * 63, None)
    assert g.local_cpus == frozenset({0, 1, 2, 3, 8})
    assert (g.physfn, g.is_vf, n.physfn, n.is_vf) == ("0000:01:00.1", True, None, False)
    assert g.link == ("32.0 GT/s PCIe", None, None, "16")
    assert repr(g) == "PciDevice('0000:02:00.0', host_bridge='pci0000:00')"


def test_bus_reads_are_inputs_of_a_read_once_scope(tmp_path: Path) -> None:
    """Inside a read-once scope the bus links are read by path (recorded): a link
    retargeted afterwards is a change the steady scrape sees."""
    sys_ = tmp_path / "sys"
    for fn in ("0000:00:01.0", "0000:00:02.0"):
        _fn(sys_, "pci0000:00/" + fn)
    _bus(sys_, "0000:00:01.0", "../../../devices/pci0000:00/0000:00:01.0")
    memo = ReadOnce()
    with memo:
        r = PciReader(_b(sys_))
        r.read_pci()
    assert list(r.pci) == ["0000:00:01.0"] and changed(memo) is None
    link = sys_ / "bus" / "pci" / "devices" / "0000:00:01.0"
    link.unlink()
    os.symlink("../../../devices/pci0000:00/0000:00:02.0", link)
    assert changed(memo) is not None


# ------------------------------------------------------------------ placement/_read.py

ETH = ("4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)")


def test_numa_nodes_and_gpus(tmp_path: Path) -> None:
    """NUMA nodes in number order (an unreadable cpulist said, and empty); GPUs: the
    NVIDIA and AMD display/3D/processing-accelerator functions in PCI order, not a
    bridge with functions below it, their proc information parsed line by line."""
    t = PciTree(tmp_path)
    t.node(10, "8-9").node(2, "4-7").node(0, "0-3")
    (t.sys / "devices/system/node/node2/cpulist").unlink()
    (t.sys / "devices/system/node/possible").write_text("0-10\n")
    (t.sys / "devices/system/node/has_cpu").write_text("0,2,10\n")  # sorted first
    (t.sys / "devices/system/node/nodex").mkdir()
    t.pci("pci0000:00/0000:00:01.0")
    t.gpu("pci0000:00/0000:00:01.0/0000:0a:00.0", uuid="GPU-aaa", minor=3)
    t.gpu("pci0000:00/0000:00:01.0/0000:02:00.0", vendor=0x1002, cls=0x038000)
    t.gpu("pci0000:00/0000:00:01.0/0000:03:00.0", cls=0x120000)
    t.gpu("pci0000:00/0000:00:01.0/0000:04:00.0", cls=0x030000)
    t.gpu("pci0000:00/0000:00:01.0/0000:05:00.0", cls=0x040300)  # NVIDIA audio
    t.gpu("pci0000:00/0000:00:01.0/0000:06:00.0", vendor=0x8086, cls=0x030000)
    t.gpu("pci0000:00/0000:00:01.0/0000:0b:00.0", cls=0x038000)
    for n, cls in enumerate((0x030000, 0x030200, 0x120000)):
        t.gpu(f"pci0000:00/0000:00:01.0/0000:0c:00.{n}", vendor=0x1002, cls=cls)
    t.gpu("pci0000:00/0000:00:01.0/0000:07:00.0", cls=0x030200)  # a GPU-class bridge
    t.pci("pci0000:00/0000:00:01.0/0000:07:00.0/0000:08:00.0")
    info = t.proc / "driver/nvidia/gpus/0000:03:00.0/information"
    info.parent.mkdir(parents=True)
    info.write_text("Model:\nno colon here\nGPU UUID: \nDevice Minor: x\n")
    big = t.proc / "driver/nvidia/gpus/0000:04:00.0/information"
    big.parent.mkdir(parents=True)
    big.write_text("Model: M\n" + "x" * (8192 - 9))  # 8192 bytes, no newline: cut
    full = t.proc / "driver/nvidia/gpus/0000:0b:00.0/information"
    full.parent.mkdir(parents=True)
    full.write_text("Model: M\n" + "x" * (8192 - 10) + "\n")  # 8192 bytes: whole
    host = read_host(t.sys, t.proc)
    assert host.numa_nodes == {0: frozenset(range(4)), 2: frozenset(),
                               10: frozenset({8, 9})}
    assert list(host.numa_nodes) == [0, 2, 10]
    assert "devices/system/node/node2/cpulist unreadable" in host.problems
    assert [(g.index, g.address, g.vendor, g.uuid, g.minor, g.model) for g in host.gpus] == [
        (0, "0000:02:00.0", "amd", None, None, None),
        (1, "0000:03:00.0", "nvidia", None, None, None),
        (2, "0000:04:00.0", "nvidia", None, None, None),
        (3, "0000:0a:00.0", "nvidia", "GPU-aaa", 3, "NVIDIA A100-SXM4-80GB"),
        (4, "0000:0b:00.0", "nvidia", None, None, "M"),
        (5, "0000:0c:00.0", "amd", None, None, None),
        (6, "0000:0c:00.1", "amd", None, None, None),
        (7, "0000:0c:00.2", "amd", None, None, None)]
    assert host.gpus[3].pci is host.pci["0000:0a:00.0"]


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_rdma_devices_ports_and_kinds(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    rp = "pci0000:00/0000:00:02.0"
    t.pci(rp)
    pf = f"{rp}/0000:03:00.0"
    ib0 = t.rdma("mlx5_0", pf, ports=(ETH, ETH, ETH), uverbs=3)
    for n, port in enumerate((1, 2, 10)):
        if port != n + 1:
            (ib0 / "ports" / str(n + 1)).rename(ib0 / "ports" / str(port))
    for name, dev_port in (("eth1", "1"), ("eth0", "0"), ("ethx", "x")):
        _w(t.sys / "devices" / pf / "net" / name / "dev_port", dev_port + "\n")
    _w(ib0 / "ports/1/state", "DOWN\n")
    (ib0 / "ports/2/state").unlink()
    _w(ib0 / "ports/10/rate", "f" * 127 + "\n")  # 128 bytes, as read
    (ib0 / "ports/junk").mkdir()
    # uverbs: the smallest N of a name; the name up to a NUL byte
    _w(t.sys / "class/infiniband_verbs/uverbs1/ibdev", "mlx5_0\n")
    _w(t.sys / "class/infiniband_verbs/uverbs7/ibdev", "mlx5_10\0junk\n")
    _w(t.sys / "class/infiniband_verbs/uverbs2/ibdev", "")
    _w(t.sys / "class/infiniband_verbs/uverbs9/ibdev", "z" * 64)  # cut: no name
    _w(t.sys / "class/infiniband" / ("z" * 64) / "node_guid", "1\n")
    _w(t.sys / "class/infiniband_verbs/uverbs5/ibdev", "y" * 63 + "\n")
    _w(t.sys / "class/infiniband" / ("y" * 63) / "parent", "q" * 63 + "\n")
    _w(t.sys / "class/infiniband" / ("x" * 63) / "parent", "q" * 64)  # cut: none
    _w(t.sys / "class/infiniband_verbs/abi_version", "6\n")
    # one port, GID 0 without a netdev, GID 1 with one
    ib10 = t.rdma("mlx5_10", f"{rp}/0000:04:00.0", ports=(ETH,), uverbs=None)
    _w(ib10 / "ports/1/gid_attrs/ndevs/1", "e" * 63 + "\n")  # 64 bytes, as read
    _w(t.netdev("ens4", f"{rp}/0000:04:00.0") / "dev_port", "0\n")
    # InfiniBand: no GID netdev is read; its one port takes the function's netdev
    ib2 = t.rdma("mlx5_2", f"{rp}/0000:05:00.0", uverbs=None)
    _w(ib2 / "ports/1/gid_attrs/ndevs/0", "bogus\n")
    _w(t.sys / "devices" / rp / "0000:05:00.0/net/ib0/ifindex", "5\n")  # no dev_port
    t.rdma("mlx5_bond_0", f"{rp}/0000:06:00.0", ports=(ETH,), netdev="bond0", uverbs=None)
    t.rdma("mlx5_3", f"{rp}/0000:07:00.0/mlx5_core.sf.2", pci_function=False, uverbs=None)
    t.pci(f"{rp}/0000:07:00.0", cls=0x020000)
    t.rdma("irdma0", f"{rp}/0000:08:00.0/ice.roce.0", pci_function=False, uverbs=None)
    t.pci(f"{rp}/0000:08:00.0", cls=0x020000)
    t.rdma("hns_0", "platform/HISI0001:00", pci_function=False, uverbs=None)
    t.rdma("rxe0", None, soft_parent="ens4", uverbs=None)
    t.rdma("rxe1", None, soft_parent="nope", uverbs=None)
    t.rdma("rxe2", None, soft_parent="veth0", uverbs=None)
    t.netdev("veth0", None)
    t.rdma("siw0", None, uverbs=None)
    # a netdev on a device with no PCI ancestor
    t.rdma("rxe3", None, soft_parent="plat0", uverbs=None)
    _w(t.sys / "devices/platform/x/net/plat0/ifindex", "9\n")
    os.symlink("../../devices/platform/x/net/plat0", t.sys / "class/net/plat0")
    os.symlink("../../devices/nowhere", t.sys / "class/infiniband/gone")
    # a device directory (not a link) in class/infiniband, and one with a dangling link
    _w(t.sys / "class/infiniband/dir0/node_guid", "g" * 63 + "\n")  # 64 bytes, as read
    # two ports: each takes the netdev whose dev_port is its number - 1 (a dev_port of
    # 33 bytes is cut: read as 32)
    ib4 = t.rdma("mlx5_4", f"{rp}/0000:0a:00.0", ports=(ETH, ETH), uverbs=None)
    _w(ib4 / "ports/1/gid_attrs/ndevs/0", "h" * 63 + "\n")
    _w(ib4 / "ports/2/rate", "r" * 128)  # 128 bytes without a newline: cut
    for name, size in (("state", 64), ("link_layer", 64)):  # read as libibverbs reads
        _w(ib4 / "ports/1" / name, "s" * (size - 1) + "\n")
        _w(ib4 / "ports/2" / name, "s" * size)
    _w(ib4 / "node_guid", "g" * 64)
    _w(ib4 / "ports/2/gid_attrs/ndevs/0", "n" * 64)  # cut
    _w(ib4 / "ports/2/gid_attrs/ndevs/1", "n" * 64)  # cut
    for name, dev_port in (("p0", "0\n"), ("p1", " " * 31 + "1\n"), ("p2", " " * 30 + "1\n")):
        _w(t.sys / "devices" / rp / "0000:0a:00.0/net" / name / "dev_port", dev_port)
    bad = t.rdma("mlx5_9", f"{rp}/0000:09:00.0", uverbs=None)
    (bad / "device").unlink()
    os.symlink("../../../nowhere", bad / "device")
    host = read_host(t.sys, t.proc)
    got = {n.name: (n.kind, n.address, n.parent, n.placement, n.uverbs) for n in host.nics}
    del got["mlx5_4"]
    assert got.pop("z" * 64)[4] is None
    assert got.pop("x" * 63)[2:] == (None, "no device link and no parent netdev", None)
    assert got.pop("y" * 63)[2:] == ("q" * 63, f"netdev {'q' * 63} not found in class/net", 5)
    assert got == {
        "dir0": ("unplaced", None, None, "no device link and no parent netdev", None),
        "hns_0": ("unplaced", None, "HISI0001:00",
                  "its device (HISI0001:00) has no PCI ancestor", None),
        "irdma0": ("aux", "0000:08:00.0", "ice.roce.0",
                   "ice.roce.0 on PCI function 0000:08:00.0", None),
        "mlx5_0": ("pf", "0000:03:00.0", "0000:03:00.0", "at PCI function 0000:03:00.0", 1),
        "mlx5_2": ("pf", "0000:05:00.0", "0000:05:00.0", "at PCI function 0000:05:00.0",
                   None),
        "mlx5_3": ("sf", "0000:07:00.0", "mlx5_core.sf.2",
                   "mlx5_core.sf.2 on PCI function 0000:07:00.0", None),
        "mlx5_9": ("unplaced", None, None, "its device link is dangling (or leaves the "
                   "root, or leads to no directory)", None),
        "mlx5_10": ("pf", "0000:04:00.0", "0000:04:00.0", "at PCI function 0000:04:00.0",
                    7),
        "mlx5_bond_0": ("bond", "0000:06:00.0", "0000:06:00.0",
                        "at PCI function 0000:06:00.0", None),
        "rxe0": ("soft", "0000:04:00.0", "ens4", "via netdev ens4", None),
        "rxe1": ("unplaced", None, "nope", "netdev nope not found in class/net", None),
        "rxe2": ("unplaced", None, "veth0", "netdev veth0 is virtual (no PCI device)", None),
        "rxe3": ("unplaced", None, "plat0", "netdev plat0 has no PCI ancestor", None),
        "siw0": ("unplaced", None, None, "no device link and no parent netdev", None)}
    assert [n.name for n in host.nics] == [
        "dir0", "hns_0", "irdma0", "mlx5_0", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_9", "mlx5_10",
        "mlx5_bond_0", "rxe0", "rxe1", "rxe2", "rxe3", "siw0", "x" * 63, "y" * 63, "z" * 64]
    nic = {n.name: n for n in host.nics}
    assert [(p.port, p.state, p.link_layer, p.rate_gbps, p.rate, p.netdevs)
            for p in nic["mlx5_0"].ports] == [
        (1, "DOWN", "Ethernet", 100.0, "100 Gb/sec (4X EDR)", ("eth0",)),
        (2, None, "Ethernet", 100.0, "100 Gb/sec (4X EDR)", ("eth1",)),
        (10, "ACTIVE", "Ethernet", None, "f" * 127, ())]
    assert nic["mlx5_10"].ports[0].netdevs == ("e" * 63,)
    assert nic["mlx5_2"].ports[0].netdevs == ("ib0",)
    assert nic["mlx5_2"].ports[0].state == "ACTIVE"
    assert nic["mlx5_bond_0"].ports[0].netdevs == ("bond0",)
    assert nic["rxe0"].ports[0].netdevs == () and nic["mlx5_3"].ports[0].netdevs == ()
    assert nic["mlx5_0"].node_guid == "0c42:a103:0000:0001"
    assert nic["dir0"].node_guid == "g" * 63
    assert [(p.netdevs, p.rate, p.state, p.link_layer) for p in nic["mlx5_4"].ports] == [
        (("h" * 63,), "100 Gb/sec (4X EDR)", "s" * 63, "s" * 63), (("p2",), None, None, None)]
    assert nic["mlx5_4"].node_guid is None
    assert "gone" not in nic and "class/infiniband/gone: dangling link" in host.problems
    unplaced = [p for p in host.problems if ": unplaced: " in p]
    assert unplaced == [f"{n}: unplaced: {got[n][3]}" for n in (
        "dir0", "hns_0", "mlx5_9", "rxe1", "rxe2", "rxe3", "siw0")] + [
        f"{'x' * 63}: unplaced: no device link and no parent netdev",
        f"{'y' * 63}: unplaced: netdev {'q' * 63} not found in class/net",
        f"{'z' * 64}: unplaced: no device link and no parent netdev"]


def test_bond_slaves(tmp_path: Path) -> None:
    """A netdev with a ``master`` link is a bond slave when it has ``bonding_slave/``
    or its master has ``bonding/``; another master (a bridge) is not a bond; a bond
    device itself is no slave; a soft device's netdev is found by class/net."""
    t = PciTree(tmp_path)
    rp = "pci0000:00/0000:00:02.0"
    t.pci(rp)
    bond0, br0, bond1 = (t.netdev(n, None) for n in ("bond0", "br0", "bond1"))
    (bond1 / "bonding").mkdir()
    (br0 / "bridge").mkdir()

    def nic(name: str, fn: str, netdev: str, master: Optional[Path],
            slave_dir: bool = False) -> None:
        t.rdma(name, f"{rp}/{fn}", ports=(ETH,), netdev=netdev, uverbs=None)
        nd = t.sys / "devices" / rp / fn / "net" / netdev
        if master is not None:
            os.symlink(os.path.relpath(master, nd), nd / "master")
        if slave_dir:
            (nd / "bonding_slave").mkdir()

    nic("mlx5_0", "0000:03:00.0", "ens0", bond0, slave_dir=True)
    nic("mlx5_1", "0000:04:00.0", "ens1", br0)
    nic("mlx5_2", "0000:05:00.0", "ens2", bond1)
    nic("mlx5_3", "0000:06:00.0", "ens3", None)
    nic("mlx5_4", "0000:08:00.0", "ens8", None)
    nd = t.sys / "devices" / rp / "0000:08:00.0/net/ens8z"
    (nd / "bonding_slave").mkdir(parents=True)
    os.symlink(os.path.relpath(bond0, nd), nd / "master")
    nic("mlx5_bond_0", "0000:07:00.0", "ens7", bond1, slave_dir=True)
    t.rdma("rxe0", None, ports=(ETH,), soft_parent="ens2", uverbs=None)
    _w(t.sys / "class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", "ens2\n")
    t.rdma("rxe1", None, ports=(ETH,), soft_parent="ens3", uverbs=None)
    _w(t.sys / "class/infiniband/rxe1/ports/1/gid_attrs/ndevs/0", "ens3\n")
    t.rdma("rxe2", None, ports=(ETH,), soft_parent="ens9", uverbs=None)
    _w(t.sys / "class/infiniband/rxe2/ports/1/gid_attrs/ndevs/0", "ens9\n")
    host = read_host(t.sys, t.proc)
    assert {n.name: n.bond_slave for n in host.nics} == {
        "mlx5_0": True, "mlx5_1": False, "mlx5_2": True, "mlx5_3": False, "mlx5_4": True,
        "mlx5_bond_0": False, "rxe0": True, "rxe1": False, "rxe2": False}


def test_read_host_orders_and_unknown_files(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    t.pci("pci0000:80/0000:80:01.0")
    t.pci("pciffff:00/ffff:00:01.0")
    t.pci("pci0000:00/0000:00:0e.0", cls=0x010400)  # a VMD endpoint
    t.gpu("pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0", numa=None)
    _w(t.sys / "devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/numa_node", "x\n")
    ib = t.rdma("mlx5_0", "pci0000:80/0000:80:01.0/0000:81:00.0")
    (ib / "ports/1/state").unlink()
    (ib / "ports/1/state").mkdir()
    host = read_host(t.sys, t.proc)
    assert list(host.pci) == ["0000:00:0e.0", "0000:80:01.0", "0000:81:00.0",
                              "ffff:00:01.0", "10000:00:02.0"]
    assert host.host_bridges == ("pci0000:00", "pci0000:80", "pciffff:00", "pci10000:00")
    assert [p for p in host.problems if p.startswith("unknown: ")] == [
        f"unknown: {t.sys}/class/infiniband/mlx5_0/ports/1/state cannot be read (EISDIR: "
        "Is a directory)",
        f"unknown: {t.sys}/bus/pci/devices/10000:00:02.0/numa_node holds 'x', not a NUMA "
        "node (-1, or 0 to 1023)"]
    assert (host.sysfs_path, host.proc_path, host.dev_dir, host.recorded) == (
        str(t.sys), str(t.proc), "/dev/infiniband", False)
    assert read_host_at(HostRoot.resolve(t.sys, t.dev, t.proc, recorded=True)).recorded
    with pytest.raises(WrongTypeError, match="^root must be a HostRoot, not str$"):
        read_host_at(str(t.sys))  # type: ignore[arg-type]

"""sysverbs.testing and its pytest plugin.

HostBuilder hosts are compared with the REAL libibverbs (tests/oracle/harness.py:
private mount namespaces, ``SYSFS_PATH`` and a bind-mounted ``/dev/infiniband``);
record_host() round-trips every bundled fixture; the plugin's fixtures are used here
and in a pytest subprocess that loads the plugin as an installed user would.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import sysverbs
from sysverbs import testing
from sysverbs.ground.errors import UsageError
from sysverbs.testing import HostBuilder, Limits, RecordLimitError, record_host, umockdev
from sysverbs.testing import plugin as pytest_plugin
from sysverbs.testing.umockdev import Record, Recording
from tests import listing_hosts
from tests.conftest import require
from tests.oracle import harness

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = testing.fixture_names()
SHOW = {"IBV_SHOW_WARNINGS": "1"}
STEPS: list[dict[str, Any]] = [{"op": "list"}, {"op": "list"}]  # no "free": lists may fail

# The plugin's fixtures, used by this module's tests (as module globals, so that
# they work whether or not the plugin's entry point is installed).
rdma_builder = pytest_plugin.rdma_builder
rdma_host = pytest_plugin.rdma_host
rdma_fixture = pytest_plugin.rdma_fixture
rdma_umockdev = pytest_plugin.rdma_umockdev

# ------------------------------------------------------- HostBuilder vs libibverbs

HOSTS: dict[str, Callable[[], HostBuilder]] = {
    "mlx5-pf-8vfs": lambda: HostBuilder().mlx5(vfs=8),
    "mlx5-cx7-eth-4vfs": lambda: HostBuilder().mlx5(model="cx7", link_layer="Ethernet",
                                                    vfs=4, netdev="ens1f0np0"),
    "mlx5-every-model": lambda: _every_mlx5(),
    "efa": lambda: HostBuilder().efa().efa(model="efa2").efa(model="efa0"),
    "rxe": lambda: HostBuilder().rxe().rxe(netdev="v0"),
    "mixed": lambda: (HostBuilder().mlx5(vfs=2).mlx4(vfs=2).irdma().irdma(iwarp=True)
                      .bnxt_re().efa().rxe().siw()),
    "missing-dev-nodes": lambda: (HostBuilder().mlx5(vfs=4, vf_dev_nodes=False)
                                  .rxe(dev_node=False).efa().mlx4(dev_node=False)),
    "class-abi-5": lambda: HostBuilder(class_abi=5).mlx5().rxe(),
    "class-abi-7": lambda: HostBuilder(class_abi=7).mlx5(),
    "class-abi-3": lambda: HostBuilder(class_abi=3).rxe(),
    "class-abi-missing": lambda: HostBuilder(class_abi=None).mlx5(),
    "class-abi-junk": lambda: HostBuilder(class_abi=b"6junk").rxe(),
    "device-abi": lambda: (HostBuilder().mlx5(abi_version=0).mlx5(abi_version=2)
                           .rxe(abi_version=b"-1").mlx4(abi_version=None)
                           .rxe(abi_version=b"2junk\n").efa(abi_version=3)),
    "node-types": lambda: _node_types(),
    "dynamic-major": lambda: HostBuilder().mlx5(uverbs=40).rxe(uverbs=33).rxe(uverbs=31),
    "broken-attrs": lambda: (HostBuilder().rxe(uverbs_attrs={"dev": b"junk\n"})
                             .rxe(uverbs_attrs={"ibdev": None})
                             .rxe(ib_attrs={"node_guid": b"zz\n"})
                             .rxe(uverbs_attrs={"dev": b"231:200junk"})
                             .mlx5(ib_attrs={"node_type": None})),
    "no-uverbs": lambda: HostBuilder().mlx5(verbs=False).mlx5(),
    "generic-pci": lambda: HostBuilder().pci_rdma("qedr", "qedr0", vendor=0x1077,
                                                  device=0x8070, abi_version=8),
}


def _every_mlx5() -> HostBuilder:
    b = HostBuilder()
    for model in testing.MLX5_MODELS:
        b.mlx5(model=model, vfs=1)
    return b


def _node_types() -> HostBuilder:
    b = HostBuilder()
    for nt in (1, 2, 3, 4, 5, 6, 7, b"0: none\n", b"9: bogus\n", b"junk\n", None, b""):
        b.rxe(node_type=nt)
    return b


def _build(builder: HostBuilder) -> Callable[[Path], Any]:
    return lambda root: builder.materialize(root)


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(HOSTS))
@pytest.mark.parametrize("options", [{"rdma_core": "44"},
                                     {"rdma_core": "44", "providers": "builtin"}],
                         ids=["installed", "builtin"])
def test_built_host_matches_libibverbs(otmp: Path, name: str,
                                       options: dict[str, str]) -> None:
    builder = HOSTS[name]()
    real, ours = harness.compare(otmp, _build(builder), STEPS, options=options, env=SHOW)
    harness.assert_same(real, ours)


def _listed(otmp: Path, builder: HostBuilder) -> list[str]:
    real, ours = harness.compare(otmp, _build(builder), [{"op": "list"}], env=SHOW)
    harness.assert_same(real, ours)
    return sorted(d["name"] for d in real.results()[0]["devices"])


@pytest.mark.oracle
def test_pf_and_vfs_are_all_listed(otmp: Path) -> None:
    builder = HostBuilder().mlx5(vfs=8)
    assert _listed(otmp, builder) == sorted(f"mlx5_{i}" for i in range(9))
    assert [d.vf_of for d in builder.devices] == [None] + ["0000:03:00.0"] * 8


@pytest.mark.oracle
def test_missing_dev_nodes_hide_devices(otmp: Path) -> None:
    builder = HostBuilder().mlx5(vfs=3, vf_dev_nodes=False).rxe(dev_node=False).efa()
    assert _listed(otmp, builder) == ["mlx5_0", "rdmap4s0"]
    assert [d.dev_node for d in builder.devices] == [True, False, False, False, False, True]


# --------------------------------------------------------------- HostBuilder itself


def test_builder_recording_is_canonical_and_deterministic() -> None:
    for make in HOSTS.values():
        rec = make().build()
        assert umockdev.parse(umockdev.dumps(rec)) == rec
        assert make().build() == rec
        assert rec.records[0].path == testing.builder.LO_PATH


def test_builder_layout(tmp_path: Path) -> None:
    host = HostBuilder().mlx5(vfs=2, netdev="ib0").rxe().materialize(tmp_path)
    sysfs = host.sysfs
    pf = sysfs / "devices/pci0000:00/0000:00:01.0/0000:03:00.0"
    assert (pf / "modalias").read_text().startswith("pci:v000015B3d0000101B")
    assert os.readlink(pf / "virtfn1") == "../0000:03:00.3"
    assert os.readlink(pf.parent / "0000:03:00.3" / "physfn") == "../0000:03:00.0"
    assert (sysfs / "class/infiniband_verbs/uverbs2/ibdev").read_text() == "mlx5_2\n"
    assert (sysfs / "class/infiniband_verbs/uverbs2/dev").read_text() == "231:194\n"
    assert (sysfs / "class/infiniband/mlx5_0/device/vendor").read_text() == "0x15b3\n"
    assert (sysfs / "class/net/ib0").is_symlink()
    assert (sysfs / "class/infiniband/rxe0/parent").read_text() == "eth0\n"
    assert (sysfs / "class/infiniband_verbs/abi_version").read_text() == "6\n"
    assert sorted(host.dev_nodes) == ["uverbs0", "uverbs1", "uverbs2", "uverbs3"]
    assert os.readlink(host.dev / "by-ibdev/uverbs-rxe0") == "../uverbs3"
    names = sorted(d.name for d in host.get_device_list())
    assert names == ["mlx5_0", "mlx5_1", "mlx5_2", "rxe0"]


def test_builder_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown mlx5 model"):
        HostBuilder().mlx5(model="cx99")
    with pytest.raises(ValueError, match="link_layer"):
        HostBuilder().mlx5(link_layer="Ethernet2")
    with pytest.raises(ValueError, match="already used"):
        HostBuilder().rxe(uverbs=1).rxe(uverbs=1)
    with pytest.raises(ValueError, match="invalid IB device name"):
        HostBuilder().rxe(name="a/b")
    with pytest.raises(ValueError, match="first_bus"):
        HostBuilder(first_bus=0)
    with pytest.raises(ValueError):
        HostBuilder().mlx4(model="x")
    with pytest.raises(ValueError):
        HostBuilder().efa(model="x")
    with pytest.raises(UsageError, match="unknown device option.*nmae"):
        HostBuilder().efa(nmae="x")  # type: ignore[call-arg]


def test_layout_doctests() -> None:
    import doctest

    from sysverbs.testing import layout

    assert doctest.testmod(layout).failed == 0


def test_builder_defaults_come_from_the_driver_table(tmp_path: Path) -> None:
    """Each device method's defaults are its row of DRIVERS: the ABI in the uverbs
    device, the node type, the driver; the options replace them one by one."""
    from sysverbs.testing import layout as layout_mod
    from sysverbs.testing.builder import DRIVERS

    b = HostBuilder().mlx5().mlx4().efa().irdma().irdma(iwarp=True).bnxt_re().rxe().siw()
    rec = b.build()
    rows = ["mlx5", "mlx4", "efa", "irdma", "irdma-iwarp", "bnxt_re", "rxe", "siw"]
    for dev, row in zip(b.devices, rows):
        spec = DRIVERS[row]
        assert dev.driver == spec.driver
        ib = next(r for r in rec if r.path.endswith(f"/infiniband/{dev.ibdev}"))
        uv = next(r for r in rec if r.path.endswith(f"/infiniband_verbs/{dev.uverbs}"))
        assert uv.value("abi_version") == f"{spec.abi_version}\n".encode()
        assert ib.value("node_type") == f"{layout_mod.NODE_TYPES[spec.node_type]}\n".encode()
        assert ib.value("fw_ver") == f"{spec.fw_ver}\n".encode()
    one = HostBuilder().bnxt_re(abi_version=None, node_type=b"x", verbs=False).build()
    assert not [r for r in one if "infiniband_verbs" in r.path]
    ib = next(r for r in one if "/infiniband/" in r.path)
    assert ib.value("node_type") == b"x"


def test_builder_extras(tmp_path: Path) -> None:
    b = HostBuilder().rxe()
    extra = Record("/devices/virtual/misc/foo", (("SUBSYSTEM", "misc"),))
    assert b.add_record(extra) is b
    rec = b.build(loopback=False)
    assert [r.path for r in rec][-1] == extra.path
    assert all(r.path != testing.builder.LO_PATH for r in rec)
    path = b.write(tmp_path / "h.umockdev")
    assert umockdev.load(path) == b.build()


# ------------------------------------------------------------- materialize / FakeHost


def test_materialize_accepts_every_kind_of_source(tmp_path: Path) -> None:
    rec = testing.load_fixture("rxe")
    file = tmp_path / "x.umockdev"
    file.write_text(umockdev.dumps(rec))
    hosts = [testing.materialize(src, tmp_path / f"h{i}")
             for i, src in enumerate(["rxe", rec, file, str(file), HostBuilder().rxe().rxe()])]
    listings = [sorted(d.name for d in h.get_device_list()) for h in hosts]
    assert listings == [["rxe0", "rxe1"]] * 5
    host = hosts[0]
    assert host.options() == {"sysfs_path": str(host.sysfs), "dev_dir": str(host.dev),
                              "providers": "builtin", "source": "sysfs"}
    assert host.options(providers="installed")["providers"] == "installed"
    cmd = host.umockdev_command(["ibv_devices"])
    assert cmd[:2] == ["umockdev-run", "-d"] and cmd[-2:] == ["--", "ibv_devices"]
    assert umockdev.load(cmd[2]) == rec
    with pytest.raises(KeyError):
        testing.materialize("no-such-fixture", tmp_path / "bad")


def test_tree_entries_are_written_after_the_records(tmp_path: Path) -> None:
    """TreeEntry: the paths of a broken host that no device record holds, written by
    the same writer (and with its checks) after the records."""
    import doctest

    from sysverbs.testing import host as host_module
    from sysverbs.testing import umockdev, umockdev_tree
    from sysverbs.testing.umockdev import TreeEntry

    assert doctest.testmod(host_module).failed == 0
    assert doctest.testmod(umockdev).failed == 0
    tree_doctests = doctest.testmod(umockdev_tree)  # TreeEntry's
    assert tree_doctests.attempted and tree_doctests.failed == 0
    host = testing.materialize(HostBuilder().rxe(), tmp_path / "h", entries=[
        TreeEntry("sys/class/infiniband_verbs/abi_version", b"7"),  # replaces the file
        TreeEntry("sys/class/infiniband_verbs/uverbs9", directory=True),
        TreeEntry("sys/class/infiniband_verbs/uverbs9/ibdev", b"rxe_ghost"),
        TreeEntry("sys/class/infiniband_verbs/dangling", link="../../devices/nowhere"),
        TreeEntry("sys/class/infiniband_verbs", directory=True),  # kept as it is
        TreeEntry("dev/infiniband/uverbs9", b""),
        TreeEntry("proc/driver/x", b"y\n"),
        TreeEntry("sys/class/infiniband/rxe0/secret", b"x", mode=0),
    ])
    verbs = host.sysfs / "class/infiniband_verbs"
    assert (verbs / "abi_version").read_bytes() == b"7"
    assert (verbs / "uverbs9").is_dir() and not (verbs / "uverbs9").is_symlink()
    assert (verbs / "uverbs9/ibdev").read_bytes() == b"rxe_ghost"
    assert os.readlink(verbs / "dangling") == "../../devices/nowhere"
    assert (verbs / "uverbs0").is_symlink() and (host.dev / "uverbs9").is_file()
    assert (host.proc / "driver/x").read_bytes() == b"y\n"
    assert stat.S_IMODE(os.stat(host.sysfs / "class/infiniband/rxe0/secret").st_mode) == 0
    assert [TreeEntry("a", link="b").kind, TreeEntry("a").kind] == ["link", "file"]
    for bad in ("/sys/x", "sys/../x", "etc/passwd", "sys//x", "sys",
                "sys/class/infiniband_verbs/uverbs0/../../../../../../x"):
        with pytest.raises(ValueError, match="entry"):
            testing.materialize(Recording(()), tmp_path / "bad", entries=[TreeEntry(bad)])
    (tmp_path / "out").mkdir()
    os.symlink(tmp_path / "out", tmp_path / "h/sys/escape")
    with pytest.raises(ValueError, match="outside"):
        testing.materialize(Recording(()), tmp_path / "h",
                            entries=[TreeEntry("sys/escape/x", b"")])
    with pytest.raises(ValueError, match="exists"):
        testing.materialize(Recording(()), tmp_path / "h",
                            entries=[TreeEntry("sys/class/infiniband_verbs/uverbs0", link="x")])
    with pytest.raises(ValueError, match="no mode"):
        testing.materialize(Recording(()), tmp_path / "h",
                            entries=[TreeEntry("sys/l", link="/etc/passwd", mode=0)])
    os.symlink(tmp_path / "out", tmp_path / "h/sys/class/out")
    with pytest.raises(ValueError, match="outside"):  # a kept "directory" that is a link
        testing.materialize(Recording(()), tmp_path / "h",
                            entries=[TreeEntry("sys/class/out", directory=True, mode=0)])
    assert not list((tmp_path / "out").iterdir())
    assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) != 0


# ------------------------------------------------------------------ record_host


def _snapshot(root: Path) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("l", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("d", "")
            else:
                out[rel] = ("f", p.read_bytes().hex())
    return out


@pytest.mark.parametrize("name", FIXTURES)
def test_record_all_reproduces_the_fixture_tree(name: str, ftmp: Path) -> None:
    original = testing.materialize(name, ftmp / "a")
    recorded = record_host(original.sysfs, devices="all")
    assert umockdev.parse(umockdev.dumps(recorded)) == recorded
    copy = testing.materialize(recorded, ftmp / "b")
    want = _snapshot(original.root)
    # record_host never reads an endpoint's config space (the Grace fixtures carry the
    # 64-byte header rdma_topo reads) nor the VPD of a host without a Data Direct DMA
    # function (gpu-gb200-nvl72, gpu-gh200); a Data Direct host's VPD is kept
    skipped = {p for p in want if p.endswith(("/config", "/vpd"))
               and re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]",
                                p.split("/")[-2])
               and not (original.root / p).with_name("secondary_bus_number").exists()}
    if name in ("gpu-gb300-nvl72", "gpu-dgx-station-gb300"):
        skipped = {p for p in skipped if p.endswith("/config")}
    assert _snapshot(copy.root) == {p: v for p, v in want.items() if p not in skipped}


def _listing(host: testing.FakeHost) -> list[tuple[Any, ...]]:
    return sorted((d.name, d.dev_name, d.dev_path.replace(str(host.root), ""),
                   d.ibdev_path.replace(str(host.root), ""), d.node_type, d.provider,
                   sysverbs.get_device_guid(d), d.cdev, d.abi_version)
                  for d in host.get_device_list(rdma_core="44"))


@pytest.mark.parametrize("name", FIXTURES)
def test_record_rdma_round_trip(name: str, ftmp: Path) -> None:
    # the fixture without its CPUs and NUMA nodes (tests/listing_hosts.py): records
    # that no RDMA device leads to
    original = testing.materialize(listing_hosts.listing_recording(name), ftmp / "a")
    recorded = record_host(original.sysfs)
    copy = testing.materialize(recorded, ftmp / "b")
    assert _listing(copy) == _listing(original)
    assert recorded.records[0].path == testing.builder.LO_PATH
    for sub in ("infiniband", "infiniband_verbs", "infiniband_mad"):
        a, b = original.sysfs / "class" / sub, copy.sysfs / "class" / sub
        if not a.is_dir():
            assert not b.exists()
            continue
        assert sorted(os.listdir(b)) == sorted(os.listdir(a))
        for entry in os.listdir(a):
            if (a / entry).is_dir():
                assert _snapshot(b / entry) == _snapshot(a / entry), (sub, entry)
                modalias = a / entry / "device" / "modalias"
                if modalias.exists():  # what libibverbs matches providers on
                    assert (b / entry / "device" / "modalias").read_bytes() == \
                        modalias.read_bytes()
            else:
                assert (b / entry).read_bytes() == (a / entry).read_bytes()
    assert sorted(copy.dev_nodes) == sorted(original.dev_nodes)


@pytest.mark.oracle
def test_recorded_host_matches_libibverbs(otmp: Path, tmp_path: Path) -> None:
    original = testing.materialize("dgx-demo", tmp_path / "a")
    recorded = record_host(original.sysfs)
    real, ours = harness.compare(otmp, lambda root: testing.materialize(recorded, root), STEPS,
                                 options={"rdma_core": "44"}, env=SHOW)
    harness.assert_same(real, ours)
    assert len(real.results()[0]["devices"]) == 19


def _evil_host(tmp_path: Path) -> testing.FakeHost:
    """A host whose sysfs has links and files that point or lead out of it."""
    outside = tmp_path / "outside"
    (outside / "dev").mkdir(parents=True)
    (outside / "dev" / "uevent").write_text("SECRET=1\n")
    (outside / "dev" / "ibdev").write_text("secret-ibdev\n")
    (outside / "secret").write_text("TOPSECRET\n")
    host = testing.materialize(HostBuilder().mlx5().rxe(), tmp_path / "h")
    s = host.sysfs
    os.symlink(str(outside / "dev"), s / "class/infiniband_verbs/uverbs9")  # absolute, out
    os.symlink("../../../../outside/dev", s / "class/infiniband/evil")  # relative, out
    ib = Path(os.path.realpath(s / "class/infiniband/mlx5_0"))
    os.symlink(str(outside / "secret"), ib / "abs_link")
    os.symlink("../" * 8 + "outside/secret", ib / "rel_link")  # up to tmp_path
    assert (s / "class/infiniband/evil/ibdev").exists()
    assert (ib / "rel_link").read_text() == "TOPSECRET\n"
    os.symlink(str(outside), ib / "dir_link")
    (ib / "big").write_bytes(b"x" * 70000)
    (ib / "wo").write_text("write only\n")
    os.chmod(ib / "wo", 0o200)
    os.mkfifo(ib / "fifo")
    pci = ib.parent.parent
    for n in ("config", "rom", "vpd", "resource0", "resource2_wc"):
        (pci / n).write_text("must not be read\n")
    return host


def test_record_host_never_leaves_sysfs(tmp_path: Path) -> None:
    host = _evil_host(tmp_path)
    for devices in ("rdma", "placement", "all"):
        rec = record_host(host.sysfs, devices=devices)
        text = umockdev.dumps(rec)
        assert "SECRET" not in text and "secret" not in text and "outside" not in text
        assert "must not be read" not in text
        ib = next(r for r in rec if r.name == "mlx5_0")
        names = {a.name for a in ib.attributes}
        assert {"node_guid", "ports/1/state", "device"} <= names
        assert not names & {"abs_link", "rel_link", "dir_link", "big", "wo", "fifo"}
        pci = next(r for r in rec if r.subsystem == "pci")
        assert not {a.name for a in pci.attributes} & {"config", "rom", "vpd", "resource0",
                                                        "resource2_wc"}
        assert all(r.path.startswith("/devices/") for r in rec)


def test_record_host_limits(tmp_path: Path) -> None:
    host = testing.materialize("mlx5-sriov", tmp_path / "h")
    with pytest.raises(RecordLimitError, match="files"):
        record_host(host.sysfs, limits=Limits(max_files=50))
    with pytest.raises(RecordLimitError, match="bytes"):
        record_host(host.sysfs, limits=Limits(max_total_bytes=4096))
    with pytest.raises(RecordLimitError, match="devices"):
        record_host(host.sysfs, devices="all", limits=Limits(max_devices=10))
    shallow = record_host(host.sysfs, limits=Limits(max_depth=1))
    ib = next(r for r in shallow if r.subsystem == "infiniband")
    assert ib.attribute("node_guid") is not None
    assert ib.attribute("ports/1/gids/0") is None  # ports/1/gids is 2 levels down
    small = record_host(host.sysfs, limits=Limits(max_file_size=8))
    ib = next(r for r in small if r.subsystem == "infiniband")
    assert ib.attribute("node_type") is not None and ib.attribute("node_guid") is None
    with pytest.raises(FileNotFoundError):
        record_host(tmp_path / "nothing")
    with pytest.raises(ValueError):
        record_host(host.sysfs, devices="some")


def test_record_host_dev_root(tmp_path: Path) -> None:
    host = testing.materialize(HostBuilder().rxe().rxe(dev_node=False), tmp_path / "h")
    rec = record_host(host.sysfs)
    uv = {r.name: r for r in rec.subsystem("infiniband_verbs")}
    assert uv["uverbs0"].node == "infiniband/uverbs0"
    assert uv["uverbs0"].links == ("infiniband/by-ibdev/uverbs-rxe0",)
    assert uv["uverbs1"].node is None
    none = record_host(host.sysfs, dev_root=tmp_path / "nodev")
    assert all(r.node is None for r in none)


def test_record_live_host_is_bounded_and_valid() -> None:
    """Whatever this machine has: a valid recording, within the default limits."""
    if not os.path.isdir("/sys/devices"):
        pytest.skip("no /sys here")
    rec = record_host()
    assert umockdev.parse(umockdev.dumps(rec)) == rec
    assert all(r.path.startswith("/devices/") for r in rec)


# ---------------------------------------------------------------------- the plugin


def test_plugin_fixtures_here(rdma_host: pytest_plugin.HostFactory,
                              rdma_builder: HostBuilder,
                              rdma_fixture: Callable[[str], testing.FakeHost]) -> None:
    first = rdma_host(rdma_builder.mlx5(vfs=2))
    second = rdma_host()
    assert first.root != second.root and first.root.parent == second.root.parent
    assert len(first.get_device_list()) == 3
    assert second.get_device_list() == []
    assert len(rdma_fixture("dgx-demo").get_device_list()) == 19


def test_plugin_umockdev_fixture(rdma_umockdev: Callable[..., Any],
                                 rdma_builder: HostBuilder) -> None:
    code = ("import os; print(sorted(os.listdir('/sys/class/infiniband')), "
            "os.path.exists('/dev/infiniband/uverbs0'))")
    result = rdma_umockdev(rdma_builder.rxe().efa(), [sys.executable, "-c", code])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['rdmap3s0', 'rxe0'] True"


def _doc_pytest_example() -> str:
    text = (ROOT / "docs" / "testing-kit.md").read_text()
    blocks = re.findall(r"```python\n(# test_my_rdma_code.py\n.*?)```", text, re.S)
    assert len(blocks) == 1
    return blocks[0]


def _run_pytest(tmp_path: Path, code: str, *args: str, autoload: bool) -> str:
    test_file = tmp_path / "test_users_code.py"
    test_file.write_text(code)
    env = harness.base_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env["PYTHONPATH"],
                                                      os.environ.get("PYTHONPATH")]))
    env.pop("SYSFS_PATH", None)
    if autoload:
        env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    else:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # its own --basetemp: the default would prune the numbered dirs of other pytest runs
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rs", f"--basetemp={tmp_path / 'basetemp'}", str(test_file),
                           *args], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_plugin_in_a_users_pytest_run(tmp_path: Path) -> None:
    """The docs' example test file passes with ``-p sysverbs.testing.plugin``."""
    out = _run_pytest(tmp_path, _doc_pytest_example(), "-p", "sysverbs.testing.plugin",
                      autoload=False)
    assert "4 passed" in out


def test_plugin_entry_point(tmp_path: Path) -> None:
    """Once installed with its ``pytest11`` entry point, pytest loads it by itself."""
    found = metadata.entry_points()
    group = (found.select(group="pytest11") if hasattr(found, "select")  # 3.10+
             else found.get("pytest11", ()))  # 3.9: a dict of groups
    eps = [ep for ep in group if ep.name == "sysverbs"]
    if not eps:
        require("it is not installed (pyproject.toml: [project.entry-points.pytest11] "
                "sysverbs = \"sysverbs.testing.plugin\"; pip install -e .)",
                "the pytest11 entry point 'sysverbs'")
    assert eps[0].value == "sysverbs.testing.plugin"
    code = textwrap.dedent(
        """
        def test_fixture_is_there(rdma_host, rdma_builder):
            assert len(rdma_host(rdma_builder.efa()).get_device_list()) == 1
        """
    )
    assert "1 passed" in _run_pytest(tmp_path, code, autoload=True)


def test_docs_have_examples() -> None:
    text = (ROOT / "docs" / "testing-kit.md").read_text()
    assert len(re.findall(r"```python\n", text)) >= 6
    assert text.count("\nprints\n") >= 5


def test_module_surface() -> None:
    assert set(testing.__all__) >= {"HostBuilder", "FakeHost", "materialize", "record_host",
                                    "load_fixture", "fixture_names", "Limits"}
    assert isinstance(testing.load_fixture("empty"), Recording)
    assert testing.fixture_names() == FIXTURES
    mode = stat.S_IMODE(os.stat(testing.__file__).st_mode)
    assert mode & 0o444

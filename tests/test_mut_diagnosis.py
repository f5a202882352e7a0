"""devices/diagnosis.py's verdicts' edges (issue 41: the mutants of ``make mutation``):
the port messages by state and link layer, the /dev node's kind, the host reasons'
order, on a bundled fixture and small trees (tests/trees.py).  In process: no
subprocess.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sysverbs.devices import access, diagnosis
from sysverbs.devices.diagnosis import DeviceNode, Diagnosis, diagnose
from sysverbs.ground import inputs
from sysverbs.ground.errors import SourceUnavailable
from sysverbs.providers.table import provider_dir
from sysverbs.sources import netlink
from tests import trees
from tests.conftest import require
from tests.diagnose_runs import fixture, null_node, run, rxe
from tests.netlink_fakes import Dev, FakeKernel

ROOT = Path(__file__).resolve().parents[1]


def test_port_messages_by_state_and_link_layer(tmp_path: Path) -> None:
    """InfiniBand INIT: the subnet manager; InfiniBand DOWN: cable, switch port and subnet
    manager; Ethernet INIT: its netdev (the INIT text is InfiniBand's only)."""
    fixture("mlx5-cx6")(tmp_path)
    ports = tmp_path / "sys/class/infiniband"
    (ports / "mlx5_0/ports/1/state").write_text("2: INIT\n")
    (ports / "mlx5_3/ports/1/state").write_text("2: INIT\n")
    s = run(tmp_path)
    down = {name: d["messages"].get("port_down") for name, d in s.devices.items()}
    assert down["mlx5_0"] == ("Port 1 is INIT (physical state LINK_UP): the link is up but no "
                              "subnet manager has configured it; start opensm or check the "
                              "fabric's subnet manager.")
    assert down["mlx5_1"] == ("Port 1 is DOWN (physical state DISABLED): check the cable, the "
                              "switch port and the subnet manager.")
    assert down["mlx5_3"] == ("Port 1 is INIT (physical state LINK_UP): bring its netdev up "
                              "(ip link set p2p2 up) and check the cable and the switch port.")


def test_the_dev_nodes_kind(tmp_path: Path) -> None:
    """A block device, a char device of other numbers, the right char device."""
    trees.build(tmp_path, trees.host(rxe("uverbs0", "rxe0"), rxe("uverbs1", "rxe1"),
                                     rxe("uverbs2", "rxe2")))
    dev = tmp_path / "dev/infiniband"
    (dev / "uverbs0").unlink()
    os.mknod(dev / "uverbs0", 0o666 | stat.S_IFBLK, os.makedev(231, 192))
    null_node(dev / "uverbs1")
    null_node(dev / "uverbs2", 231, 192)
    found = {d.name: d for d in diagnose(sysfs_path=tmp_path / "sys", dev_dir=dev,
                                         providers="builtin", rdma_core="44",
                                         probe_open=False)}
    nodes = {n: (d.node.kind, d.node.major, d.node.minor) if d.node else None
             for n, d in found.items()}
    assert nodes == {"rxe0": ("block", 231, 192), "rxe1": ("char", 1, 3),
                     "rxe2": ("char", 231, 192)}
    assert [r.message for r in found["rxe0"].reasons] == [
        f"{dev}/uverbs0 is not a character device, so opening the device fails: it must be "
        "the uverbs char device 231:192 (bind-mount the host's /dev/infiniband, do not copy "
        "it)."]
    assert [r.message for r in found["rxe1"].reasons] == [
        f"{dev}/uverbs1 is char device 1:3, but sysfs says 231:192, so opening the device "
        f"fails: recreate the node (mknod {dev}/uverbs1 c 231 192) or pass the host's node in."]
    assert found["rxe2"].usable and found["rxe2"].reasons == ()


def test_no_device_and_no_uverbs_module(tmp_path: Path) -> None:
    """An empty class/infiniband and no class/infiniband_verbs: no_kernel_support first."""
    (tmp_path / "sys/class/infiniband").mkdir(parents=True)
    (tmp_path / "dev/infiniband").mkdir(parents=True)
    found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
                     providers="builtin", rdma_core="44")
    assert list(found) == []
    assert [r.code for r in found.host][:2] == ["no_kernel_support", "no_uverbs_module"]


def test_auto_asks_netlink_first_and_sysfs_does_not(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel (tests/netlink_fakes.py) whose RDMA netlink lists rxe0 only: ``auto``
    sees what libibverbs in netlink mode sees (rxe1 has no uverbs device there);
    ``sysfs`` lists both, as libibverbs with SYSFS_PATH does."""
    trees.build(tmp_path, trees.host(rxe("uverbs0", "rxe0"), rxe("uverbs1", "rxe1")))
    monkeypatch.setattr(netlink, "open_netlink", lambda: FakeKernel([Dev(0, "rxe0")]))
    listed = {}
    for source in ("auto", "sysfs"):
        found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
                         providers="builtin", rdma_core="44", probe_open=False,
                         source=source)
        listed[source] = [(d.name, d.listed) for d in found]
    assert listed == {"auto": [("rxe0", True), ("rxe1", False)],
                      "sysfs": [("rxe0", True), ("rxe1", True)]}


_NO_NETLINK = ("over RDMA netlink, which sysfs mode (SYSFS_PATH, or a kernel without RDMA "
               "netlink) does not have.")


def test_no_provider_hints_and_a_failed_open(tmp_path: Path) -> None:
    """mana (driver ids only) and irdma without a modalias (a table, but no PCI parent):
    each hint; a device of no name; a node of numbers no driver has (1:250): the kernel's
    errno (ENXIO, from the mem driver) in the message; rdma_cm ABI 3 (librdmacm's first):
    no rdma_cm_abi."""
    trees.build(tmp_path, trees.host(
        rxe("uverbs0", "mana0"), rxe("uverbs1", "irdma0"), trees.rdma_dev("uverbs2", ""),
        rxe("uverbs3", "rxe3", dev="1:250\n"),
        extra={"sys/class/misc/rdma_cm/abi_version": "3\n"}))
    null_node(tmp_path / "dev/infiniband/uverbs3", 1, 250)
    found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
                     providers="builtin", rdma_core="44")
    said = {d.name: [(r.code, r.message) for r in d.reasons] for d in found}
    head = "No provider in rdma-core 44 supports {} (no modalias), so libibverbs drops it."
    assert said["mana0"] == [("no_provider", head.format("mana0") + " The mana provider "
                              "recognises devices only by the kernel's driver id " + _NO_NETLINK)]
    assert said["irdma0"] == [("no_provider", head.format("irdma0") + " Its parent device "
                               "has no modalias (it is no PCI function: a sub-function or "
                               "another auxiliary device), so the irdma provider can "
                               "recognise it only by the kernel's driver id " + _NO_NETLINK)]
    assert said[""] == [("no_provider", head.format("") + " It may need a vendor's own "
                         "provider library.")]
    node = tmp_path / "dev/infiniband/uverbs3"
    assert said["rxe3"] == [("dev_node_open_failed",
                             f"Opening {node} failed: {os.strerror(errno.ENXIO)}.")]
    codes = [r.code for r in found.host]
    assert "no_rdma_cm" in codes and "rdma_cm_abi" not in codes


def test_the_dev_node_is_a_directory_or_a_fifo(tmp_path: Path) -> None:
    trees.build(tmp_path, trees.host(rxe("uverbs0", "rxe0"), rxe("uverbs1", "rxe1")))
    dev = tmp_path / "dev/infiniband"
    for name in ("uverbs0", "uverbs1"):
        (dev / name).unlink()
    (dev / "uverbs0").mkdir()
    os.mkfifo(dev / "uverbs1")
    found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=dev, providers="builtin",
                     rdma_core="44")
    assert [(d.node.kind, d.node.major) if d.node else None for d in found] == [
        ("directory", None), ("other", None)]


def test_the_records_are_frozen() -> None:
    found = diagnose(sysfs_path="/nonexistent", source="sysfs", providers="builtin")
    reason = found.host[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        reason.code = "x"  # type: ignore[misc]
    node = DeviceNode("/dev/x", "char", 1, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.kind = "block"  # type: ignore[misc]
    d = Diagnosis("x", True, None, (), True, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.usable = False  # type: ignore[misc]


def test_a_source_asked_for_by_name_that_is_unavailable(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> None:
        raise SourceUnavailable("no NETLINK_RDMA socket", errno.EPROTONOSUPPORT)
    monkeypatch.setattr(netlink, "open_netlink", unavailable)
    trees.build(tmp_path, trees.host(rxe("uverbs0", "rxe0")))
    found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
                     providers="builtin", rdma_core="44", source="netlink")
    assert found.host[0].code == "no_uverbs_module"
    assert found.host[0].message.startswith("The netlink source is unavailable: ")
    assert [(d.name, d.listed, [r.code for r in d.reasons]) for d in found] == [
        ("rxe0", False, ["no_uverbs_module"])]


def test_a_device_in_another_netns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A device no source lists that RDMA netlink places in another namespace (as
    access.netns_away says of the live /sys): that finding, and none under a host-wide
    problem (a bad class ABI), which says it all."""
    trees.build(tmp_path, trees.host(rxe("uverbs0", "rxe0"),
                                     extra={"sys/class/infiniband/rxe9/node_type": "1: CA\n"}))
    monkeypatch.setattr(access, "netns_away", lambda root, source, names: {
        n: ("netns_exclusive", f"{n.decode()} is away") for n in names})
    codes = {d.name: [(r.code, r.message) for r in d.reasons] for d in diagnose(
        sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
        providers="builtin", rdma_core="44", probe_open=False)}
    assert codes["rxe9"] == [("netns_exclusive", "rxe9 is away")]
    (tmp_path / "sys/class/infiniband_verbs/abi_version").write_text("9\n")
    found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
                     providers="builtin", rdma_core="44", probe_open=False)
    assert [[r.code for r in d.reasons] for d in found] == [["kernel_abi"], ["kernel_abi"]]


def test_the_release_that_adds_or_drops_a_devices_provider(tmp_path: Path) -> None:
    """mlx5's 15b3:1027 is in rdma-core 65's table only; hns v1 (acpi HISI00D1) left
    rdma-core in 41: the hint names the first later release with a provider, never an
    earlier one."""
    trees.build(tmp_path, trees.host(
        trees.rdma_dev("uverbs0", "mlx5_9",
                       modalias="pci:v000015B3d00001027sv000015B3sd00000001bc02sc00i00\n"),
        trees.rdma_dev("uverbs1", "hns_0", pci="0000:08:00.0", modalias="acpi:HISI00D1:\n")))
    upgrade = (" rdma-core 65 and later have a provider for it (mlx5): upgrade rdma-core "
               "(ibverbs-providers).")
    for release in ("41", "64"):
        found = {d.name: d.reasons[0].message for d in diagnose(
            sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
            providers="builtin", rdma_core=release, probe_open=False)}
        assert found["mlx5_9"].endswith("so libibverbs drops it." + upgrade)
        assert found["hns_0"].endswith("It may need a vendor's own provider library.")


def test_more_node_and_port_edges(tmp_path: Path) -> None:
    """rdma_cm ABI 4 (librdmacm's last) accepted; a bad uverbs entry still names its
    uverbs device; a device numbered 0:0 is opened whatever its node's numbers."""
    trees.build(tmp_path, trees.host(
        rxe("uverbs0", "rxe0", dev="0:0\n"), rxe("uverbs1", "rxe1", dev="bad\n"),
        extra={"sys/class/misc/rdma_cm/abi_version": "4\n"}))
    null_node(tmp_path / "dev/infiniband/uverbs0")
    found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
                     providers="builtin", rdma_core="44")
    by_name = {d.name: d for d in found}
    assert by_name["rxe0"].usable and by_name["rxe0"].reasons == ()
    assert by_name["rxe1"].uverbs == "uverbs1" and not by_name["rxe1"].listed
    assert "rdma_cm_abi" not in [r.code for r in found.host]


def test_a_roce_port_without_a_netdev_to_name(tmp_path: Path) -> None:
    fixture("mlx5-cx6")(tmp_path)
    port = tmp_path / "sys/class/infiniband/mlx5_3/ports/1"
    (port / "state").write_text("1: DOWN\n")
    shutil.rmtree(port / "gid_attrs/ndevs")
    assert run(tmp_path).devices["mlx5_3"]["messages"]["port_down"] == (
        "Port 1 is DOWN (physical state LINK_UP): bring its netdev up (ip link set ? up) and "
        "check the cable and the switch port.")


def test_a_provider_installed_but_not_enabled(tmp_path: Path) -> None:
    """The installed libibverbs' mlx5 provider (Debian's ibverbs-providers) with an empty
    config directory: not enabled, and libibverbs said nothing of it."""
    lib = Path(provider_dir()) / "libmlx5-rdmav34.so"
    require(None if lib.exists() else f"no {lib} (apt-get install ibverbs-providers)",
            "the installed mlx5 provider")
    trees.build(tmp_path, trees.host(trees.rdma_dev("uverbs0", "mlx5_0")))
    (tmp_path / "conf").mkdir()
    found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
                     providers="installed", config_dir=tmp_path / "conf", rdma_core="44")
    assert [(r.code, r.message) for r in found[0].reasons] == [(
        "provider_not_installed",
        f"The mlx5 provider ({lib}) is installed but not enabled: {tmp_path / 'conf'} has no "
        "file with the line 'driver mlx5'.")]


class _Os:
    """The os of ground/inputs.py (through which diagnosis.py stats), with stat failing
    for ``gone``."""

    def __init__(self, gone: bytes) -> None:
        self.gone = gone

    def stat(self, path: bytes, *args: object, **kwargs: object) -> os.stat_result:
        if path == self.gone:
            raise FileNotFoundError(errno.ENOENT, "gone", path)
        return os.stat(path, *args, **kwargs)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)


def test_a_node_removed_after_the_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The node is there when the device is listed and gone when it is looked at (udev
    removing it meanwhile): no_dev_node."""
    trees.build(tmp_path, trees.host(rxe("uverbs0", "rxe0")))
    node = tmp_path / "dev/infiniband/uverbs0"
    monkeypatch.setattr(inputs, "os", _Os(bytes(node)))  # diagnosis stats through inputs
    found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
                     providers="builtin", rdma_core="44")
    assert [r.code for r in found[0].reasons] == ["no_dev_node"]


def test_memlock_is_said_without_a_device_when_it_is_too_small(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sys/class/infiniband").mkdir(parents=True)
    for verdict, said in (("memlock", True), ("memlock_low", False)):
        monkeypatch.setattr(diagnosis, "current_memlock", lambda v=verdict: (v, "limit"))
        found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev",
                         providers="builtin", rdma_core="44")
        assert (verdict in [r.code for r in found.host]) is said


_NOBODY = """
import os, sys
from sysverbs.devices.access import access_errno
from sysverbs.devices.diagnosis import diagnose
where = dict(sysfs_path=sys.argv[1] + "/sys", dev_dir=sys.argv[1] + "/dev/infiniband",
             providers="builtin", rdma_core="44", probe_open=False)
# everything it imports (some modules on first use) imported as root: the checkout may be
# a 0700 directory that uid 65534 cannot read
diagnose(**where)
access_errno(b"/")
os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
found = diagnose(**where)
print(*(r.code for d in found for r in d.reasons))
"""


def test_a_node_this_user_may_write_but_not_read() -> None:
    """Without probing the open, a node of mode 0222 is refused to another user (read
    and write both needed), as the kernel's access check says."""
    require(None if os.geteuid() == 0 else "needs root to become another user", "root")
    d = tempfile.mkdtemp(prefix="sv-node-", dir="/dev/shm" if os.path.isdir("/dev/shm")
                         else None)
    try:
        os.chmod(d, 0o755)
        trees.build(Path(d), trees.host(rxe("uverbs0", "rxe0", dev="1:3\n")))
        null_node(Path(d) / "dev/infiniband/uverbs0", mode=0o222)
        env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", str(ROOT)))
        out = subprocess.run([sys.executable, "-c", _NOBODY, d], capture_output=True,
                             text=True, env=env, cwd=ROOT, timeout=60)
        assert out.stdout.split() == ["dev_node_access"], out.stderr
    finally:
        shutil.rmtree(d)


def test_what_libibverbs_said_of_the_provider(tmp_path: Path) -> None:
    """A config file naming a library that is not there: libibverbs' warning about it is
    quoted after the verdict."""
    trees.build(tmp_path, trees.host(trees.rdma_dev("uverbs0", "mlx5_0")))
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf/mlx5.driver").write_text("driver /nonexistent/libmlx5\n")
    found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
                     providers="installed", config_dir=tmp_path / "conf", rdma_core="44")
    message = found[0].reasons[0].message
    assert message.endswith(" libibverbs says: Warning: couldn't load driver "
                            "'/nonexistent/libmlx5-rdmav34.so': /nonexistent/"
                            "libmlx5-rdmav34.so: cannot open shared object file: No such "
                            "file or directory")


def test_one_uverbs_entry_per_device_and_the_class_abi_floor(tmp_path: Path) -> None:
    """Two uverbs entries naming rxe0, both nodes wrong: libibverbs takes one, so one
    dev_node_wrong; a node of other numbers than a 1:0 device; class ABI 3 accepted."""
    trees.build(tmp_path, trees.host(rxe("uverbs0", "rxe0"),
                                     rxe("uverbs1", "rxe0", dev="231:193\n"),
                                     rxe("uverbs2", "rxe2", dev="1:0\n")))
    for n in (0, 1, 2):
        null_node(tmp_path / f"dev/infiniband/uverbs{n}")
    (tmp_path / "sys/class/infiniband_verbs/abi_version").write_text("3\n")
    found = diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband",
                     providers="builtin", rdma_core="44")
    assert [(d.name, [r.code for r in d.reasons]) for d in found] == [
        ("rxe0", ["dev_node_wrong"]), ("rxe2", ["dev_node_wrong"])]
    assert "but sysfs says 1:0" in found[1].reasons[0].message


def test_the_first_of_a_ports_netdevs_is_named(tmp_path: Path) -> None:
    fixture("mlx5-cx6")(tmp_path)
    port = tmp_path / "sys/class/infiniband/mlx5_3/ports/1"
    (port / "state").write_text("1: DOWN\n")
    (port / "gid_attrs/ndevs/2").write_text("p2p2.7\n")
    assert "(ip link set p2p2 up)" in run(tmp_path).devices["mlx5_3"]["messages"]["port_down"]

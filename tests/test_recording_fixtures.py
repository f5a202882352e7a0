"""The bundled fixtures in umockdev's recording format: what they hold, what their
generator writes, and the same hosts under the real ``umockdev-run``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sysverbs import testing
from sysverbs.testing import umockdev
from sysverbs.testing.umockdev import Record
from tests import listing_hosts
from tests.conftest import fast_tmp
from tests.umockdev_oracle import umockdev_run_or_skip

ROOT = Path(__file__).resolve().parent.parent


def read(path: Path) -> bytes:
    return path.read_bytes()


# --------------------------------------------------------------------- fixtures

EXPECTED_FIXTURES = {
    "azure-vf", "bluefield3", "bnxt_re", "cxgb4", "dgx-a100", "dgx-demo", "efa", "empty",
    "erdma", "gpu-cloud-vm", "gpu-dgx-a100", "gpu-dgx-b200", "gpu-hgx-h100", "gpu-mi300x",
    "gpu-pcie-2socket", "gpu-sriov-sf", "gpu-gb200-nvl72", "gpu-gb300-nvl72",
    "gpu-dgx-station-gb300", "gpu-gh200",
    "hfi1", "hns", "ionic", "irdma", "mana", "mlx4", "mlx5-cx6", "mlx5-cx7",
    "mlx5-sf", "mlx5-sriov", "mthca", "ocrdma", "qedr", "qib", "rxe", "siw", "smi", "usnic",
    "vmw_pvrdma",
}

# fixture -> {ibdev: uverbs abi_version}; None: an ib device without uverbs.
ABI_BY_DRIVER = {"mlx5": "1", "mlx4": "4", "rxe": "2", "efa": "1", "irdma": "5",
                 "bnxt_re": "1", "hns": "1", "erdma": "1", "qedr": "8", "cxgb4": "3",
                 "hfi1": "2", "qib": "2", "ocrdma": "2", "mthca": "1", "vmw_pvrdma": "3",
                 "siw": "1", "mana": "1", "ionic": "1", "usnic": "4"}


PCI_MODALIAS = re.compile(
    r"pci:v[0-9A-F]{8}d[0-9A-F]{8}sv[0-9A-F]{8}sd[0-9A-F]{8}bc[0-9A-F]{2}sc[0-9A-F]{2}"
    r"i[0-9A-F]{2}\n")


def test_fixture_names() -> None:
    names = testing.fixture_names()
    assert names == sorted(names)
    assert set(names) == EXPECTED_FIXTURES
    for name in names:
        path = testing.fixture_path(name)
        assert path.is_file() and path == testing.fixture_path(name + ".umockdev")
    with pytest.raises(KeyError):
        testing.fixture_path("no-such-fixture")


def test_generated_fixtures_are_what_their_generator_writes() -> None:
    """The bundled fixtures are generated (tools/make_fixtures.py, from facts of real
    captures and stand-ins in the kernel's format): this checks only that the
    generator reproduces the checked-in files byte for byte, not that they are right.
    What real data exists is checked below (udev databases of a DGX A100 and a DGX
    B200) and elsewhere (real nvidia-smi matrices: test_placement_hwloc.py)."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "make_fixtures.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


#: udev keys a capture's record and the fixture's must agree on.
_UDEV_KEYS = ("MAJOR", "MINOR", "DEVNAME", "NAME", "INTERFACE", "DRIVER", "PCI_ID",
              "PCI_SUBSYS_ID", "PCI_CLASS")


@pytest.mark.parametrize(("capture", "fixture"), [
    ("udev-dgx-a100", "dgx-a100"), ("udev-dgx-a100", "gpu-dgx-a100"),
    ("udev-dgx-b200", "dgx-demo"), ("udev-dgx-b200", "gpu-dgx-b200")])
def test_generated_fixture_has_the_real_hosts_devices(capture: str, fixture: str) -> None:
    """Every PCI function, RDMA device, uverbs device and netdev of the real udev
    database (tests/data/<capture>/rdma-records-only.txt) is in the fixture at the
    same DEVPATH, with the same device numbers, names, driver and PCI ids."""
    text = (ROOT / "tests/data" / capture / "rdma-records-only.txt").read_text()
    mine = {r.path: dict(r.properties) for r in umockdev.load(testing.fixture_path(fixture))}
    compared = 0
    for record in text.split("\n\n"):
        path = re.search(r"^P: (\S+)$", record, re.M)
        props = dict(re.findall(r"^E: ([A-Z_]+)=(.*)$", record, re.M))
        if path is None or props.get("SUBSYSTEM") not in ("pci", "infiniband",
                                                           "infiniband_verbs", "net"):
            continue
        assert path.group(1) in mine, path.group(1)
        for key in _UDEV_KEYS:
            if key in props:
                assert mine[path.group(1)].get(key) == props[key], (path.group(1), key)
                compared += 1
    assert compared > 80, compared


@pytest.mark.parametrize("name", sorted(EXPECTED_FIXTURES))
def test_fixture_parses_and_materializes(name: str, tmp_path: Path) -> None:
    text = testing.fixture_path(name).read_text()
    r = umockdev.parse(text)
    assert umockdev.dumps(r) == text  # canonical form
    host = testing.materialize(testing.fixture_path(name), tmp_path)
    verbs = host.sysfs / "class" / "infiniband_verbs"
    assert read(verbs / "abi_version") == b"6\n"
    for uverbs in sorted(p for p in verbs.iterdir() if p.name != "abi_version"):
        ibdev = read(uverbs / "ibdev").decode().rstrip("\n")
        ibdir = host.sysfs / "class" / "infiniband" / ibdev
        assert ibdir.is_dir(), (uverbs.name, ibdev)
        major, minor = read(uverbs / "dev").decode().split(":")
        assert int(major) > 0 and int(minor) >= 0
        assert (host.dev / uverbs.name).is_file()
        node_type = read(ibdir / "node_type").decode()
        assert node_type[0] in "1234567" and node_type.endswith("\n")
        guid = read(ibdir / "node_guid").decode()
        assert len(guid) == 20 and guid.count(":") == 3
        if (ibdir / "device" / "modalias").exists():  # auxiliary devices have none
            modalias = read(ibdir / "device" / "modalias").decode()
            assert modalias.endswith("\n")
            if modalias.startswith("pci:"):
                assert PCI_MODALIAS.fullmatch(modalias), modalias
                vendor = read(ibdir / "device" / "vendor").decode().strip()
                assert modalias[5:13] == f"{int(vendor, 16):08X}"
    for node in host.dev_nodes:
        assert (host.dev / node).is_file()
    mad = host.sysfs / "class" / "infiniband_mad"
    if mad.is_dir():
        assert read(mad / "abi_version") == b"5\n"


def test_fixture_contents() -> None:
    """Spot checks of what the fixtures are meant to show."""

    def ibdevs(name: str) -> dict[str, Record]:
        r = umockdev.load(testing.fixture_path(name))
        return {x.name: x for x in r.subsystem("infiniband")}

    def uverbs(name: str) -> dict[str, tuple[str, str]]:
        r = umockdev.load(testing.fixture_path(name))
        return {(x.value("ibdev") or b"").decode().strip(): (
            x.name, (x.value("abi_version") or b"").decode().strip())
            for x in r.subsystem("infiniband_verbs")}

    for name, driver in [("bnxt_re", "bnxt_re"), ("hns", "hns"), ("erdma", "erdma"),
                         ("qedr", "qedr"), ("cxgb4", "cxgb4"), ("hfi1", "hfi1"),
                         ("qib", "qib"), ("ocrdma", "ocrdma"), ("mthca", "mthca"),
                         ("vmw_pvrdma", "vmw_pvrdma"), ("rxe", "rxe"), ("siw", "siw"),
                         ("mana", "mana"), ("ionic", "ionic"), ("usnic", "usnic"),
                         ("efa", "efa"), ("irdma", "irdma"), ("mlx4", "mlx4"),
                         ("mlx5-cx6", "mlx5")]:
        abis = {abi for _, abi in uverbs(name).values()}
        assert abis == {ABI_BY_DRIVER[driver]}, name
    assert len(uverbs("dgx-demo")) >= 11
    assert {"irdma0", "irdma1", "rxe0"} <= set(uverbs("dgx-demo"))
    assert sum(1 for k in uverbs("dgx-demo") if k.startswith("mlx5_")) >= 8
    assert uverbs("dgx-demo")["irdma0"][0] == "uverbs16"
    sriov = uverbs("mlx5-sriov")
    assert len(sriov) == 42 and sriov["mlx5_41"][0] == "uverbs41"
    assert set(uverbs("smi")) == {"mlx5_0"} and set(ibdevs("smi")) == {"mlx5_0", "smi1"}
    assert set(uverbs("irdma")) == {"rocep31s0f0", "rocep31s0f1"}
    assert ibdevs("cxgb4")["cxgb4_0"].value("node_type") == b"4: RNIC\n"
    assert ibdevs("usnic")["usnic_0"].value("node_type") == b"6: usNIC UDP\n"
    assert ibdevs("efa")["rdmap116s0"].value("node_type") == b"7: unspecified\n"
    assert uverbs("efa")["rdmap116s0"][0] == "uverbs11"
    rxe0 = ibdevs("rxe")["rxe0"]
    assert rxe0.path == "/devices/virtual/infiniband/rxe0" and rxe0.attribute("device") is None
    assert set(uverbs("azure-vf")) == {"rdmaP23800p0s2", "ibP57247p0s2"}
    assert uverbs("empty") == {} and ibdevs("empty") == {}
    mlx4 = umockdev.load(testing.fixture_path("mlx4"))
    vf = mlx4.find("/devices/pci0000:00/0000:00:03.0/0000:04:00.2")
    assert vf is not None and vf.attribute("physfn").link == "../0000:04:00.0"  # type: ignore


# --------------------------------------------------------------- umockdev-run

WALK = textwrap.dedent(
    r'''
    import json, os, sys

    def read(path):
        try:
            with open(path, "rb") as f:
                return f.read().decode("latin-1")
        except OSError as e:
            return "<%s>" % type(e).__name__

    def names(path):
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def walk(sysfs, dev):
        out = {"infiniband": {}, "infiniband_verbs": {}, "dev": []}
        cls = os.path.join(sysfs, "class", "infiniband")
        for n in names(cls):
            d = os.path.join(cls, n)
            out["infiniband"][n] = {f: read(os.path.join(d, f)) for f in
                                    ("node_type", "node_guid", "device/modalias")}
        cls = os.path.join(sysfs, "class", "infiniband_verbs")
        for n in names(cls):
            d = os.path.join(cls, n)
            if os.path.isdir(d):
                entry = {f: read(os.path.join(d, f)) for f in
                         ("ibdev", "dev", "abi_version", "device/modalias")}
                ibdev = entry["ibdev"].rstrip("\n")
                ib = os.path.join(sysfs, "class", "infiniband", ibdev)
                entry["ib/node_type"] = read(os.path.join(ib, "node_type"))
                entry["ib/node_guid"] = read(os.path.join(ib, "node_guid"))
                entry["ib/device/modalias"] = read(os.path.join(ib, "device", "modalias"))
                out["infiniband_verbs"][n] = entry
            else:
                out["infiniband_verbs"][n] = read(d)
        # umockdev redirects /dev paths only when the testbed has them; otherwise the
        # real /dev shows through, which is not the fixture's.
        testbed = os.environ.get("UMOCKDEV_DIR")
        if testbed is None or os.path.isdir(os.path.join(testbed, "dev", "infiniband")):
            out["dev"] = names(dev)
        return out

    print(json.dumps(walk(sys.argv[1], sys.argv[2]), sort_keys=True))
    '''
)


def _walk(argv: list[str]) -> dict[str, object]:
    env = dict(os.environ, TMPDIR=fast_tmp())  # where umockdev-run makes its testbed
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(EXPECTED_FIXTURES))
def test_umockdev_equivalence(name: str, tmp_path: Path) -> None:
    """umockdev-run -d FIXTURE shows the same RDMA sysfs and /dev as materialize()."""
    umockdev_run = umockdev_run_or_skip()
    fixture = testing.fixture_path(name)
    host = testing.materialize(fixture, tmp_path / "root")
    script = tmp_path / "walk.py"
    script.write_text(WALK)
    ours = _walk([sys.executable, str(script), str(host.sysfs), str(host.dev)])
    theirs = _walk(umockdev.umockdev_run_command(
        fixture, [sys.executable, str(script), "/sys", "/dev/infiniband"],
        umockdev_run=umockdev_run))
    assert theirs == ours
    verbs = ours["infiniband_verbs"]
    assert isinstance(verbs, dict) and verbs["abi_version"] == "6\n"
    nodes = ours["dev"]
    assert isinstance(nodes, list)
    assert set(host.dev_nodes) <= set(nodes)


# Devices of each fixture that libibverbs finds but no provider claims in sysfs mode:
# siw, mana and ionic providers match only by driver id (netlink mode), rdma-core has
# no usnic provider, and an mlx5 sub-function's parent (an auxiliary device) has no
# modalias.  Everything else with a uverbs device must be listed.
UNMATCHED = {"ionic": {"ionic_0"}, "mana": {"mana_0"}, "mlx5-sf": {"mlx5_2"},
             "gpu-sriov-sf": {"mlx5_5", "mlx5_6"},
             "siw": {"siw0"}, "usnic": {"usnic_0"}}


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(EXPECTED_FIXTURES))
def test_real_libibverbs_under_umockdev(name: str) -> None:
    """The real ibv_devices, run under umockdev-run, lists what each fixture is meant to
    show (sysfs mode: only valid where RDMA netlink is unavailable, i.e. no ib_core)."""
    umockdev_run = umockdev_run_or_skip()
    ibv_devices = shutil.which("ibv_devices")
    if ibv_devices is None:
        pytest.skip("ibv_devices (ibverbs-utils) is not installed")
    if os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"):
        pytest.skip("this host has RDMA devices: libibverbs would use netlink")
    r = listing_hosts.listing_recording(name)  # (the CPUs and NUMA nodes left out)
    with_uverbs = {(x.value("ibdev") or b"").decode().rstrip("\n")
                   for x in r.subsystem("infiniband_verbs")}
    env = dict(os.environ, IBV_SHOW_WARNINGS="1", TMPDIR=fast_tmp())
    proc = subprocess.run(umockdev.umockdev_run_command(listing_hosts.listing_file(name),
                                                   [ibv_devices],
                                                   umockdev_run=umockdev_run),
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] for line in proc.stdout.splitlines()[2:] if line.strip()}
    unmatched = {line.rsplit(" ", 1)[1] for line in proc.stderr.splitlines()
                 if "no userspace device-specific driver found for" in line}
    assert unmatched == UNMATCHED.get(name, set())
    assert listed == with_uverbs - unmatched


def test_umockdev_run_command() -> None:
    cmd = umockdev.umockdev_run_command(Path("/x/a.umockdev"), ["ibv_devices", "-v"])
    assert cmd == ["umockdev-run", "-d", "/x/a.umockdev", "--", "ibv_devices", "-v"]
    cmd = umockdev.umockdev_run_command(["a", Path("b")], ["true"], umockdev_run="/bin/u")
    assert cmd == ["/bin/u", "-d", "a", "-d", "b", "--", "true"]

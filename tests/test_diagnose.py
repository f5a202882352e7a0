"""sysverbs.diagnose(): one scenario per reason code, the sentences, consistency with
the device list, and broken trees.

tests/test_diagnose_oracle.py checks ``listed`` against the real libibverbs.
"""

from __future__ import annotations

import doctest
import importlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sysverbs
from sysverbs import recording
from sysverbs.diagnosis import CODES, DiagnosisList, diagnose
from tests import listing_hosts, staging, trees
from tests.fuzz.profiles import fuzz_settings

ROOT = os.geteuid() == 0
REPO = Path(__file__).resolve().parents[1]
diagnose_module = importlib.import_module("sysverbs.diagnosis")
PROVIDER_LIB = "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so"


def test_doctests() -> None:
    # the implementation modules: the public paths only re-export (no examples)
    result = doctest.testmod(importlib.import_module('sysverbs.devices.diagnosis'))
    assert result.attempted and result.failed == 0, 'sysverbs.devices.diagnosis'


def test_package_exports_the_function() -> None:
    import sysverbs as pkg

    assert pkg.diagnose is diagnose
    assert pkg.diagnose(sysfs_path="/nonexistent").host[0].code == "no_kernel_support"


@dataclass
class Seen:
    """What a diagnose run found, in a form both in-process and subprocess runs give."""

    host: dict[str, str] = field(default_factory=dict)  # code -> message
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)

    def codes(self) -> set[str]:
        out = set(self.host)
        for d in self.devices.values():
            out.update(d["codes"])
        return out


def seen_of(result: DiagnosisList) -> Seen:
    s = Seen({r.code: r.message for r in result.host})
    for d in result:
        s.devices[d.name] = {
            "listed": d.listed,
            "usable": d.usable,
            "provider": d.provider,
            "codes": [r.code for r in d.reasons],
            "messages": {r.code: r.message for r in d.reasons},
            "ports": [r.port for r in d.reasons],
        }
    return s


def seen_of_json(doc: dict[str, Any]) -> Seen:
    s = Seen({r["code"]: r["message"] for r in doc["host"]})
    for d in doc["devices"]:
        s.devices[d["name"]] = {
            "listed": d["listed"],
            "usable": d["usable"],
            "provider": d["provider"],
            "codes": [r["code"] for r in d["reasons"]],
            "messages": {r["code"]: r["message"] for r in d["reasons"]},
            "ports": [r["port"] for r in d["reasons"]],
        }
    return s


def run(root: Path, **kw: Any) -> Seen:
    if "static_providers" not in kw:
        kw.setdefault("providers", "builtin")
    kw.setdefault("rdma_core", "44")
    return seen_of(diagnose(sysfs_path=root / "sys", dev_dir=root / "dev/infiniband", **kw))


def run_as_nobody(root: Path, memlock: Optional[int] = None) -> Seen:
    """python -m sysverbs doctor --json as uid 65534 (for access and memlock checks)."""
    cmd = [
        staging.user_python(),  # this checkout may be where uid 65534 cannot enter
        "-m",
        "sysverbs",
        "doctor",
        "--json",
        "--providers",
        "builtin",
        "--rdma-core",
        "44",
        "--sysfs-path",
        str(root / "sys"),
        "--dev-dir",
        str(root / "dev/infiniband"),
    ]
    cmd = [*staging.AS_NOBODY, *cmd]
    if memlock is not None:  # set by root, inherited by the unprivileged process
        cmd = ["prlimit", f"--memlock={memlock}:{memlock}", *cmd]
    proc = subprocess.run(cmd, capture_output=True, env=staging.user_env(), timeout=120, cwd="/")
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return seen_of_json(json.loads(proc.stdout))


def null_node(path: Path, major: int = 1, minor: int = 3, mode: int = 0o666) -> None:
    if os.path.lexists(path):
        path.unlink()
    os.mknod(path, mode | stat.S_IFCHR, os.makedev(major, minor))
    os.chmod(path, mode)


def rxe(uverbs: str = "uverbs0", name: str = "rxe0", **kw: Any) -> trees.Tree:
    return trees.rxe_dev(uverbs, name, **kw)


def fixture(name: str) -> Callable[[Path], recording.Host]:
    return lambda root: recording.materialize(recording.fixture_path(name), root)


# -- scenarios: (id, build the tree, diagnose it, check) ------------------------------------

Scenario = tuple[str, Callable[[Path], Seen], Callable[[Seen], None], bool]
SCENARIOS: list[Scenario] = []


def scenario(
    build: Callable[[Path], Seen], needs_root: bool = False
) -> Callable[[Callable[[Seen], None]], Callable[[Seen], None]]:
    """Register ``build`` (make a tree, diagnose it) with the decorated check."""

    def register(check: Callable[[Seen], None]) -> Callable[[Seen], None]:
        SCENARIOS.append((build.__name__.lstrip("_"), build, check, needs_root))
        return check

    return register


def _no_kernel(root: Path) -> Seen:
    root.joinpath("sys").mkdir()
    return run(root)


@scenario(_no_kernel)
def _(s: Seen) -> None:
    assert s.devices == {} and list(s.host) == ["no_kernel_support"]
    assert "does not exist" in s.host["no_kernel_support"]


def _empty_class(root: Path) -> Seen:
    trees.build(root, trees.host())
    return run(root)


@scenario(_empty_class)
def _(s: Seen) -> None:
    assert s.devices == {} and "is empty" in s.host["no_kernel_support"]


def _no_uverbs_module(root: Path) -> Seen:
    fixture("mlx5-cx6")(root)
    shutil.rmtree(root / "sys/class/infiniband_verbs")
    return run(root)


@scenario(_no_uverbs_module)
def _(s: Seen) -> None:
    assert len(s.devices) == 6 and "no_uverbs_module" in s.host
    for d in s.devices.values():
        assert not d["listed"] and not d["usable"] and d["codes"][0] == "no_uverbs_module"
    assert "modprobe ib_uverbs" in s.host["no_uverbs_module"]


def _path_too_long(root: Path) -> Seen:
    deep = root / ("x" * 120) / ("y" * 120)
    trees.build(deep, trees.host(rxe()))
    return seen_of(
        diagnose(sysfs_path=deep / "sys", dev_dir=deep / "dev/infiniband", providers="builtin")
    )


@scenario(_path_too_long)
def _(s: Seen) -> None:
    assert "sysfs_path_too_long" in s.host
    assert s.devices["rxe0"]["codes"][0] == "sysfs_path_too_long"


def _dev_path_too_long(root: Path) -> Seen:
    base = root / "p"
    pad = 228 - len(str(base / "sys")) - 1
    deep = base / ("z" * pad)
    assert len(str(deep / "sys")) == 228
    trees.build(deep, trees.host(rxe()))
    return seen_of(
        diagnose(sysfs_path=deep / "sys", dev_dir=deep / "dev/infiniband", providers="builtin")
    )


@scenario(_dev_path_too_long)
def _(s: Seen) -> None:
    d = s.devices["rxe0"]
    assert d["codes"][0] == "dev_path_too_long" and d["provider"] == "rxe" and not d["listed"]


def _kernel_abi(root: Path) -> Seen:
    trees.build(root, trees.host(rxe(), extra={"sys/class/infiniband_verbs/abi_version": "7\n"}))
    return run(root)


@scenario(_kernel_abi)
def _(s: Seen) -> None:
    assert "ABI 7" in s.host["kernel_abi"] and s.devices["rxe0"]["codes"][0] == "kernel_abi"
    assert not s.devices["rxe0"]["listed"]


def _kernel_abi_missing(root: Path) -> Seen:
    trees.build(root, trees.host(rxe(), class_abi=False))
    return run(root)


@scenario(_kernel_abi_missing)
def _(s: Seen) -> None:
    assert "cannot be read" in s.host["kernel_abi"]


def _smi(root: Path) -> Seen:
    fixture("smi")(root)
    return run(root)


@scenario(_smi)
def _(s: Seen) -> None:
    # an XDR SMI device: a note (no verbs device, by design), not an error
    assert s.devices["smi1"]["codes"] == ["management_device"]
    assert "SMI" in s.devices["smi1"]["messages"]["management_device"]
    assert s.devices["mlx5_0"]["listed"]


def _bad_entries(root: Path) -> Seen:
    trees.build(
        root,
        trees.host(
            rxe("uverbs0", "rxe_a", dev="junk\n"),
            rxe("uverbs1", "rxe_b", dev_node=False),
            rxe("uverbs2", "rxe_c"),
            extra={
                "sys/class/infiniband_verbs/uverbs9": trees.Dir(),
                "sys/class/infiniband_verbs/uverbs9/ibdev": "rxe_ghost\n",
                "sys/class/infiniband_verbs/uverbs9/dev": "1:2\n",
            },
        ),
    )
    return run(root)


@scenario(_bad_entries)
def _(s: Seen) -> None:
    assert s.devices["rxe_a"]["codes"][0] == "bad_uverbs_entry"
    assert "not MAJOR:MINOR" in s.devices["rxe_a"]["messages"]["bad_uverbs_entry"]
    assert s.devices["rxe_b"]["codes"][0] == "no_dev_node"
    assert "--device=" in s.devices["rxe_b"]["messages"]["no_dev_node"]
    assert s.devices["rxe_c"]["listed"] and s.devices["rxe_c"]["codes"][0] == "dev_node_wrong"
    assert "does not exist" in s.devices["rxe_ghost"]["messages"]["bad_uverbs_entry"]


def _not_installed(root: Path) -> Seen:
    fixture("mlx5-cx6")(root)
    empty = root / "conf"
    empty.mkdir()
    return run(root, providers="installed", config_dir=empty)


@scenario(_not_installed)
def _(s: Seen) -> None:
    assert "no_providers_installed" in s.host
    d = s.devices["mlx5_0"]
    assert d["codes"][0] == "provider_not_installed" and d["provider"] == "mlx5"
    msg = d["messages"]["provider_not_installed"]
    if os.path.exists(PROVIDER_LIB):
        assert "not enabled" in msg and "driver mlx5" in msg
    else:
        assert "ibverbs-providers" in msg


def _not_linked(root: Path) -> Seen:
    fixture("mlx5-cx6")(root)
    return run(root, static_providers="mlx4")


@scenario(_not_linked)
def _(s: Seen) -> None:
    d = s.devices["mlx5_0"]
    assert d["codes"] == ["provider_not_linked"] and d["provider"] == "mlx5"
    assert not d["listed"]
    msg = d["messages"]["provider_not_linked"]
    assert "it links mlx4" in msg and "-DRDMA_STATIC_PROVIDERS=mlx4,mlx5" in msg
    assert "no_providers_installed" not in s.host


def _not_enabled(root: Path) -> Seen:
    fixture("mlx5-cx6")(root)
    conf = root / "conf"
    conf.mkdir()
    (conf / "rxe.driver").write_text("driver rxe\ndriver nosuch\n")
    return run(root, providers="installed", config_dir=conf)


@scenario(_not_enabled)
def _(s: Seen) -> None:
    assert "no_providers_installed" not in s.host or not os.path.exists(PROVIDER_LIB)
    msg = s.devices["mlx5_0"]["messages"]["provider_not_installed"]
    assert "mlx5" in msg


def _no_provider(root: Path) -> Seen:
    fixture("usnic")(root)
    trees.build(
        root,
        rxe("uverbs5", "siw0")
        + trees.rdma_dev(
            "uverbs6",
            "rdmap0s6",
            pci="0000:00:06.0",
            modalias="pci:v00001D0Fd0000EFA3sv00001D0Fsd0000EFA3bc02sc00i00\n",
        ),
    )
    return run(root)


@scenario(_no_provider)
def _(s: Seen) -> None:
    u = s.devices["usnic_0"]
    assert u["codes"][0] == "no_provider" and u["provider"] is None and not u["listed"]
    assert "pci:v00001137" in u["messages"]["no_provider"]
    assert "netlink" in s.devices["siw0"]["messages"]["no_provider"]
    # efa 1d0f:efa3 came with rdma-core 53
    assert "rdma-core 53 and later" in s.devices["rdmap0s6"]["messages"]["no_provider"]


def _provider_abi(root: Path) -> Seen:
    trees.build(root, trees.host(trees.rdma_dev("uverbs0", "mlx5_0", abi="0\n")))
    return run(root)


@scenario(_provider_abi)
def _(s: Seen) -> None:
    d = s.devices["mlx5_0"]
    assert d["codes"][0] == "provider_abi" and d["provider"] == "mlx5"
    assert "is 0" in d["messages"]["provider_abi"]


def _usable(root: Path) -> Seen:
    trees.build(root, trees.host(rxe(dev="1:3\n")))
    null_node(root / "dev/infiniband/uverbs0")
    return run(root)


@scenario(_usable, needs_root=True)
def _(s: Seen) -> None:
    d = s.devices["rxe0"]
    assert d["usable"] and d["listed"] and d["provider"] == "rxe"
    assert not any(CODES[c][0] == "error" for c in d["codes"])


def _wrong_numbers(root: Path) -> Seen:
    trees.build(root, trees.host(rxe()))
    null_node(root / "dev/infiniband/uverbs0")  # 1:3, but sysfs says 231:192
    return run(root)


@scenario(_wrong_numbers, needs_root=True)
def _(s: Seen) -> None:
    msg = s.devices["rxe0"]["messages"]["dev_node_wrong"]
    assert "1:3" in msg and "231:192" in msg and "mknod" in msg


def _open_fails(root: Path) -> Seen:
    trees.build(root, trees.host(rxe(dev="511:511\n")))
    null_node(root / "dev/infiniband/uverbs0", 511, 511)  # no driver has this number
    return run(root)


@scenario(_open_fails, needs_root=True)
def _(s: Seen) -> None:
    d = s.devices["rxe0"]
    assert d["listed"] and not d["usable"] and d["codes"][0] == "dev_node_open_failed"


def _no_access(root: Path) -> Seen:
    trees.build(root, trees.host(rxe(dev="1:3\n")))
    null_node(root / "dev/infiniband/uverbs0", mode=0o600)
    return run_as_nobody(root)


@scenario(_no_access, needs_root=True)
def _(s: Seen) -> None:
    d = s.devices["rxe0"]
    assert d["codes"][0] == "dev_node_access" and not d["usable"]
    assert "uid 65534" in d["messages"]["dev_node_access"]


def _memlock(root: Path) -> Seen:
    trees.build(root, trees.host(rxe(dev="1:3\n")))
    null_node(root / "dev/infiniband/uverbs0")
    return run_as_nobody(root, memlock=32768)


@scenario(_memlock, needs_root=True)
def _(s: Seen) -> None:
    assert "32768 bytes" in s.host["memlock"] and s.devices["rxe0"]["usable"]


def _ports(root: Path) -> Seen:
    fixture("mlx5-cx6")(root)
    ports = root / "sys/class/infiniband/mlx5_0/ports/1"
    (ports / "state").write_text("2: INIT\n")
    (ports / "gids/0").write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")
    eth = root / "sys/class/infiniband/mlx5_3/ports/1"
    (eth / "state").write_text("1: DOWN\n")
    return run(root)


@scenario(_ports)
def _(s: Seen) -> None:
    m0 = s.devices["mlx5_0"]
    assert "port_down" in m0["codes"] and "no_gids" in m0["codes"] and 1 in m0["ports"]
    assert "subnet manager" in m0["messages"]["port_down"]
    assert "not initialised" in m0["messages"]["no_gids"]
    assert "DISABLED" in s.devices["mlx5_1"]["messages"]["port_down"]
    assert "ip link set p2p2 up" in s.devices["mlx5_3"]["messages"]["port_down"]
    assert "no_gids" not in s.devices["mlx5_3"]["codes"]


def _rdma_cm(root: Path) -> Seen:
    trees.build(root, trees.host(rxe(), extra={"sys/class/misc/rdma_cm/abi_version": "5\n"}))
    return run(root)


@scenario(_rdma_cm)
def _(s: Seen) -> None:
    assert "EPERM" in s.host["rdma_cm_abi"]
    assert "rdma_cm does not exist" in s.host["no_rdma_cm"]  # class/misc/rdma_cm, no node


def _no_rdma_cm(root: Path) -> Seen:
    trees.build(root, trees.host(rxe()))
    return run(root)


@scenario(_no_rdma_cm)
def _(s: Seen) -> None:
    assert "modprobe rdma_ucm" in s.host["no_rdma_cm"] and "rdma_cm_abi" not in s.host


def _recorded(root: Path) -> Seen:
    """A bundled fixture taken for the recording it is (``doctor --fixture``)."""
    fixture("rxe")(root)
    return run(root, recorded=True)


@scenario(_recorded)
def _(s: Seen) -> None:
    # Failed before (no recorded=): both devices "listed, not usable", dev_node_wrong
    # with "bind-mount the host's /dev/infiniband", and a no_rdma_cm warning that the
    # recording cannot support (the recorder does not record class/misc).
    assert list(s.host) == ["recorded_host"] and CODES["recorded_host"][0] == "note"
    assert "stand-ins" in s.host["recorded_host"] and "class/misc" in s.host["recorded_host"]
    for name in ("rxe0", "rxe1"):
        assert s.devices[name]["usable"] and s.devices[name]["codes"] == []


def _recorded_without_a_node(root: Path) -> Seen:
    """A recording whose host had no /dev node for one device (no N: line)."""
    rec = _without_node(recording.load(recording.fixture_path("rxe")), "uverbs0")
    recording.materialize(rec, root)
    return run(root, recorded=True)


@scenario(_recorded_without_a_node)
def _(s: Seen) -> None:
    msg = s.devices["rxe0"]["messages"]["no_dev_node"]
    assert s.devices["rxe0"]["codes"] == ["no_dev_node"] and not s.devices["rxe0"]["listed"]
    assert msg.startswith("The recording has no /dev/infiniband/uverbs0 (no N: line)")
    assert str(Path(tempfile.gettempdir())) not in msg  # the recorded host's path
    assert s.devices["rxe1"]["usable"]


def _without_node(rec: recording.Recording, uverbs: str) -> recording.Recording:
    """``rec`` without the N: (and S:) lines of uverbs device ``uverbs``."""
    import dataclasses

    out = [dataclasses.replace(r, node=None, links=())
           if r.subsystem == "infiniband_verbs" and r.path.endswith("/" + uverbs) else r
           for r in rec]
    assert out != list(rec)
    return recording.Recording(tuple(out))


@pytest.mark.parametrize(
    "build, check, needs_root", [pytest.param(b, c, r, id=i) for i, b, c, r in SCENARIOS]
)
def test_scenario(
    build: Callable[[Path], Seen], check: Callable[[Seen], None], needs_root: bool
) -> None:
    if needs_root and not ROOT:
        pytest.skip("needs root (mknod, setpriv)")
    tmp = Path(tempfile.mkdtemp(prefix="sv-diag-"))  # readable by uid 65534
    os.chmod(tmp, 0o755)
    try:
        check(build(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_every_code_has_a_scenario() -> None:
    """Run every scenario and check that together they produce every code."""
    if not ROOT:
        pytest.skip("some scenarios need root")
    importlib.import_module("tests.test_verdicts")  # its scenarios: unknown, memlock_low...
    lab_only = importlib.import_module("tests.test_access").LAB_ONLY  # no_ipc_lock...
    seen: set[str] = set()
    for _, build, _, _ in SCENARIOS:
        tmp = Path(tempfile.mkdtemp(prefix="sv-diag-"))
        os.chmod(tmp, 0o755)
        try:
            seen |= build(tmp).codes()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    assert seen == set(CODES) - lab_only


# -- consistency, output, state --------------------------------------------------------------


@pytest.mark.parametrize("name", recording.fixture_names())
@pytest.mark.parametrize("providers", ["builtin", "installed"])
def test_listed_is_what_get_device_list_returns(ftmp: Path, name: str, providers: str) -> None:
    host = listing_hosts.materialize(name, ftmp)
    opts: dict[str, Any] = {
        "sysfs_path": host.sysfs,
        "dev_dir": host.dev,
        "providers": providers,
        "rdma_core": "44",
    }
    found = diagnose(**opts)
    devs = sysverbs.get_device_list(**opts)
    try:
        assert sorted(d.name for d in found if d.listed) == sorted(d.name for d in devs)
        assert {d.name: d.provider for d in found if d.listed} == {d.name: d.provider for d in devs}
    finally:
        sysverbs.free_device_list(devs)
    kernel = (
        sorted(os.listdir(host.sysfs / "class/infiniband"))
        if (host.sysfs / "class/infiniband").is_dir()
        else []
    )
    assert sorted(d.name for d in found) == kernel  # one entry per device the kernel shows


def test_diagnose_is_silent(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    trees.build(
        tmp_path,
        trees.host(
            trees.rdma_dev("uverbs0", "mlx5_0", abi="0\n"),
            trees.rdma_dev("uverbs1", "usnic_0", modalias="pci:v00001137d00000043sv0\n"),
            extra={"sys/class/infiniband_verbs/abi_version": "9\n"},
        ),
    )
    os.environ["IBV_SHOW_WARNINGS"] = "1"
    try:
        diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband")
    finally:
        del os.environ["IBV_SHOW_WARNINGS"]
    assert capfd.readouterr().err == ""


def test_report_and_str(tmp_path: Path) -> None:
    host = recording.materialize(recording.fixture_path("smi"), tmp_path)
    found = diagnose(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin")
    text = found.report()
    assert "smi1: management device, no verbs" in text and "[management_device]" in text
    assert "mlx5_0: listed, not usable (provider mlx5, uverbs0)" in text
    assert found[0].errors and str(found[0].errors[0]).startswith("error: ")
    assert DiagnosisList([], ()).report() == "no RDMA device"


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """``sysverbs doctor`` is the command line of diagnose()."""
    from sysverbs.cli import main

    assert main(["doctor", "--fixture", "rxe", "--json", "--no-open"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "sysverbs.doctor/1" and doc["usable"] is True
    assert [d["name"] for d in doc["devices"]] == ["rxe0", "rxe1"]
    assert doc["devices"][0]["reasons"] == []
    assert doc["devices"][0]["node"] == {"path": "/dev/infiniband/uverbs0", "kind": "char",
                                         "major": 231, "minor": 192, "stand_in": True}
    assert [r["code"] for r in doc["host"]] == ["recorded_host"]
    assert main(["doctor", "--fixture", "usnic"]) == 1
    assert "usnic_0: MISSING" in capsys.readouterr().out
    assert main(["doctor", "--fixture", "nosuch"]) == 2
    assert not hasattr(diagnose_module, "main")  # one command line: the CLI's


def _uverbs_numbers(sysfs: Path, uverbs: str) -> tuple[int, int]:
    major, minor = (sysfs / "class/infiniband_verbs" / uverbs / "dev").read_text().split(":")
    return int(major), int(minor)


def test_doctor_on_the_readme_demo_fixture(
        capsys: pytest.CaptureFixture[str], fast_fixture_tmp: None) -> None:
    """``doctor --fixture dgx-demo`` (the README's demo host): every device the recording
    has is usable there, so exit 0; each line shows the recorded node, with the
    numbers of the fixture's own sysfs ``dev`` files, and no advice for this machine.
    Failed before: 19 devices "listed, not usable ... is not a character device ...
    bind-mount the host's /dev/infiniband", exit 1."""
    from sysverbs.cli import main

    assert main(["doctor", "--fixture", "dgx-demo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    host = recording.materialize(recording.fixture_path("dgx-demo"), tempfile.mkdtemp())
    try:
        kernel = sorted(os.listdir(host.sysfs / "class/infiniband"))
        verbs = host.sysfs / "class/infiniband_verbs"
        entries = {(verbs / e / "ibdev").read_text().strip(): e
                   for e in os.listdir(verbs) if e.startswith("uverbs")}
        devices = [x for x in lines if not x.startswith("host: ")]
        assert len(devices) == len(kernel) == len(entries) == 19
        for line in devices:
            name = line.split(":", 1)[0]
            entry = entries[name]
            major, minor = _uverbs_numbers(host.sysfs, entry)
            assert line.startswith(f"{name}: usable (provider "), line
            assert f", {entry}: recorded char device {major}:{minor})" in line, line
        assert lines[0].startswith("host: note: A recorded host, not this machine")
        assert "[recorded_host]" in lines[0]
        text = "\n".join(lines)
        for live_only in ("bind-mount", "not a character device", "modprobe rdma_ucm",
                          "ulimit", tempfile.gettempdir() + "/"):
            assert live_only not in text
        # The same tree given as --sysfs-path/--dev-dir is not a recording: a plain file
        # at /dev/infiniband/uverbsN stays the error it is, with the live host's fix.
        assert main(["doctor", "--sysfs-path", str(host.sysfs), "--dev-dir", str(host.dev),
                     "--providers", "builtin", "--no-open"]) == 1
        out = capsys.readouterr().out
        assert out.count("listed, not usable") == 19 and "recorded" not in out
        assert out.count("bind-mount the host's /dev/infiniband") == 19
    finally:
        shutil.rmtree(host.root, ignore_errors=True)


def test_recorded_is_a_bool(tmp_path: Path) -> None:
    with pytest.raises(sysverbs.errors.WrongTypeError):
        diagnose(sysfs_path=tmp_path, recorded="yes")  # type: ignore[arg-type]


def test_recorded_trusts_only_plain_file_stand_ins(tmp_path: Path) -> None:
    """``recorded=True`` takes a plain file for a recording's stand-in and nothing
    else: a directory, or a real char device with the wrong numbers, is the error it
    is; without ``recorded`` the stand-in is the error a copied /dev is."""
    host = recording.materialize(recording.fixture_path("rxe"), tmp_path)
    node = host.dev / "uverbs0"
    live = diagnose(**host.options())
    assert [r.code for r in live[0].reasons] == ["dev_node_wrong"]
    assert live[0].node is not None and live[0].node.kind == "file"
    assert not live[0].node.stand_in and live[0].node.path == str(node)
    node.unlink()
    node.mkdir()
    (found,) = [d for d in diagnose(recorded=True, **host.options()) if d.name == "rxe0"]
    assert [r.code for r in found.reasons] == ["dev_node_wrong"] and not found.usable
    assert found.node is not None and found.node.kind == "directory"
    if not ROOT:
        pytest.skip("mknod needs root")
    node.rmdir()
    null_node(node)  # 1:3, sysfs says 231:192
    (found,) = [d for d in diagnose(recorded=True, **host.options()) if d.name == "rxe0"]
    assert "1:3" in found.reasons[0].message and found.reasons[0].code == "dev_node_wrong"
    assert found.node == diagnose_module.DeviceNode(str(node), "char", 1, 3, False)


_STAT_NODES = r"""
import json, os, stat, sys
out = {}
for name in sys.argv[1:]:
    path = "/dev/infiniband/" + name
    try:
        st = os.stat(path)
    except FileNotFoundError:
        out[path] = None
        continue
    kind = "char" if stat.S_ISCHR(st.st_mode) else "block" if stat.S_ISBLK(st.st_mode) else "?"
    out[path] = [kind, os.major(st.st_rdev), os.minor(st.st_rdev)]
print(json.dumps(out))
"""


def _umockdev_nodes(recording_file: Path, names: list[str]) -> dict[str, Any]:
    umockdev_run = shutil.which("umockdev-run")
    if umockdev_run is None:
        if os.environ.get("CI") == "true":
            pytest.fail("umockdev-run is not installed (required when CI=true)")
        pytest.skip("umockdev-run is not installed")
    from tests.conftest import fast_tmp

    cmd = recording.umockdev_run_command(
        recording_file, [sys.executable, "-c", _STAT_NODES, *names], umockdev_run=umockdev_run)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, TMPDIR=fast_tmp()))
    assert proc.returncode == 0, proc.stderr
    nodes: dict[str, Any] = json.loads(proc.stdout)
    return nodes


def _recorded_nodes_match_umockdev(host: recording.Host, recording_file: Path) -> int:
    found = diagnose(recorded=True, **host.options(rdma_core="44"))
    names = sorted(os.listdir(host.sysfs / "class/infiniband_verbs"))
    names = [n for n in names if n.startswith("uverbs")]
    theirs = _umockdev_nodes(recording_file, names)
    checked = 0
    for d in found:
        if d.node is not None:
            assert d.node.stand_in and d.usable == (not d.errors), d
            assert theirs[d.node.path] == [d.node.kind, d.node.major, d.node.minor], d
            # the recording's udev properties (the uevent file) say the same numbers
            uevent = (host.sysfs / "class/infiniband_verbs" / str(d.uverbs) / "uevent")
            props = dict(x.split("=", 1) for x in uevent.read_text().splitlines())
            assert (int(props["MAJOR"]), int(props["MINOR"])) == (d.node.major, d.node.minor)
            assert props["DEVNAME"] == d.node.path[len("/dev/"):]
            checked += 1
        elif "no_dev_node" in [r.code for r in d.reasons]:
            path = f"/dev/infiniband/{d.uverbs}"
            if not os.path.lexists(path):  # umockdev shows the real /dev's paths through
                assert theirs[path] is None, d
            checked += 1
        else:
            assert not d.listed, d  # every listed device has its node compared
    return checked


@pytest.mark.oracle
@pytest.mark.parametrize("name", recording.fixture_names())
def test_recorded_nodes_are_what_umockdev_replays(ftmp: Path, name: str) -> None:
    """The node ``recorded=True`` reports for each device (its type and numbers) is the
    node umockdev-run shows a program for the same recording (``stat`` of
    /dev/infiniband/uverbsN): umockdev is the format's own reader."""
    host = listing_hosts.materialize(name, ftmp)
    _recorded_nodes_match_umockdev(host, listing_hosts.listing_file(name))


@pytest.mark.oracle
def test_a_recorded_missing_node_is_missing_under_umockdev(ftmp: Path) -> None:
    """A recording without the N: line of a device: diagnose(recorded=True) says the
    recorded host had no node (no_dev_node), and umockdev-run has none either."""
    rec = _without_node(listing_hosts.listing_recording("dgx-demo"), "uverbs18")
    (ftmp / "r.umockdev").write_text(recording.dumps(rec), encoding="utf-8",
                                     errors="surrogateescape")
    host = recording.materialize(rec, ftmp / "root")
    assert _recorded_nodes_match_umockdev(host, ftmp / "r.umockdev") == 19
    (rxe0,) = [d for d in diagnose(recorded=True, **host.options()) if d.name == "rxe0"]
    assert [r.code for r in rxe0.reasons] == ["no_dev_node"] and rxe0.node is None


def test_probe_open_false_skips_the_open(tmp_path: Path) -> None:
    if not ROOT:
        pytest.skip("mknod needs root")
    trees.build(tmp_path, trees.host(rxe(dev="511:511\n")))
    null_node(tmp_path / "dev/infiniband/uverbs0", 511, 511)
    s = seen_of(
        diagnose(
            sysfs_path=tmp_path / "sys",
            dev_dir=tmp_path / "dev/infiniband",
            providers="builtin",
            probe_open=False,
        )
    )
    assert s.devices["rxe0"]["usable"]


# -- broken trees ----------------------------------------------------------------------------

_ENTRY_FILES = ["ibdev", "dev", "abi_version"]
_IB_FILES = [
    "node_type",
    "node_guid",
    "ports/1/state",
    "ports/1/link_layer",
    "ports/1/gids/0",
    "ports/1/gid_attrs/ndevs/0",
    "device/modalias",
]


@pytest.mark.timeout(60)  # FIFOs in the tree: a read of one would block, fail fast
@fuzz_settings(ci=40, deep=400)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_ENTRY_FILES + _IB_FILES),
            st.sampled_from(["junk", "dir", "loop", "fifo", "missing", "big"]),
            st.binary(max_size=40),
        ),
        max_size=8,
    ),
    st.booleans(),
)
def test_broken_trees_never_raise(changes: list[tuple[str, str, bytes]], class_abi: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        trees.build(
            root,
            trees.host(trees.rdma_dev("uverbs0", "mlx5_0"), rxe("uverbs1"), class_abi=class_abi),
        )
        uv = root / "sys/class/infiniband_verbs/uverbs0"
        ib = root / "sys/class/infiniband/mlx5_0"
        for rel, kind, data in changes:
            path = (uv if rel in _ENTRY_FILES else ib) / rel
            if os.path.lexists(path) and not path.is_dir():
                path.unlink()
            elif path.is_dir():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "junk":
                path.write_bytes(data)
            elif kind == "dir":
                path.mkdir()
            elif kind == "loop":
                os.symlink(path.name, path)
            elif kind == "fifo":
                os.mkfifo(path)
            elif kind == "big":
                path.write_bytes(b"9" * 10000)
        found = diagnose(
            sysfs_path=root / "sys", dev_dir=root / "dev/infiniband", providers="builtin"
        )
        assert {d.name for d in found} >= {"rxe0"}
        for d in found:
            assert d.usable is False  # plain-file nodes
            assert all(r.code in CODES for r in d.reasons)


def test_duplicate_entry_with_one_broken(tmp_path: Path) -> None:
    """Two uverbs entries name rxe0; libibverbs takes the good one: no error for it."""
    trees.build(tmp_path, trees.host(rxe("uverbs0"), rxe("uverbs1", dev="junk\n")))
    s = run(tmp_path)
    assert s.devices["rxe0"]["listed"] and "bad_uverbs_entry" not in s.devices["rxe0"]["codes"]


def test_missing_config_dir(tmp_path: Path) -> None:
    fixture("rxe")(tmp_path)
    s = run(tmp_path, providers="installed", config_dir=tmp_path / "nosuch")
    assert "does not exist" in s.devices["rxe0"]["messages"]["provider_not_installed"]
    assert "no_providers_installed" in s.host

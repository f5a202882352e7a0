"""sysverbs.diagnose(): one scenario per reason code, the sentences, consistency with
the device list, and broken trees.

tests/test_diagnose_oracle.py checks ``listed`` against the real libibverbs.
"""

from __future__ import annotations

import doctest
import importlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from sysverbs import testing
from sysverbs.devices.diagnosis import CODES, diagnose
from sysverbs.testing import umockdev
from tests import trees
from tests.diagnose_runs import (
    PROVIDER_LIB,
    ROOT,
    Seen,
    fixture,
    null_node,
    run,
    run_as_nobody,
    rxe,
    seen_of,
    without_node,
)


def test_doctests() -> None:
    result = doctest.testmod(importlib.import_module('sysverbs.devices.diagnosis'))
    assert result.attempted and result.failed == 0, 'sysverbs.devices.diagnosis'


def test_package_exports_the_function() -> None:
    import sysverbs as pkg

    assert pkg.diagnose is diagnose
    assert pkg.diagnose(sysfs_path="/nonexistent").host[0].code == "no_kernel_support"


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
    rec = without_node(umockdev.load(testing.fixture_path("rxe")), "uverbs0")
    testing.materialize(rec, root)
    return run(root, recorded=True)


@scenario(_recorded_without_a_node)
def _(s: Seen) -> None:
    msg = s.devices["rxe0"]["messages"]["no_dev_node"]
    assert s.devices["rxe0"]["codes"] == ["no_dev_node"] and not s.devices["rxe0"]["listed"]
    assert msg.startswith("The recording has no /dev/infiniband/uverbs0 (no N: line)")
    assert str(Path(tempfile.gettempdir())) not in msg  # the recorded host's path
    assert s.devices["rxe1"]["usable"]



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

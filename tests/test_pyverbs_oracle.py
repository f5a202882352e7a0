"""sysverbs.compat.pyverbs against the REAL pyverbs (Debian 12's python3-pyverbs, rdma-core
44) on every bundled fixture and on generated hosts, broken ones included.

One child per tree, ``/usr/bin/python3`` (the CPython pyverbs is built for) in a private
mount namespace with ``SYSFS_PATH`` set and the tree's ``dev/infiniband`` on
``/dev/infiniband`` (tests/oracle/harness.py), runs tests/oracle/pyverbs_probe.py:
pyverbs' ``get_device_list()``, ``rdma_get_devices()`` and ``is_fork_initialized()``,
then sysverbs.compat.pyverbs' with no arguments, as a pyverbs program calls them (so
under libibverbs' defaults).  Every property, ``str()``, the order, the exception's
class, text, ``error_code`` and errno (pyverbs' get_device_list drops it: the C errno
libibverbs left is read right after) and what each wrote on stderr must be equal.
CPython only (pyverbs is a CPython extension): the Makefile leaves this file out of
the pypy3 run.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import pytest

from sysverbs import testing
from sysverbs.testing import HostBuilder
from sysverbs.testing.cache import fixture_tree
from tests import trees
from tests.conftest import require
from tests.oracle import harness

pytestmark = [pytest.mark.oracle, pytest.mark.usefixtures("pyverbs_ready")]

PYTHON = "/usr/bin/python3"
PROBE = Path(__file__).resolve().parent / "oracle" / "pyverbs_probe.py"
#: Warnings on, so that libibverbs' messages are compared too; bytecode written, so
#: that the children do not compile sysverbs again each time.
ENV: dict[str, Optional[str]] = {"IBV_SHOW_WARNINGS": "1", "PYTHONDONTWRITEBYTECODE": None}


def pyverbs_unavailable() -> Optional[str]:
    """Why the pyverbs oracle cannot run here (None when it can)."""
    reason = harness.unavailable_reason()
    if reason is not None:
        return reason
    if not os.access(PYTHON, os.X_OK):
        return f"{PYTHON} is missing"
    check = subprocess.run([PYTHON, "-c", "import pyverbs.device, pyverbs.fork"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or [""])[-1]
        return f"pyverbs is not installed (apt-get install python3-pyverbs): {last}"
    return None


@pytest.fixture(scope="module")
def pyverbs_ready() -> None:
    require(pyverbs_unavailable(), "pyverbs oracle")


def probe(root: Path, mnt: Path, *, sysfs_path: Optional[str] = None,
          layout: bool = False) -> dict[str, Any]:
    """Both implementations on the tree ``root`` (mounted at ``mnt``)."""
    mnt.mkdir(parents=True, exist_ok=True)
    argv = [PYTHON, str(PROBE), *(["--layout"] if layout else [])]
    run = harness.run_in_ns(root, mnt, argv, env=ENV, sysfs_path=sysfs_path)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    assert run.stderr == b"", run.stderr.decode(errors="replace")
    out: dict[str, Any] = json.loads(run.stdout)
    return out


def assert_same(out: dict[str, Any]) -> dict[str, Any]:
    """pyverbs' results (returned) and sysverbs', key by key and as a whole."""
    real, ours = out["pyverbs"], out["sysverbs"]
    for key in ("list", "list_stderr", "rdma", "rdma_stderr", "fork"):
        assert ours[key] == real[key], key
    return dict(real)


def _error(result: Any) -> dict[str, Any]:
    assert isinstance(result, dict) and "error" in result, result
    return dict(result["error"])


# -- every bundled fixture ----------------------------------------------------------------

FIXTURES = testing.fixture_names()


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_matches_pyverbs(otmp: Path, name: str) -> None:
    real = assert_same(probe(Path(fixture_tree(name).root), otmp / "mnt"))
    assert isinstance(real["list"], list)
    if name not in ("empty", "smi", "siw", "mana", "ionic", "usnic"):
        assert real["list"], f"pyverbs found no device in {name}"
        assert all(d["str"].startswith("Device ") for d in real["list"])


# -- generated hosts ------------------------------------------------------------------------


def _builder(b: HostBuilder) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        b.materialize(root)
        (root / "dev/infiniband").mkdir(parents=True, exist_ok=True)
    return build


def _no_verbs_class(root: Path) -> None:
    (root / "sys/class").mkdir(parents=True)
    (root / "dev/infiniband").mkdir(parents=True)


def _non_utf8_name(root: Path) -> None:
    trees.build(root, trees.host(trees.rdma_dev("uverbs0", b"mlx5_\xff"),
                                 trees.rdma_dev("uverbs1", "mlx5_1", pci="0000:08:00.0")))


#: rxe devices whose /dev node is /dev/null (``dev`` 1:3): librdmacm opens them, so
#: rdma_get_devices() lists them, by GUID (tests/test_rdmacm_oracle.py).
OPENABLE = {0: ("rxe_b", 0x30), 1: ("rxe_a", 0x10), 2: ("rxe_c", 0x20)}


def _openable(root: Path) -> None:
    devs = [trees.rxe_dev(f"uverbs{n}", name, guid=f"0000:0000:0000:{guid:04x}\n",
                          dev="1:3\n") for n, (name, guid) in OPENABLE.items()]
    trees.build(root, trees.host(*devs))
    for n in OPENABLE:
        node = root / f"dev/infiniband/uverbs{n}"
        node.unlink()
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))


def _node_types(real: dict[str, Any]) -> None:
    seen = {(d["node_type"], d["transport_type"], d["str"].split(", ")[1]) for d in real["list"]}
    assert seen == {(1, 0, "node type CA"), (2, 0, "node type Switch"),
                    (3, 0, "node type Router"), (4, 1, "node type RNIC"),
                    (5, 2, "node type USNIC"), (6, 3, "node type USNIC UDP"),
                    (7, 4, "node type Unknown"), (-1, -1, "node type Unknown")}


def _guids(real: dict[str, Any]) -> None:
    assert sorted(d["guid"] for d in real["list"]) == [
        0, 0, 0, 1, 0x1000200030004, 0x10e00001c88150, 2**64 - 1]
    assert "guid 10e00001c88150," in " ".join(d["str"] for d in real["list"])


def _fails(errno: int) -> Callable[[dict[str, Any]], None]:
    def check(real: dict[str, Any]) -> None:
        e = _error(real["list"])
        assert (e["type"], e["str"], e["error_code"], e["errno"]) == (
            "PyverbsRDMAError", "Failed to get devices list", -1, errno)
        assert e["is"] == ["PyverbsError", "PyverbsRDMAError"]
    return check


def _no_device(real: dict[str, Any]) -> None:
    assert real["list"] == []
    assert _error(real["rdma"])["str"] == "Failed to get device list. Errno: 19, No such device"


def _str_fails(real: dict[str, Any]) -> None:
    strs = sorted(str(d["str"]) for d in real["list"])
    assert strs[0].startswith("Device mlx5_1,") and "UnicodeDecodeError" in strs[1], strs


def _opened(real: dict[str, Any]) -> None:
    assert [bytes.fromhex(d["name"]) for d in real["rdma"]] == [b"rxe_a", b"rxe_c", b"rxe_b"]


def _one_device(real: dict[str, Any]) -> None:
    assert len(real["list"]) == 1, real["list"]


def _some_warning(text: str) -> Callable[[dict[str, Any]], None]:
    def check(real: dict[str, Any]) -> None:
        assert real["list"] and text in real["list_stderr"], real["list_stderr"]
    return check


CASES: dict[str, tuple[Callable[[Path], None], Callable[[dict[str, Any]], None]]] = {
    "node-types": (_builder(
        HostBuilder().mlx5().rxe(node_type=2).rxe(node_type=3).rxe(node_type=4)
        .rxe(node_type=5).rxe(node_type=6).rxe(node_type=7).rxe(node_type=0)
        .rxe(node_type=99).rxe(node_type=b"junk\n")), _node_types),
    "guids": (_builder(
        HostBuilder().rxe(node_guid=0).rxe(node_guid=1).rxe(node_guid=2**64 - 1)
        .rxe(node_guid=0x10e00001c88150).rxe(node_guid=b"1:2:3:4\n")
        .rxe(ib_attrs={"node_guid": None}).rxe(ib_attrs={"node_guid": b"zz\n"})), _guids),
    "no-provider": (_builder(HostBuilder().mlx5().pci_rdma(
        "foo", "foo0", vendor=0x1234, device=0x5678)),
        _some_warning("no userspace device-specific driver found for foo0")),
    "abi-rejected": (_builder(HostBuilder().mlx5(abi_version=0).rxe()),
                     _some_warning("does not support the kernel ABI")),
    "no-dev-node": (_builder(HostBuilder().rxe(dev_node=False).rxe()), _one_device),
    "class-abi-7": (_builder(HostBuilder(class_abi=7).mlx5()), _fails(38)),
    "class-abi-missing": (_builder(HostBuilder(class_abi=None).mlx5()), _fails(38)),
    "no-verbs-class": (_no_verbs_class, _fails(38)),
    "zero-devices": (_builder(HostBuilder()), _no_device),
    "non-utf8-name": (_non_utf8_name, _str_fails),
    "openable": (_openable, _opened),
}


@pytest.mark.parametrize("case", CASES)
def test_generated_host_matches_pyverbs(otmp: Path, case: str) -> None:
    build, check = CASES[case]
    root = otmp / "tree"
    root.mkdir()
    build(root)
    check(assert_same(probe(root, otmp / "mnt")))


def _padding(n: int) -> str:
    """A relative path of exactly ``n`` characters, no name in it longer than 49."""
    names = []
    while n > 49:
        names.append("p" * 48)
        n -= 49  # the name and its slash
    return "/".join([*names, "p" * n])


@pytest.mark.parametrize("length", [228, 240])
def test_a_long_sysfs_path_matches_pyverbs(otmp: Path, length: int) -> None:
    """228 bytes: the class paths fit, a uverbs entry's does not (no device); 240: the
    class path is 256 bytes or more (ENOMEM)."""
    mnt = otmp / "mnt"
    sub = _padding(length - len(f"{mnt}//sys"))
    sysfs = f"{mnt}/{sub}/sys"
    assert len(sysfs) == length
    root = otmp / "tree"
    HostBuilder().rxe().materialize(root / sub)
    (root / sub / "dev").rename(root / "dev")
    real = assert_same(probe(root, mnt, sysfs_path=sysfs))
    if length == 228:
        assert real["list"] == []
    else:
        _fails(12)(real)


# -- the modules ----------------------------------------------------------------------------

PROVIDED = {
    "device": {"Device", "get_device_list", "rdma_get_devices", "translate_node_type",
               "translate_transport_type", "guid_to_hex", "PyverbsError",
               "PyverbsRDMAError", "PyverbsUserError"},
    "pyverbs_error": {"PyverbsError", "PyverbsRDMAError", "PyverbsUserError"},
    "fork": {"fork_init", "is_fork_initialized", "PyverbsRDMAError"},
}


def test_modules_names_and_helpers_match_pyverbs(otmp: Path) -> None:
    """Every module and public name of the installed pyverbs is either answered by
    sysverbs.compat.pyverbs or raises OutOfScopeError; the helpers, the enums, the
    exceptions made by hand and a Device made by hand are pyverbs' own."""
    out = probe(Path(fixture_tree("mlx4").root), otmp / "mnt", layout=True)
    assert_same(out)
    real, ours = out["pyverbs"]["layout"], out["sysverbs"]["layout"]
    facts = out["facts"]
    assert {"device", "pyverbs_error", "pd", "qp", "cq", "mr", "addr"} <= set(facts["modules"])
    assert {"Context", "Device", "get_device_list"} <= set(facts["names"]["device"])
    for key in ("node_types", "transport_types", "guids", "enums", "enum_constants",
                "made", "device", "fork", "fork_type"):
        assert ours[key] == real[key], key
    kinds = {m: k for m, k in ours["modules"].items()}
    assert {m for m, k in kinds.items() if k == "provided"} == {
        "device", "pyverbs_error", "enums", "fork"}
    assert set(kinds.values()) == {"provided", "out_of_scope"}
    for module, names in ours["names"].items():
        assert set(names.values()) <= {"provided", "out_of_scope"}, module
        provided = {n for n, k in names.items() if k == "provided"}
        if module == "enums":
            assert provided == {n for n in names if n.startswith(
                ("IBV_NODE_", "IBV_TRANSPORT_", "IBV_FORK_"))} | {
                "ibv_node_type", "ibv_transport_type", "ibv_fork_status"}
        else:
            assert provided == PROVIDED[module], module

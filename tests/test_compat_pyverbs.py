"""sysverbs.compat.pyverbs without the real pyverbs (tests/test_pyverbs_oracle.py compares
it with the real one): what is out of scope says so, a Device is read-only, the
exceptions are also sysverbs', and ``import sysverbs`` does not load any of it."""

from __future__ import annotations

import errno
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from sysverbs.compat.pyverbs import _scope, device, enums, fork, pyverbs_error
from sysverbs.ground import errors
from sysverbs.testing import HostBuilder

ROOT = Path(__file__).resolve().parents[1]


def test_import_sysverbs_does_not_load_the_compat_package() -> None:
    code = ("import sys; import sysverbs; dir(sysverbs); sysverbs.get_device_list; "
            "print([m for m in sys.modules if m.startswith('sysverbs.compat')])")
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, "
                          f"{str(ROOT)!r}); {code}"], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", sorted(device.OUT_OF_SCOPE))
def test_device_names_for_an_opened_device_are_out_of_scope(name: str) -> None:
    with pytest.raises(errors.OutOfScopeError) as e:
        exec(f"from sysverbs.compat.pyverbs.device import {name}", {})
    text = str(e.value)
    assert text.startswith(f"sysverbs.compat.pyverbs.device.{name} (pyverbs.device.{name}) "
                           "is out of scope: sysverbs discovers RDMA devices, it does not "
                           "open them")
    for offer in ("sysverbs.device_attributes(name)", "sysverbs.port_attributes(",
                  "sysverbs.open_device(dev)", "sysverbs devinfo", "python3-pyverbs"):
        assert offer in text
    assert isinstance(e.value, ImportError) and isinstance(e.value, errors.SysverbsError)
    assert e.value.name == f"sysverbs.compat.pyverbs.device.{name}"
    with pytest.raises(errors.OutOfScopeError):
        getattr(device, name)


@pytest.mark.parametrize("module", sorted(_scope.MODULES))
def test_modules_for_an_opened_device_are_out_of_scope(module: str) -> None:
    name = f"sysverbs.compat.pyverbs.{module}"
    with pytest.raises(errors.OutOfScopeError, match=rf"^{name} \(pyverbs\.{module}\) is out "):
        importlib.import_module(name)
    assert name not in sys.modules


def test_what_is_neither_provided_nor_pyverbs_is_missing_as_usual() -> None:
    with pytest.raises(errors.OutOfScopeError):
        exec("import sysverbs.compat.pyverbs.providers.mlx5.mlx5dv", {})
    with pytest.raises(ModuleNotFoundError) as e:
        importlib.import_module("sysverbs.compat.pyverbs.nosuchmodule")
    assert not isinstance(e.value, errors.OutOfScopeError)
    assert not hasattr(device, "no_such_name") and not hasattr(enums, "no_such_name")
    with pytest.raises(ImportError, match="cannot import name 'no_such_name'"):
        exec("from sysverbs.compat.pyverbs.device import no_such_name", {})
    with pytest.raises(errors.OutOfScopeError):
        exec("from sysverbs.compat.pyverbs.enums import IBV_ACCESS_LOCAL_WRITE", {})
    with pytest.raises(errors.OutOfScopeError):
        enums.ibv_qp_state  # noqa: B018


def test_the_finder_is_installed_once() -> None:
    importlib.reload(importlib.import_module("sysverbs.compat.pyverbs"))
    assert sum(isinstance(f, _scope.OutOfScopeFinder) for f in sys.meta_path) == 1


def test_a_device_is_read_only() -> None:
    dev = device.Device(b"mlx4_0", 0x10e00001c88150, 1, 0, -1)
    for name in ("name", "guid", "node_type", "transport_type", "index", "_name", "other"):
        with pytest.raises(AttributeError):
            setattr(dev, name, 1)
        with pytest.raises(AttributeError):
            delattr(dev, name)
    with pytest.raises(AttributeError, match="^property 'guid' of 'Device' object has no setter$"):
        dev.guid = 2  # type: ignore[misc]
    assert (dev.name, dev.guid, str(dev)) == (
        b"mlx4_0", 4749890261909840,
        "Device mlx4_0, node type CA, transport type IB, guid 10e00001c88150, index -1")


def test_the_exceptions_are_pyverbs_and_sysverbs_ones() -> None:
    assert pyverbs_error.PyverbsRDMAError is errors.PyverbsRDMAError is device.PyverbsRDMAError
    e = errors.PyverbsRDMAError("Failed to get devices list", errno=errno.ENOSYS)
    assert (str(e), e.args, e.error_code, e.errno) == (
        "Failed to get devices list", ("Failed to get devices list",), -1, errno.ENOSYS)
    assert isinstance(e, OSError) and isinstance(e, errors.PyverbsError)
    assert isinstance(e, errors.SysverbsError)
    e = errors.PyverbsRDMAError("Failed to get device list", errno.ENODEV)
    assert (str(e), e.error_code, e.errno) == (
        "Failed to get device list. Errno: 19, No such device", 19, 19)
    assert errors.PyverbsRDMAError("x").errno is None
    user = errors.PyverbsUserError("Device name must be provided")
    assert isinstance(user, errors.UsageError) and isinstance(user, ValueError)
    assert str(user) == "Device name must be provided"
    assert str(errors.PyverbsError("m", 5)) == "m. Errno: 5, Input/output error"


def test_get_device_list_takes_the_listing_options_and_fails_as_pyverbs(tmp_path: Path) -> None:
    host = HostBuilder().mlx5().rxe(node_type=4).materialize(tmp_path)
    got = sorted(str(d) for d in device.get_device_list(**host.options()))
    assert got == [
        "Device mlx5_0, node type CA, transport type IB, guid b8599f0300a20001, index -1",
        "Device rxe0, node type RNIC, transport type IWARP, guid 505400fffe123456, index -1"]
    long = str(tmp_path / ("p" * 200) / ("q" * 60))
    with pytest.raises(errors.PyverbsRDMAError) as e:
        device.get_device_list(source="sysfs", sysfs_path=long)
    assert (str(e.value), e.value.error_code, e.value.errno) == (
        "Failed to get devices list", -1, errno.ENOMEM)
    with pytest.raises(errors.UsageError) as usage:
        device.get_device_list(source="nowhere")  # type: ignore[typeddict-item]
    assert not isinstance(usage.value, errors.PyverbsError)
    with pytest.raises(TypeError):
        device.get_device_list(1)  # type: ignore[call-arg]


def test_rdma_get_devices_fails_with_the_errno_in_its_text(tmp_path: Path) -> None:
    host = HostBuilder().materialize(tmp_path)
    with pytest.raises(errors.PyverbsRDMAError) as e:
        device.rdma_get_devices(**host.options())
    assert (str(e.value), e.value.error_code, e.value.errno) == (
        "Failed to get device list. Errno: 19, No such device", 19, 19)


def test_fork_and_enums() -> None:
    assert fork.is_fork_initialized() in (0, 1, 2)
    assert type(fork.is_fork_initialized()) is int
    assert enums.IBV_NODE_CA == 1 and enums.ibv_transport_type(1) is enums.IBV_TRANSPORT_IWARP
    assert [m.value for m in enums.ibv_node_type] == [-1, 1, 2, 3, 4, 5, 6, 7]

"""The Python API around the engine: lifetime, errors, warnings, options, bad input.

The list contents themselves are proven against libibverbs in test_oracle_*.py;
these tests cover what is Python-specific or has no C counterpart to run.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import threading
import warnings
from pathlib import Path

import pytest

import sysverbs
from sysverbs.ground import sysfs_read
from tests import trees
from tests.trees import Dir, Link, host, rdma_dev, rxe_dev


def make(tmp: Path, *devs: trees.Tree, **kw: object) -> dict[str, object]:
    trees.build(tmp, host(*devs, **kw))  # type: ignore[arg-type]
    return {
        "source": "sysfs",
        "sysfs_path": tmp / "sys",
        "dev_dir": tmp / "dev/infiniband",
        "providers": "builtin",
    }


def test_returns_a_plain_list_with_libibverbs_fields(tmp_path: Path) -> None:
    opts = make(tmp_path, rdma_dev("uverbs0", "mlx5_0"), rxe_dev("uverbs1", "rxe0"))
    devs = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    assert isinstance(devs, list) and len(devs) == 2
    by_name = {d.name: d for d in devs}
    mlx = by_name["mlx5_0"]
    assert mlx.provider == "mlx5" and by_name["rxe0"].provider == "rxe"
    assert mlx.node_type is sysverbs.NodeType.CA and mlx.transport_type is sysverbs.TransportType.IB
    assert mlx.dev_path == f"{tmp_path}/sys/class/infiniband_verbs/uverbs0"
    assert mlx.ibdev_path == f"{tmp_path}/sys/class/infiniband/mlx5_0"
    assert f"{sysverbs.get_device_guid(mlx):016x}" == "0c42a10300a51c30"
    assert sysverbs.get_device_index(mlx) == -1
    assert (mlx.guid, mlx.index) == (sysverbs.get_device_guid(mlx), -1)
    assert sysverbs.get_device_name(mlx) == "mlx5_0"
    sysverbs.free_device_list(devs)


def test_freed_devices_are_invalid_unless_opened(tmp_path: Path) -> None:
    opts = make(
        tmp_path,
        rxe_dev("uverbs0", "rxe0", dev="1:3\n", dev_node=False),
        rxe_dev("uverbs1", "rxe1"),
    )
    os.mknod(tmp_path / "dev/infiniband/uverbs0", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    devs = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    opened = next(d for d in devs if d.name == "rxe0")
    other = next(d for d in devs if d.name == "rxe1")
    ctx = sysverbs.open_device(opened)
    sysverbs.free_device_list(devs)
    assert opened.name == "rxe0" and ctx.device is opened and not ctx.closed
    with pytest.raises(sysverbs.DeviceFreedError, match="rxe1"):
        _ = other.name
    with pytest.raises(sysverbs.DeviceFreedError):
        sysverbs.get_device_guid(other)
    with pytest.raises(ValueError):
        sysverbs.free_device_list(devs)
    # survivors come back as the same objects, valid again
    again = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    assert {id(d) for d in again} == {id(opened), id(other)}
    assert other.name == "rxe1"
    sysverbs.close_device(ctx)
    assert ctx.closed and opened.name == "rxe0"  # still held by `again`
    sysverbs.free_device_list(again)
    with pytest.raises(sysverbs.DeviceFreedError):
        _ = opened.name


def test_context_manager_and_open_errors(tmp_path: Path) -> None:
    opts = make(tmp_path, rxe_dev("uverbs0", "rxe0"))
    devs = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    with pytest.raises(OSError) as info:
        sysverbs.open_device(devs[0])  # a regular file, not the char device
    assert info.value.errno == errno.ENOENT


def test_free_takes_a_returned_list_or_a_plain_list_of_held_devices(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        sysverbs.free_device_list(["rxe0"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        sysverbs.free_device_list(None)  # type: ignore[arg-type]
    sysverbs.free_device_list([])  # nothing to release
    opts = make(tmp_path, rxe_dev("uverbs0", "rxe0"), rxe_dev("uverbs1", "rxe1"))
    devs = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    first, second = sorted(devs, key=lambda d: d.name)
    sysverbs.free_device_list([first])  # a plain list: one reference of each device
    assert not first.valid and second.valid
    with pytest.raises(sysverbs.UsageError):
        sysverbs.free_device_list([first])  # nothing holds it any more
    sysverbs.free_device_list(devs)
    assert not second.valid and not first.valid


def test_errors_are_oserrors_with_libibverbs_errno(tmp_path: Path) -> None:
    with pytest.raises(OSError) as info:
        sysverbs.get_device_list(source="sysfs", sysfs_path=tmp_path / "missing")
    assert info.value.errno == errno.ENOSYS
    assert "class/infiniband_verbs" in str(info.value)
    with pytest.raises(OSError) as info:
        sysverbs.get_device_list(sysfs_path="/" + "x" * 240)
    assert info.value.errno == errno.ENOMEM


def test_messages_go_to_stderr_and_to_warnings(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IBV_SHOW_WARNINGS", "0")
    opts = make(
        tmp_path,
        rdma_dev("uverbs0", "siw0", modalias=None),
        rdma_dev("uverbs1", "mlx5_9", abi="7\n", pci="0000:08:00.0"),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", sysverbs.SysverbsWarning)
        assert sysverbs.get_device_list(**opts) == []  # type: ignore[arg-type]
    err = capfd.readouterr().err
    assert "libibverbs: Warning: no userspace device-specific driver found for siw0\n" in err
    assert "Driver mlx5 does not support the kernel ABI of 7 (supports 1 to 1)" in err
    cats = {type(w.message) for w in caught}
    assert cats == {sysverbs.NoDriverWarning, sysverbs.AbiWarning}
    assert all(issubclass(c, sysverbs.SysverbsWarning) for c in cats)


def test_messages_are_silent_as_warnings_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("IBV_SHOW_WARNINGS", "1")
    opts = make(tmp_path, rdma_dev("uverbs0", "siw0", modalias=None))
    sysverbs.set_stderr(None)
    try:
        sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    finally:
        sysverbs.set_stderr(__import__("sys").stderr)
    assert capfd.readouterr().err == ""


def test_effective_options_defaults(tmp_path: Path) -> None:
    o = sysverbs.effective_options(sysfs_path=str(tmp_path) + "///", config_dir=tmp_path / "no")
    assert o.sysfs_path == str(tmp_path)
    assert o.providers == "builtin" and "no config dir" in o.providers_reason
    assert o.dev_dir == "/dev/infiniband"
    o = sysverbs.effective_options(rdma_core="latest")
    assert o.rdma_core >= 61 and o.rdma_core_reason == "given"
    assert sysverbs.effective_options(rdma_core="v44.0").rdma_core == 44


def test_default_release_is_the_installed_libibverbs() -> None:
    try:
        version = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", "libibverbs1"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("libibverbs1 is not installed as a Debian package")
    assert sysverbs.effective_options().rdma_core == int(version.split(".")[0])


@pytest.mark.parametrize(
    "kw",
    [
        {"source": "nope"},
        {"providers": "all"},
        {"rdma_core": "x"},
        {"rdma_core": 3},
        {"rdma_core": 999},
        {"sysfs_path": "a\0b"},
    ],
)
def test_bad_options(kw: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        sysverbs.get_device_list(**kw)  # type: ignore[arg-type]


def test_release_tables_differ(tmp_path: Path) -> None:
    efa3 = "pci:v00001D0Fd0000EFA3sv00000000sd00000000bc02sc00i00\n"
    opts = make(tmp_path, rdma_dev("uverbs0", "efa_0", modalias=efa3))
    assert sysverbs.get_device_list(**opts, rdma_core="44") == []  # type: ignore[arg-type]
    latest = sysverbs.get_device_list(**opts, rdma_core="latest")  # type: ignore[arg-type]
    assert [d.provider for d in latest] == ["efa"]


# -- bad input: a list or an OSError, never another exception, never a hang -------------------


def test_hostile_tree_never_raises_or_hangs(tmp_path: Path) -> None:
    tree = host(
        rxe_dev("uverbs0", "rxe0"),
        extra={
            "sys/class/infiniband_verbs/loop": Link("loop"),
            "sys/class/infiniband_verbs/uverbs1": Dir(),
            "sys/class/infiniband_verbs/uverbs1/ibdev": Link("/dev/zero"),
            "sys/class/infiniband_verbs/uverbs2": Dir(),
            "sys/class/infiniband_verbs/uverbs2/ibdev": "../../../../../../etc\n",
            "sys/class/infiniband_verbs/uverbs2/dev": "1:1\n",
            "dev/infiniband/uverbs2": b"",
            "sys/class/infiniband_verbs/uverbs3": Dir(),
            "sys/class/infiniband_verbs/uverbs3/ibdev": b"\xff\xfe\x00\n",
        },
    )
    trees.build(tmp_path, tree)
    for fifo in ("sys/class/infiniband_verbs/uverbs3/dev", "sys/class/infiniband/rxe0/node_type"):
        p = tmp_path / fifo
        if p.exists():
            p.unlink()
        os.mkfifo(p)
    opts = {
        "source": "sysfs",
        "sysfs_path": tmp_path / "sys",
        "dev_dir": tmp_path / "dev/infiniband",
        "providers": "builtin",
    }
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(sysverbs.get_device_list(**opts)))  # type: ignore[arg-type]
    t.start()
    t.join(20)
    assert not t.is_alive(), "get_device_list hung on a FIFO"
    assert [d.name for d in result[0]] == ["rxe0"]  # type: ignore[attr-defined]


def test_reads_never_exceed_libibverbs_buffers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    real_read = os.read

    def spy(fd: int, n: int) -> bytes:
        sizes.append(n)
        return real_read(fd, n)

    opts = make(tmp_path, rdma_dev("uverbs0", "mlx5_0"), rxe_dev("uverbs1", "r" * 200))
    monkeypatch.setattr(sysfs_read.os, "read", spy)
    devs = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    for d in devs:
        sysverbs.get_device_guid(d)
    assert sizes and max(sizes) <= 512
    assert set(sizes) <= {8, 24, 32, 64, 512}


def test_dev_numbers_over_int_max_never_raise(tmp_path: Path) -> None:
    """``-1:5`` in ``dev`` is 4294967295:5 (scanf %u); glibc's makedev takes it, and so
    must every path that compares device numbers (os.makedev would raise OverflowError)."""
    opts = make(tmp_path, rxe_dev("uverbs0", "rxe0", dev="-1:5\n"))
    devs = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    assert devs[0].cdev == (4294967295, 5)
    with pytest.raises(OSError):
        sysverbs.open_device(devs[0])
    (diag,) = sysverbs.diagnose(**opts)  # type: ignore[arg-type]
    assert not diag.usable
    (uverbs,) = [c for c in sysverbs.device_location(devs[0]).char_devices if c.kind == "uverbs"]
    assert uverbs.node_ok is False

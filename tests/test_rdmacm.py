"""sysverbs.devices.rdmacm without the oracle: the API's contract and the state it keeps.

(tests/test_rdmacm_oracle.py compares the same behaviour with the real librdmacm.)
"""

from __future__ import annotations

import doctest
import errno
import importlib
import os
import stat
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sysverbs
from sysverbs.devices.rdmacm import ContextList, rdma_cm_abi, rdma_free_devices, rdma_get_devices
from tests import trees
from tests.fuzz.profiles import fuzz_settings

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")


def test_doctests() -> None:
    result = doctest.testmod(importlib.import_module('sysverbs.devices.rdmacm'))
    assert result.attempted and result.failed == 0, 'sysverbs.devices.rdmacm'


def _guid(n: Optional[int]) -> Optional[str]:
    if n is None:
        return None
    h = f"{n:016x}"
    return ":".join(h[i : i + 4] for i in range(0, 16, 4)) + "\n"


def build(
    root: Path,
    guids: dict[str, Optional[int]],
    openable: bool = True,
    extra: Optional[trees.Tree] = None,
) -> dict[str, object]:
    devs = [
        trees.rxe_dev(f"uverbs{i}", name, guid=_guid(g), dev="1:3\n")
        for i, (name, g) in enumerate(guids.items())
    ]
    trees.build(root, trees.host(*devs, extra=extra))
    if openable:
        for i in range(len(guids)):
            node = root / f"dev/infiniband/uverbs{i}"
            node.unlink()
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return {
        "sysfs_path": root / "sys",
        "dev_dir": root / "dev/infiniband",
        "providers": "builtin",
        "rdma_core": "44",
    }


@needs_root
def test_contexts_open_while_listed_and_closed_after_vanishing(tmp_path: Path) -> None:
    opts = build(tmp_path, {"rxe_a": 2, "rxe_b": 1})
    first = rdma_get_devices(**opts)  # type: ignore[arg-type]
    assert isinstance(first, ContextList) and isinstance(first, list)
    assert [c.device.name for c in first] == ["rxe_b", "rxe_a"]
    assert all(not c.closed and os.fstat(c.fileno()) for c in first)
    rdma_free_devices(first)
    second = rdma_get_devices(**opts)  # type: ignore[arg-type]
    assert [id(c) for c in second] == [id(c) for c in first]  # kept open across calls
    assert not first[0].closed
    # rxe_b vanishes while `second` holds it: it stays open, but is no longer listed
    os.unlink(tmp_path / "sys/class/infiniband_verbs/uverbs1")
    third = rdma_get_devices(**opts)  # type: ignore[arg-type]
    assert [c.device.name for c in third] == ["rxe_a"]
    assert not first[0].closed
    rdma_free_devices(second)
    assert first[0].closed  # the last list holding it is gone: closed
    assert not first[1].closed
    rdma_free_devices(third)
    assert not first[1].closed  # still listed: librdmacm keeps it open


@needs_root
def test_unheld_vanished_device_is_closed_at_once(tmp_path: Path) -> None:
    opts = build(tmp_path, {"rxe_a": 2, "rxe_b": 1})
    got = rdma_get_devices(**opts)  # type: ignore[arg-type]
    assert [c.device.name for c in got] == ["rxe_b", "rxe_a"]
    rdma_free_devices(got)
    os.unlink(tmp_path / "sys/class/infiniband_verbs/uverbs0")
    again = rdma_get_devices(**opts)  # type: ignore[arg-type]
    assert [c.device.name for c in again] == ["rxe_b"]
    assert got[1].closed and not got[0].closed
    with pytest.raises(sysverbs.DeviceFreedError):  # nothing holds rxe_a any more
        _ = got[1].device.name


def test_free_contract(tmp_path: Path) -> None:
    opts = build(tmp_path, {"rxe_a": 2}, openable=False)
    got = rdma_get_devices(**opts)  # type: ignore[arg-type]
    assert got == []
    rdma_free_devices(got)
    with pytest.raises(ValueError):
        rdma_free_devices(got)
    with pytest.raises(TypeError):
        rdma_free_devices([])


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(OSError) as e:
        rdma_get_devices(sysfs_path=tmp_path / "missing", providers="builtin")
    assert e.value.errno == errno.ENODEV
    opts = build(
        tmp_path / "abi", {"rxe_a": 1}, extra={"sys/class/misc/rdma_cm/abi_version": "5\n"}
    )
    with pytest.raises(OSError) as e:
        rdma_get_devices(**opts)  # type: ignore[arg-type]
    assert e.value.errno == errno.EPERM
    with pytest.raises(ValueError):
        rdma_get_devices(providers="bogus")


@pytest.mark.parametrize(
    "misc, ucma, expect",
    [
        (None, None, (4, None)),
        ("3\n", None, (3, "misc")),
        ("4junk", "3\n", (4, "misc")),
        ("12345678", "3\n", (3, "ucma")),
        ("", None, (0, "misc")),
        ("99999999999", None, None),
    ],
)
def test_rdma_cm_abi(
    tmp_path: Path,
    misc: Optional[str],
    ucma: Optional[str],
    expect: Optional[tuple[int, Optional[str]]],
) -> None:
    if misc is not None:
        (tmp_path / "class/misc/rdma_cm").mkdir(parents=True)
        (tmp_path / "class/misc/rdma_cm/abi_version").write_text(misc)
    if ucma is not None:
        (tmp_path / "class/infiniband_ucma").mkdir(parents=True)
        (tmp_path / "class/infiniband_ucma/abi_version").write_text(ucma)
    abi, source = rdma_cm_abi(tmp_path)
    if expect is None:  # 11 bytes: unreadable with an 8-byte buffer -> assume 4
        assert (abi, source) == (4, None)
        return
    assert abi == expect[0]
    assert (source is None) == (expect[1] is None)
    if expect[1] == "misc":
        assert source is not None and source.endswith("class/misc/rdma_cm/abi_version")


@needs_root
@fuzz_settings(ci=25, deep=250)
@given(
    st.lists(st.one_of(st.none(), st.integers(0, 6), st.just(2**64 - 1)), min_size=1, max_size=7)
)
def test_first_call_is_a_stable_sort_of_the_ibv_list(
    tmp_path_factory: pytest.TempPathFactory, guids: list[Optional[int]]
) -> None:
    """Spec 6.3's model: the first rdma_get_devices is libibverbs' list stably sorted by
    GUID (a missing node_guid is 0)."""
    root = tmp_path_factory.mktemp("sort")
    opts = build(root, {f"rxe_{i}": g for i, g in enumerate(guids)})
    ibv = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    expect = [d.name for d in sorted(ibv, key=sysverbs.get_device_guid)]
    sysverbs.free_device_list(ibv)
    got = rdma_get_devices(**opts)  # type: ignore[arg-type]
    assert [c.device.name for c in got] == expect
    rdma_free_devices(got)


@pytest.mark.parametrize(
    "kind, expect",
    [("dir", (4, False)), ("loop", (4, False)), ("fifo", (0, True)), ("dangling", (4, False))],
)
def test_rdma_cm_abi_broken_files(tmp_path: Path, kind: str, expect: tuple[int, bool]) -> None:
    """Unreadable files fall through to the next one (and to ABI 4); a FIFO reads as
    empty (librdmacm would block on it), which is ABI 0."""
    d = tmp_path / "class/misc/rdma_cm"
    d.mkdir(parents=True)
    f = d / "abi_version"
    if kind == "dir":
        f.mkdir()
    elif kind == "loop":
        os.symlink("abi_version", f)
    elif kind == "fifo":
        os.mkfifo(f)
    else:
        os.symlink("nowhere", f)
    abi, source = rdma_cm_abi(tmp_path)
    assert (abi, source is not None) == expect

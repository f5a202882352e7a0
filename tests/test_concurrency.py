"""Threads listing devices while another thread adds, removes and touches devices.

libibverbs serialises ``ibv_get_device_list`` with a mutex; sysverbs must be as
safe: while the tree changes under it, every call returns a consistent list or
raises ``OSError`` (never another exception), and every returned device can be
used (name, GUID, index, ``open_device``) until its list is freed.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import sysverbs

THREADS = 4
DEVICES = 12
# The run ends once the mutator has made CHANGES changes and the listers LISTS lists
# between them, however long that takes (a loaded machine only takes longer): no
# window of time, and no number of calls expected within one.
CHANGES = 200
LISTS = 400


@dataclass(frozen=True)
class Spec:
    uverbs: str
    name: str
    node_type: int  # as written to node_type
    guid: int
    provider: str


def spec(i: int) -> Spec:
    if i % 2:
        return Spec(f"uverbs{i}", f"rxe{i}", 1, 0x0002C90300000000 + i, "rxe")
    return Spec(f"uverbs{i}", f"mlx5_{i}", 4, 0x0C42A10300000000 + i, "mlx5")


def write_device(root: Path, s: Spec) -> None:
    """Create device ``s`` atomically: build it aside, rename it in, then link it."""
    sysfs = root / "sys"
    stage = sysfs / "devices" / f".stage-{s.name}"
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "uv").mkdir(parents=True)
    (stage / "ib").mkdir()
    (stage / "uv/ibdev").write_text(f"{s.name}\n")
    (stage / "uv/dev").write_text(f"231:{s.uverbs[6:]}\n")
    (stage / "uv/abi_version").write_text("1\n" if s.provider == "mlx5" else "2\n")
    (stage / "ib/node_type").write_text(f"{s.node_type}\n")
    g = s.guid
    (stage / "ib/node_guid").write_text(
        f"{g >> 48:04x}:{(g >> 32) & 0xFFFF:04x}:{(g >> 16) & 0xFFFF:04x}:{g & 0xFFFF:04x}\n"
    )
    if s.provider == "mlx5":
        (stage / "modalias").write_text("pci:v000015B3d0000101Bsv000015B3sd00000007bc02sc07i00\n")
        os.symlink("..", stage / "ib/device")
    final = sysfs / "devices" / s.name
    os.rename(stage, final)
    os.symlink(f"../../devices/{s.name}/ib", sysfs / "class/infiniband" / s.name)
    (root / "dev/infiniband" / s.uverbs).write_bytes(b"")
    os.symlink(f"../../devices/{s.name}/uv", sysfs / "class/infiniband_verbs" / s.uverbs)


def remove_device(root: Path, s: Spec, rng: random.Random) -> None:
    """Remove ``s`` in a random order of its parts (links, node, directory)."""
    sysfs = root / "sys"
    parts = [
        sysfs / "class/infiniband_verbs" / s.uverbs,
        sysfs / "class/infiniband" / s.name,
        root / "dev/infiniband" / s.uverbs,
        sysfs / "devices" / s.name,
    ]
    rng.shuffle(parts)
    for p in parts:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


def make_host(root: Path) -> list[Spec]:
    for d in (
        "sys/class/infiniband_verbs",
        "sys/class/infiniband",
        "sys/devices",
        "dev/infiniband",
    ):
        (root / d).mkdir(parents=True)
    (root / "sys/class/infiniband_verbs/abi_version").write_text("6\n")
    return [spec(i) for i in range(DEVICES)]


def check_list(root: Path, devs: list[sysverbs.Device], specs: dict[str, Spec]) -> int:
    """A consistent list: distinct objects and uverbs names, every field as written."""
    assert len({id(d) for d in devs}) == len(devs)
    assert len({d.dev_name for d in devs}) == len(devs)
    sysfs = f"{root}/sys"
    for d in devs:
        s = specs[d.dev_name]
        assert d.name == s.name
        assert d.provider == s.provider
        assert d.dev_path == f"{sysfs}/class/infiniband_verbs/{s.uverbs}"
        assert d.ibdev_path == f"{sysfs}/class/infiniband/{s.name}"
        # node_type and the GUID are read through ibdev_path, which a concurrent
        # removal may take away between the scan's stat and its read (the same
        # race exists on a real sysfs): then UNKNOWN and 0, as libibverbs gives.
        assert d.node_type in (sysverbs.NodeType(s.node_type), sysverbs.NodeType.UNKNOWN)
        assert (
            d.transport_type
            == {
                1: sysverbs.TransportType.IB,
                4: sysverbs.TransportType.IWARP,
                -1: sysverbs.TransportType.UNKNOWN,
            }[int(d.node_type)]
        )
        assert sysverbs.get_device_guid(d) in (s.guid, 0)
        assert sysverbs.get_device_index(d) == -1
        assert sysverbs.get_device_name(d) == s.name
        try:
            ctx = sysverbs.open_device(d)
        except OSError:
            pass  # the /dev node is a regular file (or already gone): ENOENT
        else:
            ctx.close()
    return len(devs)


def test_listing_while_devices_come_and_go(tmp_path: Path) -> None:
    specs = make_host(tmp_path)
    by_uverbs = {s.uverbs: s for s in specs}
    present: set[str] = set()
    for s in specs[: DEVICES // 2]:
        write_device(tmp_path, s)
        present.add(s.uverbs)
    opts = {
        "sysfs_path": tmp_path / "sys",
        "dev_dir": tmp_path / "dev/infiniband",
        "config_dir": tmp_path / "no-config",
        "providers": "builtin",
        "rdma_core": "44",
    }
    stop = threading.Event()
    failures: list[BaseException] = []
    stats = {"lists": 0, "devices": 0, "oserrors": 0, "changes": 0, "complete": 0}
    lock = threading.Lock()

    def mutator() -> None:
        rng = random.Random(1234)
        try:
            while not stop.is_set():
                s = rng.choice(specs)
                if s.uverbs in present:
                    if rng.random() < 0.3:  # touch: the device is re-created (new object)
                        t = time.time() + rng.randint(1, 100)
                        os.utime(tmp_path / "sys/devices" / s.name / "ib", (t, t))
                    else:
                        remove_device(tmp_path, s, rng)
                        present.discard(s.uverbs)
                else:
                    write_device(tmp_path, s)
                    present.add(s.uverbs)
                stats["changes"] += 1
                if stats["changes"] >= CHANGES and stats["lists"] >= LISTS:
                    stop.set()
        except BaseException as e:  # pragma: no cover - reported below
            failures.append(e)
            stop.set()

    def lister(seed: int) -> None:
        rng = random.Random(seed)
        held: list[sysverbs.DeviceList] = []
        try:
            while not stop.is_set():
                try:
                    devs = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
                except OSError as e:
                    assert e.errno in (errno.ENOSYS, errno.ENOMEM)
                    with lock:
                        stats["oserrors"] += 1
                    continue
                n = check_list(tmp_path, devs, by_uverbs)
                with lock:
                    stats["lists"] += 1
                    stats["devices"] += n
                    if all(d.node_type != sysverbs.NodeType.UNKNOWN for d in devs):
                        stats["complete"] += 1
                held.append(devs)
                if len(held) > 3 or rng.random() < 0.5:
                    old = held.pop(0)
                    check_list(tmp_path, old, by_uverbs)  # still usable until freed
                    sysverbs.free_device_list(old)
            for devs in held:
                sysverbs.free_device_list(devs)
        except BaseException as e:
            failures.append(e)
            stop.set()

    threads = [threading.Thread(target=lister, args=(i,)) for i in range(THREADS)]
    threads.append(threading.Thread(target=mutator))
    for t in threads:
        t.start()
    finished = stop.wait(240)  # generous: only a thread that hangs gets near it
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    if failures:
        raise failures[0]
    assert finished, stats
    assert stats["lists"] >= LISTS and stats["changes"] >= CHANGES and stats["devices"] > 0
    assert stats["complete"] > 0
    # The tree is quiet again: a last call lists exactly the devices present.
    final = sysverbs.get_device_list(**opts)  # type: ignore[arg-type]
    assert sorted(d.dev_name for d in final) == sorted(present)
    check_list(tmp_path, final, by_uverbs)
    assert all(d.node_type != sysverbs.NodeType.UNKNOWN for d in final)
    sysverbs.free_device_list(final)


def test_concurrent_first_calls_share_one_list(tmp_path: Path) -> None:
    """Many threads making the first call of a new set of options at once get the same
    Device objects (one process-wide list), as with libibverbs' global list."""
    specs = make_host(tmp_path)
    for s in specs:
        write_device(tmp_path, s)
    opts = {
        "sysfs_path": tmp_path / "sys",
        "dev_dir": tmp_path / "dev/infiniband",
        "providers": "builtin",
        "rdma_core": "44",
    }
    barrier = threading.Barrier(8)
    results: list[list[sysverbs.Device]] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            barrier.wait()
            results.append(sysverbs.get_device_list(**opts))  # type: ignore[arg-type]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    first = results[0]
    assert len(first) == DEVICES
    for r in results[1:]:
        assert [id(d) for d in r] == [id(d) for d in first]

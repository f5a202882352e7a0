"""Discovery reads each sysfs file a bounded number of times per device (issue 42):
every command's reads on an SR-IOV host of 4N devices are at most 4.5 times those on N.

Reads, not time: each ``open`` (``os.open``, ``open``), ``os.listdir`` and
``os.scandir`` of a path inside the host's tree is counted through the interpreter's
audit events ('open', 'os.listdir', 'os.scandir': every file sysverbs reads and every
directory it lists goes through one of them), while the command runs in this process
through ``sysverbs.cli.main``.  Before the fix, ``device_location``'s char devices read
every uverbs and umad entry's ``ibdev`` for each device: ``netdev``, ``env``,
``metrics`` and ``nfd`` read O(N*N) files (about 6 times more on 4N than on N here).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.scale_hosts import sriov_host

N = 32  # two cards of 16 functions; 4N: eight
PER_PF = 16
#: Reads a device may cost a command, at most (the most a command costs, metrics and
#: nfd, is 121 on 4N; before the fix netdev, env, metrics and nfd cost 300 to 380).
PER_DEVICE = 200

COMMANDS = ["devices", "devinfo", "netdev", "doctor", "topo", "env", "nccl check",
            "metrics", "nfd"]

_counting: list[Optional[tuple[tuple[str, ...], tuple[bytes, ...], list[int]]]] = [None]
#: Every path counted, while a test wants them.
_paths: list[Optional[list[str]]] = [None]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    state = _counting[0]
    if state is None or event not in ("open", "os.listdir", "os.scandir") or not args:
        return
    path = args[0]
    if isinstance(path, int) or path is None:  # a descriptor: its listing was counted
        return
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    roots_s, roots_b, count = state
    if isinstance(path, bytes):
        inside = path.startswith(roots_b) or not path.startswith(b"/")
    else:
        inside = path.startswith(roots_s) or not path.startswith("/")
    if inside:
        count[0] += 1
        seen = _paths[0]
        if seen is not None:
            seen.append(os.fsdecode(path))


sys.addaudithook(_audit)  # a hook stays for the process: it counts only while asked


@contextlib.contextmanager
def counting(root: Path) -> Iterator[list[int]]:
    """Count the reads below ``root`` (as given or resolved) while inside (``[n]``)."""
    roots = (str(root) + "/", os.path.realpath(root) + "/")
    count = [0]
    _counting[0] = (roots, tuple(os.fsencode(r) for r in roots), count)
    try:
        yield count
    finally:
        _counting[0] = None


def run(command: str, host: Path) -> tuple[int, int]:
    """(exit status, reads) of ``sysverbs COMMAND`` on the host at ``host``, as a
    first call: through a link of its own to the host, so that nothing this process
    kept of an earlier call on that path (the device list) is used."""
    from sysverbs.cli import main

    root = host.parent / f"{host.name}-{len(list(host.parent.iterdir()))}"
    root.symlink_to(host.name)
    argv = [*command.split(), "--sysfs-path", f"{root}/sys", "--dev-dir",
            f"{root}/dev/infiniband"]
    out = io.TextIOWrapper(io.BytesIO())
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        with counting(root) as count:
            rc = main(argv)
    return rc, count[0]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    base = tmp_path_factory.mktemp("scale")
    made = {n: sriov_host(n, base / f"h{n}", per_pf=PER_PF).root for n in (N, 4 * N)}
    for command in COMMANDS:  # imports and first-call caches out of the counts
        run(command, made[N])
    return made


@pytest.mark.parametrize("command", COMMANDS)
def test_reads_grow_linearly(hosts: dict[int, Path], command: str) -> None:
    rc1, small = run(command, hosts[N])
    rc4, big = run(command, hosts[4 * N])
    assert rc1 in (0, 1) and rc4 in (0, 1)
    assert small >= N, f"{command}: {small} reads on {N} devices: nothing counted"
    assert big <= 4.5 * small, f"{command}: {small} reads on {N} devices, {big} on {4 * N}"
    assert big <= PER_DEVICE * 4 * N, f"{command}: {big / (4 * N):.1f} reads a device"


def test_topology_scan_reads_each_class_directory_once(hosts: dict[int, Path]) -> None:
    """A loop of device_location over every device in a LocationScan: each uverbs and
    umad entry's ``ibdev`` file is read once, and the answers are those of calls
    made one by one without a scan (which read every entry's for each device)."""
    from sysverbs.devices.location import LocationScan, device_location

    root = hosts[4 * N]
    sysfs = root / "sys"
    names = sorted(os.listdir(sysfs / "class/infiniband"))
    assert len(names) == 4 * N
    alone = {n: device_location(n, sysfs_path=sysfs) for n in names}
    seen: list[str] = []
    _paths[0] = seen
    try:
        with counting(root) as count, LocationScan():
            shared = {n: device_location(n, sysfs_path=sysfs) for n in names}
    finally:
        _paths[0] = None
    assert shared == alone
    assert [(c.kind, c.name, c.dev) for c in shared["mlx5_5"].char_devices] == [
        ("uverbs", "uverbs5", (231, 197)), ("umad", "umad5", (231, 5))]
    # every entry's (the class file abi_version/ibdev is tried too: ENOTDIR)
    ibdev = [p for p in seen if p.endswith("/ibdev") and "/abi_version/" not in p]
    assert len(ibdev) == 2 * 4 * N and len(set(ibdev)) == len(ibdev), sorted(ibdev)[:3]
    assert count[0] <= PER_DEVICE * len(names)


def test_a_scan_that_is_not_one_is_a_wrong_type_error(hosts: dict[int, Path]) -> None:
    from sysverbs.devices.location import device_location
    from sysverbs.ground.errors import WrongTypeError

    with pytest.raises(WrongTypeError, match="scan is a LocationScan, not dict"):
        device_location("mlx5_0", sysfs_path=hosts[N] / "sys", scan={})  # type: ignore[arg-type]

"""One host, read once (issue 40; docs/architecture.md, "One host model"): every command
that reads a host (``topo``, ``env``, ``run``, ``nccl check``, ``doctor``, ``metrics``,
``nfd``) opens no file of it twice in one invocation.

The count is the kernel's, not the model's: every ``os.open`` of the process while the
command runs in-process (``sysverbs.cli.main``), a ``dir_fd`` open resolved through
``/proc/self/fd``, each path by ``os.path.realpath``; each command starts, as a process
does, without the device lists of the commands before it (a file reached through a class link
and through its device path is one file); directories are not files read.  Then the
reader's rules over :class:`~sysverbs.ground.sysfs_read.ReadOnce`, each against a plain
read of the same file.
"""

from __future__ import annotations

import builtins
import errno
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Optional
from unittest import mock

import pytest

from sysverbs.engine import devlist
from sysverbs.ground.sysfs_read import ReadOnce, read_file, read_sysfs_file
from sysverbs.testing.cache import cached_fixture
from tests.test_consistency import run_cli

COMMANDS = (
    ["topo"], ["topo", "--assign"], ["topo", "--json"], ["env", "--local-rank", "3"],
    ["run", "--dry-run", "--local-rank", "3", "--cpu", "exclusive", "--", "true"],
    ["nccl", "check"], ["doctor"], ["metrics", "--json"], ["nfd"],
)


def opened_files(args: list[str], tree: Path) -> tuple[int, Counter[str]]:
    """(exit status, how many times each regular file under ``tree`` was opened) while
    ``sysverbs ARGS`` runs."""
    real_open = os.open
    root = os.path.realpath(tree)
    seen: Counter[str] = Counter()

    def counting(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Optional[int] = None
                 ) -> int:
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if not flags & (os.O_DIRECTORY | getattr(os, "O_PATH", 0)):
            name = os.fsdecode(path)
            if dir_fd is not None and not os.path.isabs(name):
                name = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
            name = os.path.realpath(name)
            if name.startswith(root + os.sep):
                seen[os.path.relpath(name, root)] += 1
        return fd

    real_builtin_open = builtins.open

    def counting_builtin(file: Any, *a: Any, **kw: Any) -> Any:
        # open() does not go through os.open: a reader that uses it is counted here
        if isinstance(file, (str, bytes, os.PathLike)):
            name = os.path.realpath(os.fsdecode(file))
            if name.startswith(root + os.sep) and os.path.isfile(name):
                seen[os.path.relpath(name, root)] += 1
        return real_builtin_open(file, *a, **kw)

    # a fresh process's libibverbs: no list of an earlier command serves this one
    with mock.patch.dict(devlist._libraries, clear=True), \
            mock.patch.object(os, "open", counting), \
            mock.patch.object(builtins, "open", counting_builtin):
        rc, _, _ = run_cli(args)
    return rc, seen


@pytest.mark.parametrize("fixture", ["gpu-dgx-b200", "gpu-sriov-sf"])
def test_no_command_reads_a_file_twice(fixture: str) -> None:
    tree = cached_fixture(fixture).root
    for args in COMMANDS:
        rc, seen = opened_files(["--fixture", fixture, *args], tree)
        assert rc in (0, 1), args
        assert seen, f"{args}: nothing of the host was read: the count is broken"
        twice = {f: n for f, n in seen.items() if n > 1}
        assert not twice, f"sysverbs {' '.join(args)} --fixture {fixture} read again: {twice}"


def test_read_once_answers_each_size_as_a_read_would(tmp_path: Path) -> None:
    short, full = tmp_path / "short", tmp_path / "full"
    short.write_bytes(b"4: ACTIVE\n")
    full.write_bytes(b"x" * 100)
    missing = tmp_path / "missing"
    paths = [(p, n) for p in (short, full, missing) for n in (4, 10, 11, 64, 100, 101, 4)]
    plain = [read_sysfs_file(str(p), n) for p, n in paths]
    with ReadOnce() as memo:
        assert [read_sysfs_file(str(p), n) for p, n in paths] == plain
        # what a read would give, from one open each (the larger size read again)
        assert set(memo.files) == {memo.key(str(p)) for p in (short, full, missing)}
        short.write_bytes(b"1: DOWN\n")  # read once: the invocation sees one content
        assert read_sysfs_file(str(short), 64) == b"4: ACTIVE"
        assert read_file(str(missing), 8) == errno.ENOENT
    assert read_sysfs_file(str(short), 64) == b"1: DOWN"  # out of it: read again
    # the rules themselves: a read that fills its buffer without a newline is cut
    assert plain[:7] == [None, b"4: ACTIVE", b"4: ACTIVE", b"4: ACTIVE", b"4: ACTIVE",
                         b"4: ACTIVE", None]
    assert plain[7:14] == [None, None, None, None, None, b"x" * 100, None]


def test_read_once_is_per_thread_and_nested_is_the_outer(tmp_path: Path) -> None:
    f = tmp_path / "state"
    f.write_bytes(b"old\n")
    got: list[Optional[bytes]] = []
    with ReadOnce() as outer:
        with ReadOnce() as inner, outer:
            assert read_sysfs_file(str(f), 64) == b"old"
        assert not inner.files and outer.key(str(f)) in outer.files
        f.write_bytes(b"new\n")
        worker = threading.Thread(target=lambda: got.append(read_sysfs_file(str(f), 64)))
        worker.start()
        worker.join()
        assert read_sysfs_file(str(f), 64) == b"old"
    assert got == [b"new"]  # another thread reads the file, not this one's memo
    assert read_sysfs_file(str(f), 64) == b"new"  # each with left as entered


def test_a_failed_read_keeps_its_errno(tmp_path: Path) -> None:
    """The verdict readers tell a missing file from a read that fails: a directory
    opens (O_RDONLY) and its read fails with EISDIR, which comes back negative."""
    with ReadOnce():
        assert read_file(str(tmp_path), 8) == -errno.EISDIR
        assert read_file(str(tmp_path / "none"), 8) == errno.ENOENT
    assert read_file(str(tmp_path), 8) == -errno.EISDIR

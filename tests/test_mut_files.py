"""fleet/files.py's clean-up of temporary files and its errors (issue 41: the mutants of
``make mutation``), in one process: a temporary file another open file description holds
locked, a link planted with a temporary file's name, data that is not bytes.
tests/test_fleet_robust.py has the killed writers and the writers side by side.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from sysverbs.fleet import files
from sysverbs.fleet.files import replace_file

STALE = ".sysverbs.prom.1.0123456789abcdef.tmp"


def test_a_locked_temporary_file_is_left_until_it_is_free(tmp_path: Path) -> None:
    """A writer's file (flock held, here by another open of it) is not removed; once
    unlocked it is stale, and the next write removes it."""
    (tmp_path / STALE).write_text("half")
    fd = os.open(tmp_path / STALE, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        replace_file(str(tmp_path), "sysverbs.prom", b"one\n")
        assert sorted(os.listdir(tmp_path)) == [STALE, "sysverbs.prom"]
    finally:
        os.close(fd)
    replace_file(str(tmp_path), "sysverbs.prom", b"two\n")
    assert os.listdir(tmp_path) == ["sysverbs.prom"]
    assert (tmp_path / "sysverbs.prom").read_bytes() == b"two\n"


def test_a_link_with_a_temporary_name_is_not_followed(tmp_path: Path) -> None:
    """A symbolic link named as a temporary file is neither opened nor removed (and the
    file it points to stays)."""
    (tmp_path / "target").write_text("keep")
    (tmp_path / STALE).symlink_to("target")
    assert replace_file(str(tmp_path), "sysverbs.prom", b"x\n") == str(tmp_path / "sysverbs.prom")
    assert sorted(os.listdir(tmp_path)) == [STALE, "sysverbs.prom", "target"]
    assert (tmp_path / "target").read_text() == "keep"


def test_data_that_is_not_bytes(tmp_path: Path) -> None:
    """A TypeError, as it is (no OSError made of it), and no temporary file left."""
    with pytest.raises(TypeError):
        replace_file(str(tmp_path), "sysverbs.prom", "text")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []


# -- races and failures, staged through the module's own os and fcntl ---------------------

NAME = "sysverbs.prom"


class _Through:
    """A module (os, fcntl) with some of its functions replaced (``files.os`` only)."""

    def __init__(self, module: Any, **replaced: Any) -> None:
        self._module = module
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def _created(monkeypatch: pytest.MonkeyPatch, on_create: Callable[[str], None],
             **more: Any) -> list[str]:
    """The temporary files the writer creates, ``on_create`` called with each path."""
    paths: list[str] = []

    def opening(path: str, flags: int, *args: Any) -> int:
        fd = os.open(path, flags, *args)
        if flags & os.O_CREAT:
            paths.append(path)
            on_create(path)
        return fd
    monkeypatch.setattr(files, "os", _Through(os, open=opening, **more))
    return paths


def _held_for_a_while(unlink: bool) -> Callable[[str], None]:
    """The first file created is locked by another open of it for 0.2 s, as another
    writer's clean-up holds it; then (``unlink``) removed under the lock, and freed."""
    def take(path: str) -> None:
        if taken:
            return
        other = os.open(path, os.O_RDONLY)
        fcntl.flock(other, fcntl.LOCK_EX)
        taken.append(path)

        def release() -> None:
            if unlink:
                os.unlink(path)
            os.close(other)
        threading.Timer(0.2, release).start()
    taken: list[str] = []
    return take


def test_the_writer_waits_for_its_new_files_lock(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Another holder of the new file's lock that leaves it: the writer waits, and
    writes that file (nothing left behind)."""
    paths = _created(monkeypatch, _held_for_a_while(unlink=False))
    replace_file(str(tmp_path), NAME, b"one\n")
    assert len(paths) == 1 and os.listdir(tmp_path) == [NAME]
    assert (tmp_path / NAME).read_bytes() == b"one\n"


def test_a_new_file_removed_under_its_lock_is_given_up(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A clean-up that removed the new file while holding its lock: the writer sees no
    name (st_nlink 0) and starts over with another file."""
    paths = _created(monkeypatch, _held_for_a_while(unlink=True))
    replace_file(str(tmp_path), NAME, b"two\n")
    assert len(paths) == 2 and os.listdir(tmp_path) == [NAME]
    assert (tmp_path / NAME).read_bytes() == b"two\n"


def test_the_temporary_file_is_private_and_locked_until_renamed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mode 0600 until the data is written, then 0644; the lock held up to the rename
    (another open of it cannot take it)."""
    seen: list[object] = []

    def fchmod(fd: int, mode: int) -> None:
        seen.append(oct(os.fstat(fd).st_mode & 0o777))
        os.fchmod(fd, mode)

    def fsync(fd: int) -> None:
        other = os.open(paths[-1], os.O_RDONLY)
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append("not locked")
        except BlockingIOError:
            seen.append("locked")
        finally:
            os.close(other)
        seen.append(oct(os.fstat(fd).st_mode & 0o777))
        os.fsync(fd)
    old = os.umask(0o022)
    try:
        paths = _created(monkeypatch, lambda path: None, fchmod=fchmod, fsync=fsync)
        replace_file(str(tmp_path), NAME, b"x\n")
    finally:
        os.umask(old)
    assert seen == ["0o600", "locked", "0o644"]


def test_a_filesystem_without_flock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flock fails with ENOLCK (no lock manager): the writer writes without its lock, and a
    temporary file that cannot be locked is left as it is."""
    calls = []

    def flock(fd: int, op: int) -> None:
        calls.append(op)
        if len(calls) > 10:
            raise RuntimeError("the writer keeps trying")
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(files, "fcntl", _Through(fcntl, flock=flock))
    (tmp_path / STALE).write_text("half")
    replace_file(str(tmp_path), NAME, b"three\n")
    assert sorted(os.listdir(tmp_path)) == [STALE, NAME]
    assert (tmp_path / NAME).read_bytes() == b"three\n"


def test_an_interrupted_lock_wait_closes_the_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def flock(fd: int, op: int) -> None:
        raise KeyboardInterrupt
    monkeypatch.setattr(files, "fcntl", _Through(fcntl, flock=flock))
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(KeyboardInterrupt):
        replace_file(str(tmp_path), NAME, b"x\n")
    assert len(os.listdir("/proc/self/fd")) == before


def test_every_stale_file_is_looked_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the directory's order: another name, a link and a held file with
    temporary names before a stale file do not stop its removal."""
    held, stale = f".{NAME}.2.0123456789abcdef.tmp", f".{NAME}.3.0123456789abcdef.tmp"
    for name in ("other", held, stale):
        (tmp_path / name).write_text(name)
    (tmp_path / STALE).symlink_to("other")
    order = ["other", STALE, held, stale]
    monkeypatch.setattr(files, "os", _Through(os, listdir=lambda d: list(order)))
    fd = os.open(tmp_path / held, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        replace_file(str(tmp_path), NAME, b"x\n")
    finally:
        os.close(fd)
    assert sorted(os.listdir(tmp_path)) == sorted([NAME, "other", STALE, held])


def test_a_stale_file_swapped_for_a_link_under_its_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stale file is renamed and a link to it put in its place between the lock and
    the check: the name is no longer the locked file, and nothing is removed."""
    stale = tmp_path / f".{NAME}.3.0123456789abcdef.tmp"
    stale.write_text("half")

    def flock(fd: int, op: int) -> None:
        fcntl.flock(fd, op)
        if op & fcntl.LOCK_NB and stale.exists() and not stale.is_symlink():
            stale.rename(tmp_path / "moved")
            stale.symlink_to("moved")
    monkeypatch.setattr(files, "fcntl", _Through(fcntl, flock=flock))
    replace_file(str(tmp_path), NAME, b"x\n")
    assert stale.is_symlink() and (tmp_path / "moved").read_text() == "half"


def test_a_failed_write_whose_clean_up_fails_too(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The write's error is the one raised, even when the temporary file cannot be
    removed after it."""
    def write(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def unlink(path: str) -> None:
        raise OSError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(files, "os", _Through(os, write=write, unlink=unlink))
    with pytest.raises(OSError) as e:
        replace_file(str(tmp_path), NAME, b"x\n")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / NAME)
    assert "(the file was not replaced)" in str(e.value)

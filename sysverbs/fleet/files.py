"""Files that other programs read while they are rewritten: node_exporter's textfile
collector (``*.prom``) and Node Feature Discovery's ``features.d`` (dot files skipped).

:func:`replace_file` writes a temporary dot file in the same directory
(``.NAME.<pid>.<16 hex digits>.tmp``: neither reader takes it), flushes it to disk, gives
it mode 0644 (the readers run as other users: ``prometheus``, NFD's worker) and renames it
over ``NAME``: a reader sees the whole old file or the whole new one, never a part.

A writer holds an exclusive ``flock`` on its temporary file from its creation to the
rename.  A writer killed in between (SIGKILL, a power cut) leaves its file behind
unlocked: the next :func:`replace_file` of the same ``NAME`` removes every such file it can
lock, and never one that another writer still holds.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re

__all__ = ["replace_file", "temporary_name"]


def temporary_name(name: str) -> re.Pattern[str]:
    """The names of :func:`replace_file`'s temporary files for ``name``."""
    return re.compile(rf"\.{re.escape(name)}\.[0-9]+\.[0-9a-f]{{16}}\.tmp")


def _locked(fd: int, wait: bool) -> bool:
    """Take ``fd``'s exclusive flock: False when another holder has it (or, with
    ``wait``, never: it waits), True also where the filesystem has no flock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError as e:
        return e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EINTR)
    return True


def _remove_stale(directory: str, name: str) -> None:
    """Remove the temporary files of ``name`` no writer holds (see the module)."""
    pattern = temporary_name(name)
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if not pattern.fullmatch(entry):
            continue
        path = os.path.join(directory, entry)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # a writer holds it (or no flock here: leave it)
                continue
            # Still the file we locked: unlinked under the lock, so that a writer that
            # locks it after us sees it has no name any more (st_nlink 0) and starts over.
            if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)


def _create(directory: str, name: str) -> tuple[int, str]:
    """A new temporary file of ``name`` in ``directory``, locked, and its path."""
    while True:
        path = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(8).hex()}.tmp")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            if _locked(fd, wait=True) and os.fstat(fd).st_nlink > 0:
                return fd, path
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # another writer's clean-up took it between the open and the lock


def replace_file(directory: str, name: str, data: bytes) -> str:
    """Replace ``directory/name`` with ``data`` atomically (see the module) and return its
    path.  An :class:`OSError` (no such directory, not writable, disk full) leaves the old
    file as it was and no temporary file behind; once the temporary file exists, it names
    ``directory/name`` and says ``(the file was not replaced)``."""
    _remove_stale(directory, name)
    fd, tmp = _create(directory, name)
    path = os.path.join(directory, name)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, 0o644)
            os.fsync(fd)
            os.replace(tmp, path)
        finally:
            os.close(fd)  # the lock is held until the file has its name
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno:  # ENOSPC, EIO...: which file, and that
            raise OSError(e.errno, f"{os.strerror(e.errno)} (the file was not replaced)",
                          path) from e
        raise
    return path

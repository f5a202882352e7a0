"""Every input of a read-once scope, recorded, and asked again to know whether it changed.

A :class:`~sysverbs.ground.sysfs_read.ReadOnce` already holds each file it read (its
bytes or errno), each directory it listed and each link it resolved to know a file.
The other system calls a host's answer depends on go through the functions here:
``stat``, ``lstat``, ``access``, ``readlink``, ``realpath``, an open that is only a probe
(:func:`probe_open`), and any other value the process asks for (:func:`observe`: an
rlimit, the user's home directory...).  Outside a scope each is the plain call.
Inside one, each is asked once, its answer (or errno) is recorded with how to ask again,
and every later call of the scope gets the same answer: every part of one answer sees
one host.  An input that cannot be recorded (a netlink answer) marks the scope
(:func:`opaque`).

:func:`changed` asks every recorded input again, outside any scope, in the order they
were first asked, and says the first that answers differently: when it says none, a
function of the scope's inputs alone gives the same value again (the long-running
exporter's steady-state scrape, :mod:`sysverbs.fleet.steady`).
"""

from __future__ import annotations

import os
import stat as stat_mod
from errno import EINVAL, EIO

from .sysfs_read import READ_FLAGS, ReadOnce, current

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional, TypeVar, Union

    PathArg = Union[bytes, str]
    T = TypeVar("T")

__all__ = ["observe", "stat", "lstat", "exists", "isdir", "lexists", "access", "readlink",
           "realpath", "probe_open", "opaque", "changed", "stat_fields"]


def stat_fields(st: os.stat_result) -> tuple[int, ...]:
    """What of a ``stat`` result is an input: everything but the access time (a read
    moves it; nothing sysverbs answers depends on it)."""
    return (st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid,
            st.st_size, st.st_mtime_ns, st.st_ctime_ns, getattr(st, "st_rdev", 0))


def _ask(fn: Callable[[], object]) -> tuple[bool, object]:
    """(True, what ``fn()`` gave) or (False, the errno of its OSError; EINVAL for a
    ValueError: a NUL byte in a path)."""
    try:
        return True, fn()
    except OSError as e:
        return False, e.errno or EIO
    except ValueError:
        return False, EINVAL


def _same(a: tuple[bool, object], b: tuple[bool, object]) -> bool:
    if a[0] and b[0] and isinstance(a[1], os.stat_result) and isinstance(b[1], os.stat_result):
        return stat_fields(a[1]) == stat_fields(b[1])
    return a == b


def observe(kind: str, key: object, fn: Callable[[], T]) -> T:
    """``fn()``, an input of this thread's scope named (``kind``, ``key``): asked once
    per scope, recorded, answered the same to every later call of the scope (an
    ``OSError`` again with its errno).  Outside a scope: ``fn()``."""
    memo = current()
    if memo is None:
        return fn()
    name = (kind, key)
    have = memo.inputs.get(name)
    if have is None:
        have = (fn, _ask(fn))
        memo.inputs[name] = have
    ok, value = have[1]
    if not ok:
        assert isinstance(value, int)
        raise OSError(value, os.strerror(value), key if isinstance(key, (str, bytes)) else None)
    return value  # type: ignore[return-value]


def _bytes(path: PathArg) -> bytes:
    return path if isinstance(path, bytes) else os.fsencode(path)


def stat(path: PathArg) -> os.stat_result:
    """``os.stat(path)``, an input (:func:`observe`)."""
    p = _bytes(path)
    return observe("stat", p, lambda: os.stat(p))


def lstat(path: PathArg) -> os.stat_result:
    """``os.lstat(path)``, an input (:func:`observe`)."""
    p = _bytes(path)
    return observe("lstat", p, lambda: os.lstat(p))


def exists(path: PathArg) -> bool:
    """``os.path.exists``: ``stat`` succeeds."""
    try:
        stat(path)
    except (OSError, ValueError):
        return False
    return True


def isdir(path: PathArg) -> bool:
    """``os.path.isdir``."""
    try:
        return stat_mod.S_ISDIR(stat(path).st_mode)
    except (OSError, ValueError):
        return False


def lexists(path: PathArg) -> bool:
    """``os.path.lexists``: ``lstat`` succeeds."""
    try:
        lstat(path)
    except (OSError, ValueError):
        return False
    return True


def access(path: PathArg, mode: int, *, effective_ids: bool = False) -> bool:
    """``os.access``, an input (:func:`observe`)."""
    p = _bytes(path)
    return observe("access", (p, mode, effective_ids),
                   lambda: os.access(p, mode, effective_ids=effective_ids))


def readlink(path: PathArg) -> bytes:
    """``os.readlink(path)`` (bytes), an input (:func:`observe`)."""
    p = _bytes(path)
    return observe("readlink", p, lambda: os.readlink(p))


def _realpath(path: bytes) -> bytes:
    """``realpath(3)`` of a path that resolves: the kernel's name of an ``O_PATH``
    descriptor of it (three system calls, where os.path.realpath lstat()s every
    component); else os.path.realpath (lexical past the first missing component)."""
    try:
        fd = os.open(path, getattr(os, "O_PATH", os.O_RDONLY) | os.O_CLOEXEC)
    except OSError:
        return os.path.realpath(path)
    try:
        return os.readlink(b"/proc/self/fd/%d" % fd)
    except OSError:
        return os.path.realpath(path)
    finally:
        os.close(fd)


def realpath(path: PathArg) -> bytes:
    """``os.path.realpath(path)`` (bytes), an input (:func:`observe`): every link it
    followed is in its answer."""
    p = _bytes(path)
    return observe("realpath", p, lambda: _realpath(p))


def probe_open(path: PathArg, flags: int) -> int:
    """Open ``path`` with ``flags`` and close it: 0, or the errno of the failed open; an
    input (:func:`observe`).  For the checks that only ask whether a node opens."""
    p = _bytes(path)

    def probe() -> int:
        try:
            fd = os.open(p, flags | os.O_CLOEXEC)
        except OSError as e:
            return e.errno or EIO
        except ValueError:
            return EINVAL
        os.close(fd)
        return 0

    return observe("open", (p, flags), probe)


def opaque(why: str) -> None:
    """The scope's answer depends on ``why`` (a netlink answer...), which is not
    recorded: :func:`changed` then always says it may have changed."""
    memo = current()
    if memo is not None and not memo.opaque:
        memo.opaque = why


def changed(reads: ReadOnce) -> Optional[str]:
    """Ask every input ``reads`` recorded again (outside any scope): None when each
    answers as it did, else what answers differently (the first found)."""
    if reads.opaque:
        return reads.opaque
    readlink, listdir, open_, read, close = os.readlink, os.listdir, os.open, os.read, os.close
    links: dict[bytes, tuple[bool, object]] = {}  # a link asked twice is asked once
    for here, target in reads.links.items():
        now: object
        try:
            now = readlink(here)
            links[here] = (True, now)
        except OSError as e:
            now = e.errno or EIO
            links[here] = (False, now)
        except ValueError:  # a NUL byte
            now = EINVAL
            links[here] = (False, now)
        if now != target:
            return f"link {os.fsdecode(here)}"
    for d, names in reads.listings.items():
        try:
            now = listdir(d)
        except OSError as e:
            now = e.errno or EIO
        if now != names:
            return f"directory {os.fsdecode(d)}"
    for key, (data, size) in reads.files.items():  # _read_raw's steps, inline: the most
        try:                                        # numerous inputs
            fd = open_(key, READ_FLAGS)
        except OSError as e:
            now = e.errno or EIO
        except ValueError:  # a NUL byte
            now = EINVAL
        else:
            try:
                now = read(fd, size)
            except OSError as e:
                now = -(e.errno or EIO)
            finally:
                close(fd)
        if now != data:
            return f"file {os.fsdecode(key)}"
    for name, (fn, answer) in reads.inputs.items():
        link = links.get(name[1]) if name[0] == "readlink" else None  # type: ignore[call-overload]
        if not _same(link if link is not None else _ask(fn), answer):
            return f"{name[0]} {name[1]!r}"
    return None

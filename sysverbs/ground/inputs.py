"""Every input of a read-once scope, recorded, and asked again to know whether it changed.

A :class:`~sysverbs.ground.sysfs_read.ReadOnce` already holds each file it read (its
bytes or errno), each directory it listed and each link it resolved to know a file.
The other system calls a host's answer depends on go through the functions here:
``stat``, ``lstat``, ``access``, ``readlink``, ``realpath``, an open that is only a probe
(:func:`probe_open`), and any other value the process asks for (:func:`observe`: an
rlimit, the user's home directory...); ``exists``, ``isdir``, ``lexists`` and ``ltype``
record only what their caller uses (a bool, a file type), not a whole ``stat``.
Outside a scope each is the plain call.
Inside one, each is asked once, its answer (or errno) is recorded with how to ask again,
and every later call of the scope gets the same answer: every part of one answer sees
one host.  An input that cannot be recorded (a netlink answer) marks the scope
(:func:`opaque`).

:func:`changed` asks every recorded input again, outside any scope, in the order they
were first asked, and says the first that answers differently: when it says none, a
function of the scope's inputs alone gives the same value again (the long-running
exporter's steady-state scrape, :mod:`sysverbs.fleet.steady`); :class:`Recheck` is the
same question with the records arranged once, for a scope asked again and again.
"""

from __future__ import annotations

import os
import stat as stat_mod
from errno import EINVAL, EIO, ENOENT
from functools import partial

from .sysfs_read import O_PATH, READ_FLAGS, ReadOnce, current, path_key, read_file, real_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional, TypeVar, Union

    PathArg = Union[bytes, str]
    T = TypeVar("T")

__all__ = ["observe", "stat", "lstat", "exists", "isdir", "lexists", "ltype", "access",
           "readlink", "realpath", "probe_open", "opaque", "changed", "Recheck", "stat_fields"]


def stat_fields(st: os.stat_result) -> tuple[int, ...]:
    """What of a ``stat`` result is an input: everything but the access time (a read
    moves it; nothing sysverbs answers depends on it)."""
    return (st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid,
            st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_rdev)


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
    if isinstance(a[1], os.stat_result) and isinstance(b[1], os.stat_result):  # both answered
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
    """``os.path.exists``, an input (:func:`observe`) whose answer is the bool alone."""
    p = _bytes(path)
    return observe("exists", p, lambda: os.path.exists(p))


def isdir(path: PathArg) -> bool:
    """``os.path.isdir``, an input whose answer is the bool alone."""
    p = _bytes(path)
    return observe("isdir", p, lambda: os.path.isdir(p))


def lexists(path: PathArg) -> bool:
    """``os.path.lexists``, an input whose answer is the bool alone."""
    p = _bytes(path)
    return observe("lexists", p, lambda: os.path.lexists(p))


def ltype(path: PathArg) -> int:
    """The file type of ``os.lstat(path)`` (``stat.S_IFMT`` of its mode: ``S_IFDIR``,
    ``S_IFLNK``...), an input whose answer is the type alone; ``OSError`` as lstat
    raises it (EINVAL for a NUL byte)."""
    p = _bytes(path)
    return observe("ltype", p, lambda: stat_mod.S_IFMT(os.lstat(p).st_mode))


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
        fd = os.open(path, O_PATH | os.O_CLOEXEC)
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


#: the inputs whose ENOENT says that their path's last name is missing
_LOOKUPS = frozenset({"stat", "lstat", "ltype", "readlink", "open"})
#: the inputs whose answer False says no more than that their path is missing
_BOOLS = frozenset({"exists", "isdir", "lexists"})
#: the inputs a path walk may answer (:class:`_Walk`)
_WALKED = frozenset({"realpath", "exists", "isdir", "lexists", "ltype"})


class Recheck:
    """The records of a finished scope (``reads``), arranged once to be asked again fast,
    as often as wanted: ``changed()`` is :func:`changed` of ``reads``.

    Each kind of input is a flat list of (what to ask, what it answered), asked in a
    tight loop with the system call itself (no per-input closure, no exception on the
    common path but the kernel's own: a missing file, a directory that is no link), in
    the order :func:`changed` gives: the links first (a file's key is its path with
    them resolved), the directories, the files, the other inputs.  An input whose
    answer is implied by those asked with it needs no call of its own; when every
    input asked answers as before, so does each of these:

    * a ``readlink`` input of a path whose link :meth:`ReadOnce.key` also resolved,
      with the same recorded answer: the same call;
    * a path ``D/N`` that answered ENOENT (a file read, a ``stat``, ``lstat``,
      ``ltype``, ``readlink`` or open probe) or False (``exists``, ``isdir``,
      ``lexists``) where ``D``, the same string, is a directory whose listing is
      recorded without ``N``: ``os.listdir(D)`` and the lookup of ``D/N`` resolve ``D``
      alike, so when the listing answers as before (asked before the files) ``N`` is
      still absent from it and ``D/N`` still answers ENOENT.  A name in the listing
      that answered ENOENT (a link to nothing) is asked again.  A directory lists every
      entry it has (sysfs, tmpfs, ext4...): the shortcut is exact; a directory whose
      lookup finds names its listing does not give (``/proc``'s thread ids) is never a
      listing of a scope;
    * what the path walk alone answers, walked again with the recorded ``readlink`` of
      each component (:func:`~sysverbs.ground.sysfs_read.real_dir`, as the kernel walks
      it: a component is a link and where to, or no link, or missing), when every
      component it meets is one of the links asked: ``realpath`` (the walk's end, when
      it is the recorded answer); ``exists`` True when the path is a file read (its last
      name as given) or leads to a known directory: one above a file read, or one
      listed that is no link (a file opens only below directories, and every component
      of a key is a directory that is no link); ``isdir`` True when it leads to a known
      directory, ``ltype`` ``S_IFDIR`` when it is one (its last name not followed);
      ``lexists`` True when it is one, a file read, or a link whose ``readlink`` is
      asked and answered a target, ``ltype`` ``S_IFLNK`` when it is such a link (only a
      link has a target).
    """

    __slots__ = ("opaque", "links", "listings", "files", "missing", "stats", "lstats",
                 "readlinks", "others", "count", "recorded")

    def __init__(self, reads: ReadOnce) -> None:
        self.opaque = reads.opaque
        #: how many inputs ``reads`` recorded, by kind ("files", "links", "directories",
        #: then each other kind's name): ``count`` of them are asked
        self.recorded = {"files": len(reads.files), "links": len(reads.links),
                         "directories": len(reads.listings)}
        for kind, _ in reads.inputs:
            self.recorded[str(kind)] = self.recorded.get(str(kind), 0) + 1
        self.links = list(reads.links.items())
        self.listings = list(reads.listings.items())
        names = {d: frozenset(v) for d, v in self.listings if not isinstance(v, int)}

        def absent(path: bytes) -> bool:
            head, _, name = path.rpartition(b"/")
            listed = names.get(head)
            return listed is not None and name not in listed

        #: every other input: (its name, how to ask it, what it answered)
        self.others: list[tuple[tuple[object, ...], Callable[[], object],
                                tuple[bool, object]]] = []
        #: (path, size, bytes) of the files read, (path, errno) of those that failed
        self.files: list[tuple[bytes, int, bytes]] = []
        self.missing: list[tuple[bytes, int]] = []
        for key, (data, size) in reads.files.items():
            if isinstance(data, bytes):
                self.files.append((key, size, data))
            elif data < 0:  # the open worked, the read failed (a directory: EISDIR)
                self.others.append((("file", key), partial(read_file, key, size),
                                    (True, data)))
            elif not (data == ENOENT and absent(key)):  # the open failed: its errno
                self.missing.append((key, data))
        walk = _Walk(reads, [key for key, _, _ in self.files])
        #: (path, stat_fields) of the stat and lstat inputs that succeeded; (path,
        #: target) of the readlink inputs that did
        self.stats: list[tuple[bytes, tuple[int, ...]]] = []
        self.lstats: list[tuple[bytes, tuple[int, ...]]] = []
        self.readlinks: list[tuple[bytes, object]] = []
        for name, (fn, answer) in reads.inputs.items():
            kind, arg = name[0], name[1]
            ok, value = answer
            path = arg[0] if isinstance(arg, tuple) else arg  # an open probe's (path, flags)
            if isinstance(path, bytes) and (
                    absent(path) and (value is False and kind in _BOOLS or (
                        kind in _LOOKUPS and value == ENOENT and (not ok or kind == "open")))
                    or ok and walk.implies(str(kind), path, value)):
                continue
            if kind == "readlink" and isinstance(arg, bytes):
                if reads.links.get(arg, self) == value:
                    continue  # the same readlink, asked with the links
                if ok:
                    self.readlinks.append((arg, value))
                    continue
            elif (ok and kind in ("stat", "lstat") and isinstance(arg, bytes)
                  and isinstance(value, os.stat_result)):
                (self.stats if kind == "stat" else self.lstats).append(
                    (arg, stat_fields(value)))
                continue
            self.others.append((name, fn, answer))
        self.count = (len(self.links) + len(self.listings) + len(self.files)
                      + len(self.missing) + len(self.stats) + len(self.lstats)
                      + len(self.readlinks) + len(self.others))

    def changed(self) -> Optional[str]:
        """None when every input answers as it did, else the first that does not."""
        if self.opaque:
            return self.opaque
        readlink, listdir, open_, read, close = os.readlink, os.listdir, os.open, os.read, os.close
        now: object
        for here, target in self.links:
            try:
                now = readlink(here)
            except OSError as e:
                now = e.errno or EIO
            except ValueError:  # a NUL byte
                now = EINVAL
            if now != target:
                return f"link {os.fsdecode(here)}"
        for d, names in self.listings:
            try:
                now = listdir(d)
            except OSError as e:
                now = e.errno or EIO
            if now != names:
                return f"directory {os.fsdecode(d)}"
        flags = READ_FLAGS
        for key, size, data in self.files:  # _read_raw's steps, inline: the most numerous
            try:
                fd = open_(key, flags)
            except (OSError, ValueError):
                return f"file {os.fsdecode(key)}"
            try:
                now = read(fd, size)
            except OSError:
                return f"file {os.fsdecode(key)}"
            finally:
                close(fd)
            if now != data:
                return f"file {os.fsdecode(key)}"
        for key, errno in self.missing:
            try:
                close(open_(key, flags))
            except OSError as e:
                if (e.errno or EIO) == errno:
                    continue
            except ValueError:  # a NUL byte
                if errno == EINVAL:
                    continue
            return f"file {os.fsdecode(key)}"
        for kind, call, records in (("stat", os.stat, self.stats),
                                    ("lstat", os.lstat, self.lstats)):
            for key, fields in records:
                try:
                    if stat_fields(call(key)) == fields:
                        continue
                except (OSError, ValueError):
                    pass
                return f"{kind} {key!r}"
        for key, was in self.readlinks:
            try:
                if readlink(key) == was:
                    continue
            except (OSError, ValueError):
                pass
            return f"readlink {key!r}"
        for name, fn, answer in self.others:
            if not _same(_ask(fn), answer):
                return f"{name[0]} {name[1]!r}"
        return None


class _Walk:
    """The path walks of a scope's records (:class:`Recheck`'s third shortcut): where a
    path leads with the recorded ``readlink`` answers, and the directories known to be
    such while the files read (``read``: their keys) and the listings answer as
    before."""

    #: the last walk met a component whose readlink is not recorded
    blind: bool

    def __init__(self, reads: ReadOnce, read: list[bytes]) -> None:
        self.links = reads.links
        self.read = frozenset(read)
        self.known: set[bytes] = set()
        for key in read:
            self._above(key)
        for key, listing in reads.listings.items():
            if not isinstance(listing, int):
                self._above(key)
                if self.links.get(key) == EINVAL:  # listed, and no link: a directory
                    self.known.add(key)

    def _above(self, path: bytes) -> None:
        """``path``'s directory and those above it: directories."""
        d = path.rpartition(b"/")[0]
        while d not in self.known:  # (up to b"", above the root: no path's)
            self.known.add(d)
            d = d.rpartition(b"/")[0]

    def _recorded(self, here: bytes) -> Union[bytes, int]:
        got = self.links.get(here)
        if got is None:
            self.blind = True
            return ENOENT  # (the walk goes on; its end is not taken)
        return got

    def implies(self, kind: str, path: bytes, value: object) -> bool:
        """Whether the answer ``value`` of the input (``kind``, ``path``) follows from
        the walk of ``path`` and the records it meets."""
        if kind not in _WALKED:
            return False
        self.blind = False
        dirs: dict[bytes, bytes] = {}  # (this walk's: a blind one is not cached)
        key = path_key(path, dirs, self._recorded)  # the last name as it is
        if self.blind:
            return False
        if kind == "exists" and value is True and key in self.read:
            return True  # the file opened: its last name followed as stat follows it
        if kind in ("exists", "isdir", "realpath"):  # the last name followed too
            end = real_dir(key, dirs, self._recorded)
            if self.blind:
                return False
            if kind == "realpath":
                return end == value
            return value is True and end in self.known
        link = self.links.get(key)
        if kind == "lexists":
            return value is True and (isinstance(link, bytes) or key in self.known
                                      or key in self.read)
        return (value == stat_mod.S_IFLNK and isinstance(link, bytes)
                or value == stat_mod.S_IFDIR and key in self.known)


def changed(reads: ReadOnce) -> Optional[str]:
    """Ask every input ``reads`` recorded again (outside any scope): None when each
    answers as it did, else what answers differently (the first found).  To ask the
    same records again and again, keep their :class:`Recheck`."""
    return Recheck(reads).changed()

"""The bundled fixtures, unpacked once per user and checked at every use.

:func:`fixture_tree` (plain string paths, for the command line) and
:func:`cached_fixture` (a :class:`~sysverbs.testing.FakeHost`) give the tree of a
bundled fixture (``sysverbs/testing/fixtures/NAME.umockdev``). The first call
materializes it into a per-user cache; later calls check that entry and return it,
with nothing to clean up. Unpacking ``gpu-dgx-b200`` writes about 8,000 files and
links (seconds); checking the entry costs about 1,700 ``stat`` calls (milliseconds).

**Where.** ``$XDG_CACHE_HOME/sysverbs/fixtures`` when ``XDG_CACHE_HOME`` is set to an
absolute path, else ``$HOME/.cache/sysverbs/fixtures`` when ``HOME`` is an absolute
path to an existing directory. That base must be a directory owned by you (or by
root); it is created (mode 0700) if only it is missing. Where it is not usable (no
``HOME``, ``HOME=/nonexistent`` as uid 65534 has, a read-only or foreign home, a base
owned by another user), or where an entry cannot be built there, the next place is
``<tmp>/sysverbs-<uid>/fixtures``, ``<tmp>`` being the first absolute directory among
``$TMPDIR``, ``$TEMP``, ``$TMP``, else ``/tmp``. Every directory of the cache's own
(``sysverbs``, ``fixtures``, ``sysverbs-<uid>``) is created with mode 0700 and used
only if it is a real directory (not a link) owned by you and not writable by group or
others. Where neither place works (a full disk, say), the fixture is materialized into
a temporary directory, as without a cache, removed when the process exits.

**Key.** An entry is ``fixtures/<name>-<16 hex digits>``: the start of the SHA-256 of
the fixture file, of the writer that unpacks it (``sysverbs/testing/umockdev_model.py``,
``umockdev_text.py`` and ``umockdev_tree.py``) and of this cache's format, so an edited
fixture or a changed writer makes a new entry. So that a call need not hash the file,
``fixtures/.key-<name>`` remembers the last digest with each file's path, device, inode,
size, modification and change times; any change to one of the files changes its change
time, and the digest is taken again. Old entries of a fixture are removed when a new one
is built: the newest :data:`KEEP` (the new one among them) stay, so that two checkouts
with different fixtures do not take turns rebuilding (or deleting the tree the other is
reading).

**What an entry holds.** ``tree/`` is what :func:`~sysverbs.testing.materialize`
writes, plus ``tree/host.umockdev`` (the fixture itself, for
:meth:`FakeHost.recording_file` and :attr:`FakeHost.recording`); the only differences
from a fresh ``materialize`` are that regular files with the same contents and mode
are hard links of one file (about 800 distinct files among 5,700 in the big GPU hosts:
what makes the check cheap) and that group and others' write bits are taken off.
Nothing in sysverbs looks at link counts or a file's inode. The tree is shared by
every later call: do not write into it (materialize your own copy for a test that
changes files; a change is caught, see below, and undone by a rebuild). Names and link
targets are as ``materialize`` writes them, and every directory lists its links and
subdirectories in the order a fresh ``materialize`` on the cache's file system gives
(``devices --fixture`` lists in that order; on a tmpfs a regular file may list
elsewhere, replaced by its hard link). ``manifest`` beside ``tree/`` holds what the
check compares.

**The check (tampering).** Every directory of the tree and one name of every file
inode are ``stat``-ed (relative to the tree, links not followed) and their change time
and size compared with the manifest's. An edit, a truncation, ``chmod``, ``chown``,
``touch`` (even one that puts the old mtime back), a new hard link, or a file written,
removed, renamed or retargeted (a link cannot be changed in place: its directory
changes) moves the change time of the file or of its directory, which no one but the
kernel sets; the build waits until the file system's clock has passed its own last
change (a few milliseconds), so that any later change has a later time. The entry
directory and ``manifest`` must be owned by you and not writable by group or others.
An entry that fails is **not used: it is rebuilt**, with a
:class:`~sysverbs.SysverbsWarning` that says what changed (a tampered cache is worth
knowing about; rebuilding it costs one unpacking). The check guards against accidents
and other users, not against you: ``manifest`` and ``.key-<name>`` are trusted when
they are yours, so someone who rewrites them to match a changed tree is believed. What
it cannot see: a change made while the clock was stepped back to the exact nanosecond
of the build; on NFS, a change made from another client until this client's attribute
cache expires (``actimeo``).

**Concurrency.** An entry is built in a temporary sibling
(``fixtures/.build-<name>-*``), then renamed into place: ``rename`` is atomic (on NFS
too: the server does it), so a reader sees a whole entry or none. Builds of one
fixture take ``fixtures/.lock-<name>`` (``flock``) so that only one process builds and
the others, after waiting, use its entry; where ``flock`` fails (an NFS mount without
locking) or waits longer than :data:`LOCK_WAIT` seconds, each builds its own and a
loser of the rename uses the winner's entry. An entry that fails its check is renamed
aside (``.trash-*``) before it is removed.

**Failures.** A build that fails (``ENOSPC``, ``EDQUOT``, ``EROFS``, ...) removes its
temporary sibling and tries the next place, then a temporary directory: a half-built
entry is never at its final name and so never used. Entries are not ``fsync``-ed: what
a crash can leave (a file cut short) fails the check and is rebuilt. Only a fixture
that cannot be materialized at all raises (the error
:func:`~sysverbs.testing.materialize` raises), and an unknown name raises
:class:`~sysverbs.ground.errors.UnknownFixtureError`.
"""

from __future__ import annotations

import errno
import os
import stat

from ..ground.errors import SysverbsWarning
from ..ground.hostroot import HostRoot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tempfile import TemporaryDirectory

    from .host import FakeHost

__all__ = ["FixtureTree", "fixture_tree", "cached_fixture", "cache_dirs", "KEEP",
           "LOCK_WAIT", "FORMAT"]

#: The entries of one fixture kept when a new one is built (the new one among them).
KEEP = 3
#: Seconds a build waits for another process's build of the same fixture.
LOCK_WAIT = 120.0
#: Part of every key: a change to how entries are laid out makes new ones.
FORMAT = "sysverbs-fixture-cache 1"

_HERE = os.path.dirname(os.path.abspath(__file__))
#: The bundled fixtures (the same directory as :data:`sysverbs.testing.host.FIXTURE_DIR`).
FIXTURE_DIR = os.path.join(_HERE, "fixtures")
#: The writer whose sources are part of every key: the files that parse a recording
#: and write its tree.
WRITERS = tuple(os.path.join(_HERE, f"umockdev_{part}.py") for part in ("model", "text", "tree"))
_SUFFIX = ".umockdev"
_HEX = frozenset("0123456789abcdef")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH
#: Temporary directories of the last-resort fallback, removed at exit.
_TEMPORARY: list[TemporaryDirectory[str]] = []


class FixtureTree:
    """Where a bundled fixture lies: ``root`` (holding ``sys``, ``dev``, ``proc`` and
    ``host.umockdev``), ``sysfs`` (``root/sys``, for ``--sysfs-path``), ``dev``
    (``root/dev/infiniband``, for ``--dev-dir``), ``proc`` (``root/proc``), all ``str``,
    the views of ``host_root``, the fixture as a recorded, named
    :class:`~sysverbs.ground.hostroot.HostRoot`; ``dev_nodes``, the device nodes below
    ``dev`` in the fixture's order; ``cached``, False for the temporary directory of the
    last-resort fallback."""

    __slots__ = ("name", "root", "sysfs", "dev", "proc", "dev_nodes", "cached", "host_root")

    def __init__(self, name: str, root: str, dev_nodes: tuple[str, ...], cached: bool
                 ) -> None:
        self.name = name
        self.root = root
        # a tree's dev is given (HostRoot's default is libibverbs' /dev/infiniband); its
        # proc is HostRoot's default, the one beside the sysfs root
        self.host_root = HostRoot.resolve(root + "/sys", root + "/dev/infiniband",
                                          recorded=True, name=name)
        self.sysfs = self.host_root.sysfs_path
        self.dev = self.host_root.dev_path
        self.proc = self.host_root.proc_path
        self.dev_nodes = dev_nodes
        self.cached = cached

    def __repr__(self) -> str:
        return f"FixtureTree({self.name!r}, {self.root!r}, cached={self.cached})"


def fixture_tree(name: str) -> FixtureTree:
    """Bundled fixture ``name`` (with or without ``.umockdev``) on disk, from the
    cache (built there on first use, rebuilt if it changed), else in a temporary
    directory removed at exit.  Nothing to clean up; do not write into the tree."""
    stem, fixture = _fixture_file(name)
    for base, own in _bases():
        fixtures_dir = _own_dirs(base, own)  # made only when the places before failed
        if fixtures_dir is None:
            continue
        try:
            found = _from_cache(fixtures_dir, stem, fixture)
        except (OSError, ValueError):
            continue  # this place cannot hold the entry (full, read-only...): the next
        if found is not None:
            return found
    return _temporary(stem, fixture)


def cached_fixture(name: str) -> FakeHost:
    """:func:`fixture_tree` as a :class:`~sysverbs.testing.FakeHost` (``sysfs``,
    ``dev``, ``proc``, ``get_device_list()``...); its ``recording`` is read from
    ``root/host.umockdev`` when first used.  (Importing ``pathlib`` and
    ``dataclasses`` costs a few milliseconds that :func:`fixture_tree` does not.)"""
    from pathlib import Path

    from .host import FakeHost

    tree = fixture_tree(name)
    return FakeHost(Path(tree.root), Path(tree.sysfs), Path(tree.dev), tree.dev_nodes)


def cache_dirs() -> list[str]:
    """The ``fixtures`` directories usable now, in the order they are tried (created
    when missing; see the module's documentation): empty where none is."""
    out = []
    for base, own in _bases():
        path = _own_dirs(base, own)
        if path is not None:
            out.append(path)
    return out


# ------------------------------------------------------------------------- where


def _bases() -> list[tuple[str, tuple[str, ...]]]:
    """(base directory, the directories of ours below it) for each candidate place."""
    out: list[tuple[str, tuple[str, ...]]] = []
    env = os.environ
    xdg = env.get("XDG_CACHE_HOME", "")
    home = env.get("HOME", "")
    if xdg.startswith("/"):
        out.append((xdg, ("sysverbs", "fixtures")))
    elif home.startswith("/") and os.path.isdir(home):
        out.append((os.path.join(home, ".cache"), ("sysverbs", "fixtures")))
    tmp = "/tmp"
    for var in ("TMPDIR", "TEMP", "TMP"):
        value = env.get(var, "")
        if value.startswith("/") and os.path.isdir(value):
            tmp = value
            break
    out.append((tmp, (f"sysverbs-{os.geteuid()}", "fixtures")))
    return out


def _own_dirs(base: str, own: tuple[str, ...]) -> str | None:
    """``base/own[0]/own[1]...``, each made (0700) if missing and each a directory of
    ours that others cannot write; ``base`` must be a directory owned by us or root
    (made 0700 if only it is missing).  None where that fails."""
    uid = os.geteuid()
    try:
        try:
            st = os.stat(base)
        except FileNotFoundError:
            os.mkdir(base, 0o700)
            st = os.stat(base)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (uid, 0):
            return None
        path = base
        for part in own:
            path = os.path.join(path, part)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                try:
                    os.mkdir(path, 0o700)
                except FileExistsError:
                    pass  # made by a concurrent call
                st = os.lstat(path)
            if (not stat.S_ISDIR(st.st_mode) or st.st_uid != uid
                    or st.st_mode & _WRITABLE_BY_OTHERS):
                return None
        return path
    except (OSError, ValueError):
        return None


def _fixture_file(name: str) -> tuple[str, str]:
    """(stem, path) of bundled fixture ``name``; UnknownFixtureError (as
    :func:`~sysverbs.testing.fixture_path` raises it) for any other name."""
    if isinstance(name, str):
        stem = name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else name
        path = os.path.join(FIXTURE_DIR, stem + _SUFFIX)
        if (stem and "/" not in stem and not stem.startswith(".") and "\0" not in stem
                and os.path.isfile(path)):
            return stem, path
    from .host import fixture_path

    fixture_path(name)  # raises the error, with the names there are
    raise AssertionError(f"{name!r} is not in {FIXTURE_DIR}")  # pragma: no cover


# ------------------------------------------------------------------- key, check


def _signature(path: str) -> str:
    st = os.stat(path)
    return (f"{path}\t{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:"
            f"{st.st_ctime_ns}")


def _digest(data: bytes) -> str:
    import hashlib

    h = hashlib.sha256(FORMAT.encode() + b"\0")
    for writer in WRITERS:
        with open(writer, "rb") as f:
            h.update(f.read())
        h.update(b"\0")
    h.update(data)
    return h.hexdigest()


def _read_own(path: str) -> str | None:
    """The text of ``path`` if it is a regular file of ours that others cannot write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                or st.st_mode & _WRITABLE_BY_OTHERS):
            return None
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "surrogateescape")
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` (a temporary sibling, then rename)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _key(fixtures_dir: str, stem: str, fixture: str) -> str:
    """The fixture's key, from ``.key-<stem>`` while the files' signatures match."""
    sig = _signature(fixture) + "".join("\t" + _signature(w) for w in WRITERS)
    memo = os.path.join(fixtures_dir, f".key-{stem}")
    text = _read_own(memo)
    if text is not None:
        line, _, key = text.partition("\n")
        key = key.rstrip("\n")
        if line == sig and len(key) == 64 and _HEX.issuperset(key):
            return key
    with open(fixture, "rb") as f:
        key = _digest(f.read())
    try:
        _write_atomic(memo, f"{sig}\n{key}\n")
    except OSError:
        pass  # only the next call's speed depends on it
    return key


def _entry_name(stem: str, key: str) -> str:
    return f"{stem}-{key[:16]}"


def _check(entry: str, stem: str, key: str) -> tuple[FixtureTree | None, str]:
    """(the entry's tree, "") if ``entry`` is whole and unchanged, else (None, why):
    "" where there is no entry."""
    uid = os.geteuid()
    try:
        st = os.lstat(entry)
    except FileNotFoundError:
        return None, ""
    except OSError as e:
        return None, f"cannot be read ({os.strerror(e.errno or 0)})"
    if not stat.S_ISDIR(st.st_mode):
        return None, "is not a directory"
    if st.st_uid != uid:
        return None, f"is owned by uid {st.st_uid}"
    if st.st_mode & _WRITABLE_BY_OTHERS:
        return None, "is writable by group or others"
    text = _read_own(os.path.join(entry, "manifest"))
    if text is None:
        return None, "has no manifest of ours (missing, unreadable, or not yours alone)"
    head, _, body = text.partition("\n\n")
    lines = head.split("\n")
    if lines[:3] != [FORMAT, f"name {stem}", f"key {key}"] or not body.endswith("\n"):
        return None, "has a manifest of another format, fixture or key"
    nodes = tuple(line[5:] for line in lines[3:] if line.startswith("node "))
    try:
        tfd = os.open(os.path.join(entry, "tree"), _DIR_FLAGS)
    except OSError as e:
        return None, f"has no tree/ ({os.strerror(e.errno or 0)})"
    try:
        lstat_at = os.stat
        for line in body[:-1].split("\n"):
            ctime, size, rel = line.split(" ", 2)
            try:
                got = lstat_at(rel, dir_fd=tfd, follow_symlinks=False)
            except OSError:
                return None, f"tree/{rel} is gone"
            if got.st_ctime_ns != int(ctime) or got.st_size != int(size):
                return None, f"tree/{rel}{_what(got)} changed"
    except ValueError:
        return None, "has a manifest it cannot read"
    finally:
        os.close(tfd)
    return FixtureTree(stem, os.path.join(entry, "tree"), nodes, True), ""


def _what(st: os.stat_result) -> str:
    if stat.S_ISDIR(st.st_mode):
        return " (a directory: itself or the entries in it)"
    if st.st_nlink > 1:
        return f" (a file, or one of its {st.st_nlink - 1} other names)"
    return ""


def _from_cache(fixtures_dir: str, stem: str, fixture: str) -> FixtureTree | None:
    """The checked entry of ``stem`` in ``fixtures_dir``, built if needed; None when
    another process's entry won the race and then failed its check."""
    key = _key(fixtures_dir, stem, fixture)
    found, why = _check(os.path.join(fixtures_dir, _entry_name(stem, key)), stem, key)
    if found is not None:
        return found
    return _build(fixtures_dir, stem, fixture, why)


# ---------------------------------------------------------------------- building


def _build(fixtures_dir: str, stem: str, fixture: str, why: str) -> FixtureTree | None:
    with open(fixture, "rb") as f:
        data = f.read()
    key = _digest(data)  # of the bytes written, should the file change meanwhile
    entry = os.path.join(fixtures_dir, _entry_name(stem, key))
    lock = _lock(fixtures_dir, stem)
    try:
        if lock is not None:  # another process may have built it while we waited
            found, why = _check(entry, stem, key)
            if found is not None:
                return found
        if why:
            import warnings

            warnings.warn(f"fixture cache: {entry} {why}: not used, rebuilt",
                          SysverbsWarning, stacklevel=4)
            _discard(fixtures_dir, entry)
        import tempfile

        tmp = tempfile.mkdtemp(prefix=f".build-{stem}-", dir=fixtures_dir)
        try:
            _write_entry(tmp, stem, key, data)
            os.rename(tmp, entry)
        except OSError as e:
            _remove(tmp)
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            # Lost the race to a process that built it without the lock: use its entry.
            return _check(entry, stem, key)[0]
        except BaseException:
            _remove(tmp)
            raise
        _tidy(fixtures_dir, stem, entry, locked=lock is not None)
        return _check(entry, stem, key)[0]
    finally:
        if lock is not None:
            os.close(lock)


def _lock(fixtures_dir: str, stem: str) -> int | None:
    """An open file holding ``fixtures/.lock-<stem>``'s exclusive ``flock``, or None
    where it cannot be had (no flock there, or :data:`LOCK_WAIT` passed)."""
    import time

    try:
        import fcntl

        fd = os.open(os.path.join(fixtures_dir, f".lock-{stem}"),
                     os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except (ImportError, OSError):
        return None
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        except OSError:
            break
    os.close(fd)
    return None


def _write_entry(entry: str, stem: str, key: str, data: bytes) -> None:
    """Materialize the fixture into ``entry/tree``, seal it and write the manifest."""
    from . import umockdev
    from .host import materialize

    tree = os.path.join(entry, "tree")
    host = materialize(umockdev.parse(data.decode("utf-8", "surrogateescape")), tree)
    fd = os.open(os.path.join(tree, "host.umockdev"),
                 os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    for node in host.dev_nodes:
        if "\n" in node:
            raise ValueError(f"device node name {node!r}: the manifest holds one per line")
    checked = _seal(tree)
    lines = [FORMAT, f"name {stem}", f"key {key}", *(f"node {n}" for n in host.dev_nodes), ""]
    lines += [f"{st.st_ctime_ns} {st.st_size} {rel}" for rel, st in checked]
    manifest = os.path.join(entry, "manifest")
    fd = os.open(manifest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write("\n".join(lines) + "\n")
    _settle(manifest, max(st.st_ctime_ns for _, st in checked))


def _settle(probe: str, newest: int) -> None:
    """Wait until the file system's clock is past ``newest``, the last change time
    recorded (a file's times advance by the kernel's tick, 4 ms or so; by up to
    seconds on some file systems): a change made after the entry is published then
    gets a later change time than any recorded.  ``probe``'s times are set to now
    until its change time is later (at most 3 s)."""
    import time

    deadline = time.monotonic() + 3
    while os.stat(probe).st_ctime_ns <= newest and time.monotonic() < deadline:
        time.sleep(0.001)
        os.utime(probe)


def _seal(tree: str) -> list[tuple[str, os.stat_result]]:
    """Take group and others' write bits off, make regular files of the same contents
    and mode hard links of one, then (nothing changing any more) stat every directory
    and one name of each file: the manifest's (relative path, stat) pairs."""
    dirs = ["."]
    files: dict[tuple[bytes, int], str] = {}  # (contents, mode) -> first path
    others: list[str] = []  # neither directory nor regular file nor link
    i = 0
    while i < len(dirs):
        rel = dirs[i]
        i += 1
        where = os.path.normpath(os.path.join(tree, rel))
        with os.scandir(where) as it:
            entries = list(it)
        for e in entries:
            if "\n" in e.name:
                raise ValueError(f"{e.path!r}: the manifest holds one name per line")
            path = e.name if rel == "." else rel + "/" + e.name
            if e.is_symlink():
                continue  # its directory's change time covers it
            st = e.stat(follow_symlinks=False)
            mode = stat.S_IMODE(st.st_mode)
            if mode & _WRITABLE_BY_OTHERS:
                mode &= ~_WRITABLE_BY_OTHERS
                os.chmod(e.path, mode, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                dirs.append(path)
            elif stat.S_ISREG(st.st_mode):
                with open(e.path, "rb") as f:
                    contents = f.read()
                first = files.setdefault((contents, mode), path)
                if first != path:
                    link = os.path.join(where, ".sysverbs-link")
                    os.link(os.path.join(tree, first), link)
                    os.replace(link, e.path)
            else:
                others.append(path)
    root_mode = stat.S_IMODE(os.stat(tree).st_mode)
    if root_mode & _WRITABLE_BY_OTHERS:
        os.chmod(tree, root_mode & ~_WRITABLE_BY_OTHERS)
    names = dirs + sorted(files.values()) + others
    return [(rel, os.stat(os.path.join(tree, rel), follow_symlinks=False)) for rel in names]


def _tidy(fixtures_dir: str, stem: str, keep: str, *, locked: bool) -> None:
    """Remove what is left of failed builds and discarded entries, and the entries of
    ``stem`` but the newest :data:`KEEP` (``keep`` among them)."""
    import time

    prefix = stem + "-"
    build = f".build-{stem}-"
    old: list[tuple[int, str]] = []
    try:
        names = os.listdir(fixtures_dir)
    except OSError:
        return
    now = time.time()
    for name in names:
        path = os.path.join(fixtures_dir, name)
        if name.startswith(".trash-"):
            _remove(path)
        elif name.startswith(build):
            # Ours are all finished while we hold the lock; else only old ones.
            try:
                if locked or now - os.lstat(path).st_mtime > 3600:
                    _remove(path)
            except OSError:
                pass
        elif (name.startswith(prefix) and len(name) == len(prefix) + 16
              and _HEX.issuperset(name[len(prefix):]) and path != keep):
            try:
                made = os.lstat(os.path.join(path, "manifest")).st_mtime_ns
            except OSError:
                made = 0
            old.append((made, path))
    old.sort(reverse=True)
    for _, path in old[KEEP - 1:]:
        _discard(fixtures_dir, path)


def _discard(fixtures_dir: str, entry: str) -> None:
    """Rename ``entry`` aside (readers of it see it whole or not at all), then remove
    it as far as we can."""
    import tempfile

    trash = tempfile.mkdtemp(prefix=".trash-", dir=fixtures_dir)
    try:
        # A directory replaces the empty one: the same parent, so even a directory
        # of another user's moves (it needs no new "..").
        os.rename(entry, trash)
    except OSError:
        try:
            os.rename(entry, os.path.join(trash, "entry"))  # a file or a link
        except OSError:
            pass  # gone already (another process)
    _remove(trash)


def _remove(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# ------------------------------------------------------------------ the fallback


def _temporary(stem: str, fixture: str) -> FixtureTree:
    """The fixture in a new temporary directory, removed when the process exits."""
    import shutil
    import tempfile

    from .host import materialize

    tmp = tempfile.TemporaryDirectory(prefix="sysverbs-")
    _TEMPORARY.append(tmp)
    host = materialize(fixture, tmp.name)
    shutil.copyfile(fixture, os.path.join(tmp.name, "host.umockdev"))
    return FixtureTree(stem, tmp.name, host.dev_nodes, False)

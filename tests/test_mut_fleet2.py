"""The steady scrape's inputs (issue 41: the mutants of ``make mutation``):
ground/inputs.py's records and :class:`Recheck`, the question that decides whether the
host changed since the last scrape (a change it misses is a stale page in Prometheus).

A scope reads a small tree on disk with every kind of input (a link resolved, a
directory listed, files read, failed and missing, ``stat``, ``lstat``, ``readlink``,
``access``, ``realpath``, open probes, an observed value); the tree is then changed in
each way a host changes (content rewritten at the same size, a link retargeted, an
entry added or removed, a file vanished or appeared, a mode, an errno) and
``Recheck.changed()`` must name the input that answers differently, and say None for
the untouched tree.  The kernel is the oracle: every answer is the real system call's.

And placement/_svg.py (``topo --svg``): the layout's and the drawing's roundings, the
tree of a hand-made host, the siblings' order, each value worked out by hand (the real
browser's checks of every fixture: tests/test_svg.py).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from errno import EINVAL, EIO, EISDIR, ENOENT, ENOTDIR
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional
from unittest import mock

import pytest

from sysverbs.ground import inputs
from sysverbs.ground.sysfs_read import ReadOnce, listdir, read_file, read_sysfs_file

# ------------------------------------------------------------------ ground/inputs.py


class _Tree:
    """``root`` with ``d/`` (listed: ``a``, ``x`` -> nowhere), ``l`` -> ``u`` (a link
    component), ``u/`` (not listed: the files, links and directories the other inputs
    ask about); ``scope`` read it once (:meth:`read`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        d, u = root / "d", root / "u"
        d.mkdir()
        (d / "a").write_text("a\n")
        (d / "x").symlink_to("nowhere")
        u.mkdir()
        for name, text in (("f", "x\n"), ("g", "gg\n"), ("g2", ""), ("k", "k\n")):
            (u / name).write_text(text)
        (u / "k").chmod(0o644)
        (u / "sub").mkdir()
        (u / "sub2").mkdir()
        for name in ("y", "y2", "z", "z2"):
            (u / name).symlink_to("f")
        (u / "w").symlink_to("f")
        (root / "l").symlink_to("u")
        self.value = [7]
        self.scope = ReadOnce()

    def p(self, name: str) -> str:
        return str(self.root / name)

    def b(self, name: str) -> bytes:
        return os.fsencode(self.root / name)

    def read(self) -> ReadOnce:
        with self.scope:
            assert read_sysfs_file(self.p("l/f"), 64) == b"x"  # through the link l
            assert sorted(listdir(self.p("d"))) == [b"a", b"x"]
            assert read_sysfs_file(self.p("d/m"), 64) is None  # absent from d: implied
            assert read_sysfs_file(self.p("d/x"), 64) is None  # listed, dangling
            assert read_sysfs_file(self.p("u/nz"), 64) is None  # u not listed
            assert read_file(self.p("u/sub"), 64) == -EISDIR  # opens, the read fails
            assert inputs.stat(self.p("u/g")).st_size == 3
            assert inputs.stat(self.p("u/g2")).st_size == 0
            assert inputs.lstat(self.p("u/y")).st_size == 1
            assert inputs.lstat(self.p("u/y2")).st_size == 1
            assert inputs.readlink(self.p("u/z")) == b"f"
            assert inputs.readlink(self.p("u/z2")) == b"f"
            assert inputs.readlink(self.p("l")) == b"u"  # the link component's own
            with pytest.raises(FileNotFoundError):
                inputs.readlink(self.p("d/m"))  # implied by d's listing
            with pytest.raises(OSError) as e:
                inputs.readlink(self.p("u/g"))  # no link
            assert e.value.errno == EINVAL
            assert inputs.exists(self.p("d/m")) is False  # implied
            assert inputs.exists(self.p("u/nz")) is False  # asked again
            assert inputs.access(self.p("u/k"), os.X_OK) is False
            assert inputs.realpath(self.p("u/w")) == self.b("u/f")
            assert inputs.probe_open(self.p("u/sub2"), os.O_WRONLY) == EISDIR
            assert inputs.probe_open(self.p("d/m"), os.O_RDONLY) == ENOENT  # implied
            assert inputs.probe_open(self.p("u/nz"), os.O_RDONLY) == ENOENT
            assert inputs.observe("rlimit", "k", lambda: self.value[0]) == 7
        return self.scope


@pytest.fixture
def tree(tmp_path: Path) -> _Tree:
    made = _Tree(tmp_path)
    made.read()
    return made


def test_recheck_arranges_each_kind_of_input(tree: _Tree) -> None:
    """Each input in its list, the implied ones (d/m five ways, the readlink of the link
    component) in none; how many were recorded of each kind, how many are asked."""
    scope = tree.scope
    r = inputs.Recheck(scope)
    assert r.opaque == ""
    links = len(scope.links)
    assert scope.links[tree.b("l")] == b"u" and links >= 3
    assert r.recorded == {"files": 5, "links": links, "directories": 1, "stat": 2, "exists": 2,
                          "lstat": 2, "readlink": 5, "access": 1, "realpath": 1,
                          "open": 3, "rlimit": 1}
    assert r.links == list(scope.links.items())
    assert r.listings == [(tree.b("d"), scope.listings[tree.b("d")])]
    assert sorted(scope.listings[tree.b("d")]) == [b"a", b"x"]  # type: ignore[arg-type]
    assert r.files == [(tree.b("u/f"), 64, b"x\n")]
    assert r.missing == [(tree.b("d/x"), ENOENT), (tree.b("u/nz"), ENOENT)]
    assert r.stats == [(tree.b(n), inputs.stat_fields(os.stat(tree.p(n))))
                       for n in ("u/g", "u/g2")]
    assert r.lstats == [(tree.b(n), inputs.stat_fields(os.lstat(tree.p(n))))
                        for n in ("u/y", "u/y2")]
    assert r.readlinks == [(tree.b("u/z"), b"f"), (tree.b("u/z2"), b"f")]
    others = [(name, answer) for name, _, answer in r.others]
    assert others == [
        (("file", tree.b("u/sub")), (True, -EISDIR)),
        (("readlink", tree.b("u/g")), (False, EINVAL)),
        (("exists", tree.b("u/nz")), (True, False)),
        (("access", (tree.b("u/k"), os.X_OK, False)), (True, False)),
        (("realpath", tree.b("u/w")), (True, tree.b("u/f"))),
        (("open", (tree.b("u/sub2"), os.O_WRONLY)), (True, EISDIR)),
        (("open", (tree.b("u/nz"), os.O_RDONLY)), (True, ENOENT)),
        (("rlimit", "k"), (True, 7))]
    assert r.count == links + 1 + 1 + 2 + 2 + 2 + 2 + 8
    assert r.changed() is None and inputs.changed(scope) is None


def _retarget(link: Path, target: str) -> None:
    link.unlink()
    link.symlink_to(target)


def _replace_by_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _same_size(path: Path) -> None:
    """The same number of bytes, other content (and a new mtime: the read sees it)."""
    path.write_bytes(bytes(b ^ 1 for b in path.read_bytes()))


#: each change of the host -> the input ``changed()`` names (``{u}`` the tree's root)
CHANGES: dict[str, tuple[Callable[[Path], object], str]] = {
    "link component retargeted": (lambda t: (shutil.copytree(t / "u", t / "v", symlinks=True),
                                             _retarget(t / "l", "v")), "link {r}/l"),
    "link component gone": (lambda t: (t / "l").unlink(), "link {r}/l"),
    "entry added": (lambda t: (t / "d" / "b").write_text(""), "directory {r}/d"),
    "entry removed": (lambda t: (t / "d" / "a").unlink(), "directory {r}/d"),
    "listed directory gone": (lambda t: shutil.rmtree(t / "d"), "link {r}/d"),  # first
    "listed directory now a file": (lambda t: (shutil.rmtree(t / "d"), (t / "d").write_text("")),
                                    "directory {r}/d"),
    "same-size rewrite": (lambda t: _same_size(t / "u" / "f"), "file {r}/u/f"),
    "file grown": (lambda t: (t / "u" / "f").write_text("x\ny\n"), "file {r}/u/f"),
    "file vanished": (lambda t: (t / "u" / "f").unlink(), "file {r}/u/f"),
    "file now a directory": (lambda t: _replace_by_dir(t / "u" / "f"), "file {r}/u/f"),
    "dangling link resolves": (lambda t: _retarget(t / "d" / "x", "a"), "file {r}/d/x"),
    "missing file appeared": (lambda t: (t / "u" / "nz").write_text(""), "file {r}/u/nz"),
    "missing file, other errno": (lambda t: (t / "u" / "nz").symlink_to("nz"),  # ELOOP
                                  "file {r}/u/nz"),
    "stat: mode": (lambda t: (t / "u" / "g").chmod(0o600), "stat b'{r}/u/g'"),
    "stat: same-size rewrite": (lambda t: _same_size(t / "u" / "g"), "stat b'{r}/u/g'"),
    "stat: file vanished": (lambda t: (t / "u" / "g").unlink(), "stat b'{r}/u/g'"),
    "stat: the second file": (lambda t: (t / "u" / "g2").chmod(0o600), "stat b'{r}/u/g2'"),
    "lstat: the second link": (lambda t: _retarget(t / "u" / "y2", "g"), "lstat b'{r}/u/y2'"),
    "readlink: the second": (lambda t: _retarget(t / "u" / "z2", "g"), "readlink b'{r}/u/z2'"),
    "lstat: link retargeted": (lambda t: _retarget(t / "u" / "y", "g"), "lstat b'{r}/u/y'"),
    "lstat: link gone": (lambda t: (t / "u" / "y").unlink(), "lstat b'{r}/u/y'"),
    "readlink: retargeted": (lambda t: _retarget(t / "u" / "z", "g"), "readlink b'{r}/u/z'"),
    "readlink: gone": (lambda t: (t / "u" / "z").unlink(), "readlink b'{r}/u/z'"),
    "failed read now reads": (lambda t: (t / "u" / "sub").rmdir() or (t / "u" / "sub")
                              .write_text("s\n"), "file b'{r}/u/sub'"),
    "access: mode": (lambda t: (t / "u" / "k").chmod(0o755), "access (b'{r}/u/k', 1, False)"),
    "realpath: retargeted": (lambda t: _retarget(t / "u" / "w", "g"), "realpath b'{r}/u/w'"),
    "open probe: now a file": (lambda t: (t / "u" / "sub2").rmdir() or (t / "u" / "sub2")
                               .write_text(""), "open (b'{r}/u/sub2', 1)"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_recheck_names_each_change(tree: _Tree, change: str) -> None:
    how, why = CHANGES[change]
    recheck = inputs.Recheck(tree.scope)
    assert recheck.changed() is None
    how(tree.root)
    assert recheck.changed() == why.format(r=tree.root)
    assert inputs.changed(tree.scope) == why.format(r=tree.root)


def test_recheck_sees_an_observed_value_and_an_opaque_scope(tree: _Tree) -> None:
    recheck = inputs.Recheck(tree.scope)
    tree.value[0] = 8
    assert recheck.changed() == "rlimit 'k'"
    tree.value[0] = 7
    assert recheck.changed() is None
    tree.scope.opaque = "RDMA netlink"
    assert inputs.Recheck(tree.scope).changed() == "RDMA netlink"
    assert recheck.changed() is None  # arranged before: not opaque


def test_failed_calls_without_errno_read_as_eio(tmp_path: Path) -> None:
    """An OSError without an errno is EIO, a ValueError EINVAL, in the records and in
    the recheck alike: an unchanged failure is no change."""
    (tmp_path / "f").write_text("f\n")
    scope = ReadOnce()
    calls: list[int] = []

    def fails() -> int:
        calls.append(1)
        raise OSError("no errno")

    with scope:
        for _ in range(2):
            with pytest.raises(OSError) as e:
                inputs.observe("k", ("a", 1), fails)
            assert (e.value.errno, e.value.filename) == (EIO, None)
            with pytest.raises(OSError) as e:
                inputs.observe("v", "name", lambda: int("x"))
            assert (e.value.errno, e.value.filename) == (EINVAL, "name")
        with pytest.raises(OSError) as e:
            inputs.observe("b", b"bytes", fails)
        assert e.value.filename == b"bytes"
        with pytest.raises(OSError) as e:
            inputs.stat(str(tmp_path / "f\0"))
        assert e.value.errno == EINVAL
        assert inputs.exists(str(tmp_path / "f\0")) is False  # NUL: EINVAL, recorded
        assert inputs.isdir(str(tmp_path / "f\0")) is False
        assert inputs.lexists(str(tmp_path / "f\0")) is False
        assert inputs.probe_open(str(tmp_path / "f\0"), os.O_RDONLY) == EINVAL
        assert read_sysfs_file(str(tmp_path / "a\0b" / "c"), 64) is None  # a NUL byte
        assert read_sysfs_file(str(tmp_path / "c\0d"), 64) is None
        assert read_sysfs_file(str(tmp_path / "later"), 64) is None  # after the NULs
    assert len(calls) == 2  # once per scope and name
    assert scope.links[os.fsencode(tmp_path / "a\0b")] == EINVAL
    assert scope.files[os.fsencode(tmp_path / "c\0d")] == (EINVAL, 64)
    assert scope.inputs[("k", ("a", 1))][1] == (False, EIO)
    assert scope.inputs[("stat", os.fsencode(tmp_path / "f\0"))][1] == (False, EINVAL)
    recheck = inputs.Recheck(scope)
    assert [key for key, _ in recheck.missing][-3:] == [
        os.fsencode(tmp_path / "a\0b" / "c"), os.fsencode(tmp_path / "c\0d"),
        os.fsencode(tmp_path / "later")]
    assert recheck.changed() is None
    (tmp_path / "later").write_text("")
    assert recheck.changed() == f"file {tmp_path / 'later'}"
    with mock.patch.object(os, "open", side_effect=OSError("no errno")):
        assert inputs.probe_open(tmp_path / "f", os.O_RDONLY) == EIO


def test_outside_a_scope_each_call_is_the_plain_one(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("f\n")
    (tmp_path / "l").symlink_to("f")
    asked: list[int] = []
    assert inputs.observe("k", 1, lambda: asked.append(1) or len(asked)) == 1
    assert inputs.observe("k", 1, lambda: asked.append(1) or len(asked)) == 2
    assert inputs.exists(tmp_path / "f") and not inputs.exists(tmp_path / "m")
    assert inputs.isdir(tmp_path) and not inputs.isdir(tmp_path / "f")
    assert not inputs.isdir(tmp_path / "m")
    assert inputs.lexists(tmp_path / "l") and not inputs.lexists(tmp_path / "m")
    assert inputs.readlink(tmp_path / "l") == b"f"
    assert inputs.access(tmp_path / "f", os.R_OK) is True
    assert inputs.access(tmp_path / "f", os.X_OK) is False
    assert inputs.probe_open(tmp_path / "f", os.O_RDONLY) == 0
    assert inputs.probe_open(tmp_path / "m", os.O_RDONLY) == ENOENT
    assert inputs.probe_open(tmp_path, os.O_WRONLY) == EISDIR
    assert inputs.probe_open(tmp_path / "f" / "x", os.O_RDONLY) == ENOTDIR
    inputs.opaque("nothing to mark")  # no scope: nothing happens


def test_one_input_per_path_whatever_its_type(tmp_path: Path) -> None:
    """A path given as str, bytes or Path is one input, named by its bytes; every later
    call of the scope gets the first answer, even after the host changed."""
    (tmp_path / "f").write_text("f\n")
    scope = ReadOnce()
    with scope:
        first = inputs.stat(str(tmp_path / "f"))
        (tmp_path / "f").chmod(0o600)
        assert inputs.stat(os.fsencode(tmp_path / "f")) is first
        assert inputs.stat(tmp_path / "f") is first
        assert inputs.access(str(tmp_path / "f"), os.R_OK) is True
        assert inputs.realpath(str(tmp_path / "f")) == os.fsencode(tmp_path / "f")
        assert inputs.probe_open(str(tmp_path / "f"), os.O_RDONLY) == 0
        inputs.opaque("first")
        inputs.opaque("second")
    assert list(scope.inputs) == [
        ("stat", os.fsencode(tmp_path / "f")),
        ("access", (os.fsencode(tmp_path / "f"), os.R_OK, False)),
        ("realpath", os.fsencode(tmp_path / "f")),
        ("open", (os.fsencode(tmp_path / "f"), os.O_RDONLY))]
    assert scope.opaque == "first"
    assert inputs.Recheck(scope).changed() == "first"
    scope.opaque = ""
    recheck = inputs.Recheck(scope)
    assert recheck.stats == [(os.fsencode(tmp_path / "f"), inputs.stat_fields(first))]
    assert recheck.changed() == f"stat {os.fsencode(tmp_path / 'f')!r}"


def test_stat_fields_leave_out_the_access_time_only(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("f\n")
    st = os.stat(tmp_path / "f")
    assert inputs.stat_fields(st) == (
        st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, st.st_size,
        st.st_mtime_ns, st.st_ctime_ns, st.st_rdev)
    assert inputs.stat_fields(os.stat("/dev/null"))[-1] == os.makedev(1, 3)


def _with(st: os.stat_result, atime_ns: Optional[int] = None, mtime_ns: Optional[int] = None,
          rdev: Optional[int] = None) -> os.stat_result:
    """``st`` with another access time, modification time or rdev (CPython keeps the
    nanoseconds as ``st_*_ns``, PyPy as ``nsec_*``)."""
    seq, named = st.__reduce__()[1]  # type: ignore[misc]
    seq, named = list(seq), dict(named)
    for which, ns, at in (("atime", atime_ns, 7), ("mtime", mtime_ns, 8)):
        if ns is not None:
            seq[at] = ns // 10**9
            named[f"st_{which}"] = ns / 1e9
            for key, value in ((f"st_{which}_ns", ns), (f"nsec_{which}", ns % 10**9)):
                if key in named:
                    named[key] = value
    if rdev is not None:
        named["st_rdev"] = rdev
    made = os.stat_result(seq, named)
    assert (made.st_atime_ns, made.st_mtime_ns, made.st_rdev) == (
        atime_ns or st.st_atime_ns, mtime_ns or st.st_mtime_ns, rdev or st.st_rdev)
    return made


def test_an_observed_stat_result_changes_by_its_fields_not_its_access_time(
        tmp_path: Path) -> None:
    """A stat result observed under another kind (not :func:`inputs.stat`'s list) is
    compared as :func:`stat_fields` does: a later access time is no change, a later
    mtime or another rdev is."""
    (tmp_path / "f").write_text("f\n")
    st = os.stat(tmp_path / "f")
    later = _with(st, atime_ns=st.st_atime_ns + 5 * 10**9)
    assert later != st and inputs.stat_fields(later) == inputs.stat_fields(st)
    answers: list[Any] = [st, OSError(ENOENT, "gone")]

    def ask(n: int) -> os.stat_result:
        if isinstance(answers[n], OSError):
            raise answers[n]
        return answers[n]  # type: ignore[no-any-return]

    scope = ReadOnce()
    with scope:  # a bytes key that names no file: only the kind "stat" is os.stat's
        assert inputs.observe("fstat", b"fd 3", lambda: ask(0)) is st
        with pytest.raises(FileNotFoundError):
            inputs.observe("fstat", b"fd 4", lambda: ask(1))
    recheck = inputs.Recheck(scope)
    assert (recheck.stats, recheck.lstats, len(recheck.others)) == ([], [], 2)
    answers[0] = later
    assert recheck.changed() is None
    answers[0] = _with(st, mtime_ns=st.st_mtime_ns + 1)
    assert recheck.changed() == "fstat b'fd 3'"
    answers[0] = _with(st, rdev=5)
    assert recheck.changed() == "fstat b'fd 3'"
    answers[0] = st
    answers[1] = st  # the failed one answers now
    assert recheck.changed() == "fstat b'fd 4'"
    answers[0], answers[1] = OSError(EIO, "io"), OSError(ENOENT, "gone")
    assert recheck.changed() == "fstat b'fd 3'"


@pytest.fixture
def no_proc_fd() -> Iterator[None]:
    """/proc/self/fd unreadable (no /proc): ``readlink`` of it fails."""
    real = os.readlink

    def readlink(path: Any, *args: Any, **kw: Any) -> Any:
        if os.fsencode(path).startswith(b"/proc/self/fd/"):
            raise OSError(ENOENT, "no /proc")
        return real(path, *args, **kw)

    with mock.patch.object(os, "readlink", readlink):
        yield


@pytest.mark.parametrize("proc", [True, False])
def test_realpath_is_os_path_realpath(tmp_path: Path, proc: bool,
                                      request: pytest.FixtureRequest) -> None:
    """The kernel's name of the path (or os.path.realpath's without /proc), the same
    as os.path.realpath for a link chain, a relative link, a missing component."""
    if not proc:
        request.getfixturevalue("no_proc_fd")
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f").write_text("")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("d/e")
    (tmp_path / "d" / "up").symlink_to("..")
    opened: list[int] = []
    real_close = os.close
    with mock.patch.object(os, "close", lambda fd: opened.append(fd) or real_close(fd)):
        for path in ("a/f", "b", "d/up/a/../e/f", "a/missing/x", "d/e/f"):
            want = os.path.realpath(tmp_path / path)
            assert inputs.realpath(str(tmp_path / path)) == os.fsencode(want), path
    assert len(opened) == 4  # each descriptor that opened is closed; a missing path opens none


def test_failed_reads_of_every_errno_are_asked_again() -> None:
    """Records as a scope leaves them (a pure arrangement, no file asked): a failed open
    of any errno, EPERM (1) too, is a missing file asked again, a failed read of any
    errno, -EPERM too, an input asked again; only ENOENT of a name absent from its
    directory's listing is implied."""
    scope = ReadOnce()
    scope.listings[b"/h"] = [b"a"]
    scope.files.update({b"/h/a": (1, 64), b"/h/b": (ENOENT, 64), b"/h/c": (-1, 8),
                        b"/h/d": (-EISDIR, 8), b"/x/e": (ENOENT, 64), b"/h/a/f": (2, 4)})
    r = inputs.Recheck(scope)
    assert r.missing == [(b"/h/a", 1), (b"/x/e", ENOENT), (b"/h/a/f", ENOENT)]
    assert [(name, answer) for name, _, answer in r.others] == [
        (("file", b"/h/c"), (True, -1)), (("file", b"/h/d"), (True, -EISDIR))]
    assert r.files == [] and r.count == 1 + 3 + 2


class _Hung(Exception):
    """An open that blocked (not an OSError: nothing may take it for a failed call)."""


def test_realpath_opens_nothing_for_reading(tmp_path: Path) -> None:
    """realpath() of a FIFO answers at once: the path is opened ``O_PATH``, not for
    reading (which waits for a writer)."""
    import signal

    os.mkfifo(tmp_path / "fifo")

    def hung(signum: int, frame: object) -> None:
        raise _Hung("the open blocked")

    old = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    try:
        assert inputs.realpath(tmp_path / "fifo") == os.fsencode(tmp_path / "fifo")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_o_path_without_its_name_is_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyPy 3.9's os has no O_PATH: ground.sysfs_read's own value is the kernel's
    (CPython's os.O_PATH here, from the C headers), so that realpath() of a FIFO (here,
    rank.ib's and the device list's handles) answers there too."""
    import importlib.util

    from sysverbs.ground import sysfs_read

    spec = importlib.util.spec_from_file_location("sysverbs.ground._sysfs_read_copy",
                                                  sysfs_read.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    kernels = getattr(os, "O_PATH", None)
    monkeypatch.delattr(os, "O_PATH", raising=False)
    spec.loader.exec_module(module)
    assert module.O_PATH == 0o10000000
    assert kernels in (None, module.O_PATH)  # None: PyPy
    assert sysfs_read.O_PATH == (kernels or 0o10000000)


# ------------------------------------------------------------------ placement/_svg.py
# The exported layout constants (CHAR_W, LINE_H, PAD, GAP) set to quarters and eighths,
# and hand-made boxes at hundredths: every coordinate then shows its rounding to one
# decimal, each value below worked out by hand (Python's round(): half to even).


def test_layout_rounds_each_coordinate_to_one_decimal(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    from sysverbs.placement import _svg

    for name, value in (("CHAR_W", 7.25), ("LINE_H", 16.25), ("PAD", 7.125), ("GAP", 8.375)):
        monkeypatch.setattr(_svg, name, value)
    numa = _svg.Tree("numa", "n", ("N",), (_svg.Tree("gpu", "g", ("GG",)),
                                           _svg.Tree("nic", "c", ("NNN", "x"))))
    top = _svg.layout(_svg.Tree("machine", "m", ("M",), (numa, _svg.Tree("dma", "d", ()))),
                      0.125, 0.375)
    assert [(b.kind, b.x, b.y, b.w, b.h) for b in _svg.walk(top)] == [
        # 87.4 + 2 PAD = 101.65; 23.375 head + (74.2 + 10.25 + GAP) + PAD + 1 = 124.325
        # (with the NUMA node's 74.25 not rounded first: 124.375)
        ("machine", 0.1, 0.4, 101.7, 124.3),
        # at (8.25, 23.75); 28.8 + 36 + GAP + 2 PAD = 87.425; 23.375 + 42.75 + PAD + 1
        ("numa", 8.2, 23.8, 87.4, 74.2),
        ("gpu", 16.4, 47.1, 28.8, 26.5),    # 16.375, 47.125; 2 CHAR_W + 2 PAD = 28.75
        ("nic", 53.5, 47.1, 36.0, 42.8),    # 16.375 + 28.8 + GAP; 2 LINE_H + 2 PAD - 4
        ("dma", 8.2, 106.3, 14.2, 10.2)]    # no line: 2 PAD = 14.25 wide, 10.25 high


def test_render_rounds_its_coordinates_and_skips_unknown_boxes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A link naming no box is left out (the next one is drawn, solid); a GPU's second
    link is dashed; texts are escaped."""
    from sysverbs.placement import _svg

    monkeypatch.setattr(_svg, "GAP", 8.125)
    g = _svg.Box("gpu", "gpu-a", ("G",), 10.25, 20.25, 20.25, 10.3, (), "0000:01:00.0")
    n = _svg.Box("nic", "nic-b", ("N", "two"), 40.25, 20.25, 30.25, 12.3, (), "")
    root = _svg.Box("machine", "m", ("A<B",), 0.0, 0.0, 100.25, 50.3, (g, n), "")
    svg = _svg.render(root, [("gpu-a", "missing"), ("nosuch", "nic-b"), ("gpu-a", "nic-b"),
                             ("gpu-a", "nic-b")], "a & b")
    curve = 'd="M20.4 30.6 C20.4 40.6 55.4 40.6 55.4 32.5"/>'
    assert svg.replace(_svg.STYLE, "STYLE").split("\n") == [
        # 50.3 + 2 GAP = 66.55
        '<svg xmlns="http://www.w3.org/2000/svg" width="100.25" height="66.5" '
        'viewBox="0 0 100.25 66.5" class="sysverbs-topo">',
        "<title>a &amp; b</title>", "<style>STYLE</style>",
        '<g class="box machine" id="m">',
        '<rect x="0.0" y="0.0" width="100.25" height="50.3" rx="3"/>',
        '<text x="7.0" y="18.0">A&lt;B</text>',
        '<g class="box gpu" id="gpu-a" data-address="0000:01:00.0">',
        '<rect x="10.25" y="20.25" width="20.25" height="10.3" rx="3"/>',
        '<text x="17.2" y="38.2">G</text>',  # 10.25 + PAD; 20.25 + PAD + 11
        "</g>", '<g class="box nic" id="nic-b">',
        '<rect x="40.25" y="20.25" width="30.25" height="12.3" rx="3"/>',
        '<text x="47.2" y="38.2">N</text>', '<text x="47.2" y="54.2">two</text>',
        "</g>", "</g>",
        # from (20.375, 30.55) down to 40.625 and up to (55.375, 32.55)
        '<path class="assign" data-gpu="gpu-a" data-nic="nic-b" ' + curve,
        '<path class="assign more" data-gpu="gpu-a" data-nic="nic-b" ' + curve,
        "</svg>", ""]


def _pci(host_bridge: Optional[str], *bridges: str, ids: tuple[int, int] = (0x10DE, 1)
         ) -> Any:
    return SimpleNamespace(host_bridge=host_bridge, bridges=bridges, vendor=ids[0],
                           device=ids[1])


def _port(n: int, state: Optional[str], layer: str) -> Any:
    return SimpleNamespace(port=n, state=state, link_layer=layer)


def _host(pci: dict[str, Any], gpus: list[str],
          nics: list[tuple[str, Optional[str], tuple[Any, ...]]]) -> Any:
    """A host as host_tree() reads one: one NUMA node of CPUs 0-3."""
    return SimpleNamespace(
        pci=pci, numa_nodes={0: frozenset(range(4))},
        numa_affinity=lambda address: (0, "numa_node"),
        gpus=[SimpleNamespace(index=i, address=a, vendor="nvidia", model="H100")
              for i, a in enumerate(gpus)],
        nics=[SimpleNamespace(name=name, address=a, kind="pf", ports=ports)
              for name, a, ports in nics])


def _shape(t: Any) -> Any:
    return (t.kind, t.id, t.lines, [_shape(c) for c in t.children])


def test_host_tree_places_what_it_can_and_leaves_the_rest_in_the_machine() -> None:
    """A GPU outside the PCI table and one without a host bridge sit in the machine (the
    devices after them are placed all the same); a port of unknown state says "?"."""
    from sysverbs.placement._svg import host_tree

    host = _host({"0000:01:00.0": _pci("pci0000:00", "0000:00:01.0"),
                  "0000:41:00.0": _pci(None),
                  "0000:02:00.0": _pci("pci0000:00", "0000:00:01.0")},
                 ["0000:81:00.0", "0000:41:00.0", "0000:01:00.0"],
                 [("mlx5_0", "0000:02:00.0", (_port(1, None, "InfiniBand"),
                                              _port(2, "ACTIVE", "Ethernet"))),
                  ("rxe0", None, ())])
    assert _shape(host_tree(host, "here")) == (
        "machine", "machine-machine", ("Machine: 3 GPUs, 2 RDMA devices (here)",), [
            ("numa", "numa-0", ("NUMA node 0 (CPUs 0-3)",), [
                ("hostbridge", "hostbridge-pci0000-00", ("host bridge pci0000:00",), [
                    ("bridge", "bridge-0000-00-01-0", ("bridge 0000:00:01.0",), [
                        ("gpu", "gpu-0000-01-00-0", ("GPU2 0000:01:00.0", "nvidia H100"), []),
                        ("nic", "nic-mlx5_0", ("mlx5_0 0000:02:00.0", "pf port 1:IB ?, 2:Eth"),
                         [])])])]),
            ("gpu", "gpu-0000-41-00-0", ("GPU1 0000:41:00.0", "nvidia H100"), []),
            ("gpu", "gpu-0000-81-00-0", ("GPU0 0000:81:00.0", "nvidia H100"), []),
            ("nic", "nic-rxe0", ("rxe0", "pf port no port"), [])])


def test_siblings_go_bridges_and_switches_then_gpus_dma_nics() -> None:
    """Under one host bridge: the bridges and switches by address, then the GPU, the
    Data Direct DMA function, the NIC, each placed after its kind whatever its address
    (the GPU's, DMA's and NIC's are below every bridge's)."""
    from sysverbs.placement._svg import DMA_ID, host_tree

    pci = {"0000:00:02.0": _pci("pci0000:00"),                      # a GPU on the root
           "0000:00:01.0": _pci("pci0000:00", ids=DMA_ID),          # a DMA function
           "0000:00:00.5": _pci("pci0000:00"),                      # a NIC
           "0000:03:00.0": _pci("pci0000:00", "0000:00:03.0"),      # bridge 03: a NIC
           "0000:07:00.0": _pci("pci0000:00", "0000:06:00.0", "0000:00:05.0"),  # switch 05
           "0000:08:00.0": _pci("pci0000:00", "0000:06:01.0", "0000:00:05.0"),
           "0000:09:00.0": _pci("pci0000:00", "0000:00:07.0")}      # bridge 07: a NIC
    host = _host(pci, ["0000:00:02.0", "0000:07:00.0", "0000:08:00.0"],
                 [("n0", "0000:00:00.5", ()), ("n3", "0000:03:00.0", ()),
                  ("n9", "0000:09:00.0", ())])
    (numa,) = host_tree(host).children
    (hb,) = numa.children
    assert [(c.kind, c.id) for c in hb.children] == [
        ("bridge", "bridge-0000-00-03-0"), ("switch", "bridge-0000-00-05-0"),
        ("bridge", "bridge-0000-00-07-0"), ("gpu", "gpu-0000-00-02-0"),
        ("dma", "dma-0000-00-01-0"), ("nic", "nic-n0")]
    assert hb.children[1].lines == ("switch 0000:00:05.0",)


def test_host_svg_draws_the_plans_gpus_only() -> None:
    """A plan entry without a GPU draws nothing (the entries after it are drawn)."""
    from sysverbs.placement._svg import host_svg

    host = _host({"0000:01:00.0": _pci("pci0000:00", "0000:00:01.0"),
                  "0000:02:00.0": _pci("pci0000:00", "0000:00:01.0")},
                 ["0000:01:00.0"], [("mlx5_0", "0000:02:00.0", ())])
    plan = [SimpleNamespace(gpu=None, nics=[SimpleNamespace(device="mlx5_0")]),
            SimpleNamespace(gpu=host.gpus[0], nics=[SimpleNamespace(device="mlx5_0")])]
    svg = host_svg(host, plan, "fixture x")
    assert svg.count('<path class="assign" data-gpu="gpu-0000-01-00-0" '
                     'data-nic="nic-mlx5_0"') == 1 and svg.count("<path") == 1
    assert "<title>sysverbs topo --svg: fixture x</title>" in svg
    assert "<title></title>" in host_svg(host, plan[1:])

"""The fixture cache (sysverbs.testing.cache, issue 26 item 5): each bundled fixture
unpacked once per user, checked at every use.

What a cached tree holds is compared with what ``materialize`` writes into a fresh
directory (names, types, link targets, contents, modes): the writer whose trees the
oracle tests run the real libibverbs and umockdev on.  Every test points
XDG_CACHE_HOME, HOME and TMPDIR into its own tmp_path: none writes to the real cache.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from sysverbs import SysverbsWarning
from sysverbs.ground.errors import UnknownFixtureError
from sysverbs.testing import cache, fixture_path, load_fixture, materialize
from sysverbs.testing.cache import cached_fixture, fixture_tree
from tests import staging
from tests.conftest import require

REPO = Path(__file__).resolve().parents[1]
UID = os.geteuid()
SMALL = "rxe"  # a small fixture: quick to build


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """XDG_CACHE_HOME, HOME and TMPDIR, each a directory of tmp_path."""
    out = {k: tmp_path / k for k in ("xdg", "home", "tmp")}
    for p in out.values():
        p.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(out["xdg"]))
    monkeypatch.setenv("HOME", str(out["home"]))
    monkeypatch.setenv("TMPDIR", str(out["tmp"]))
    monkeypatch.delenv("TEMP", raising=False)
    monkeypatch.delenv("TMP", raising=False)
    return out


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path below root: ("L", target), ("D", mode) or ("F", contents, mode)."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("L", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("D", stat.S_IMODE(st.st_mode) & ~0o022)
            else:
                out[rel] = ("F", Path(p).read_bytes(), stat.S_IMODE(st.st_mode))
    return out


def fresh(name: str, where: Path) -> dict[str, tuple[Any, ...]]:
    """What materialize writes for fixture ``name`` into a new directory, plus the
    fixture file that a cache entry holds beside it."""
    materialize(name, where)
    out = snapshot(where)
    out["host.umockdev"] = ("F", fixture_path(name).read_bytes(), 0o644)
    return out


def entry_of(tree: cache.FixtureTree) -> Path:
    return Path(tree.root).parent


def leftovers(fixtures_dir: Path) -> list[str]:
    return sorted(n for n in os.listdir(fixtures_dir)
                  if n.startswith((".build-", ".trash-", ".tmp-")))


def test_first_call_builds_the_tree_and_later_calls_reuse_it(
        places: dict[str, Path], tmp_path: Path) -> None:
    tree = fixture_tree(SMALL)
    fixtures_dir = places["xdg"] / "sysverbs" / "fixtures"
    entry = entry_of(tree)
    assert tree.cached and entry.parent == fixtures_dir
    assert os.listdir(places["tmp"]) == []  # the next place is not even made
    assert entry.name.startswith(SMALL + "-") and len(entry.name) == len(SMALL) + 17
    assert tree.sysfs == tree.root + "/sys" and tree.dev == tree.root + "/dev/infiniband"
    assert tree.proc == tree.root + "/proc"
    assert snapshot(Path(tree.root)) == fresh(SMALL, tmp_path / "fresh")
    assert tree.dev_nodes == materialize(SMALL, tmp_path / "again").dev_nodes
    for d in (places["xdg"] / "sysverbs", fixtures_dir, entry):
        st = os.lstat(d)
        assert st.st_uid == UID and stat.S_IMODE(st.st_mode) == 0o700, d
    built = os.stat(tree.root).st_ino
    again = fixture_tree(SMALL + ".umockdev")
    assert again.root == tree.root and os.stat(again.root).st_ino == built
    assert leftovers(fixtures_dir) == []


def test_cached_fixture_is_a_fake_host(places: dict[str, Path], tmp_path: Path) -> None:
    host = cached_fixture("dgx-demo")
    ref = materialize("dgx-demo", tmp_path / "ref")
    assert str(host.root) == fixture_tree("dgx-demo").root
    assert host.proc == host.root / "proc" and host.dev_nodes == ref.dev_nodes
    assert sorted(d.name for d in host.get_device_list()) == \
        sorted(d.name for d in ref.get_device_list())
    assert len(host.get_device_list()) == 19
    assert host.recording == load_fixture("dgx-demo")  # read from the entry when asked
    assert host.recording_file() == host.root / "host.umockdev"
    built = os.stat(host.root).st_ino
    assert no_warning(lambda: fixture_tree("dgx-demo"))  # recording_file() wrote nothing
    assert os.stat(host.root).st_ino == built


def no_warning(call: Callable[[], object]) -> bool:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught] == []


def test_a_call_on_a_built_entry_imports_nothing_heavy(places: dict[str, Path]) -> None:
    """What makes ``--fixture`` cheap besides the check: on a built entry, importing
    ``sysverbs.testing.cache`` and calling ``fixture_tree`` hash nothing
    (``hashlib``), build nothing (the host writer, ``tempfile``, ``shutil``), need no
    ``pathlib``, ``dataclasses`` or ``typing`` and load the testing package without
    its host builder.  (Which modules load is tested, not how long they take.)"""
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
            "import sysverbs\n"  # what every command has imported
            "before = set(sys.modules)\n"
            "from sysverbs.testing.cache import fixture_tree\n"
            "print(fixture_tree('rxe').cached)\n"
            "print(' '.join(sorted(set(sys.modules) - before)))\n")
    fixture_tree("rxe")  # built here: the child's call only checks it
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True,
                         text=True, env=dict(os.environ), timeout=60)
    assert out.returncode == 0, out.stderr
    cached, loaded = out.stdout.split("\n")[:2]
    assert cached == "True"
    assert set(loaded.split()) == {"sysverbs.testing", "sysverbs.testing.cache"}


# ------------------------------------------------------------------- tampering


def a_file(root: Path, content: bytes = b"") -> Path:
    """A regular file of the tree, not empty (holding ``content``, if given), deep in
    sys/."""
    for dirpath, _, filenames in sorted(os.walk(root / "sys")):
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_symlink():
                continue
            data = p.read_bytes()
            if data == content if content else data:
                return p
    raise AssertionError(f"no file holding {content!r}")


def edit_manifest(entry: Path) -> None:
    """One change time of the manifest made a nanosecond later."""
    head, body = (entry / "manifest").read_text().split("\n\n", 1)
    first, rest = body.split("\n", 1)
    ctime, size_path = first.split(" ", 1)
    (entry / "manifest").write_text(f"{head}\n\n{int(ctime) + 1} {size_path}\n{rest}")


def edit_keeping_times(p: Path) -> None:
    """Change the contents (same size) and put atime and mtime back: ctime moves."""
    st = os.lstat(p)
    data = p.read_bytes()
    p.write_bytes(bytes([data[0] ^ 1]) + data[1:] if data else b"x")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


def retarget(link: Path) -> None:
    target = os.readlink(link)
    link.unlink()
    os.symlink(target + "x", link)


def copy_back(d: Path) -> None:
    """A directory renamed away and copied back with its times (cp -a)."""
    moved = d.with_name(d.name + ".old")
    d.rename(moved)
    shutil.copytree(moved, d, symlinks=True, copy_function=shutil.copy2)
    shutil.copystat(moved, d)
    shutil.rmtree(moved)


def _chown_all(entry: Path, uid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(entry):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, uid)
    os.lchown(entry, uid, uid)


TAMPER: dict[str, Callable[[Path, Path], None]] = {
    # (entry, tree) -> None
    "a file edited, its mtime put back": lambda e, t: edit_keeping_times(a_file(t)),
    "a file that many share (one inode) edited": lambda e, t: a_file(t, b"1\n").write_bytes(
        b"0\n"),
    "a file cut short": lambda e, t: os.truncate(a_file(t), 0),
    "a file added": lambda e, t: (t / "sys/class/infiniband/rxe0/ports/1/new").write_text(
        "x"),
    "a file removed": lambda e, t: (t / "sys/class/infiniband_verbs/abi_version").unlink(),
    "a symlink retargeted": lambda e, t: retarget(t / "sys/class/infiniband_verbs/uverbs0"),
    "a directory made group-writable": lambda e, t: os.chmod(t / "sys/class", 0o775),
    "a file made writable by others": lambda e, t: os.chmod(a_file(t), 0o646),
    "a directory copied back with its times": lambda e, t: copy_back(t / "sys/class"),
    "the device node removed": lambda e, t: (t / "dev/infiniband/uverbs0").unlink(),
    "host.umockdev edited": lambda e, t: (t / "host.umockdev").write_text("nothing"),
    "the entry made writable by others": lambda e, t: os.chmod(e, 0o702),
    "the manifest removed": lambda e, t: (e / "manifest").unlink(),
    "the manifest edited": lambda e, t: edit_manifest(e),
    "the entry replaced by a file": lambda e, t: (shutil.rmtree(e), e.write_text("x")),
}


@pytest.mark.parametrize("how", sorted(TAMPER))
def test_a_changed_entry_is_not_used_but_rebuilt(places: dict[str, Path], tmp_path: Path,
                                                 how: str) -> None:
    tree = fixture_tree(SMALL)
    entry = entry_of(tree)
    TAMPER[how](entry, Path(tree.root))
    with pytest.warns(SysverbsWarning, match="not used, rebuilt"):
        rebuilt = fixture_tree(SMALL)
    assert rebuilt.cached and entry_of(rebuilt) == entry
    assert snapshot(Path(rebuilt.root)) == fresh(SMALL, tmp_path / "fresh")
    assert stat.S_IMODE(os.lstat(entry).st_mode) == 0o700
    assert leftovers(entry.parent) == []
    assert no_warning(lambda: fixture_tree(SMALL))  # and it is good again


def test_an_entry_owned_by_another_user_is_rebuilt(places: dict[str, Path],
                                                   tmp_path: Path) -> None:
    require(None if UID == 0 else "not root", "chown (root)")
    tree = fixture_tree(SMALL)
    entry = entry_of(tree)
    _chown_all(entry, staging.NOBODY)
    with pytest.warns(SysverbsWarning, match=f"owned by uid {staging.NOBODY}"):
        rebuilt = fixture_tree(SMALL)
    assert os.lstat(entry).st_uid == UID and os.lstat(rebuilt.root).st_uid == UID
    assert snapshot(Path(rebuilt.root)) == fresh(SMALL, tmp_path / "fresh")


def test_the_warning_says_what_changed(places: dict[str, Path]) -> None:
    tree = fixture_tree(SMALL)
    (Path(tree.root) / "sys/class/infiniband_verbs/abi_version").write_text("7\n")
    with pytest.warns(SysverbsWarning) as caught:
        fixture_tree(SMALL)
    (msg,) = [str(w.message) for w in caught]
    assert msg.startswith(f"fixture cache: {entry_of(tree)} tree/sys/")
    assert msg.endswith(" changed: not used, rebuilt")
    (Path(tree.root) / "sys/class/net/lo/new").write_text("")
    with pytest.warns(SysverbsWarning) as caught:
        fixture_tree(SMALL)
    assert [str(w.message) for w in caught] == [
        f"fixture cache: {entry_of(tree)} tree/sys/devices/virtual/net/lo (a directory: "
        "itself or the entries in it) changed: not used, rebuilt"]


# ------------------------------------------------------------------- where


def test_xdg_cache_home_then_home_cache(places: dict[str, Path],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert entry_of(fixture_tree(SMALL)).parent == places["xdg"] / "sysverbs/fixtures"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored
    home_cache = places["home"] / ".cache/sysverbs/fixtures"
    assert entry_of(fixture_tree(SMALL)).parent == home_cache
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert entry_of(fixture_tree(SMALL)).parent == home_cache
    assert not Path("relative").exists()


@pytest.mark.parametrize("home", ["unset", "/nonexistent", "relative"])
def test_without_a_home_the_per_uid_temporary_directory(
        places: dict[str, Path], monkeypatch: pytest.MonkeyPatch, home: str) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME")
    if home == "unset":
        monkeypatch.delenv("HOME")
    else:
        monkeypatch.setenv("HOME", home)
    tree = fixture_tree(SMALL)
    per_uid = places["tmp"] / f"sysverbs-{UID}"
    assert tree.cached and entry_of(tree).parent == per_uid / "fixtures"
    st = os.lstat(per_uid)
    assert st.st_uid == UID and stat.S_IMODE(st.st_mode) == 0o700
    assert not Path("/nonexistent").exists()
    assert cache.cache_dirs() == [str(per_uid / "fixtures")]


def _foreign(p: Path) -> None:
    p.mkdir()
    os.chown(p, staging.NOBODY, staging.NOBODY)


@pytest.mark.parametrize("bad", ["a link to our own directory", "writable by others",
                                 "writable by group", "owned by another user", "a file"])
def test_a_per_uid_directory_that_is_not_ours_alone_is_not_used(
        places: dict[str, Path], monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    """Another user may have made /tmp/sysverbs-<uid> first: then no cache, a temporary
    directory as without one (removed at exit)."""
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("HOME")
    per_uid = places["tmp"] / f"sysverbs-{UID}"
    if bad == "owned by another user":
        require(None if UID == 0 else "not root", "chown (root)")
        _foreign(per_uid)
    elif bad == "a link to our own directory":
        (places["tmp"] / "mine").mkdir(mode=0o700)
        per_uid.symlink_to("mine")
    elif bad == "a file":
        per_uid.write_text("")
    else:
        per_uid.mkdir()
        os.chmod(per_uid, 0o777 if bad == "writable by others" else 0o770)
    before = snapshot(places["tmp"])
    tree = fixture_tree(SMALL)
    assert not tree.cached and not tree.root.startswith(str(places["tmp"]))
    assert snapshot(places["tmp"]) == before  # nothing written there
    assert sorted(os.listdir(Path(tree.sysfs) / "class/infiniband")) == ["rxe0", "rxe1"]
    assert cache.cache_dirs() == []


def test_a_cache_base_of_another_user_is_not_used(places: dict[str, Path]) -> None:
    """As root with a user's HOME (sudo -E): their cache is not written into."""
    require(None if UID == 0 else "not root", "chown (root)")
    os.chown(places["xdg"], staging.NOBODY, staging.NOBODY)
    tree = fixture_tree(SMALL)
    assert os.listdir(places["xdg"]) == []
    assert entry_of(tree).parent == places["tmp"] / f"sysverbs-{UID}" / "fixtures"


def test_a_read_only_cache_falls_back(places: dict[str, Path]) -> None:
    """XDG_CACHE_HOME on a read-only file system (EROFS): the next place."""
    require(None if shutil.which("unshare") and UID == 0 else "no unshare or not root",
            "a read-only bind mount")
    code = ("from sysverbs.testing.cache import fixture_tree; t = fixture_tree('rxe'); "
            "print(t.root, t.cached)")
    xdg = shlex.quote(str(places["xdg"]))
    script = (f"mount --bind -o ro {xdg} {xdg} && {shlex.quote(sys.executable)} -c \"$0\"")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script, code], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    require(None if "mount" not in proc.stderr else proc.stderr, "a read-only bind mount")
    assert proc.returncode == 0, proc.stderr
    root, cached = proc.stdout.split()
    assert cached == "True"
    assert root.startswith(str(places["tmp"] / f"sysverbs-{UID}" / "fixtures" / "rxe-"))
    assert os.listdir(places["xdg"]) == []


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A sticky, world-writable directory that uid 65534 can reach (as /tmp is)."""
    d = Path(tempfile.mkdtemp(prefix="sv-cache-", dir=os.path.dirname(staging.stage())))
    os.chmod(d, 0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _as_nobody(env: dict[str, str]) -> list[str]:
    code = ("from sysverbs.testing.cache import fixture_tree\n"
            "for _ in range(2):\n"
            "    t = fixture_tree('rxe')\n"
            "    print(t.root, t.cached)\n")
    proc = subprocess.run([*staging.AS_NOBODY, staging.user_python(), "-c", code],
                          env=staging.user_env(env), capture_output=True, text=True,
                          timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.parametrize("home", ["/nonexistent", "read-only"])
def test_uid_65534_without_a_usable_home(shared_tmp: Path, home: str) -> None:
    """uid 65534 with HOME=/nonexistent (or a home it cannot write): the cache is
    <tmp>/sysverbs-65534, made by that user, mode 0700; the second call uses it."""
    require(None if UID == 0 and shutil.which("setpriv") else "not root or no setpriv",
            "running as uid 65534")
    if home == "read-only":
        home = str(shared_tmp / "home")
        os.mkdir(home, 0o555)
        os.chown(home, staging.NOBODY, staging.NOBODY)
    out = _as_nobody({"HOME": home, "TMPDIR": str(shared_tmp)})
    per_uid = shared_tmp / f"sysverbs-{staging.NOBODY}"
    assert out[1] == out[3] == "True" and out[0] == out[2]
    assert out[0].startswith(str(per_uid / "fixtures" / "rxe-"))
    st = os.lstat(per_uid)
    assert st.st_uid == staging.NOBODY and stat.S_IMODE(st.st_mode) == 0o700
    assert os.lstat(out[0]).st_uid == staging.NOBODY
    if home != "/nonexistent":
        assert os.listdir(home) == []


def test_uid_65534_refuses_a_per_uid_directory_made_by_root(shared_tmp: Path) -> None:
    require(None if UID == 0 and shutil.which("setpriv") else "not root or no setpriv",
            "running as uid 65534")
    per_uid = shared_tmp / f"sysverbs-{staging.NOBODY}"
    per_uid.mkdir(mode=0o755)
    out = _as_nobody({"HOME": "/nonexistent", "TMPDIR": str(shared_tmp)})
    # Two temporary directories (in TMPDIR, as without a cache), not below per_uid.
    assert out[1] == out[3] == "False" and out[0] != out[2]
    assert not out[0].startswith(str(per_uid)) and not out[2].startswith(str(per_uid))
    assert os.listdir(per_uid) == []


# ------------------------------------------------------------ full disk, races


def test_a_failed_build_leaves_nothing_and_falls_back(
        places: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A build that fails half-way (ENOSPC) in every place: no entry, no half-built
    one, a temporary directory instead; a later call tries again."""
    real = cache._write_entry

    def half(entry: str, stem: str, key: str, data: bytes) -> None:
        os.mkdir(os.path.join(entry, "tree"))
        (Path(entry) / "tree" / "half").write_text("x")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache, "_write_entry", half)
    tree = fixture_tree("dgx-demo")
    assert not tree.cached
    assert snapshot(Path(tree.root)) == fresh("dgx-demo", tmp_path / "fresh")
    places_used = [Path(p) for p in cache.cache_dirs()]
    assert len(places_used) == 2  # both tried
    for fixtures_dir in places_used:
        assert [n for n in os.listdir(fixtures_dir) if not n.startswith(".")] == []
        assert leftovers(fixtures_dir) == []
    monkeypatch.setattr(cache, "_write_entry", real)
    assert fixture_tree("dgx-demo").cached


def test_a_full_file_system(places: dict[str, Path]) -> None:
    """XDG_CACHE_HOME and TMPDIR on a 64 KiB tmpfs: every build fails with ENOSPC;
    the fixture comes from a temporary directory elsewhere and no entry is left."""
    require(None if shutil.which("unshare") and UID == 0 else "no unshare or not root",
            "a small tmpfs")
    elsewhere = places["home"]
    code = ("import os, sys, tempfile; tempfile.tempdir = sys.argv[1]\n"
            "os.environ['TMPDIR'] = sys.argv[2]\n"
            "from sysverbs.testing.cache import fixture_tree\n"
            "for _ in range(2):\n"
            "    t = fixture_tree('dgx-demo')\n"
            "    print(t.cached, len(os.listdir(t.sysfs + '/class/infiniband')))\n"
            "for d in (os.environ['XDG_CACHE_HOME'], sys.argv[2]):\n"
            "    for p, ds, fs in os.walk(d):\n"
            "        print('LEFT', p, *ds, *fs)\n")
    full = shlex.quote(str(places["tmp"]))
    script = (f"mount -t tmpfs -o size=64k none {full} && mkdir {full}/xdg {full}/tmp && "
              f"XDG_CACHE_HOME={full}/xdg {shlex.quote(sys.executable)} -c \"$0\" "
              f"{shlex.quote(str(elsewhere))} {full}/tmp")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script, code], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    require(None if "mount" not in proc.stderr else proc.stderr, "a small tmpfs")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["False 19", "False 19"]
    left = [line.split()[2:] for line in lines[2:]]
    # the cache's own directories and files, no entry and nothing half-built
    names = {n for entry in left for n in entry}
    assert not any(n.startswith(("dgx-demo-", ".build-", ".trash-")) for n in names), left
    assert os.listdir(elsewhere) == []  # its temporary directories were removed at exit


def _barrier_code(n: int, gate: Path, lock: bool) -> str:
    """A child: waits for ``gate``, then fixture_tree('dgx-demo'); prints its root and
    how many trees it built.  Without the lock each builder also waits, before its
    rename, until all ``n`` have built, so that every rename but one loses."""
    return f"""
import os, sys, time
from pathlib import Path
from sysverbs.testing import cache
gate = Path({str(gate)!r})
built = []
real = cache._write_entry
def counted(entry, stem, key, data):
    real(entry, stem, key, data)
    built.append(entry)
    if not {lock!r}:
        (gate / f"built-{{os.getpid()}}").touch()
        while len(list(gate.glob("built-*"))) < {n}:
            time.sleep(0.01)
cache._write_entry = counted
if not {lock!r}:
    cache._lock = lambda *a: None
while not (gate / "go").exists():
    time.sleep(0.005)
t = cache.fixture_tree("dgx-demo")
print(t.root, t.cached, len(built))
"""


@pytest.mark.timeout(240)
@pytest.mark.parametrize("lock", [True, False], ids=["flock", "no flock"])
def test_concurrent_first_calls(places: dict[str, Path], tmp_path: Path, lock: bool) -> None:
    """Four processes at once on an empty cache: with the lock one builds and the
    others use its entry; without it all build, one rename wins and the others use
    the winner's entry.  Either way one entry, nothing left over, the right tree."""
    n = 4
    gate = tmp_path / "gate"
    gate.mkdir()
    code = _barrier_code(n, gate, lock)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    children = [subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for _ in range(n)]
    (gate / "go").touch()
    outs = [c.communicate(timeout=200) for c in children]
    assert all(c.returncode == 0 for c in children), [e for _, e in outs]
    rows = [o.split() for o, _ in outs]
    assert len({r[0] for r in rows}) == 1 and all(r[1] == "True" for r in rows)
    assert sum(int(r[2]) for r in rows) == (1 if lock else n)
    fixtures_dir = places["xdg"] / "sysverbs" / "fixtures"
    assert [e for e in os.listdir(fixtures_dir) if not e.startswith(".")] == \
        [Path(rows[0][0]).parent.name]
    assert leftovers(fixtures_dir) == []
    assert snapshot(Path(rows[0][0])) == fresh("dgx-demo", tmp_path / "fresh")


# ------------------------------------------------------------- keys, old entries


def test_a_changed_fixture_gets_a_new_entry_and_old_ones_go(
        places: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The key follows the fixture's contents, even a change of the same size with its
    mtime put back; of one fixture's entries the newest KEEP stay."""
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    mine = fixtures / f"{SMALL}.umockdev"
    shutil.copyfile(fixture_path(SMALL), mine)
    monkeypatch.setattr(cache, "FIXTURE_DIR", str(fixtures))
    original = mine.read_bytes()
    assert original.count(b"A: mtu=65536\\n") == 1  # lo's
    roots = [fixture_tree(SMALL).root]
    for i in range(1, cache.KEEP + 2):
        st = os.stat(mine)
        mine.write_bytes(original.replace(b"mtu=65536", f"mtu=6553{i}".encode()))
        os.utime(mine, ns=(st.st_atime_ns, st.st_mtime_ns))
        tree = fixture_tree(SMALL)
        roots.append(tree.root)
        assert (Path(tree.sysfs) / "class/net/lo/mtu").read_text() == f"6553{i}\n"
        assert (Path(tree.root) / "host.umockdev").read_bytes() == mine.read_bytes()
    assert len(set(roots)) == len(roots)
    left = sorted(str(p / "tree") for p in (places["xdg"] / "sysverbs/fixtures").iterdir()
                  if not p.name.startswith("."))
    assert left == sorted(roots[-cache.KEEP:])


def test_unknown_names_are_refused(places: dict[str, Path]) -> None:
    for name in ("no-such-host", "../fixtures/rxe", ".key-rxe", "", "rxe/"):
        with pytest.raises(UnknownFixtureError) as caught:
            fixture_tree(name)
        with pytest.raises(UnknownFixtureError) as expected:
            fixture_path(name)
        assert str(caught.value) == str(expected.value)
    assert os.listdir(places["xdg"]) == []


def listing(root: Path) -> dict[str, list[str]]:
    """Each directory's links and subdirectories, in the order it lists them."""
    out = {}
    for dirpath, _, _ in os.walk(root):
        out[os.path.relpath(dirpath, root)] = [
            n for n in os.listdir(dirpath) if os.path.islink(os.path.join(dirpath, n))
            or os.path.isdir(os.path.join(dirpath, n))]
    return out


@pytest.mark.parametrize("where", ["tmp_path", "ftmp"])
def test_devices_list_in_the_order_of_the_cache_file_system(
        where: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/cli.md: ``devices --fixture`` lists in the order of the file system the
    fixture is unpacked on.  A tree materialized beside the cache (the same file
    system; ``ftmp``: a tmpfs where there is one, which lists in creation order) lists
    every directory's links and subdirectories in the same order as the cached tree,
    and sysverbs lists the devices in the same order.  (Regular files may list
    elsewhere on a tmpfs: each was replaced by its hard link.)"""
    base: Path = request.getfixturevalue(where)
    monkeypatch.setenv("XDG_CACHE_HOME", str(base / "xdg"))
    (base / "xdg").mkdir()
    host = cached_fixture("dgx-demo")
    ref = materialize("dgx-demo", base / "beside")
    assert listing(host.root) == listing(ref.root)
    assert [d.name for d in host.get_device_list()] == [d.name for d in ref.get_device_list()]


def test_bench_fixture_runs(tmp_path: Path) -> None:
    """benchmarks/bench_fixture.py (make bench) end to end on one small fixture: the
    commands on the cache's tree print what they print on the unpacked one."""
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_fixture.py"), "--samples", "1",
         "--fixtures", SMALL, "--commands", "devices,topo",
         "--tmpdir", str(tmp_path), "--json", str(out)],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "unused")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [(r["fixture"], r["command"]) for r in result["rows"]] == \
        [(SMALL, "devices"), (SMALL, "topo")]
    for row in result["rows"]:
        assert row["outputs_identical"], row
        assert len(row["A_ms"]) == len(row["B_ms"]) == len(row["D_ms"]) == 1
    assert result["stats_per_check"][SMALL] > 50
    assert "| fixture | command |" in proc.stdout
    assert not (tmp_path / "unused").exists()  # the benchmark's own cache only

"""The recheck's third shortcut (:class:`sysverbs.ground.inputs.Recheck`): what a path
walk alone answers (``realpath``, ``exists``, ``isdir``, ``lexists``, ``ltype``) is not
asked again when the links it meets and a file read or a directory listed below it are.

The oracle is the kernel: each input of the scope is asked again with the system call
itself (every one, the implied ones too), and the recheck must say "changed" exactly
when one of them answers differently, for each way of changing the tree below.
"""

from __future__ import annotations

import os
import shutil
import stat
from errno import ENOENT
from pathlib import Path
from typing import Callable

import pytest

from sysverbs.ground import inputs
from sysverbs.ground.sysfs_read import ReadOnce, listdir, read_file, read_sysfs_file


def _tree(root: Path) -> None:
    """``real/dev`` holding the file ``f`` and the directory ``sub`` (file ``g``);
    ``l`` a link to ``real``; ``real/lnk`` a link to ``dev``; ``real/dev/x`` a link to
    ``f``; ``real/empty`` and ``real/bare`` empty directories; ``real/dangle`` a link to
    nothing."""
    (root / "real" / "dev" / "sub").mkdir(parents=True)
    (root / "real" / "dev" / "f").write_text("f\n")
    (root / "real" / "dev" / "sub" / "g").write_text("g\n")
    (root / "real" / "dev" / "x").symlink_to("f")
    (root / "real" / "empty").mkdir()
    (root / "real" / "bare").mkdir()
    (root / "real" / "dangle").symlink_to("nowhere")
    (root / "l").symlink_to("real")
    (root / "real" / "lnk").symlink_to("dev")


def _no_entry() -> object:
    raise FileNotFoundError(ENOENT, "no entry")


def _read(root: Path) -> ReadOnce:
    """The files under ``real/dev`` read, ``real/empty`` listed (nothing read below it),
    nothing of ``real/bare`` found; then every input a walk may answer, with the
    answers the tree gives."""
    p = str(root)
    scope = ReadOnce()
    with scope:
        assert read_sysfs_file(p + "/l/dev/f", 64) == b"f"  # through the link l
        assert read_sysfs_file(p + "/real/lnk/sub/g", 64) == b"g"  # through real/lnk
        assert listdir(p + "/real/empty") == []
        assert read_sysfs_file(p + "/real/empty/none", 64) is None  # absent: implied
        assert read_sysfs_file(p + "/real/bare/none", 64) is None  # asked
        # implied: a file read, a directory above one or listed, a link's own readlink
        assert inputs.exists(p + "/l/dev/f") is True
        assert inputs.exists(p + "/l/dev") is True
        assert inputs.isdir(p + "/l/dev") is True  # above the files read only
        assert inputs.isdir(p + "/real/lnk") is True  # followed: real/dev
        assert inputs.isdir(p + "/real/empty") is True  # listed only
        assert inputs.isdir(p + "/real") is True
        assert inputs.isdir(p) is True  # every directory above a key
        assert inputs.lexists(p + "/real/dev") is True
        assert inputs.lexists(p + "/l/dev/f") is True
        assert inputs.lexists(p + "/l") is True  # a link: its readlink was asked
        assert inputs.ltype(p + "/l/dev") == stat.S_IFDIR
        assert inputs.ltype(p + "/real/lnk") == stat.S_IFLNK
        assert inputs.realpath(p + "/l/lnk/sub") == os.fsencode(p + "/real/dev/sub")
        assert inputs.exists(p + "/real/empty/none") is False  # absent from the listing
        # asked again: a walk that does not answer them
        assert inputs.exists(p + "/real/none") is False  # real not listed
        assert inputs.exists(p + "/real/dangle") is False  # dangle's readlink not asked
        assert inputs.exists(p + "/real/dangle/x") is False  # nor in the directory's walk
        assert inputs.lexists(p + "/real/dangle") is True
        assert inputs.isdir(p + "/l/dev/f") is False
        assert inputs.isdir(p + "/real/bare") is True  # no link, nothing read below
        assert inputs.ltype(p + "/l/dev/f") == stat.S_IFREG
        assert inputs.ltype(p + "/real/bare") == stat.S_IFDIR
        assert inputs.ltype(p + "/real/dev/x") == stat.S_IFLNK  # its readlink not asked
        assert inputs.lexists(p + "/real/dev/x") is True
        assert inputs.realpath(p + "/real/dev/x") == os.fsencode(p + "/real/dev/f")
        assert inputs.realpath(p + "/real/dev/f") == os.fsencode(p + "/real/dev/f")
        assert inputs.access(p + "/real/empty/none", os.F_OK) is False  # no lookup's
        with pytest.raises(FileNotFoundError):  # a value named by a path: no lookup
            inputs.observe("custom", os.fsencode(p + "/real/empty/none"), _no_entry)
        assert inputs.stat(p + "/l/dev").st_mode & stat.S_IFDIR
        assert inputs.probe_open(p + "/l/dev", os.O_RDONLY) == 0
    return scope


def test_the_walk_implies_what_it_answers(tmp_path: Path) -> None:
    _tree(tmp_path)
    scope = _read(tmp_path)
    b = os.fsencode(str(tmp_path))
    recheck = inputs.Recheck(scope)
    assert [name for name, _, _ in recheck.others] == [
        ("exists", b + b"/real/none"), ("exists", b + b"/real/dangle"),
        ("exists", b + b"/real/dangle/x"), ("lexists", b + b"/real/dangle"),
        ("isdir", b + b"/l/dev/f"), ("isdir", b + b"/real/bare"), ("ltype", b + b"/l/dev/f"),
        ("ltype", b + b"/real/bare"), ("ltype", b + b"/real/dev/x"),
        ("lexists", b + b"/real/dev/x"), ("realpath", b + b"/real/dev/x"),
        ("realpath", b + b"/real/dev/f"), ("access", (b + b"/real/empty/none", os.F_OK, False)),
        ("custom", b + b"/real/empty/none"), ("open", (b + b"/l/dev", os.O_RDONLY))]
    assert [key for key, _ in recheck.stats] == [b + b"/l/dev"]
    assert [key for key, _ in recheck.missing] == [b + b"/real/bare/none"]
    assert recheck.recorded["isdir"] == 7 and recheck.recorded["ltype"] == 5
    recorded = (len(scope.files) + len(scope.links) + len(scope.listings)
                + len(scope.inputs))
    assert recheck.count == recorded - 15 and recheck.changed() is None


def _same_elsewhere(root: Path, link: str, where: str) -> None:
    """``link`` (a link) pointing to a copy of what it pointed to, at ``where``."""
    old = (root / link).resolve()
    shutil.copytree(old, root / where, symlinks=True)
    (root / link).unlink()
    (root / link).symlink_to(where if "/" not in link else os.path.relpath(root / where,
                                                                       (root / link).parent))


def _dir_to_link(root: Path, name: str) -> None:
    """The directory ``name`` moved aside and a link to it in its place: every path
    through it answers as before but its own lstat and readlink."""
    os.rename(root / name, root / (name + ".moved"))
    (root / name).symlink_to(os.path.basename(name) + ".moved")


def _relink(root: Path, name: str, target: str) -> None:
    """``name`` (a link) now pointing to ``target``."""
    (root / name).unlink()
    (root / name).symlink_to(target)


def _file_to_link(root: Path, name: str) -> None:
    """The file ``name`` now a link to a copy of it: read through, it answers the same."""
    shutil.copy(root / name, root / (name + "2"))
    _relink(root, name, os.path.basename(name) + "2")


def _link_to_dir(root: Path, name: str) -> None:
    """The link ``name`` now a copy of the directory it pointed to."""
    target = (root / name).resolve()
    (root / name).unlink()
    shutil.copytree(target, root / name, symlinks=True)


def _remove_all(root: Path) -> None:
    for entry in root.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


#: each change of the tree (the implied inputs it would change, in words)
CHANGES: dict[str, Callable[[Path], None]] = {
    "none": lambda r: None,
    "the link component retargeted to a copy (realpath)": lambda r: _same_elsewhere(
        r, "l", "real2"),
    "the inner link retargeted to a copy (isdir, ltype, realpath)": lambda r: _same_elsewhere(
        r, "real/lnk", "real/dev2"),
    "a directory made a link to itself moved (lexists, ltype)": lambda r: _dir_to_link(
        r, "real/dev"),
    "the listed directory made a link to itself moved": lambda r: _dir_to_link(
        r, "real/dev/sub"),
    "the file read removed (exists)": lambda r: (r / "real/dev/f").unlink(),
    "the file read now a link to a copy": lambda r: _file_to_link(r, "real/dev/f"),
    "the link l now a directory (lexists, ltype)": lambda r: _link_to_dir(r, "l"),
    "the tree gone": _remove_all,
    "a missing name created": lambda r: (r / "real/none").mkdir(),
    "the link to a file retargeted": lambda r: _relink(r, "real/dev/x", "sub"),
    "the dangling link resolves": lambda r: _relink(r, "real/dangle", "dev"),
    "a file in the listed directory": lambda r: (r / "real/empty/new").touch(),
    "the listed directory a link to itself moved": lambda r: _dir_to_link(r, "real/empty"),
    "the bare directory a link to itself moved": lambda r: _dir_to_link(r, "real/bare"),
    "the bare directory removed": lambda r: (r / "real/bare").rmdir(),
}


def _truth(scope: ReadOnce) -> bool:
    """Whether any recorded input answers differently now: each asked again with the
    system call itself, the implied ones included."""
    for key, (data, size) in scope.files.items():
        if read_file(key, size) != data:  # outside a scope: the read itself
            return True
    for here, target in scope.links.items():
        try:
            now: object = os.readlink(here)
        except OSError as e:
            now = e.errno
        if now != target:
            return True
    for d, names in scope.listings.items():
        try:
            now = os.listdir(d)
        except OSError as e:
            now = e.errno
        if now != names:
            return True
    return any(not inputs._same(inputs._ask(fn), answer)  # noqa: SLF001
               for fn, answer in scope.inputs.values())


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_recheck_sees_a_change_exactly_when_an_input_answers_differently(
        tmp_path: Path, change: str) -> None:
    _tree(tmp_path)
    scope = _read(tmp_path)
    recheck = inputs.Recheck(scope)
    CHANGES[change](tmp_path)
    truth = _truth(scope)
    assert truth == (change != "none")
    assert (recheck.changed() is not None) == truth

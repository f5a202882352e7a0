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
from pathlib import Path
from typing import Callable

import pytest

from sysverbs.ground import inputs
from sysverbs.ground.sysfs_read import ReadOnce, listdir, read_file, read_sysfs_file


def _tree(root: Path) -> None:
    """``real/dev`` holding the file ``f`` and the directory ``sub`` (file ``g``);
    ``l`` a link to ``real``; ``real/lnk`` a link to ``dev``; ``real/dev/x`` a link to
    ``f``."""
    (root / "real" / "dev" / "sub").mkdir(parents=True)
    (root / "real" / "dev" / "f").write_text("f\n")
    (root / "real" / "dev" / "sub" / "g").write_text("g\n")
    (root / "real" / "dev" / "x").symlink_to("f")
    (root / "l").symlink_to("real")
    (root / "real" / "lnk").symlink_to("dev")


def _read(root: Path) -> ReadOnce:
    p = str(root)
    scope = ReadOnce()
    with scope:
        assert read_sysfs_file(p + "/l/dev/f", 64) == b"f"  # through the link l
        assert read_sysfs_file(p + "/real/lnk/sub/g", 64) == b"g"  # through real/lnk
        assert sorted(listdir(p + "/real/dev/sub")) == [b"g"]
        # implied: a file read, a directory above one, a link's own readlink
        assert inputs.exists(p + "/l/dev/f") is True
        assert inputs.exists(p + "/l/dev") is True
        assert inputs.isdir(p + "/l/dev") is True
        assert inputs.isdir(p + "/real/lnk") is True  # followed: real/dev
        assert inputs.isdir(p + "/real/dev/sub") is True
        assert inputs.lexists(p + "/real/dev") is True
        assert inputs.lexists(p + "/l") is True  # a link: its readlink was asked
        assert inputs.ltype(p + "/l/dev") == stat.S_IFDIR
        assert inputs.ltype(p + "/real/lnk") == stat.S_IFLNK
        assert inputs.realpath(p + "/l/lnk/sub") == os.fsencode(p + "/real/dev/sub")
        # asked again: nothing read below them, or an answer the walk does not give
        assert inputs.exists(p + "/real/none") is False
        assert inputs.isdir(p + "/l/dev/f") is False
        assert inputs.ltype(p + "/l/dev/f") == stat.S_IFREG
        assert inputs.lexists(p + "/real/dev/x") is True  # its readlink not asked
        assert inputs.realpath(p + "/real/dev/x") == os.fsencode(p + "/real/dev/f")
        assert inputs.isdir(p + "/real") is True  # (above a file read: implied)
    return scope


def _asked(scope: ReadOnce) -> list[tuple[object, ...]]:
    return [name for name, _, _ in inputs.Recheck(scope).others]


def test_the_walk_implies_what_it_answers(tmp_path: Path) -> None:
    _tree(tmp_path)
    scope = _read(tmp_path)
    b = os.fsencode(str(tmp_path))
    assert _asked(scope) == [
        ("exists", b + b"/real/none"), ("isdir", b + b"/l/dev/f"),
        ("ltype", b + b"/l/dev/f"), ("lexists", b + b"/real/dev/x"),
        ("realpath", b + b"/real/dev/x")]
    recheck = inputs.Recheck(scope)
    assert recheck.recorded["isdir"] == 5 and recheck.recorded["ltype"] == 3
    recorded = (len(scope.files) + len(scope.links) + len(scope.listings)
                + len(scope.inputs))
    assert recheck.count == recorded - 11 and recheck.changed() is None


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


#: each change of the tree (the implied inputs it would change, in words)
CHANGES: dict[str, Callable[[Path], object]] = {
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
    "the file read now a link to a copy": lambda r: (
        shutil.copy(r / "real/dev/f", r / "real/dev/f2"), (r / "real/dev/f").unlink(),
        (r / "real/dev/f").symlink_to("f2")),
    "the link l now a directory (lexists, ltype)": lambda r: (
        (r / "l").unlink(), shutil.copytree(r / "real", r / "l", symlinks=True)),
    "the tree gone": lambda r: [shutil.rmtree(r / n) if (r / n).is_dir() and not (
        r / n).is_symlink() else (r / n).unlink() for n in os.listdir(r)],
    "a missing name created": lambda r: (r / "real/none").mkdir(),
    "the dangling-free link retargeted": lambda r: ((r / "real/dev/x").unlink(),
                                                    (r / "real/dev/x").symlink_to("sub")),
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

"""The suite's fixed-name scratch directories follow no link.

The suite ran ``makedirs(/dev/shm/sysverbs-test, exist_ok=True)`` then ``chmod 1777``:
a link planted at that name by any local user made its target (``/etc``) world-writable
when root ran the tests.  Here a temporary directory stands for ``/dev/shm`` (and for
the temporary directory of the fixture cache): a link planted at the name is refused
(:class:`tests.scratch.ScratchError`) and its target keeps its mode; so are a file, a
dangling link (nothing is made at its target) and a directory of another user.  The
kernel lab's work directory (``/var/tmp/sysverbs-kernel-lab-<digest>``, a name its
runs share) is made the same way.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

import pytest

from tests import staging
from tests.conftest import fast_tmpdir, fixture_cache, require, shared_scratch
from tests.kernel import lab, vmlab
from tests.scratch import ScratchError

#: The two fixed-name directories, each with the base it lives in made injectable.
MAKERS: dict[str, Callable[[str], str]] = {"fast_tmp": shared_scratch,
                                           "fixture cache": fixture_cache}
NAMES = {"fast_tmp": "sysverbs-test", "fixture cache": f"sysverbs-test-cache-{os.getuid()}"}
MODES = {"fast_tmp": 0o1777, "fixture cache": 0o700}


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize("which", MAKERS)
def test_made_fresh_with_its_mode(tmp_path: Path, which: str) -> None:
    old = os.umask(0o077)  # the mode is set, not left to the umask
    try:
        path = MAKERS[which](str(tmp_path))
    finally:
        os.umask(old)
    assert path == str(tmp_path / NAMES[which])
    st = os.lstat(path)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
    assert _mode(Path(path)) == MODES[which]
    os.chmod(path, 0o755)  # an existing directory of ours gets its mode back
    assert MAKERS[which](str(tmp_path)) == path and _mode(Path(path)) == MODES[which]


@pytest.mark.parametrize("which", MAKERS)
def test_a_planted_link_is_refused_and_its_target_untouched(tmp_path: Path,
                                                           which: str) -> None:
    target = tmp_path / "etc"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    shm = tmp_path / "shm"
    shm.mkdir()
    (shm / NAMES[which]).symlink_to(target)
    with pytest.raises(ScratchError, match="is a symbolic link"):
        MAKERS[which](str(shm))
    assert _mode(target) == 0o755
    assert os.readlink(shm / NAMES[which]) == str(target)  # left as it was


@pytest.mark.parametrize("which", MAKERS)
def test_a_file_or_a_dangling_link_is_refused(tmp_path: Path, which: str) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / NAMES[which]).write_text("x")
    os.chmod(tmp_path / "a" / NAMES[which], 0o644)
    with pytest.raises(ScratchError, match="is not a directory"):
        MAKERS[which](str(tmp_path / "a"))
    assert _mode(tmp_path / "a" / NAMES[which]) == 0o644
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / NAMES[which]).symlink_to(tmp_path / "nowhere")
    with pytest.raises(ScratchError, match="is a symbolic link"):
        MAKERS[which](str(tmp_path / "b"))
    assert not os.path.lexists(tmp_path / "nowhere")


@pytest.mark.parametrize("which", MAKERS)
def test_a_directory_of_another_user_is_refused(tmp_path: Path, which: str) -> None:
    require(None if os.geteuid() == 0 else "not root (cannot give a directory away)",
            "chown to uid 65534")
    planted = tmp_path / NAMES[which]
    planted.mkdir()
    os.chmod(planted, 0o777)
    os.chown(planted, 65534, 65534)
    with pytest.raises(ScratchError, match="belongs to uid 65534"):
        MAKERS[which](str(tmp_path))
    assert _mode(planted) == 0o777 and os.lstat(planted).st_uid == 65534


def test_the_kernel_labs_workdir_refuses_a_planted_link() -> None:
    base = Path(tempfile.mkdtemp(dir=vmlab.visible_tmp()))  # where the VM would see it
    try:
        target = base / "root"
        target.mkdir()
        target.chmod(0o700)
        (base / "sysverbs-kernel-lab-0").symlink_to(target)
        with pytest.raises(ScratchError, match="is a symbolic link"):
            lab.lab_workdir(base / "sysverbs-kernel-lab-0", "unused")
        assert _mode(target) == 0o700  # was chmod-ed 0755 through the link
        made = lab.lab_workdir(base / "sysverbs-kernel-lab-1", "unused")
        assert made == base / "sysverbs-kernel-lab-1" and _mode(made) == 0o755
    finally:
        shutil.rmtree(base)


def test_another_users_run_takes_roots_shared_directory_as_it_is() -> None:
    """As uid 65534: root's ``sysverbs-test`` with mode 1777 is used (not changed), root's
    with another mode is refused (it cannot be made right), a fresh one is its own."""
    require(None if os.geteuid() == 0 else "not root (cannot run as uid 65534)",
            "setpriv to uid 65534")
    python, code = staging.python_and_code(unprivileged=True)
    script = ("import sys\nfrom tests.scratch import ScratchError, scratch_dir\n"
              "try:\n    print(scratch_dir(sys.argv[1], 'sysverbs-test', 0o1777, shared=True))\n"
              "except ScratchError as e:\n    print('refused', e)\n")
    with fast_tmpdir("sv-scratch-") as base:
        for name in ("a", "b", "c"):
            (base / name).mkdir()
            os.chmod(base / name, 0o1777)
        for name, mode in (("a", 0o1777), ("b", 0o755)):
            (base / name / "sysverbs-test").mkdir()
            os.chmod(base / name / "sysverbs-test", mode)
        out = {name: subprocess.run([*staging.AS_NOBODY, python, "-c", script, str(base / name)],
                                    capture_output=True, text=True, timeout=60, cwd="/",
                                    env=staging.user_env()).stdout.strip()
               for name in ("a", "b", "c")}
        assert out["a"] == str(base / "a" / "sysverbs-test")
        assert out["b"].startswith("refused") and "belongs to uid 0" in out["b"], out
        assert _mode(base / "b" / "sysverbs-test") == 0o755
        assert out["c"] == str(base / "c" / "sysverbs-test")
        st = os.lstat(base / "c" / "sysverbs-test")
        assert st.st_uid == staging.NOBODY and stat.S_IMODE(st.st_mode) == 0o1777

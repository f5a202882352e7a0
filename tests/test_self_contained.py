"""The clone holds everything its tests read.

The audit hook of tests/conftest.py fails a test that opens a sibling of the
repository (such as ``../shared``).  Here: the hook's rule, the hook at work, and the
tests that once read data from beside the repository, run from a copy of the checkout
(its tracked files) in an empty directory with ``CI=true``: they pass and none skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import OUTSIDE, REPO, OutsideReads, fast_tmp, fast_tmpdir, require

#: The tests that read ../shared until the data moved into tests/data.
FORMERLY_SHARED = (
    "tests/test_provider_data.py",
    "tests/test_attributes_captures.py",
    "tests/test_location.py",
)


def test_the_rule() -> None:
    rule = OutsideReads(Path("/srv/work/repo"), "/tmp")
    assert rule.active
    assert rule.forbidden("/srv/work/shared/spec/providers-v44.json")
    assert rule.forbidden("/srv/work/repo/../shared/x")
    assert rule.forbidden("/srv/work/repo-other/x")  # a prefix of the name is not inside
    assert rule.forbidden("/srv/work")
    assert not rule.forbidden("/srv/work/repo/tests/data/spec/providers-v44.json")
    assert not rule.forbidden("/srv/work/repo")
    assert not rule.forbidden("/etc/hostname")  # system files: libibverbs' config, /proc
    assert not rule.forbidden("/tmp/pytest-of-root/x")
    rule("open", ("/srv/work/shared/a", "r", 0))
    rule("open", (3, "r", 0))  # a file descriptor
    rule("compile", ("/srv/work/shared/b",))
    assert rule.seen == ["open /srv/work/shared/a"]
    # a checkout inside the temporary directory: its siblings are temporary files
    assert not OutsideReads(Path("/tmp/clone"), "/tmp").active


def test_the_hook_sees_a_read_beside_the_repository() -> None:
    if not OUTSIDE.active:  # this checkout lies in the temporary directory
        assert str(REPO.parent).startswith(OUTSIDE.tmp.rstrip("/"))
        return
    sibling = REPO.parent / "no-such-sibling-of-the-repository" / "data.json"
    with pytest.raises(FileNotFoundError):
        open(sibling)
    assert OUTSIDE.seen == [f"open {sibling}"]
    OUTSIDE.seen.clear()  # (else this test fails, as it should)
    open(REPO / "pyproject.toml").close()
    assert OUTSIDE.seen == []


def _tracked_files() -> list[str]:
    require(None if shutil.which("git") else "git is not installed", "git")
    proc = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
    )
    require(None if proc.returncode == 0 else f"not a git checkout: {proc.stderr!r}",
            "the project's git checkout")
    return [os.fsdecode(f) for f in proc.stdout.split(b"\0") if f]


def test_formerly_shared_tests_pass_from_a_bare_copy() -> None:
    """A copy of the tracked files in an empty directory, nothing beside it: the tests
    that used to read ../shared pass there under CI=true, and none is skipped."""
    with fast_tmpdir("sv-clone-") as base:
        _run_from_a_copy(base / "empty" / "sysverbs")


#: The tests that run something as uid 65534 (the oracle probes, ``sysverbs doctor``).
UNPRIVILEGED = (
    "tests/test_oracle_core.py::test_config_dir_unreadable_as_user",
    "tests/test_oracle_core.py::test_unreadable_files_as_user",
    "tests/test_oracle_core.py::test_memlock_warning",
    "tests/test_diagnose.py::test_scenario",
    "tests/test_diagnose.py::test_every_code_has_a_scenario",
    "tests/test_staging.py",
)


def test_unprivileged_tests_pass_from_a_private_copy() -> None:
    """A copy of the checkout below a directory only root may enter (``mktemp -d``,
    mode 0700, as root's home on Debian): the tests that run something as an
    unprivileged user pass there (they run a staged copy of the code,
    tests/staging.py), and none is skipped."""
    private = Path(tempfile.mkdtemp(prefix="sv-private-", dir=fast_tmp()))
    try:
        assert os.stat(private).st_mode & 0o777 == 0o700
        _run_from_a_copy(private / "sysverbs", UNPRIVILEGED)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _run_from_a_copy(copy: Path, tests: tuple[str, ...] = FORMERLY_SHARED) -> None:
    for name in _tracked_files():
        src = REPO / name
        if not src.is_file():
            continue  # deleted in the work tree
        dst = copy / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    assert sorted(os.listdir(copy.parent)) == ["sysverbs"]
    env = dict(os.environ, CI="true", PYTHONDONTWRITEBYTECODE="1", TMPDIR=fast_tmp())
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    where = subprocess.run([sys.executable, "-c", "import sysverbs; print(sysverbs.__file__)"],
                           cwd=copy, env=env, capture_output=True, text=True)
    assert where.stdout.strip().startswith(str(copy)), where  # the copy's code, not ours
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-rs", *tests],
        cwd=copy, env=env, capture_output=True, text=True, timeout=600,
    )
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in summary and "skipped" not in summary and "error" not in summary, summary

"""Shared fixtures: the libibverbs oracle and world-readable temporary roots; two
rules for every test.

* No test reads outside the repository (everything a test needs is in it, see
  tests/data/PROVENANCE.md).  An audit hook sees every ``open`` (and, on CPython,
  directory listing) of this process; one below the repository's parent directory
  but outside the repository (a sibling such as ``../shared``) fails the test, or the
  collection.  The system temporary directory is allowed, so that where the
  repository itself lies in it, the hook checks nothing; tests/test_self_contained.py
  then runs the tests from a copy of the checkout with nothing beside it.
* Big throwaway trees (the oracle's fixture hosts, hwloc's generated trees,
  umockdev's testbeds) go to :func:`fast_tmp`.
* Under ``CI=true`` nothing skips: a skip is reported as a failure (an oracle that is
  unavailable in CI is a failed check, see :func:`require`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.fuzz import profiles
from tests.oracle import harness
from tests.scratch import scratch_dir

REPO = Path(__file__).resolve().parents[1]


def fixture_cache(base: str) -> str:
    """The suite's fixture cache (``sysverbs --fixture``, :mod:`sysverbs.testing.cache`):
    a directory of its own below the temporary directory ``base``, never the user's
    ``~/.cache``; shared by the xdist workers and kept between runs (every use checks
    the entry, and rebuilds one that changed).  Mode 0700, this user's, never a link
    (:func:`tests.scratch.scratch_dir`)."""
    return scratch_dir(base, f"sysverbs-test-cache-{os.getuid()}", 0o700)


# Set before any test runs, so that the commands the tests start inherit it.
os.environ["XDG_CACHE_HOME"] = fixture_cache(tempfile.gettempdir())


@functools.cache
def fast_tmp() -> str:
    """Where the big throwaway trees go: ``/dev/shm/sysverbs-test`` when ``/dev/shm``
    is a tmpfs with 2 GB free, else the usual temporary directory.

    The suite writes tens of thousands of small files; on this project's CI machines
    (ext4 on a virtual disk) creating and removing them was most of the suite's
    system time: a generated PCI tree of 1,100 files took 1.7 s there and 0.17 s on
    the tmpfs.  The trees it holds are compared only with themselves (both libraries
    read the same tree), never with a readdir order written in a test: tmpfs lists a
    directory in creation order, ext4 (like the kernel's sysfs) in name-hash order.
    """
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
        with open("/proc/self/mounts") as f:
            tmpfs = any(line.split()[1:3] == [shm, "tmpfs"] for line in f)
    except OSError:
        return tempfile.gettempdir()
    if not tmpfs or st.f_bavail * st.f_frsize < 2 << 30:
        return tempfile.gettempdir()
    return shared_scratch(shm)


def shared_scratch(base: str) -> str:
    """``base/sysverbs-test``, mode 1777 (the unprivileged oracle runs must reach their
    trees): this user's, or root's; never a link, never ``chmod``-ed through one
    (:func:`tests.scratch.scratch_dir`)."""
    return scratch_dir(base, "sysverbs-test", 0o1777, shared=True)


@contextlib.contextmanager
def fast_tmpdir(prefix: str) -> Iterator[Path]:
    """A fresh directory in :func:`fast_tmp` that any user can read, removed after."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=fast_tmp()))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def lists_by_name(directory: Path) -> bool:
    """Whether ``directory``'s filesystem lists a directory by its entries' names alone
    (ext4 and the kernel's sysfs: by name hash), so that two trees holding the same
    names list them in the same order, however they were made; False where the order
    is the creation order (tmpfs, btrfs, XFS's small directories)."""
    names = [f"uverbs{i}" for i in range(8)]
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        lists = []
        for sub, order in (("a", names), ("b", names[::-1])):
            os.mkdir(os.path.join(tmp, sub))
            for name in order:
                os.mkdir(os.path.join(tmp, sub, name))
            lists.append(os.listdir(os.path.join(tmp, sub)))
    return lists[0] == lists[1]


def same_lines(got: str, shown: str) -> bool:
    """``got`` has the lines of ``shown``, in any order: the check for an example that
    lists devices in libibverbs' order, the readdir order of the tree's
    ``class/infiniband_verbs``, which depends on the filesystem the tree lies on (a
    doc's example shows the order of the machine that wrote it).  That order itself is
    checked byte for byte against the real tools on every fixture
    (``tests/test_oracle_cli.py``)."""
    return sorted(got.splitlines()) == sorted(shown.splitlines())


class OutsideReads:
    """The audit hook's rule and what it saw: opens below ``repo``'s parent that are
    neither in ``repo`` nor in the temporary directory ``tmp``."""

    EVENTS = frozenset({"open", "os.listdir", "os.scandir"})

    def __init__(self, repo: Path, tmp: str) -> None:
        self.repo = os.path.join(os.fspath(repo), "")
        self.parent = os.path.join(os.path.dirname(os.fspath(repo).rstrip("/")), "")
        self.tmp = os.path.join(os.path.realpath(tmp), "")
        self.seen: list[str] = []

    @property
    def active(self) -> bool:
        return not self.parent.startswith(self.tmp)

    def forbidden(self, path: str) -> bool:
        if not path.startswith("/"):
            try:
                path = os.path.join(os.getcwd(), path)
            except OSError:  # no current directory: nothing to compare with
                return False
        full = os.path.join(os.path.normpath(path), "")
        return (full.startswith(self.parent) and not full.startswith(self.repo)
                and not full.startswith(self.tmp))

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in self.EVENTS or not args:
            return
        path = args[0]
        if isinstance(path, int) or path is None:
            return
        try:
            text = os.fsdecode(path)
        except TypeError:
            return
        if self.forbidden(text):
            self.seen.append(f"{event} {text}")


OUTSIDE = OutsideReads(REPO, tempfile.gettempdir())
if OUTSIDE.active:
    sys.addaudithook(OUTSIDE)


def _outside_report() -> Optional[str]:
    if not OUTSIDE.seen:
        return None
    seen, OUTSIDE.seen[:] = list(OUTSIDE.seen), []
    return ("read outside the repository (tests may read only what the repository "
            f"holds; put the data in tests/data): {sorted(set(seen))[:10]}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Every Hypothesis test draws from the run's seed (tests/fuzz/profiles.py), the
    same in every pytest-xdist worker (they inherit ``SYSVERBS_FUZZ_SEED``)."""
    given = config.getoption("hypothesis_seed", None)
    if given is not None and given != str(profiles.SEED):
        raise pytest.UsageError("repeat a run's examples with SYSVERBS_FUZZ_SEED=<seed>, "
                                "not --hypothesis-seed")
    config.option.hypothesis_seed = str(profiles.SEED)


def pytest_report_header() -> str:
    return profiles.seed_line()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The seed again at the end (``-q`` prints no header)."""
    terminalreporter.write_line(profiles.seed_line())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    problem = _outside_report()
    if problem:
        raise pytest.UsageError(f"while collecting, a test module {problem}")


@pytest.fixture(autouse=True)
def _reads_stay_in_the_repository() -> Iterator[None]:
    OUTSIDE.seen.clear()
    yield
    problem = _outside_report()
    if problem:
        pytest.fail(f"this test {problem}", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, Any, None]:
    """Under CI=true a skip is a failure: the check it stands for did not run."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") == "true" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true (a skip is a failure in CI): {reason}"


def require(reason: str | None, what: str) -> None:
    """Skip when an oracle is unavailable, but fail under CI=true: a skipped oracle
    is a failed oracle."""
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} unavailable in CI: {reason}")
    pytest.skip(f"{what} unavailable: {reason}")


@pytest.fixture(scope="session")
def oracle_ready() -> None:
    require(harness.unavailable_reason(), "libibverbs oracle")


@pytest.fixture
def ftmp() -> Iterator[Path]:
    """A fresh directory in :func:`fast_tmp` (a tmpfs when there is one) for throwaway
    trees, for tests that do not depend on the order in which a directory lists."""
    with fast_tmpdir("sv-") as path:
        yield path


@pytest.fixture
def otmp(oracle_ready: None, ftmp: Path) -> Path:
    """A temporary directory any user can read (for unprivileged oracle runs)."""
    return ftmp


@pytest.fixture
def fast_fixture_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--fixture`` run in-process materializes its host in :mod:`tempfile`'s
    directory: make that :func:`fast_tmp` for the test."""
    monkeypatch.setattr(tempfile, "tempdir", fast_tmp())


# The CPU each test costs, this process's and its waited-for children's (user +
# system), one line per test appended to $SYSVERBS_TEST_CPU: what the suite's time on
# a 2-core CI machine is made of, whatever the load of the machine that measures it
# (a wall-clock --durations on a loaded machine ranks tests by their waiting).
_CPU_LOG = os.environ.get("SYSVERBS_TEST_CPU")


if _CPU_LOG:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Generator[None, None, None]:
        import resource

        def cpu() -> float:
            own = resource.getrusage(resource.RUSAGE_SELF)
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

        start = cpu()
        yield
        with open(str(_CPU_LOG), "a", encoding="utf-8") as log:
            log.write(f"{cpu() - start:.3f} {item.nodeid}\n")

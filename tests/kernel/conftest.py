"""The kernel lab for pytest: the ``kernel`` marker and one VM boot per session.

The ``lab`` fixture boots the VM once and runs every scenario in it (see
``scenarios.py``); each test then checks one scenario's results.  When the VM
cannot start (no qemu, no kernel image, not root, boot failure) the tests are
skipped with the reason, or fail when ``CI=true``.  Logs are kept under a
temporary directory that every failure names; it is removed when every kernel
test passed.  ``SV_LAB_REUSE=<that directory>`` re-checks kept results without
booting.  Under pytest-xdist the first worker that needs the lab boots it and the
others reuse its results (a file lock in pytest's shared temporary directory).
``SV_LAB_SHARED=<directory>``: a process started before pytest boots there
(``python -m tests.kernel.lab --shared <directory>``, as ``make pytest`` does) and
the tests wait for its results, so that the boot runs beside the rest of the suite.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.kernel import lab as lab_mod
from tests.kernel import numa_vm, vmlab

_FAILED_KEY = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kernel: runs scenarios under a real Linux kernel with rxe devices (qemu VM; needs root, "
        "qemu-system-x86, linux-image-amd64, busybox-static)",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and item.get_closest_marker("kernel"):
        item.session.stash[_FAILED_KEY] = True


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under CI=true: a kernel lab that cannot run is a failed check there."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"kernel lab unavailable in CI: {reason}", pytrace=False)
    pytest.skip(f"kernel lab unavailable: {reason}")


def _unless_ok(done: dict[str, str]) -> None:
    """A boot's outcome (:func:`lab.boot`) that is not ``ok``, as a pytest outcome."""
    if done["kind"] == "unavailable":
        unavailable(done["message"])
    if done["kind"] == "fail":
        pytest.fail(done["message"], pytrace=False)


def _boot_or_raise() -> lab_mod.LabResults:
    """One boot (or the reason it cannot happen, raised as a pytest outcome)."""
    done, results = lab_mod.boot()
    _unless_ok(done)
    assert results is not None
    return results


def _shared_boot(base: Path) -> lab_mod.LabResults:
    """One boot for the whole run (:func:`lab.shared_boot`): under pytest-xdist the first
    worker boots, the others wait and reuse its results; with ``SV_LAB_SHARED`` set
    (``make pytest``), a process started before pytest boots and the tests wait for it."""
    _unless_ok(lab_mod.shared_boot(base))
    return lab_mod.load_results(base / "lab")


@pytest.fixture(scope="session")
def lab(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[lab_mod.LabResults]:
    reuse = os.environ.get("SV_LAB_REUSE")
    if reuse:  # re-check the results kept by an earlier run, without booting
        yield lab_mod.load_results(Path(reuse))
        return
    shared = os.environ.get("SV_LAB_SHARED")
    if shared:  # booted (or booting) beside this run; its owner removes the directory
        yield _shared_boot(Path(shared))
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # One boot for the whole run, in pytest's shared (self-cleaning) temp dir.
        base = tmp_path_factory.getbasetemp().parent / "sysverbs-kernel-lab"
        if vmlab.hidden_in_vm(base):  # e.g. TMPDIR on /dev/shm: a directory it sees
            digest = hashlib.sha256(str(base).encode()).hexdigest()[:12]
            base = vmlab.visible_tmp() / f"sysverbs-kernel-lab-{digest}"
        yield _shared_boot(base)
        return
    results = _boot_or_raise()
    yield results
    if not request.session.stash.get(_FAILED_KEY, False):
        shutil.rmtree(results.workdir, ignore_errors=True)


def _base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bool]:
    """Where the boot goes, and whether this run owns (and removes) it."""
    shared = os.environ.get("SV_LAB_SHARED")
    if shared:  # `python -m tests.kernel.lab --shared` boots it there (make test)
        return Path(shared) / "numa", False
    digest = hashlib.sha256(str(tmp_path_factory.getbasetemp()).encode()).hexdigest()[:12]
    return vmlab.visible_tmp() / f"sysverbs-numa-lab-{digest}", True


@pytest.fixture(scope="session")
def numa(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[numa_vm.NumaResults]:
    """The NUMA machine's one boot (``numa_vm.py``), for test_numa_lab.py and
    test_acs_lab.py: ``SV_NUMA_REUSE=<directory>`` re-checks kept results."""
    reuse = os.environ.get("SV_NUMA_REUSE")
    if reuse:
        yield numa_vm.load_results(Path(reuse))
        return
    base, owned = _base(tmp_path_factory)
    done = numa_vm.shared_boot(base)
    if done["kind"] == "unavailable":
        unavailable(done["message"])
    if done["kind"] == "fail":
        pytest.fail(done["message"], pytrace=False)
    failed = request.session.testsfailed
    yield numa_vm.load_results(base / "lab")
    if owned and request.session.testsfailed == failed:
        shutil.rmtree(base, ignore_errors=True)

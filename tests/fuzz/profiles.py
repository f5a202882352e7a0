"""Hypothesis profiles, the run's seed and progress for the property tests.

Every property test in tests/ takes its number of examples from
:func:`fuzz_settings` (``ci=``, ``deep=``); ``tests/test_docs.py`` checks that
docs/reliability.md's table of them is the code's.

``SYSVERBS_FUZZ_PROFILE``:

* ``ci`` (default, ``make test``): each test's ``ci`` count;
* ``deep`` (``make fuzz``): each test's ``deep`` count (ten to twenty times more).

Both draw their examples from one seed per run (no ``derandomize``, no example
database): ``SYSVERBS_FUZZ_SEED``, or a fresh one from ``os.urandom`` that is put
into the environment, so that pytest-xdist's workers and child processes use the
same one.  ``tests/conftest.py`` hands it to Hypothesis (``--hypothesis-seed``) and
prints it in the header and the summary of every run; a failure's message names it
too (:func:`reproduce_hint`).  ``SYSVERBS_FUZZ_SEED=<seed>`` repeats a run's
examples.

Every health check but ``function_scoped_fixture`` is on (see ``_BASE``).
``deadline=None``: an example's time is not a result
(a loaded machine, a child process per example).

Under PyPy the ``ci`` profile runs a tenth of its examples (at least 10): the
pypy3 run of ``make test`` is there to show that the code works on Python 3.9 and
a second implementation, and the CPython run beside it explores the inputs with
the whole count.

``SYSVERBS_FUZZ_EXAMPLES`` overrides the number of examples.
"""

from __future__ import annotations

import os
import platform
import time

import pytest
from hypothesis import HealthCheck, Phase, settings

from tests.fuzz.model import Case
from tests.fuzz.runner import Runner

__all__ = ["PROFILE", "SEED", "fuzz_settings", "reproduce_hint", "seed_line", "Progress", "check"]

PROFILE = os.environ.get("SYSVERBS_FUZZ_PROFILE", "ci")
if PROFILE not in ("ci", "deep"):
    raise pytest.UsageError(f"SYSVERBS_FUZZ_PROFILE must be ci or deep, not {PROFILE!r}")


def _run_seed() -> int:
    """``SYSVERBS_FUZZ_SEED``, else a fresh seed, put into the environment for the
    processes this one starts (pytest-xdist's workers among them)."""
    value = os.environ.get("SYSVERBS_FUZZ_SEED") or str(int.from_bytes(os.urandom(4), "big"))
    os.environ["SYSVERBS_FUZZ_SEED"] = value
    return int(value)


SEED = _run_seed()
_BASE = settings(
    deadline=None,
    database=None,
    print_blob=True,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    # The one check that is off: two property tests take a function-scoped fixture
    # that is meant to be set up once for all of their examples (test_cparse.py's
    # c_locale sets the C locale for the test; test_nccl_oracle.py's any_host picks
    # one of two session-scoped NCCL hosts).  The checks of the examples themselves
    # (too slow, too much filtered, too large...) are all on.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def fuzz_settings(ci: int, deep: int) -> settings:
    """The profile's settings with its number of examples (or SYSVERBS_FUZZ_EXAMPLES)."""
    if PROFILE == "ci" and platform.python_implementation() == "PyPy":
        ci = max(10, ci // 10)
    n = int(os.environ.get("SYSVERBS_FUZZ_EXAMPLES") or (ci if PROFILE == "ci" else deep))
    return settings(_BASE, max_examples=n)


def reproduce_hint() -> str:
    return (f"profile {PROFILE}, seed {SEED} "
            f"(repeat: SYSVERBS_FUZZ_PROFILE={PROFILE} SYSVERBS_FUZZ_SEED={SEED})")


def seed_line() -> str:
    """The line tests/conftest.py prints at the start and at the end of a run."""
    return f"sysverbs property tests: {reproduce_hint()}"


class Progress:
    """Counts examples and prints a line to the terminal every ``every`` examples."""

    def __init__(self, config: pytest.Config, what: str, every: int = 100) -> None:
        self.config = config
        self.what = what
        self.every = every
        self.count = 0
        self.start = time.monotonic()

    def say(self, text: str) -> None:
        capman = self.config.pluginmanager.getplugin("capturemanager")
        if capman is None:
            print(text, flush=True)
            return
        with capman.global_and_fixture_disabled():
            print(text, flush=True)

    def tick(self) -> None:
        self.count += 1
        if self.count % self.every == 0:
            dt = time.monotonic() - self.start
            self.say(
                f"\n[{self.what}] {self.count} examples in {dt:.0f} s "
                f"({self.count / dt:.1f}/s), {reproduce_hint()}"
            )


def check(runner: Runner, case: Case) -> None:
    """Run one case; on any difference fail with both outputs and the case as source."""
    outcome = runner.run(case)
    diffs = outcome.differences()
    if diffs:
        raise AssertionError(
            f"sysverbs differs from libibverbs ({case.summary()}; {reproduce_hint()}):\n\n"
            + "\n\n".join(diffs)
            + "\n\nAdd to tests/fuzz/regressions.py:\n\n"
            + case.source("new_case")
        )

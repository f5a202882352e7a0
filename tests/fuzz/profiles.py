"""Hypothesis profiles, seeds and progress for the fuzz tests (tests/test_fuzz_*.py).

``SYSVERBS_FUZZ_PROFILE``:

* ``ci`` (default): ``derandomize=True``, so the examples are a pure function of
  the test: CI is reproducible and a failure reproduces by re-running the test
  (no example database is read or written);
* ``deep`` (``make fuzz``): ten times the examples (25 for the comparisons with
  libibverbs and NCCL, which start processes per example), with the seed
  ``SYSVERBS_FUZZ_SEED`` (a random one when unset), printed at the start, in
  every progress line and in every failure, so any run can be repeated exactly.

Under PyPy the ``ci`` profile runs a tenth of its examples (at least 10): the
pypy3 run of ``make test`` is there to show that the code works on Python 3.9 and
a second implementation, and the CPython run beside it explores the inputs with
the whole count (derandomized, both start from the same examples).

``SYSVERBS_FUZZ_EXAMPLES`` overrides the number of examples.
"""

from __future__ import annotations

import os
import platform
import random
import time

import pytest
from hypothesis import HealthCheck, Phase, settings

from tests.fuzz.model import Case
from tests.fuzz.runner import Runner

__all__ = ["PROFILE", "SEED", "fuzz_settings", "reproduce_hint", "Progress", "check"]

PROFILE = os.environ.get("SYSVERBS_FUZZ_PROFILE", "ci")
if PROFILE not in ("ci", "deep"):
    raise pytest.UsageError(f"SYSVERBS_FUZZ_PROFILE must be ci or deep, not {PROFILE!r}")
SEED = int(os.environ.get("SYSVERBS_FUZZ_SEED") or random.SystemRandom().getrandbits(32))
_COMMON = settings(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
)
settings.register_profile("sysverbs-fuzz-ci", _COMMON, max_examples=500, derandomize=True)
settings.register_profile("sysverbs-fuzz-deep", _COMMON, max_examples=5000)


def fuzz_settings(ci: int, deep: int) -> settings:
    """The profile's settings with its number of examples (or SYSVERBS_FUZZ_EXAMPLES)."""
    base = settings.get_profile(f"sysverbs-fuzz-{PROFILE}")
    if PROFILE == "ci" and platform.python_implementation() == "PyPy":
        ci = max(10, ci // 10)
    n = int(os.environ.get("SYSVERBS_FUZZ_EXAMPLES") or (ci if PROFILE == "ci" else deep))
    return settings(base, max_examples=n)


def reproduce_hint() -> str:
    if PROFILE == "ci":
        return "profile ci (derandomized: re-run the test to reproduce)"
    return f"profile deep, seed {SEED} (SYSVERBS_FUZZ_PROFILE=deep SYSVERBS_FUZZ_SEED={SEED})"


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

"""Differential fuzzing: thousands of generated trees, sysverbs vs the real libibverbs.

Each example (tests/fuzz/strategies.py) is built twice (or once when the plan only
reads it) and run with libibverbs and with sysverbs, each in a fresh process in a
private mount namespace (tests/fuzz/runner.py); every field, the order, device
identity across calls, errno, the exit status and the stderr bytes must match.
One case in four is static (``Case.static``): the program linked with Debian's static
libibverbs.a and one of strategies.STATIC_VARIANTS as RDMA_STATIC_PROVIDERS
(tests/oracle/static_probe.c ``--fuzz``) runs in place of the dynamic library, and
sysverbs with ``static_providers``.  Where the static oracle cannot be built the run
draws dynamic cases only and test_static_oracle_is_available skips; under CI=true both
fail.

Profiles (``SYSVERBS_FUZZ_PROFILE``, tests/fuzz/profiles.py):

* ``ci`` (default): 200 examples; ``deep`` (``make fuzz``): 5,000.  Both draw the
  seed from ``SYSVERBS_FUZZ_SEED`` (a fresh one per run when unset), printed in
  pytest's header and summary, so a failure can be repeated exactly.

``SYSVERBS_FUZZ_EXAMPLES`` overrides the number of examples.  Progress goes to the
terminal every 100 examples.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from typing import Any, Optional

import pytest
from hypothesis import Phase, given, seed, settings
from hypothesis import strategies as st

from tests.conftest import require
from tests.fuzz import model, regressions
from tests.fuzz.model import Case, Link
from tests.fuzz.probe import Labels
from tests.fuzz.profiles import PROFILE, SEED, Progress, check, fuzz_settings, reproduce_hint
from tests.fuzz.runner import Runner
from tests.fuzz.strategies import STATIC_VARIANTS, cases, unprivileged_cases
from tests.oracle import static

pytestmark = pytest.mark.oracle
STATIC_ORACLE = "static libibverbs oracle (the fuzzer's static cases)"


@pytest.fixture(scope="module")
def runner(oracle_ready: None) -> Iterator[Runner]:
    with Runner() as r:
        yield r


@pytest.fixture(scope="module")
def static_reason() -> Optional[str]:
    """Why the static cases cannot run (None: they can); fails under CI=true."""
    reason = static.unavailable_reason()
    if reason is not None and os.environ.get("CI") == "true":
        require(reason, STATIC_ORACLE)
    return reason


@pytest.fixture(scope="module")
def variants(runner: Runner, static_reason: Optional[str]) -> tuple[str, ...]:
    """STATIC_VARIANTS, each program built (or found on disk) before the first example;
    none where the static oracle is unavailable."""
    if static_reason is not None:
        return ()
    for variant in STATIC_VARIANTS:
        runner.static_binary(variant)
    return STATIC_VARIANTS


def test_static_oracle_is_available(static_reason: Optional[str]) -> None:
    """The skip that says the fuzz run below drew no static case (a failure in CI)."""
    require(static_reason, STATIC_ORACLE)


def test_differential(
    runner: Runner, variants: tuple[str, ...], pytestconfig: pytest.Config
) -> None:
    """The main fuzz test: generated trees, plans and environments (see the module doc)."""
    progress = Progress(pytestconfig, "fuzz")
    progress.say(f"\n[fuzz] {reproduce_hint()}, spawn mode {runner.mode}")
    test_seed = SEED if PROFILE == "deep" else None
    drawn = {"static": 0}

    @fuzz_settings(ci=200, deep=5000)
    @given(cases(static=variants))
    def one(case: Case) -> None:
        progress.tick()
        drawn["static"] += case.static is not None
        check(runner, case)

    if test_seed is not None:
        one = seed(test_seed)(one)
    one()
    dt = time.monotonic() - progress.start
    progress.say(
        f"\n[fuzz] done: {progress.count} examples ({drawn['static']} static) in {dt:.0f} s "
        f"({progress.count / max(dt, 1e-9):.1f}/s), no difference"
    )


@pytest.mark.parametrize("name", sorted(regressions.REGRESSIONS))
def test_regression(runner: Runner, static_reason: Optional[str], name: str) -> None:
    """Every difference the fuzzer ever found stays fixed."""
    case = regressions.REGRESSIONS[name]
    if case.static is not None:
        require(static_reason, STATIC_ORACLE)
    outcome = runner.run(case)
    assert outcome.differences() == []
    expect = regressions.EXPECT.get(name)
    if expect is not None:
        assert expect in outcome.real.stderr + outcome.real.stdout.encode(errors="surrogateescape")


def test_a_static_case_runs_the_static_program(
    runner: Runner, static_reason: Optional[str]
) -> None:
    """A static case's oracle is the static program: with no provider linked ("") it
    lists nothing where the dynamic library lists rxe0, and so does sysverbs; with rxe
    linked it lists rxe0 and ignores the config file's driver.  Case.source() prints
    the field, so a failing static case pastes into tests/fuzz/regressions.py."""
    require(static_reason, STATIC_ORACLE)
    base = regressions.REGRESSIONS["driver_name_too_long_in_config"]
    got = {}
    for value in (None, "", "rxe,mlx4"):
        case = dataclasses.replace(base, static=value)
        outcome = runner.run(case)
        assert outcome.differences() == []
        assert outcome.oracle == ("libibverbs" if value is None else "static")
        got[value] = ([d["name"] for d in outcome.real.results()[0]["devices"]],
                      b"couldn't load driver" in outcome.real.stderr)
        assert eval(case.source("c").partition("= ")[2], vars(model)) == case
    assert got == {None: (["rxe0"], True), "": ([], False), "rxe,mlx4": (["rxe0"], False)}
    assert "    static='rxe,mlx4',\n" in case.source()


def test_fork_server_matches_a_fresh_interpreter(variants: tuple[str, ...]) -> None:
    """The fast path (a fork server's child that unshares, binds, sets rlimit and
    drops privileges itself) prints exactly what a new interpreter under unshare(1),
    mount(8), prlimit(1) and setpriv(1) prints (tests/oracle/harness.py's way), for
    both implementations, as root and unprivileged, and for the static program (the
    child executes it, or unshare(1)... do)."""
    seen = [0]
    conf = fuzz_settings(ci=20, deep=400)
    with Runner("fork") as fast:

        @settings(conf, phases=(Phase.generate,))
        @given(st.one_of(cases(max_devices=8, static=variants),
                         unprivileged_cases(static=variants)))
        def one(case: Case) -> None:
            fast.mode = "fork"
            a = fast.run(case)
            fast.mode = "exec"
            b = fast.run(case)
            for x, y in ((a.real, b.real), (a.ours, b.ours)):
                assert (x.returncode, x.stdout, x.stderr) == (y.returncode, y.stdout, y.stderr)
            seen[0] += 1

        one()
    assert seen[0] == conf.max_examples


def test_excluded_bnxt_re_long_dev_path_crashes_libibverbs(runner: Runner) -> None:
    """Why strategies.BNXT_RE_PREFIXES exists: the oracle itself crashes on this case
    (try_driver calls bnxt_re's missing uninit_device).  If a libibverbs update fixes
    it, this test fails and the exclusion can go."""
    tree = dict(regressions.REGRESSIONS["driver_name_too_long_in_config"].tree)
    tree.update(
        {
            "sys/devices/d9/uv/ibdev": b"bnxt_re0\n",
            "sys/devices/d9/uv/dev": b"231:9\n",
            "sys/devices/d9/uv/abi_version": b"1\n",
            "sys/devices/d9/ib/node_type": b"1\n",
            "sys/devices/d9/ib/device": Link(".."),
            "sys/devices/d9/modalias": b"pci:v000014E4d00001614sv00000000sd00000000bc02\n",
            "sys/class/infiniband_verbs/uverbs19": Link("../../devices/d9/uv"),
            "sys/class/infiniband/bnxt_re0": Link("../../devices/d9/ib"),
            "dev/infiniband/uverbs19": b"",
        }
    )
    crash = runner.run(Case(tree=tree, sysfs_len=224))  # dev_path: 224 + 24 + 8 bytes
    assert crash.real.returncode == -11
    assert crash.ours.returncode == 0 and crash.ours.results()[0]["devices"][0]["name"] == "rxe0"
    fine = runner.run(Case(tree=tree, sysfs_len=223))  # 255 bytes: bnxt_re takes it
    assert fine.differences() == []
    assert sorted(d["name"] for d in fine.real.results()[0]["devices"]) == ["bnxt_re0", "rxe0"]


def test_probe_labels_follow_identity() -> None:
    """The probe's labels (tests/fuzz/probe.py, Labels): exact identity for devices
    that a list holds; for devices no list holds (whose address malloc may reuse),
    the canonical rule: the same fields keep the label, other fields get a new one."""

    def dev(name: str, guid: str = "0") -> dict[str, Any]:
        return {"name": name, "dev_name": "uverbs-" + name, "guid": guid}

    labels = Labels()
    assert labels.listed(0, [(100, dev("a")), (200, dev("b"))]) == ["d0", "d1"]
    # held by list 0: matched by address, whatever the fields
    assert labels.listed(1, [(300, dev("c")), (200, dev("b"))]) == ["d2", "d1"]
    labels.freed(0)
    labels.freed(1)
    # nothing holds d1 or d2 now: the address 100 (d0, out of the list and freed) and
    # the address 300 with other fields are new devices; b with equal fields keeps d1
    got = labels.listed(2, [(100, dev("a")), (300, dev("c", "1")), (400, dev("b"))])
    assert got == ["d3", "d4", "d1"]
    # held by list 2: exact again; the address 200 no longer names d1
    assert labels.listed(3, [(400, dev("b")), (200, dev("e"))]) == ["d1", "d5"]

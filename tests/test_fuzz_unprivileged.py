"""Differential fuzzing as an unprivileged caller, and the setuid rule.

The same comparison as tests/test_fuzz_differential.py, but each probe drops to
uid/gid 65534 with no groups (``setpriv --reuid=65534 --regid=65534
--clear-groups``) after its mounts, with random files and directories of the
tree and of the config directory made unreadable or untraversable (modes 000,
700, 711, 744, ...) and RLIMIT_MEMLOCK around libibverbs' 32 KiB warning
threshold; or keeps euid 0 with ruid 65534 (``setpriv --ruid=65534``), where
libibverbs ignores SYSFS_PATH and RDMAV_DRIVERS/IBV_DRIVERS (docs/behaviour.md: The sysfs
root; Matching providers).

Profiles as in test_fuzz_differential.py (``SYSVERBS_FUZZ_PROFILE``): 150
examples in CI, 1,500 in the deep profile.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from hypothesis import given, seed

from tests.fuzz.model import Case, Dir, Entry
from tests.fuzz.profiles import PROFILE, SEED, Progress, check, fuzz_settings
from tests.fuzz.regressions import rxe_entries
from tests.fuzz.runner import Runner
from tests.fuzz.strategies import unprivileged_cases

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def runner(oracle_ready: None) -> Iterator[Runner]:
    with Runner() as r:
        yield r


def test_differential_unprivileged(runner: Runner, pytestconfig: pytest.Config) -> None:
    progress = Progress(pytestconfig, "fuzz-unprivileged")

    @fuzz_settings(ci=80, deep=1500)
    @given(unprivileged_cases())
    def one(case: Case) -> None:
        progress.tick()
        check(runner, case)

    if PROFILE == "deep":
        one = seed(SEED)(one)
    one()
    dt = time.monotonic() - progress.start
    progress.say(f"\n[fuzz-unprivileged] done: {progress.count} examples in {dt:.0f} s")


def _tree() -> dict[str, Entry]:
    tree: dict[str, Entry] = {
        "sys/class/infiniband_verbs": Dir(),
        "sys/class/infiniband": Dir(),
        "sys/class/infiniband_verbs/abi_version": b"6\n",
    }
    for n, name in enumerate(["rxe0", "rxe1", "rxe2"]):
        tree.update(rxe_entries(n, name))
    return tree


@pytest.mark.parametrize(
    "modes, expect",
    [
        ({}, 3),
        ({"sys/class/infiniband_verbs": 0o711}, "errno"),  # no readdir: ENOSYS
        ({"sys/class/infiniband_verbs": 0o744}, 0),  # readdir but no openat
        ({"sys/devices/d0/uv/ibdev": 0o600}, 2),
        # The uverbs entry directory must be readable, not only searchable: libibverbs
        # opens it (openat O_RDONLY|O_DIRECTORY) and reads its files through that.
        ({"sys/devices/d0/uv": 0o311}, 2),
        ({"sys/devices/d0/uv": 0o644}, 2),
        ({"sys/devices/d1/ib": 0o700}, 3),  # stat works; node_type unreadable: UNKNOWN
        ({"sys/devices/d2/ib/node_guid": 0o000}, 3),  # GUID 0
        ({"sys/class/infiniband_verbs/abi_version": 0o600}, "errno"),
        ({"etc/libibverbs.d": 0o700}, 0),  # couldn't open config directory
        ({"etc/libibverbs.d/rxe.driver": 0o000}, 0),  # couldn't read config file
    ],
)
def test_unreadable_as_nobody(runner: Runner, modes: dict[str, int], expect: object) -> None:
    case = Case(
        tree=_tree(),
        config={"rxe.driver": b"driver rxe\n"},
        modes=modes,
        user="nobody",
        env={"IBV_SHOW_WARNINGS": "1"},
        steps=[{"op": "list"}, {"op": "list"}],
    )
    outcome = runner.run(case)
    assert outcome.differences() == []
    first = outcome.real.results()[0]
    if expect == "errno":
        assert first["errno"] == 38
    else:
        assert len(first["devices"]) == expect


@pytest.mark.parametrize("memlock", [0, 32768, 32769, None])
def test_memlock_as_nobody(runner: Runner, memlock: int) -> None:
    case = Case(tree=_tree(), user="nobody", memlock=memlock, steps=[{"op": "list"}] * 2)
    outcome = runner.run(case)
    assert outcome.differences() == []
    warned = b"RLIMIT_MEMLOCK is" in outcome.real.stderr
    assert warned == (memlock is not None and memlock <= 32768)


def test_setuid_ignores_sysfs_path_and_driver_env(runner: Runner) -> None:
    """ruid != euid: SYSFS_PATH is ignored (libibverbs reads /sys, which has no
    class/infiniband_verbs on the test hosts) and so is RDMAV_DRIVERS."""
    case = Case(
        tree=_tree(),
        user="setuid",
        env={"RDMAV_DRIVERS": "nosuch", "IBV_SHOW_WARNINGS": "1"},
        steps=[{"op": "list"}, {"op": "list"}],
    )
    outcome = runner.run(case)
    assert outcome.differences() == []
    assert [r["errno"] for r in outcome.real.results()] == [38, 38]
    assert b"nosuch" not in outcome.real.stderr
    # the same tree as root lists all three devices
    assert len(runner.run(Case(tree=_tree())).real.results()[0]["devices"]) == 3

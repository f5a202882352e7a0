"""sysverbs' ``static_providers`` against the REAL static libibverbs and librdmacm
(Debian 12's libibverbs.a/librdmacm.a, rdma-core 44): tests/oracle/static_probe.c built
with ``-DRDMA_STATIC_PROVIDERS=<the same value>`` (no define for ``""``) by
tests/oracle/static.py, one binary per variant, kept on disk.

On every bundled fixture, on hand-made trees where the link order decides, and on trees
of the differential fuzzer's generator (tests/fuzz/strategies.py, drawn from a fixed
seed), each variant's static program and sysverbs (tests/oracle/probe.py and
tests/oracle/rdmacm_probe.py, ``sysverbs`` with ``{"source": "sysfs",
"static_providers": <value>}``) must print the same results and the same stderr bytes:
two ``ibv_get_device_list`` calls, without and with IBV_SHOW_WARNINGS, and
``rdma_get_devices``, the program's own list, ``rdma_get_devices`` again.

The facts that need no sysverbs option (the probe itself, the build's errors, what
a static program ignores) are tests/test_static_probe_build.py's.  CPython only, like
the other oracle files (the Makefile leaves it out of the pypy3 run).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Optional, Union

import pytest

from sysverbs import testing
from sysverbs.testing.cache import fixture_tree
from tests import staging, trees
from tests.conftest import fast_tmpdir, require
from tests.fuzz.model import Case, build_tree, sys_dir_for, sysfs_value
from tests.fuzz.strategies import G, build_case
from tests.oracle import harness, static
from tests.trees import rdma_dev

pytestmark = [pytest.mark.oracle, pytest.mark.usefixtures("static_ready")]

ORACLE = Path(__file__).resolve().parent / "oracle"
SHOW = {"IBV_SHOW_WARNINGS": "1"}
#: sysverbs' static_providers value -> the static program's define (None: no define).
VARIANTS: dict[str, Optional[str]] = {
    "": None, "mlx5": "mlx5", "mlx4,mlx5": "mlx4,mlx5", "all": "all",
    # the order-sensitive pair, both orders (mlx5 comes first on the link line)
    "mlx5,rxe": "mlx5,rxe", "rxe,mlx5": "rxe,mlx5",
}
LIST_OPS = ["list", "list"]
RDMA_OPS = ["rdma_get", "ibv_list", "rdma_get"]
#: Trees of the fuzzer's generator: how many, from which seed, how big.
FUZZ_SEED = 20_260_503
FUZZ_CASES = 24
FUZZ_MAX_DEVICES = 12


@pytest.fixture(scope="module")
def static_ready() -> None:
    require(static.unavailable_reason(), "static libibverbs oracle")


@pytest.fixture(scope="module")
def binaries(static_ready: None) -> dict[str, Path]:
    """Every variant's static program, built (or found on disk) once per session."""
    return {value: static.build(define) for value, define in VARIANTS.items()}


def sysverbs_run(probe: str, src: Path, dst: Path, steps: list[dict[str, Any]],
                 value: Union[str, list[str]], **kw: Any) -> harness.Run:
    """tests/oracle/<probe> sysverbs, with ``static_providers=value``."""
    plan = {"root": str(dst), "steps": steps,
            "options": {"source": "sysfs", "static_providers": value}}
    python, code = staging.python_and_code(bool(kw.get("setpriv")))
    argv = [python, str(code / "tests" / "oracle" / probe), "sysverbs", json.dumps(plan)]
    env = {"PYTHONPATH": str(code), **(kw.pop("env", None) or {})}
    return harness.run_in_ns(src, dst, argv, env=env, **kw)


def difference(real: harness.Run, ours: harness.Run, what: str) -> Optional[str]:
    """None when both printed the same, else what differs (with both outputs)."""
    assert real.returncode == 0, f"{what}: static probe failed: {real.stderr!r}"
    assert ours.returncode == 0, f"{what}: sysverbs failed: {ours.stderr.decode(errors='replace')}"
    if ours.results() == real.results() and ours.stderr == real.stderr:
        return None
    return (f"{what}:\n  static:   {real.stdout!r}\n            {real.stderr!r}\n"
            f"  sysverbs: {ours.stdout!r}\n            {ours.stderr!r}")


def compare(binary: Path, value: Union[str, list[str]], src: Path, dst: Path, *,
            env: Optional[Mapping[str, str]] = None, **kw: Any) -> list[harness.Run]:
    """:func:`differences`, which must be none; the static runs."""
    runs, diffs = differences(binary, value, src, dst, env=env, **kw)
    assert not diffs, "\n".join(diffs)
    return runs


def differences(binary: Path, value: Union[str, list[str]], src: Path, dst: Path, *,
                env: Optional[Mapping[str, str]] = None,
                **kw: Any) -> tuple[list[harness.Run], list[str]]:
    """The static program and sysverbs on one tree: the lists without and with
    IBV_SHOW_WARNINGS (plus ``env``), and librdmacm's calls; the static runs and what
    differed."""
    runs, diffs = [], []
    for ops, probe, extra in ((LIST_OPS, "probe.py", {}), (LIST_OPS, "probe.py", SHOW),
                              (RDMA_OPS, "rdmacm_probe.py", SHOW)):
        full = {**(env or {}), **extra}
        real = static.run(binary, src, dst, ops, env=full, **kw)
        ours = sysverbs_run(probe, src, dst, static.plan_steps(ops), value, env=full, **kw)
        diffs.append(difference(real, ours, f"static_providers={value!r} {' '.join(ops)} "
                                            f"env={full}"))
        runs.append(real)
    return runs, [d for d in diffs if d]


# -- every bundled fixture --------------------------------------------------------------------

FIXTURES = testing.fixture_names()


#: What a recording holds for a device a provider claims: its kernel driver's uevent
#: line (mlx5, mlx4), or rxe's module and device names.
DEVICE_MARKS = {"mlx5": (b"DRIVER=mlx5_core",), "mlx4": (b"DRIVER=mlx4_core",),
                "rxe": (b"rdma_rxe", b"/infiniband/rxe")}


def _has_devices_of(name: str, providers: str) -> bool:
    """Whether fixture ``name`` records a device of one of ``providers`` (those a static
    program linking only them can claim)."""
    text = testing.fixture_path(name).read_bytes()
    return any(mark in text for p in providers.split(",") for mark in DEVICE_MARKS[p])


#: (fixture, variant) pairs: no provider ("") and every provider ("all") on every fixture;
#: a variant that links only some providers on the fixtures with devices of theirs, the
#: only ones where it claims a device (elsewhere it claims none, the case "" compares on
#: every fixture).
CASES = [(name, value) for name in FIXTURES for value in VARIANTS
         if value in ("", "all") or _has_devices_of(name, value)]


@pytest.mark.parametrize(("name", "value"), CASES)
def test_fixture(binaries: dict[str, Path], ftmp: Path, name: str, value: str) -> None:
    root = Path(fixture_tree(name).root)
    (ftmp / "mnt").mkdir()
    runs = compare(binaries[value], value, root, ftmp / "mnt")
    listed = runs[0].results()[0]["devices"]
    if value == "":
        assert listed == []
    if value == "all" and name not in ("empty", "smi", "siw", "mana", "ionic", "usnic"):
        assert listed, f"the static 'all' program found no device in {name}"


# -- where the link order decides --------------------------------------------------------------

MLX4_MODALIAS = "pci:v000015B3d00001003sv000015B3sd00000006bc02sc00i00\n"
PVRDMA_MODALIAS = "pci:v000015ADd00000820sv000015ADsd00000820bc02sc00i00\n"
#: Devices named rxe* (rxe's name entry) with a PCI provider's modalias and an ABI only
#: rxe supports, beside plain ones: the PCI provider, earlier on the link line, is tried
#: first, whatever the order of the names.
ORDER_TREE = trees.host(
    rdma_dev("uverbs0", "rxe_m5", abi="2\n"),
    rdma_dev("uverbs1", "rxe_m4", pci="0000:08:00.0", modalias=MLX4_MODALIAS, abi="1\n"),
    rdma_dev("uverbs2", "rxe_pv", pci="0000:09:00.0", modalias=PVRDMA_MODALIAS, abi="2\n"),
    rdma_dev("uverbs3", "mlx5_0", pci="0000:0a:00.0"),
    rdma_dev("uverbs4", "mlx4_0", pci="0000:0b:00.0", modalias=MLX4_MODALIAS, abi="4\n"),
)
ORDER_VARIANTS = ("mlx5,rxe", "rxe,mlx5", "mlx4,rxe", "rxe,mlx4", "vmw_pvrdma,rxe",
                  "rxe,vmw_pvrdma", "rxe", "mlx4,mlx5,vmw_pvrdma,rxe",
                  "rxe,vmw_pvrdma,mlx5,mlx4", "all", "none")


@pytest.mark.parametrize("value", ORDER_VARIANTS)
def test_link_order(ftmp: Path, value: str) -> None:
    trees.build(ftmp / "tree", ORDER_TREE)
    (ftmp / "mnt").mkdir()
    runs = compare(static.build(value), value, ftmp / "tree", ftmp / "mnt")
    if "," in value:  # the PCI provider's ABI warning, in both orders
        assert b"does not support the kernel ABI" in runs[0].stderr


def test_a_list_of_names_is_the_define(ftmp: Path) -> None:
    """``static_providers=["rxe", "vmw_pvrdma", "mlx4"]`` is ``rxe,vmw_pvrdma,mlx4``."""
    trees.build(ftmp / "tree", ORDER_TREE)
    (ftmp / "mnt").mkdir()
    compare(static.build("rxe,vmw_pvrdma,mlx4"), ["rxe", "vmw_pvrdma", "mlx4"],
            ftmp / "tree", ftmp / "mnt")


@pytest.mark.parametrize("memlock", [32768, 33792])
def test_memlock_as_user(binaries: dict[str, Path], ftmp: Path, memlock: int) -> None:
    """As uid 65534 with a low RLIMIT_MEMLOCK, the static program warns as the dynamic
    library does (once, without IBV_SHOW_WARNINGS)."""
    root = Path(fixture_tree("mlx5-cx7").root)
    (ftmp / "mnt").mkdir()
    runs = compare(binaries["mlx5"], "mlx5", root, ftmp / "mnt", memlock=memlock,
                   setpriv=staging.SETPRIV_NOBODY)
    assert (b"RLIMIT_MEMLOCK is 32768 bytes" in runs[0].stderr) == (memlock == 32768)


# -- the second pass over unclaimed devices ----------------------------------------------------

#: libibverbs' ibverbs_get_device_list tries the driver list a second time over the
#: devices the first pass left unclaimed, once per process, at the first call that leaves
#: one (the dynamic library loads its provider libraries in between); a static program
#: has nothing to load and tries the same providers again, so each message of that first
#: pass (the ABI warning) comes twice
#: (tests/test_static_probe_build.py::test_second_pass_repeats_the_abi_warning).
#: The fuzzer's trees 3, 8 and 17 show it too.
STASH = "sys/class/stash/uverbs9"


def second_pass_tree(root: Path, stash: bool) -> None:
    trees.build(root, trees.host(rdma_dev("uverbs1", "mlx5_0", pci="0000:08:00.0"),
                                 trees.rxe_dev("uverbs9", "rxe0", abi="3\n")))
    if stash:  # rxe0 appears after the first call (the "rename" step)
        (root / STASH).parent.mkdir()
        (root / "sys/class/infiniband_verbs/uverbs9").rename(root / STASH)


@pytest.mark.parametrize("stash", [False, True])
def test_second_pass(ftmp: Path, stash: bool) -> None:
    """A device only rxe's name entry matches, with an ABI rxe refuses, beside a device
    mlx5 takes: there from the start, or appearing after the first call."""
    ops = ["list", "list", "list"]
    if stash:
        ops[1:1] = ["rename", STASH, "sys/class/infiniband_verbs/uverbs9"]
    dst = ftmp / "mnt"
    dst.mkdir()
    diffs = []
    for n, env in enumerate(({}, SHOW)):
        copies = [ftmp / f"{n}-static", ftmp / f"{n}-sysverbs"]
        for copy in copies:
            second_pass_tree(copy, stash)
        real = static.run(static.build("rxe,mlx5"), copies[0], dst, ops, env=env)
        ours = sysverbs_run("probe.py", copies[1], dst, static.plan_steps(ops), "rxe,mlx5",
                            env=env)
        diffs.append(difference(real, ours, f"{' '.join(ops)} env={env}"))
    assert not any(diffs), "\n".join(d for d in diffs if d)


# -- trees of the differential fuzzer ---------------------------------------------------------


class SeededG(G):
    """The fuzzer's choices from a :class:`random.Random` instead of Hypothesis' draw,
    so that the trees are the same in every run and every xdist worker."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__(lambda strategy: None)
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def binary(self, max_size: int, min_size: int = 0) -> bytes:
        return bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(min_size, max_size)))


def fuzz_case(index: int) -> Case:
    """The fuzzer's ``index``-th tree of the fixed seed (no tree changes: one list plan)."""
    return build_case(SeededG(random.Random(FUZZ_SEED + index)), FUZZ_MAX_DEVICES,
                      mutations=False)


@pytest.fixture
def fuzz_dir() -> Iterator[Path]:
    with fast_tmpdir("svst-") as path:
        yield path


@pytest.mark.parametrize("index", range(FUZZ_CASES))
def test_fuzz_tree(binaries: dict[str, Path], fuzz_dir: Path, index: int) -> None:
    """Every variant on one generated tree, with the case's environment, config
    directory and SYSFS_PATH (the static program ignores the config directory and the
    driver variables: so must sysverbs)."""
    case = fuzz_case(index)
    dst = fuzz_dir / "root"
    dst.mkdir()
    src = fuzz_dir / "tree"
    build_tree(src, case.tree, sys_dir_for(case, str(dst)))
    conf: Optional[Path] = None
    if case.config is not None:
        conf = fuzz_dir / "conf"
        build_tree(conf, case.config, dev=False)
    diffs = []
    for value, binary in binaries.items():
        diffs += differences(binary, value, src, dst, env=case.env, config_dir=conf,
                             sysfs_path=sysfs_value(case, str(dst)))[1]
    assert not diffs, "\n".join(diffs)

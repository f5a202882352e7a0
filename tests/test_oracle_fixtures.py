"""Every bundled fixture host, listed by the real libibverbs and by sysverbs.

The fixtures are umockdev recordings of realistic hosts (see sysverbs/testing/fixtures/);
each is materialized into a SYSFS_PATH tree twice and both implementations must
agree on everything, over several calls with devices removed and touched between.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sysverbs import testing
from tests import listing_hosts
from tests.oracle import harness

pytestmark = pytest.mark.oracle

FIXTURES = testing.fixture_names()
SHOW = {"IBV_SHOW_WARNINGS": "1"}


def _build(name: str) -> Any:
    return lambda root: listing_hosts.materialize(name, root)


def _ls(path: Path) -> list[str]:
    return os.listdir(path) if path.is_dir() else []


def _plan(tree: Path) -> list[dict[str, Any]]:
    """list; remove one uverbs entry and touch one IB device; list; free; list."""
    steps: list[dict[str, Any]] = [{"op": "list"}]
    uverbs = sorted(n for n in _ls(tree / "sys/class/infiniband_verbs") if n.startswith("uverbs"))
    ibdevs = sorted(_ls(tree / "sys/class/infiniband"))
    if uverbs:
        steps.append({"op": "remove", "path": f"sys/class/infiniband_verbs/{uverbs[0]}"})
    if len(ibdevs) > 1:
        steps.append({"op": "touch", "path": f"sys/class/infiniband/{ibdevs[-1]}", "seconds": 7})
    steps += [{"op": "list"}, {"op": "free", "list": 0}, {"op": "list"}]
    return steps


def test_fixtures_exist() -> None:
    assert len(FIXTURES) >= 20 and "dgx-demo" in FIXTURES and "empty" in FIXTURES


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize(
    "options",
    [{"rdma_core": "44"}, {"rdma_core": "44", "providers": "builtin"}],
    ids=["installed", "builtin"],
)
def test_fixture_matches_libibverbs(otmp: Path, name: str, options: dict[str, str]) -> None:
    real_src, ours_src, dst = harness.materialize_pair(otmp, _build(name))
    steps = _plan(real_src)
    real = harness.run_impl("libibverbs", real_src, dst, steps, options=options, env=SHOW)
    ours = harness.run_impl("sysverbs", ours_src, dst, steps, options=options, env=SHOW)
    harness.assert_same(real, ours)
    if name not in ("empty", "smi", "siw", "mana", "ionic", "usnic"):
        assert real.results()[0]["devices"], f"libibverbs found no device in {name}"


def test_demo_host_is_realistic(otmp: Path) -> None:
    real_src, _, dst = harness.materialize_pair(otmp, _build("dgx-demo"))
    real = harness.run_impl("libibverbs", real_src, dst, [{"op": "list"}])
    providers = [d["name"] for d in real.results()[0]["devices"]]
    assert sum(n.startswith("mlx5") for n in providers) >= 8
    assert any(n.startswith("rxe") for n in providers)

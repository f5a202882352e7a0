"""Fork safety against the real libibverbs: ibv_fork_init, ibv_is_fork_initialized and the
first-call RDMAV_FORK_SAFE / IBV_FORK_SAFE handling (docs/behaviour.md: The device list across
calls; Fork)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from tests import trees
from tests.oracle import harness
from tests.trees import host, rxe_dev

pytestmark = pytest.mark.oracle

STEPS: list[dict[str, Any]] = [
    {"op": "fork_status"},
    {"op": "list"},
    {"op": "fork_status"},
    {"op": "fork_init"},
    {"op": "fork_status"},
    {"op": "list"},
]


@pytest.mark.parametrize(
    "env,expected_after_list",
    [
        ({"RDMAV_FORK_SAFE": "1"}, 1),
        ({"RDMAV_FORK_SAFE": ""}, 1),
        ({"IBV_FORK_SAFE": "yes"}, 1),
        ({"RDMAV_FORK_SAFE": "0", "IBV_FORK_SAFE": "1"}, 1),
        ({"RDMAV_FORK_SAFE": "0"}, 0),
        ({}, 0),
        ({"RDMAV_HUGEPAGES_SAFE": "0", "RDMAV_FORK_SAFE": "1"}, 1),
    ],
)
@pytest.mark.parametrize("tree_kind", ["devices", "no-class"])
def test_fork_state(
    otmp: Path, env: dict[str, str], expected_after_list: int, tree_kind: str
) -> None:
    tree: Optional[trees.Tree] = (
        host(rxe_dev("uverbs0", "rxe0")) if tree_kind == "devices" else None
    )

    def build(root: Path) -> None:
        trees.build(root, tree or {})
        if tree is None:
            import shutil

            shutil.rmtree(root / "sys")

    real, ours = harness.compare(otmp, build, STEPS, env=env, options={"rdma_core": "44"})
    harness.assert_same(real, ours)
    results = real.results()
    assert results[0]["status"] == 0
    # even a failing list call (ENOSYS, no class dir) enables fork safety first
    assert results[2]["status"] == expected_after_list
    assert results[4]["status"] == 1

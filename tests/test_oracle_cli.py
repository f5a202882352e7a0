"""``sysverbs devices`` and ``sysverbs devinfo -l`` against the real ibv_devices and
ibv_devinfo -l: stdout, stderr and exit status, byte for byte."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import trees
from tests.conftest import require
from tests.oracle import harness
from tests.trees import host, rdma_dev, rxe_dev

pytestmark = pytest.mark.oracle

TOOLS = {
    "devices": (["ibv_devices"], ["devices"]),
    "devinfo-l": (["ibv_devinfo", "-l"], ["devinfo", "-l"]),
}

TREES = {
    "two": host(rdma_dev("uverbs0", "mlx5_0"), rxe_dev("uverbs1", "rxe0")),
    "one": host(rxe_dev("uverbs0", "rxe0", guid="fe80:0000:0000:0001\n")),
    "none": host(),
    "long-name": host(rxe_dev("uverbs0", "rxe_a_rather_long_device_name", guid=None)),
    "unmatched": host(rdma_dev("uverbs0", "siw0", modalias=None)),
    "no-class": {},
    "bad-abi": host(rxe_dev("uverbs0", "rxe0"), class_abi=False),
}


@pytest.fixture(scope="module")
def tools_ready() -> None:
    missing = [t for t in ("ibv_devices", "ibv_devinfo") if shutil.which(t) is None]
    require(
        f"{', '.join(missing)} not installed (apt-get install ibverbs-utils)" if missing else None,
        "ibverbs-utils",
    )


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("tree", sorted(TREES))
def test_tool_output_is_identical(otmp: Path, tools_ready: None, tool: str, tree: str) -> None:
    real_argv, ours_argv = TOOLS[tool]
    t: Any = TREES[tree]
    real_src, ours_src, dst = harness.materialize_pair(otmp, lambda r: trees.build(r, t))
    if tree == "no-class":
        for src in (real_src, ours_src):
            shutil.rmtree(src / "sys")
    env = {"IBV_SHOW_WARNINGS": "1"}
    real = harness.run_in_ns(real_src, dst, real_argv, env=env)
    ours = harness.run_in_ns(ours_src, dst, [sys.executable, "-m", "sysverbs", *ours_argv], env=env)
    assert (ours.returncode, ours.stdout, ours.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )
    if tree == "two":
        assert "mlx5_0" in real.stdout and real.returncode == 0
    if tree == "no-class":
        assert real.returncode in (1, 255)

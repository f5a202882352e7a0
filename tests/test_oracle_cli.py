"""``sysverbs devices`` and ``sysverbs devinfo -l`` against the real ibv_devices and
ibv_devinfo -l: stdout, stderr and exit status, byte for byte, on hand-made trees and
on every bundled fixture (one namespace run per tool and implementation), plus the
``ibv_devinfo`` paths that need no open device (docs/cli.md: no device, ``-d`` unknown,
``-i 0`` usage, ``-l`` ignoring what follows it)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from sysverbs import testing
from tests import listing_hosts, trees
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


def _materialize(otmp: Path, tree: str) -> tuple[Path, Path, Path]:
    """TREES[tree] for the real tool and for sysverbs (``no-class``: without ``sys``)."""
    t: Any = TREES[tree]
    real_src, ours_src, dst = harness.materialize_pair(otmp, lambda r: trees.build(r, t))
    if tree == "no-class":
        for src in (real_src, ours_src):
            shutil.rmtree(src / "sys")
    return real_src, ours_src, dst


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("tree", sorted(TREES))
def test_tool_output_is_identical(otmp: Path, tools_ready: None, tool: str, tree: str) -> None:
    real_argv, ours_argv = TOOLS[tool]
    real_src, ours_src, dst = _materialize(otmp, tree)
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


@pytest.mark.parametrize("fixture", testing.fixture_names())
def test_every_fixture(otmp: Path, tools_ready: None, fixture: str) -> None:
    real_src, ours_src, dst = harness.materialize_pair(
        otmp, lambda r: listing_hosts.materialize(fixture, r))
    env = {"IBV_SHOW_WARNINGS": "1"}
    for tool in sorted(TOOLS):
        real_argv, ours_argv = TOOLS[tool]
        real = harness.run_in_ns(real_src, dst, real_argv, env=env)
        ours = harness.run_in_ns(ours_src, dst, [sys.executable, "-m", "sysverbs", *ours_argv],
                                 env=env)
        assert (ours.returncode, ours.stdout, ours.stderr) == (
            real.returncode, real.stdout, real.stderr), (fixture, tool)
        assert real.returncode == 0, (fixture, tool)


DEVINFO_PATHS = {
    # (tree, ibv_devinfo argv after the program name)
    "no-device": ("none", []),
    "no-device-verbose": ("none", ["-v"]),
    "unknown-device": ("two", ["-d", "nope"]),
    "unknown-device-long": ("two", ["--ib-dev=nope", "-v"]),
    "port-zero": ("two", ["-i", "0"]),
    "port-negative": ("two", ["-i", "-3"]),
    "port-junk": ("two", ["--ib-port", "x"]),
    "port-zero-then-list": ("two", ["-i", "0", "-l"]),
    "list-then-port-zero": ("two", ["-l", "-i", "0"]),
    "list-then-unknown-device": ("two", ["-l", "-d", "nope"]),
    "no-class": ("no-class", []),
}


@pytest.mark.parametrize("case", sorted(DEVINFO_PATHS))
def test_devinfo_error_paths(otmp: Path, tools_ready: None, case: str) -> None:
    tree, argv = DEVINFO_PATHS[case]
    real_src, ours_src, dst = _materialize(otmp, tree)
    real = harness.run_in_ns(real_src, dst, ["ibv_devinfo", *argv])
    ours = harness.run_in_ns(ours_src, dst,
                             [sys.executable, "-m", "sysverbs", "devinfo", *argv])
    assert (ours.returncode, ours.stdout, ours.stderr) == (
        real.returncode, real.stdout, real.stderr)
    assert real.returncode in (0, 1, 255)

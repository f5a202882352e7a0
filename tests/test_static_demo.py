"""docs/static-linking.md's demo: ``sysverbs devices --fixture dgx-demo --static-providers
mlx5`` beside a static ``ibv_devices`` built with ``RDMA_STATIC_PROVIDERS=mlx5`` against
Debian's libibverbs.a, both on the demo fixture: the two blocks of the page are what the
two print, and they are the same (stdout, and stderr with IBV_SHOW_WARNINGS).

CPython only, like the other oracle files (the Makefile leaves it out of the pypy3 run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sysverbs.testing.cache import fixture_tree
from tests.conftest import require
from tests.oracle import static

pytestmark = pytest.mark.oracle

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "static-linking.md"


def _blocks() -> dict[str, str]:
    """The output under each ``$ COMMAND`` line of the page's console blocks."""
    out: dict[str, str] = {}
    for block in re.findall(r"```console\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S):
        lines = block.splitlines(keepends=True)
        command = [i for i, line in enumerate(lines) if line.startswith("$ ")][-1]
        out[lines[command][2:].strip()] = "".join(lines[command + 1:])
    return out


def _sysverbs(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sysverbs", "devices", "--fixture", "dgx-demo",
         "--static-providers", "mlx5"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env})


@pytest.mark.parametrize("show", [False, True])
def test_the_demo_is_what_both_print(show: bool, otmp: Path) -> None:
    require(static.unavailable_reason(), "static libibverbs oracle")
    env = {"IBV_SHOW_WARNINGS": "1"} if show else {}
    host = fixture_tree("dgx-demo")
    dst = otmp / "root"
    dst.mkdir()
    real = static.run(static.build("mlx5"), Path(host.sysfs).parent, dst, ["devices"],
                      env={"IBV_SHOW_WARNINGS": "1" if show else None})
    ours = _sysverbs(env)
    assert (ours.returncode, ours.stdout, ours.stderr.encode()) == (
        real.returncode, real.stdout, real.stderr)
    assert real.returncode == 0 and len(real.stdout.splitlines()) == 18
    if show:
        assert real.stderr.count(b"no userspace device-specific driver found") == 3
        return
    blocks = _blocks()
    assert blocks["sysverbs devices --fixture dgx-demo --static-providers mlx5"] == ours.stdout
    assert blocks["SYSFS_PATH=$DEMO/sys ./static_probe devices"] == real.stdout

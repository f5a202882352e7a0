"""Shared fixtures: the libibverbs oracle and world-readable temporary roots."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.oracle import harness


def require(reason: str | None, what: str) -> None:
    """Skip when an oracle is unavailable, but fail under CI=true: a skipped oracle
    is a failed oracle."""
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} unavailable in CI: {reason}")
    pytest.skip(f"{what} unavailable: {reason}")


@pytest.fixture(scope="session")
def oracle_ready() -> None:
    require(harness.unavailable_reason(), "libibverbs oracle")


@pytest.fixture
def otmp(oracle_ready: None) -> Iterator[Path]:
    """A temporary directory any user can read (for unprivileged oracle runs)."""
    path = Path(tempfile.mkdtemp(prefix="sv-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)

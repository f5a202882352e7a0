"""The real ``umockdev-run``, for the tests that compare with it."""

from __future__ import annotations

import os
import shutil

import pytest


def umockdev_run_or_skip() -> str:
    found = shutil.which("umockdev-run")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("umockdev-run is not installed (required when CI=true)")
        pytest.skip("umockdev-run is not installed")
    return found

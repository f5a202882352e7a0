"""The staged copy that unprivileged children run (tests/staging.py).

Run by tests/test_self_contained.py from a checkout below a 0700 directory too.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests import staging
from tests.conftest import require
from tests.kernel import lab, vmlab

#: Every module of the package, imported by uid 65534 from the staged copy: a lazy
#: import in an unprivileged child (the kernel lab's workers fork after importing a
#: chosen few) must find its file.
_IMPORT_ALL = r"""
import importlib, json, pkgutil, sys
import sysverbs
failed = {}
names = [m.name for m in pkgutil.walk_packages(sysverbs.__path__, "sysverbs.")
         if not m.name.endswith("__main__")]
for name in names:
    try:
        importlib.import_module(name)
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"
print(json.dumps({"file": sysverbs.__file__, "names": names, "failed": failed}))
"""


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    require(None if os.geteuid() == 0 else "needs root (setpriv)", "root")
    return subprocess.run(
        [*staging.AS_NOBODY, *argv],
        capture_output=True, text=True, env=staging.user_env(), cwd="/", timeout=120,
    )


def test_nobody_imports_every_module_from_the_stage() -> None:
    proc = _as_nobody(staging.user_python(), "-c", _IMPORT_ALL)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["file"].startswith(str(staging.stage())), seen["file"]
    assert "sysverbs.sources.netlink.socket" in seen["names"]  # the one the lab's workers missed
    assert len(seen["names"]) > 50
    # not on the bare interpreter's path: pyudev (the package's one dependency) and
    # pytest (for the testing kit's pytest plugin)
    assert {n: e for n, e in seen["failed"].items()
            if e not in ("ModuleNotFoundError: No module named 'pyudev'",
                         "ModuleNotFoundError: No module named 'pytest'")} == {}


def test_nobody_cannot_read_a_private_directory_but_reads_the_stage() -> None:
    private = Path(tempfile.mkdtemp())
    try:
        (private / "f.py").write_text("x = 1\n")
        os.chmod(private / "f.py", 0o644)
        assert not staging.searchable_by_others(private / "f.py")
        denied = _as_nobody("cat", str(private / "f.py"))
        assert denied.returncode != 0 and "Permission denied" in denied.stderr
    finally:
        (private / "f.py").unlink()
        private.rmdir()
    assert staging.searchable_by_others(staging.stage() / "sysverbs" / "__init__.py")
    read = _as_nobody("cat", str(staging.stage() / "tests" / "oracle" / "probe.py"))
    assert read.returncode == 0 and read.stdout


def test_kernel_lab_refuses_a_workdir_its_workers_cannot_reach() -> None:
    private = Path(tempfile.mkdtemp())
    try:
        with pytest.raises(vmlab.VmError, match="search bit"):
            lab.stage_code(private / "lab")
    finally:
        private.rmdir()

"""fleet/files.py's clean-up of temporary files and its errors (issue 41: the mutants of
``make mutation``), in one process: a temporary file another open file description holds
locked, a link planted with a temporary file's name, data that is not bytes.
tests/test_fleet_robust.py has the killed writers and the writers side by side.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from sysverbs.fleet.files import replace_file

STALE = ".sysverbs.prom.1.0123456789abcdef.tmp"


def test_a_locked_temporary_file_is_left_until_it_is_free(tmp_path: Path) -> None:
    """A writer's file (flock held, here by another open of it) is not removed; once
    unlocked it is stale, and the next write removes it."""
    (tmp_path / STALE).write_text("half")
    fd = os.open(tmp_path / STALE, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        replace_file(str(tmp_path), "sysverbs.prom", b"one\n")
        assert sorted(os.listdir(tmp_path)) == [STALE, "sysverbs.prom"]
    finally:
        os.close(fd)
    replace_file(str(tmp_path), "sysverbs.prom", b"two\n")
    assert os.listdir(tmp_path) == ["sysverbs.prom"]
    assert (tmp_path / "sysverbs.prom").read_bytes() == b"two\n"


def test_a_link_with_a_temporary_name_is_not_followed(tmp_path: Path) -> None:
    """A symbolic link named as a temporary file is neither opened nor removed (and the
    file it points to stays)."""
    (tmp_path / "target").write_text("keep")
    (tmp_path / STALE).symlink_to("target")
    assert replace_file(str(tmp_path), "sysverbs.prom", b"x\n") == str(tmp_path / "sysverbs.prom")
    assert sorted(os.listdir(tmp_path)) == [STALE, "sysverbs.prom", "target"]
    assert (tmp_path / "target").read_text() == "keep"


def test_data_that_is_not_bytes(tmp_path: Path) -> None:
    """A TypeError, as it is (no OSError made of it), and no temporary file left."""
    with pytest.raises(TypeError):
        replace_file(str(tmp_path), "sysverbs.prom", "text")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []

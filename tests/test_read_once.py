"""The reader's read-once rule (docs/architecture.md, "One host model"): inside a
:class:`~sysverbs.ground.sysfs_read.ReadOnce` a file is read once, and each read answers
what a plain read of the same size would.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Optional

from sysverbs.ground.sysfs_read import ReadOnce, read_file, read_sysfs_file


def test_read_once_answers_each_size_as_a_read_would(tmp_path: Path) -> None:
    short, full = tmp_path / "short", tmp_path / "full"
    short.write_bytes(b"4: ACTIVE\n")
    full.write_bytes(b"x" * 100)
    missing = tmp_path / "missing"
    paths = [(p, n) for p in (short, full, missing) for n in (4, 10, 11, 64, 100, 101, 4)]
    plain = [read_sysfs_file(str(p), n) for p, n in paths]
    with ReadOnce() as memo:
        assert [read_sysfs_file(str(p), n) for p, n in paths] == plain
        # what a read would give, from one open each (the larger size read again)
        assert set(memo.files) == {memo.key(str(p)) for p in (short, full, missing)}
        short.write_bytes(b"1: DOWN\n")  # read once: the invocation sees one content
        assert read_sysfs_file(str(short), 64) == b"4: ACTIVE"
        assert read_file(str(missing), 8) == errno.ENOENT
    assert read_sysfs_file(str(short), 64) == b"1: DOWN"  # out of it: read again
    # the rules themselves: a read that fills its buffer without a newline is cut
    assert plain[:7] == [None, b"4: ACTIVE", b"4: ACTIVE", b"4: ACTIVE", b"4: ACTIVE",
                         b"4: ACTIVE", None]
    assert plain[7:14] == [None, None, None, None, None, b"x" * 100, None]


def test_read_once_is_per_thread_and_nested_is_the_outer(tmp_path: Path) -> None:
    f = tmp_path / "state"
    f.write_bytes(b"old\n")
    got: list[Optional[bytes]] = []
    with ReadOnce() as outer:
        with ReadOnce() as inner, outer:
            assert read_sysfs_file(str(f), 64) == b"old"
        assert not inner.files and outer.key(str(f)) in outer.files
        f.write_bytes(b"new\n")
        worker = threading.Thread(target=lambda: got.append(read_sysfs_file(str(f), 64)))
        worker.start()
        worker.join()
        assert read_sysfs_file(str(f), 64) == b"old"
    assert got == [b"new"]  # another thread reads the file, not this one's memo
    assert read_sysfs_file(str(f), 64) == b"new"  # each with left as entered


def test_a_failed_read_keeps_its_errno(tmp_path: Path) -> None:
    """The verdict readers tell a missing file from a read that fails: a directory
    opens (O_RDONLY) and its read fails with EISDIR, which comes back negative."""
    with ReadOnce():
        assert read_file(str(tmp_path), 8) == -errno.EISDIR
        assert read_file(str(tmp_path / "none"), 8) == errno.ENOENT
    assert read_file(str(tmp_path), 8) == -errno.EISDIR

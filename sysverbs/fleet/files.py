"""Files that other programs read while they are rewritten: node_exporter's textfile
collector (``*.prom``) and Node Feature Discovery's ``features.d`` (dot files skipped).

:func:`replace_file` writes a temporary dot file in the same directory (``.NAME.*.tmp``:
neither reader takes it), flushes it to disk, gives it mode 0644 (the readers run as
other users: ``prometheus``, NFD's worker) and renames it over ``NAME``: a reader sees
the whole old file or the whole new one, never a part.
"""

from __future__ import annotations

import os
import tempfile

__all__ = ["replace_file"]


def replace_file(directory: str, name: str, data: bytes) -> str:
    """Replace ``directory/name`` with ``data`` atomically (see the module) and return its
    path.  An :class:`OSError` (no such directory, not writable, disk full) leaves no
    temporary file behind."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, 0o644)
            os.fsync(fd)
        finally:
            os.close(fd)
        path = os.path.join(directory, name)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path

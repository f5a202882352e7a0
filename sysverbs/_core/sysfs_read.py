"""The one sysfs reader: libibverbs' ``ibv_read_sysfs_file`` rules, used by every code path.

A read opens the file, does exactly one ``read()`` of at most ``size`` bytes and
then applies these rules (``sysfs.c: ibv_read_sysfs_file``;
docs/behaviour.md: Reading sysfs files):

* open or read fails (missing, EISDIR, EACCES, ELOOP, ...): ``None`` (C: -1);
* the data ends in ``\\n``: the data without that one newline;
* otherwise, shorter than ``size``: the data as read (an empty file gives ``b""``);
* otherwise (``size`` bytes, last one not ``\\n``): ``None``, the value would be cut.

The result may contain NUL bytes; callers that treat it as a C string apply
:func:`sysverbs._core.cparse.cstr`.  Unlike libibverbs the file is opened with
``O_NONBLOCK`` so that a FIFO in a broken tree cannot hang the caller (libibverbs
would block there); for regular and sysfs files this changes nothing.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Union

    PathArg = Union[bytes, str]

__all__ = [
    "read_sysfs_file",
    "IBDEV_SIZE",
    "DEV_SIZE",
    "ABI_SIZE",
    "NODE_TYPE_SIZE",
    "CLASS_ABI_SIZE",
    "MODALIAS_SIZE",
    "NODE_GUID_SIZE",
    "RDMA_CM_ABI_SIZE",
    "PATH_MAX_IBV",
    "NAME_MAX_IBV",
]

#: Buffer sizes libibverbs reads with (docs/behaviour.md: Reading sysfs files).
IBDEV_SIZE = 64
DEV_SIZE = 32
ABI_SIZE = 32
NODE_TYPE_SIZE = 32
CLASS_ABI_SIZE = 8
MODALIAS_SIZE = 512
NODE_GUID_SIZE = 24
RDMA_CM_ABI_SIZE = 8
#: ``IBV_SYSFS_PATH_MAX``: a path must be shorter than this many bytes.
PATH_MAX_IBV = 256
#: ``IBV_SYSFS_NAME_MAX``: a name must be shorter than this many bytes.
NAME_MAX_IBV = 64

_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK


def read_sysfs_file(path: PathArg, size: int, dir_fd: Optional[int] = None) -> Optional[bytes]:
    """Read ``path`` (relative to ``dir_fd`` when given) with libibverbs' rules."""
    try:
        fd = os.open(path, _FLAGS) if dir_fd is None else os.open(path, _FLAGS, dir_fd=dir_fd)
    except (OSError, ValueError):
        return None
    try:
        data = os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)
    if data.endswith(b"\n"):
        return data[:-1]
    if len(data) < size:
        return data
    return None

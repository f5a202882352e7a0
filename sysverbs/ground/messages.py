"""libibverbs' stderr messages, also issued as Python warnings.

Each message is written to ``sys.stderr`` byte for byte as libibverbs writes it,
and issued as a warning of a :class:`SysverbsWarning` subclass.  Those warnings
are ignored by default (a filter appended at import), so nothing is printed
twice; turn them on to capture or filter them::

    import warnings, sysverbs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", sysverbs.SysverbsWarning)
        sysverbs.get_device_list(sysfs_path="/nonexistent")  # doctest: +SKIP

The stderr text can be turned off with :func:`set_stderr` (``None``) without
changing the warnings.
"""

from __future__ import annotations

import io
import os
import sys
import warnings
from _thread import allocate_lock

from .errors import (
    AbiWarning,
    ConfigWarning,
    DriverLoadWarning,
    ForkWarning,
    KernelAbiFatal,
    MemlockWarning,
    NoDriverWarning,
    SysverbsWarning,
    WrongTypeError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO, Optional, TextIO, Union

__all__ = [
    "SysverbsWarning",
    "NoDriverWarning",
    "AbiWarning",
    "KernelAbiFatal",
    "ConfigWarning",
    "DriverLoadWarning",
    "MemlockWarning",
    "ForkWarning",
    "emit",
    "set_stderr",
]

PFX = b"libibverbs: "


warnings.filterwarnings("ignore", category=SysverbsWarning, append=True)

_lock = allocate_lock()
_stream: Union[TextIO, BinaryIO, None, str] = "stderr"


def set_stderr(stream: Union[TextIO, BinaryIO, None]) -> None:
    """Send the libibverbs text to ``stream`` instead of ``sys.stderr`` (None: nowhere).
    Anything else than None or a file object with ``write`` is a
    :class:`~sysverbs.ground.errors.WrongTypeError` now, not at the first message."""
    if stream is not None and not callable(getattr(stream, "write", None)):
        raise WrongTypeError(f"stream must be a file object or None, not "
                             f"{type(stream).__name__}")
    global _stream
    _stream = stream


def _write(data: bytes) -> None:
    target = sys.stderr if _stream == "stderr" else _stream
    if target is None or isinstance(target, str):
        return
    buf: Optional[BinaryIO] = getattr(target, "buffer", None)
    try:
        target.flush()
        if buf is not None:
            buf.write(data)
            buf.flush()
        elif isinstance(target, io.TextIOBase):
            target.write(os.fsdecode(data))
            target.flush()
        else:
            binary: BinaryIO = target  # type: ignore[assignment]
            binary.write(data)
            binary.flush()
    except (OSError, ValueError, TypeError):
        pass


def emit(body: bytes, category: type[SysverbsWarning]) -> None:
    """Print ``libibverbs: <body>`` exactly, and warn with ``category``."""
    data = PFX + body
    with _lock:
        _write(data)
    # Point the warning at the first caller outside sysverbs.
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("sysverbs"):
        frame = frame.f_back
        level += 1
    warnings.warn(os.fsdecode(data).rstrip("\n"), category, stacklevel=level)

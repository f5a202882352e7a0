"""Every exception and warning class of sysverbs: one base per kind.

Exceptions derive from :class:`SysverbsError`; the messages sysverbs reproduces from
libibverbs are warnings deriving from :class:`SysverbsWarning`.  Each class also
derives from the built-in exception that callers caught before it existed
(``ValueError``, ``TypeError``, ``KeyError``, ``OSError``, ``ReferenceError``), so
``except ValueError`` keeps working where it did.

Failures that libibverbs reports with an errno are plain :class:`OSError` (for
example ``ENOSYS`` from :func:`sysverbs.get_device_list` when the kernel ABI is not
supported: libibverbs' ``init.c: ibverbs_init`` returns NULL with that errno).

>>> import sysverbs
>>> try:
...     sysverbs.get_device_list(source="nowhere")
... except sysverbs.ground.errors.UsageError as e:
...     print(e)
source must be one of auto, sysfs, netlink, udev, not 'nowhere'

This module is on the path of ``import sysverbs``: it imports nothing.
"""

from __future__ import annotations

import errno as _errno

__all__ = [
    # exceptions
    "SysverbsError",
    "UsageError",
    "WrongTypeError",
    "UnknownFixtureError",
    "NotFoundError",
    "RecordingError",
    "RecordLimitError",
    "DeviceFreedError",
    "SourceUnavailable",
    "UdevUnavailable",
    "ScanError",
    "NetlinkFailure",
    "BindingError",
    "OutOfScopeError",
    "PyverbsError",
    "PyverbsRDMAError",
    "PyverbsUserError",
    # warnings
    "SysverbsWarning",
    "NoDriverWarning",
    "AbiWarning",
    "KernelAbiFatal",
    "ConfigWarning",
    "DriverLoadWarning",
    "MemlockWarning",
    "ForkWarning",
    "RecordingWarning",
]


# ---------------------------------------------------------------------- exceptions


class SysverbsError(Exception):
    """Base class of every exception sysverbs raises itself (OSError aside)."""


class UsageError(SysverbsError, ValueError):
    """An argument sysverbs rejects: a caller's mistake (an unknown ``source``, a
    path with a NUL byte, a list freed twice...).  The command line prints it and
    exits with status 2."""


class WrongTypeError(UsageError, TypeError):
    """An argument of the wrong type (``sysfs_path=3``, a list that
    :func:`sysverbs.get_device_list` did not return...)."""


class UnknownFixtureError(UsageError, KeyError):
    """No bundled fixture has this name (see :func:`sysverbs.testing.fixture_names`)."""

    def __str__(self) -> str:  # KeyError's str() would quote the message
        return str(self.args[0]) if self.args else ""


class NotFoundError(SysverbsError, LookupError):
    """The host has no such thing: a named device or port, a GPU for a local rank.  Not a
    usage error: the same words can be right on another host (the command line exits 1)."""


class RecordingError(UsageError):
    """A umockdev recording that sysverbs cannot read or write (the text says where)."""


class RecordLimitError(RecordingError):
    """:func:`sysverbs.testing.record_host` stopped: the host is larger than its
    :class:`~sysverbs.testing.Limits`."""


class DeviceFreedError(SysverbsError, ReferenceError):
    """A device was used after every list holding it was freed and no context held it.

    It is a ``ReferenceError`` too, as it was before this module existed."""


class SourceUnavailable(SysverbsError):
    """A device source cannot be used here; ``source="auto"`` falls back to the next
    one (libibverbs' ``ibverbs_get_device_list``: netlink first, then sysfs).

    When the caller asked for this source by name, the call raises ``OSError`` with
    :attr:`errno` (a :class:`UdevUnavailable` itself, which is an ``OSError``).
    """

    def __init__(self, why: str, err: int = _errno.EPROTONOSUPPORT) -> None:
        super().__init__(why)
        self.errno = err


class UdevUnavailable(SourceUnavailable, OSError):  # type: ignore[misc]  # errno: int
    """A udev feature cannot be used here: pyudev or libudev is missing, or udev does
    not describe the sysfs tree asked for.  ``str(e)`` says which, and what to do.

    The same exception everywhere (the udev source, :mod:`sysverbs.devices.enrich`,
    :mod:`sysverbs.devices.monitor`); being an ``OSError`` with :attr:`errno`, it is also what
    ``get_device_list(source="udev")`` raises.
    """

    def __init__(self, why: str, err: int = _errno.EPROTONOSUPPORT) -> None:
        super().__init__(why, err)
        self.args = (why, err)

    def __str__(self) -> str:
        return str(self.args[0])


class ScanError(SysverbsError):
    """The whole sysfs enumeration failed with ``errno`` at ``path`` (the callers
    raise it as ``OSError``, as libibverbs returns NULL with that errno)."""

    def __init__(self, err: int, path: bytes) -> None:
        super().__init__(err, path)
        self.errno = err
        self.path = path


class NetlinkFailure(SysverbsError):
    """A netlink request failed the way libibverbs treats as failure (``errno`` says
    why); the netlink source then falls back to sysfs."""

    def __init__(self, why: str, err: int) -> None:
        super().__init__(why)
        self.errno = err


class BindingError(SysverbsError, OSError):
    """A rank cannot be bound as asked (:mod:`sysverbs.rank.launch`): ``str(e)`` names the
    cause.  ``errno``: the kernel's when it refused the binding (EPERM from a seccomp
    filter, EINVAL...), EINVAL when the plan's CPU or memory set is empty (what
    ``sched_setaffinity`` gives for an empty mask), ENOSYS where sysverbs does not know
    ``set_mempolicy``'s number."""

    def __init__(self, why: str, err: int = _errno.EINVAL) -> None:
        super().__init__(why)
        self.args = (why, err)
        self.errno = err

    def __str__(self) -> str:
        return str(self.args[0])


# ------------------------------------------------------------------------ warnings


class SysverbsWarning(UserWarning):
    """Base class of every message sysverbs reproduces from libibverbs."""


class NoDriverWarning(SysverbsWarning):
    """``no userspace device-specific driver found`` (only with IBV_SHOW_WARNINGS)."""


class AbiWarning(SysverbsWarning):
    """``Driver X does not support the kernel ABI`` (always printed)."""


class KernelAbiFatal(SysverbsWarning):
    """``Fatal: kernel ABI version N doesn't match library version 6.``

    The category of that message only: libibverbs prints it and then fails, so the
    call raises ``OSError(ENOSYS)`` after issuing this warning.  (A warning class,
    not an exception: with warnings turned into errors it is raised in place of the
    OSError.)"""


class ConfigWarning(SysverbsWarning):
    """Problems with the provider config directory and its files."""


class DriverLoadWarning(SysverbsWarning):
    """``couldn't load driver``: a provider library named by the config is missing."""


class MemlockWarning(SysverbsWarning):
    """The first-call RLIMIT_MEMLOCK warning for non-root users."""


class ForkWarning(SysverbsWarning):
    """``fork()-safety requested but init failed``."""


class RecordingWarning(SysverbsWarning):
    """A recording's link that :func:`sysverbs.testing.materialize` left out: its target
    is absolute or would lead out of the root (see :mod:`sysverbs.testing.umockdev`)."""


# ------------------------------------------------- out of scope; pyverbs' exceptions


class OutOfScopeError(SysverbsError, ImportError):
    """A name that belongs to what sysverbs does not do: opening a device and using it
    (a verbs context, PD, QP, CQ, MR...).  :mod:`sysverbs.compat.pyverbs` raises it for
    pyverbs' names and modules beyond discovery; ``str(e)`` says what sysverbs offers
    instead.  An ``ImportError``, so that ``from ... import Context`` shows the text."""


class PyverbsError(SysverbsError):
    """pyverbs' base exception (:mod:`sysverbs.compat.pyverbs.pyverbs_error`).

    As pyverbs: ``str(e)`` is ``msg``, followed by ``. Errno: N, <strerror>`` when
    ``error_code`` is not -1."""

    def __init__(self, msg: str, error_code: int = -1) -> None:
        if error_code != -1:
            from os import strerror  # (this module imports nothing at its top)

            msg = f"{msg}. Errno: {error_code}, {strerror(error_code)}"
        super().__init__(msg)


class PyverbsRDMAError(PyverbsError, OSError):
    """pyverbs' exception for a failed rdma-core call: :attr:`error_code` is pyverbs'
    (-1 where pyverbs passes none, as ``get_device_list()`` does).  Also an
    ``OSError`` whose ``errno`` is the one libibverbs set (``ENOSYS``, ``ENOMEM``...),
    where it is known, else ``error_code`` (``None`` for -1)."""

    def __init__(self, msg: str, error_code: int = -1, *,
                 errno: int | None = None) -> None:
        super().__init__(msg, error_code)
        self._error_code = error_code
        err = errno if errno is not None else (None if error_code == -1 else error_code)
        self.errno = err  # None where unknown, as OSError's
        if err is not None:
            from os import strerror

            self.strerror = strerror(err)

    @property
    def error_code(self) -> int:
        """pyverbs' error code: an errno, or -1."""
        return self._error_code

    def __str__(self) -> str:  # pyverbs' text, not OSError's "[Errno N] ..."
        return str(self.args[0]) if self.args else ""


class PyverbsUserError(PyverbsError, UsageError):
    """pyverbs' exception for a caller's mistake; also a :class:`UsageError`."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)

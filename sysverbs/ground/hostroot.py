"""Which machine is read: :class:`HostRoot`, built by :meth:`HostRoot.resolve` and its
one defaulting rule (docs/architecture.md, "Which machine is read: HostRoot").

* ``sysfs``: the argument, else ``$SYSFS_PATH`` as libibverbs reads it (the first 256
  bytes, trailing ``/`` stripped, read once per process, ignored when the real and
  effective user ids differ), else ``/sys``;
* ``live``: the sysfs root is ``/sys`` (after ``abspath``): this machine;
* ``proc``: the argument, else the ``proc`` beside the sysfs root (``/proc`` for a live
  host, ``R/proc`` for the tree ``R/sys``), so that nothing outside a tree is read;
* ``dev``: the argument, else ``/dev/infiniband``, and ``config_dir``: the argument,
  else ``/etc/libibverbs.d``: libibverbs' compiled-in paths, whatever the sysfs root
  (a tree's own are given: ``--fixture`` and the testing kit pass them).

Imported by ``import sysverbs`` (the engine's options resolve through it): only ``os``.
"""

from __future__ import annotations

import os

from .errors import UsageError, WrongTypeError
from .records import FrozenRecord, init

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Union

    PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

__all__ = ["HostRoot", "path_arg", "env_sysfs_root", "DEFAULT_SYSFS", "DEFAULT_DEV_DIR",
           "DEFAULT_PROC", "DEFAULT_CONFIG_DIR"]

DEFAULT_SYSFS = b"/sys"
DEFAULT_DEV_DIR = b"/dev/infiniband"
DEFAULT_PROC = b"/proc"
DEFAULT_CONFIG_DIR = b"/etc/libibverbs.d"

_env_root: Optional[bytes] = None


def path_arg(value: PathArg, what: str) -> bytes:
    """A path argument as bytes; :class:`~sysverbs.ground.errors.WrongTypeError` for a
    non-path, :class:`~sysverbs.ground.errors.UsageError` for a NUL byte or a str that no file
    name decodes to (a surrogate outside :func:`os.fsdecode`'s ``\\udc80-\\udcff``)."""
    try:
        raw = os.fsencode(value)
    except TypeError:
        raise WrongTypeError(f"{what} must be a path, not {type(value).__name__}") from None
    except UnicodeEncodeError:  # a surrogate that os.fsdecode() never makes
        raise UsageError(f"{what} is not a file name: {value!r}") from None
    if b"\0" in raw:
        raise UsageError(f"{what} contains a NUL byte")
    return raw


def env_sysfs_root() -> bytes:
    """``ibv_get_sysfs_path``: SYSFS_PATH (first 256 bytes, trailing '/' stripped) or /sys.

    Computed once and cached for the process, as libibverbs does; ignored when the
    real and effective user ids differ.
    """
    global _env_root
    if _env_root is None:
        env = os.environb.get(b"SYSFS_PATH") if os.getuid() == os.geteuid() else None
        _env_root = env[:256].rstrip(b"/") if env is not None else DEFAULT_SYSFS
    return _env_root


def _given(value: Optional[PathArg], default: bytes, what: str) -> bytes:
    """A path argument with its trailing ``/`` stripped (``/`` itself to ``""``, as
    libibverbs keeps a root: ``root + b"/class"`` stays right), else ``default``."""
    if value is None:
        return default
    return path_arg(value, what).rstrip(b"/")


class HostRoot(FrozenRecord):
    """Where one machine is read: ``sysfs`` (stands for ``/sys``), ``dev`` (for
    ``/dev/infiniband``), ``proc`` (for ``/proc``), ``config_dir`` (for
    ``/etc/libibverbs.d``), all bytes, with str views (``sysfs_path``...); ``live``:
    this machine; ``recorded``: a recording (a bundled fixture), whose device nodes are
    stand-ins; ``name``: the fixture's name.  Made by :meth:`resolve` only."""

    __slots__ = _fields = ("sysfs", "dev", "proc", "config_dir", "live", "recorded", "name")
    sysfs: bytes
    dev: bytes
    proc: bytes
    config_dir: bytes
    live: bool
    recorded: bool
    name: Optional[str]

    def __init__(self, sysfs: bytes, dev: bytes, proc: bytes, config_dir: bytes,
                 live: bool, recorded: bool, name: Optional[str]) -> None:
        init(self, sysfs, dev, proc, config_dir, live, recorded, name)

    @classmethod
    def resolve(cls, sysfs_path: Optional[PathArg] = None, dev_dir: Optional[PathArg] = None,
                proc_path: Optional[PathArg] = None, config_dir: Optional[PathArg] = None,
                recorded: bool = False, name: Optional[str] = None) -> HostRoot:
        """The host these paths name, by the one rule of the module's docstring.  A path
        that is not one is a :class:`~sysverbs.ground.errors.WrongTypeError`, a NUL byte in
        it a :class:`~sysverbs.ground.errors.UsageError`; so are a non-bool ``recorded`` and
        a non-str ``name``."""
        if not isinstance(recorded, bool):
            raise WrongTypeError(f"recorded must be a bool, not {type(recorded).__name__}")
        if name is not None and not isinstance(name, str):
            raise WrongTypeError(f"name must be a str, not {type(name).__name__}")
        sysfs = (env_sysfs_root() if sysfs_path is None
                 else _given(sysfs_path, DEFAULT_SYSFS, "sysfs_path"))
        live = os.path.abspath(sysfs or b"/") == DEFAULT_SYSFS
        proc = _given(proc_path, beside(sysfs, b"proc"), "proc_path")
        dev = _given(dev_dir, DEFAULT_DEV_DIR, "dev_dir")
        config = (DEFAULT_CONFIG_DIR if config_dir is None
                  else path_arg(config_dir, "config_dir"))
        return cls(sysfs, dev, proc, config, live, recorded, name)

    @property
    def sysfs_path(self) -> str:
        return os.fsdecode(self.sysfs)

    @property
    def dev_path(self) -> str:
        return os.fsdecode(self.dev)

    @property
    def proc_path(self) -> str:
        return os.fsdecode(self.proc)

    @property
    def config_path(self) -> str:
        return os.fsdecode(self.config_dir)

    def beside(self, entry: str) -> str:
        """``entry`` beside the sysfs root: ``/dev`` for ``/sys``, ``R/dev`` for ``R/sys``."""
        return os.fsdecode(beside(self.sysfs, os.fsencode(entry)))

    def describe(self) -> str:
        """How messages name it: ``fixture NAME``, ``this host`` or ``the tree R``."""
        if self.name is not None:
            return f"fixture {self.name}"
        if self.live:
            return "this host"
        return f"the tree {os.fsdecode(self.sysfs or b'/')}"


def beside(sysfs: bytes, entry: bytes) -> bytes:
    """``entry`` in the directory of the sysfs root (after ``abspath``)."""
    return os.path.join(os.path.dirname(os.path.abspath(sysfs or b"/")), entry)

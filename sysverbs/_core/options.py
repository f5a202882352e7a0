"""Resolving the options of a call into the libibverbs instance they describe."""

from __future__ import annotations

import os

from .. import sources
from ..errors import UsageError, WrongTypeError
from ..providers.table import installed_release, libibverbs_library, resolve_release
from ..sources.base import LibraryKey
from .tuples import RecordTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, TypedDict, Union

    from typing_extensions import Unpack

    PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
    ReleaseArg = Union[int, str, None]

    class ListOptions(TypedDict, total=False):
        """The options of every listing call (:func:`sysverbs.get_device_list`, ...),
        declared once; see :func:`resolve` for their meaning and defaults."""

        source: str
        sysfs_path: Optional[PathArg]
        dev_dir: Optional[PathArg]
        config_dir: Optional[PathArg]
        providers: Optional[str]
        rdma_core: ReleaseArg

#: The names of the listing options (``ListOptions``, for the type checker).
OPTION_NAMES = ("source", "sysfs_path", "dev_dir", "config_dir", "providers", "rdma_core")

__all__ = ["Options", "resolve", "OPTION_NAMES"]  # and, for the type checker, ListOptions

OPTION_NAMES_SET = frozenset(OPTION_NAMES)
DEFAULT_SYSFS = b"/sys"
DEFAULT_DEV_DIR = b"/dev/infiniband"
DEFAULT_CONFIG_DIR = b"/etc/libibverbs.d"
PROVIDER_MODES = ("installed", "builtin")

_env_root: Optional[bytes] = None


class Options(RecordTuple, tuple[str, str, str, str, str, str, int, str]):
    """What a call with these options does, and why (see :func:`sysverbs.effective_options`).

    A named tuple: ``_fields``, ``_replace()``, ``_asdict()``, unpacking, equality."""

    __slots__ = ()
    _fields = ("source", "sysfs_path", "dev_dir", "config_dir", "providers",
               "providers_reason", "rdma_core", "rdma_core_reason")

    def __new__(cls, source: str, sysfs_path: str, dev_dir: str, config_dir: str,
                providers: str, providers_reason: str, rdma_core: int,
                rdma_core_reason: str) -> Options:
        return tuple.__new__(cls, (source, sysfs_path, dev_dir, config_dir, providers,
                                   providers_reason, rdma_core, rdma_core_reason))

    @property
    def source(self) -> str:
        return self[0]

    @property
    def sysfs_path(self) -> str:
        return self[1]

    @property
    def dev_dir(self) -> str:
        return self[2]

    @property
    def config_dir(self) -> str:
        return self[3]

    @property
    def providers(self) -> str:
        return self[4]

    @property
    def providers_reason(self) -> str:
        return self[5]

    @property
    def rdma_core(self) -> int:
        return self[6]

    @property
    def rdma_core_reason(self) -> str:
        return self[7]

    def key(self) -> LibraryKey:
        return LibraryKey(
            source=self.source,
            sysfs_root=os.fsencode(self.sysfs_path),
            dev_dir=os.fsencode(self.dev_dir),
            config_dir=os.fsencode(self.config_dir),
            providers=self.providers,
            release=self.rdma_core,
        )


def path_arg(value: PathArg, what: str) -> bytes:
    """A path argument as bytes; :class:`~sysverbs.errors.WrongTypeError` for a
    non-path, :class:`~sysverbs.errors.UsageError` for a NUL byte."""
    try:
        raw = os.fsencode(value)
    except TypeError:
        raise WrongTypeError(f"{what} must be a path, not {type(value).__name__}") from None
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


_default_modes: dict[bytes, tuple[str, str]] = {}


def _default_mode(config_dir: bytes) -> tuple[str, str]:
    """The default provider mode, decided once per process for each config dir."""
    mode = _default_modes.get(config_dir)
    if mode is None:
        if os.path.isdir(config_dir):
            mode = "installed", f"default: config dir {os.fsdecode(config_dir)} exists"
        else:
            mode = "builtin", f"default: no config dir {os.fsdecode(config_dir)}"
        if len(_default_modes) < 64:
            _default_modes[config_dir] = mode
    return mode


def resolve(**options: Unpack[ListOptions]) -> Options:
    """Validate the listing options and fill in libibverbs' defaults.

    * ``source``: ``"auto"`` (libibverbs' rule: RDMA netlink when the socket and the
      dump work, else sysfs), ``"netlink"``, ``"sysfs"`` or ``"udev"``;
    * ``sysfs_path``: the sysfs root; default ``$SYSFS_PATH`` as libibverbs reads
      it (cached for the process, ignored for setuid callers), else ``/sys``;
    * ``dev_dir``: where the uverbs nodes are; default ``/dev/infiniband``;
    * ``config_dir``: the provider config directory; default ``/etc/libibverbs.d``;
    * ``providers``: ``"installed"`` (the providers libibverbs would load) or
      ``"builtin"`` (every provider of the table); default ``"installed"`` when the
      config dir exists, else ``"builtin"``;
    * ``rdma_core``: the rdma-core release whose provider tables apply (``"44"``,
      ``"latest"``...); default: the installed libibverbs' release, else latest.
    """
    if len(options) > 6 or not OPTION_NAMES_SET.issuperset(options):
        unknown = sorted(set(options) - OPTION_NAMES_SET)
        raise WrongTypeError(f"unexpected keyword argument {unknown[0]!r}")
    source = options.get("source", "auto")
    sysfs_path = options.get("sysfs_path")
    dev_dir = options.get("dev_dir")
    config_dir = options.get("config_dir")
    providers = options.get("providers")
    rdma_core = options.get("rdma_core")
    if source not in sources.names():
        raise UsageError(f"source must be one of {', '.join(sources.names())}, not {source!r}")
    root = (
        env_sysfs_root()
        if sysfs_path is None
        else path_arg(sysfs_path, "sysfs_path").rstrip(b"/")
    )
    ddir = DEFAULT_DEV_DIR if dev_dir is None else path_arg(dev_dir, "dev_dir").rstrip(b"/")
    cdir = DEFAULT_CONFIG_DIR if config_dir is None else path_arg(config_dir, "config_dir")
    if providers is None:
        mode, why = _default_mode(cdir)
    elif providers in PROVIDER_MODES:
        mode, why = providers, "given"
    else:
        raise UsageError(
            f"providers must be one of {', '.join(PROVIDER_MODES)} or None, not {providers!r}"
        )
    release = resolve_release(rdma_core)
    if rdma_core is not None:
        rwhy = "given"
    elif installed_release() is not None:
        rwhy = f"default: installed {libibverbs_library()}"
    else:
        rwhy = "default: latest (no libibverbs installed)"
    return Options(
        source=source,
        sysfs_path=os.fsdecode(root),
        dev_dir=os.fsdecode(ddir),
        config_dir=os.fsdecode(cdir),
        providers=mode,
        providers_reason=why,
        rdma_core=release,
        rdma_core_reason=rwhy,
    )

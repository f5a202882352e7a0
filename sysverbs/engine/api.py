"""The public functions, libibverbs' device-discovery calls with Python types, and the
options they take: resolving the options of a call into the libibverbs instance they
describe (:func:`resolve`, :class:`Options`, ``ListOptions`` for the type checker).

One module for both: the options are resolved only here and in the callers of
:func:`resolve`, and each module on the path of ``import sysverbs`` costs the finding
and loading of its ``.pyc`` (tests/test_layout.py holds the budget).
"""

from __future__ import annotations

import os
from _thread import allocate_lock

from ..ground.errors import UsageError, WrongTypeError
from ..ground.hostroot import HostRoot
from ..ground.hostroot import env_sysfs_root as env_sysfs_root  # where the readers get it
from ..ground.hostroot import path_arg as path_arg
from ..ground.messages import ForkWarning, MemlockWarning, emit
from ..ground.records import RecordTuple
from ..providers.table import installed_release, libibverbs_library, resolve_release
from ..sources.base import LibraryKey
from .device import Context, Device, device_arg, hold_all, open_device, release_all
from .devlist import library_for, source_names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Optional, TypedDict, Union

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
        static_providers: Union[str, Sequence[str], None]

__all__ = [
    "DeviceList",
    "get_device_list",
    "free_device_list",
    "get_device_name",
    "get_device_guid",
    "get_device_index",
    "open_device",
    "close_device",
    "effective_options",
    "Options",
    "resolve",
    "OPTION_NAMES",
]  # and, for the type checker, ListOptions


#: The names of the listing options (``ListOptions``, for the type checker).
OPTION_NAMES = ("source", "sysfs_path", "dev_dir", "config_dir", "providers", "rdma_core",
                "static_providers")

OPTION_NAMES_SET = frozenset(OPTION_NAMES)
PROVIDER_MODES = ("installed", "builtin")


class Options(RecordTuple, tuple[str, str, str, str, str, str, int, str, "Optional[str]"]):
    """What a call with these options does, and why (see :func:`sysverbs.effective_options`).

    A named tuple: ``_fields``, ``_replace()``, ``_asdict()``, unpacking, equality."""

    __slots__ = ()
    _fields = ("source", "sysfs_path", "dev_dir", "config_dir", "providers",
               "providers_reason", "rdma_core", "rdma_core_reason", "static_providers")

    def __new__(cls, source: str, sysfs_path: str, dev_dir: str, config_dir: str,
                providers: str, providers_reason: str, rdma_core: int,
                rdma_core_reason: str, static_providers: Optional[str] = None) -> Options:
        return tuple.__new__(cls, (source, sysfs_path, dev_dir, config_dir, providers,
                                   providers_reason, rdma_core, rdma_core_reason,
                                   static_providers))

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

    @property
    def static_providers(self) -> Optional[str]:
        """None: a dynamically linked libibverbs; else the RDMA_STATIC_PROVIDERS value of
        a static one (``""``: linked without the define), and ``providers`` is
        ``"static"``."""
        return self[8]

    def key(self) -> LibraryKey:
        static: tuple[str, ...] = ()
        if self.static_providers is not None:
            from ..providers.static import static_link

            static = static_link(self.static_providers, self.rdma_core).linked
        return LibraryKey(
            source=self.source,
            sysfs_root=os.fsencode(self.sysfs_path),
            dev_dir=os.fsencode(self.dev_dir),
            config_dir=os.fsencode(self.config_dir),
            providers=self.providers,
            release=self.rdma_core,
            static=static,
        )


def environ_arg(env: object, what: str = "env") -> dict[str, str]:
    """An environment argument (default ``os.environ`` for None) as a new dict;
    :class:`~sysverbs.ground.errors.WrongTypeError` unless it maps str to str."""
    from collections.abc import Mapping

    if env is None:
        return dict(os.environ)
    if not isinstance(env, Mapping):
        raise WrongTypeError(f"{what} must be a mapping of str to str, not "
                             f"{type(env).__name__}")
    out = dict(env)
    for key, value in out.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise WrongTypeError(f"{what} must map str to str, not {key!r} to {value!r}")
    return out


def int_arg(value: object, what: str) -> int:
    """``value`` if it is an int (not a bool), else
    :class:`~sysverbs.ground.errors.WrongTypeError`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise WrongTypeError(f"{what} must be an int, not {type(value).__name__}")
    return value


def index_arg(value: object, what: str) -> int:
    """``value`` if it is an int not below 0 (a rank, a count);
    :class:`~sysverbs.ground.errors.WrongTypeError` for another type,
    :class:`~sysverbs.ground.errors.UsageError` for a negative int."""
    number = int_arg(value, what)
    if number < 0:
        raise UsageError(f"{what} must not be negative, not {number}")
    return number


def items_arg(value: object, what: str) -> list[Any]:
    """The items of a collection argument as a new list;
    :class:`~sysverbs.ground.errors.WrongTypeError` for a str, bytes or a non-iterable (a
    single name where a list of them is taken)."""
    if isinstance(value, (str, bytes, bytearray)) or not hasattr(value, "__iter__"):
        raise WrongTypeError(f"{what} must be a list, not {type(value).__name__}")
    return list(value)


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
    * ``static_providers``: None (default) for a dynamically linked libibverbs; else a
      statically linked one with the providers ``RDMA_STATIC_PROVIDERS`` names
      (``"mlx4,mlx5"``, ``"all"``, a list of names; ``""``: linked without the define,
      so no provider); ``providers`` is then ``"static"`` and may not be given.
    """
    if len(options) > 7 or not OPTION_NAMES_SET.issuperset(options):
        unknown = sorted(set(options) - OPTION_NAMES_SET)
        raise WrongTypeError(f"unexpected keyword argument {unknown[0]!r}")
    source = options.get("source", "auto")
    sysfs_path = options.get("sysfs_path")
    dev_dir = options.get("dev_dir")
    config_dir = options.get("config_dir")
    providers = options.get("providers")
    rdma_core = options.get("rdma_core")
    static = options.get("static_providers")
    if source not in source_names():
        raise UsageError(f"source must be one of {', '.join(source_names())}, not {source!r}")
    host = HostRoot.resolve(sysfs_path, dev_dir, config_dir=config_dir)
    root, ddir, cdir = host.sysfs, host.dev, host.config_dir
    if static is not None and providers is not None:
        raise UsageError("providers and static_providers exclude each other: a static "
                         "libibverbs loads no provider library")
    if static is not None:
        mode, why = "static", ""
    elif providers is None:
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
    given: Optional[str] = None
    if static is not None:
        given, why = _static_reason(static, release)
    return Options(
        source=source,
        sysfs_path=os.fsdecode(root),
        dev_dir=os.fsdecode(ddir),
        config_dir=os.fsdecode(cdir),
        providers=mode,
        providers_reason=why,
        rdma_core=release,
        rdma_core_reason=rwhy,
        static_providers=given,
    )


def _static_reason(value: object, release: int) -> tuple[str, str]:
    """The canonical RDMA_STATIC_PROVIDERS value and what the static link holds."""
    from ..providers.static import static_link, unmodeled

    link = static_link(value, release)
    if not link.given:
        why = ("given: a static libibverbs linked without RDMA_STATIC_PROVIDERS: no "
               "provider, so every device list is empty")
    elif link.linked:
        why = (f"given: a static libibverbs with {', '.join(link.linked)} linked in (in link "
               "order, the order they match in); no provider library, config dir or "
               "RDMAV_DRIVERS is read")
    else:
        why = "given: a static libibverbs with no provider linked in ('none')"
    if link.dropped:
        why += (f"; {', '.join(link.dropped) or 'empty names'} dropped: the define takes "
                f"{len(link.given.split(',')) - len(link.dropped)} names in rdma-core {release}")
    missing = unmodeled(release, link.linked)
    if missing:
        why += (f"; sysverbs has no match table for {', '.join(missing)} (gone from "
                "rdma-core since), so their devices are not listed")
    return link.given, why


class DeviceList(list):  # type: ignore[type-arg]
    """The list :func:`get_device_list` returns: a plain ``list`` of :class:`Device`.

    It remembers the devices it was created with, so :func:`free_device_list`
    releases exactly those even if the list was changed since.
    """

    __slots__ = ("_handed", "_freed")

    def __init__(self, devices: list[Device]) -> None:
        super().__init__(devices)
        self._handed = tuple(devices)
        self._freed = False


_init_lock = allocate_lock()
_initialized = False


def memlock_too_small() -> Optional[int]:
    """libibverbs' memlock rule (``init.c: ibverbs_init``): for a non-root caller, the soft
    RLIMIT_MEMLOCK when it is 32768 bytes or less, -1 when getrlimit fails; else None."""
    if os.geteuid() == 0:
        return None
    import resource

    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (OSError, ValueError):
        return -1
    if soft != resource.RLIM_INFINITY and 0 <= soft <= 32768:
        return int(soft)
    return None


def _first_call_init() -> None:
    """``init.c: ibverbs_init``: once per process, on the first list call."""
    global _initialized
    with _init_lock:
        if _initialized:
            return
        _initialized = True
        if "RDMAV_FORK_SAFE" in os.environ or "IBV_FORK_SAFE" in os.environ:
            from .fork import fork_env_requested, fork_init

            if fork_env_requested(os.environ):
                try:
                    fork_init()
                except OSError:
                    emit(b"Warning: fork()-safety requested but init failed\n", ForkWarning)
        soft = memlock_too_small()
        if soft == -1:
            emit(b"Warning: getrlimit(RLIMIT_MEMLOCK) failed.", MemlockWarning)
        elif soft is not None:
            emit(
                b"Warning: RLIMIT_MEMLOCK is %d bytes.\n"
                b"    This will severely limit memory registrations.\n" % soft,
                MemlockWarning,
            )


def effective_options(**options: Unpack[ListOptions]) -> Options:
    """What :func:`get_device_list` would use with these options, and why.

    >>> opts = effective_options(sysfs_path="/tmp/host/sys/", providers="builtin",
    ...                          rdma_core="44")
    >>> opts.sysfs_path, opts.providers, opts.rdma_core
    ('/tmp/host/sys', 'builtin', 44)
    """
    return resolve(**options)


def get_device_list(**options: Unpack[ListOptions]) -> DeviceList:
    """``ibv_get_device_list()``: the RDMA devices that have a userspace provider.

    Returns a list (empty when there are no devices).  Raises ``OSError`` with
    libibverbs' errno where it returns NULL: ENOSYS (no usable
    ``class/infiniband_verbs`` or kernel ABI), ENOMEM (sysfs path too long).

    * ``source``: ``"auto"`` (libibverbs' rule: RDMA netlink when the socket and the
      dump work, else sysfs), ``"netlink"``, ``"sysfs"`` or ``"udev"``.  A fixture tree
      passed as ``sysfs_path`` needs ``source="sysfs"`` on a host with RDMA netlink,
      where libibverbs too would list the kernel's devices.
    * ``sysfs_path``: the sysfs root; default ``$SYSFS_PATH`` as libibverbs reads
      it (cached for the process, ignored for setuid callers), else ``/sys``.
    * ``dev_dir``: where the uverbs nodes are; default ``/dev/infiniband``.
    * ``config_dir``: the provider config directory; default ``/etc/libibverbs.d``.
    * ``providers``: ``"installed"`` (the providers libibverbs would load from the
      config dir, ``RDMAV_DRIVERS``/``IBV_DRIVERS`` and the provider libraries on
      disk) or ``"builtin"`` (every provider of the table); default ``"installed"``
      when the config dir exists, else ``"builtin"``.
    * ``rdma_core``: the rdma-core release whose provider tables apply (``"44"``,
      ``"latest"``...); default: the installed libibverbs' release, else latest.

    Each distinct set of options behaves as one libibverbs loaded in this process:
    it keeps its device list across calls, so survivors come back as the same
    :class:`Device` objects and new devices come first.
    """
    opts = resolve(**options)
    _first_call_init()
    lib = library_for(opts.key())
    with lib.lock:
        devices = lib.enumerate(os.environ)
        hold_all(devices)
    return DeviceList(devices)


def free_device_list(devices: list[Device]) -> None:
    """``ibv_free_device_list()``: release the devices of a list from :func:`get_device_list`.

    Devices that were not opened become invalid (using them raises
    :class:`sysverbs.DeviceFreedError`) unless another unfreed list holds them.  The
    list :func:`get_device_list` returned releases exactly the devices it was created
    with, once.  A plain list (a copy, a slice) releases one reference of each device
    in it, as libibverbs' ``ibv_free_device_list`` does for the array it is given; a
    device that no unfreed list holds is refused.
    """
    if isinstance(devices, DeviceList):
        if devices._freed:
            raise UsageError("this device list was already freed")
        devices._freed = True
        release_all(devices._handed)
        return
    if not isinstance(devices, (list, tuple)) or not all(
            isinstance(d, Device) for d in devices):
        raise WrongTypeError("free_device_list() takes a list of devices from get_device_list()")
    if not all(d.valid and d._ever_handed for d in devices):
        raise UsageError("free_device_list(): a device in this list is not held by any list")
    release_all(devices)


def get_device_name(device: Device) -> str:
    """``ibv_get_device_name()``."""
    return device_arg(device).name


def get_device_guid(device: Device) -> int:
    """``ibv_get_device_guid()`` as a host-order integer: ``f"{guid:016x}"`` is what
    ``ibv_devices`` prints.  0 when ``node_guid`` is missing or unparsable."""
    return device_arg(device).guid


def get_device_index(device: Device) -> int:
    """``ibv_get_device_index()``: the kernel's index, -1 in sysfs mode."""
    return device_arg(device).index


def close_device(context: Context) -> None:
    """``ibv_close_device()``."""
    if not isinstance(context, Context):
        raise WrongTypeError(f"context must be a Context from open_device(), not "
                             f"{type(context).__name__}")
    context.close()


__all__ += ["open_device"]

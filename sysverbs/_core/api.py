"""The public functions: libibverbs' device-discovery calls, with Python types."""

from __future__ import annotations

import os
from _thread import allocate_lock

from ..errors import UsageError, WrongTypeError
from .device import Context, Device, hold_all, open_device, release_all
from .devlist import library_for
from .messages import ForkWarning, MemlockWarning, emit
from .options import Options, resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from typing_extensions import Unpack

    from .options import ListOptions

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
]


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
            from ..fork import fork_env_requested, fork_init

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
    return device.name


def get_device_guid(device: Device) -> int:
    """``ibv_get_device_guid()`` as a host-order integer: ``f"{guid:016x}"`` is what
    ``ibv_devices`` prints.  0 when ``node_guid`` is missing or unparsable."""
    return device.guid


def get_device_index(device: Device) -> int:
    """``ibv_get_device_index()``: the kernel's index, -1 in sysfs mode."""
    return device.index


def close_device(context: Context) -> None:
    """``ibv_close_device()``."""
    context.close()


__all__ += ["open_device"]

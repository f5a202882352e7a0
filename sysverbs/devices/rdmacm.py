"""librdmacm's device list: ``rdma_get_devices()`` and ``rdma_free_devices()``
(``cma.c``; docs/behaviour.md: librdmacm).

librdmacm keeps its own process-wide list of devices on top of libibverbs'.  The
first call checks the rdma_cm ABI (netlink, then ``class/misc/rdma_cm/abi_version``,
then ``class/infiniband_ucma/abi_version``, else it assumes the newest, 4; outside
3..4 every call fails with EPERM), then takes ``ibv_get_device_list()`` (a failure
or zero devices is ENODEV) and inserts each device ordered by kernel index, or by
node GUID when there is no index (sysfs mode).  Every call lists libibverbs'
devices again (new ones are inserted in order, vanished ones removed), opens the
devices not yet open, and returns an open :class:`~sysverbs.Context` for each live
one.  A device that cannot be opened is marked dead and never retried (until
libibverbs re-creates it); contexts stay open while the device is listed, and a
device that vanished stays open until every list that returned it is freed.

sysverbs plays both libraries: the libibverbs underneath is the one
:func:`sysverbs.get_device_list` emulates with the same options, so its messages
(``IBV_SHOW_WARNINGS``...) appear twice on the first call, as with the real pair.

>>> import tempfile, sysverbs
>>> from sysverbs import testing
>>> from sysverbs.devices.rdmacm import rdma_get_devices, rdma_free_devices
>>> with tempfile.TemporaryDirectory() as tmp:
...     host = testing.materialize(testing.fixture_path("mlx5-cx6"), tmp)
...     try:   # fixture /dev nodes are plain files: every open fails, so no device
...         contexts = rdma_get_devices(sysfs_path=host.sysfs, dev_dir=host.dev,
...                                     providers="builtin", rdma_core="44")
...     except OSError as e:
...         print("error", e.errno)
...     else:
...         print(len(contexts)); rdma_free_devices(contexts)
0

Differences from librdmacm: a device is "opened" as :func:`sysverbs.open_device`
does it (the char device is opened and checked, no verbs context and no
``ibv_query_device``), so a device whose provider would fail to create a context
is listed here; ties between equal GUIDs follow libibverbs' allocation order
(librdmacm sorts by ``struct ibv_device`` address, which malloc decides).
"""

from __future__ import annotations

import errno
import os
import threading
from typing import TYPE_CHECKING, Optional

from ..engine.api import (
    DeviceList,
    free_device_list,
    get_device_guid,
    get_device_index,
    get_device_list,
    path_arg,
    resolve,
)
from ..engine.device import Context, Device, open_device
from ..ground.errors import UsageError, WrongTypeError
from ..ground.sysfs_read import RDMA_CM_ABI_SIZE, read_sysfs_file, strtol, to_int32
from ..sources.base import LibraryKey

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..engine.api import ListOptions, PathArg

__all__ = [
    "ContextList",
    "rdma_get_devices",
    "rdma_free_devices",
    "rdma_cm_abi",
    "RDMA_USER_CM_MIN_ABI_VERSION",
    "RDMA_USER_CM_MAX_ABI_VERSION",
]

RDMA_USER_CM_MIN_ABI_VERSION = 3
RDMA_USER_CM_MAX_ABI_VERSION = 4
UCMA_INVALID_IB_INDEX = -1


class ContextList(list):  # type: ignore[type-arg]
    """The list :func:`rdma_get_devices` returns: a plain ``list`` of open
    :class:`~sysverbs.Context` objects.  Give it back with :func:`rdma_free_devices`;
    do not close the contexts yourself (librdmacm owns them)."""

    __slots__ = ("_handed", "_freed", "_state")

    def __init__(self, contexts: list[Context], state: _CmaState) -> None:
        super().__init__(contexts)
        self._handed = tuple(contexts)
        self._freed = False
        self._state = state


class _CmaDevice:
    """``struct cma_device``."""

    __slots__ = ("dev", "guid", "idx", "verbs", "refcnt", "dead")

    def __init__(self, dev: Device) -> None:
        self.dev = dev
        self.guid = get_device_guid(dev)
        self.idx = get_device_index(dev)
        self.verbs: Optional[Context] = None
        self.refcnt = 0
        self.dead = False


def rdma_cm_abi(sysfs_root: PathArg) -> tuple[int, Optional[str]]:
    """``check_abi_version_sysfs``: the rdma_cm ABI and the file it came from.

    ``class/misc/rdma_cm/abi_version`` (8-byte read); only if that cannot be read,
    ``class/infiniband_ucma/abi_version``; when neither can, the newest ABI (4) and
    ``None``.  The value is ``(int)strtol(text, NULL, 10)``; an empty file (undefined
    behaviour in librdmacm) is 0 here.
    """
    root = path_arg(sysfs_root, "sysfs_root")
    for rel in (b"/class/misc/rdma_cm/abi_version", b"/class/infiniband_ucma/abi_version"):
        value = read_sysfs_file(root + rel, RDMA_CM_ABI_SIZE)
        if value is not None:
            return to_int32(strtol(value)), os.fsdecode(root + rel)
    return RDMA_USER_CM_MAX_ABI_VERSION, None


def _abi_from_netlink(key: LibraryKey) -> Optional[int]:
    """``check_abi_version_nl``: the rdma_cm ABI from RDMA netlink (GET_CHARDEV), or
    None when netlink cannot answer.  Uses ``netlink_source.chardev_abi(name)`` when
    the netlink source provides it; until then netlink never answers (as on hosts
    without RDMA netlink, where the sysfs files decide)."""
    if key.source not in ("auto", "netlink"):
        return None
    try:
        from ..sources.netlink import queries as netlink_source
    except ImportError:  # pragma: no cover - the module is part of the package
        return None
    query = getattr(netlink_source, "chardev_abi", None)
    if query is None:
        return None
    try:
        value = query("rdma_cm")
    except OSError:
        return None
    return value if isinstance(value, int) and value != -1 else None


class _CmaState:
    """librdmacm's process-wide state for one set of options."""

    def __init__(self, key: LibraryKey, options: ListOptions) -> None:
        self.key = key
        self._options = options  # those of the first call: the same key
        self.lock = threading.RLock()
        self.abi_ver = -1
        self.cma_list: list[_CmaDevice] = []
        self.dev_list: Optional[DeviceList] = None

    def _ibv_list(self) -> DeviceList:
        return get_device_list(**self._options)

    # -- check_abi_version ----------------------------------------------------------
    def _check_abi(self) -> bool:
        if self.abi_ver == -1:
            nl = _abi_from_netlink(self.key)
            self.abi_ver = nl if nl is not None else rdma_cm_abi(self.key.sysfs_root)[0]
        return RDMA_USER_CM_MIN_ABI_VERSION <= self.abi_ver <= RDMA_USER_CM_MAX_ABI_VERSION

    # -- insert_cma_dev / remove_cma_dev ---------------------------------------------
    def _insert(self, dev: Device) -> None:
        new = _CmaDevice(dev)
        pos = 0  # the head when the scan from the tail finds nothing
        for i in range(len(self.cma_list) - 1, -1, -1):
            p = self.cma_list[i]
            if new.idx == UCMA_INVALID_IB_INDEX:
                if p.guid < new.guid:
                    pos = i + 1
                    break
            elif p.idx < new.idx:
                pos = i + 1
                break
        self.cma_list.insert(pos, new)

    def _remove(self, cma: _CmaDevice) -> None:
        if cma.refcnt:
            cma.dead = True  # removed when the last list holding it is freed
            return
        if cma.verbs is not None:
            cma.verbs.close()
            cma.verbs = None
        self.cma_list.remove(cma)

    # -- sync_devices_list ------------------------------------------------------------
    def _sync(self) -> None:
        try:
            new = self._ibv_list()
        except OSError:
            raise _err(errno.ENODEV) from None
        if not new:
            free_device_list(new)
            raise _err(errno.ENODEV)
        # librdmacm sorts the array by struct ibv_device address.  libibverbs' list is
        # always in descending allocation order (new devices are prepended), and
        # addresses grow with allocation, so address order is the reversed list.
        by_address = list(reversed(new))
        if self.dev_list is None:
            for dev in by_address:
                self._insert(dev)
        else:
            old_ids = {id(d) for d in self.dev_list}
            new_ids = {id(d) for d in new}
            for dev in by_address:
                if id(dev) not in old_ids:
                    self._insert(dev)
            for dev in self.dev_list:
                if id(dev) not in new_ids:
                    for cma in list(self.cma_list):
                        if cma.dev is dev:
                            self._remove(cma)
            free_device_list(self.dev_list)
        self.dev_list = new

    # -- ucma_init ----------------------------------------------------------------------
    def _ucma_init(self) -> None:
        if self.cma_list:
            return
        if not self._check_abi():
            raise _err(errno.EPERM)
        self._sync()

    # -- ucma_init_device -----------------------------------------------------------------
    @staticmethod
    def _init_device(cma: _CmaDevice) -> bool:
        if cma.verbs is not None:
            return True
        try:
            cma.verbs = open_device(cma.dev)
        except (OSError, ReferenceError):
            return False
        return True

    def get_devices(self) -> list[Context]:
        with self.lock:
            self._ucma_init()
            self._sync()
            for cma in self.cma_list:
                if cma.dead:
                    continue
                if not self._init_device(cma):
                    cma.dead = True
            out: list[Context] = []
            for cma in self.cma_list:
                if cma.dead or cma.verbs is None:
                    continue
                out.append(cma.verbs)
                cma.refcnt += 1
            return out

    def free(self, handed: tuple[Context, ...]) -> None:
        with self.lock:
            for cma in list(self.cma_list):
                for ctx in handed:
                    if ctx is not cma.verbs:
                        continue  # added after the list was handed out
                    cma.refcnt -= 1
                    if cma.dead:
                        self._remove(cma)


def _err(code: int) -> OSError:
    return OSError(code, os.strerror(code))


_states: dict[LibraryKey, _CmaState] = {}
_states_lock = threading.Lock()


def rdma_get_devices(**options: Unpack[ListOptions]) -> ContextList:
    """``rdma_get_devices()``: an open context for every usable RDMA device.

    Ordered by kernel device index, or by node GUID (ascending; a new device goes
    before older ones with the same GUID) when there is no index, as in sysfs mode.
    Raises ``OSError``: EPERM when the rdma_cm ABI is not 3 or 4, ENODEV when
    libibverbs fails or lists no device.  Devices whose char device cannot be
    opened are left out (an empty list when none can be opened).  The options are
    those of :func:`sysverbs.get_device_list`; each set of options has its own
    librdmacm state for the process.
    """
    key = resolve(**options).key()
    with _states_lock:
        state = _states.get(key)
        if state is None:
            state = _states[key] = _CmaState(key, options)
    return ContextList(state.get_devices(), state)


def rdma_free_devices(contexts: list[Context]) -> None:
    """``rdma_free_devices()``: give back a list from :func:`rdma_get_devices`.

    Contexts of devices that vanished meanwhile are closed once no list holds them;
    the others stay open (librdmacm keeps them for later calls).
    """
    if not isinstance(contexts, ContextList):
        raise WrongTypeError("rdma_free_devices() takes a list returned by rdma_get_devices()")
    if contexts._freed:
        raise UsageError("this context list was already freed")
    contexts._freed = True
    contexts._state.free(contexts._handed)

"""``Device`` (``struct ibv_device``) and ``Context`` (an open device)."""

from __future__ import annotations

import errno
import os
import stat
from _thread import RLock

from ..ground.errors import DeviceFreedError, WrongTypeError
from ..ground.sysfs_read import NODE_GUID_SIZE, read_sysfs_file, scan_hx4

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType
    from typing import Optional

    from ..ground.enums import NodeType, TransportType

__all__ = ["Device", "Context", "DeviceFreedError", "hold_all", "release_all"]


_refs_lock = RLock()


class Device:
    """One RDMA device, as ``ibv_get_device_list()`` returns it.

    The attributes are those of ``struct ibv_device`` plus ``provider``: the name
    of the provider that matched (``"mlx5"``, ``"rxe"``, ``"pvrdma"``...).  A device
    is valid while a list returned by :func:`sysverbs.get_device_list` that holds
    it has not been freed, or while a :class:`Context` opened on it is open.
    """

    __slots__ = (
        "_name",
        "_dev_name",
        "_dev_path",
        "_ibdev_path",
        "_node_type",
        "_transport_type",
        "_provider",
        "_abi_ver",
        "_cdev",
        "_index",
        "_guid",
        "_dev_dir",
        "_time_created_ns",
        "_handles",
        "_ever_handed",
        "identity",
        "__weakref__",
    )

    def __init__(
        self,
        *,
        name: bytes,
        dev_name: bytes,
        dev_path: bytes,
        ibdev_path: bytes,
        node_type: int,  # records.node_type_number values; the properties give the enums
        transport_type: int,
        provider: str,
        abi_ver: int,
        cdev: tuple[int, int],
        index: int,
        guid: Optional[int],
        dev_dir: bytes,
        time_created_ns: int,
    ) -> None:
        self._name = name
        self._dev_name = dev_name
        self._dev_path = dev_path
        self._ibdev_path = ibdev_path
        self._node_type = node_type
        self._transport_type = transport_type
        self._provider = provider
        self._abi_ver = abi_ver
        self._cdev = cdev
        self._index = index
        self._guid = guid
        self._dev_dir = dev_dir
        self._time_created_ns = time_created_ns
        self._handles = 0  # user-visible references: unfreed lists + open contexts
        self._ever_handed = False
        #: What ``init.c: same_sysfs_dev`` compares to tell whether a device listed
        #: again is this one: the uverbs name, the kernel index and, without an index,
        #: the time ``ibdev_path`` was created.
        self.identity = (dev_name, index, time_created_ns if index == -1 else 0)

    # -- validity -----------------------------------------------------------------
    def _check(self) -> None:
        if self._handles <= 0 and self._ever_handed:
            raise DeviceFreedError(
                f"RDMA device {os.fsdecode(self._name)!r} was used after its device list "
                "was freed; open it (sysverbs.open_device) before freeing the list, or "
                "call sysverbs.get_device_list() again"
            )

    def _hold(self) -> None:
        hold_all((self,))

    def _release(self) -> None:
        release_all((self,))

    @property
    def valid(self) -> bool:
        """False once the device may no longer be used (see the class docstring)."""
        return self._handles > 0 or not self._ever_handed

    # -- struct ibv_device ----------------------------------------------------------
    @property
    def name(self) -> str:
        """The kernel's IB device name (``mlx5_0``); bytes that are not UTF-8 are escaped."""
        self._check()
        return os.fsdecode(self._name)

    @property
    def dev_name(self) -> str:
        """The uverbs char device name (``uverbs0``)."""
        self._check()
        return os.fsdecode(self._dev_name)

    @property
    def dev_path(self) -> str:
        """``<sysfs>/class/infiniband_verbs/<dev_name>``."""
        self._check()
        return os.fsdecode(self._dev_path)

    @property
    def ibdev_path(self) -> str:
        """``<sysfs>/class/infiniband/<name>``."""
        self._check()
        return os.fsdecode(self._ibdev_path)

    @property
    def node_type(self) -> NodeType:
        from ..ground.enums import NodeType

        self._check()
        return NodeType(self._node_type)

    @property
    def transport_type(self) -> TransportType:
        from ..ground.enums import TransportType

        self._check()
        return TransportType(self._transport_type)

    @property
    def provider(self) -> str:
        """The name of the provider that matched (libibverbs' ops name)."""
        self._check()
        return self._provider

    @property
    def abi_version(self) -> int:
        """The device's uverbs ABI version (``abi_version`` of the uverbs entry)."""
        self._check()
        return self._abi_ver

    @property
    def cdev(self) -> tuple[int, int]:
        """(major, minor) of the uverbs char device, as the ``dev`` file says."""
        self._check()
        return self._cdev

    @property
    def guid(self) -> int:
        """``ibv_get_device_guid()``: the node GUID as a host-order integer
        (``f"{guid:016x}"`` is what ``ibv_devices`` prints); 0 when ``node_guid`` is
        missing or unparsable."""
        return self._get_guid()

    @property
    def index(self) -> int:
        """``ibv_get_device_index()``: the kernel's index, -1 in sysfs mode."""
        self._check()
        return self._index

    @property
    def dev_dir(self) -> str:
        """The directory of the uverbs node, as the listing options gave it."""
        return os.fsdecode(self._dev_dir)

    def __repr__(self) -> str:
        return (
            f"<sysverbs.Device {os.fsdecode(self._name)!r} {os.fsdecode(self._dev_name)} "
            f"provider={self._provider}{'' if self.valid else ' (freed)'}>"
        )

    # -- accessors --------------------------------------------------------------------
    def _get_guid(self) -> int:
        self._check()
        if self._guid is not None:
            return self._guid
        # An empty node_guid is undefined behaviour in libibverbs (it returned a
        # stale value); sysverbs returns 0 and does not cache it.
        value = read_sysfs_file(self._ibdev_path + b"/node_guid", NODE_GUID_SIZE)
        if not value:
            return 0
        parts = scan_hx4(value)
        if parts is None:
            return 0
        guid = parts[0] << 48 | parts[1] << 32 | parts[2] << 16 | parts[3]
        self._guid = guid
        return guid


def hold_all(devices: Sequence[Device]) -> None:
    """Count a reference to each device (a list handed out, a context opened), under
    one lock."""
    with _refs_lock:
        for dev in devices:
            dev._handles += 1
            dev._ever_handed = True


def release_all(devices: Sequence[Device]) -> None:
    """Drop the references :func:`hold_all` counted, under one lock."""
    with _refs_lock:
        for dev in devices:
            if dev._handles > 0:
                dev._handles -= 1


class Context:
    """An opened device: the uverbs char device, opened read-write and close-on-exec.

    sysverbs talks to no kernel driver, so a context is the open file descriptor
    (``fd``) and the device; it keeps the device valid until closed.  Use it as a
    context manager or call :meth:`close`.
    """

    def __init__(self, device: Device, fd: int) -> None:
        self._device = device
        self._fd = fd
        device._hold()

    @property
    def device(self) -> Device:
        return self._device

    @property
    def fd(self) -> int:
        """The open file descriptor (-1 once closed)."""
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def fileno(self) -> int:
        if self._fd < 0:
            raise ValueError("I/O operation on a closed sysverbs.Context")
        return self._fd

    def close(self) -> None:
        """Close the char device and release the device (idempotent)."""
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            os.close(fd)
        finally:
            self._device._release()

    def __enter__(self) -> Context:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"fd={self._fd}"
        return f"<sysverbs.Context {self._device!r} {state}>"


def open_cdev(path: bytes, cdev: int) -> int:
    """``open(path, O_RDWR|O_CLOEXEC)``, which must be a character device numbered
    ``cdev`` (any number when 0), else ENOENT (``init.c: ibv_open_device``)."""
    from ..ground.inputs import opaque

    opaque("opening a device")  # what the kernel's driver answers: not recorded
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISCHR(st.st_mode) or (cdev != 0 and st.st_rdev != cdev):
        os.close(fd)
        raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), os.fsdecode(path))
    return fd


def makedev(major: int, minor: int) -> int:
    """glibc's ``makedev()`` of two unsigned 32-bit numbers: the ``dev`` file may hold
    any of them (``-1:5`` is 4294967295:5), where ``os.makedev`` takes only C ints."""
    return (
        (major & 0x00000FFF) << 8
        | (major & 0xFFFFF000) << 32
        | (minor & 0x000000FF)
        | (minor & 0xFFFFFF00) << 12
    )


def device_arg(device: object) -> Device:
    """``device`` if it is a :class:`Device`, else :class:`~sysverbs.ground.errors.WrongTypeError`
    (libibverbs would dereference whatever pointer it is given)."""
    if not isinstance(device, Device):
        raise WrongTypeError("device must be a Device from get_device_list(), not "
                             f"{type(device).__name__}")
    return device


def open_device(device: Device) -> Context:
    """``ibv_open_device``: open ``<dev_dir>/<dev_name>`` (``O_RDWR|O_CLOEXEC``).

    As libibverbs, the file must be a character device whose number is the one in
    the ``dev`` file (unless that is ``0:0``); otherwise ``/dev/char/<maj>:<min>``
    is tried (libibverbs waits up to 5 s for it to appear; sysverbs does not
    wait).  Failure raises OSError (ENOENT when the node is not the right device).
    """
    device_arg(device)._check()
    major, minor = device._cdev
    cdev = makedev(major, minor) if (major or minor) else 0
    path = device._dev_dir + b"/" + device._dev_name
    try:
        fd = open_cdev(path, cdev)
    except (OSError, ValueError) as first:
        if cdev == 0:
            if isinstance(first, OSError):
                raise
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), os.fsdecode(path)) from None
        alt = b"/dev/char/%d:%d" % (major, minor)
        if not os.path.isdir(b"/dev/char"):
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), os.fsdecode(path)) from None
        try:
            fd = open_cdev(alt, cdev)
        except (OSError, ValueError):
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), os.fsdecode(path)) from None
    return Context(device, fd)

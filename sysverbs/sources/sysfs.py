"""The sysfs source: ``init.c: find_sysfs_devs`` and the class ABI read
(``init.c: check_abi_version``; docs/behaviour.md: The sysfs scan, The ABI check)."""

from __future__ import annotations

import errno
import os
import stat
import sys

from ..ground.errors import ScanError
from ..ground.records import DeviceRecord, RecordTuple, abi_number, read_node_type
from ..ground.sysfs_read import (
    ABI_SIZE,
    CLASS_ABI_SIZE,
    DEV_SIZE,
    IBDEV_SIZE,
    NAME_MAX_IBV,
    O_PATH,
    PATH_MAX_IBV,
    cstr,
    current,
    listdir,
    read_sysfs_file,
    scan_u_u,
    strtol,
    to_int32,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Union

__all__ = ["scan_sysfs", "scan_sysfs_detailed", "read_class_abi", "ScanError", "Skipped"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_PATH_FLAGS = O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
#: faccessat(..., AT_EACCESS) is available (it is with glibc and musl).
_ACCESS_EFFECTIVE = os.access in os.supports_effective_ids and os.access in os.supports_dir_fd
_FS_ENCODING = sys.getfilesystemencoding()
_FS_ERRORS = sys.getfilesystemencodeerrors()


class Skipped(RecordTuple, tuple[bytes, str, "Optional[bytes]"]):
    """A ``class/infiniband_verbs`` entry that libibverbs skips silently, and why.

    ``reason`` is one of: ``"not_a_directory"``, ``"ibdev_unreadable"``,
    ``"name_too_long"``, ``"ibdev_path_too_long"``, ``"no_ibdev_dir"``, ``"bad_dev"``,
    ``"no_dev_node"`` (the steps of docs/behaviour.md: The sysfs scan, in that order).
    ``ibdev_name`` is the content of the entry's ``ibdev`` file when it was read.
    """

    __slots__ = ()
    _fields = ("dev_name", "reason", "ibdev_name")

    def __new__(cls, dev_name: bytes, reason: str, ibdev_name: Optional[bytes] = None
                ) -> Skipped:
        return tuple.__new__(cls, (dev_name, reason, ibdev_name))

    @property
    def dev_name(self) -> bytes:
        return self[0]

    @property
    def reason(self) -> str:
        return self[1]

    @property
    def ibdev_name(self) -> Optional[bytes]:
        return self[2]


class _Dirs:
    """Descriptors one scan resolves its paths from: the class directory, and
    ``O_PATH`` handles on ``class/infiniband`` and the /dev directory (None where they
    cannot be opened; then full paths are used).  ``<ibdev_path>`` and
    ``<dev_dir>/<name>`` resolve the same way relative to them (an ``O_PATH`` handle
    needs no permission on the directory itself) with a shorter path walk."""

    __slots__ = ("class_fd", "ib_fd", "dev_fd", "dev_dir")

    def __init__(self, class_path: bytes, root: bytes, dev_dir: bytes) -> None:
        try:
            self.class_fd = os.open(class_path, _DIR_FLAGS)
        except (OSError, ValueError):
            raise ScanError(errno.ENOSYS, class_path) from None
        self.ib_fd = _open_path(root + b"/class/infiniband")
        self.dev_fd = _open_path(dev_dir)
        self.dev_dir = dev_dir

    def names(self) -> list[str]:
        return os.listdir(self.class_fd)

    def entry(self, name: bytes) -> Optional[int]:
        """The entry's directory (a descriptor), None when it is no directory."""
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=self.class_fd)
        except OSError:
            return None

    def read(self, entry: int, name: bytes, size: int) -> Optional[bytes]:
        return read_sysfs_file(name, size, dir_fd=entry)

    def leave(self, entry: int) -> None:
        os.close(entry)

    def stat_ibdev(self, ibdev_name: bytes, ibdev_path: bytes) -> os.stat_result:
        if self.ib_fd is not None and ibdev_name and ibdev_name[:1] != b"/":
            return os.stat(ibdev_name, dir_fd=self.ib_fd)
        return os.stat(ibdev_path)  # "" or an absolute name do not resolve relative to it

    def dev_node(self, name: bytes) -> bool:
        # The /dev node must exist: libibverbs stat()s it.  Relative to the directory
        # handle, faccessat(F_OK) with the effective ids answers the same (the same path
        # lookup, with the same credentials) without building a stat result; a full path
        # goes to stat() itself, which is what umockdev's LD_PRELOAD serves.
        if self.dev_fd is not None and _ACCESS_EFFECTIVE:
            return os.access(name, os.F_OK, dir_fd=self.dev_fd, effective_ids=True)
        try:
            os.stat(self.dev_dir + b"/" + name if self.dev_fd is None else name,
                    dir_fd=self.dev_fd)
        except (OSError, ValueError):
            return False
        return True

    def close(self) -> None:
        for fd in (self.ib_fd, self.dev_fd, self.class_fd):
            if fd is not None:
                os.close(fd)


class _Recorded:
    """:class:`_Dirs`' steps by full path, each an input of the read-once scope in
    force (:mod:`sysverbs.ground.inputs`): the same answers (a path resolves as the
    descriptor it replaces), recorded so that a later scrape can ask them again."""

    __slots__ = ("class_path", "dev_dir", "dev_fd", "io")

    def __init__(self, class_path: bytes, root: bytes, dev_dir: bytes) -> None:
        from ..ground import inputs  # not on the path of the first device list

        self.io = inputs
        if inputs.probe_open(class_path, _DIR_FLAGS):
            raise ScanError(errno.ENOSYS, class_path)
        self.class_path = class_path
        self.dev_dir = dev_dir
        self.dev_fd = not inputs.probe_open(dev_dir, _PATH_FLAGS)

    def names(self) -> list[str]:
        return [os.fsdecode(n) for n in listdir(self.class_path)]

    def entry(self, name: bytes) -> Optional[bytes]:
        path = self.class_path + b"/" + name
        return None if self.io.probe_open(path, _DIR_FLAGS) else path

    def read(self, entry: bytes, name: bytes, size: int) -> Optional[bytes]:
        return read_sysfs_file(entry + b"/" + name, size)

    def leave(self, entry: bytes) -> None:
        pass

    def stat_ibdev(self, ibdev_name: bytes, ibdev_path: bytes) -> os.stat_result:
        return self.io.stat(ibdev_path)

    def dev_node(self, name: bytes) -> bool:
        path = self.dev_dir + b"/" + name
        if self.dev_fd and _ACCESS_EFFECTIVE:
            return self.io.access(path, os.F_OK, effective_ids=True)
        return self.io.exists(path)

    def close(self) -> None:
        pass


def _open_path(path: bytes) -> Optional[int]:
    try:
        return os.open(path, _PATH_FLAGS)
    except (OSError, ValueError):
        return None


def _scan_entry(
    dirs: Union[_Dirs, _Recorded], name: bytes, root: bytes, lazy: bool
) -> Union[DeviceRecord, Skipped]:
    """The steps of ``find_sysfs_devs`` (docs/behaviour.md: The sysfs scan) for one
    class entry; a :class:`Skipped` is a silent skip.

    With ``lazy`` the record's ``abi_ver`` and ``node_type`` are read when first used
    (see :class:`~sysverbs.ground.records.DeviceRecord`)."""
    entry = dirs.entry(name)
    if entry is None:
        return Skipped(name, "not_a_directory")
    try:
        ibdev = dirs.read(entry, b"ibdev", IBDEV_SIZE)  # type: ignore[arg-type]
        if ibdev is None:
            return Skipped(name, "ibdev_unreadable")
        ibdev_name = cstr(ibdev) if b"\0" in ibdev else ibdev
        ibdev_path = root + b"/class/infiniband/" + ibdev_name
        if len(name) >= NAME_MAX_IBV:
            return Skipped(name, "name_too_long", ibdev_name)
        if len(ibdev_path) >= PATH_MAX_IBV:
            return Skipped(name, "ibdev_path_too_long", ibdev_name)
        try:
            st = dirs.stat_ibdev(ibdev_name, ibdev_path)
        except (OSError, ValueError):
            return Skipped(name, "no_ibdev_dir", ibdev_name)
        dev = dirs.read(entry, b"dev", DEV_SIZE)  # type: ignore[arg-type]
        # An empty dev file is undefined behaviour in libibverbs (an uninitialised
        # stack buffer is parsed); it was observed to be skipped, so skip it.
        if not dev:
            return Skipped(name, "bad_dev", ibdev_name)
        cdev = scan_u_u(dev)
        if cdev is None:
            return Skipped(name, "bad_dev", ibdev_name)
        abi_ver = None
        if not lazy:
            abi_ver = abi_number(dirs.read(entry, b"abi_version",  # type: ignore[arg-type]
                                           ABI_SIZE))
    finally:
        dirs.leave(entry)  # type: ignore[arg-type]
    node_type = None if lazy else read_node_type(ibdev_path)
    if not dirs.dev_node(name):
        return Skipped(name, "no_dev_node", ibdev_name)
    return DeviceRecord(
        name, ibdev_name, ibdev_path, root, cdev, abi_ver, node_type, st.st_mtime_ns
    )


def scan_sysfs(root: bytes, dev_dir: bytes, lazy: bool = False) -> list[DeviceRecord]:
    """The temporary device list: candidates in reverse readdir order.

    Raises :class:`ScanError` with ENOMEM (class path too long) or ENOSYS (class
    directory cannot be opened).  ``lazy``: leave ``abi_version`` and ``node_type``
    to be read when a record's fields are first used (see :func:`_scan_entry`).
    """
    return scan_sysfs_detailed(root, dev_dir, lazy)[0]


def scan_sysfs_detailed(
    root: bytes, dev_dir: bytes, lazy: bool = False
) -> tuple[list[DeviceRecord], list[Skipped]]:
    """:func:`scan_sysfs` plus the entries it skipped (in readdir order), with the reason."""
    class_path = root + b"/class/infiniband_verbs"
    if len(class_path) >= PATH_MAX_IBV:
        raise ScanError(errno.ENOMEM, class_path)
    # inside a read-once scope every step is one of its inputs, asked by path
    dirs = (_Dirs if current() is None else _Recorded)(class_path, root, dev_dir)
    records: list[DeviceRecord] = []
    skipped: list[Skipped] = []
    try:
        try:
            names = dirs.names()
        except OSError:
            names = []
        for name_str in names:
            if name_str[:1] == ".":
                continue
            name = name_str.encode(_FS_ENCODING, _FS_ERRORS)  # os.fsencode
            rec = _scan_entry(dirs, name, root, lazy)
            if isinstance(rec, Skipped):
                skipped.append(rec)
            else:
                records.append(rec)
    finally:
        dirs.close()
    records.reverse()
    return records, skipped


def read_class_abi(root: bytes) -> Optional[int]:
    """``<S>/class/infiniband_verbs/abi_version`` as ``(int)strtol``; None if unreadable.

    An empty file is undefined behaviour in libibverbs (observed as 0); it is 0 here.
    """
    value = read_sysfs_file(root + b"/class/infiniband_verbs/abi_version", CLASS_ABI_SIZE)
    if value is None:
        return None
    return to_int32(strtol(value))


def is_char_device(path: bytes) -> bool:
    """True when ``path`` is a character device (no exception)."""
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False

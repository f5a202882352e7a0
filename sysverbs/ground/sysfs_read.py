"""The one sysfs reader: libibverbs' ``ibv_read_sysfs_file`` rules, used by every code path.

A read opens the file, does exactly one ``read()`` of at most ``size`` bytes and
then applies these rules (``sysfs.c: ibv_read_sysfs_file``;
docs/behaviour.md: Reading sysfs files):

* open or read fails (missing, EISDIR, EACCES, ELOOP, ...): ``None`` (C: -1);
* the data ends in ``\\n``: the data without that one newline;
* otherwise, shorter than ``size``: the data as read (an empty file gives ``b""``);
* otherwise (``size`` bytes, last one not ``\\n``): ``None``, the value would be cut.

The result may contain NUL bytes; callers that treat it as a C string apply
:func:`cstr`.  Unlike libibverbs the file is opened with
``O_NONBLOCK`` so that a FIFO in a broken tree cannot hang the caller (libibverbs
would block there); for regular and sysfs files this changes nothing.

Beside the reader, the C parsing rules libibverbs applies to what it reads
(:func:`strtoul`, :func:`scan_hx4`, ...): each takes the bytes a read produced and
reproduces what glibc does with them: ``strtoul``/``strtol`` in base 10, ``sscanf("%u:%u")`` and
``sscanf("%hx:%hx:%hx:%hx")``.  All of them stop at the first NUL byte, as a C
string would.

Each function first tries a fast path for the plain text sysfs holds (``"1"``,
``"231:0"``, ``"0c42:a103:00a5:1c30"``): only text made of nothing but digits (and
the separators) takes it, where the C rules reduce to :func:`int`; anything else
goes through the character-by-character rules.
"""

from __future__ import annotations

import os
from _thread import get_ident
from errno import EINVAL, EIO

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional, TypeVar, Union

    PathArg = Union[bytes, str]
    T = TypeVar("T")

__all__ = [
    "read_sysfs_file",
    "ReadOnce",
    "real_dir",
    "path_key",
    "read_file",
    "listdir",
    "derived",
    "current",
    "READ_FLAGS",
    "O_PATH",
    "check_sysfs_root",
    "cstr",
    "strtoul",
    "strtol",
    "to_int32",
    "scan_u_u",
    "scan_hx4",
    "fnmatch",
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

#: How a file is opened to be read (``O_NONBLOCK``: a FIFO in a broken tree cannot hang).
READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK

#: ``O_PATH`` (a descriptor that only names a file: no permission on it needed, and a
#: FIFO does not wait for a writer): PyPy 3.9's os lacks the name, so Linux's value from
#: its generic headers (x86, arm64, ppc, s390...), which CPython's os.O_PATH gives.
O_PATH: int = getattr(os, "O_PATH", 0o10000000)


def read_sysfs_file(path: PathArg, size: int, dir_fd: Optional[int] = None) -> Optional[bytes]:
    """Read ``path`` (relative to ``dir_fd`` when given) with libibverbs' rules; inside
    a :class:`ReadOnce` of this thread, a path already read is answered from it."""
    if _active:
        memo = _active.get(get_ident())
        if memo is not None:
            return _rules(memo.read(path, size, dir_fd), size)
    return _rules(_read_raw(path, size, dir_fd), size)


def read_file(path: PathArg, size: int) -> Union[bytes, int]:
    """What one ``read()`` of at most ``size`` bytes gives, as is; else the errno of the
    failed open, or minus the errno of the failed read (for readers that tell a missing
    file, EACCES and a read's EINVAL apart); inside a
    :class:`ReadOnce`, each path is read once, as by :func:`read_sysfs_file`."""
    if _active:
        memo = _active.get(get_ident())
        if memo is not None:
            return memo.read(path, size)
    return _read_raw(path, size)


def listdir(path: PathArg) -> list[bytes]:
    """``os.listdir(path)`` as bytes names (``OSError`` as it raises); inside a
    :class:`ReadOnce` of this thread each directory is listed once, as each file is read
    once: every reader of the invocation sees one listing of it."""
    if _active:
        memo = _active.get(get_ident())
        if memo is not None:
            return memo.listdir(path)
    return os.listdir(path if isinstance(path, bytes) else os.fsencode(path))


def current() -> Optional[ReadOnce]:
    """The :class:`ReadOnce` in force in this thread, or None."""
    return _active.get(get_ident()) if _active else None


def derived(kind: str, path: PathArg, build: Callable[[], T]) -> T:
    """``build()``, a value made only of what this thread's reads answer about the
    directory ``path`` (its files and listings, through :func:`read_sysfs_file` and
    :func:`listdir`); inside a :class:`ReadOnce` it is built once per (``kind``, file)
    and kept: the reads it is made of answer the same for the scope's whole life, so a
    second build would give the same value (``device_attributes()`` of one device, asked
    for by the diagnosis, the fleet's facts and the device's location)."""
    if _active:
        memo = _active.get(get_ident())
        if memo is not None:
            return memo.derived(kind, path, build)
    return build()


def _read_raw(path: PathArg, size: int, dir_fd: Optional[int] = None) -> Union[bytes, int]:
    """One ``read()`` of at most ``size`` bytes; the errno when the open fails (EINVAL
    for a path that holds a NUL byte), minus the errno when the read does."""
    try:
        fd = (os.open(path, READ_FLAGS) if dir_fd is None
              else os.open(path, READ_FLAGS, dir_fd=dir_fd))
    except OSError as e:
        return e.errno or EIO
    except ValueError:
        return EINVAL
    try:
        return os.read(fd, size)
    except OSError as e:
        return -(e.errno or EIO)
    finally:
        os.close(fd)


def _rules(data: Union[bytes, int], size: int) -> Optional[bytes]:
    """libibverbs' rules over what one read of at most ``size`` bytes gave."""
    if isinstance(data, int):
        return None
    if data.endswith(b"\n"):
        return data[:-1]
    if len(data) < size:
        return data
    return None


#: The :class:`ReadOnce` in force, by thread (``_thread.get_ident()``).
_active: dict[int, ReadOnce] = {}


def real_dir(d: bytes, dirs: dict[bytes, bytes],
             readlink: Callable[[bytes], Union[bytes, int]], depth: int = 0) -> bytes:
    """The directory ``d`` (absolute) with the links in it resolved, as the kernel's path
    walk resolves them: one ``readlink(component)`` per component (its target, or its
    errno: a component that is no link, or missing, stays as it is), a relative
    target's ``..`` taken from the real parent; ``dirs`` keeps each directory resolved.
    :meth:`ReadOnce.key` with the system's readlink; the recheck
    (:class:`sysverbs.ground.inputs.Recheck`) with the answers a scope recorded."""
    got = dirs.get(d)
    if got is not None:
        return got
    parent, name = os.path.split(d)
    if not name or depth > 40:  # the root; or a loop of links (ELOOP): as it is
        return d
    base = real_dir(parent, dirs, readlink, depth)
    here = os.path.normpath(base + b"/" + name) if name in (b".", b"..") \
        else (b"" if base == b"/" else base) + b"/" + name
    target = readlink(here)
    if isinstance(target, int):  # not a link (EINVAL), or missing: itself
        real = here
    else:  # base holds no link: a relative target's ".." is the real parent
        real = real_dir(os.path.normpath(os.path.join(base, target)), dirs, readlink,
                        depth + 1)
    dirs[d] = real
    return real


def path_key(path: PathArg, dirs: dict[bytes, bytes],
             readlink: Callable[[bytes], Union[bytes, int]]) -> bytes:
    """``path`` (made absolute) with the links of its directory resolved by
    :func:`real_dir`: how a :class:`ReadOnce` knows a file (:meth:`ReadOnce.key`)."""
    raw = path if isinstance(path, bytes) else os.fsencode(path)
    if raw[:1] != b"/":
        raw = os.path.abspath(raw)
    head, _, name = raw.rpartition(b"/")  # os.path.split's answer, but for "//"
    if not head or head[-1:] == b"/":
        head, name = os.path.split(raw)
    return real_dir(head, dirs, readlink) + b"/" + name


class ReadOnce:
    """One invocation's reads, each file once (docs/architecture.md, "One host model").

    ``with memo:`` makes :func:`read_sysfs_file` of this thread (a ``dir_fd`` read
    named by the directory ``/proc/self/fd`` gives) answer a path it has already read
    from what that read gave: a file is opened once however many readers want it, and
    every reader sees the same content.  What a read of ``size`` bytes would have given
    is kept exactly: the data of a read that stopped short of its size is the whole
    file, so it answers any size; a read that filled its buffer answers any size up to
    its own, and a larger one reads the file again (and keeps that).  A file is known
    by its directory with the links in it resolved (``class/infiniband/X/ports/1/state``
    and ``devices/.../infiniband/X/ports/1/state`` are one file): each directory is
    resolved once, one ``readlink`` per component.  Entered again (nested) it is a
    no-op; another thread's reads are not affected."""

    __slots__ = ("files", "dirs", "listings", "links", "inputs", "opaque", "values", "_entered")

    def __init__(self) -> None:
        #: the file's key (:meth:`key`) -> (what one read gave, or its errno; the size
        #: it was read with)
        self.files: dict[bytes, tuple[Union[bytes, int], int]] = {}
        #: a directory as given -> the same with its links resolved
        self.dirs: dict[bytes, bytes] = {}
        #: a directory's key -> its names as ``os.listdir`` gave them, or its errno
        self.listings: dict[bytes, Union[list[bytes], int]] = {}
        #: a directory component :meth:`key` resolved -> its ``readlink`` (the target,
        #: or the errno: EINVAL for a directory that is no link)
        self.links: dict[bytes, Union[bytes, int]] = {}
        #: every other input of the scope (:mod:`sysverbs.ground.inputs`): (kind,
        #: arguments) -> (how to ask again, what it answered)
        self.inputs: dict[tuple[object, ...],
                          tuple[Callable[[], object], tuple[bool, object]]] = {}
        #: why the scope's answer depends on something not recorded here (a netlink
        #: answer...): "" when everything it depends on is in the records above
        self.opaque = ""
        #: (kind, key) -> a value :func:`derived` built from this scope's reads
        self.values: dict[tuple[str, bytes], object] = {}
        #: per ``with``, in this thread: whether it made this one the thread's
        self._entered: list[tuple[int, bool]] = []

    def key(self, path: PathArg) -> bytes:
        """``path`` (absolute) with the links of its directory resolved."""
        return path_key(path, self.dirs, self._readlink)

    def _readlink(self, here: bytes) -> Union[bytes, int]:
        """``readlink(here)``'s target, or its errno (EINVAL for a directory that is no
        link, or a NUL byte), recorded."""
        try:
            got: Union[bytes, int] = os.readlink(here)
        except OSError as e:  # not a link (EINVAL), or missing
            got = e.errno or EIO
        except ValueError:  # a NUL byte
            got = EINVAL
        self.links[here] = got
        return got

    def read(self, path: PathArg, size: int, dir_fd: Optional[int] = None
             ) -> Union[bytes, int]:
        """What one read of at most ``size`` bytes gives (or its errno), read once."""
        if dir_fd is None:
            key = self.key(path)
        else:
            try:
                key = self.key(os.path.join(os.readlink(b"/proc/self/fd/%d" % dir_fd),
                                            os.fsencode(path)))
            except (OSError, ValueError):  # no /proc: read it, and keep nothing
                self.opaque = self.opaque or "a read relative to a directory without /proc"
                return _read_raw(path, size, dir_fd)
        have = self.files.get(key)
        if have is not None:
            data, read_size = have
            if isinstance(data, int):
                return data
            if len(data) < read_size or size <= read_size:
                return data[:size]
        data = _read_raw(path, size, dir_fd)
        self.files[key] = (data, size)
        return data

    def listdir(self, path: PathArg) -> list[bytes]:
        """``os.listdir(path)`` (bytes names), listed once: the same names (a new list)
        or the same ``OSError`` for every later call."""
        key = self.key(path)
        have = self.listings.get(key)
        if have is None:
            try:
                have = os.listdir(path if isinstance(path, bytes) else os.fsencode(path))
            except OSError as e:
                have = e.errno or EIO
            self.listings[key] = have
        if isinstance(have, int):
            raise OSError(have, os.strerror(have), os.fsdecode(path))
        return list(have)

    def derived(self, kind: str, path: PathArg, build: Callable[[], T]) -> T:
        """:func:`derived` in this scope: ``build()`` once per (``kind``, file)."""
        key = (kind, self.key(path))
        if key in self.values:
            return self.values[key]  # type: ignore[return-value]
        value = build()
        self.values[key] = value
        return value

    def records_only(self) -> None:
        """Forget what only the scope's own reads use (the directories resolved, the
        derived values), keeping its records: for a finished scope kept to be asked
        again (:func:`sysverbs.ground.inputs.changed`)."""
        self.dirs.clear()
        self.values.clear()

    def __enter__(self) -> ReadOnce:
        me = get_ident()
        first = me not in _active
        if first:
            _active[me] = self
        self._entered.append((me, first))
        return self

    def __exit__(self, *exc: object) -> None:
        me, first = self._entered.pop()
        if first:
            del _active[me]


# ------------------------------------------------------------ C parsing rules
# C isspace() in the "C" locale.
_SPACE = frozenset(b" \t\n\v\f\r")
_DIGITS = frozenset(b"0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")

_HEX_COLON = b"0123456789abcdefABCDEF:"

_ULONG_MAX = (1 << 64) - 1
_LONG_MAX = (1 << 63) - 1
_LONG_MIN = -(1 << 63)


def cstr(data: bytes) -> bytes:
    """The C string held in ``data``: everything before the first NUL."""
    nul = data.find(b"\0")
    return data if nul < 0 else data[:nul]


def _skip_space(s: bytes, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _SPACE:
        i += 1
    return i


def _sign(s: bytes, i: int) -> tuple[bool, int]:
    if i < len(s) and s[i] in b"+-":
        return s[i] == 0x2D, i + 1
    return False, i


def _digits(s: bytes, i: int, allowed: frozenset[int]) -> int:
    n = len(s)
    while i < n and s[i] in allowed:
        i += 1
    return i


def _decimal(data: bytes) -> tuple[bool, int]:
    """What ``strtoul``/``strtol`` scan in base 10: leading white space, a sign, the
    digits (up to the first NUL); (negative, magnitude), magnitude 0 without a digit."""
    s = cstr(data)
    i = _skip_space(s, 0)
    neg, i = _sign(s, i)
    j = _digits(s, i, _DIGITS)
    return neg, int(s[i:j]) if j > i else 0


def strtoul(data: bytes) -> int:
    """glibc ``strtoul(s, NULL, 10)`` on a 64-bit host (result in 0..2**64-1)."""
    if data.isdigit() and len(data) < 20:  # ASCII digits only, below 10**19: no clamp
        return int(data)
    head, colon, _ = data.partition(b":")  # "1: CA" (node_type): digits up to a colon
    if colon and head.isdigit() and len(head) < 20:
        return int(head)
    neg, value = _decimal(data)
    if value > _ULONG_MAX:
        return _ULONG_MAX
    return (-value) & _ULONG_MAX if neg else value


def strtol(data: bytes) -> int:
    """glibc ``strtol(s, NULL, 10)`` on a 64-bit host (clamped to the long range)."""
    if data.isdigit() and len(data) < 19:  # below 10**18: no clamp
        return int(data)
    neg, value = _decimal(data)
    return max(_LONG_MIN, min(_LONG_MAX, -value if neg else value))


def to_int32(value: int) -> int:
    """C conversion of an integer to a signed 32-bit ``int`` (two's complement)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _scan_number(s: bytes, i: int, hexadecimal: bool) -> tuple[Optional[int], int]:
    """One scanf ``%u``/``%x`` conversion from ``s[i:]``: (value mod 2**64, next index).

    The value is None when the conversion fails.  Leading whitespace is skipped,
    a sign is accepted, and ``%x`` accepts a ``0x``/``0X`` prefix (glibc keeps the
    ``0`` as the number when no hex digit follows the ``x``).
    """
    i = _skip_space(s, i)
    neg, i = _sign(s, i)
    n = len(s)
    got_zero = False
    if hexadecimal and i < n and s[i] == 0x30:
        got_zero = True
        i += 1
        if i < n and s[i] in b"xX":
            i += 1
    j = _digits(s, i, _HEX if hexadecimal else _DIGITS)
    if j == i and not got_zero:
        return None, j
    value = int(s[i:j], 16 if hexadecimal else 10) if j > i else 0
    if value > _ULONG_MAX:
        value = _ULONG_MAX
    elif neg:
        value = (-value) & _ULONG_MAX
    return value, j


def scan_u_u(data: bytes) -> Optional[tuple[int, int]]:
    """``sscanf(s, "%u:%u", &a, &b) == 2``: the two unsigned 32-bit values, else None."""
    a_text, colon, b_text = data.partition(b":")
    if colon and a_text.isdigit() and b_text.isdigit() and len(a_text) < 20 and len(b_text) < 20:
        return int(a_text) & 0xFFFFFFFF, int(b_text) & 0xFFFFFFFF
    s = cstr(data)
    a, i = _scan_number(s, 0, False)
    if a is None or i >= len(s) or s[i] != 0x3A:
        return None
    b, _ = _scan_number(s, i + 1, False)
    if b is None:
        return None
    return a & 0xFFFFFFFF, b & 0xFFFFFFFF


def scan_hx4(data: bytes) -> Optional[tuple[int, int, int, int]]:
    """``sscanf(s, "%hx:%hx:%hx:%hx")`` == 4: four 16-bit values, else None."""
    if not data.translate(None, _HEX_COLON):  # hex digits and colons only
        fields = data.split(b":")
        if len(fields) == 4:
            p0, p1, p2, p3 = fields
            if 0 < len(p0) <= 16 and 0 < len(p1) <= 16 and 0 < len(p2) <= 16 and 0 < len(p3) <= 16:
                return (
                    int(p0, 16) & 0xFFFF,
                    int(p1, 16) & 0xFFFF,
                    int(p2, 16) & 0xFFFF,
                    int(p3, 16) & 0xFFFF,
                )
    s = cstr(data)
    parts: list[int] = []
    i = 0
    for k in range(4):
        if k:
            if i >= len(s) or s[i] != 0x3A:
                return None
            i += 1
        value, i = _scan_number(s, i, True)
        if value is None:
            return None
        parts.append(value & 0xFFFF)
    return parts[0], parts[1], parts[2], parts[3]


def fnmatch(pattern: bytes, text: bytes) -> bool:
    """glibc ``fnmatch(pattern, text, 0) == 0`` in the "C" locale, for patterns made of
    literal bytes, ``*`` and ``?`` (the only ones libibverbs' match tables use; the
    provider table refuses others).  Without flags ``*`` and ``?`` match any byte,
    ``/`` and a leading ``.`` included.  Both stop at a NUL, as C strings do."""
    pattern, text = cstr(pattern), cstr(text)
    p = t = 0
    star = -1
    resume = 0
    np, nt = len(pattern), len(text)
    while t < nt:
        if p < np:
            c = pattern[p]
            if c == 0x2A:  # '*': remember where it is, try matching nothing first
                star, resume = p, t
                p += 1
                continue
            if c == 0x3F or c == text[t]:
                p += 1
                t += 1
                continue
        if star < 0:
            return False
        resume += 1  # let the last '*' take one more byte
        p, t = star + 1, resume
    while p < np and pattern[p] == 0x2A:
        p += 1
    return p == np


def check_sysfs_root(root: PathArg) -> None:
    """Raise :class:`FileNotFoundError` (``<root>: not a sysfs tree (no devices/)``) when
    ``root`` has no ``devices/`` directory: it is not a sysfs tree, or no longer one
    (removed or unmounted under a running exporter).  The one rule of the commands'
    start-up check and of every part of a fleet snapshot."""
    if not os.path.isdir(os.path.join(os.fsencode(root), b"devices")):
        import errno

        raise FileNotFoundError(errno.ENOENT, "not a sysfs tree (no devices/)",
                                os.fsdecode(root))

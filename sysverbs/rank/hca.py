"""NCCL's device lists (``NCCL_IB_HCA``, ``NCCL_SOCKET_IFNAME``) parsed and matched as
NCCL does it, and the socket interface its bootstrap picks."""

from __future__ import annotations

from ..engine.api import index_arg, items_arg
from ..ground.errors import WrongTypeError
from ..ground.records import FrozenRecord, RecordTuple, init
from .ctext import atoi, encoded, int_cast, text_arg
from .versions import (
    LATEST,
    MAX_IB_DEVS,
    V_STRTOK_PARSER,
    Version,
    max_ib_devs,
    parse_version,
)

# no typing or dataclasses at run time (rank/environment.py says why)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Optional

    from .versions import VersionArg

__all__ = [
    "MAX_IFS",
    "NAME_MAX",
    "HcaEntry",
    "HcaFilter",
    "cut_name",
    "parse_hca",
    "socket_interface",
]

#: ``MAX_IFS`` (src/include/socket.h): entries read from NCCL_SOCKET_IFNAME.
MAX_IFS = 16
#: ``sizeof(netIf.prefix) - 1`` (src/include/utils.h): longest name an entry keeps.
NAME_MAX = 63


def cut_name(name: str) -> str:
    """``snprintf(prefix, 64, "%s", tok)``: the name cut at 63 bytes.

    NCCL counts bytes, so its cut may end inside a UTF-8 character (``"é" * 40`` keeps
    31 ``é`` and the first byte of the 32nd).  The str returned is the longest run of
    whole characters within those 63 bytes (``"é" * 31``): a prefix of ``name`` that
    encodes back to bytes NCCL keeps, never a lone surrogate made by the cut;
    :meth:`HcaFilter.match_index` compares NCCL's 63 bytes themselves."""
    if len(encoded(name)) <= NAME_MAX:
        return name
    size = 0
    for i, c in enumerate(name):
        size += len(encoded(c))
        if size > NAME_MAX:
            return name[:i]
    return name  # pragma: no cover (the whole name is over 63 bytes)


class HcaEntry(RecordTuple, tuple[str, int, int, int, str]):
    """One entry of the list: ``prefix[:port[:rail[:plane]]]`` (-1: not given).
    ``text`` is the entry as written (between commas).  A named tuple."""

    __slots__ = ()
    _fields = ("prefix", "port", "rail", "plane", "text")

    def __new__(cls, prefix: str, port: int, rail: int, plane: int, text: str) -> HcaEntry:
        return tuple.__new__(cls, (prefix, port, rail, plane, text))

    @property
    def prefix(self) -> str:
        return self[0]

    @property
    def port(self) -> int:
        return self[1]

    @property
    def rail(self) -> int:
        return self[2]

    @property
    def plane(self) -> int:
        return self[3]

    @property
    def text(self) -> str:
        return self[4]


def _parse_list_strtok(text: str, max_list: int) -> list[HcaEntry]:
    """``parseStringList`` since 2.30.7 (src/misc/utils.cc): ``strtok_r(",")`` drops
    empty entries, ``strsep(":")`` splits the fields, an empty or absent field is -1,
    a present one ``atoi``; rail and plane are ``int16_t``; an entry whose name is
    empty is dropped."""
    out: list[HcaEntry] = []
    for entry in text.split(","):
        if len(out) >= max_list:
            break
        if not entry:
            continue
        fields = entry.split(":")
        if not fields[0]:
            continue
        nums = []
        for k in (1, 2, 3):
            tok = fields[k] if k < len(fields) else ""
            nums.append(atoi(tok) if tok else -1)
        out.append(HcaEntry(cut_name(fields[0]), nums[0], int_cast(nums[1], 16),
                            int_cast(nums[2], 16), entry))
    return out


def _parse_list_loop(text: str, max_list: int) -> list[HcaEntry]:
    """``parseStringList`` before 2.30.7 (src/misc/utils.cc, a character loop): a name
    ends at ``:`` (port = ``atoi`` of the rest, so ``mlx5_0:`` is port 0, then skip to
    the next ``,``) or at ``,``/end (port -1); empty names are dropped.  Names of 64
    characters or more overflowed the 64-byte buffer before 2.30.7 (undefined
    behaviour, NVIDIA/nccl#2026); here they are cut at 63 as in 2.30.7."""
    out: list[HcaEntry] = []
    i, n = 0, len(text)
    while i <= n and len(out) < max_list:
        start = i
        while i < n and text[i] not in ":,":
            i += 1
        name = text[start:i]
        if i < n and text[i] == ":":
            port_start = i + 1
            j = port_start
            while j < n and text[j] != ",":
                j += 1
            if name:
                out.append(HcaEntry(cut_name(name), atoi(text[port_start:]), -1, -1,
                                    text[start:j]))
            i = j + 1
        else:
            if name:
                out.append(HcaEntry(cut_name(name), -1, -1, -1, name))
            i += 1
    return out


class HcaFilter(FrozenRecord):
    """A parsed NCCL device list (``NCCL_IB_HCA``, ``NCCL_SOCKET_IFNAME``...).

    ``negate`` is a leading ``^``, ``exact`` a ``=`` right after it (or first); both
    apply to the whole list.  ``entries`` are the entries NCCL keeps.
    """

    __slots__ = _fields = ("value", "negate", "exact", "entries", "version", "max_entries",
                           "dropped")
    value: str
    negate: bool
    exact: bool
    entries: tuple[HcaEntry, ...]
    version: Version
    max_entries: int
    #: The entries after the first ``max_entries`` (NCCL does not read them).
    dropped: tuple[str, ...]

    def __init__(self, value: str, negate: bool, exact: bool, entries: tuple[HcaEntry, ...],
                 version: Version = LATEST, max_entries: int = MAX_IB_DEVS,
                 dropped: tuple[str, ...] = ()) -> None:
        init(self, value, negate, exact, entries, version, max_entries, dropped)

    def match_index(self, device: str, port: int = -1) -> int:
        """``matchIfList`` (src/misc/utils.cc): the index of the first entry that
        matches ``device`` (``matchIf``: the entry is a prefix of the name, or equal
        with ``=``) and ``port`` (``matchPort``: equal, or either is -1); -1 when none
        does.  Ignores ``^``.  A name cut at 63 bytes (:func:`cut_name`) is compared as
        NCCL compares it: its first 63 bytes."""
        if not isinstance(device, str):
            raise WrongTypeError(f"device must be a str, not {type(device).__name__}")
        raw: Optional[bytes] = None
        for i, e in enumerate(self.entries):
            name = e.text.split(":", 1)[0]
            if name != e.prefix and cut_name(name) == e.prefix:
                if raw is None:
                    try:
                        raw = encoded(device)
                    except UnicodeEncodeError:  # no C string: no name NCCL sees
                        raw = b"\0"
                cut = encoded(name)[:NAME_MAX]
                ok = raw == cut if self.exact else raw.startswith(cut)
            elif self.exact:
                ok = device == e.prefix
            else:
                ok = device.startswith(e.prefix)
            if ok and (port == -1 or e.port == -1 or port == e.port):
                return i
        return -1

    def matches(self, device: str, port: int = -1) -> bool:
        """Whether NCCL uses ``device`` (port ``port``; -1 = any): ``matchIfList(...)
        ^ searchNot`` as in ``ncclIbInitDevices`` (src/transport/net_ib/init.cc) and
        ``ncclOsFindInterfaces`` (src/os/linux.cc).  An empty list matches every
        device, so a bare ``^`` matches none."""
        if not self.entries:
            return not self.negate
        return (self.match_index(device, port) >= 0) != self.negate


def parse_hca(value: Optional[str], *, nccl_version: VersionArg = None,
              max_entries: Optional[int] = None) -> HcaFilter:
    """Parse a device list as NCCL does (``ncclIbInitDevices`` in
    src/transport/net_ib/init.cc for NCCL_IB_HCA, ``ncclOsFindInterfaces`` in
    src/os/linux.cc for NCCL_SOCKET_IFNAME, ``parseStringList`` in src/misc/utils.cc).

    * a first ``^`` excludes the listed devices; then a ``=`` makes names exact;
      anywhere else they are part of a name;
    * entries are split on ``,`` only: empty entries are dropped and nothing is
      trimmed (``" mlx5_0"`` is a name that starts with a space);
    * an entry is ``name[:port[:rail[:plane]]]``, each number read by ``atoi``; since
      2.30.7 an empty field is -1 (any), before it ``mlx5_0:`` read port 0 and rail
      and plane did not exist;
    * names are cut at 63 bytes (a name cut inside a UTF-8 character keeps its whole
      characters in ``prefix``; matching uses NCCL's 63 bytes, see :func:`cut_name`); only
      the first ``max_entries`` entries are read
      (default :func:`max_ib_devs`, 32 since 2.18.5, for NCCL_IB_HCA; pass
      :data:`MAX_IFS` = 16 for NCCL_SOCKET_IFNAME);
    * None (unset) and ``""`` mean every device.

    A value that is not a str is a :class:`~sysverbs.ground.errors.WrongTypeError`; one that
    no environment variable can hold (a NUL byte, a surrogate :func:`os.fsdecode`
    does not make) a :class:`~sysverbs.ground.errors.UsageError`.

    >>> parse_hca("é" * 40).entries[0].prefix == "é" * 31   # 62 of NCCL's 63 bytes
    True
    >>> f = parse_hca("^=mlx5_0:1,mlx5_3")
    >>> f.negate, f.exact, [(e.prefix, e.port) for e in f.entries]
    (True, True, [('mlx5_0', 1), ('mlx5_3', -1)])
    >>> f.matches("mlx5_0", 1), f.matches("mlx5_0", 2), f.matches("mlx5_30")
    (False, True, True)
    """
    version = parse_version(nccl_version)
    if max_entries is None:
        max_entries = max_ib_devs(version)
    else:
        max_entries = index_arg(max_entries, "max_entries")
    text = "" if value is None else text_arg("the device list", value)
    negate = text.startswith("^")
    if negate:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    parser = _parse_list_strtok if version >= V_STRTOK_PARSER else _parse_list_loop
    entries = parser(text, max_entries)
    dropped: tuple[str, ...] = ()
    if len(entries) == max_entries:
        rest = parser(text, 1 << 30)[max_entries:]
        dropped = tuple(e.text for e in rest)
    return HcaFilter(value or "", negate, exact, tuple(entries), version, max_entries,
                     dropped)


# ----------------------------------------------------------------------------- sockets

#: ``ncclFindInterfaces`` (src/misc/socket.cc): the lists tried in turn when
#: NCCL_SOCKET_IFNAME is unset or one character long (NCCL_COMM_ID's subnet match,
#: between the first and second, is not modelled).
_DEFAULT_IFNAMES = ("ib", "^docker,lo,virbr", "docker", "lo", "virbr")


def socket_interface(interfaces: Iterable[str], value: Optional[str] = None, *,
                     nccl_version: VersionArg = None) -> Optional[str]:
    """The interface NCCL's bootstrap uses (``Bootstrap: Using <name>:<addr>``), or None
    (``Bootstrap : no socket interface found``).

    ``interfaces`` are the names of the running interfaces with an IPv4 or IPv6
    address, in ``getifaddrs`` order (``ncclOsFindInterfaces``, src/os/linux.cc, also
    skips IPv6 loopback addresses).  ``value`` is NCCL_SOCKET_IFNAME: used when longer
    than one character (``ncclFindInterfaces``, src/misc/socket.cc), else NCCL tries
    ``ib``, then ``^docker,lo,virbr``, then ``docker``, ``lo`` and ``virbr``.

    >>> socket_interface(["lo", "eth0", "mlx5_10"], "mlx5_1")
    'mlx5_10'
    >>> socket_interface(["lo", "eth0"]), socket_interface(["lo", "eth0"], "^")
    ('eth0', 'eth0')
    """
    names: list[str] = items_arg(interfaces, "interfaces")
    for name in names:
        text_arg("an interface name", name)
    if value is not None:
        text_arg("NCCL_SOCKET_IFNAME", value)
    lists = (value,) if value is not None and len(encoded(value)) > 1 else _DEFAULT_IFNAMES
    for text in lists:
        f = parse_hca(text, nccl_version=nccl_version, max_entries=MAX_IFS)
        for name in names:
            if f.matches(name, -1):
                return name
    return None

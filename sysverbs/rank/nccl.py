"""NCCL's device filters and device choice, exactly as NCCL reads them (docs/nccl.md).

* :func:`parse_hca` reads ``NCCL_IB_HCA`` (and, with ``max_entries=16``,
  ``NCCL_SOCKET_IFNAME``) into a :class:`HcaFilter` whose ``matches(device, port)``
  says whether NCCL uses that device port.
* :func:`socket_interface` is the interface NCCL's bootstrap picks from a list of
  interfaces (``NCCL_SOCKET_IFNAME``, else NCCL's defaults).
* :func:`nccl_environment` is the environment NCCL sees once it has read its
  config files (``NCCL_CONF_FILE`` or ``~/.nccl.conf``, then ``/etc/nccl.conf``).
* :func:`select_ib` / :func:`predict_ib` are the (device, port, link layer) list
  NCCL's IB transport builds, and :meth:`IbSelection.using_line` its
  ``NET/IB : Using ...`` line.
* :func:`lint_hca` finds the mistakes that make a value mean something else, and what
  NCCL then does that fails or degrades (no device, link layers mixed, merges that
  fail, plane IDs it refuses, a full table); it gives at most one fix per value.

Everything is taken from NCCL's source (NVIDIA/nccl); each function cites the file
and function it follows.  ``nccl_version`` selects the rules of a release (default:
the newest, checked against NCCL 2.32.3 from PyPI).

>>> from sysverbs.nccl import parse_hca
>>> f = parse_hca("mlx5_1")
>>> f.matches("mlx5_1"), f.matches("mlx5_10")         # a prefix match
(True, True)
>>> parse_hca("=mlx5_1").matches("mlx5_10")             # "=": exact names
False
>>> parse_hca("^").matches("mlx5_0")                    # a bare "^" excludes everything
False
>>> parse_hca("mlx5_0:1").matches("mlx5_0", 2), parse_hca("mlx5_0:1").matches("mlx5_0", 1)
(False, True)
>>> parse_hca("mlx5_0:").entries[0].port                # an empty port is "any port"...
-1
>>> parse_hca("mlx5_0:", nccl_version="2.30.4").entries[0].port   # ...since 2.30.7
0
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NamedTuple, Optional, Union

from ..engine.api import environ_arg, index_arg, items_arg
from ..ground.errors import UsageError, WrongTypeError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from typing_extensions import Unpack

    from ..engine.api import ListOptions

__all__ = [
    "MAX_IB_DEVS",
    "MAX_IFS",
    "PLANE_MAX_INDEX",
    "HcaEntry",
    "HcaFilter",
    "IbPort",
    "IbDevice",
    "IbSelection",
    "LintWarning",
    "LintResult",
    "parse_hca",
    "parse_version",
    "max_ib_devs",
    "socket_interface",
    "nccl_environment",
    "read_conf_file",
    "select_ib",
    "host_ports",
    "predict_ib",
    "lint_hca",
]

#: ``MAX_IB_DEVS`` (src/transport/net_ib/common.h): entries read from NCCL_IB_HCA, and
#: the most device ports the IB transport keeps.
MAX_IB_DEVS = 32
#: ``MAX_IFS`` (src/include/socket.h): entries read from NCCL_SOCKET_IFNAME.
MAX_IFS = 16
#: ``sizeof(netIf.prefix) - 1`` (src/include/utils.h): longest name an entry keeps.
NAME_MAX = 63

Version = tuple[int, int, int]
VersionArg = Union[None, str, int, "tuple[int, ...]"]

#: The newest rules this module knows (NCCL 2.32.3, the PyPI wheel it is tested against).
LATEST: Version = (2, 32, 3)
# Releases where a rule changed (tags of NVIDIA/nccl).  Tables are data:
_V_STRTOK_PARSER = (2, 30, 7)  # parseStringList: strtok_r/strsep, rail and plane fields
_V_MERGED_IN_INIT = ((2, 20, 0), (2, 24, 0))  # ncclIbInit merges ports: "[0]={...}"
_V_PCI_ORDER = (2, 29, 7)  # NCCL_IB_DEVICE_PCI_ORDER: devices sorted by PCI path
_V_NO_DEVICE_USING = (2, 24, 0)  # "Using" printed even when no device was found
_V_CONF_FILE_ENV = (2, 23, 0)  # NCCL_CONF_FILE replaces ~/.nccl.conf
_V_CONF_COMMENTS = (2, 26, 2)  # "#" lines skipped in config files
_V_CONF_FGETS = (2, 30, 3)  # fgets(4096) instead of getline, "\r" removed; $HOME
_V_OLDEST = (2, 5, 6)  # "=" exists and the device table is capped: the oldest modelled
_V_32_DEVS = (2, 18, 5)  # MAX_IB_DEVS 16 -> 32
_V_RO = (2, 12, 7)  # "NET/IB : Using%s %s; OOB" ([RO]); before: "Using%s ; OOB"
_V_LINE_2048 = (2, 20, 0)  # the Using line's buffer: 1024 -> 2048 bytes
# A merge of ports of different link layers: before 2.26.2 it fails the topology, and so
# ncclCommInitRank (src/graph/topo.cc ncclTopoMakeVnic: NCCLCHECK(ret), v2.24.3-1 line
# 966, v2.25.1-1 line 966); since 2.26.2 ncclTopoAutoMerge keeps the ports apart and
# restarts (v2.26.2-1 topo.cc line 1095, v2.30.7-1 line 1423), and ncclIbConnect and
# ncclIbAccept refuse a connection between link layers (v2.30.7-1
# src/transport/net_ib/connect.cc lines 985 and 1033: "Attempted to connect incompatible
# devices", "Remote %s device is incompatible with the local ...", ncclInternalError).
_V_MERGE_RETRY = (2, 26, 2)
# ncclIbGetPlaneIndex's warning names the 12 user-defined plane IDs (NVIDIA/nccl dev
# branch, 2.31.0, commit 8e4996ba; the text is in 2.32.3's libnccl.so.2)
_V_PLANE_TEXT = (2, 31, 0)
#: ``NCCL_IB_PLANE_MAX_INDEX`` (src/transport/net_ib/init.cc, v2.30.7-1 line 95).
PLANE_MAX_INDEX = 14

_C_SPACE = " \t\n\v\f\r"  # isspace() in the C locale


def parse_version(version: VersionArg) -> Version:
    """``"2.30.4"``, ``"2.30.4-1"``, ``(2, 30, 4)`` or NCCL_VERSION_CODE ``23004``; None
    is the newest (:data:`LATEST`).  Releases before 2.5.6 (no ``=``, an uncapped
    device table) are not modelled: ValueError."""
    v = _parse_version(version)
    if v < _V_OLDEST:
        raise UsageError(f"NCCL {v[0]}.{v[1]}.{v[2]} is older than 2.5.6, the oldest "
                         "release modelled")
    return v


def max_ib_devs(nccl_version: VersionArg = None) -> int:
    """``MAX_IB_DEVS``: 32 since 2.18.5, 16 before (entries read from NCCL_IB_HCA and
    device ports kept)."""
    return MAX_IB_DEVS if parse_version(nccl_version) >= _V_32_DEVS else 16


def _parse_version(version: VersionArg) -> Version:
    if version is None:
        return LATEST
    if isinstance(version, int):
        if version < 10000:  # codes before 2.9: major*1000 + minor*100 + patch
            return (version // 1000, version % 1000 // 100, version % 100)
        return (version // 10000, version % 10000 // 100, version % 100)
    if isinstance(version, str):
        parts = version.strip().lstrip("v").split("-")[0].split(".")
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise UsageError(f"not an NCCL version: {version!r}") from None
    elif isinstance(version, (tuple, list)) and all(
            isinstance(p, int) and not isinstance(p, bool) for p in version):
        nums = list(version)
    else:
        raise WrongTypeError("nccl_version must be a str, an int, a tuple of ints or None, "
                             f"not {version!r}")
    if not 1 <= len(nums) <= 3 or min(nums) < 0:
        raise UsageError(f"not an NCCL version: {version!r}")
    nums += [0] * (3 - len(nums))
    return (nums[0], nums[1], nums[2])


def _atoi(text: str) -> int:
    """glibc ``atoi``: ``(int) strtol(text, NULL, 10)`` (leading C whitespace, a sign,
    decimal digits; out of ``long`` range clamps, then the cast keeps 32 bits)."""
    i, n = 0, len(text)
    while i < n and text[i] in _C_SPACE:
        i += 1
    neg = False
    if i < n and text[i] in "+-":
        neg = text[i] == "-"
        i += 1
    j = i
    while j < n and "0" <= text[j] <= "9":
        j += 1
    value = int(text[i:j]) if j > i else 0
    value = -value if neg else value
    value = max(-(1 << 63), min((1 << 63) - 1, value))
    return _int_cast(value, 32)


def _int_cast(value: int, bits: int) -> int:
    """Two's complement truncation, as a C conversion to a narrower signed type."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _encoded(text: str) -> bytes:
    """The bytes NCCL sees for ``text``: UTF-8, with the undecodable bytes that
    :func:`os.fsdecode` turned into ``\\udcXX`` given back."""
    return text.encode("utf-8", "surrogateescape")


def _cut(name: str) -> str:
    """``snprintf(prefix, 64, "%s", tok)``: the name cut at 63 bytes.

    NCCL counts bytes, so its cut may end inside a UTF-8 character (``"é" * 40`` keeps
    31 ``é`` and the first byte of the 32nd).  The str returned is the longest run of
    whole characters within those 63 bytes (``"é" * 31``): a prefix of ``name`` that
    encodes back to bytes NCCL keeps, never a lone surrogate made by the cut;
    :meth:`HcaFilter.match_index` compares NCCL's 63 bytes themselves."""
    if len(_encoded(name)) <= NAME_MAX:
        return name
    size = 0
    for i, c in enumerate(name):
        size += len(_encoded(c))
        if size > NAME_MAX:
            return name[:i]
    return name  # pragma: no cover (the whole name is over 63 bytes)


def _text_arg(what: str, value: object) -> str:
    """``value`` as the C string NCCL would read: a str without NUL bytes whose
    surrogates, if any, are :func:`os.fsdecode`'s undecodable bytes."""
    if not isinstance(value, str):
        raise WrongTypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise UsageError(f"{what} contains a NUL byte (no environment variable can)")
    try:
        _encoded(value)
    except UnicodeEncodeError:
        raise UsageError(f"{what} is not text an environment variable can hold: "
                         f"{value!r}") from None
    return value


class HcaEntry(NamedTuple):
    """One entry of the list: ``prefix[:port[:rail[:plane]]]`` (-1: not given).
    ``text`` is the entry as written (between commas)."""

    prefix: str
    port: int
    rail: int
    plane: int
    text: str


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
            nums.append(_atoi(tok) if tok else -1)
        out.append(HcaEntry(_cut(fields[0]), nums[0], _int_cast(nums[1], 16),
                            _int_cast(nums[2], 16), entry))
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
                out.append(HcaEntry(_cut(name), _atoi(text[port_start:]), -1, -1,
                                    text[start:j]))
            i = j + 1
        else:
            if name:
                out.append(HcaEntry(_cut(name), -1, -1, -1, name))
            i += 1
    return out


@dataclass(frozen=True)
class HcaFilter:
    """A parsed NCCL device list (``NCCL_IB_HCA``, ``NCCL_SOCKET_IFNAME``...).

    ``negate`` is a leading ``^``, ``exact`` a ``=`` right after it (or first); both
    apply to the whole list.  ``entries`` are the entries NCCL keeps.
    """

    value: str
    negate: bool
    exact: bool
    entries: tuple[HcaEntry, ...]
    version: Version = LATEST
    max_entries: int = MAX_IB_DEVS
    #: The entries after the first ``max_entries`` (NCCL does not read them).
    dropped: tuple[str, ...] = field(default=())

    def match_index(self, device: str, port: int = -1) -> int:
        """``matchIfList`` (src/misc/utils.cc): the index of the first entry that
        matches ``device`` (``matchIf``: the entry is a prefix of the name, or equal
        with ``=``) and ``port`` (``matchPort``: equal, or either is -1); -1 when none
        does.  Ignores ``^``.  A name cut at 63 bytes (:func:`_cut`) is compared as
        NCCL compares it: its first 63 bytes."""
        if not isinstance(device, str):
            raise WrongTypeError(f"device must be a str, not {type(device).__name__}")
        raw: Optional[bytes] = None
        for i, e in enumerate(self.entries):
            name = e.text.split(":", 1)[0]
            if name != e.prefix and _cut(name) == e.prefix:
                if raw is None:
                    try:
                        raw = _encoded(device)
                    except UnicodeEncodeError:  # no C string: no name NCCL sees
                        raw = b"\0"
                cut = _encoded(name)[:NAME_MAX]
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
      characters in ``prefix``; matching uses NCCL's 63 bytes, see :func:`_cut`); only
      the first ``max_entries`` entries are read
      (default :func:`max_ib_devs`, 32 since 2.18.5, for NCCL_IB_HCA; pass
      :data:`MAX_IFS` = 16 for NCCL_SOCKET_IFNAME);
    * None (unset) and ``""`` mean every device.

    A value that is not a str is a :class:`~sysverbs.errors.WrongTypeError`; one that
    no environment variable can hold (a NUL byte, a surrogate :func:`os.fsdecode`
    does not make) a :class:`~sysverbs.errors.UsageError`.

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
    text = "" if value is None else _text_arg("the device list", value)
    negate = text.startswith("^")
    if negate:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    parser = _parse_list_strtok if version >= _V_STRTOK_PARSER else _parse_list_loop
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
        _text_arg("an interface name", name)
    if value is not None:
        _text_arg("NCCL_SOCKET_IFNAME", value)
    lists = (value,) if value is not None and len(_encoded(value)) > 1 else _DEFAULT_IFNAMES
    for text in lists:
        f = parse_hca(text, nccl_version=nccl_version, max_entries=MAX_IFS)
        for name in names:
            if f.matches(name, -1):
                return name
    return None


# ----------------------------------------------------------------------------- config files


def read_conf_file(data: bytes, *, nccl_version: VersionArg = None) -> list[tuple[str, str]]:
    """``setEnvFile`` (src/misc/param.cc): the ``(name, value)`` pairs of a config file.

    Since 2.30.3 lines are read with ``fgets`` into 4096 bytes (a longer line is read
    as several lines) and one ``\\n`` then one ``\\r`` is removed; before, ``getline``
    read whole lines and only the ``\\n`` was removed.  Since 2.26.2 a line starting
    with ``#`` is skipped.  A line without ``=`` is skipped; the name is what precedes
    the first ``=`` (at most 1023 bytes) and the value the rest (at most 1023 bytes).
    Nothing is trimmed: ``A = b`` sets ``"A "`` to ``" b"``.  (A NUL byte ends a line
    there, as ``strlen`` does.)

    >>> read_conf_file(b"NCCL_DEBUG=WARN\\nNCCL_SOCKET_IFNAME==ens1f0\\n# x=1\\nA = b\\r\\n")
    [('NCCL_DEBUG', 'WARN'), ('NCCL_SOCKET_IFNAME', '=ens1f0'), ('A ', ' b')]
    """
    version = parse_version(nccl_version)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WrongTypeError(f"data must be bytes, not {type(data).__name__}")
    data = bytes(data)
    fgets = version >= _V_CONF_FGETS
    pairs: list[tuple[str, str]] = []
    pos = 0
    n = len(data)
    while pos < n:
        limit = pos + 4095 if fgets else n
        end = data.find(b"\n", pos, limit)
        chunk = data[pos:end + 1] if end >= 0 else data[pos:limit]
        pos += len(chunk)
        if not fgets and chunk.startswith(b"#") and version >= _V_CONF_COMMENTS:
            continue
        line = chunk.split(b"\0", 1)[0]
        if line.endswith(b"\n"):
            line = line[:-1]
        if fgets and line.endswith(b"\r"):
            line = line[:-1]
        if fgets and line.startswith(b"#"):
            continue
        s = line.find(b"=")
        if s < 0:
            continue
        name = line[:min(1023, s)]
        val = line[s + 1:s + 1 + 1023]
        pairs.append((os.fsdecode(name), os.fsdecode(val)))
    return pairs


def _reroot(root: Optional[str], path: str) -> str:
    if not root or root == "/":
        return path
    return os.path.join(root, path.lstrip("/"))


def _passwd_home(root: Optional[str]) -> Optional[str]:
    """``getpwuid(getuid())->pw_dir``: from ``<root>/etc/passwd`` under an alternate root,
    else from the system's user database."""
    uid = os.getuid()
    if not root or root == "/":
        import pwd

        try:
            return pwd.getpwuid(uid).pw_dir
        except KeyError:
            return None
    try:
        with open(os.path.join(root, "etc", "passwd"), encoding="utf-8",
                  errors="surrogateescape") as fh:
            for line in fh:
                f = line.rstrip("\n").split(":")
                if len(f) >= 6 and f[2] == str(uid):
                    return f[5]
    except OSError:
        pass
    return None


def nccl_environment(env: Optional[Mapping[str, str]] = None, *, root: Optional[str] = None,
                     nccl_version: VersionArg = None) -> tuple[dict[str, str], dict[str, str]]:
    """The environment NCCL reads after ``initEnvFunc`` (src/misc/param.cc), and where
    each value came from.

    NCCL reads ``$NCCL_CONF_FILE`` when set and non-empty (since 2.23), else
    ``~/.nccl.conf`` (``$HOME`` since 2.30.3, before it the user database's home of the
    real uid, ``getpwuid(getuid())``), then ``/etc/nccl.conf`` (:func:`read_conf_file`),
    setting each variable with ``setenv(name, value, 0)``: the environment wins over
    both files and the first file over ``/etc/nccl.conf``.
    ``root`` is an alternate root for the three paths (and ``/etc/passwd``).  Returns
    ``(environment, sources)``: ``sources`` maps each variable a file set to its path.
    """
    version = parse_version(nccl_version)
    base = environ_arg(env)
    if root is not None:
        if not isinstance(root, (str, os.PathLike)):
            raise WrongTypeError(f"root must be a path, not {type(root).__name__}")
        root = _text_arg("root", os.fspath(root))
    result = dict(base)
    sources: dict[str, str] = {}
    user = base.get("NCCL_CONF_FILE") if version >= _V_CONF_FILE_ENV else None
    files: list[str] = []
    home = base.get("HOME") if version >= _V_CONF_FGETS else _passwd_home(root)
    if user:
        files.append(user[:1023])
    elif home is not None:
        files.append(f"{home}/.nccl.conf"[:1023])
    files.append("/etc/nccl.conf")
    for path in files:
        try:
            with open(_reroot(root, path), "rb") as fh:
                data = fh.read()
        except (OSError, ValueError):  # ValueError: a NUL or odd surrogate, only in a
            continue                   # caller's env: no file NCCL could open either
        for name, value in read_conf_file(data, nccl_version=version):
            if not name or "=" in name or name in result:
                continue  # setenv fails on "" (EINVAL); an existing value is kept
            result[name] = value
            sources[name] = path
    return result, sources


def _param(env: Mapping[str, str], name: str, default: int) -> int:
    """``ncclLoadParam`` (src/misc/param.cc): ``strtoll(value, NULL, 0)`` when set and
    non-empty; a value out of range (ERANGE) gives the default."""
    text = env.get(name)
    if not text:
        return default
    i, n = 0, len(text)
    while i < n and text[i] in _C_SPACE:
        i += 1
    neg = False
    if i < n and text[i] in "+-":
        neg = text[i] == "-"
        i += 1
    base, digits = 10, "0123456789"
    if text[i:i + 2].lower() == "0x" and i + 2 < n and text[i + 2] in "0123456789abcdefABCDEF":
        base, digits, i = 16, "0123456789abcdefABCDEF", i + 2
    elif text[i:i + 1] == "0":
        base, digits = 8, "01234567"
    j = i
    while j < n and text[j] in digits:
        j += 1
    value = int(text[i:j], base) if j > i else 0
    value = -value if neg else value
    if not -(1 << 63) <= value < (1 << 63):
        return default
    return value


# ----------------------------------------------------------------------------- IB devices


class IbPort(NamedTuple):
    """One port of a device as NCCL's ``ncclIbInitDevices`` sees it.

    ``link_layer`` is sysfs' text (``InfiniBand``, ``Ethernet``...), ``full_pci_path``
    the ``realpath`` of ``<sysfs>/class/infiniband/<dev>/device`` ("" when it has
    none), ``opens`` whether ``ibv_open_device`` succeeds.
    """

    device: str
    port: int
    active: bool
    link_layer: Optional[str]
    full_pci_path: str
    sys_image_guid: int = 0
    opens: bool = True
    state: str = ""


class IbDevice(NamedTuple):
    """One entry of NCCL's device table: ``[index]device:port[:rail[:plane]]/link``."""

    slot: int
    device: str
    port: int
    link: str  # "IB" or "RoCE" (NCCL_IB_LLSTR)
    pci_path: str
    rail: int = -1
    plane: int = -1

    def label(self) -> str:
        """``[0]mlx5_0:1/IB`` as ``ncclIbInitDevices`` prints it."""
        text = f"[{self.slot}]{self.device}:{self.port}"
        if self.rail != -1:
            text += f":{self.rail}"
        elif self.plane != -1:
            text += ":"
        if self.plane != -1:
            text += f":{self.plane}"
        return f"{text}/{self.link}"


@dataclass(frozen=True)
class IbSelection:
    """The IB transport's device table: ``devices`` in NCCL's order (the indexes it
    prints), ``merged`` the virtual devices of merged multi-port NICs (lists of
    indexes into ``devices``), ``notes`` what NCCL would warn about."""

    devices: tuple[IbDevice, ...]
    merged: tuple[tuple[int, ...], ...]
    version: Version
    disabled: bool = False
    notes: tuple[str, ...] = ()
    #: Merges of ports of different link layers NCCL attempts (indexes into ``devices``).
    incompatible: tuple[tuple[int, int], ...] = ()
    #: The devices NCCL does not read because its table is full (``MAX_IB_DEVS``), and
    #: whether the last one read overflows the table (its ports go past the end).
    unread: tuple[str, ...] = ()
    overflow: bool = False
    #: The warning with which ``ncclIbInitDevices`` fails after building the table (a
    #: plane ID NCCL cannot use, since 2.30.7): the IB transport then does not start and
    #: NCCL falls back to its next network, sockets.  "" when it does not fail.
    failure: str = ""

    def using_line(self, oob: Optional[str] = None, relaxed_ordering: bool = True) -> str:
        """NCCL's ``NET/IB : Using ...`` INFO line (``ncclIbInitDevices``,
        src/transport/net_ib/init.cc; ``ncclIbInit`` in src/transport/net_ib.cc before
        2.29), without the ``host:pid:tid [cudaDev] NCCL INFO`` prefix.

        ``oob`` is the socket interface and address (``eth0:10.0.0.1<0>``, from
        NCCL_SOCKET_IFNAME, see :func:`socket_interface`); unknown, it is shown as
        ``?``.  ``[RO]`` appears when relaxed ordering is usable: libibverbs has
        ``ibv_reg_mr_iova2`` (rdma-core 22 and later) and NCCL_IB_PCI_RELAXED_ORDERING
        is 1 or 2 (default 2).  Before 2.24 nothing is printed when no device is found;
        later NCCL prints ``NET/IB : No device found.`` and then this line.
        """
        if self.disabled:
            return ""
        parts = []
        merged_era = _V_MERGED_IN_INIT[0] <= self.version < _V_MERGED_IN_INIT[1]
        if merged_era:
            for vi, group in enumerate(self.merged):
                if len(group) > 1:
                    inner = ", ".join(
                        f"[{d}] {self.devices[d].device}:{self.devices[d].port}/"
                        f"{self.devices[d].link}" for d in group)
                    parts.append(f" [{vi}]={{{inner}}}")
                else:
                    d = self.devices[group[0]]
                    parts.append(f" [{d.slot}]{d.device}:{d.port}/{d.link}")
        else:
            parts = [" " + d.label() for d in self.devices]
        line = "".join(parts)
        # snprintf(line + strlen(line), size - strlen(line), ...) into char line[1024]
        # (2048 since 2.20; before 2.24 the size passed is one less)
        room = 1023 if self.version < _V_LINE_2048 else 2047
        if self.version < _V_MERGED_IN_INIT[1]:
            room -= 1
        line = line.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "surrogateescape")
        if self.version < _V_RO:
            return f"NET/IB : Using{line} ; OOB {oob or '?'}"
        ro = "[RO]" if relaxed_ordering else ""
        return f"NET/IB : Using{line} {ro}; OOB {oob or '?'}"

    def lines(self, oob: Optional[str] = None, relaxed_ordering: bool = True) -> list[str]:
        """The lines NCCL prints: ``No device found.`` (then, since 2.24, the Using
        line), or the Using line."""
        if self.disabled:
            return ["(NCCL_IB_DISABLE is set: NCCL does not start its IB transport, which "
                    "prints nothing)"]
        if self.failure:  # before the Using line; then ncclNetPluginInit's INFO line
            return [self.failure, "Failed to initialize NET plugin IB"]
        if not self.devices:
            out = ["NET/IB : No device found."]
            if self.version >= _V_NO_DEVICE_USING:
                out.append(self.using_line(oob, relaxed_ordering))
            return out
        return [self.using_line(oob, relaxed_ordering)]

    def virtual_names(self) -> list[str]:
        """The merged devices' names (``mlx5_0+mlx5_1``), as ``Made virtual device``."""
        return ["+".join(self.devices[d].device for d in g) for g in self.merged]


def _pci_key(path: str) -> int:
    """``pciPathToInt64`` + ``busIdToInt64`` (src/misc/utils.cc): the hex digits of the
    last path component (``.`` and ``:`` skipped, at most 16), as a number."""
    comp = path.rstrip("/").rsplit("/", 1)[-1] if path else ""
    hexs: list[str] = []
    for c in comp:
        if len(hexs) >= 16:
            break
        if c in ".:":
            continue
        if c in "0123456789abcdefABCDEF":
            hexs.append(c)
        else:
            break
    if not hexs:
        return 0
    value = int("".join(hexs), 16)
    return min(value, (1 << 63) - 1)  # strtol clamps at LONG_MAX


def _merge_path(path: str, merge_vfs: bool) -> str:
    """``ncclIbGetPciPath``: the PCI path with the function digit (and with
    NCCL_IB_MERGE_VFS, the two device digits) set to 0, so that the ports and VFs of
    one NIC compare equal."""
    if not path:
        return ""
    p = list(path)
    p[-1] = "0"
    if merge_vfs and len(p) >= 4:
        p[-3] = p[-4] = "0"
    return "".join(p)


def select_ib(ports: Sequence[IbPort], env: Optional[Mapping[str, str]] = None, *,
              nccl_version: VersionArg = None) -> IbSelection:
    """NCCL's IB device table from the host's ports, in libibverbs' device order
    (``ncclIbInitDevices``, src/transport/net_ib/init.cc; ``ncclIbInit`` in
    src/transport/net_ib.cc before 2.29).

    For each device that opens (``Unable to open device`` otherwise), each port
    1..phys_port_cnt that is ACTIVE with an InfiniBand or Ethernet link layer and that
    NCCL_IB_HCA selects, until MAX_IB_DEVS (:func:`max_ib_devs`) are kept.  Since
    2.29.7 the table is sorted by PCI path (NCCL_IB_DEVICE_PCI_ORDER, default 1;
    devices without one last; ports of a device keep their order, as glibc's merge
    sort does).
    ``merged`` groups the ports of one NIC (same PCI path up to the function digit,
    and VFs with NCCL_IB_MERGE_VFS=1; from 2.20 to 2.23 also the same
    ``sys_image_guid`` and link layer) unless NCCL_IB_MERGE_NICS=0: before 2.24
    ``ncclIbInit`` merged them and printed ``[0]={...}``; since 2.24 the topology
    merges them (NCCL_NET_MERGE_LEVEL=PORT, the default) into virtual devices after
    the Using line.

    >>> pci = "/sys/devices/pci0000:00/0000:00:01.0/"
    >>> ports = [IbPort("mlx5_1", 1, True, "Ethernet", pci + "0000:12:00.0"),
    ...          IbPort("mlx5_0", 1, True, "InfiniBand", pci + "0000:0c:00.0")]
    >>> select_ib(ports, {"NCCL_IB_HCA": "mlx5"}).using_line("eth0:10.0.0.1<0>")
    'NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>'
    """
    version = parse_version(nccl_version)
    env = environ_arg(env)
    ports = items_arg(ports, "ports")
    if not all(isinstance(p, IbPort) for p in ports):
        raise WrongTypeError("ports must be IbPort objects (see host_ports())")
    if _param(env, "NCCL_IB_DISABLE", 0):
        return IbSelection((), (), version, disabled=True)
    filt = parse_hca(env.get("NCCL_IB_HCA"), nccl_version=version)
    notes: list[str] = []
    rows: list[tuple[IbPort, int]] = []
    seen_devices: list[str] = []
    by_device: dict[str, list[IbPort]] = {}
    for p in ports:
        if p.device not in by_device:
            seen_devices.append(p.device)
            by_device[p.device] = []
        by_device[p.device].append(p)
    cap = max_ib_devs(version)
    unread: list[str] = []
    for dev in seen_devices:
        dev_ports = sorted(by_device[dev], key=lambda q: q.port)
        usable = [q for q in dev_ports
                  if q.active and q.link_layer in ("InfiniBand", "Ethernet")
                  and filt.matches(q.device, q.port)]
        if len(rows) >= cap:
            notes.append(f"{dev}: not read, NCCL keeps at most {cap} device ports")
            if usable and all(q.opens for q in dev_ports):
                unread.append(dev)
            continue
        if not all(q.opens for q in dev_ports):
            notes.append(f"NET/IB : Unable to open device {dev}")
            continue
        for q in usable:
            rows.append((q, filt.match_index(q.device, q.port) if not filt.negate else -1))
    overflow = len(rows) > cap
    if overflow:
        notes.append(f"the last device's ports go past NCCL's {cap}-entry table "
                     "(ncclIbDevs overflows)")
        rows = rows[:cap]
    if version >= _V_PCI_ORDER and _param(env, "NCCL_IB_DEVICE_PCI_ORDER", 1):
        rows.sort(key=lambda r: (r[0].full_pci_path == "", _pci_key(r[0].full_pci_path)))
    new_fields = version >= _V_STRTOK_PARSER
    devices = []
    for i, (q, ent) in enumerate(rows):
        rail = filt.entries[ent].rail if (ent >= 0 and new_fields) else -1
        plane = filt.entries[ent].plane if (ent >= 0 and new_fields) else -1
        devices.append(IbDevice(i, q.device, q.port,
                                "IB" if q.link_layer == "InfiniBand" else "RoCE",
                                q.full_pci_path, rail, plane))
    failure = _plane_failure(devices, version) if new_fields else ""
    merge_vfs = bool(_param(env, "NCCL_IB_MERGE_VFS", 1))
    merge = bool(_param(env, "NCCL_IB_MERGE_NICS", 1)) and version >= _V_MERGED_IN_INIT[0]
    in_init = version < _V_MERGED_IN_INIT[1]
    groups: list[list[int]] = []
    incompatible: list[tuple[int, int]] = []
    if in_init:
        # ncclIbFindMatchingDev: the first merged device with the same PCI path,
        # sys_image_guid and link layer, and room (NCCL_IB_MAX_DEVS_PER_NIC = 2)
        keys: list[tuple[str, int, str]] = []
        for i, (q, _ent) in enumerate(rows):
            key = (_merge_path(q.full_pci_path, merge_vfs), q.sys_image_guid, devices[i].link)
            found = next((g for g, k in enumerate(keys) if merge and key[0] and k == key
                          and len(groups[g]) < 2), -1)
            if found < 0:
                groups.append([i])
                keys.append(key)
            else:
                groups[found].append(i)
    else:
        # ncclTopoAutoMerge: the unplaced ports of one NIC (PATH_PORT) together, at most
        # 8; a merge of different link layers fails, and its first port stays alone
        nics: dict[str, list[int]] = {}
        for i, (q, _ent) in enumerate(rows):
            path = _merge_path(q.full_pci_path, merge_vfs)
            nics.setdefault(path if (merge and path) else f"\0{i}", []).append(i)
        for members in nics.values():
            rest = list(members)
            while rest:
                cand = rest[:8]
                if all(devices[j].link == devices[cand[0]].link for j in cand):
                    groups.append(cand)
                    rest = rest[len(cand):]
                    continue
                d0, d1 = devices[cand[0]], next(devices[j] for j in cand
                                                 if devices[j].link != devices[cand[0]].link)
                if version >= _V_MERGE_RETRY:
                    notes.append(f"NET/IB : Attempted to merge incompatible devices: "
                                 f"[{d0.slot}]{d0.device}:{d0.port}/{d0.link} and "
                                 f"[{d1.slot}]{d1.device}:{d1.port}/{d1.link}. Try selecting "
                                 "NICs of only one link type using NCCL_IB_HCA")
                elif not incompatible:  # the first failure ends ncclTopoGetSystem
                    ll = {"IB": 1, "RoCE": 2}  # IBV_LINK_LAYER_INFINIBAND, _ETHERNET
                    notes.append(
                        "NET/IB : Trying to merge multiple devices together with different "
                        f"link_layer properties {d0.device} -> {ll[d0.link]}, {d1.device} -> "
                        f"{ll[d1.link]}. Try only selecting NICs with one type of link using "
                        "NCCL_IB_HCA")
                    notes.append("TOPO/NET : Tried merging multiple devices together and "
                                 "failed. Try setting NCCL_NET_MERGE_LEVEL=LOC")
                incompatible.append((d0.slot, d1.slot))
                groups.append([cand[0]])
                rest = rest[1:]
        groups.sort(key=lambda g: g[0])
    return IbSelection(tuple(devices), tuple(tuple(g) for g in groups), version,
                       notes=tuple(notes), incompatible=tuple(incompatible),
                       unread=tuple(unread), overflow=overflow, failure=failure)


def _plane_failure(devices: Sequence[IbDevice], version: Version) -> str:
    """``ncclIbGetPlaneIndex`` (src/transport/net_ib/init.cc, v2.30.7-1 lines 98-114),
    called for each device in table order: the warning with which it fails, or "".

    The distinct plane IDs start as ``{-1}`` (none given); a new one when there are
    already ``PLANE_MAX_INDEX - 1`` (13) fails, as does a new one other than -1 with
    bit 14 (``NCCL_IB_PLANE_VIRT_BIT``) set."""
    planes = [-1]
    for d in devices:
        if d.plane in planes:
            continue
        if len(planes) == PLANE_MAX_INDEX - 1:
            if version >= _V_PLANE_TEXT:
                return (f"NCCL cannot use more than {PLANE_MAX_INDEX - 2} user-defined "
                        "plane IDs.")
            return f"NCCL cannot use more than {PLANE_MAX_INDEX} plane IDs."
        if d.plane != -1 and d.plane & (1 << PLANE_MAX_INDEX):
            return f"NCCL cannot use a plane ID that is {d.plane}."
        planes.append(d.plane)
    return ""


def _state_number(text: str) -> Optional[int]:
    """``"4: ACTIVE"`` -> 4 (the kernel's ``%d: %s`` format of a port's ``state``)."""
    m = re.fullmatch(r"(\d{1,10}): (\S.*)", text)
    return int(m.group(1)) if m else None


def _realpath(path: str) -> str:
    """``realpath(3)``, "" when the path does not resolve: the kernel's answer for an
    ``O_PATH`` descriptor (three system calls, where os.path.realpath lstat()s every
    component), else os.path.realpath."""
    try:
        fd = os.open(path, getattr(os, "O_PATH", os.O_RDONLY) | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    finally:
        os.close(fd)


def host_ports(*, open_devices: Optional[bool] = None,
               **options: Unpack[ListOptions]) -> list[IbPort]:
    """The ports of this host's RDMA devices (or a sysfs tree's), in libibverbs'
    device order, with what :func:`select_ib` needs.

    ``options`` are those of :func:`sysverbs.get_device_list`.  ``open_devices``:
    whether to try ``ibv_open_device`` on each device (NCCL skips those that fail);
    default: only on this host (``sysfs_path`` None), since the nodes of a recorded
    tree are not the devices NCCL would open."""
    if open_devices is None:
        open_devices = options.get("sysfs_path") is None
    from ..devices.attributes import numbered_entries, parse_guid, read_text
    from ..engine import api
    from ..engine.api import resolve
    from ..engine.device import open_device

    sysfs = resolve(**options).sysfs_path
    devices = api.get_device_list(**options)
    out: list[IbPort] = []
    try:
        for dev in devices:
            # only what ncclIbInitDevices reads: not the GID tables (attributes does)
            ibdev = os.fsencode(os.path.join(sysfs, "class", "infiniband", dev.name))
            full = _realpath(os.path.join(sysfs, "class", "infiniband", dev.name, "device"))
            guid = parse_guid(read_text(ibdev + b"/sys_image_guid")) or 0
            opens = True
            if open_devices:
                try:
                    open_device(dev).close()
                except OSError:
                    opens = False
            for num in numbered_entries(ibdev + b"/ports"):
                base = ibdev + b"/ports/%d/" % num
                state = read_text(base + b"state") or ""
                out.append(IbPort(dev.name, num, _state_number(state) == 4,
                                  read_text(base + b"link_layer"), full, guid, opens,
                                  state.strip()))
    finally:
        api.free_device_list(devices)
    return out


def predict_ib(env: Optional[Mapping[str, str]] = None, *, conf_root: Optional[str] = None,
               nccl_version: VersionArg = None,
               **options: Unpack[ListOptions]) -> IbSelection:
    """:func:`select_ib` on this host (or a sysfs tree: ``options`` are those of
    :func:`sysverbs.get_device_list`), with the environment NCCL would see after
    reading its config files (:func:`nccl_environment`)."""
    full_env, _ = nccl_environment(env, root=conf_root, nccl_version=nccl_version)
    try:
        ports = host_ports(open_devices=options.get("sysfs_path") is None, **options)
    except OSError as e:
        sel = select_ib([], full_env, nccl_version=nccl_version)
        return replace(sel, notes=(*sel.notes, no_device_list_note(e)))
    return select_ib(ports, full_env, nccl_version=nccl_version)


def no_device_list_note(err: OSError) -> str:
    """What NCCL does when ``ibv_get_device_list`` returns NULL (``wrap_ibv_get_device_list``,
    src/misc/ibvwrap.cc): it counts no device, prints ``No device found.`` and falls
    back to sockets."""
    return (f"ibv_get_device_list fails here ({os.strerror(err.errno or 0)}): NCCL counts "
            "no IB device")


# ----------------------------------------------------------------------------- linter


class LintWarning(NamedTuple):
    """One problem: a short ``code``, the ``entry`` it is about, what NCCL does
    (``message``) and what to write instead (``fix``: the whole value, "" when this
    warning carries none; see :func:`lint_hca`)."""

    code: str
    entry: str
    message: str
    fix: str


@dataclass(frozen=True)
class LintResult:
    """What :func:`lint_hca` found: the value, the selection it gives and the warnings.

    ``meant``: the ``(device, port)`` pairs of this host the value was meant to select
    (see :func:`lint_hca`), in NCCL's table order; None when that is not clear.
    ``fix``: the one value that selects exactly ``meant`` without the warnings (the
    ``fix`` of the first warning it answers), "" when there is none."""

    value: str
    selection: IbSelection
    warnings: tuple[LintWarning, ...]
    meant: Optional[tuple[tuple[str, int], ...]] = None
    fix: str = ""


#: Warnings about the devices meant, which no other spelling of the value removes.
_ABOUT_DEVICES = frozenset({"mixed-link-layer", "merge-incompatible", "table-full"})
_SEPARATORS = re.compile(f"[,{_C_SPACE}]+")
_AROUND_COLON = re.compile("[ \t]*:[ \t]*")
_PORT_TEXT = re.compile(r"\+?[0-9]{1,9}")


class _Meant(NamedTuple):
    """One entry as its writer meant it (:func:`_meant_entries`)."""

    exclude: bool
    exact: bool  # a "=" applies: the list's, or one written before the entry
    marked_exact: bool  # a "=" written before the entry (not the list's)
    name: str
    port: Optional[int]  # -1: any port; None: not clear
    text: str  # the entry as it should be written: name[:port[:rail[:plane]]]
    fields: bool  # it has a rail or plane field (2.30.7 and later)
    written: str  # the entry as written (whitespace around ":" dropped)


def _meant_entries(body: str, negate: bool, exact: bool, version: Version) -> list[_Meant]:
    """The entries of a list (after its leading ``^``/``=``) as meant: whitespace and
    commas separate entries (spaces and tabs around ``:`` are dropped), a ``^`` or ``=`` before
    an entry is that entry's (an exclusion, an exact name), an empty port is any port
    (as since 2.30.7), and a port that is not a plain number, or a missing name, makes
    the entry's meaning unclear (``port`` None)."""
    out: list[_Meant] = []
    for tok in _SEPARATORS.split(_AROUND_COLON.sub(":", body)):
        core = tok.lstrip("^=")
        if not tok:
            continue
        mods = tok[:len(tok) - len(core)]
        fields = core.split(":")
        name = fields[0]
        port: Optional[int] = -1
        rest: list[str] = []
        if len(fields) > 1:
            if _PORT_TEXT.fullmatch(fields[1]):
                port = int(fields[1])
            elif fields[1]:
                port = None
            if version >= _V_STRTOK_PARSER:
                rest = fields[2:4]
        while rest and not rest[-1]:
            rest.pop()
        text = name
        if rest:
            text += ":" + ("" if port == -1 else str(port)) + "".join(":" + r for r in rest)
        elif port is not None and port != -1:
            text += f":{port}"
        out.append(_Meant(negate or "^" in mods, exact or "=" in mods,
                          "=" in mods and not exact, name, port if name else None, text,
                          bool(rest), tok))
    return out


class _Host(NamedTuple):
    """The ports of a host as the linter needs them: every device name, and the ports
    NCCL could use of each (ACTIVE, InfiniBand or Ethernet, the device opens)."""

    names: tuple[str, ...]
    usable: dict[str, tuple[int, ...]]

    @classmethod
    def of(cls, ports: Sequence[IbPort]) -> _Host:
        names = tuple(dict.fromkeys(p.device for p in ports))
        closed = {p.device for p in ports if not p.opens}
        usable: dict[str, list[int]] = {}
        for p in ports:
            if (p.active and p.link_layer in ("InfiniBand", "Ethernet")
                    and p.device not in closed):
                usable.setdefault(p.device, []).append(p.port)
        return cls(names, {d: tuple(sorted(set(v))) for d, v in usable.items()})

    def devices(self, m: _Meant) -> list[str]:
        """The devices an entry means: its name exactly when it is exact or names a
        device, else (a prefix on purpose) every device it starts."""
        if m.exact or m.name in self.names:
            return [m.name] if m.name in self.names else []
        return sorted((n for n in self.names if n.startswith(m.name)), key=_natural)

    def covered(self, m: _Meant) -> list[tuple[str, int]]:
        return [(d, p) for d in self.devices(m) for p in self.usable.get(d, ())
                if m.port == -1 or p == m.port]

    def canonical(self, chosen: set[tuple[str, int]]) -> list[str]:
        """Exact entries for ``chosen``: a device's name when all its usable ports are
        chosen, else ``device:port`` entries."""
        out: list[str] = []
        for d in sorted(self.usable, key=_natural):
            got = [p for p in self.usable[d] if (d, p) in chosen]
            if got and len(got) == len(self.usable[d]):
                out.append(d)
            else:
                out.extend(f"{d}:{p}" for p in got)
        return out


class _Found(NamedTuple):
    """What :func:`_lint` finds: warnings without fixes, NCCL's selection, the
    entries as meant (and the list's ``^`` and ``=`` as meant) and the ports meant
    (None, with the reason, when not clear)."""

    warnings: list[LintWarning]
    selection: IbSelection
    entries: list[_Meant]
    negate: bool
    exact: bool
    meant: Optional[set[tuple[str, int]]]
    unclear: str


def _natural(name: str) -> tuple[tuple[int, str], ...]:
    """mlx5_2 before mlx5_10."""
    parts, cur, digits = [], "", False
    for c in name + "\0":
        if c.isdigit() != digits or c == "\0":
            if cur:
                parts.append((int(cur), "") if digits else (-1, cur))
            cur, digits = "", c.isdigit()
        cur += c
    return tuple(parts)


def _some(names: Sequence[str], limit: int = 8) -> str:
    uniq = sorted(dict.fromkeys(names), key=_natural)
    if not uniq:
        return "it has none"
    more = f", ... ({len(uniq)} in all)" if len(uniq) > limit else ""
    return ", ".join(uniq[:limit]) + more


def _split_entries(text: str) -> list[str]:
    return [e for e in text.split(",") if e]


def _selected(sel: IbSelection) -> set[tuple[str, int]]:
    """The device ports NCCL uses: none when its IB transport does not start."""
    if sel.disabled or sel.failure:
        return set()
    return {(d.device, d.port) for d in sel.devices}


def _lint(text: str, ports: Sequence[IbPort], host: _Host, env: dict[str, str],
          version: Version) -> _Found:
    """The warnings of :func:`lint_hca` without their fixes."""
    env = {**env, "NCCL_IB_HCA": text}
    sel = select_ib(ports, env, nccl_version=version)
    filt = parse_hca(text, nccl_version=version)
    warns: list[LintWarning] = []
    body = text[1:] if filt.negate else text
    body = body[1:] if filt.exact else body
    raw_entries = _split_entries(body)
    names = list(host.names)

    if any(c in _C_SPACE for c in text):
        warns.append(LintWarning(
            "whitespace", text,
            "the value contains whitespace or newlines: NCCL splits on ',' only and keeps "
            "the whitespace as part of the names, which then match no device", ""))
    for e in raw_entries:
        name = e.split(":", 1)[0]
        if name.lstrip(_C_SPACE)[:1] in ("^", "="):
            warns.append(LintWarning(
                "misplaced-modifier", e,
                f"'{name}': '^' and '=' act only at the start of the whole list "
                "('^' first, then '='); here they are part of the name", ""))
        if not name and e.startswith(":"):
            warns.append(LintWarning("empty-name", e, f"'{e}' has no device name: NCCL "
                                     "drops it", ""))
        if len(_encoded(name)) > NAME_MAX:
            warns.append(LintWarning("too-long", e, f"the name is cut at {NAME_MAX} "
                                     f"bytes to '{_cut(name)}' (no device name is that "
                                     "long)", ""))
    if filt.dropped:
        warns.append(LintWarning(
            "too-many", ",".join(filt.dropped),
            f"NCCL reads only the first {filt.max_entries} entries; these are ignored", ""))
    for ent in filt.entries:
        fields = ent.text.split(":")
        if len(fields) > 1:
            ptext = fields[1]
            if version < _V_STRTOK_PARSER and ptext == "":
                warns.append(LintWarning(
                    "bad-port", ent.text, "before NCCL 2.30.7 an empty port reads as port "
                    "0, which matches no port", ""))
            elif ptext and not ptext.strip(_C_SPACE).lstrip("+-").isdigit():
                warns.append(LintWarning(
                    "bad-port", ent.text, f"port '{ptext}' is read by atoi as {ent.port}",
                    ""))
        matching = [p for p in ports if (p.device == ent.prefix if filt.exact
                                         else p.device.startswith(ent.prefix))]
        dev_names = sorted({p.device for p in matching}, key=_natural)
        if not matching:
            warns.append(LintWarning(
                "no-match", ent.text, f"'{ent.prefix}' matches no device on this host "
                f"({_some(names)})", ""))
            continue
        if ent.port != -1:
            at_port = [p for p in matching if p.port == ent.port]
            if not at_port:
                warns.append(LintWarning(
                    "no-port", ent.text, f"no device matching '{ent.prefix}' has port "
                    f"{ent.port}", ""))
            else:
                for p in at_port:
                    if p.active and p.link_layer in ("InfiniBand", "Ethernet"):
                        continue
                    why = (f"is {p.state or 'not ACTIVE'}" if not p.active
                           else f"has link layer {p.link_layer}")
                    warns.append(LintWarning(
                        "port-inactive", ent.text, f"{p.device} port {p.port} {why}: "
                        "NCCL skips it", ""))
        if not filt.exact and ent.prefix in dev_names and len(dev_names) > 1:
            others = [d for d in dev_names if d != ent.prefix]
            warns.append(LintWarning(
                "collision", ent.text, f"'{ent.prefix}' is a prefix: it also matches "
                f"{', '.join(others)}", ""))
    warns.extend(_device_warnings(text, sel, version))

    # as meant, the "^" and "=" before the first name (in any order, after whitespace)
    # are the list's
    lead = text.lstrip(_C_SPACE)
    mods = lead[:len(lead) - len(lead.lstrip("^=" + _C_SPACE))]
    entries = _meant_entries(lead[len(mods):], "^" in mods, "=" in mods, version)
    unclear = ""
    meant: Optional[set[tuple[str, int]]] = None
    vague = next((m for m in entries if m.port is None), None)
    if vague is not None:
        unclear = f"what '{vague.written}' means is not clear"
    elif sel.failure:
        unclear = "which plane IDs are meant is not clear"
    elif not entries:
        meant = _selected(sel)  # nothing written to reinterpret: the value as NCCL reads it
    else:
        every = {(d, p) for d, ps in host.usable.items() for p in ps}
        inc = [m for m in entries if not m.exclude]
        base = {c for m in inc for c in host.covered(m)} if inc else every
        meant = base - {c for m in entries if m.exclude for c in host.covered(m)}
    return _Found(warns, sel, entries, "^" in mods, "=" in mods, meant, unclear)


def _device_warnings(text: str, sel: IbSelection, version: Version) -> list[LintWarning]:
    """What NCCL does with the devices the value selects: no device, a plane ID that
    fails its init, link layers mixed, merges that fail, a full table."""
    out: list[LintWarning] = []
    if sel.disabled:
        return out
    if sel.failure:
        code = "too-many-planes" if "more than" in sel.failure else "bad-plane"
        out.append(LintWarning(
            code, text, f"NCCL's IB transport fails to start ('{sel.failure}', "
            "ncclIbInitDevices returns ncclInvalidUsage) and NCCL falls back to sockets", ""))
        return out
    if not sel.devices:
        out.append(LintWarning(
            "selects-none", text, "NCCL would use no IB device (it prints 'NET/IB : No "
            "device found.' and falls back to sockets)", ""))
    by_link: dict[str, list[IbDevice]] = {}
    for d in sel.devices:
        by_link.setdefault(d.link, []).append(d)
    if len(by_link) > 1:
        ib, roce = by_link["IB"], by_link["RoCE"]
        d0, d1 = (ib[0], roce[0]) if ib[0].slot < roce[0].slot else (roce[0], ib[0])
        if version >= _V_MERGE_RETRY:
            how = (f"it fails ('NET/IB : Remote {d1.link} device is incompatible with the "
                   f"local [{d0.slot}]{d0.device}:{d0.port}/{d0.link}', ncclInternalError)")
        else:
            how = ("this release does not check it, and the connection cannot reach the "
                   "other fabric")
        alt_ib = "=" + ",".join(f"{d.device}:{d.port}" for d in ib)
        alt_roce = "=" + ",".join(f"{d.device}:{d.port}" for d in roce)
        out.append(LintWarning(
            "mixed-link-layer", text,
            f"NCCL uses InfiniBand ports ({_some([f'{d.device}:{d.port}' for d in ib])}) "
            f"and RoCE ports ({_some([f'{d.device}:{d.port}' for d in roce])}) as one "
            "network: when a connection between hosts joins an InfiniBand port to a RoCE "
            f"port, {how}. Select one link type: '{alt_ib}' (InfiniBand) or '{alt_roce}' "
            "(RoCE); which one is meant is not known, so no fix is given", ""))
    # before 2.26.2 the first failed merge ends ncclTopoGetSystem: NCCL tries no other
    for a, b in sel.incompatible if version >= _V_MERGE_RETRY else sel.incompatible[:1]:
        da, db = sel.devices[a], sel.devices[b]
        pair = f"[{a}]{da.device}:{da.port}/{da.link} and [{b}]{db.device}:{db.port}/{db.link}"
        if version >= _V_MERGE_RETRY:
            what = (f"NCCL tries to merge {pair}, ports of one NIC, into one virtual "
                    "device: the merge fails ('NET/IB : Attempted to merge incompatible "
                    "devices'), and NCCL keeps them apart and restarts its merge search")
        else:
            what = (f"NCCL tries to merge {pair}, ports of one NIC, into one virtual "
                    "device: the merge fails, and with it the communicator's init "
                    "('TOPO/NET : Tried merging multiple devices together and failed', "
                    "ncclInvalidUsage)")
        out.append(LintWarning("merge-incompatible", f"{da.device}:{da.port}",
                               what + "; select ports of one link type", ""))
    if sel.unread or sel.overflow:
        cap = max_ib_devs(version)
        parts = []
        if sel.unread:
            parts.append(f"it does not read {_some(list(sel.unread))}")
        if sel.overflow:
            parts.append("the ports of the last device it reads go past the end of its "
                         "table (ncclIbDevs: memory NCCL does not own)")
        out.append(LintWarning(
            "table-full", text, f"NCCL keeps at most {cap} device ports: "
            + "; ".join(parts) + "; which of them are meant is not known, so no fix is "
            "given", ""))
    return out


def _candidates(found: _Found, host: _Host, meant: set[tuple[str, int]]) -> list[str]:
    """Values that may select exactly ``meant``, the closest to the one written first:
    its entries as meant (those that mean nothing here dropped), then the same with
    exact names, then exact lists of the ports meant (or of those not meant)."""
    def form(negate: bool, exact: bool, entries: Iterable[str]) -> Optional[str]:
        listed = list(dict.fromkeys(entries))
        if not listed:
            return None  # "" is every device and "^" none: neither is a list
        return ("^" if negate else "") + ("=" if exact else "") + ",".join(listed)

    has_inc = any(not m.exclude for m in found.entries)
    group = [m for m in found.entries if m.exclude != has_inc and host.covered(m)]

    def expanded(m: _Meant) -> list[str]:
        suffix = m.text[len(m.name):]
        out = []
        for d in host.devices(m):
            ports = [p for dd, p in host.covered(m) if dd == d]
            keep = [p for p in ports if ((d, p) in meant) == has_inc]
            if keep == ports:
                out.append(d + suffix)
            elif not m.fields:
                out.extend(f"{d}:{p}" for p in keep)
        return out

    plain = form(not has_inc, found.exact, (m.text for m in group))
    exact = form(not has_inc, True, (e for m in group for e in expanded(m)))
    out = [exact, plain] if any(m.marked_exact for m in found.entries) else [plain, exact]
    if not any(m.fields for m in found.entries) and _selected(found.selection) != meant:
        every = {(d, p) for d, ps in host.usable.items() for p in ps}
        out += [form(False, True, host.canonical(meant)),
                form(True, True, host.canonical(every - meant))]
    return [c for c in out if c is not None]


def _find_fix(text: str, found: _Found, ports: Sequence[IbPort], host: _Host,
              env: dict[str, str], version: Version) -> tuple[str, str]:
    """The fix (or "") and, without one, why."""
    if found.meant is None:
        return "", found.unclear
    if not found.meant:
        return "", "it means no device of this host that NCCL can use"
    check_env = {k: v for k, v in env.items() if k != "NCCL_IB_DISABLE"}
    for cand in _candidates(found, host, found.meant):
        if cand == text or len(_split_entries(cand)) > max_ib_devs(version):
            continue
        again = _lint(cand, ports, host, check_env, version)
        if (_selected(again.selection) == found.meant
                and all(w.code in _ABOUT_DEVICES for w in again.warnings)):
            return cand, ""
    if _selected(found.selection) == found.meant:
        return "", "NCCL already uses what was meant on this host"
    return "", "no value selects exactly that"


def lint_hca(value: Optional[str], ports: Sequence[IbPort],
             env: Optional[Mapping[str, str]] = None, *,
             nccl_version: VersionArg = None, where: str = "this host") -> LintResult:
    """Check an NCCL_IB_HCA value against a host's ports (:func:`host_ports`).

    ``where``: how the messages name the host the ports are of (``"this host"``;
    ``sysverbs nccl check`` says ``"fixture NAME"`` or ``"the tree DIR"``).

    Warnings about how the value is written (``code``): ``whitespace`` (spaces or
    newlines are part of the name: NCCL splits on commas only), ``misplaced-modifier``
    (a ``^`` or ``=`` that is not at the start of the list is part of a name),
    ``empty-name`` (``:1`` is dropped), ``too-many`` (more than 32 entries),
    ``too-long`` (a name over 63 bytes is cut), ``bad-port`` (a port that is not a
    number, or an empty port before 2.30.7), ``no-port``/``port-inactive`` (the port
    does not exist, or is not ACTIVE or not IB/Ethernet), ``collision`` (a name that
    also matches longer names: use ``=``), ``no-match`` (an entry that matches no
    device).  About what NCCL then does: ``selects-none`` (no IB device: sockets),
    ``bad-plane``/``too-many-planes`` (since 2.30.7 a plane ID NCCL cannot use: its IB
    transport fails to start), ``mixed-link-layer`` (InfiniBand and RoCE ports in one
    selection: a connection between them fails), ``merge-incompatible`` (ports of one
    NIC with different link layers: the merge fails; before 2.26.2 so does the init),
    ``table-full`` (more device ports than NCCL's table holds).

    ``meant`` is what the value was meant to select on this host: each entry read as
    its writer meant it (whitespace and commas separate entries, a ``^`` or ``=``
    before an entry is that entry's, a name that is a device's name means that device
    and no longer one, a name that is none is a prefix, an empty port is any port),
    the included ports (all, when only exclusions are written) less the excluded, among
    the ports NCCL can use.  It is None when an entry's meaning is not clear (no name,
    a port that is not a number, a plane ID NCCL refuses).  The one ``fix`` is a value
    that selects exactly ``meant`` (NCCL's matcher, :func:`select_ib`) and has none of
    the warnings about writing; it is the ``fix`` of the first such warning, whose
    message says what was meant (or, without a fix, why there is none).  The warnings
    about the devices themselves (mixed link layers, merges, a full table) carry no
    fix: which devices to drop is the user's choice.

    >>> ports = [IbPort(f"mlx5_{i}", 1, True, "InfiniBand", "") for i in (0, 1, 10, 11)]
    >>> [w.code for w in lint_hca("mlx5_1,mlx5_7", ports).warnings]
    ['collision', 'no-match']
    >>> lint_hca("mlx5_1,mlx5_7", ports).warnings[0].fix
    '=mlx5_1'
    >>> r = lint_hca("mlx5_8,mlx5_9", ports)
    >>> r.fix, r.meant, r.warnings[0].message.endswith("(no fix: it means no device of "
    ...                                                 "this host that NCCL can use)")
    ('', (), True)
    """
    version = parse_version(nccl_version)
    text = "" if value is None else _text_arg("NCCL_IB_HCA", value)
    env2 = environ_arg(env)
    ports = items_arg(ports, "ports")
    if not all(isinstance(p, IbPort) for p in ports):
        raise WrongTypeError("ports must be IbPort objects (see host_ports())")
    host = _Host.of(ports)
    found = _lint(text, ports, host, env2, version)
    warns = found.warnings
    first = next((i for i, w in enumerate(warns) if w.code not in _ABOUT_DEVICES), None)
    fix = ""
    if first is not None:
        fix, why = _find_fix(text, found, ports, host, env2, version)
        w = warns[first]
        if fix:
            assert found.meant is not None
            shown = _some([f"{d}:{p}" for d, p in found.meant])
            warns[first] = w._replace(
                message=f"{w.message} (meant: {shown}; the fix selects exactly that)",
                fix=fix)
        else:
            warns[first] = w._replace(message=f"{w.message} (no fix: {why})")
    meant: Optional[tuple[tuple[str, int], ...]] = None
    if found.meant is not None:
        order = {(d.device, d.port): i for i, d in enumerate(
            select_ib(ports, {}, nccl_version=version).devices)}
        meant = tuple(sorted(found.meant, key=lambda c: (order.get(c, len(order)),
                                                          _natural(c[0]), c[1])))
    if where != "this host":
        if not isinstance(where, str):
            raise WrongTypeError(f"where must be a str, not {type(where).__name__}")
        warns = [w._replace(message=w.message.replace("this host", where)) for w in warns]
    return LintResult(text, found.selection, tuple(warns), meant, fix)

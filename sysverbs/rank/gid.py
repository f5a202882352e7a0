"""The GID index NCCL's IB transport uses on a port, as NCCL picks it, and why.

Rules from NVIDIA/nccl ``src/transport/net_ib/connect.cc`` (NCCL 2.30.7):

* ``ncclIbGetGidIndex``: on an InfiniBand port, index
  ``NCCL_IB_ROUTABLE_FLID_GID_INDEX`` (default 1) when it is inside the table and
  its GID carries a FLID (``ncclIbExtractFlid``: bytes 4-5 of the GID, non-zero),
  else 0.  On any other port (RoCE): ``NCCL_IB_GID_INDEX`` when it is >= 0;
  otherwise start at 0 and offer every index 1..gid_tbl_len-1 to
  ``ncclUpdateGidIndex``.
* ``ncclUpdateGidIndex``: a candidate whose address family (``getGidAddrFamily``:
  IPv4-mapped ``::ffff:a.b.c.d`` or ``ff0e::ffff:a.b.c.d`` is AF_INET, everything
  else, the zero GID too, AF_INET6) differs from the current choice's and is
  ``NCCL_IB_ADDR_FAMILY`` (``envIbAddrFamily``: ``AF_INET`` unless the value is
  exactly ``AF_INET6``), inside ``NCCL_IB_ADDR_RANGE`` (``matchGidAddrPrefix``),
  is taken at once, with no other check.  Otherwise a candidate of another
  family, a zero or link-local one (``validGid``: ``configuredGid`` and not
  ``linkLocalGid``) or one outside the range is skipped; one of the same
  family is taken when its RoCE version (``ncclIbRoceGetVersionNum``, from
  ``gid_attrs/types/<index>``) is ``NCCL_IB_ROCE_VERSION_NUM`` (default 2) and
  differs from the current choice's, or the current choice is not valid.
* ``ncclIbRoceGetVersionNum``: ``IB/RoCE v1`` and ``RoCE v1`` are 1, ``RoCE v2``
  is 2 (prefix comparisons of at most 15 bytes read); a types file that cannot
  be opened fails the whole lookup (``ncclSystemError``); a read that fails with
  EINVAL (an unused entry, or one a container does not map) leaves the version
  unknown and the scan goes on.
* Numbers (``ncclLoadParam`` in ``src/misc/param.cc``): ``strtoll(value, NULL, 0)``
  (leading blanks, a sign, ``0x`` hex, a leading ``0`` octal, trailing junk
  ignored, no digits 0); out of range gives the default; the int64 is stored in
  an ``int``.

>>> from sysverbs.rank.gid import GidTable, GidEntry, nccl_gid_index, gid_text
>>> t = GidTable("rxe0", 1, "Ethernet", 4, (
...     GidEntry(0, "fe80::5054:ff:fe12:3456", "IB/RoCE v1"),
...     GidEntry(1, "fe80::5054:ff:fe12:3456", "RoCE v2"),
...     GidEntry(2, "::ffff:192.168.7.1", "IB/RoCE v1"),
...     GidEntry(3, "::ffff:192.168.7.1", "RoCE v2")))
>>> choice = nccl_gid_index(t, {})
>>> choice.index, gid_text(choice.gid)
(3, '::ffff:192.168.7.1')
>>> for step in choice.steps: print(step)
1: skipped: AF_INET6, not AF_INET
2: taken: AF_INET, the wanted family, after a GID of family AF_INET6 (taken without a version check)
3: taken: RoCE v2 as NCCL_IB_ROCE_VERSION_NUM wants, the current choice (2) is RoCE v1
"""

from __future__ import annotations

import errno
import ipaddress
import os

from ..ground.records import FrozenRecord, RecordTuple, init
from ..ground.sysfs_read import read_file

# no typing or dataclasses at run time (rank/environment.py says why)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Optional, Union

__all__ = [
    "GidEntry",
    "GidTable",
    "GidChoice",
    "Step",
    "nccl_gid_index",
    "GidVerdict",
    "gid_verdict",
    "read_gid_table",
    "strtoll",
    "roce_version",
    "gid_family",
    "gid_text",
    "valid_gid",
    "AF_INET",
    "AF_INET6",
]

AF_INET = "AF_INET"
AF_INET6 = "AF_INET6"
_ZERO = ipaddress.IPv6Address(0)
_INT64 = (-(1 << 63), (1 << 63) - 1)

#: What reading ``gid_attrs/types/<index>`` gave: the text, or one of these.
TYPE_EINVAL = "<EINVAL>"  # read() failed with EINVAL: NCCL goes on, version unknown
TYPE_MISSING = "<missing>"  # open() failed: NCCL fails ("open failed in ncclIbRoceGetVersionNum")
TYPE_ERROR = "<error>"  # read() failed otherwise: NCCL fails


class GidEntry(FrozenRecord):
    """One index of a port's GID table.  ``gid`` as text or address (the zero GID
    for an unused entry); ``type_text`` what ``gid_attrs/types/<index>`` reads (the
    text, or :data:`TYPE_EINVAL` / :data:`TYPE_MISSING` / :data:`TYPE_ERROR`);
    ``ndev`` its netdev (``gid_attrs/ndevs/<index>``)."""

    __slots__ = _fields = ("index", "gid", "type_text", "ndev")
    index: int
    gid: Union[str, ipaddress.IPv6Address]
    type_text: Optional[str]
    ndev: Optional[str]

    def __init__(self, index: int, gid: Union[str, ipaddress.IPv6Address],
                 type_text: Optional[str] = None, ndev: Optional[str] = None) -> None:
        init(self, index, gid, type_text, ndev)

    @property
    def address(self) -> ipaddress.IPv6Address:
        g = self.gid
        return g if isinstance(g, ipaddress.IPv6Address) else ipaddress.IPv6Address(g)


class GidTable(FrozenRecord):
    """A port's GID table as ``ibv_query_port`` (``gid_tbl_len``) and
    ``ibv_query_gid`` see it: indexes missing from ``entries`` read as the zero GID
    (and, with ``type_text`` None, an EINVAL types file)."""

    _fields = ("device", "port", "link_layer", "length", "entries")
    __slots__ = (*_fields, "_by_index", "_gids")  # the two lookups: neither compared nor shown
    device: str
    port: int
    link_layer: Optional[str]  # "InfiniBand", "Ethernet", ... as sysfs says
    length: int
    entries: Sequence[GidEntry]
    _by_index: dict[int, GidEntry]
    _gids: dict[int, ipaddress.IPv6Address]

    def __init__(self, device: str, port: int, link_layer: Optional[str], length: int,
                 entries: Sequence[GidEntry] = ()) -> None:
        init(self, device, port, link_layer, length, entries)
        object.__setattr__(self, "_by_index", {e.index: e for e in entries})
        object.__setattr__(self, "_gids", {e.index: e.address for e in entries})

    def indexes(self) -> list[int]:
        """The indexes of the entries given (the others read as zero)."""
        return list(self._by_index)

    def entry(self, index: int) -> GidEntry:
        e = self._by_index.get(index)
        return e if e is not None else GidEntry(index, _ZERO, TYPE_EINVAL)

    def gid(self, index: int) -> ipaddress.IPv6Address:
        return self._gids.get(index, _ZERO)


class Step(FrozenRecord):
    """One index NCCL looked at, and what it did with it."""

    __slots__ = _fields = ("index", "taken", "why", "last")
    index: int
    taken: bool
    why: str
    #: the last index of a run of zero entries weighed alike (None: one index)
    last: Optional[int]

    def __init__(self, index: int, taken: bool, why: str, last: Optional[int] = None
                 ) -> None:
        init(self, index, taken, why, last)

    def __str__(self) -> str:
        where = f"{self.index}" if self.last is None else f"{self.index}-{self.last}"
        why = self.why.replace("(unused entry)", "(unused entries)") if self.last else self.why
        return f"{where}: {'taken' if self.taken else 'skipped'}: {why}"


class GidChoice(FrozenRecord):
    """NCCL's GID index for a port.  ``error`` is set when NCCL's lookup itself
    fails (the connection would fail); ``steps`` the indexes it weighed, in order;
    ``rule`` how the index came about; ``suitable`` whether the GID is one RoCE
    traffic can use as asked (valid, of the wanted family and RoCE version)."""

    __slots__ = _fields = ("device", "port", "index", "gid", "rule", "steps", "family",
                           "roce_version", "error", "version", "ndev")
    device: str
    port: int
    index: int
    gid: ipaddress.IPv6Address
    rule: str
    steps: tuple[Step, ...]
    family: str
    roce_version: int
    error: Optional[str]
    version: Optional[int]
    ndev: Optional[str]

    def __init__(self, device: str, port: int, index: int, gid: ipaddress.IPv6Address,
                 rule: str, steps: tuple[Step, ...], family: str, roce_version: int,
                 error: Optional[str] = None, version: Optional[int] = None,
                 ndev: Optional[str] = None) -> None:
        init(self, device, port, index, gid, rule, steps, family, roce_version, error,
             version, ndev)

    @property
    def suitable(self) -> bool:
        if self.error is not None:
            return False
        if self.rule.startswith("InfiniBand"):
            return True
        return (valid_gid(self.gid) and gid_family(self.gid) == self.family
                and self.version == self.roce_version)

    def explain(self) -> str:
        """Several lines: the choice, then each index weighed."""
        head = (f"{self.device}:{self.port}: GID index {self.index} ({gid_text(self.gid)}): "
                f"{self.rule}")
        if self.error:
            head += f"; NCCL fails: {self.error}"
        return "\n".join([head, *(f"  {s}" for s in self.steps)])


# ----------------------------------------------------------------------------- rules


def strtoll(text: str, base: int = 0) -> Optional[int]:
    """C ``strtoll(text, NULL, base)`` (base 0 or 10): the value, or None where it sets
    ERANGE.

    >>> strtoll(" 3"), strtoll("0x10"), strtoll("010"), strtoll("3abc"), strtoll("abc")
    (3, 16, 8, 3, 0)
    >>> strtoll("-1"), strtoll("99999999999999999999") is None
    (-1, True)
    """
    s = text.lstrip(" \t\n\v\f\r")
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if base == 0:
        base = 10
        if s[:2] in ("0x", "0X") and s[2:3] and s[2:3] in "0123456789abcdefABCDEF":
            base, s = 16, s[2:]
        elif s[:1] == "0":
            base = 8
    digits = "0123456789abcdef"[:base]
    n = 0
    for ch in s:
        d = digits.find(ch.lower())
        if d < 0:
            break
        n = n * base + d
    value = sign * n
    if not _INT64[0] <= value <= _INT64[1]:
        return None
    return value


def _c_int(value: int) -> int:
    """An int64 stored in a C ``int`` (two's complement truncation)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _param(env: Mapping[str, str], name: str, default: int) -> tuple[int, str]:
    """``NCCL_PARAM`` as ``ncclLoadParam`` reads it (into an ``int``), and whence."""
    text = env.get(name)
    if not text:
        return default, f"{name} default {default}"
    value = strtoll(text)
    if value is None:
        return default, f"{name}={text!r} out of range: default {default}"
    return _c_int(value), f"{name}={text}"


def env_family(env: Mapping[str, str]) -> str:
    """``envIbAddrFamily``: AF_INET6 only for exactly ``AF_INET6``."""
    return AF_INET6 if env.get("NCCL_IB_ADDR_FAMILY") == "AF_INET6" else AF_INET


def env_range(env: Mapping[str, str], family: str) -> Optional[tuple[int, int]]:
    """``envIbAddrRange``: (network as int, prefix length) or None (no range).

    >>> env_range({"NCCL_IB_ADDR_RANGE": "10.0.0.0/8"}, AF_INET)
    (167772160, 8)
    >>> env_range({"NCCL_IB_ADDR_RANGE": "10.0.0.0"}, AF_INET) is None
    True
    """
    text = env.get("NCCL_IB_ADDR_RANGE")
    if not text:
        return None
    text = text.encode("utf-8", "surrogateescape")[:127].decode("utf-8", "ignore")
    if "/" not in text:
        return None
    addr, _, mask_text = text.partition("/")
    try:
        if family == AF_INET:
            parts = addr.split(".")
            # inet_pton: four decimal parts 0..255, no leading zeros beyond "0"
            if len(parts) != 4 or not all(p.isdigit() and p.isascii() and len(p) <= 3
                                          and int(p) <= 255 and (p == "0" or p[0] != "0")
                                          for p in parts):
                return None
            base = int(ipaddress.IPv4Address(addr))
        else:
            if "%" in addr:
                return None
            base = int(ipaddress.IPv6Address(addr))
    except ValueError:
        return None
    mask = strtoll(mask_text, 10)  # strtol(maskStrPtr, NULL, 10), into an int
    mask = _c_int(mask) if mask is not None else -1
    if mask > (32 if family == AF_INET else 128):
        return None
    return base, mask


def gid_family(gid: ipaddress.IPv6Address) -> str:
    """``getGidAddrFamily``."""
    v = int(gid)
    if v >> 32 == 0xFFFF:  # ::ffff:a.b.c.d
        return AF_INET
    if v >> 32 == (0xFF0E0000 << 64) | 0xFFFF:  # ff0e::ffff:a.b.c.d
        return AF_INET
    return AF_INET6


def gid_text(gid: ipaddress.IPv6Address) -> str:
    """A GID as ``inet_ntop`` (and ``ibv_devinfo -v``) prints it: IPv4-mapped ones as
    ``::ffff:a.b.c.d`` whatever the Python version."""
    v = int(gid)
    if v >> 32 == 0xFFFF:
        return f"::ffff:{ipaddress.IPv4Address(v & 0xFFFFFFFF)}"
    return str(ipaddress.IPv6Address(v))


def valid_gid(gid: ipaddress.IPv6Address) -> bool:
    """``validGid``: ``configuredGid`` (not zero, not ``fe80::`` alone) and not
    ``linkLocalGid`` (``fe80:0000:0000:0000:...``)."""
    v = int(gid)
    return v != 0 and v >> 64 != 0xFE80000000000000


def _match_range(family: str, rng: Optional[tuple[int, int]], gid: ipaddress.IPv6Address) -> bool:
    """``matchGidAddrPrefix``: for AF_INET the last 32 bits of the GID."""
    if rng is None:
        return True
    base, bits = rng
    if bits <= 0:
        return True
    v = int(gid)
    if family == AF_INET:
        shift = 32 - bits
        return (base >> shift) == ((v & 0xFFFFFFFF) >> shift)
    shift = 128 - bits
    return (base >> shift) == (v >> shift)


def roce_version(type_text: Optional[str]) -> tuple[Optional[int], Optional[str]]:
    """``ncclIbRoceGetVersionNum`` on what a types file read: (version or None,
    the error that fails NCCL or None).

    >>> roce_version("RoCE v2"), roce_version("IB/RoCE v1"), roce_version("<EINVAL>")
    ((2, None), (1, None), (None, None))
    """
    if type_text is None or type_text == TYPE_EINVAL:
        return None, None
    if type_text == TYPE_MISSING:
        return None, "open failed in ncclIbRoceGetVersionNum (no gid_attrs/types file)"
    if type_text == TYPE_ERROR:
        return None, "read failed in ncclIbRoceGetVersionNum"
    head = type_text[:15]
    if head.startswith(("IB/RoCE v1", "RoCE v1")):
        return 1, None
    if head.startswith("RoCE v2"):
        return 2, None
    return None, None


def _vname(v: Optional[int]) -> str:
    return "unknown version" if v is None else f"RoCE v{v}"


def _describe(gid: ipaddress.IPv6Address) -> str:
    v = int(gid)
    if v == 0:
        return "zero GID (unused entry)"
    if v >> 64 == 0xFE80000000000000:
        return "link-local (fe80::/64; validGid)"
    return "fe80:: without interface id (configuredGid)"


def _weigh(table: GidTable, cur: int, cand: int, family: str,
           rng: Optional[tuple[int, int]], rver: int, rver_why: str
           ) -> tuple[bool, str, Optional[str]]:
    """``ncclUpdateGidIndex`` for one candidate: (taken, why, the error that fails NCCL)."""
    g, gc = table.gid(cur), table.gid(cand)
    fam_g, fam_c = gid_family(g), gid_family(gc)
    in_range = _match_range(family, rng, gc)
    if fam_c != fam_g and fam_c == family and in_range:
        return True, (f"{fam_c}, the wanted family, after a GID of family {fam_g} "
                      "(taken without a version check)"), None
    if fam_c != family:
        return False, (_describe(gc) if int(gc) == 0 else f"{fam_c}, not {family}"), None
    if not valid_gid(gc):
        return False, _describe(gc), None
    if not in_range:
        return False, "outside NCCL_IB_ADDR_RANGE", None
    ver_g, err = roce_version(table.entry(cur).type_text)
    if err is None:
        ver_c, err = roce_version(table.entry(cand).type_text)
    if err is not None:
        return False, err, err
    if (ver_g != ver_c or not valid_gid(g)) and ver_c == rver:
        reason = (f"the current choice ({cur}) is not valid" if not valid_gid(g)
                  else f"the current choice ({cur}) is {_vname(ver_g)}")
        return True, f"{_vname(ver_c)} as NCCL_IB_ROCE_VERSION_NUM wants, {reason}", None
    if ver_c != rver:
        return False, f"{_vname(ver_c)}, not v{rver} ({rver_why})", None
    return False, f"{_vname(ver_c)}, as the current choice ({cur})", None


def nccl_gid_index(table: GidTable, environ: Mapping[str, str]) -> GidChoice:
    """The GID index ``ncclIbGetGidIndex`` (NVIDIA/nccl
    ``src/transport/net_ib/connect.cc``) returns for this port under ``environ``
    (the NCCL variables as NCCL sees them, config files applied), with each step.
    Pure: reads nothing."""
    env = environ
    family = env_family(env)
    rver, rver_why = _param(env, "NCCL_IB_ROCE_VERSION_NUM", 2)
    steps: list[Step] = []

    def done(index: int, rule: str, error: Optional[str] = None) -> GidChoice:
        e = table.entry(index)
        return GidChoice(table.device, table.port, index, table.gid(index), rule, tuple(steps),
                         family, rver, error, roce_version(e.type_text)[0], e.ndev)

    if table.link_layer == "InfiniBand":
        rindex, why = _param(env, "NCCL_IB_ROUTABLE_FLID_GID_INDEX", 1)
        if rindex < table.length:
            if rindex < 0:
                return done(0, f"InfiniBand: {why}", "ibv_query_gid fails on a negative index")
            flid = (int(table.gid(rindex)) >> 80) & 0xFFFF
            if flid:
                steps.append(Step(rindex, True, f"FLID {flid:#x} ({why})"))
                return done(rindex, f"InfiniBand: routable FLID GID at {why}")
            steps.append(Step(rindex, False, f"no FLID ({why})"))
        return done(0, "InfiniBand: GID 0 (no routable FLID GID)")

    forced, why = _param(env, "NCCL_IB_GID_INDEX", -1)
    if forced >= 0:
        error = None
        if forced >= table.length:
            error = f"index {forced} is outside the GID table (length {table.length})"
        return done(forced, f"set by {why}", error)

    rng = env_range(env, family)
    cur = 0
    # Zero entries come in runs (a 256- or 1024-entry table holds a handful of GIDs).
    # Skipping one changes nothing, so the rest of a run goes as its first went; once
    # one is taken, the next is weighed against it and the rest go as that one.
    present = sorted(i for i in table.indexes() if 0 < i < table.length)
    bounds = [*present, table.length]
    nxt = 1
    for upto in bounds:
        start = nxt
        while start < upto:  # zero entries start..upto-1
            taken, why, _ = _weigh(table, cur, start, family, rng, rver, rver_why)
            last = start if taken else upto - 1
            steps.append(Step(start, taken, why, last if last > start else None))
            cur = start if taken else cur
            start = last + 1
        if upto >= table.length:
            break
        taken, why, err = _weigh(table, cur, upto, family, rng, rver, rver_why)
        steps.append(Step(upto, taken, why))
        if err is not None:
            return done(cur, "RoCE scan failed", err)
        cur = upto if taken else cur
        nxt = upto + 1
    if cur == 0:
        return done(0, f"RoCE: no index 1..{table.length - 1} qualified, index 0 stays")
    return done(cur, f"RoCE: the scan's last choice ({family}, {rver_why})")


# ----------------------------------------------------------------------------- verdict


class GidVerdict(RecordTuple, tuple[str, str]):
    """What a port's GID choice means for NCCL's RoCE traffic (:func:`gid_verdict`):
    ``code`` (``gid-lookup-fails``, ``gid-link-local``, ``gid-unsuitable``) and the
    message every command gives (``env``, ``run`` and ``nccl check`` print it as it is).
    A named tuple."""

    __slots__ = ()
    _fields = ("code", "message")

    def __new__(cls, code: str, message: str) -> GidVerdict:
        return tuple.__new__(cls, (code, message))

    @property
    def code(self) -> str:
        return self[0]

    @property
    def message(self) -> str:
        return self[1]


def gid_verdict(choice: GidChoice) -> Optional[GidVerdict]:
    """The one verdict on NCCL's GID for a port, None when the GID suits RoCE as asked.

    * ``gid-lookup-fails``: NCCL's lookup itself fails (a types file it cannot read, an
      index outside the table): every RoCE connection of the port fails.
    * ``gid-link-local``: no GID of the wanted family and RoCE version qualified, and
      NCCL stays on a link-local (``fe80::``) or empty GID, which ``validGid`` rejects.
      Genuinely uncertain: a link-local GID is not routed, so traffic across routers
      fails, but inside one L2 segment it may work.
    * ``gid-unsuitable``: a valid GID of another family or RoCE version (a forced
      ``NCCL_IB_GID_INDEX``, or the scan's fallback): peers that use the wanted one
      cannot reach it.

    Every one is a warning (exit status 1) in every command.  Pure."""
    if choice.suitable:
        return None
    where = f"{choice.device}:{choice.port}"
    if choice.error is not None:
        return GidVerdict("gid-lookup-fails", f"NCCL's GID lookup fails on {where}: "
                          f"{choice.error}: every RoCE connection of the port fails")
    wanted = f"{choice.family} RoCE v{choice.roce_version}"
    head = f"on {where} NCCL would use GID index {choice.index} ({gid_text(choice.gid)})"
    if not valid_gid(choice.gid):
        what = "an empty GID" if int(choice.gid) == 0 else "a link-local GID"
        return GidVerdict(
            "gid-link-local",
            f"{head}, {what}: the port has no valid {wanted} GID (its netdev carries no "
            "such address). Link-local GIDs are not routed: RoCE traffic may work between "
            "hosts on one L2 segment and fails across routers (give the netdev an address, "
            "or check NCCL_IB_ADDR_FAMILY, NCCL_IB_ADDR_RANGE, NCCL_IB_ROCE_VERSION_NUM)")
    got = f"{gid_family(choice.gid)}, " + ("RoCE of unknown version" if choice.version is None
                                           else f"RoCE v{choice.version}")
    return GidVerdict(
        "gid-unsuitable",
        f"{head}, a GID of {got}, not {wanted} ({choice.rule}): peers that use a {wanted} "
        "GID cannot reach it (check NCCL_IB_GID_INDEX, NCCL_IB_ADDR_FAMILY, "
        "NCCL_IB_ROCE_VERSION_NUM)")


# ----------------------------------------------------------------------------- reading


def _read_type(path: bytes) -> str:
    data = read_file(path, 15)  # once per invocation (ground/sysfs_read.py)
    if isinstance(data, int):
        # a failed open() (errno) is a missing type for NCCL; a failed read() (-errno)
        return TYPE_MISSING if data > 0 else (
            TYPE_EINVAL if data == -errno.EINVAL else TYPE_ERROR)
    text = data.split(b"\0", 1)[0]
    return os.fsdecode(text[:-1] if text.endswith(b"\n") else text)


def read_gid_table(device: str, port: int, *, sysfs_path: Optional[str] = None,
                   link_layer: Optional[str] = None) -> GidTable:
    """A port's GID table from sysfs (``ports/<port>/gids``, ``gid_attrs/types``
    and ``gid_attrs/ndevs``), with the parsers :mod:`sysverbs.devices.attributes` uses.
    Types are read for index 0 (NCCL's first choice) and the non-zero GIDs: NCCL
    reads the type of a zero entry only while it is the current choice, and the
    kernel answers EINVAL for those.  An unreadable GID file reads as zero, as
    ``ibv_query_gid`` gives for an empty entry."""
    from ..devices.attributes import numbered_entries, parse_gid, read_text, resolve_ibdev

    ibdev, _ = resolve_ibdev(device, sysfs_path)
    base = ibdev + b"/ports/%d" % port
    if link_layer is None:
        link_layer = read_text(base + b"/link_layer")
    indexes = numbered_entries(base + b"/gids")
    entries = []
    for index in indexes:
        text = read_text(base + b"/gids/%d" % index, 64)
        if text == "0000:0000:0000:0000:0000:0000:0000:0000" and index != 0:
            continue  # the kernel's unused entry (most of a table): not parsed
        gid = parse_gid(text)
        if (gid is None or int(gid) == 0) and index != 0:
            continue
        if gid is None:
            gid = _ZERO
        type_text = _read_type(base + b"/gid_attrs/types/%d" % index)
        ndev = read_text(base + b"/gid_attrs/ndevs/%d" % index, 64)
        entries.append(GidEntry(index, gid, type_text, ndev or None))
    return GidTable(os.fsdecode(device), port, link_layer, len(indexes), tuple(entries))

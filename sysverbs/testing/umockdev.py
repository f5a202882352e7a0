"""Device fixtures in umockdev's recording format, and a materializer for them.

sysverbs describes test hosts with the text format that ``umockdev-record`` writes and
``umockdev-run -d FILE`` / ``umockdev_testbed_add_from_file()`` read.  Every bundled
fixture is a plain umockdev recording: ``umockdev-run -d fixture -- CMD`` runs ``CMD``
against exactly the ``/sys`` that :func:`materialize` writes to a directory.

The format (as implemented by umockdev 0.17.16, Debian 12, and unchanged up to 0.19)
===================================================================================

A file is a sequence of *records*, one per device, separated by one or more empty lines.
Each line is ``T: ...`` with a one-letter tag, a colon and exactly one space:

``P: /devices/...``
    The device's sysfs path below ``/sys``.  Must be the first line of a record, must
    start with ``/devices/`` and must occur once per record.
``E: KEY=VALUE``
    A udev property.  ``E: SUBSYSTEM=...`` is mandatory (once per record).  Properties
    become the device's ``uevent`` file (see below).  ``E: __DEVCONTEXT=...`` is,
    since umockdev 0.18, the SELinux context of the device node and no property (0.17
    treats it as a property); :func:`parse` keeps it apart and allows it once.
``A: NAME=VALUE``
    A text sysfs attribute: the file ``NAME`` (which may contain ``/``: ``ports/1/lid``)
    below the device directory.  ``VALUE`` uses GLib's ``g_strescape`` escaping, undone
    with ``g_strcompress``: ``\\n \\t \\r \\b \\f \\v \\\\ \\"`` and octal ``\\NNN``; any
    other backslashed character stands for itself.  A value ``A: fw_ver=20.33.1048\\n``
    therefore gives the 11 bytes ``20.33.1048`` plus a newline.
``H: NAME=HEX``
    A binary attribute, its bytes as a continuous hex string (``0081FE0A``).
``L: NAME=TARGET``
    A symlink attribute (``driver``, ``device``, ``physfn``, ``virtfn0``), TARGET
    verbatim, normally relative (``../../../0000:1f:00.0``).
``N: NAME`` or ``N: NAME=HEX``
    The device node ``/dev/NAME`` (``N: infiniband/uverbs0``), optionally with content
    (upper-case hex only).
``S: NAME``
    A ``/dev`` symlink to the node (``S: infiniband/by-ibdev/uverbs-mlx5_0``).

Nothing else is accepted.  umockdev has **no comment syntax**: a ``#`` line, a line of
another tag (udevadm's ``M:``, ``J:``, ``L: 0``...), a missing space after the colon,
a leading empty line or a line of blanks all make umockdev reject the whole file, and
:func:`parse` rejects them too, with the line number.  So a file that :func:`parse`
accepts is a file that ``umockdev-run`` loads.  A few things umockdev accepts only
with a warning or with silent damage are rejected as well: a trailing backslash or
an escape that yields a NUL byte in ``A:`` (umockdev truncates the value there; use
``H:``), non-hex digits or an odd length in ``H:``, two ``N:`` lines in one record.

Files outside device directories: the class ``abi_version`` files
==================================================================

libibverbs needs ``/sys/class/infiniband_verbs/abi_version``, which belongs to no
device.  umockdev has no record type for such files and no comments to hang an
extension on (any unknown line type is fatal, see above).  But it joins an
attribute name onto the device directory without sanitising it, so an attribute
whose name climbs out of the device directory writes a file elsewhere in the
testbed's ``/sys``.  That is the (only) way a plain recording creates a class-level
file, it works unchanged in ``umockdev-run`` (``cat /sys/class/infiniband_verbs/
abi_version`` prints ``6``), and :func:`materialize` gives it the same meaning.  No
extension of the format is needed, so none is defined.

The bundled fixtures hang these files on the loopback interface every Linux host
has, the first record of each file::

    P: /devices/virtual/net/lo
    E: SUBSYSTEM=net
    ...
    A: ../../../../class/infiniband_verbs/abi_version=6\\n

:func:`class_file` builds such an attribute for any record and target.

Files in ``/proc``: a proc root
===============================

Placement reads ``/proc/driver/nvidia/gpus/<bdf>/information`` and hwloc reads
``/proc/cpuinfo``, both under an alternate root (``proc_path``, ``HWLOC_FSROOT``).
A recording carries such a file the way it carries the class files: as an attribute
whose name climbs one level further, out of ``/sys`` into the root beside it
(:func:`proc_file`).  :func:`materialize` writes it to ``root/proc/...`` (the one
exception to "attributes land inside ``root/sys``": inside ``root/proc`` is allowed
too, for files only).  umockdev accepts the same line and writes the file into its
testbed directory, but its preload library redirects only ``/sys`` and ``/dev``, so
under ``umockdev-run`` the real ``/proc`` stays visible.  ``/sys/devices/system``
(CPUs and NUMA nodes) needs nothing special: its ``cpuN`` and ``nodeN`` directories
are devices (of the ``cpu`` and ``node`` buses) and their parents' files
(``/sys/devices/system/cpu/online``) are ``..`` attributes of ``cpu0``/``node0``.

What :func:`materialize` writes
===============================

For every record, in file order (what umockdev's ``add_from_string`` does, with the
differences listed below):

* ``root/sys/devices/...``: the device directory;
* the ``subsystem`` link and, for a class (``net``, ``infiniband``,
  ``infiniband_verbs``, ``infiniband_mad``...), ``root/sys/class/<SUBSYSTEM>/<name>
  -> ../../devices/...``; for a bus (``pci``, ``auxiliary``, ``vmbus``...),
  ``root/sys/bus/<SUBSYSTEM>/devices/<name> -> ../../../devices/...``, exactly the
  relative links the kernel makes;
* ``uevent`` from the ``E:`` lines, in file order, as the kernel's file shows it:
  ``KEY=VALUE`` lines, ``DEVNAME`` without ``/dev/``, and without what only udev or
  the event (not the file) carries: ``SUBSYSTEM``, ``DEVPATH``, ``ACTION``,
  ``SEQNUM``, ``USEC_INITIALIZED``, ``DEVLINKS``, ``TAGS``, ``CURRENT_TAGS``,
  ``UDEV_LOG`` and keys starting with ``ID_``, ``SYSTEMD_`` or ``.``.  An ``A:``/``H:``
  attribute named ``uevent`` replaces it (umockdev writes ``uevent`` first, then the
  attributes);
* the ``A:`` attributes, then the ``H:`` ones, then the ``L:`` links (umockdev's
  order), byte-exact; a file that already exists is replaced, like
  ``g_file_set_contents`` does;
* ``root/sys/dev/char/<MAJ:MIN> -> ../../devices/...`` for a record with ``A: dev``
  and ``E: DEVNAME=/dev/...`` (``block`` when the path contains ``/block/``);
* the device node ``root/dev/<NAME>`` as an **empty regular file** (or with its
  ``N:`` content); umockdev makes a pty instead.  ``S:`` links become relative
  symlinks to the node.

Then the :class:`TreeEntry` objects given to :func:`materialize` (``entries=``), in
order: the paths of a broken or partial host that no device record holds, which no
recording can carry (a class file without a loopback record to hang it on, a class
entry that is a directory, a dangling link, an unreadable file).

Safety: ``..``, ``.`` or empty components in ``P:``, ``N:`` and ``S:`` are rejected, and
so are absolute ``N:``/``S:`` names; an attribute name may contain ``..`` (see above)
but must not be absolute (umockdev would quietly make both relative), and every
file, directory and link is created only after checking, with symlinks resolved,
that it lies inside ``root/sys`` (attributes and links) or ``root/dev`` (nodes).
Anything else raises :class:`~sysverbs.errors.RecordingError` (a ``ValueError``) naming
the record's line.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Union

from ..ground.errors import RecordingError, WrongTypeError

__all__ = [
    "Attribute",
    "Record",
    "Recording",
    "TreeEntry",
    "class_file",
    "dumps",
    "escape",
    "have_umockdev_run",
    "load",
    "parse",
    "proc_file",
    "umockdev_run_command",
    "write_tree",
    "unescape",
]


#: uevent keys that the kernel never writes into a device's ``uevent`` file: they are
#: added to the event itself (ACTION, DEVPATH, SUBSYSTEM, SEQNUM) or only by udev.
_NOT_IN_UEVENT_FILE = frozenset(
    {
        "ACTION",
        "DEVPATH",
        "SUBSYSTEM",
        "SEQNUM",
        "USEC_INITIALIZED",
        "DEVLINKS",
        "TAGS",
        "CURRENT_TAGS",
        "UDEV_LOG",
    }
)
_NOT_IN_UEVENT_PREFIXES = ("ID_", "SYSTEMD_", ".")

#: Subsystems that are buses (``/sys/bus/X``) rather than classes (``/sys/class/X``):
#: umockdev's list plus the buses it lacks that RDMA hosts use (auxiliary, ...).
_BUSES = frozenset(
    """ac97 ac97bus acpi amba anybuss aoa-soundbus ap aprbus auxiliary bcma bttv-sub
    ccw ccwgroup cdmm cec container coreboot coresight cosm_bus counter cpu css cxl dax
    dio ecard edac eisa event_source fcoe firewire fsi fsl-mc gameport gbphy genpd gio
    gpio greybus hdaudio hid host1x hsi i2c i3c ibmebus ide iio intel_th ipack isa
    iscsi_flashnode ishtp iucv locomo-bus logicmodule macio maple matrix mcb mcp mdev
    mdio_bus media mei memory memstick mhi mic_bus mipi-dsi mmc mmc_rpmb most nd
    netdevsim node ntb ntb_transport nubus nvmem parisc parport pci pci-epf pcmcia
    platform pnp ps3_system_bus pseudo rapidio rbd rmi4 rpmsg sa1111-rab scif_bus
    scif_peer_bus scm scmi_protocol scsi sdio serial serio siox slimbus snd_seq soc
    soundwire spi spmi ssb sunxi-rsb superhyway tc tcm_loop_bus tee thunderbolt tifm
    tiocx typec ulpi umc usb usb-serial uwb vdpa vio virtio visorbus vlynq vmbus vme
    vop_bus w1 wmi wmi_bus xen xen-backend zorro""".split()
)

# umockdev's line grammar (its three regular expressions, applied to one line).
_RE_VAL = re.compile(r"([PS]): (.*)")
_RE_KEYVAL = re.compile(r"([EAHL]): ([^=\n]+)=(.*)")
_RE_OPTVAL = re.compile(r"(N): ([^=\n]+)(?:=([0-9A-F]+))?")
_RE_HEX = re.compile(r"(?:[0-9A-Fa-f]{2})*")


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Attribute:
    """One ``A:``, ``H:`` or ``L:`` line.

    ``value`` holds the file's exact bytes (``A:``/``H:``); ``link`` the symlink target
    (``L:``, then ``value`` is empty).  ``binary`` records that the line was ``H:``.
    ``line`` (the source line, 0 if built in code) is ignored by ``==``.
    """

    name: str
    value: bytes = b""
    link: str | None = None
    binary: bool = False
    line: int = field(default=0, compare=False)

    @property
    def tag(self) -> str:
        """``"A"``, ``"H"`` or ``"L"``."""
        if self.link is not None:
            return "L"
        return "H" if self.binary else "A"

    @property
    def text(self) -> str:
        """The value decoded as UTF-8 (undecodable bytes replaced)."""
        return self.value.decode("utf-8", "replace")


@dataclass(frozen=True)
class Record:
    """One device: a paragraph of the recording."""

    path: str
    properties: tuple[tuple[str, str], ...] = ()
    attributes: tuple[Attribute, ...] = ()
    node: str | None = None
    node_contents: bytes | None = None
    links: tuple[str, ...] = ()
    selinux_context: str | None = None
    line: int = field(default=0, compare=False)

    @property
    def name(self) -> str:
        """The device's kernel name, the last component of its path."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def subsystem(self) -> str:
        """The ``SUBSYSTEM`` property ("" when absent, which :func:`parse` rejects)."""
        return self.property("SUBSYSTEM") or ""

    def property(self, key: str) -> str | None:
        """The value of udev property ``key`` (the last one if repeated), or None."""
        found: str | None = None
        for k, v in self.properties:
            if k == key:
                found = v
        return found

    def attribute(self, name: str) -> Attribute | None:
        """The last ``A:``/``H:``/``L:`` line for ``name``, or None."""
        found: Attribute | None = None
        for attr in self.attributes:
            if attr.name == name:
                found = attr
        return found

    def value(self, name: str) -> bytes | None:
        """The bytes of file attribute ``name`` (None if absent or a link)."""
        attr = self.attribute(name)
        if attr is None or attr.link is not None:
            return None
        return attr.value

    def with_attribute(self, name: str, value: bytes | str, *, binary: bool = False) -> Record:
        """A copy whose attribute ``name`` has ``value`` (replaced in place or appended)."""
        data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
        new = Attribute(name, data, None, binary)
        return self._with(new)

    def with_link(self, name: str, target: str) -> Record:
        """A copy whose attribute ``name`` is a symlink to ``target``."""
        return self._with(Attribute(name, b"", target))

    def without_attribute(self, name: str) -> Record:
        """A copy without any attribute called ``name``."""
        return replace(self, attributes=tuple(a for a in self.attributes if a.name != name))

    def _with(self, new: Attribute) -> Record:
        attrs = list(self.attributes)
        for i, attr in enumerate(attrs):
            if attr.name == new.name:
                attrs[i] = new
                attrs = attrs[: i + 1] + [a for a in attrs[i + 1 :] if a.name != new.name]
                break
        else:
            attrs.append(new)
        return replace(self, attributes=tuple(attrs))


@dataclass(frozen=True)
class Recording:
    """A parsed recording: its records in file order."""

    records: tuple[Record, ...] = ()

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def find(self, path: str) -> Record | None:
        """The record whose ``P:`` is ``path``, or None."""
        for rec in self.records:
            if rec.path == path:
                return rec
        return None

    def subsystem(self, subsystem: str) -> tuple[Record, ...]:
        """All records of one subsystem, in file order."""
        return tuple(r for r in self.records if r.subsystem == subsystem)

    def with_record(self, record: Record) -> Recording:
        """A copy with ``record`` replacing the one of the same path, or appended."""
        recs = list(self.records)
        for i, rec in enumerate(recs):
            if rec.path == record.path:
                recs[i] = record
                break
        else:
            recs.append(record)
        return Recording(tuple(recs))

    def without(self, path: str) -> Recording:
        """A copy without the record ``path``."""
        return Recording(tuple(r for r in self.records if r.path != path))


# ------------------------------------------------------------------------ escaping


def unescape(value: str) -> bytes:
    """Undo ``g_strescape`` the way umockdev does (``g_strcompress``), to bytes.

    Raises ValueError for a trailing backslash and for escapes that give a NUL byte
    (umockdev would silently cut the value there); WrongTypeError for a non-str.
    """
    if not isinstance(value, str):
        raise WrongTypeError(f"a recorded value is a str, not {type(value).__name__}")
    try:
        src = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that decoding a file never makes
        raise RecordingError(f"{value!r} is not text a recording file holds") from None
    if b"\\" not in src:
        return src
    out = bytearray()
    i, n = 0, len(src)
    simple = {
        ord("b"): 0x08,
        ord("f"): 0x0C,
        ord("n"): 0x0A,
        ord("r"): 0x0D,
        ord("t"): 0x09,
        ord("v"): 0x0B,
    }
    while i < n:
        c = src[i]
        if c != 0x5C:
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            raise RecordingError("trailing backslash in value")
        c = src[i]
        if 0x30 <= c <= 0x37:
            num, j = 0, i
            while j < n and j < i + 3 and 0x30 <= src[j] <= 0x37:
                num = num * 8 + (src[j] - 0x30)
                j += 1
            num &= 0xFF
            if num == 0:
                raise RecordingError(f"escape {src[i - 1 : j]!r} gives a NUL byte; use an H: line")
            out.append(num)
            i = j
            continue
        out.append(simple.get(c, c))
        i += 1
    return bytes(out)


def escape(value: bytes) -> str:
    """Escape bytes for an ``A:`` line as ``umockdev-record`` does (``g_strescape``).

    Raises ValueError for a NUL byte, which an ``A:`` line cannot carry.
    """
    parts: list[str] = []
    table = {
        0x08: "\\b",
        0x0C: "\\f",
        0x0A: "\\n",
        0x0D: "\\r",
        0x09: "\\t",
        0x0B: "\\v",
        0x5C: "\\\\",
        0x22: '\\"',
    }
    for b in value:
        if b == 0:
            raise RecordingError("an A: value cannot contain a NUL byte; use H:")
        if b in table:
            parts.append(table[b])
        elif b < 0x20 or b >= 0x7F:
            parts.append(f"\\{b:03o}")
        else:
            parts.append(chr(b))
    return "".join(parts)


# -------------------------------------------------------------------------- parser


def _err(lineno: int, msg: str) -> RecordingError:
    return RecordingError(f"line {lineno}: {msg}")


def _hex(lineno: int, text: str) -> bytes:
    if len(text) % 2:
        return _raise(_err(lineno, f"hex value has an odd number of digits: {text!r}"))
    if not _RE_HEX.fullmatch(text):
        return _raise(_err(lineno, f"hex value has non-hex characters: {text!r}"))
    return bytes.fromhex(text)


def _raise(exc: ValueError) -> bytes:
    raise exc


def parse(text: str) -> Recording:
    """Parse a recording (see the module docstring for the grammar).

    Raises ValueError naming the (1-based) line for anything umockdev would reject
    (WrongTypeError for a non-str: :func:`load` reads files).
    """
    if not isinstance(text, str):
        raise WrongTypeError(f"a recording is a str, not {type(text).__name__}")
    if "\0" in text:
        lineno = text.count("\n", 0, text.index("\0")) + 1
        raise _err(lineno, "NUL character in recording")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the data, it is no empty line
    records: list[Record] = []
    i, n = 0, len(lines)
    while i < n:
        start = i + 1
        head = _RE_VAL.fullmatch(lines[i])
        if head is None or head.group(1) != "P":
            raise _err(start, "a device record must start with a 'P: /devices/...' line")
        path = head.group(2)
        if not path.startswith("/devices/"):
            raise _err(start, f"invalid device path {path!r}: must start with /devices/")
        i += 1
        props: list[tuple[str, str]] = []
        attrs: list[Attribute] = []
        node: str | None = None
        node_contents: bytes | None = None
        links: list[str] = []
        context: str | None = None
        subsystem_seen = False
        while i < n and lines[i] != "":
            lineno, line = i + 1, lines[i]
            i += 1
            m = _RE_VAL.fullmatch(line)
            if m is not None:
                if m.group(1) == "P":
                    raise _err(lineno, "P: line inside a record (records are separated by "
                               "an empty line)")
                if m.group(2) == "":
                    raise _err(lineno, "empty S: line")
                links.append(m.group(2))
                continue
            m = _RE_KEYVAL.fullmatch(line)
            if m is not None:
                tag, key, val = m.group(1), m.group(2), m.group(3)
                if tag == "E":
                    if key == "__DEVCONTEXT":
                        if context is not None:
                            raise _err(lineno, "duplicate __DEVCONTEXT property")
                        context = val
                        continue
                    if key == "SUBSYSTEM":
                        if subsystem_seen:
                            raise _err(lineno, "duplicate SUBSYSTEM property")
                        subsystem_seen = True
                    props.append((key, val))
                elif tag == "A":
                    try:
                        data = unescape(val)
                    except ValueError as exc:
                        raise _err(lineno, f"attribute {key}: {exc}") from None
                    attrs.append(Attribute(key, data, None, False, lineno))
                elif tag == "H":
                    attrs.append(Attribute(key, _hex(lineno, val), None, True, lineno))
                else:
                    attrs.append(Attribute(key, b"", val, False, lineno))
                continue
            m = _RE_OPTVAL.fullmatch(line)
            if m is not None:
                if node is not None:
                    raise _err(lineno, "second N: line in one record")
                node = m.group(2)
                node_contents = None if m.group(3) is None else _hex(lineno, m.group(3))
                continue
            raise _err(lineno, f"malformed line {line!r} (expected 'T: ...' with T one of "
                               "P E A H L N S)")
        if not subsystem_seen:
            raise _err(start, f"record {path} has no E: SUBSYSTEM= property")
        records.append(
            Record(path, tuple(props), tuple(attrs), node, node_contents, tuple(links),
                   context, start)
        )
        while i < n and lines[i] == "":
            i += 1
    return Recording(tuple(records))


def load(path: str | os.PathLike[str]) -> Recording:
    """Read and parse a recording file (bytes that are not UTF-8 survive, escaped)."""
    if not isinstance(path, (str, os.PathLike)):  # open(3) would read file descriptor 3
        raise WrongTypeError(f"path must be a path, not {type(path).__name__}")
    with open(path, "rb") as f:
        data = f.read()
    return parse(data.decode("utf-8", "surrogateescape"))


def dumps(recording: Recording | Iterable[Record]) -> str:
    """Write a recording in umockdev's format; ``parse(dumps(r)) == r``.

    Attributes are written in their stored order (``H:`` for binary ones and for
    values with a NUL byte); records are each followed by an empty line.
    """
    out: list[str] = []
    for rec in recording:
        _check_line_text(rec.path, "path")
        out.append(f"P: {rec.path}\n")
        if rec.node is not None:
            _check_line_text(rec.node, "node")
            if "=" in rec.node:
                raise RecordingError(f"node name {rec.node!r} cannot contain '='")
            if rec.node_contents:
                out.append(f"N: {rec.node}={rec.node_contents.hex().upper()}\n")
            else:
                out.append(f"N: {rec.node}\n")
        for link in rec.links:
            _check_line_text(link, "S: link")
            out.append(f"S: {link}\n")
        if rec.selinux_context is not None:
            _check_line_text(rec.selinux_context, "__DEVCONTEXT")
            out.append(f"E: __DEVCONTEXT={rec.selinux_context}\n")
        for key, val in rec.properties:
            _check_key(key)
            _check_line_text(val, "property value")
            out.append(f"E: {key}={val}\n")
        for attr in rec.attributes:
            _check_key(attr.name)
            if attr.link is not None:
                _check_line_text(attr.link, "link target")
                out.append(f"L: {attr.name}={attr.link}\n")
            elif attr.binary or b"\0" in attr.value:
                out.append(f"H: {attr.name}={attr.value.hex().upper()}\n")
            else:
                out.append(f"A: {attr.name}={escape(attr.value)}\n")
        out.append("\n")
    return "".join(out)


def _check_key(key: str) -> None:
    if key == "" or "=" in key or "\n" in key:
        raise RecordingError(f"invalid key {key!r} (must be non-empty, without '=' or newline)")


def _check_line_text(text: str, what: str) -> None:
    if "\n" in text:
        raise RecordingError(f"{what} {text!r} cannot contain a newline")


# ---------------------------------------------------------------------- class files


def class_file(record_path: str, target: str, value: bytes | str) -> Attribute:
    """An attribute for the record at ``record_path`` that writes sysfs file ``target``.

    ``target`` is a path below ``/sys`` (``/class/infiniband_verbs/abi_version``); the
    attribute's name climbs from the device directory to ``/sys`` with ``..``, the way
    the bundled fixtures carry class-level files (see the module docstring)::

        class_file("/devices/virtual/net/lo", "/class/infiniband_verbs/abi_version", "6\\n")
        -> Attribute("../../../../class/infiniband_verbs/abi_version", b"6\\n")
    """
    depth = len([p for p in ("/sys" + record_path).split("/") if p]) - 1
    rel = target.lstrip("/")
    if not rel or ".." in rel.split("/"):
        raise RecordingError(f"invalid target {target!r}")
    data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    return Attribute("../" * depth + rel, data)


def proc_file(record_path: str, target: str, value: bytes | str) -> Attribute:
    """An attribute for the record at ``record_path`` that writes ``/proc`` file ``target``.

    Like :func:`class_file`, one level higher: the name climbs out of ``/sys`` into the
    root beside it (``/proc/driver/nvidia/gpus/0000:07:00.0/information``), which
    :func:`materialize` writes to ``root/proc/...`` (a proc root for tools that take one,
    such as hwloc's ``HWLOC_FSROOT``).  umockdev writes the same file into its testbed
    directory but redirects only ``/sys`` and ``/dev``, so under ``umockdev-run`` the
    file is not seen at ``/proc``::

        proc_file("/devices/pci0000:00/0000:00:01.0/0000:07:00.0", "/proc/cpuinfo", "...")
        -> Attribute("../../../../../proc/cpuinfo", ...)
    """
    depth = len([p for p in ("/sys" + record_path).split("/") if p])
    parts = [p for p in target.split("/") if p]
    if len(parts) < 2 or parts[0] != "proc" or ".." in parts or "." in parts:
        raise RecordingError(f"invalid /proc target {target!r}")
    data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    return Attribute("../" * depth + "/".join(parts), data)


# --------------------------------------------------------------------- materialize


class _Tree:
    """Creates files below root, refusing anything that would land outside."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self.sys = os.path.join(self.real_root, "sys")
        self.dev = os.path.join(self.real_root, "dev")
        self.proc = os.path.join(self.real_root, "proc")
        # Directories this writer created or resolved: unresolved path -> real path.  An
        # entry stays true while nothing is removed (a directory is never replaced, and a
        # new link or directory is made only where nothing was); write() clears it when
        # it unlinks.  It saves a realpath() per file: half of a big host's writing time.
        self._real_dirs: dict[str, str] = {}

    def _inside(self, real: str, area: str) -> bool:
        return real == area or real.startswith(area + os.sep)

    def inside(self, path: str, area: str) -> bool:
        """Whether the normalized path ``path`` lies inside ``area``."""
        return self._inside(path, area)

    def _check(self, path: str, area: str, lineno: int) -> str:
        """The real directory ``dirname(path)`` resolves to; it must be inside area."""
        unresolved = os.path.dirname(path)
        real_dir = self._real_dirs.get(unresolved)
        if real_dir is None:
            real_dir = os.path.realpath(unresolved)
            if os.path.isdir(real_dir):
                self._real_dirs[unresolved] = real_dir
        if not self._inside(real_dir, area):
            raise _err(lineno, f"{path} would be created outside {area}")
        return real_dir

    def mkdirs(self, path: str, area: str, lineno: int) -> None:
        """``g_mkdir_with_parents(path)``: create each missing prefix of the unresolved
        path ``path`` (which starts with the real root); ``..`` steps must stay inside
        the root and every new directory must land inside ``area``."""
        if path != self.real_root and not path.startswith(self.real_root + "/"):
            raise _err(lineno, f"{path} is outside {self.root}")
        cur = self.real_root
        real: str | None = self.real_root  # cur's real path, while no link was passed
        for part in path[len(self.real_root):].split("/"):
            if part in ("", "."):
                continue
            cur = cur + "/" + part
            if part == "..":
                real = os.path.realpath(cur)
                if not self._inside(real, self.real_root):
                    raise _err(lineno, f"{path} climbs out of {self.root}")
                continue
            known = self._real_dirs.get(cur)
            if known is not None:
                real = known
                continue
            try:
                mode: int | None = os.lstat(cur).st_mode
            except OSError:
                mode = None
            if mode is not None and stat.S_ISDIR(mode):
                # An existing directory (no link): its real path is known from its
                # parent's, which saves _check() a realpath() per directory.
                if real is not None:
                    real = real + "/" + part
                    self._real_dirs[cur] = real
                continue
            if mode is not None and stat.S_ISLNK(mode) and os.path.isdir(cur):
                real = None
                continue
            real_parent = self._check(cur, area, lineno)
            if mode is not None:
                raise _err(lineno, f"cannot create directory {cur}: something else is there")
            made = os.path.join(real_parent, part)
            os.mkdir(made)
            self._real_dirs[cur] = made
            real = made

    def write(self, path: str, data: bytes, area: str, lineno: int) -> None:
        """Replace ``path`` with a regular file holding ``data``."""
        base = os.path.basename(path)
        if base in ("", ".", ".."):
            raise _err(lineno, f"invalid file name {path!r}")
        real_dir = self._check(path, area, lineno)
        target = os.path.join(real_dir, base)
        try:
            mode: int | None = os.lstat(target).st_mode
        except OSError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise _err(lineno, f"cannot write {path}: it is a directory")
        if mode is not None:
            os.unlink(target)
            self._real_dirs.clear()  # it may have been a link some entry went through
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            os.close(fd)

    def symlink(self, path: str, target: str, area: str, lineno: int, *, exist_ok: bool = False
                ) -> None:
        base = os.path.basename(path)
        if base in ("", ".", ".."):
            raise _err(lineno, f"invalid link name {path!r}")
        real_dir = self._check(path, area, lineno)
        where = os.path.join(real_dir, base)
        if os.path.lexists(where):
            if exist_ok:
                return
            raise _err(lineno, f"cannot create symlink {path}: it exists")
        os.symlink(target, where)


def _plain_components(text: str, what: str, lineno: int, *, relative: bool = False
                      ) -> list[str]:
    parts = [p for p in text.split("/") if p != ""]
    if not parts or any(p in (".", "..") for p in parts) or (relative and text[:1] == "/"):
        raise _err(lineno, f"invalid {what} {text!r} (no '.', '..' or empty path allowed)")
    return parts


def _dotdots(sys_path_parts: Sequence[str]) -> str:
    """``../`` from a directory ``/sys/<parts>`` up to ``/sys``."""
    return "../" * len(sys_path_parts)


def _uevent(rec: Record) -> bytes:
    lines: list[str] = []
    for key, val in rec.properties:
        if key in _NOT_IN_UEVENT_FILE or key.startswith(_NOT_IN_UEVENT_PREFIXES):
            continue
        if key == "DEVNAME" and val.startswith("/dev/"):
            val = val[5:]
        lines.append(f"{key}={val}\n")
    return "".join(lines).encode("utf-8", "surrogateescape")


Source = Union[str, "os.PathLike[str]", Recording]


@dataclass(frozen=True)
class TreeEntry:
    """One path of a fake host that no device record holds, for hosts the kernel
    would never show: a class file with no device to carry it, a class entry that is
    a plain directory, a dangling or looping link, a file without a newline, an
    unreadable file.

    ``path`` is relative to the root and starts with ``sys/``, ``dev/`` or ``proc/``
    (``sys/class/infiniband_verbs/abi_version``); names that are not UTF-8 are
    ``str`` with surrogate escapes (``os.fsdecode``).  The entry is a regular file
    holding ``value``, a symlink to ``link`` (verbatim, it need not exist) or, with
    ``directory``, a directory.  ``mode`` (not for a link): a ``chmod`` once the
    whole tree is written.  Missing parent directories are created; a file replaces a file, a
    directory keeps one that exists, a link where something exists is an error.

    >>> TreeEntry("sys/class/infiniband_verbs/uverbs9", directory=True).kind
    'dir'
    """

    path: str
    value: bytes = b""
    link: str | None = None
    directory: bool = False
    mode: int | None = None

    @property
    def kind(self) -> str:
        """``"file"``, ``"link"`` or ``"dir"``."""
        if self.link is not None:
            return "link"
        return "dir" if self.directory else "file"


def write_tree(recording: Recording, root: str | os.PathLike[str],
               entries: Iterable[TreeEntry] = ()) -> tuple[str, ...]:
    """Write the host described by ``recording`` below ``root``, then ``entries``; the
    names of the device nodes created below ``root/dev/infiniband``, in file order.

    :func:`sysverbs.testing.materialize` is the public form.  ``root`` is created
    if needed; it may already hold another materialized recording (like loading
    several files into one umockdev testbed), but a device, link or node that exists
    already is an error.  ``root/sys``, ``root/sys/class`` and ``root/dev/infiniband``
    always exist afterwards.  See the module docstring for what is written.
    """
    root_path = Path(root)
    root_path.mkdir(parents=True, exist_ok=True)
    tree = _Tree(root_path)
    for sub in ("sys/bus", "sys/class", "dev/infiniband"):
        tree.mkdirs(os.path.join(tree.real_root, sub), tree.real_root, 0)
    ib_dir = os.path.join(tree.dev, "infiniband")
    nodes: list[str] = []
    for rec in recording:
        nodes.extend(_materialize_record(tree, rec, ib_dir))
    modes: list[tuple[str, int]] = []
    for entry in entries:
        path = _write_entry(tree, entry)
        if entry.mode is not None:
            modes.append((path, entry.mode))
    for path, mode in modes:
        os.chmod(path, mode)
    return tuple(nodes)


def _write_entry(tree: _Tree, entry: TreeEntry) -> str:
    """Write one :class:`TreeEntry`; the real path written."""
    where = f"entry {entry.path!r}"
    parts = entry.path.split("/")
    if entry.path.startswith("/") or any(p in ("", ".", "..") for p in parts) or len(parts) < 2:
        raise RecordingError(f"invalid {where}: a relative path without '.', '..' or "
                             f"empty components")
    areas = {"sys": tree.sys, "dev": tree.dev, "proc": tree.proc}
    area = areas.get(parts[0])
    if area is None:
        raise RecordingError(f"invalid {where}: must start with sys/, dev/ or proc/")
    try:
        if not os.path.isdir(area):
            if os.path.lexists(area):
                raise RecordingError(f"cannot create {area}: something else is there")
            os.mkdir(area)
        path = os.path.join(area, *parts[1:])
        tree.mkdirs(os.path.dirname(path), area, 0)
        if entry.link is not None:
            if entry.mode is not None:
                raise RecordingError("a link has no mode of its own")
            tree.symlink(path, entry.link, area, 0)
        elif entry.directory:
            tree.mkdirs(path, area, 0)
        else:
            tree.write(path, entry.value, area, 0)
        real = os.path.realpath(path)
        if entry.mode is not None and not tree.inside(real, area):
            raise RecordingError(f"{path} lies outside {area}")
    except RecordingError as exc:
        raise RecordingError(f"{where}: {str(exc).removeprefix('line 0: ')}") from None
    return real


def _materialize_record(tree: _Tree, rec: Record, ib_dir: str) -> list[str]:
    lineno = rec.line
    parts = _plain_components(rec.path, "device path", lineno)
    if parts[0] != "devices" or len(parts) < 2:
        raise _err(lineno, f"invalid device path {rec.path!r}: must start with /devices/")
    subsystem = rec.subsystem
    if not subsystem or "/" in subsystem or subsystem in (".", ".."):
        raise _err(lineno, f"invalid SUBSYSTEM {subsystem!r}")
    name = parts[-1]
    rel_devpath = "/".join(parts)  # devices/...
    dev_dir = os.path.join(tree.sys, *parts)
    if os.path.lexists(os.path.join(dev_dir, "uevent")):
        raise _err(lineno, f"device {rec.path} is already present")
    tree.mkdirs(dev_dir, tree.sys, lineno)
    up = _dotdots(parts)
    if subsystem in _BUSES:
        bus_dir = os.path.join(tree.sys, "bus", subsystem, "devices")
        tree.mkdirs(bus_dir, tree.sys, lineno)
        tree.symlink(os.path.join(dev_dir, "subsystem"), up + "bus/" + subsystem, tree.sys,
                     lineno)
        tree.symlink(os.path.join(bus_dir, name), "../../../" + rel_devpath, tree.sys, lineno)
    else:
        class_dir = os.path.join(tree.sys, "class", subsystem)
        tree.mkdirs(class_dir, tree.sys, lineno)
        tree.symlink(os.path.join(dev_dir, "subsystem"), up + "class/" + subsystem, tree.sys,
                     lineno)
        tree.symlink(os.path.join(class_dir, name), "../../" + rel_devpath, tree.sys, lineno)
    if subsystem == "block":
        block_dir = os.path.join(tree.sys, "block")
        tree.mkdirs(block_dir, tree.sys, lineno)
        tree.symlink(os.path.join(block_dir, name), "../" + rel_devpath, tree.sys, lineno,
                     exist_ok=True)

    tree.write(os.path.join(dev_dir, "uevent"), _uevent(rec), tree.sys, lineno)

    ordered = [a for a in rec.attributes if a.link is None and not a.binary]
    ordered += [a for a in rec.attributes if a.link is None and a.binary]
    ordered += [a for a in rec.attributes if a.link is not None]
    devname = rec.property("DEVNAME")
    for attr in ordered:
        aline = attr.line or lineno
        if attr.name.startswith("/") or attr.name == "" or "\0" in attr.name:
            raise _err(aline, f"invalid attribute name {attr.name!r} (must be a relative path)")
        path = dev_dir + "/" + attr.name
        parent = os.path.dirname(path)
        # An attribute climbing out of /sys into root/proc is a /proc file (proc_file()).
        area = tree.sys
        if attr.link is None and tree.inside(os.path.normpath(path), tree.proc):
            area = tree.proc
            if not os.path.isdir(tree.proc):
                if os.path.lexists(tree.proc):
                    raise _err(aline, f"cannot create {tree.proc}: something else is there")
                os.mkdir(tree.proc)
        if "/" in attr.name:
            tree.mkdirs(parent, area, aline)
        if attr.link is not None:
            tree.symlink(path, attr.link, tree.sys, aline)
            continue
        tree.write(path, attr.value, area, aline)
        if attr.name == "dev" and devname is not None and devname.startswith("/dev/"):
            majmin = attr.value.decode("utf-8", "surrogateescape").strip()
            kind = "block" if "/block/" in "/sys/" + rel_devpath else "char"
            if majmin and "/" not in majmin and majmin not in (".", ".."):
                sysdev = os.path.join(tree.sys, "dev", kind)
                tree.mkdirs(sysdev, tree.sys, aline)
                tree.symlink(os.path.join(sysdev, majmin), "../../" + rel_devpath, tree.sys,
                             aline, exist_ok=True)

    created: list[str] = []
    if rec.node is not None:
        node_parts = _plain_components(rec.node, "device node name", lineno, relative=True)
        node_path = os.path.join(tree.dev, *node_parts)
        tree.mkdirs(os.path.dirname(node_path), tree.dev, lineno)
        if os.path.lexists(node_path):
            raise _err(lineno, f"device node /dev/{rec.node} is already present")
        tree.write(node_path, rec.node_contents or b"", tree.dev, lineno)
        if node_path.startswith(ib_dir + "/"):
            created.append(node_path[len(ib_dir) + 1 :])
        for link in rec.links:
            link_parts = _plain_components(link, "S: link", lineno, relative=True)
            link_path = os.path.join(tree.dev, *link_parts)
            tree.mkdirs(os.path.dirname(link_path), tree.dev, lineno)
            target = os.path.relpath(node_path, os.path.dirname(link_path))
            tree.symlink(link_path, target, tree.dev, lineno, exist_ok=True)
    else:
        for link in rec.links:  # umockdev ignores S: lines of records without a node
            _plain_components(link, "S: link", lineno, relative=True)
    return created


# ------------------------------------------------------------------- umockdev-run


def umockdev_run_command(fixture: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                         argv: Sequence[str], *, umockdev_run: str = "umockdev-run"
                         ) -> list[str]:
    """The command that runs ``argv`` under ``umockdev-run`` with ``fixture`` loaded.

    ``fixture`` is a recording file (or several).  Since the bundled fixtures are plain
    umockdev recordings (class files included, see the module docstring), nothing
    has to be prepared in the testbed: inside, ``/sys`` is the fixture's tree,
    ``/dev/<N:>`` exist (as ptys), and ``$UMOCKDEV_DIR`` names the testbed.  Note that
    umockdev only redirects ``/dev`` paths that exist in the testbed; others (say
    ``/dev/infiniband`` of a fixture without nodes) fall through to the real ``/dev``.
    """
    files = [fixture] if isinstance(fixture, (str, os.PathLike)) else list(fixture)
    cmd = [umockdev_run]
    for f in files:
        cmd += ["-d", os.fspath(f)]
    return cmd + ["--", *argv]


def have_umockdev_run(umockdev_run: str = "umockdev-run") -> bool:
    """Whether ``umockdev-run`` is on PATH."""
    return shutil.which(umockdev_run) is not None

"""umockdev's text format: ``g_strescape`` escaping and its inverse, :func:`parse`,
:func:`load` and :func:`dumps` (:mod:`sysverbs.testing.umockdev` documents the
grammar)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from ..ground.errors import RecordingError, WrongTypeError
from .umockdev_model import Attribute, Record, Recording, line_error

__all__ = ["dumps", "escape", "load", "parse", "unescape"]

# umockdev's line grammar (its three regular expressions, applied to one line).
_RE_VAL = re.compile(r"([PS]): (.*)")
_RE_KEYVAL = re.compile(r"([EAHL]): ([^=\n]+)=(.*)")
_RE_OPTVAL = re.compile(r"(N): ([^=\n]+)(?:=([0-9A-F]+))?")
_RE_HEX = re.compile(r"(?:[0-9A-Fa-f]{2})*")

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


def _hex(lineno: int, text: str) -> bytes:
    if len(text) % 2:
        return _raise(line_error(lineno, f"hex value has an odd number of digits: {text!r}"))
    if not _RE_HEX.fullmatch(text):
        return _raise(line_error(lineno, f"hex value has non-hex characters: {text!r}"))
    return bytes.fromhex(text)


def _raise(exc: ValueError) -> bytes:
    raise exc


def parse(text: str) -> Recording:
    """Parse a recording (see :mod:`sysverbs.testing.umockdev` for the grammar).

    Raises ValueError naming the (1-based) line for anything umockdev would reject
    (WrongTypeError for a non-str: :func:`load` reads files).
    """
    if not isinstance(text, str):
        raise WrongTypeError(f"a recording is a str, not {type(text).__name__}")
    if "\0" in text:
        lineno = text.count("\n", 0, text.index("\0")) + 1
        raise line_error(lineno, "NUL character in recording")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the data, it is no empty line
    records: list[Record] = []
    i, n = 0, len(lines)
    while i < n:
        start = i + 1
        head = _RE_VAL.fullmatch(lines[i])
        if head is None or head.group(1) != "P":
            raise line_error(start, "a device record must start with a 'P: /devices/...' line")
        path = head.group(2)
        if not path.startswith("/devices/"):
            raise line_error(start, f"invalid device path {path!r}: must start with /devices/")
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
                    raise line_error(lineno, "P: line inside a record (records are separated by "
                               "an empty line)")
                if m.group(2) == "":
                    raise line_error(lineno, "empty S: line")
                links.append(m.group(2))
                continue
            m = _RE_KEYVAL.fullmatch(line)
            if m is not None:
                tag, key, val = m.group(1), m.group(2), m.group(3)
                if tag == "E":
                    if key == "__DEVCONTEXT":
                        if context is not None:
                            raise line_error(lineno, "duplicate __DEVCONTEXT property")
                        context = val
                        continue
                    if key == "SUBSYSTEM":
                        if subsystem_seen:
                            raise line_error(lineno, "duplicate SUBSYSTEM property")
                        subsystem_seen = True
                    props.append((key, val))
                elif tag == "A":
                    try:
                        data = unescape(val)
                    except ValueError as exc:
                        raise line_error(lineno, f"attribute {key}: {exc}") from None
                    attrs.append(Attribute(key, data, None, False, lineno))
                elif tag == "H":
                    attrs.append(Attribute(key, _hex(lineno, val), None, True, lineno))
                else:
                    attrs.append(Attribute(key, b"", val, False, lineno))
                continue
            m = _RE_OPTVAL.fullmatch(line)
            if m is not None:
                if node is not None:
                    raise line_error(lineno, "second N: line in one record")
                node = m.group(2)
                node_contents = None if m.group(3) is None else _hex(lineno, m.group(3))
                continue
            raise line_error(lineno, f"malformed line {line!r} (expected 'T: ...' with T one of "
                               "P E A H L N S)")
        if not subsystem_seen:
            raise line_error(start, f"record {path} has no E: SUBSYSTEM= property")
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

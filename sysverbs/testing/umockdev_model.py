"""The model of a umockdev recording (:mod:`sysverbs.testing.umockdev` documents the
format): its records and their attributes, the attributes that carry class and
``/proc`` files, and the error that names a record's line."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from ..ground.errors import RecordingError

__all__ = ["Attribute", "Record", "Recording", "class_file", "proc_file", "line_error"]


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


def line_error(lineno: int, msg: str) -> RecordingError:
    """The error for line ``lineno`` of a recording (0: a record built in code)."""
    return RecordingError(f"line {lineno}: {msg}")


# ---------------------------------------------------------------------- class files


def class_file(record_path: str, target: str, value: bytes | str) -> Attribute:
    """An attribute for the record at ``record_path`` that writes sysfs file ``target``.

    ``target`` is a path below ``/sys`` (``/class/infiniband_verbs/abi_version``); the
    attribute's name climbs from the device directory to ``/sys`` with ``..``, the way
    the bundled fixtures carry class-level files (see :mod:`sysverbs.testing.umockdev`)::

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

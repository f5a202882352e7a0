"""What :func:`sysverbs.testing.materialize` writes: a recording as a tree below a
root (``root/sys``, ``root/dev``, ``root/proc``), then the :class:`TreeEntry` objects
no record holds (:mod:`sysverbs.testing.umockdev` documents what is written and the
checks that keep it inside the root)."""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..ground.errors import RecordingError, RecordingWarning
from .umockdev_model import Record, Recording, line_error

__all__ = ["TreeEntry", "write_tree"]

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
            raise line_error(lineno, f"{path} would be created outside {area}")
        return real_dir

    def mkdirs(self, path: str, area: str, lineno: int) -> None:
        """``g_mkdir_with_parents(path)``: create each missing prefix of the unresolved
        path ``path`` (which starts with the real root); ``..`` steps must stay inside
        the root and every new directory must land inside ``area``."""
        if path != self.real_root and not path.startswith(self.real_root + "/"):
            raise line_error(lineno, f"{path} is outside {self.root}")
        cur = self.real_root
        real: str | None = self.real_root  # cur's real path, while no link was passed
        for part in path[len(self.real_root):].split("/"):
            if part in ("", "."):
                continue
            cur = cur + "/" + part
            if part == "..":
                real = os.path.realpath(cur)
                if not self._inside(real, self.real_root):
                    raise line_error(lineno, f"{path} climbs out of {self.root}")
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
                raise line_error(lineno, f"cannot create directory {cur}: something else is there")
            made = os.path.join(real_parent, part)
            os.mkdir(made)
            self._real_dirs[cur] = made
            real = made

    def write(self, path: str, data: bytes, area: str, lineno: int) -> None:
        """Replace ``path`` with a regular file holding ``data``."""
        base = os.path.basename(path)
        if base in ("", ".", ".."):
            raise line_error(lineno, f"invalid file name {path!r}")
        real_dir = self._check(path, area, lineno)
        target = os.path.join(real_dir, base)
        try:
            mode: int | None = os.lstat(target).st_mode
        except OSError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise line_error(lineno, f"cannot write {path}: it is a directory")
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

    def leads_out(self, real_dir: str, target: str) -> str | None:
        """Why a link in the real directory ``real_dir`` to ``target`` would (or, once
        more links are made, could) lead out of the root; None if it cannot.

        The target is followed as the kernel would, from ``real_dir``: an existing link
        on the way is resolved, ``..`` climbs from a real path.  Out: an absolute target,
        a step outside the root, or ``..`` after a name that does not exist yet (a link
        made there later could send it anywhere; every link made is checked here, so
        one whose steps all stay inside stays inside)."""
        if target.startswith("/"):
            return "its target is absolute"
        cur = real_dir
        missing = False
        for part in target.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if missing:
                    return "its target climbs out of a directory that does not exist"
                cur = os.path.dirname(cur)
            else:
                cur = cur + "/" + part
                if not missing:
                    try:
                        mode = os.lstat(cur).st_mode
                    except OSError:
                        missing = True
                    else:
                        if stat.S_ISLNK(mode):
                            cur = os.path.realpath(cur)
            if not self._inside(cur, self.real_root):
                return "its target leads out of the root"
        return None

    def symlink(self, path: str, target: str, area: str, lineno: int, *, exist_ok: bool = False,
                checked: bool = True) -> None:
        """Make the link ``path`` -> ``target`` (verbatim).  ``checked`` (anything from a
        recording): a target that :meth:`leads_out` is left out with a
        :class:`~sysverbs.ground.errors.RecordingWarning` naming the line and the link."""
        base = os.path.basename(path)
        if base in ("", ".", ".."):
            raise line_error(lineno, f"invalid link name {path!r}")
        if not target:  # symlink(2): ENOENT; umockdev stops on it too
            raise line_error(lineno, f"cannot create symlink {path}: empty target")
        real_dir = self._check(path, area, lineno)
        where = os.path.join(real_dir, base)
        if os.path.lexists(where):
            if exist_ok:
                return
            raise line_error(lineno, f"cannot create symlink {path}: it exists")
        why = self.leads_out(real_dir, target) if checked else None
        if why is not None:
            name = os.path.relpath(path, self.real_root)
            warnings.warn(RecordingWarning(f"line {lineno}: link {name} -> {target!r} left "
                                           f"out: {why}"), stacklevel=4)
            return
        os.symlink(target, where)


def _plain_components(text: str, what: str, lineno: int, *, relative: bool = False
                      ) -> list[str]:
    parts = [p for p in text.split("/") if p != ""]
    if not parts or any(p in (".", "..") for p in parts) or (relative and text[:1] == "/"):
        raise line_error(lineno, f"invalid {what} {text!r} (no '.', '..' or empty path allowed)")
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
    always exist afterwards.  See :mod:`sysverbs.testing.umockdev` for what is written.
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
            tree.symlink(path, entry.link, area, 0, checked=False)  # the caller's own
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
        raise line_error(lineno, f"invalid device path {rec.path!r}: must start with /devices/")
    subsystem = rec.subsystem
    if not subsystem or "/" in subsystem or subsystem in (".", ".."):
        raise line_error(lineno, f"invalid SUBSYSTEM {subsystem!r}")
    name = parts[-1]
    rel_devpath = "/".join(parts)  # devices/...
    dev_dir = os.path.join(tree.sys, *parts)
    if os.path.lexists(os.path.join(dev_dir, "uevent")):
        raise line_error(lineno, f"device {rec.path} is already present")
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
            raise line_error(aline,
                             f"invalid attribute name {attr.name!r} (must be a relative path)")
        path = dev_dir + "/" + attr.name
        parent = os.path.dirname(path)
        # An attribute climbing out of /sys into root/proc is a /proc file (proc_file()).
        area = tree.sys
        if attr.link is None and tree.inside(os.path.normpath(path), tree.proc):
            area = tree.proc
            if not os.path.isdir(tree.proc):
                if os.path.lexists(tree.proc):
                    raise line_error(aline, f"cannot create {tree.proc}: something else is there")
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
            raise line_error(lineno, f"device node /dev/{rec.node} is already present")
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

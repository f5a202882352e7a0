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
Anything else raises :class:`~sysverbs.ground.errors.RecordingError` (a ``ValueError``) naming
the record's line.

Nothing is trusted from a recording: a link (``L:``, and the ``subsystem``, class,
``/sys/dev`` and ``S:`` links made for a record) whose target is absolute, steps out of
the root on the way (``..`` past it, or through a link made earlier), or climbs with
``..`` out of a name that does not exist yet (a link made there later could send it
anywhere) is **left out**, with a :class:`~sysverbs.ground.errors.RecordingWarning` naming
the line and the link; the rest of the host is written.  So every link below the root
resolves inside it, and a crafted recording cannot make a reader of the tree read a
file outside it (``/etc/shadow`` as ``fw_ver``).  :class:`TreeEntry` links are the
caller's own and written verbatim (``/nonexistent``, ``/dev/zero``: broken hosts).
Huge files are written (they are inside the root); every reader bounds its reads
(:func:`sysverbs.ground.sysfs_read.read_sysfs_file`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Union

from .umockdev_model import Attribute, Record, Recording, class_file, proc_file
from .umockdev_text import dumps, escape, load, parse, unescape
from .umockdev_tree import TreeEntry, write_tree

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


Source = Union[str, "os.PathLike[str]", Recording]


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

"""Whether the files a device's verdict rests on could be read, and hold what the kernel
writes there: the ``unknown`` verdict of :func:`sysverbs.diagnose`.

A file the kernel always writes for a device (its ``node_guid`` and ``node_type``, each
port's ``state`` and ``link_layer``, its PCI function's ``numa_node`` and
``local_cpulist``) that exists but cannot be read (``EACCES``, ``EIO``...) or holds text
the kernel never writes (a ``numa_node`` of ``-7``, ``local_cpulist`` ``0-99999999``)
leaves the device's state unknown: it is not a port that is down nor a device that
works.  :func:`unknown_files` says which, with the path and the errno; a missing file is
not one of them (virtual devices have no PCI function; the other verdicts say what a
missing file means).

>>> import os, tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     os.makedirs(f"{tmp}/mlx5_0/ports/1")
...     for name, text in [("node_guid", "a088:c203:00d1:4e20"), ("node_type", "1: CA"),
...                        ("ports/1/link_layer", "Ethernet"),
...                        ("ports/1/state", "9: bogus")]:
...         with open(f"{tmp}/mlx5_0/{name}", "w") as f:
...             _ = f.write(text + "\\n")
...     [(os.path.relpath(u.path, tmp), u.port, u.why) for u in unknown_files(f"{tmp}/mlx5_0")]
[('mlx5_0/ports/1/state', 1, "holds '9: bogus', not a port state")]
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from typing import Callable, Optional, Union

from ..ground.enums import NodeType
from .attributes import PortState, numbered_entries, parse_guid

__all__ = ["MAX_CPUS", "MAX_NUMA_NODES", "UnknownFile", "unknown_files"]

#: The largest NUMA node count a Linux kernel can be built with (x86-64's
#: ``CONFIG_NODES_SHIFT`` is at most 10): a ``numa_node`` is -1 or below it.
MAX_NUMA_NODES = 1024
#: The largest ``CONFIG_NR_CPUS`` of x86-64 and arm64 (8192): a CPU number is below it.
MAX_CPUS = 8192

_READ_SIZE = 4096
_NUMBERED = re.compile(r"(\d{1,10}): \S.*")
_CPU_LIST = re.compile(r"(\d+)(?:-(\d+))?")
#: What the kernel's ``link_layer_show()`` writes.
_LINK_LAYERS = ("InfiniBand", "Ethernet", "Unknown")


@dataclass(frozen=True)
class UnknownFile:
    """A file that decides a verdict and could not be used: its ``path``, the ``errno``
    of the failed open or read (None when it was read but holds text the kernel never
    writes), ``why`` in words, and the port it is about (None: the device's)."""

    path: str
    errno: Optional[int]
    why: str
    port: Optional[int] = None

    def message(self, device: str) -> str:
        """The finding, with what to do."""
        fix = ("run with the privileges to read it, or fix its mode" if self.errno is not None
               else "the driver wrote it, or the tree is not a kernel's sysfs: check dmesg")
        return f"{self.path} {self.why}, so whether {device} works is unknown: {fix}."


def _read(path: bytes) -> Union[str, int, None]:
    """The text of ``path`` without its final newline, the errno when it cannot be read,
    None when it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.errno or errno.EIO
    try:
        data = os.read(fd, _READ_SIZE)
    except OSError as e:
        return e.errno or errno.EIO
    finally:
        os.close(fd)
    if data.endswith(b"\n"):
        data = data[:-1]
    return data.decode("utf-8", "replace")


def _numbered(enum: Callable[[int], object]) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        m = _NUMBERED.fullmatch(text)
        if m is None:
            return False
        try:
            enum(int(m.group(1)))
        except ValueError:
            return False
        return True
    return check


def _numa_node(text: str) -> bool:
    return re.fullmatch(r"-1|\d{1,4}", text) is not None and int(text) < MAX_NUMA_NODES


def _cpulist(text: str) -> bool:
    if text == "":
        return True
    for part in text.split(","):
        m = _CPU_LIST.fullmatch(part)
        if m is None or len(m.group(1)) > 5 or len(m.group(2) or "") > 5:
            return False
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if not lo <= hi < MAX_CPUS:
            return False
    return True


#: file -> (what it should hold, the check of its text); None: any text will do.
_DEVICE: dict[str, tuple[str, Optional[Callable[[str], bool]]]] = {
    "node_guid": ("a GUID", lambda t: parse_guid(t) is not None),
    "node_type": ("a node type", _numbered(NodeType)),
}
_PORT: dict[str, tuple[str, Optional[Callable[[str], bool]]]] = {
    "state": ("a port state", _numbered(PortState)),
    "link_layer": ("a link layer", lambda t: t in _LINK_LAYERS),
}
_PCI: dict[str, tuple[str, Optional[Callable[[str], bool]]]] = {
    "numa_node": (f"a NUMA node (-1, or 0 to {MAX_NUMA_NODES - 1})", _numa_node),
    "local_cpulist": (f"a CPU list (CPUs 0 to {MAX_CPUS - 1})", _cpulist),
}


def _check(base: bytes, files: dict[str, tuple[str, Optional[Callable[[str], bool]]]],
           port: Optional[int], out: list[UnknownFile]) -> None:
    for name, (what, ok) in files.items():
        path = base + b"/" + name.encode()
        text = _read(path)
        shown = os.fsdecode(path)
        if isinstance(text, int):
            code = errno.errorcode.get(text, str(text))
            out.append(UnknownFile(shown, text, f"cannot be read ({code}: {os.strerror(text)})",
                                   port))
        elif text is not None and ok is not None and not ok(text):
            quoted = text if len(text) <= 40 else text[:40] + "..."
            out.append(UnknownFile(shown, None, f"holds {quoted!r}, not {what}", port))


def unknown_files(ibdev_path: Union[str, bytes]) -> list[UnknownFile]:
    """The files of the device at ``ibdev_path`` (``<sysfs>/class/infiniband/NAME``) that
    exist and cannot be read or hold what the kernel never writes; ``[]`` when all can be
    used.  Never raises on the tree's content."""
    base = os.fsencode(ibdev_path)
    out: list[UnknownFile] = []
    _check(base, _DEVICE, None, out)
    for number in numbered_entries(base + b"/ports"):
        _check(base + b"/ports/%d" % number, _PORT, number, out)
    if os.path.exists(base + b"/device/numa_node") or os.path.exists(
            base + b"/device/local_cpulist"):
        _check(base + b"/device", _PCI, None, out)
    return out

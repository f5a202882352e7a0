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

from ..ground import inputs
from ..ground.records import FrozenRecord, init
from ..ground.sysfs_read import listdir, read_file

# Light on purpose: sysverbs topo (placement's read_host) checks its files with this
# module and imports neither typing, dataclasses nor the attributes' module
# (tests/test_placement.py: test_topo_imports_only_what_the_matrix_needs).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional, Union

__all__ = ["MAX_CPUS", "MAX_NUMA_NODES", "UnknownFile", "unknown_files", "unknown_pci_files"]

#: The largest NUMA node count a Linux kernel can be built with (x86-64's
#: ``CONFIG_NODES_SHIFT`` is at most 10): a ``numa_node`` is -1 or below it.
MAX_NUMA_NODES = 1024
#: The largest ``CONFIG_NR_CPUS`` of x86-64 and arm64 (8192): a CPU number is below it.
MAX_CPUS = 8192

_READ_SIZE = 4096
_NUMBERED = re.compile(r"(\d{1,10}): \S.*")
_GUID = re.compile(r"[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){3}")
#: ``enum ibv_node_type`` (CA 1 .. UNSPECIFIED 7) and ``enum ibv_port_state`` (NOP 0 ..
#: ACTIVE_DEFER 5): the numbers the kernel writes before the name.
_NODE_TYPES = range(1, 8)
_PORT_STATES = range(0, 6)
_CPU_LIST = re.compile(r"(\d+)(?:-(\d+))?")
#: What the kernel's ``link_layer_show()`` writes.
_LINK_LAYERS = ("InfiniBand", "Ethernet", "Unknown")


class UnknownFile(FrozenRecord):
    """A file that decides a verdict and could not be used: its ``path``, the ``errno``
    of the failed open or read (None when it was read but holds text the kernel never
    writes), ``why`` in words, and the port it is about (None: the device's)."""

    __slots__ = _fields = ("path", "errno", "why", "port")
    path: str
    errno: Optional[int]
    why: str
    port: Optional[int]

    def __init__(self, path: str, errno: Optional[int], why: str,
                 port: Optional[int] = None) -> None:
        init(self, path, errno, why, port)

    def message(self, device: str) -> str:
        """The finding, with what to do."""
        fix = ("run with the privileges to read it, or fix its mode" if self.errno is not None
               else "the driver wrote it, or the tree is not a kernel's sysfs: check dmesg")
        return f"{self.path} {self.why}, so whether {device} works is unknown: {fix}."


def _read(path: bytes) -> Union[str, int, None]:
    """The text of ``path`` without its final newline, the errno when it cannot be read,
    None when it does not exist."""
    data = read_file(path, _READ_SIZE)  # once per invocation (ground/sysfs_read.py)
    if isinstance(data, int):
        return None if data == errno.ENOENT else abs(data)
    if data.endswith(b"\n"):
        data = data[:-1]
    return data.decode("utf-8", "replace")


def _numbered(values: range) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        m = _NUMBERED.fullmatch(text)
        return m is not None and int(m.group(1)) in values
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
    "node_guid": ("a GUID", lambda t: _GUID.fullmatch(t) is not None),
    "node_type": ("a node type", _numbered(_NODE_TYPES)),
}
_PORT: dict[str, tuple[str, Optional[Callable[[str], bool]]]] = {
    "state": ("a port state", _numbered(_PORT_STATES)),
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
    if not inputs.isdir(base):  # no device directory: the other verdicts say so
        return out
    _check(base, _DEVICE, None, out)
    try:
        ports = sorted(int(n) for n in listdir(base + b"/ports")
                       if n.isdigit() and n.isascii() and len(n) < 10)
    except (OSError, ValueError):  # no ports directory, or one this user cannot list
        ports = []
    for number in ports:
        _check(base + b"/ports/%d" % number, _PORT, number, out)
    out.extend(unknown_pci_files(base + b"/device"))
    return out


def unknown_pci_files(pci_dir: Union[str, bytes]) -> list[UnknownFile]:
    """The same for a PCI function's directory (a GPU's, or an RDMA device's ``device``):
    its ``numa_node`` and ``local_cpulist``, the files placement rests on."""
    base = os.fsencode(pci_dir)
    out: list[UnknownFile] = []
    if inputs.exists(base + b"/numa_node") or inputs.exists(base + b"/local_cpulist"):
        _check(base, _PCI, None, out)
    return out

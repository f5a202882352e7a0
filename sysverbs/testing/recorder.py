"""``record_host``: a live host (or any sysfs tree) into a umockdev recording,
bounded in size and never following a link out of sysfs."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Optional, Union

from ..engine.api import path_arg
from ..ground.errors import RecordLimitError, UsageError
from ..ground.hostroot import HostRoot
from . import umockdev as recording
from .layout import LO_PATH
from .umockdev import Attribute, Record, Recording

__all__ = ["Limits", "RecordLimitError", "record_host"]


@dataclass(frozen=True)
class Limits:
    """Bounds of :func:`record_host`.

    A file larger than ``max_file_size`` is left out (sysfs text attributes are at
    most a page); more than ``max_files`` files, ``max_total_bytes`` bytes or
    ``max_devices`` devices raise :class:`RecordLimitError`; directories deeper than
    ``max_depth`` inside a device are not entered.
    """

    max_file_size: int = 65536
    max_files: int = 200_000
    max_total_bytes: int = 64 << 20
    max_devices: int = 20_000
    max_depth: int = 8


#: Files of a PCI device never read: config space, ROM, VPD and BARs (reads can be slow,
#: have side effects or map device memory) and the triggers (write-only anyway).  A
#: PCI-to-PCI bridge's config space is the exception: its standard header (bus numbers,
#: header type, PCIe port type) is what hwloc builds the PCI tree from, and reading it
#: has no side effects; so is the VPD of a Data Direct host's ConnectX functions, what
#: placement reads there (``_vpd_wanted``).
_PCI_SKIP = frozenset({"config", "rom", "vpd", "remove", "rescan", "reset"})
_PCI_SKIP_RE = re.compile(r"resource\d+(_wc)?")
_RDMA_CLASSES = ("infiniband", "infiniband_verbs", "infiniband_mad")
#: The NVIDIA driver's files of a GPU kept: its identity, and on Grace the NUMA node of
#: its memory (``numa_status``'s ``Node:``, what hwloc and placement read).
_NVIDIA_PROC = ("information", "numa_status")
_CX_DMA = (0x15B3, 0x2100)  # ConnectX-8 Data Direct's DMA function (see _vpd_wanted)
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class _Recorder:
    def __init__(self, root: str, dev_root: Optional[str], limits: Limits) -> None:
        self.root = root  # resolved sysfs root
        self.devices_dir = os.path.join(root, "devices")
        self.dev_root = dev_root
        self.limits = limits
        self.files = 0
        self.bytes = 0
        self._dma_host: Optional[bool] = None

    # -- bounded, non-following reads -------------------------------------------------
    def inside(self, real: str, area: Optional[str] = None) -> bool:
        area = area or self.root
        return real == area or real.startswith(area + os.sep)

    def read(self, path: str) -> Optional[bytes]:
        """The bytes of regular file ``path`` (None: skipped), counted against limits."""
        try:
            fd = os.open(path, _READ_FLAGS)
        except (OSError, ValueError):
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            chunks: list[bytes] = []
            size = 0
            while size <= self.limits.max_file_size:
                chunk = os.read(fd, self.limits.max_file_size + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError:
            return None  # EIO, EINVAL, EAGAIN...: attributes that cannot be read now
        finally:
            os.close(fd)
        if size > self.limits.max_file_size:
            return None
        self.files += 1
        self.bytes += size
        if self.files > self.limits.max_files:
            raise RecordLimitError(f"more than {self.limits.max_files} files")
        if self.bytes > self.limits.max_total_bytes:
            raise RecordLimitError(f"more than {self.limits.max_total_bytes} bytes")
        return b"".join(chunks)

    def is_device(self, path: str) -> bool:
        try:
            return stat.S_ISREG(os.lstat(os.path.join(path, "uevent")).st_mode)
        except OSError:
            return False

    def resolve(self, path: str) -> Optional[str]:
        """``path`` resolved, if it is a device directory below ``<root>/devices``."""
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            return None
        if not self.inside(real, self.devices_dir) or not os.path.isdir(real):
            return None
        return real if self.is_device(real) else None

    # -- selecting devices -----------------------------------------------------------
    def class_entries(self, cls: str) -> list[str]:
        d = os.path.join(self.root, "class", cls)
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return []
        return [os.path.join(d, n) for n in names if not n.startswith(".")]

    def rdma_devices(self) -> list[str]:
        found: list[str] = []
        seeds: list[str] = []
        for cls in _RDMA_CLASSES:
            for entry in self.class_entries(cls):
                real = self.resolve(entry)
                if real is not None:
                    seeds.append(real)
        for real in seeds:
            found.append(real)
            # the parent device (device link), its parents up to the PCI function
            parent = self.resolve(os.path.join(real, "device"))
            found += self.up_to_pci(parent)
            # net devices of the parent, and an rxe/siw's netdev
            if parent is not None:
                for entry in self._listdir(os.path.join(parent, "net")):
                    net = self.resolve(os.path.join(parent, "net", entry))
                    if net is not None:
                        found.append(net)
            value = self.read(os.path.join(real, "parent"))
            if value:
                name = value.decode("utf-8", "replace").strip()
                if name and "/" not in name and not name.startswith("."):
                    net = self.resolve(os.path.join(self.root, "class", "net", name))
                    if net is not None:
                        found.append(net)
        return found

    def up_to_pci(self, start: Optional[str]) -> list[str]:
        """``start`` and the devices above it, up to the first PCI function."""
        found: list[str] = []
        cur = start
        steps = 0
        while cur is not None and steps < 8:
            found.append(cur)
            if self._subsystem(cur) == "pci":
                break
            nxt = os.path.dirname(cur)
            while self.inside(nxt, self.devices_dir) and nxt != self.devices_dir \
                    and not self.is_device(nxt):
                nxt = os.path.dirname(nxt)
            cur = nxt if self.inside(nxt, self.devices_dir) and nxt != self.devices_dir \
                else None
            steps += 1
        return found

    def placement_devices(self) -> list[str]:
        """What placement reads (``sysverbs topo``, ``env``, ``run``): the RDMA
        devices as :meth:`rdma_devices` finds them, every PCI function (GPUs,
        bridges, NVMe drives...), every CPU and NUMA node, and the network, block
        and NVMe devices below a PCI function with their parents (``--near``)."""
        found = self.rdma_devices()
        for top in self._listdir(self.devices_dir):
            if top.startswith("pci"):
                found += [d for d in self.devices_below(os.path.join(self.devices_dir, top))
                          if self._subsystem(d) == "pci"]
        for kind in ("cpu", "node"):
            found += [d for d in self.devices_below(
                os.path.join(self.devices_dir, "system", kind), 1)
                if self._subsystem(d) == kind]
        pci = os.path.join(self.devices_dir, "pci")
        for cls in ("net", "block", "nvme"):
            for entry in self.class_entries(cls):
                real = self.resolve(entry)
                if real is not None and real.startswith(pci):
                    found += self.up_to_pci(real)
        return found

    def devices_below(self, top: str, max_depth: int = 32) -> list[str]:
        """The device directories below ``top`` (links not followed), bounded."""
        found: list[str] = []
        for dirpath, dirnames, _ in os.walk(top, followlinks=False):
            if dirpath[len(top):].count(os.sep) >= max_depth:
                dirnames[:] = []
            if dirpath != top and self.is_device(dirpath):
                found.append(dirpath)
                if len(found) > self.limits.max_devices:
                    raise RecordLimitError(f"more than {self.limits.max_devices} devices")
        return found

    def all_devices(self) -> list[str]:
        return self.devices_below(self.devices_dir, 33)

    @staticmethod
    def _listdir(path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    @staticmethod
    def _subsystem(path: str) -> Optional[str]:
        try:
            return os.path.basename(os.readlink(os.path.join(path, "subsystem")))
        except OSError:
            return None

    # -- one device ----------------------------------------------------------------
    def record(self, path: str, dev_links: Mapping[str, list[str]]) -> Optional[Record]:
        subsystem = self._subsystem(path)
        if not subsystem:
            return None  # umockdev needs a SUBSYSTEM; such a directory is no device
        sys_path = "/" + os.path.relpath(path, self.root)
        props: list[tuple[str, str]] = [("SUBSYSTEM", subsystem)]
        uevent = self.read(os.path.join(path, "uevent")) or b""
        devname: Optional[str] = None
        for line in uevent.decode("utf-8", "surrogateescape").split("\n"):
            key, sep, val = line.partition("=")
            if not sep or not key or key == "SUBSYSTEM":
                continue
            if key == "DEVNAME":
                devname = val
                val = "/dev/" + val
            props.append((key, val))
        files: list[Attribute] = []
        links: list[Attribute] = []
        self._walk(path, "", 0, files, links, pci=subsystem == "pci")
        node: Optional[str] = None
        s_links: tuple[str, ...] = ()
        if devname and self.dev_root is not None and ".." not in devname.split("/") \
                and not devname.startswith("/"):
            if os.path.lexists(os.path.join(self.dev_root, devname)):
                node = devname
                s_links = tuple(dev_links.get(devname, ()))
        return Record(sys_path, tuple(props), tuple(files + links), node, None, s_links)

    def _walk(self, base: str, prefix: str, depth: int, files: list[Attribute],
              links: list[Attribute], *, pci: bool = False) -> None:
        try:
            entries = sorted(os.scandir(os.path.join(base, prefix) if prefix else base),
                             key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            name = prefix + entry.name
            if "=" in entry.name or "\n" in entry.name or entry.name.startswith("."):
                continue
            if entry.is_symlink():
                if not prefix and entry.name == "subsystem":
                    continue
                try:
                    target = os.readlink(entry.path)
                except OSError:
                    continue
                real = os.path.normpath(os.path.join(os.path.dirname(entry.path), target))
                if os.path.isabs(target) or not self.inside(real):
                    continue  # never record (or follow) a link out of sysfs
                links.append(Attribute(name, b"", target))
            elif entry.is_dir(follow_symlinks=False):
                if depth >= self.limits.max_depth or self.is_device(entry.path) and \
                        os.path.lexists(os.path.join(entry.path, "subsystem")):
                    continue  # a child device: recorded on its own, if at all
                # a directory with a uevent but no subsystem is no device umockdev can
                # hold (the kernel's cpuN/cache/indexN): its files are the parent's
                self._walk(base, name + "/", depth + 1, files, links)
            elif entry.is_file(follow_symlinks=False):
                if not prefix and (entry.name == "uevent" or pci and (
                        entry.name in _PCI_SKIP or _PCI_SKIP_RE.fullmatch(entry.name))
                        and not (entry.name == "config" and self._is_bridge(base))
                        and not (entry.name == "vpd" and self._vpd_wanted(base))):
                    continue  # uevent: recorded as E: lines
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue
                if not mode & 0o444:
                    continue  # write-only
                value = self.read(entry.path)
                if value is not None:
                    files.append(Attribute(name, value, binary=name in ("config", "vpd")))

    def _ids(self, path: str) -> tuple[int, int, int]:
        """(vendor, device, class) of a PCI function; 0 where unreadable."""
        out = []
        for name in ("vendor", "device", "class"):
            value = self.read(os.path.join(path, name))
            try:
                out.append(int(value or b"0", 16))
            except ValueError:
                out.append(0)
        return out[0], out[1], out[2]

    def _vpd_wanted(self, path: str) -> bool:
        """Whether a function's ``vpd`` is what placement reads: on a host with a
        ConnectX-8 Data Direct DMA function (15b3:2100), the VPD of each DMA function
        and ConnectX network function ties the PFs to their DMA function (the one
        sysfs fact that does; root only)."""
        if self._dma_host is None:
            devices = os.path.join(self.root, "bus", "pci", "devices")
            self._dma_host = any(self._ids(os.path.join(devices, n))[:2] == _CX_DMA
                                 for n in self._listdir(devices))
        vendor, device, pci_class = self._ids(path)
        return self._dma_host and vendor == _CX_DMA[0] and (
            device == _CX_DMA[1] or pci_class >> 16 == 0x02)

    def _is_bridge(self, path: str) -> bool:
        value = self.read(os.path.join(path, "class"))
        return value is not None and value.strip().lower().startswith(b"0x0604")

    def parent_files(self, device: str) -> list[Attribute]:
        """The regular files of the directory above ``device`` (``/sys/devices/system/
        cpu/online`` for ``cpu0``) as ``../`` attributes of it."""
        out: list[Attribute] = []
        parent = os.path.dirname(device)
        for name in self._listdir(parent):
            path = os.path.join(parent, name)
            if name == "uevent" or name.startswith(".") or "=" in name or "\n" in name \
                    or os.path.islink(path) or not os.path.isfile(path):
                continue
            value = self.read(path)
            if value is not None:
                out.append(Attribute("../" + name, value))
        return out

    def proc_files(self, proc_root: str, records: Sequence[Record]
                   ) -> list[tuple[int, Attribute]]:
        """The NVIDIA driver's ``gpus/<bdf>/`` files below ``proc_root`` (:data:`_NVIDIA_PROC`), as
        (index of the GPU's record, :func:`recording.proc_file` attribute)."""
        out: list[tuple[int, Attribute]] = []
        gpus = os.path.join(proc_root, "driver", "nvidia", "gpus")
        real_proc = os.path.realpath(proc_root)
        by_name = {r.name: i for i, r in enumerate(records) if r.subsystem == "pci"}
        for bdf, name in ((b, n) for b in self._listdir(gpus) for n in _NVIDIA_PROC):
            path = os.path.join(gpus, bdf, name)
            if bdf not in by_name or os.path.islink(path) or not os.path.isfile(path) \
                    or not self.inside(os.path.realpath(path), real_proc):
                continue  # never follow a link out of the proc root
            value = self.read(path)
            if value is not None:
                index = by_name[bdf]
                target = f"/proc/driver/nvidia/gpus/{bdf}/{name}"
                out.append((index, recording.proc_file(records[index].path, target, value)))
        return out

    def dev_links(self, top: Iterable[str]) -> dict[str, list[str]]:
        """Symlinks below ``dev_root/<top>`` (three levels), by the node they name."""
        out: dict[str, list[str]] = {}
        if self.dev_root is None:
            return out
        dev_real = os.path.realpath(self.dev_root)
        for t in sorted(set(top)):
            start = os.path.join(self.dev_root, t)
            if not os.path.isdir(start) or os.path.islink(start):
                continue
            for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
                if dirpath[len(start):].count(os.sep) >= 3:
                    dirnames[:] = []
                for n in sorted(dirnames + filenames):
                    p = os.path.join(dirpath, n)
                    if not os.path.islink(p):
                        continue
                    real = os.path.realpath(p)
                    if not self.inside(real, dev_real):
                        continue
                    out.setdefault(os.path.relpath(real, dev_real), []).append(
                        os.path.relpath(p, self.dev_root))
        return out

    def class_files(self, classes: Iterable[str]) -> list[tuple[str, bytes]]:
        out: list[tuple[str, bytes]] = []
        for cls in classes:
            d = os.path.join(self.root, "class", cls)
            for n in self._listdir(d):
                p = os.path.join(d, n)
                if os.path.islink(p) or not os.path.isfile(p) or n.startswith("."):
                    continue
                value = self.read(p)
                if value is not None:
                    out.append((f"/class/{cls}/{n}", value))
        return out


def record_host(
    sysfs_root: Union[str, os.PathLike[str]] = "/sys",
    *,
    dev_root: Union[str, os.PathLike[str], None] = None,
    devices: str = "rdma",
    limits: Limits = Limits(),
    proc_root: Union[str, os.PathLike[str], None] = None,
) -> Recording:
    """Record a host's sysfs (and which ``/dev`` nodes exist) as a :class:`Recording`.

    * ``sysfs_root``: ``/sys``, or any tree laid out like it (a materialized host);
    * ``dev_root``: the ``/dev`` of that host (default: ``/dev`` for ``/sys``, else
      ``dev`` beside the sysfs root); device nodes are noted (``N:``), never read;
      their ``infiniband/by-*`` links become ``S:`` lines;
    * ``devices``: ``"rdma"`` (default): the ``infiniband``, ``infiniband_verbs`` and
      ``infiniband_mad`` devices, their parent devices up to the PCI function, the
      network interfaces of those parents and of rxe/siw devices, and the loopback
      interface (which carries the class files, as in the bundled fixtures);
      ``"placement"``: those, and what placement reads (``sysverbs topo``, ``env``,
      ``run``): every PCI function (GPUs, bridges with their config space' header,
      drives), every CPU (topology, caches) and NUMA node (CPUs, memory, distances),
      the network, block and NVMe devices below a PCI function;
      ``"all"``: every device below ``/sys/devices`` (for small or fake trees);
    * ``limits``: see :class:`Limits`;
    * ``proc_root``: the ``/proc`` of that host (default: ``/proc`` for ``/sys``, else
      ``proc`` beside the sysfs root), whose NVIDIA driver files
      ``driver/nvidia/gpus/<bdf>/information`` and ``numa_status`` of recorded PCI
      functions are kept
      (:func:`recording.proc_file`).

    With ``devices="placement"`` or ``"all"``, the files beside ``cpu0`` and ``node0``
    (``/sys/devices/system/cpu/online``...) are kept as their ``../`` attributes; a
    PCI bridge's config space is recorded (see ``_PCI_SKIP``): what hwloc needs of
    the host.

    Nothing outside the sysfs root is read or recorded: class entries and ``device``
    links that resolve outside ``<sysfs_root>/devices`` are ignored, links are
    recorded as links (and dropped when they point outside sysfs), and PCI config
    space (but a bridge's), ROMs, VPD (but a Data Direct host's ConnectX functions',
    which placement reads) and BARs are never read.  Unreadable attributes are left
    out.
    """
    if devices not in ("rdma", "placement", "all"):
        raise UsageError("devices must be 'rdma', 'placement' or 'all'")
    root = os.path.realpath(os.fsdecode(path_arg(sysfs_root, "sysfs_root")))
    if not os.path.isdir(os.path.join(root, "devices")):
        raise FileNotFoundError(f"{root}/devices: not a sysfs tree")
    if dev_root is None:
        guess = HostRoot.resolve(root).beside("dev")  # /dev for /sys
        dev = guess if os.path.isdir(guess) else None
    else:
        dev = os.fsdecode(path_arg(dev_root, "dev_root"))
    rec = _Recorder(root, dev, limits)
    chosen = {"rdma": rec.rdma_devices, "placement": rec.placement_devices,
              "all": rec.all_devices}[devices]()
    lo = os.path.join(root, LO_PATH.lstrip("/"))
    ordered: list[str] = []
    seen: set[str] = set()
    carrier_first = [lo] if rec.is_device(lo) and not os.path.islink(lo) else []
    for p in carrier_first + sorted(chosen):
        if p not in seen:
            seen.add(p)
            ordered.append(p)
    if len(ordered) > limits.max_devices:
        raise RecordLimitError(f"more than {limits.max_devices} devices")
    links = rec.dev_links(["infiniband"])
    records = [r for r in (rec.record(p, links) for p in ordered) if r is not None]
    if devices != "rdma":
        for i, r in enumerate(records):
            if (r.subsystem, r.name) in (("cpu", "cpu0"), ("node", "node0")):
                above = rec.parent_files(os.path.join(root, r.path.lstrip("/")))
                records[i] = replace(r, attributes=tuple(above) + r.attributes)
    if proc_root is None:
        guess = HostRoot.resolve(root).proc_path  # HostRoot's rule: /proc for /sys
        proc = guess if os.path.isdir(guess) else None
    else:
        proc = os.fsdecode(path_arg(proc_root, "proc_root"))
    if proc is not None:
        for i, attr in rec.proc_files(proc, records):
            records[i] = replace(records[i], attributes=records[i].attributes + (attr,))
    classes = _RDMA_CLASSES if devices == "rdma" else rec._listdir(os.path.join(root, "class"))
    class_files = rec.class_files(classes)
    if class_files:
        if not records:
            records.append(Record(LO_PATH, (("SUBSYSTEM", "net"),)))
        carrier = records[0]
        extra = tuple(recording.class_file(carrier.path, target, value)
                      for target, value in class_files)
        records[0] = replace(carrier, attributes=carrier.attributes + extra)
    return Recording(tuple(records))

"""Reading the host: the NUMA nodes, GPUs and RDMA devices beside the PCI tree that
:class:`~sysverbs.placement._pci.PciReader` walks, and :func:`read_host`, which gathers
them in a :class:`~sysverbs.placement.Topology`.  Read as the PCI tree is: nothing outside
the given roots, links resolved by hand inside them."""

from __future__ import annotations

import os
import re

from ..devices.readable import unknown_files, unknown_pci_files
from ..ground.hostroot import HostRoot
from ..ground.sysfs_read import read_sysfs_file
from ..ground.text import parse_cpulist, rate_fields
from ._names import bdf_key, is_bdf, is_host_bridge, natural_key
from ._pci import PciReader, is_dir, read_text, to_int
from ._topology import Gpu, Nic, Port, Topology

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional, Union

    from ._pci import PciDevice

    PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

__all__ = ["AMD", "GPU_CLASSES", "NVIDIA", "read_host"]

_NODE = re.compile(r"node([0-9]{1,5})")
_UVERBS = re.compile(rb"uverbs([0-9]{1,5})")

NVIDIA, AMD = 0x10DE, 0x1002
#: PCI class codes (class >> 8) that make a GPU / accelerator, per vendor.
GPU_CLASSES: Mapping[int, frozenset[int]] = {
    NVIDIA: frozenset({0x0300, 0x0302, 0x0380, 0x1200}),
    AMD: frozenset({0x0300, 0x0302, 0x0380, 0x1200}),
}


# --------------------------------------------------------------------------- reading


class _Reader(PciReader):
    """The PCI tree (:class:`PciReader`) and, beside it, the NUMA nodes, GPUs and RDMA
    devices; ``proc``: the ``/proc`` root of the GPUs' information."""

    def __init__(self, sysfs: bytes, proc: bytes) -> None:
        super().__init__(sysfs)
        self.proc = proc.rstrip(b"/") or b"/"

    # ---------------------------------------------------------------- NUMA
    def numa_nodes(self) -> dict[int, frozenset[int]]:
        base = self.sys + b"/devices/system/node"
        nodes: dict[int, frozenset[int]] = {}
        for entry in self.fs.listdir(base):
            m = _NODE.fullmatch(os.fsdecode(entry))
            if m is None:
                continue
            cpus = parse_cpulist(read_text(base + b"/" + entry + b"/cpulist"))
            if cpus is None:
                self.note(f"devices/system/node/{os.fsdecode(entry)}/cpulist unreadable")
                cpus = frozenset()
            nodes[int(m.group(1))] = cpus
        return dict(sorted(nodes.items()))

    # ---------------------------------------------------------------- GPUs
    def gpus(self) -> tuple[Gpu, ...]:
        found: list[PciDevice] = []
        parents = {d.ancestors[-1] for d in self.pci.values() if d.ancestors}
        for dev in self.pci.values():
            if dev.address in parents:
                continue  # a bridge (it has PCI functions below it)
            vendor = dev.vendor
            classes = GPU_CLASSES.get(vendor) if vendor is not None else None
            cls = dev.pci_class if classes else None
            if classes and cls is not None and cls >> 8 in classes:
                found.append(dev)
        found.sort(key=lambda d: bdf_key(d.address))
        out: list[Gpu] = []
        for i, dev in enumerate(found):
            uuid = minor = model = None
            if dev.vendor == NVIDIA:
                info = read_text(self.proc + b"/driver/nvidia/gpus/" + dev.address.encode()
                             + b"/information", 8192)
                if info is not None:
                    fields = {}
                    for line in info.splitlines():
                        k, sep, v = line.partition(":")
                        if sep:
                            fields[k.strip()] = v.strip()
                    uuid = fields.get("GPU UUID") or None
                    minor = to_int(fields.get("Device Minor"))
                    model = fields.get("Model") or None
            out.append(Gpu(i, dev.address, "nvidia" if dev.vendor == NVIDIA else "amd", dev,
                           uuid, minor, model))
        return tuple(out)

    # ---------------------------------------------------------------- RDMA devices
    def _netdev_pci(self, ifname: str) -> tuple[Optional[str], str]:
        link = self.sys + b"/class/net/" + os.fsencode(ifname)
        target = self.fs.resolve(link)
        if target is None:
            return None, f"netdev {ifname} not found in class/net"
        parts = self.components(target)
        if parts is None or parts[:1] == ["virtual"]:
            return None, f"netdev {ifname} is virtual (no PCI device)"
        address = self.pci_at(os.path.dirname(os.path.dirname(target)))
        if address is None:
            return None, f"netdev {ifname} has no PCI ancestor"
        return address, f"via netdev {ifname}"

    def _ports(self, ibdev: bytes, parent_dir: Optional[bytes], parent_net: list[bytes]
               ) -> tuple[Port, ...]:
        out: list[Port] = []
        base = ibdev + b"/ports"
        numbers = sorted(int(n) for n in self.fs.listdir(base) if n.isdigit())
        for n in numbers:
            p = base + b"/%d" % n
            state = read_text(p + b"/state", 64)
            ll = read_text(p + b"/link_layer", 64)
            rate_text = read_text(p + b"/rate", 128)
            rate = rate_fields(rate_text)
            # The netdev of GID 0 (else 1): the port's default GIDs, whose netdev is
            # the port's.  An InfiniBand port has none (the kernel answers EINVAL).
            netdevs: list[str] = []
            if ll != "InfiniBand":
                ndevs = p + b"/gid_attrs/ndevs/"
                v = read_text(ndevs + b"0", 64) or read_text(ndevs + b"1", 64)
                if v:
                    netdevs.append(v)
            if not netdevs and parent_net:
                if len(numbers) == 1:
                    netdevs = [os.fsdecode(x) for x in parent_net]
                else:
                    for x in parent_net:
                        dp = to_int(read_text(parent_dir + b"/net/" + x + b"/dev_port", 32)
                                  if parent_dir else None)
                        if dp == n - 1:
                            netdevs.append(os.fsdecode(x))
            out.append(Port(
                port=n,
                state=state.partition(":")[2].strip() if state and ":" in state else state,
                link_layer=ll,
                rate_gbps=rate[0] if rate is not None else None,
                rate=rate_text,
                netdevs=tuple(netdevs),
            ))
        return tuple(out)

    def _bond_slave(self, netdevs: tuple[str, ...], parent_dir: Optional[bytes],
                    parent_net: list[bytes]) -> bool:
        """A netdev of the device (of a port, or of its PCI function) is enslaved to a
        bond: it has a ``master`` link (the kernel makes one for any upper device) and
        ``bonding_slave/``, or that master has ``bonding/``."""
        bases = [parent_dir + b"/net/" + n for n in parent_net] if parent_dir else []
        own = {os.fsdecode(n) for n in parent_net} if parent_dir else set()
        for name in netdevs:
            if name not in own:
                base = self.fs.resolve(self.sys + b"/class/net/" + os.fsencode(name))
                if base is not None:
                    bases.append(base)
        for base in bases:
            master = self.fs.readlink(base + b"/master")
            if master is None:
                continue
            if is_dir(base + b"/bonding_slave"):
                return True
            upper = self.fs.resolve(self.sys + b"/class/net/" + os.path.basename(master))
            if upper is not None and is_dir(upper + b"/bonding"):
                return True
        return False

    def uverbs_of(self) -> dict[str, int]:
        base = self.sys + b"/class/infiniband_verbs"
        found: dict[str, int] = {}
        for entry in self.fs.listdir(base):
            m = _UVERBS.fullmatch(entry)
            if m is None:
                continue
            ibdev = read_sysfs_file(base + b"/" + entry + b"/ibdev", 64)
            if ibdev:
                name = ibdev.split(b"\0", 1)[0].decode("utf-8", "replace")
                n = int(m.group(1))
                if name not in found or n < found[name]:
                    found[name] = n
        return found

    def nics(self) -> tuple[Nic, ...]:
        cls = self.sys + b"/class/infiniband"
        out: list[Nic] = []
        uverbs = self.uverbs_of()
        for entry in self.fs.listdir(cls):
            name = os.fsdecode(entry)
            ibdev = self.fs.resolve(cls + b"/" + entry)
            if ibdev is None:
                if is_dir(cls + b"/" + entry):
                    ibdev = cls + b"/" + entry
                else:
                    self.note(f"class/infiniband/{name}: dangling link")
                    continue
            dev_link = ibdev + b"/device"
            parent_dir = self.fs.resolve(dev_link, self.real_dirs)
            address: Optional[str] = None
            parent: Optional[str] = None
            kind = "unplaced"
            placement = ""
            if parent_dir is not None:
                parent = os.fsdecode(os.path.basename(parent_dir))
                address = self.pci_at(parent_dir)
                if address is None:
                    placement = f"its device ({parent}) has no PCI ancestor"
                elif is_bdf(parent):
                    dev = self.pci[address]
                    kind = "vf" if dev.is_vf else "pf"
                    if "bond" in name:
                        kind = "bond"
                    placement = f"at PCI function {address}"
                else:
                    kind = "sf" if ".sf." in parent else "aux"
                    placement = f"{parent} on PCI function {address}"
            elif os.path.lexists(dev_link):
                placement = ("its device link is dangling (or leaves the root, or leads to "
                             "no directory)")
            else:
                ifname = read_text(ibdev + b"/parent", 64)
                if ifname:
                    address, placement = self._netdev_pci(ifname)
                    parent = ifname
                    kind = "soft" if address is not None else "unplaced"
                else:
                    placement = "no device link and no parent netdev"
            if address is None:
                self.note(f"{name}: unplaced: {placement}")
            net_dir = parent_dir if kind in ("pf", "vf", "bond") else None
            parent_net = self.fs.listdir(net_dir + b"/net") if net_dir is not None else []
            ports = self._ports(ibdev, net_dir, parent_net)
            nd = tuple(n for p in ports for n in p.netdevs)
            guid = read_text(ibdev + b"/node_guid", 64)
            slave = kind != "bond" and self._bond_slave(
                nd, parent_dir if kind in ("pf", "vf") else None, parent_net)
            out.append(Nic(name, address, kind, placement, parent, ports, slave, guid,
                           uverbs.get(name)))
        out.sort(key=lambda n: natural_key(n.name))
        return tuple(out)


def _absolute(path: bytes) -> bytes:
    return os.path.abspath(path or b"/")  # HostRoot keeps "/" as libibverbs does: ""


def read_host(
    sysfs_path: Optional[PathArg] = None,
    proc_path: Optional[PathArg] = None,
    dev_dir: Optional[PathArg] = None,
    *,
    recorded: bool = False,
) -> Topology:
    """Read the host's PCI tree, NUMA nodes, GPUs and RDMA devices (see :class:`Topology`).

    ``sysfs_path`` stands for ``/sys`` (default ``$SYSFS_PATH``, else ``/sys``),
    ``proc_path`` for ``/proc`` (default: the ``proc`` beside the sysfs root, ``/proc``
    for ``/sys``; only ``driver/nvidia/gpus/*/information`` is read there),
    ``dev_dir`` for ``/dev/infiniband`` (kept for the usable filter of
    :func:`assign`; ``recorded``: the tree is a recording, such as a bundled fixture,
    whose device nodes are stand-ins).  Nothing outside these roots is read.  Errors in
    the tree never raise: they are in ``problems``.
    """
    return read_host_at(HostRoot.resolve(sysfs_path, dev_dir, proc_path, recorded=recorded))


def read_host_at(root: HostRoot) -> Topology:
    """:func:`read_host` of the machine ``root`` names (its sysfs, proc and dev; its
    ``recorded``), for callers that hold one."""
    if not isinstance(root, HostRoot):
        from ..ground.errors import WrongTypeError

        raise WrongTypeError(f"root must be a HostRoot, not {type(root).__name__}")
    sysfs, proc, dev = _absolute(root.sysfs), _absolute(root.proc), _absolute(root.dev)
    r = _Reader(sysfs, proc)
    r.read_pci()
    numa = r.numa_nodes()
    nics = r.nics()
    for nic in nics:  # the verdict of diagnose(): a file that decides it is unknown
        for u in unknown_files(sysfs + b"/class/infiniband/" + os.fsencode(nic.name)):
            r.note(f"unknown: {u.path} {u.why}")
    gpus = r.gpus()
    for gpu in gpus:
        for u in unknown_pci_files(sysfs + b"/bus/pci/devices/" + os.fsencode(gpu.address)):
            r.note(f"unknown: {u.path} {u.why}")
    # Four-digit domains (all but VMD's): the addresses, of one width, sort as text.
    order = (sorted(r.pci) if all(len(a) == 12 for a in r.pci)
             else sorted(r.pci, key=bdf_key))
    pci = {a: r.pci[a] for a in order}
    return Topology(
        sysfs_path=os.fsdecode(sysfs),
        proc_path=os.fsdecode(proc),
        dev_dir=os.fsdecode(dev),
        pci=pci,
        host_bridges=tuple(sorted(r.host_bridges, key=lambda h: bdf_key(
            h[3:] + ":00.0" if is_host_bridge(h) else h))),
        numa_nodes=numa,
        gpus=gpus,
        nics=nics,
        problems=tuple(r.problems),
        recorded=root.recorded,
    )

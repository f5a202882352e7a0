"""Plain-file PCI trees for the placement tests: sysfs as the kernel lays it out
(devices/pciDDDD:BB/..., bus/pci/devices links, class/infiniband and class/net links,
devices/system/node), written in a tmp dir.  Paths are given below ``devices/``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Optional


def _rel(from_dir: Path, target: Path) -> str:
    return os.path.relpath(target, from_dir)


class PciTree:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.sys = root / "sys"
        self.proc = root / "proc"
        self.dev = root / "dev"
        (self.sys / "devices").mkdir(parents=True, exist_ok=True)
        (self.sys / "bus/pci/devices").mkdir(parents=True, exist_ok=True)
        (self.sys / "class/infiniband").mkdir(parents=True, exist_ok=True)
        (self.sys / "class/net").mkdir(parents=True, exist_ok=True)
        self.dev.mkdir(exist_ok=True)

    def _write(self, path: Path, value: object) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n")

    def node(self, n: int, cpus: str) -> PciTree:
        self._write(self.sys / f"devices/system/node/node{n}/cpulist", cpus)
        return self

    def pci(self, path: str, *, cls: int = 0x060400, vendor: int = 0x8086,
            device: int = 0x1234, sub: tuple[int, int] = (0, 0), numa: Optional[int] = 0,
            cpus: Optional[str] = None, driver: Optional[str] = None, listed: bool = True,
            physfn: Optional[str] = None) -> str:
        d = self.sys / "devices" / path
        d.mkdir(parents=True, exist_ok=True)
        self._write(d / "class", f"0x{cls:06x}")
        self._write(d / "vendor", f"0x{vendor:04x}")
        self._write(d / "device", f"0x{device:04x}")
        self._write(d / "subsystem_vendor", f"0x{sub[0]:04x}")
        self._write(d / "subsystem_device", f"0x{sub[1]:04x}")
        if numa is not None:
            self._write(d / "numa_node", numa)
        if cpus is not None:
            self._write(d / "local_cpulist", cpus)
        if driver is not None:
            drv = self.sys / "bus/pci/drivers" / driver
            drv.mkdir(parents=True, exist_ok=True)
            os.symlink(_rel(d, drv), d / "driver")
        if physfn is not None:
            os.symlink(_rel(d, self.sys / "devices" / physfn), d / "physfn")
        bdf = path.rsplit("/", 1)[-1]
        uevent = [f"DRIVER={driver}"] if driver else []
        uevent += [f"PCI_CLASS={cls:X}", f"PCI_ID={vendor:04X}:{device:04X}",
                   f"PCI_SUBSYS_ID={sub[0]:04X}:{sub[1]:04X}", f"PCI_SLOT_NAME={bdf}"]
        self._write(d / "uevent", "\n".join(uevent))
        if listed:
            link = self.sys / "bus/pci/devices" / bdf
            if not link.is_symlink():
                os.symlink(_rel(link.parent, d), link)
        return path

    def bridges(self, *paths: str, numa: Optional[int] = 0, **kw: object) -> None:
        for p in paths:
            self.pci(p, numa=numa, **kw)  # type: ignore[arg-type]

    def gpu(self, path: str, *, numa: Optional[int] = 0, cpus: Optional[str] = None,
            vendor: int = 0x10DE, cls: int = 0x030200, device: int = 0x20B0,
            uuid: Optional[str] = None, minor: Optional[int] = None) -> str:
        self.pci(path, cls=cls, vendor=vendor, device=device, numa=numa, cpus=cpus,
                 driver="nvidia" if vendor == 0x10DE else "amdgpu")
        bdf = path.rsplit("/", 1)[-1]
        if uuid is not None:
            self._write(self.proc / "driver/nvidia/gpus" / bdf / "information",
                        f"Model: \t\t NVIDIA A100-SXM4-80GB\nGPU UUID: \t {uuid}\n"
                        f"Bus Location: \t {bdf}\nDevice Minor: \t {minor}\n")
        return path

    def rdma(self, name: str, parent: Optional[str], *,
             ports: Sequence[tuple[str, str, str]] = (("4: ACTIVE", "InfiniBand",
                                                       "200 Gb/sec (4X HDR)"),),
             netdev: Optional[str] = None, soft_parent: Optional[str] = None,
             pci_function: bool = True, cls: int = 0x020700, numa: Optional[int] = 0,
             cpus: Optional[str] = None, physfn: Optional[str] = None,
             uverbs: Optional[int] = -1) -> Path:
        """An RDMA device hanging on ``parent`` (a PCI path, or an aux/SF path below
        one, written as a plain device directory); ``parent=None``: a virtual (rxe)
        device whose ``parent`` attribute names ``soft_parent``.  ``uverbs``: the N of
        its uverbsN (-1: the next free one, None: no uverbs device)."""
        if parent is None:
            ib = self.sys / "devices/virtual/infiniband" / name
        else:
            if pci_function:
                self.pci(parent, cls=cls, vendor=0x15B3, device=0x101B, numa=numa,
                         cpus=cpus, driver="mlx5_core", physfn=physfn)
            else:
                (self.sys / "devices" / parent).mkdir(parents=True, exist_ok=True)
            ib = self.sys / "devices" / parent / "infiniband" / name
        ib.mkdir(parents=True, exist_ok=True)
        if parent is not None:
            os.symlink(_rel(ib, self.sys / "devices" / parent), ib / "device")
        if soft_parent is not None:
            self._write(ib / "parent", soft_parent)
        self._write(ib / "node_guid", "0c42:a103:0000:0001")
        for i, (state, ll, rate) in enumerate(ports, 1):
            p = ib / "ports" / str(i)
            self._write(p / "state", state)
            self._write(p / "link_layer", ll)
            self._write(p / "rate", rate)
        os.symlink(_rel(self.sys / "class/infiniband", ib), self.sys / "class/infiniband" / name)
        if uverbs is not None:
            verbs = self.sys / "class/infiniband_verbs"
            verbs.mkdir(parents=True, exist_ok=True)
            if uverbs < 0:
                uverbs = len(list(verbs.iterdir()))
            self._write(ib.parent.parent / "infiniband_verbs" / f"uverbs{uverbs}" / "ibdev",
                        name)
            os.symlink(_rel(verbs, ib.parent.parent / "infiniband_verbs" / f"uverbs{uverbs}"),
                       verbs / f"uverbs{uverbs}")
        if netdev is not None and parent is not None:
            self.netdev(netdev, parent)
            if ports and ports[0][1] == "Ethernet":
                self._write(ib / "ports/1/gid_attrs/ndevs/0", netdev)
        return ib

    def netdev(self, ifname: str, parent: Optional[str]) -> Path:
        base = self.sys / "devices" / (parent if parent is not None else "virtual") / "net"
        nd = base / ifname
        nd.mkdir(parents=True, exist_ok=True)
        self._write(nd / "ifindex", 2)
        self._write(nd / "operstate", "up")
        link = self.sys / "class/net" / ifname
        if not link.is_symlink():
            os.symlink(_rel(link.parent, nd), link)
        return nd


def oci_a100(t: PciTree, *, filler: bool = False, vfs: int = 0) -> PciTree:
    """OCI bare-metal A100 (8 NUMA nodes, 8 GPUs, 18 mlx5): per GPU pair a two-level
    switch with the GPUs behind one sub-switch and two dual-port NICs behind two
    others; mlx5_0 and mlx5_13 on host bridges of NUMA nodes without a GPU.  NIC names
    and uverbs numbers as on the real host (``tests/data/oci-bm-a100-8gpu-18nic.txt``).

    ``filler``: also what such a host has beside (host-bridge functions on every host
    bridge, an NVSwitch beside each NIC card, NVMe on four more root complexes: about
    200 PCI functions, for the benchmark); ``vfs``: that many SR-IOV VFs of mlx5_13,
    each an RDMA device (``mlx5_18``...)."""
    for n in range(8):
        t.node(n, f"{16 * n}-{16 * n + 15}")
    groups = {3: (0x00, 5), 1: (0x40, 1), 7: (0x80, 14), 5: (0xB0, 9)}  # numa: (bus, nic)

    def host_bridge(hb: int, numa: int) -> None:
        for f in range(10 if filler else 0):  # host-bridge dummy functions, IOMMU, PSP ...
            t.pci(f"pci0000:{hb:02x}/0000:{hb:02x}:{f + 0x10:02x}.0", cls=0x060000,
                  vendor=0x1022, numa=numa)

    for numa, (hb, first_nic) in sorted(groups.items(), key=lambda kv: kv[1][0]):
        host_bridge(hb, numa)
        cpus = f"{16 * numa}-{16 * numa + 15}"
        rp = f"pci0000:{hb:02x}/0000:{hb:02x}:01.1"
        usp = f"{rp}/0000:{hb + 1:02x}:00.0"
        t.bridges(rp, usp, numa=numa)
        for j in range(3):
            dsp = f"{usp}/0000:{hb + 2:02x}:{4 * j:02x}.0"
            sub = f"{dsp}/0000:{hb + 3 + 4 * j:02x}:00.0"
            t.bridges(dsp, sub, numa=numa)
            for e in range(2 if j == 0 or filler else 1):
                sdsp = f"{sub}/0000:{hb + 4 + 4 * j:02x}:{8 * e:02x}.0"
                t.pci(sdsp, numa=numa)
                end = f"{sdsp}/0000:{hb + 5 + 4 * j + e:02x}:00"
                if j == 0:
                    t.gpu(end + ".0", numa=numa, cpus=cpus)
                elif e == 1:
                    t.pci(end + ".0", cls=0x068000, vendor=0x10DE, numa=numa)  # NVSwitch
                else:
                    for fn in (0, 1):
                        k = first_nic + 2 * (j - 1) + fn
                        t.rdma(f"mlx5_{k}", f"{end}.{fn}", numa=numa, cpus=cpus, uverbs=k)
    for k, (hb, numa) in ((0, (0x30, 2)), (13, (0xE0, 6))):
        host_bridge(hb, numa)
        t.pci(f"pci0000:{hb:02x}/0000:{hb:02x}:03.1", numa=numa)
        t.rdma(f"mlx5_{k}", f"pci0000:{hb:02x}/0000:{hb:02x}:03.1/0000:{hb + 1:02x}:00.0",
               numa=numa, cpus=f"{16 * numa}-{16 * numa + 15}", uverbs=k)
    if filler:
        for hb, numa in ((0x20, 0), (0x60, 2), (0xA0, 4), (0xD0, 6)):  # NVMe
            host_bridge(hb, numa)
            for d in range(4):
                drp = f"pci0000:{hb:02x}/0000:{hb:02x}:0{d + 2}.1"
                t.pci(drp, numa=numa)
                t.pci(f"{drp}/0000:{hb + 2 + d:02x}:00.0", cls=0x010802, vendor=0x144D,
                      numa=numa)
    srp = "pci0000:e0/0000:e0:03.1"
    for v in range(vfs):
        dev, fn = divmod(v + 2, 8)
        bus = 0xE1 + dev // 32
        t.rdma(f"mlx5_{18 + v}", f"{srp}/0000:{bus:02x}:{dev % 32:02x}.{fn}", numa=6,
               physfn=f"{srp}/0000:e1:00.0", uverbs=18 + v)
    return t


_TOKEN = __import__("re").compile(
    r"\[(?P<dom>[0-9a-f]{4}):(?P<rbus>[0-9a-f]{2})\]"
    r"|(?P<df>[0-9a-f]{2}\.[0-7])(?:-\[(?P<sec>[0-9a-f]{2})(?:-[0-9a-f]{2})?\])?")


def parse_lspci_tv(text: str) -> list[tuple[list[str], str]]:
    """``lspci -tv`` -> [(path components below devices/, description)], in order.

    Each device's bus comes from the column its ``DD.F`` starts at: a root
    ``[DDDD:BB]`` or a bridge ``DD.F-[SS]`` opens its bus at the column of the next
    entry on its line, and later lines continue it at that column."""
    out: list[tuple[list[str], str]] = []
    open_cols: dict[int, tuple[str, str, list[str]]] = {}  # col -> (domain, bus, path)
    for line in text.splitlines():
        head, _, desc = line.partition("  ")
        # the tree part ends where the description starts (two spaces after DD.F)
        m_end = __import__("re").search(r"[0-9a-f]{2}\.[0-7]  ", line)
        head = line[: m_end.end() - 2] if m_end else line
        desc = line[m_end.end():].strip() if m_end else ""
        pending: Optional[tuple[str, str, list[str]]] = None
        for m in _TOKEN.finditer(head):
            if m.group("dom"):
                pending = (m.group("dom"), m.group("rbus"),
                           [f"pci{m.group('dom')}:{m.group('rbus')}"])
                continue
            col = m.start("df")
            if pending is not None:
                open_cols[col] = pending
                pending = None
            if col not in open_cols:
                continue
            dom, bus, parent = open_cols[col]
            bdf = f"{dom}:{bus}:{m.group('df')}"
            path = [*parent, bdf]
            out.append((path, desc if m.end() >= len(head.rstrip("-")) - 1 else ""))
            if m.group("sec"):
                pending = (dom, m.group("sec"), path)
    return out

"""PCI trees for the placement tests, through the testing kit's one host model:
each call adds device records (:func:`sysverbs.testing.layout.device`: PCI
functions, ib, uverbs and net devices, NUMA nodes) and writes them at once with
:func:`sysverbs.testing.materialize`, so the tree is sysfs as the kernel lays it out
(devices/pciDDDD:BB/..., bus/pci/devices links, class/infiniband and class/net links,
devices/system/node) and a test may change it on disk between calls.  What no device
record holds (a function that ``bus/pci`` does not list, a plain parent directory,
the driver directories) is a :class:`~sysverbs.testing.umockdev.TreeEntry`.  Paths are given
below ``devices/``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Optional

from sysverbs.testing import layout, materialize
from sysverbs.testing.umockdev import Attribute, Record, Recording, TreeEntry, proc_file


def _v(value: object) -> bytes:
    return f"{value}\n".encode()


class PciTree:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.sys = root / "sys"
        self.proc = root / "proc"
        self.dev = root / "dev"
        self._write((), [TreeEntry(p, directory=True) for p in (
            "sys/devices", "sys/bus/pci/devices", "sys/class/infiniband", "sys/class/net")])

    def _write(self, records: Iterable[Record], entries: Iterable[TreeEntry] = ()) -> None:
        materialize(Recording(tuple(records)), self.root, entries=entries)

    def node(self, n: int, cpus: str) -> PciTree:
        self._write([layout.device(f"/devices/system/node/node{n}", "node",
                                   attrs=[("cpulist", _v(cpus))])])
        return self

    def _pci(self, path: str, *, cls: int = 0x060400, vendor: int = 0x8086,
             device: int = 0x1234, sub: tuple[int, int] = (0, 0), numa: Optional[int] = 0,
             cpus: Optional[str] = None, driver: Optional[str] = None,
             physfn: Optional[str] = None) -> tuple[Record, list[TreeEntry]]:
        """A PCI function's record and the driver's directory."""
        dpath = f"/devices/{path}"
        bdf = path.rsplit("/", 1)[-1]
        props = [("DRIVER", driver)] if driver else []
        props += [("PCI_CLASS", f"{cls:X}"), ("PCI_ID", f"{vendor:04X}:{device:04X}"),
                  ("PCI_SUBSYS_ID", f"{sub[0]:04X}:{sub[1]:04X}"), ("PCI_SLOT_NAME", bdf)]
        attrs = [("class", _v(f"0x{cls:06x}")), ("vendor", _v(f"0x{vendor:04x}")),
                 ("device", _v(f"0x{device:04x}")),
                 ("subsystem_vendor", _v(f"0x{sub[0]:04x}")),
                 ("subsystem_device", _v(f"0x{sub[1]:04x}")),
                 ("numa_node", None if numa is None else _v(numa)),
                 ("local_cpulist", None if cpus is None else _v(cpus))]
        links = []
        entries = []
        if driver is not None:
            links.append(("driver", layout.kernel_link(dpath, f"/bus/pci/drivers/{driver}")))
            entries.append(TreeEntry(f"sys/bus/pci/drivers/{driver}", directory=True))
        if physfn is not None:
            links.append(("physfn", layout.kernel_link(dpath, f"/devices/{physfn}")))
        return layout.device(dpath, "pci", props, attrs, links), entries

    def pci(self, path: str, *, cls: int = 0x060400, vendor: int = 0x8086,
            device: int = 0x1234, sub: tuple[int, int] = (0, 0), numa: Optional[int] = 0,
            cpus: Optional[str] = None, driver: Optional[str] = None, listed: bool = True,
            physfn: Optional[str] = None) -> str:
        """A PCI function at ``devices/<path>``; ``listed=False``: one that
        ``bus/pci/devices`` does not list (its files and links as tree entries, no
        device record)."""
        rec, entries = self._pci(path, cls=cls, vendor=vendor, device=device, sub=sub,
                                 numa=numa, cpus=cpus, driver=driver, physfn=physfn)
        if listed:
            self._write([rec], entries)
        else:
            self._write((), [*entries, *_as_entries(rec)])
        return path

    def bridges(self, *paths: str, numa: Optional[int] = 0, **kw: object) -> None:
        for p in paths:
            self.pci(p, numa=numa, **kw)  # type: ignore[arg-type]

    def gpu(self, path: str, *, numa: Optional[int] = 0, cpus: Optional[str] = None,
            vendor: int = 0x10DE, cls: int = 0x030200, device: int = 0x20B0,
            uuid: Optional[str] = None, minor: Optional[int] = None) -> str:
        rec, entries = self._pci(path, cls=cls, vendor=vendor, device=device, numa=numa,
                                 cpus=cpus, driver="nvidia" if vendor == 0x10DE else "amdgpu")
        bdf = path.rsplit("/", 1)[-1]
        if uuid is not None:
            info = (f"Model: \t\t NVIDIA A100-SXM4-80GB\nGPU UUID: \t {uuid}\n"
                    f"Bus Location: \t {bdf}\nDevice Minor: \t {minor}\n\n")
            rec = _plus(rec, proc_file(rec.path, f"/proc/driver/nvidia/gpus/{bdf}/information",
                                       info))
        self._write([rec], entries)
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
        records: list[Record] = []
        entries: list[TreeEntry] = []
        if parent is None:
            base = "/devices/virtual"
        else:
            base = f"/devices/{parent}"
            if pci_function:
                rec, entries = self._pci(parent, cls=cls, vendor=0x15B3, device=0x101B,
                                         numa=numa, cpus=cpus, driver="mlx5_core",
                                         physfn=physfn)
                records.append(rec)
            else:
                entries.append(TreeEntry(f"sys{base}", directory=True))
        ib_path = f"{base}/infiniband/{name}"
        files: list[tuple[str, Optional[bytes]]] = []
        if soft_parent is not None:
            files.append(("parent", _v(soft_parent)))
        files.append(("node_guid", _v("0c42:a103:0000:0001")))
        for i, (state, ll, rate) in enumerate(ports, 1):
            files += [(f"ports/{i}/state", _v(state)), (f"ports/{i}/link_layer", _v(ll)),
                      (f"ports/{i}/rate", _v(rate))]
        if netdev is not None and parent is not None and ports and ports[0][1] == "Ethernet":
            files.append(("ports/1/gid_attrs/ndevs/0", _v(netdev)))
        links = [] if parent is None else [("device", layout.kernel_link(ib_path, base))]
        records.append(layout.device(ib_path, "infiniband", attrs=files, links=links))
        if uverbs is not None:
            if uverbs < 0:
                verbs = self.sys / "class/infiniband_verbs"
                uverbs = len(list(verbs.iterdir())) if verbs.is_dir() else 0
            records.append(layout.device(f"{base}/infiniband_verbs/uverbs{uverbs}",
                                         "infiniband_verbs", attrs=[("ibdev", _v(name))]))
        if netdev is not None and parent is not None:
            records.append(self._netdev(netdev, parent))
        self._write(records, entries)
        return self.sys / ib_path[1:]

    def _netdev(self, ifname: str, parent: Optional[str]) -> Record:
        return layout.device(f"/devices/{parent if parent is not None else 'virtual'}"
                             f"/net/{ifname}", "net",
                             attrs=[("ifindex", _v(2)), ("operstate", _v("up"))])

    def netdev(self, ifname: str, parent: Optional[str]) -> Path:
        rec = self._netdev(ifname, parent)
        self._write([rec])
        return self.sys / rec.path[1:]


def _plus(rec: Record, attr: Attribute) -> Record:
    return Record(rec.path, rec.properties, (*rec.attributes, attr), rec.node,
                  rec.node_contents, rec.links)


def _as_entries(rec: Record) -> list[TreeEntry]:
    """A record's files and links as plain tree entries (a device no bus lists)."""
    base = "sys" + rec.path
    out = [TreeEntry(f"{base}/{a.name}", a.value, a.link) for a in rec.attributes]
    uevent = "".join(f"{k}={v}\n" for k, v in rec.properties if k != "SUBSYSTEM")
    return [*out, TreeEntry(f"{base}/uevent", uevent.encode())]


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

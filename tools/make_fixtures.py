#!/usr/bin/env python3
"""Write sysverbs' bundled device fixtures (``sysverbs/testing/fixtures/*.umockdev``).

Each fixture is a plain umockdev recording (see ``sysverbs/recording.py``) laid out the
way the Linux kernel lays out sysfs: PCI functions under ``/devices/pciDDDD:BB/...``,
``infiniband/<ibdev>`` and ``infiniband_verbs/uverbsN`` (and ``infiniband_mad/umadN``)
below the device's parent, ``net/<ifname>`` beside them, software devices (rxe) under
``/devices/virtual``.  The fixtures are checked in; this script is how they were made::

    python3 tools/make_fixtures.py            # rewrite them all
    python3 tools/make_fixtures.py --check    # fail if a checked-in file differs

Where the values come from (the public sources are named in ``tests/data/PROVENANCE.md``,
where the captures the tests read are kept):

* udev-dgx-a100 / udev-dgx-b200: DEVPATHs, PCI ids, subsystem ids, classes, modaliases,
  drivers, uverbs numbers and majors/minors, net interface names and MACs, auxiliary
  device names of DGX A100 and DGX B200 systems (``dgx-demo``, ``mlx5-cx7``,
  ``bluefield3``, ``dgx-a100``).  Neither capture has an infiniband_mad record (ib_umad
  was not loaded), so these fixtures have no umad/issm devices.  udev records carry no
  attribute values: firmware strings, GUIDs of IB-mode ports and port state there are
  made up in the real format.
* lshca-connectx: attribute values (fw_ver, hca_type, board_id, sys_image_guid, GIDs,
  LIDs, SM LIDs, port state and rate, NUMA node, driver and physfn links, lspci ids)
  of ConnectX-5/6 hosts, among them one with 40 SR-IOV VFs (``mlx5-cx6``,
  ``mlx5-sriov``).
* issue excerpts: EFA names and uverbs numbering on p5 (``efa``), the renamed irdma
  device of an E810 (``irdma``), Azure HBv2 VFs (``azure-vf``), the XDR SMI device and
  umad/issm layout (``smi``), mlx4 VF values (``mlx4``), hfi1 port files (``hfi1``).
* kernel-lab (a real 6.1 kernel with rdma_rxe): the whole rxe layout (``rxe``).
* kernel sources: per-driver uverbs ABI versions (``abi_version`` of uverbsN), node
  type strings, device names and which sysfs attributes each driver adds.

Values not found in any capture are realistic stand-ins in the kernel's format; the
comments say which.  Every fixture carries the class files libibverbs reads
(``/sys/class/infiniband_verbs/abi_version`` = 6, and ``/sys/class/infiniband_mad/
abi_version`` = 5 where umad devices exist) as attributes of the loopback interface's
record, which is the first record of every file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysverbs.recording import Recording, dumps, parse  # noqa: E402
from sysverbs.testing import HostBuilder  # noqa: E402
from sysverbs.testing.layout import (  # noqa: E402
    ETH_CLASS,
    IB_CLASS,
    NODE_TYPES,
    Port,
    ib_device,
    loopback,
    mad_device,
    net_attrs,
    net_device,
    port_files,
)
from sysverbs.testing.layout import guid_text as guid_fmt  # noqa: E402

OUT_DIR = ROOT / "sysverbs" / "testing" / "fixtures"

# Per-driver uverbs ABI (drivers' ``.uverbs_abi_ver``, include/uapi/rdma/*-abi.h).
ABI = {
    "mlx5": 1,  # MLX5_IB_UVERBS_ABI_VERSION
    "mlx4": 4,  # MLX4_IB_UVERBS_ABI_VERSION
    "rxe": 2,  # RXE_UVERBS_ABI_VERSION (seen as 2 in the kernel-lab VM)
    "efa": 1,  # EFA_UVERBS_ABI_VERSION
    "irdma": 5,  # IRDMA_ABI_VER
    "bnxt_re": 1,  # BNXT_RE_ABI_VERSION
    "hns": 1,  # HNS_ROCE_ABI_VERSION
    "erdma": 1,  # ERDMA_ABI_VERSION
    "qedr": 8,  # QEDR_ABI_VERSION
    "cxgb4": 3,  # C4IW_UVERBS_ABI_VERSION
    "hfi1": 2,  # RVT_UVERBS_ABI_VERSION (rdmavt)
    "qib": 2,  # RVT_UVERBS_ABI_VERSION (rdmavt)
    "ocrdma": 2,  # OCRDMA_ABI_VERSION
    "mthca": 1,  # MTHCA_UVERBS_ABI_VERSION
    "vmw_pvrdma": 3,  # PVRDMA_UVERBS_ABI_VERSION
    "siw": 1,  # SIW_ABI_VERSION
    "mana": 1,  # MANA_IB_UVERBS_ABI_VERSION
    "ionic": 1,  # IONIC_ABI_VERSION
    "usnic": 4,  # USNIC_UVERBS_ABI_VERSION
}


def t(value: object) -> str:
    """A sysfs show() value: the text plus the newline the kernel adds."""
    return f"{value}\n"


# ------------------------------------------------------------------ value helpers


def mac_bytes(mac: str) -> list[int]:
    return [int(x, 16) for x in mac.split(":")]


def mlx_guid(mac: str) -> str:
    """Mellanox GUID of a port with this MAC: OUI, 03:00, NIC part (0c42:a103:00a5:1c30)."""
    b = mac_bytes(mac)
    return guid_fmt(int.from_bytes(bytes(b[:3] + [0x03, 0x00] + b[3:]), "big"))


def eui64(mac: str) -> str:
    """Modified EUI-64 of a MAC, as the kernel derives RoCE GIDs and rxe GUIDs."""
    b = mac_bytes(mac)
    return guid_fmt(int.from_bytes(bytes([b[0] ^ 2] + b[1:3] + [0xFF, 0xFE] + b[3:]), "big"))


def gid(prefix: str, guid: str) -> str:
    return f"{prefix}:{guid}"


LINK_LOCAL = "fe80:0000:0000:0000"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def ipv4_gid(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


# --------------------------------------------------------------------- builder


def ib_port(guid: str, lid: str, sm_lid: str, rate: str, *, state: str = "4: ACTIVE",
            phys: str = "5: LinkUp", prefix: str = LINK_LOCAL,
            cap_mask: str = "0xa659e848") -> Port:
    """An InfiniBand port: GID 0 is the subnet prefix plus the port GUID."""
    return Port("InfiniBand", state, phys, rate, lid, sm_lid, "0", "0", cap_mask,
                gids=(gid(prefix, guid),), gid_types=("IB/RoCE v1",), gid_ndevs=(),
                pkeys=("0xffff",))


def roce_port(mac: str, netdev: str, rate: str, *, state: str = "4: ACTIVE",
              phys: str = "5: LinkUp", ipv4: str | None = None,
              cap_mask: str = "0x04010000", v1: bool = True) -> Port:
    """A RoCE port: link-local GIDs from the MAC (v1 and v2), then the IPv4 ones."""
    ll = gid(LINK_LOCAL, eui64(mac))
    gids: list[str] = []
    types: list[str] = []
    if v1:
        gids.append(ll)
        types.append("IB/RoCE v1")
    gids.append(ll)
    types.append("RoCE v2")
    if ipv4 is not None:
        if v1:
            gids.append(ipv4_gid(ipv4))
            types.append("IB/RoCE v1")
        gids.append(ipv4_gid(ipv4))
        types.append("RoCE v2")
    return Port("Ethernet", state, phys, rate, "0x0", "0x0", "0", "0", cap_mask,
                gids=tuple(gids), gid_types=tuple(types),
                gid_ndevs=tuple(netdev for _ in gids), pkeys=("0xffff",))


def iwarp_port(mac: str, netdev: str, rate: str, *, state: str = "4: ACTIVE",
               phys: str = "5: LinkUp", cap_mask: str = "0x00000000") -> Port:
    """An iWARP port: GID 0 is the MAC padded with zeros."""
    b = mac_bytes(mac)
    g = f"{b[0]:02x}{b[1]:02x}:{b[2]:02x}{b[3]:02x}:{b[4]:02x}{b[5]:02x}:0000:0000:0000:0000:0000"
    return Port("Ethernet", state, phys, rate, "0x0", "0x0", "0", "0", cap_mask,
                gids=(g,), gid_types=(), gid_ndevs=(), pkeys=())


def encoded(attrs: Iterable[tuple[str, str]]) -> list[tuple[str, bytes | None]]:
    """Attribute values (:func:`t` texts) as the testing kit takes them (bytes)."""
    return [(n, v.encode()) for n, v in attrs]


@dataclass
class Fixture:
    """One fixture: a :class:`HostBuilder` and the records added to it, in the order
    they will be written.

    Every record is laid out by the testing kit (:mod:`sysverbs.testing.layout`, which
    HostBuilder uses too); what is here is the fixtures' data: multi-port ib devices
    with all their port files, umad/issm devices, net and loopback records with every
    file a captured host shows.
    """

    name: str
    umad: bool = False
    host: HostBuilder = field(default_factory=HostBuilder)

    def add(self, path: str, subsystem: str, props: Iterable[tuple[str, str]] = (),
            attrs: Iterable[tuple[str, str]] = (), links: Iterable[tuple[str, str]] = (),
            node: str | None = None, dev_links: Iterable[str] = ()) -> str:
        return self.host.add_device(path, subsystem, props, encoded(attrs), links, node, dev_links)

    # -- hardware -------------------------------------------------------------

    def pci(self, path: str, vendor: int, device: int, sub_vendor: int, sub_device: int,
            pci_class: int, driver: str | None, *, numa: int = 0, revision: int = 0,
            extra: Iterable[tuple[str, str]] = (), links: Iterable[tuple[str, str]] = ()
            ) -> str:
        """A PCI function, with the attributes and uevent keys the kernel gives it."""
        return self.host.add_pci_function(path, vendor, device, sub_vendor, sub_device,
                                          pci_class, driver, numa_node=numa,
                                          revision=revision, extra=encoded(extra), links=links)

    def aux(self, parent: str, name: str, driver: str) -> str:
        """An auxiliary-bus device (mlx5_core.rdma.0, ice.roce.1, bnxt_en.rdma.0...)."""
        return self.host.add_aux_device(parent, name, driver)

    def net(self, parent: str | None, ifname: str, ifindex: int, address: str, *,
            arp_type: int = 1, mtu: int = 1500, operstate: str = "up", dev_port: int = 0,
            broadcast: str | None = None) -> str:
        """A network interface (``net/<ifname>``) with all its files."""
        rec = net_device(parent, ifname, ifindex,
                         net_attrs(address, ifindex, full=True, arp_type=arp_type, mtu=mtu,
                                   operstate=operstate, dev_port=dev_port,
                                   broadcast=broadcast))
        self.host.add_record(rec)
        return rec.path

    # -- RDMA ----------------------------------------------------------------

    def ibdev(self, parent: str | None, name: str, node_type: int, node_guid: str,
              sys_image_guid: str, fw_ver: str, ports: Sequence[Port], *,
              node_desc: str | None = None, extra: Iterable[tuple[str, str]] = (),
              first_port: int = 1) -> str:
        """An ib_device (``infiniband/<name>``) with its ports."""
        attrs = sorted([
            ("fw_ver", t(fw_ver)),
            ("node_desc", t(name if node_desc is None else node_desc)),
            ("node_guid", t(node_guid)),
            ("node_type", t(NODE_TYPES[node_type])),
            ("sys_image_guid", t(sys_image_guid)),
            *extra,
        ])
        files = encoded(attrs)
        for i, port in enumerate(ports):
            files += port_files(first_port + i, port)
        rec = ib_device(parent, name, files)
        self.host.add_record(rec)
        return rec.path

    def uverbs(self, parent: str | None, index: int, ibdev: str, abi: int) -> str:
        """``infiniband_verbs/uverbsN`` with its /dev node and rdma-core's udev links."""
        last = parent.rsplit("/", 1)[1] if parent else ""
        pci = last if parent and "/pci" in parent and last.count(":") == 2 else None
        return self.host.add_uverbs(parent, index, ibdev, abi, pci=pci)

    def mad(self, parent: str | None, kind: str, index: int, ibdev: str, port: int) -> str:
        """``infiniband_mad/umadN`` or ``issmN`` (ib_umad) with its /dev node."""
        self.umad = True
        rec = mad_device(parent, kind, index, ibdev, port)
        self.host.add_record(rec)
        return rec.path

    def rdma(self, parent: str | None, name: str, uverbs: int | None, abi: int,
             node_type: int, node_guid: str, sys_image_guid: str, fw_ver: str,
             ports: Sequence[Port], *, umad: Sequence[tuple[int, int]] = (),
             issm: Sequence[tuple[int, int]] = (), node_desc: str | None = None,
             extra: Iterable[tuple[str, str]] = ()) -> str:
        """An ib device with its uverbs device and (index, port) umad/issm devices."""
        path = self.ibdev(parent, name, node_type, node_guid, sys_image_guid, fw_ver, ports,
                          node_desc=node_desc, extra=extra)
        if uverbs is not None:
            self.uverbs(parent, uverbs, name, abi)
        for index, port in umad:
            self.mad(parent, "umad", index, name, port)
        for index, port in issm:
            self.mad(parent, "issm", index, name, port)
        return path

    def recording(self) -> Recording:
        lo = loopback(verbs_abi=6, mad_abi=5 if self.umad else None, full=True)
        return Recording((lo, *self.host.build(loopback=False).records))


# ------------------------------------------------------------ device families

MLX = 0x15B3


def mlx5_function(fx: Fixture, path: str, device: int, sub_device: int, *, index: int,
                  uverbs: int, fw_ver: str, hca_type: str, board_id: str, node_guid: str,
                  sys_image_guid: str, port: Port, numa: int = 0, netdev: str | None = None,
                  ifindex: int = 0, mac: str | None = None, ib_name: str | None = None,
                  aux: bool = True, mad: tuple[int, int] | None = None,
                  pci_class: int | None = None, extra_pci: Iterable[tuple[str, str]] = (),
                  pci_links: Iterable[tuple[str, str]] = (), driver: str = "mlx5_core",
                  revision: int = 0) -> None:
    """One mlx5 PCI function: PCI device, auxiliary devices, ib device, uverbs, umad, net.

    ``mad`` is (umad index, issm index) for an IB port; ``None`` for no umad devices.
    """
    eth = port.link_layer == "Ethernet"
    if pci_class is None:
        pci_class = ETH_CLASS if eth else IB_CLASS
    fx.pci(path, MLX, device, MLX, sub_device, pci_class, driver, numa=numa,
           revision=revision, extra=extra_pci, links=pci_links)
    if aux:
        if eth:
            fx.aux(path, f"mlx5_core.eth.{index}", "mlx5_core.eth")
        fx.aux(path, f"mlx5_core.rdma.{index}", "mlx5_ib.rdma")
    name = ib_name or f"mlx5_{index}"
    extra = [("board_id", t(board_id)), ("hca_type", t(hca_type)), ("hw_rev", t("0x0"))]
    umad = [(mad[0], 1)] if mad else []
    issm = [(mad[1], 1)] if mad else []
    fx.rdma(path, name, uverbs, ABI["mlx5"], 1, node_guid, sys_image_guid, fw_ver, [port],
            umad=umad, issm=issm, node_desc=f"{hostname(fx)} {name}", extra=extra)
    if netdev:
        if eth:
            assert mac is not None
            fx.net(path, netdev, ifindex, mac)
        else:
            fx.net(path, netdev, ifindex, ipoib_addr(ifindex, node_guid), arp_type=32,
                   mtu=2044)


HOSTNAMES = {
    "mlx5-cx6": "jazz03",
    "mlx5-sriov": "cloud-hv01",
    "dgx-demo": "dgx-b200",
    "dgx-a100": "dgx-a100",
    "bluefield3": "dgx-b200",
    "mlx5-cx7": "dgx-b200",
    "smi": "xdr-vm",
    "azure-vf": "hbv2vm2",
    "mlx5-sf": "bf3-arm",
    "gpu-dgx-a100": "dgx-a100",
    "gpu-dgx-b200": "dgx-b200",
    "gpu-hgx-h100": "hgx-h100",
    "gpu-mi300x": "mi300x",
    "gpu-pcie-2socket": "esc8000a",
    "gpu-cloud-vm": "h200-vm",
}


def hostname(fx: Fixture) -> str:
    return HOSTNAMES.get(fx.name, "localhost")


def ipoib_addr(qpn_seed: int, port_guid: str) -> str:
    """A 20-byte IPoIB hardware address: flags+QPN, fe80 prefix, port GUID."""
    g = port_guid.replace(":", "")
    qpn = 0x000010C9 + 0x80 * qpn_seed
    raw = f"{qpn:08x}fe80000000000000{g}"
    return ":".join(raw[i : i + 2] for i in range(0, 40, 2))


# ------------------------------------------------------------------- fixtures


def fx_mlx5_cx6() -> Fixture:
    """jazz03 (lshca IB recording, 2022): ConnectX-6 MCX654106A-HCAT socket-direct card
    (two PCIe x16 halves, 04:00.x and 82:00.x) plus a ConnectX-5 with one IB and one
    Ethernet port.  All values from the recording; IPoIB QPNs of the down ports and
    the PCI root ports above the functions are stand-ins."""
    fx = Fixture("mlx5-cx6")
    cx6 = dict(device=0x101B, sub_device=0x0012, fw_ver="20.33.1048", hca_type="MT4123",
               board_id="MT_0000000228", sys_image_guid="b859:9f03:0052:9344")
    hdr, sdr_down = "200 Gb/sec (4X HDR)", "10 Gb/sec (4X SDR)"
    down = dict(state="1: DOWN", phys="3: Disabled")
    mlx5_function(fx, "/devices/pci0000:00/0000:00:02.0/0000:04:00.0", index=0, uverbs=0,
                  node_guid="b859:9f03:0052:9348",
                  port=ib_port("b859:9f03:0052:9348", "0x25", "0x26", hdr),
                  netdev="ib0", ifindex=7, mad=(0, 0), **cx6)
    mlx5_function(fx, "/devices/pci0000:00/0000:00:02.0/0000:04:00.1", index=1, uverbs=1,
                  node_guid="b859:9f03:0052:9349",
                  port=ib_port("b859:9f03:0052:9349", "0xffff", "0x0", sdr_down, **down),
                  netdev="ib1", ifindex=8, mad=(1, 1), **cx6)
    cx5 = dict(device=0x1017, sub_device=0x0001, fw_ver="16.33.1048", hca_type="MT4119",
               board_id="MT_0000000008", sys_image_guid="ec0d:9a03:00c0:4624", numa=1)
    mlx5_function(fx, "/devices/pci0000:80/0000:80:02.0/0000:81:00.0", index=2, uverbs=2,
                  node_guid="ec0d:9a03:00c0:4624",
                  port=ib_port("ec0d:9a03:00c0:4624", "0x280", "0x800", "100 Gb/sec (4X EDR)",
                               prefix="fe80:0000:0000:00c5"),
                  netdev="ib2", ifindex=9, mad=(2, 2), **cx5)
    mlx5_function(fx, "/devices/pci0000:80/0000:80:02.0/0000:81:00.1", index=3, uverbs=3,
                  node_guid="ec0d:9a03:00c0:4625",
                  port=roce_port("ec:0d:9a:c0:46:25", "p2p2", "100 Gb/sec (4X EDR)",
                                 ipv4="2.1.3.3"),
                  netdev="p2p2", ifindex=6, mac="ec:0d:9a:c0:46:25", mad=(3, 3),
                  **cx5)
    mlx5_function(fx, "/devices/pci0000:80/0000:80:03.0/0000:82:00.0", index=4, uverbs=4,
                  node_guid="b859:9f03:0052:9344",
                  port=ib_port("b859:9f03:0052:9344", "0xc", "0x26", hdr),
                  netdev="ib3", ifindex=10, mad=(4, 4), numa=1, **cx6)
    mlx5_function(fx, "/devices/pci0000:80/0000:80:03.0/0000:82:00.1", index=5, uverbs=5,
                  node_guid="b859:9f03:0052:9345",
                  port=ib_port("b859:9f03:0052:9345", "0xffff", "0x0", sdr_down, **down),
                  netdev="ib4", ifindex=11, mad=(5, 5), numa=1, **cx6)
    return fx


# DGX B200 (udev capture): (path, device, sub_device, class, ibdev index, netdev, MAC).
B200_MLX5 = [
    ("/devices/pci0000:00/0000:00:0d.0/0000:05:00.0", 0x1021, 0x0087, IB_CLASS, 0, None, None),
    ("/devices/pci0000:00/0000:00:0d.0/0000:05:00.1", 0x1021, 0x0087, IB_CLASS, 1, None, None),
    ("/devices/pci0000:00/0000:00:0d.0/0000:05:00.2", 0x1021, 0x0087, IB_CLASS, 2, None, None),
    ("/devices/pci0000:00/0000:00:0d.0/0000:05:00.3", 0x1021, 0x0087, IB_CLASS, 3, None, None),
    ("/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0", 0x1021, 0x0050,
     IB_CLASS, 4, None, None),
    ("/devices/pci0000:24/0000:24:01.0/0000:25:00.0/0000:26:00.0/0000:27:00.0/0000:28:00.0/"
     "0000:29:00.0", 0xA2DC, 0x0008, IB_CLASS, 5, None, None),
    ("/devices/pci0000:24/0000:24:01.0/0000:25:00.0/0000:26:00.0/0000:27:00.0/0000:28:00.0/"
     "0000:29:00.1", 0xA2DC, 0x0008, ETH_CLASS, 6, "enp41s0f1np1", "e0:9d:73:04:35:97"),
    ("/devices/pci0000:3d/0000:3d:01.0/0000:3e:00.0/0000:3f:00.0/0000:40:00.0", 0x1021, 0x0050,
     IB_CLASS, 7, None, None),
    ("/devices/pci0000:4c/0000:4c:01.0/0000:4d:00.0/0000:4e:00.0/0000:4f:00.0", 0x1021, 0x0050,
     IB_CLASS, 8, None, None),
    ("/devices/pci0000:5b/0000:5b:01.0/0000:5c:00.0/0000:5d:00.0/0000:5e:00.0", 0x1021, 0x0050,
     IB_CLASS, 9, None, None),
    ("/devices/pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:00.0/0000:9a:00.0", 0x1021, 0x0050,
     IB_CLASS, 10, None, None),
    ("/devices/pci0000:a5/0000:a5:01.0/0000:a6:00.0/0000:a7:00.0/0000:a8:00.0/0000:a9:00.0/"
     "0000:aa:00.0", 0xA2DC, 0x0008, IB_CLASS, 11, None, None),
    ("/devices/pci0000:a5/0000:a5:01.0/0000:a6:00.0/0000:a7:00.0/0000:a8:00.0/0000:a9:00.0/"
     "0000:aa:00.1", 0xA2DC, 0x0008, ETH_CLASS, 12, "enp170s0f1np1", "e0:9d:73:37:9d:ff"),
    ("/devices/pci0000:bd/0000:bd:01.0/0000:be:00.0/0000:bf:00.0/0000:c0:00.0", 0x1021, 0x0050,
     IB_CLASS, 13, None, None),
    ("/devices/pci0000:cb/0000:cb:01.0/0000:cc:00.0/0000:cd:00.0/0000:ce:00.0", 0x1021, 0x0050,
     IB_CLASS, 14, None, None),
    ("/devices/pci0000:d9/0000:d9:01.0/0000:da:00.0/0000:db:00.0/0000:dc:00.0", 0x1021, 0x0050,
     IB_CLASS, 15, None, None),
]
# Stand-ins (no attribute values in a udev capture): NVIDIA-OUI GUIDs, current firmware.
CX7 = dict(fw_ver="28.43.1014", hca_type="MT4129", board_id="MT_0000000838")
BF3 = dict(fw_ver="32.43.1014", hca_type="MT41692", board_id="MT_0000001069")
NDR = "400 Gb/sec (4X NDR)"


def b200_function(fx: Fixture, entry: tuple[str, int, int, int, int, str | None, str | None],
                  *, ifindex: int, mad: bool) -> None:
    path, device, sub, cls, index, netdev, mac = entry
    numa = 0 if int(path.split("/")[2].split(":")[1], 16) < 0x80 else 1
    values = BF3 if device == 0xA2DC else CX7
    if cls == ETH_CLASS:
        assert mac is not None
        guid = mlx_guid(mac)
        port = roce_port(mac, netdev or "", "200 Gb/sec (4X HDR)")
        mads = (index, index)
    else:
        guid = guid_fmt(0xA088C20300F1E000 + 0x100 * index)
        port = ib_port(guid, hex(0x11 + index), "0x1", NDR)
        mads = (index, index)
    sysimg = guid
    if device == 0xA2DC and index in (6, 12):  # second port of a BlueField-3
        sysimg = guid_fmt(int(guid.replace(":", ""), 16) & ~0xFF)
    mlx5_function(fx, path, device, sub, index=index, uverbs=index, node_guid=guid,
                  sys_image_guid=sysimg, port=port, numa=numa, netdev=netdev,
                  ifindex=ifindex, mac=mac, pci_class=cls, mad=mads if mad else None,
                  **values)


def fx_mlx5_cx7() -> Fixture:
    """The four-function ConnectX-7 card (15b3:1021 sub 0087) of the DGX B200 capture
    at 0000:05:00.0-3 plus two single-port ConnectX-7 (sub 0050), NDR InfiniBand."""
    fx = Fixture("mlx5-cx7")
    for entry in B200_MLX5[:5] + B200_MLX5[7:8]:
        b200_function(fx, entry, ifindex=0, mad=False)
    return fx


def fx_bluefield3() -> Fixture:
    """The two BlueField-3 (15b3:a2dc) of the DGX B200 capture in NIC mode: per card
    one IB function and one Ethernet function (mlx5_5/6 and mlx5_11/12, uverbs5/6 and
    11/12: the numbering has gaps, as on the real host), each with its mlx5_core
    auxiliary devices (rdma, and eth for the Ethernet functions)."""
    fx = Fixture("bluefield3")
    ifindex = 4
    for entry in (B200_MLX5[5], B200_MLX5[6], B200_MLX5[11], B200_MLX5[12]):
        b200_function(fx, entry, ifindex=ifindex, mad=False)
        if entry[5]:
            ifindex += 1
    return fx


def fx_mlx5_sriov() -> Fixture:
    """cloud-hv01 (lshca recording, 2021): ConnectX-5 MCX556A-ECAT, two IB PFs
    (5e:00.0/.1, mlx5_0/1) with 20 SR-IOV VFs each (mlx5_2..41, MT4120), all values from
    the recording (GIDs, LIDs, firmware, physfn links).  uverbs32..41 use the dynamic
    char major ib_uverbs allocates beyond 32 devices (number is a stand-in)."""
    fx = Fixture("mlx5-sriov")
    fw, board = "16.27.1016", "MT_0000000008"
    sysimg = "248a:0703:00a2:8ca4"
    bus = "/devices/pci0000:5d/0000:5d:00.0"
    pf_lids = ["0x2f", "0x30"]
    # VF LIDs in mlx5_2..41 order, from the recording.
    vf_lids = [0x46, 0x45, 0x44, 0x43, 0x42, 0x41, 0x3F, 0x40, 0x3E, 0x3D, 0x3C, 0x3B, 0x3A,
               0x39, 0x38, 0x36, 0x37, 0x35, 0x34, 0x33, 0x5A, 0x59, 0x58, 0x57, 0x56, 0x55,
               0x54, 0x52, 0x53, 0x51, 0x50, 0x4F, 0x4E, 0x4D, 0x4C, 0x4B, 0x4A, 0x48, 0x49,
               0x47]
    vf_slots = [f"0000:5e:{(2 + i) // 8:02x}.{(2 + i) % 8}" for i in range(40)]
    edr = "100 Gb/sec (4X EDR)"
    for pf in range(2):
        pf_slot = f"0000:5e:00.{pf}"
        guid = f"248a:0703:00a2:8ca{4 + pf}"
        vfs = vf_slots[20 * pf : 20 * pf + 20]
        links = [(f"virtfn{i}", f"../{slot}") for i, slot in enumerate(vfs)]
        extra = [("sriov_numvfs", t(20)), ("sriov_totalvfs", t(20)),
                 ("sriov_offset", t(2 if pf == 0 else 21)), ("sriov_stride", t(1)),
                 ("sriov_vf_device", t("1018"))]
        mlx5_function(fx, f"{bus}/{pf_slot}", 0x1017, 0x0001, index=pf, uverbs=pf,
                      fw_ver=fw, hca_type="MT4119", board_id=board, node_guid=guid,
                      sys_image_guid=sysimg,
                      port=ib_port(guid, pf_lids[pf], "0x2", edr, cap_mask="0xa659e848"),
                      netdev=f"ib{pf}", ifindex=4 + pf, mad=(pf, pf), extra_pci=extra,
                      pci_links=links)
    for i, slot in enumerate(vf_slots):
        pf = i // 20
        k = i % 20
        index = 2 + i
        guid = f"{0x10 + k:02x}8a:0703:00a2:8ca{4 + pf}"
        mlx5_function(fx, f"{bus}/{slot}", 0x1018, 0x0001, index=index, uverbs=index,
                      fw_ver=fw, hca_type="MT4120", board_id=board, node_guid=guid,
                      sys_image_guid=sysimg,
                      port=ib_port(guid, hex(vf_lids[i]), "0x2", edr, cap_mask="0x2651ec48"),
                      netdev=f"ib{index}", ifindex=10 + index, mad=(index, index),
                      pci_links=[("physfn", f"../0000:5e:00.{pf}")])
    return fx


def fx_dgx_demo() -> Fixture:
    """A DGX-B200-like demo host, from the udev capture: 12 ConnectX-7 IB functions and
    two BlueField-3 (mlx5_0..15, uverbs0..15), the two E810 ports with irdma0/1 on
    uverbs16/17 (uverbs numbering follows probe order, not names), plus one soft-RoCE
    device rxe0 on a dummy interface, laid out like the kernel-lab VM shows it."""
    fx = Fixture("dgx-demo")
    ifindex = 4
    for entry in B200_MLX5:
        b200_function(fx, entry, ifindex=ifindex, mad=False)
        if entry[5]:
            ifindex += 1
    e810(fx, "/devices/pci0000:80/0000:80:05.0/0000:82:00.0", "irdma0", 16, aux_index=1,
         ifname="ens6f0np0", mac="6c:fe:54:9c:5c:48", ifindex=ifindex, numa=1, sub=0x0002)
    e810(fx, "/devices/pci0000:80/0000:80:05.0/0000:82:00.1", "irdma1", 17, aux_index=2,
         ifname="ens6f1np1", mac="6c:fe:54:9c:5c:49", ifindex=ifindex + 1, numa=1,
         sub=0x0002, port_state=("1: DOWN", "3: Disabled"))
    fx.net(None, "dummy0", ifindex + 2, "42:62:92:82:d6:26", operstate="unknown")
    rxe(fx, "rxe0", 18, "dummy0", "42:62:92:82:d6:26")
    return fx


# DGX A100 (udev capture): (path, netdev, MAC, NUMA node of the dgx-a100 fixture) of
# mlx5_0..7, the eight ConnectX-6 behind the PCIe switches.
A100_NICS = [
    ("/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:04.0/0000:0a:00.0/0000:0b:00.0/"
     "0000:0c:00.0", "enp12s0np0", "0c:42:a1:20:68:e6", 0),
    ("/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:08.0/0000:10:00.0/0000:11:10.0/"
     "0000:12:00.0", "enp18s0np0", "0c:42:a1:22:ae:16", 0),
    ("/devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:04.0/0000:49:00.0/0000:4a:00.0/"
     "0000:4b:00.0", None, None, 1),
    ("/devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:08.0/0000:50:00.0/0000:51:10.0/"
     "0000:54:00.0", "enp84s0np0", "0c:42:a1:0b:cb:2a", 1),
    ("/devices/pci0000:80/0000:80:01.1/0000:81:00.0/0000:82:04.0/0000:8b:00.0/0000:8c:00.0/"
     "0000:8d:00.0", "enp141s0np0", "0c:42:a1:0b:cb:3a", 2),
    ("/devices/pci0000:80/0000:80:01.1/0000:81:00.0/0000:82:08.0/0000:92:00.0/0000:93:10.0/"
     "0000:94:00.0", "enp148s0np0", "0c:42:a1:20:66:fa", 2),
    ("/devices/pci0000:b0/0000:b0:01.1/0000:b1:00.0/0000:b2:04.0/0000:b8:00.0/0000:b9:00.0/"
     "0000:ba:00.0", None, None, 3),
    ("/devices/pci0000:b0/0000:b0:01.1/0000:b1:00.0/0000:b2:08.0/0000:be:00.0/0000:bf:10.0/"
     "0000:cc:00.0", "enp204s0np0", "0c:42:a1:0b:cb:1e", 3),
]


def a100_nics(fx: Fixture, numa_of: dict[str, int] | None = None) -> None:
    """mlx5_0..9 of the DGX A100 capture; ``numa_of``: NUMA node by host bridge
    (default: the dgx-a100 fixture's stand-in nodes)."""
    cx6 = dict(fw_ver="20.39.1002", hca_type="MT4123", board_id="MT_0000000223")

    def node(path: str, default: int) -> int:
        return default if numa_of is None else numa_of[path.split("/")[2]]

    ifindex = 3
    for index, (path, netdev, mac, numa) in enumerate(A100_NICS):
        if mac:
            assert netdev is not None
            port = roce_port(mac, netdev, "200 Gb/sec (4X HDR)")
            guid = mlx_guid(mac)
            mlx5_function(fx, path, 0x101B, 0x0007, index=index, uverbs=index, node_guid=guid,
                          sys_image_guid=guid, port=port, numa=node(path, numa), netdev=netdev,
                          ifindex=ifindex, mac=mac, **cx6)
            ifindex += 1
        else:
            guid = guid_fmt(0x1C34DA0300B8A000 + 0x10 * index)
            mlx5_function(fx, path, 0x101B, 0x0007, index=index, uverbs=index, node_guid=guid,
                          sys_image_guid=guid, numa=node(path, numa),
                          port=ib_port(guid, hex(0x100 + index), "0x1", "200 Gb/sec (4X HDR)"),
                          **cx6)
    # The dual-port card on the root complex (storage network), Ethernet.
    for fn, mac in ((0, "b8:ce:f6:cc:9e:dc"), (1, "b8:ce:f6:cc:9e:dd")):
        index = 8 + fn
        path = f"/devices/pci0000:e0/0000:e0:03.1/0000:e1:00.{fn}"
        netdev = f"enp225s0f{fn}np{fn}"
        mlx5_function(fx, path, 0x101B, 0x0009, index=index,
                      uverbs=index, node_guid=mlx_guid("b8:ce:f6:cc:9e:dc"),
                      sys_image_guid=mlx_guid("b8:ce:f6:cc:9e:dc"),
                      port=roce_port(mac, netdev, "200 Gb/sec (4X HDR)"), numa=node(path, 7),
                      netdev=netdev, ifindex=ifindex, mac=mac, **cx6)
        ifindex += 1


def fx_dgx_a100() -> Fixture:
    """DGX A100 (udev capture): ten ConnectX-6 (15b3:101b sub 0007), eight behind PCIe
    switches and one dual-port card at e1:00.0/.1; mixed Ethernet (class 020000, with
    mlx5_core.eth.N and enpXs0np0 netdevs, MACs from the capture) and InfiniBand
    (class 020700).  Firmware strings and IB GUIDs are stand-ins."""
    fx = Fixture("dgx-a100")
    a100_nics(fx)
    return fx


def e810(fx: Fixture, path: str, ibname: str, uverbs: int, *, aux_index: int, ifname: str,
         mac: str, ifindex: int, numa: int = 0, sub: int = 0x0002, device: int = 0x1592,
         port_state: tuple[str, str] = ("4: ACTIVE", "5: LinkUp"),
         ipv4: str | None = None) -> None:
    """An Intel E810 function (ice) with its ice.roce.N auxiliary device (irdma) and the
    RoCE-mode irdma ib device (node type CA, GUID from the MAC)."""
    fx.pci(path, 0x8086, device, 0x8086, sub, ETH_CLASS, "ice", numa=numa, revision=2)
    fx.aux(path, f"ice.roce.{aux_index}", "irdma")
    port = roce_port(mac, ifname, "100 Gb/sec (4X EDR)", state=port_state[0],
                     phys=port_state[1], ipv4=ipv4, cap_mask="0x04050000")
    fx.rdma(path, ibname, uverbs, ABI["irdma"], 1, eui64(mac), eui64(mac), "1.71", [port],
            node_desc="irdma", extra=[("hw_rev", t(2))])
    fx.net(path, ifname, ifindex, mac)


def fx_irdma() -> Fixture:
    """The E810 of the koordinator issue (0000:1f:00.0), whose ib device rdma-core's
    udev rule renamed to rocep31s0f0 (RoCE, bus 0x1f = 31), and its second port."""
    fx = Fixture("irdma")
    for fn in range(2):
        mac = f"b4:96:91:d2:7e:{0x60 + fn:02x}"
        e810(fx, f"/devices/pci0000:17/0000:17:02.0/0000:1f:00.{fn}", f"rocep31s0f{fn}", fn,
             aux_index=fn, ifname=f"ens2f{fn}np{fn}", mac=mac, ifindex=4 + fn, numa=0,
             sub=0x0003, device=0x159B, ipv4=f"192.168.31.{10 + fn}" if fn == 0 else None)
    return fx


def rxe(fx: Fixture, name: str, uverbs: int, netdev: str, mac: str) -> None:
    """A soft-RoCE device exactly as a 6.1 kernel shows it (kernel-lab VM): a virtual
    ib device (no ``device`` link, ``parent`` names the netdev, empty fw_ver, no
    hca_type/board_id), one RoCE v2 GID, and a virtual uverbs device."""
    guid = eui64(mac)
    port = Port("Ethernet", "4: ACTIVE", "5: LinkUp", "2.5 Gb/sec (1X SDR)", "0x0", "0x0",
                "0", "0", "0x00010000", gids=(gid(LINK_LOCAL, guid), ZERO_GID),
                gid_types=("RoCE v2",), gid_ndevs=(netdev,), pkeys=("0xffff",))
    fx.rdma(None, name, uverbs, ABI["rxe"], 1, guid, guid, "", [port], node_desc="rxe",
            extra=[("parent", t(netdev))])


def fx_rxe() -> Fixture:
    """Two soft-RoCE devices as the kernel-lab VM (Debian 6.1 kernel) lays them out:
    rxe0 on a virtio-net NIC, rxe1 on one end of a veth pair."""
    fx = Fixture("rxe")
    virtio = "/devices/pci0000:00/0000:00:03.0"
    fx.pci(virtio, 0x1AF4, 0x1000, 0x1AF4, 0x0001, ETH_CLASS, "virtio-pci")
    fx.add(f"{virtio}/virtio0", "virtio",
           [("DRIVER", "virtio_net"), ("MODALIAS", "virtio:d00000001v00001AF4")],
           [("device", t("0x0001")), ("modalias", t("virtio:d00000001v00001AF4")),
            ("vendor", t("0x1af4"))],
           [("driver", "../../../../bus/virtio/drivers/virtio_net")])
    fx.net(f"{virtio}/virtio0", "ens3", 2, "52:54:00:12:34:56")
    fx.net(None, "v0", 3, "e2:04:86:18:67:76")
    fx.net(None, "v1", 4, "06:5b:c4:2e:91:0a")
    rxe(fx, "rxe0", 0, "ens3", "52:54:00:12:34:56")
    rxe(fx, "rxe1", 1, "v0", "e2:04:86:18:67:76")
    return fx


def fx_siw() -> Fixture:
    """A soft-iWARP device (siw, RNIC) on a virtio-net NIC: siw takes the netdev's
    parent (here the virtio device) as its parent, so device/modalias is a virtio one."""
    fx = Fixture("siw")
    virtio = "/devices/pci0000:00/0000:00:03.0"
    fx.pci(virtio, 0x1AF4, 0x1000, 0x1AF4, 0x0001, ETH_CLASS, "virtio-pci")
    vdev = fx.add(f"{virtio}/virtio0", "virtio",
                  [("DRIVER", "virtio_net"), ("MODALIAS", "virtio:d00000001v00001AF4")],
                  [("device", t("0x0001")), ("modalias", t("virtio:d00000001v00001AF4")),
                   ("vendor", t("0x1af4"))],
                  [("driver", "../../../../bus/virtio/drivers/virtio_net")])
    mac = "52:54:00:ab:cd:01"
    fx.net(vdev, "ens3", 2, mac)
    port = iwarp_port(mac, "ens3", "25 Gb/sec (1X EDR)")
    b = mac_bytes(mac)
    guid = guid_fmt(int.from_bytes(bytes(b + [0, 0]), "big"))
    fx.rdma(vdev, "siw0", 0, ABI["siw"], 4, guid, guid, "0.0.0", [port],
            node_desc="SoftiWARP")
    return fx


def simple_pci_rdma(fx: Fixture, path: str, vendor: int, device: int, sub_vendor: int,
                    sub_device: int, driver: str, ibname: str, uverbs: int, abi: int,
                    node_type: int, guid: str, fw_ver: str, port: Port, *,
                    extra: Iterable[tuple[str, str]] = (), numa: int = 0,
                    pci_class: int = ETH_CLASS, sysimg: str | None = None,
                    aux: tuple[str, str] | None = None, node_desc: str | None = None,
                    revision: int = 0, ports: Sequence[Port] | None = None,
                    mads: Sequence[tuple[int, int]] = (), issms: Sequence[tuple[int, int]] = ()
                    ) -> str:
    fx.pci(path, vendor, device, sub_vendor, sub_device, pci_class, driver, numa=numa,
           revision=revision)
    if aux:
        fx.aux(path, aux[0], aux[1])
    fx.rdma(path, ibname, uverbs, abi, node_type, guid, sysimg or guid, fw_ver,
            ports or [port], extra=extra, node_desc=node_desc, umad=mads, issm=issms)
    return path


def fx_efa() -> Fixture:
    """A p5.48xlarge-like host: 32 EFA devices rdmapNNNs0 (name = PCI bus in decimal),
    four per PCIe switch, numbered uverbs0..31 in bus order, which reproduces the
    rdmap113s0..rdmap182s0 -> uverbs8..25 map of the eks-charts excerpt.  EFA shows
    node type 7 (unspecified), link_layer "Unknown", all-zero GUIDs, fw 0.0.0.0 and
    lid_mask_count 1 (rdma-core #884 excerpt)."""
    fx = Fixture("efa")
    buses = [b for g in (79, 96, 113, 130, 147, 164, 181, 198) for b in range(g, g + 4)]
    for n, bus in enumerate(buses):
        path = f"/devices/pci0000:{bus - 1:02x}/0000:{bus - 1:02x}:01.0/0000:{bus:02x}:00.0"
        port = Port("Unknown", "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "0x0", "0x0",
                    "1", "0", "0x00000000",
                    gids=(f"fe80:0000:0000:0000:{0x0410 + n:04x}:8eff:fe0c:{0x8a00 + bus:04x}",),
                    gid_types=(), gid_ndevs=(), pkeys=("0xffff",))
        simple_pci_rdma(fx, path, 0x1D0F, 0xEFA1, 0x1D0F, 0xEFA1, "efa", f"rdmap{bus}s0", n,
                        ABI["efa"], 7, "0000:0000:0000:0000", "0.0.0.0", port,
                        numa=0 if n < 16 else 1, node_desc="", pci_class=ETH_CLASS)
    return fx


def fx_bnxt_re() -> Fixture:
    """Broadcom BCM57414 NetXtreme-E 25G (14e4:16d7), two ports; bnxt_en exposes
    bnxt_en.rdma.N auxiliary devices bound to bnxt_re (stand-in values)."""
    fx = Fixture("bnxt_re")
    for fn in range(2):
        mac = f"00:0a:f7:b5:6c:{0x30 + fn:02x}"
        path = f"/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.{fn}"
        ifname = f"ens1f{fn}np{fn}"
        port = roce_port(mac, ifname, "25 Gb/sec (1X EDR)", cap_mask="0x04010000")
        simple_pci_rdma(fx, path, 0x14E4, 0x16D7, 0x14E4, 0x1402, "bnxt_en", f"bnxt_re{fn}",
                        fn, ABI["bnxt_re"], 1, eui64(mac), "227.0.131.0/pkg 227.1.111.0",
                        port, aux=(f"bnxt_en.rdma.{fn}", "bnxt_re"), revision=1,
                        extra=[("hca_type", t("0x16d7")), ("hw_rev", t("0x1"))],
                        node_desc="Broadcom NetXtreme-C/E RoCE Driver HCA")
        fx.net(path, ifname, 4 + fn, mac)
    return fx


def fx_hns() -> Fixture:
    """HiSilicon Kunpeng 920 on-chip RoCE (hns3, 19e5:a222 25GE RDMA functions),
    hns_0/hns_1 (stand-in values)."""
    fx = Fixture("hns")
    for fn in range(2):
        mac = f"48:7b:6b:3a:1c:{0x10 + fn:02x}"
        path = f"/devices/pci0000:7c/0000:7c:00.0/0000:7d:00.{fn}"
        ifname = f"enp125s0f{fn}"
        port = roce_port(mac, ifname, "25 Gb/sec (1X EDR)", cap_mask="0x04010000")
        simple_pci_rdma(fx, path, 0x19E5, 0xA222, 0x19E5, 0x0051, "hns3", f"hns_{fn}", fn,
                        ABI["hns"], 1, eui64(mac), "1.9.40.0", port, revision=0x21,
                        extra=[("hca_type", t("hns3")), ("hw_rev", t("0x21"))],
                        node_desc="Hisilicon RoCE")
        fx.net(path, ifname, 2 + fn, mac)
    return fx


def fx_erdma() -> Fixture:
    """Alibaba Cloud elastic RDMA (1ded:107f), an iWARP RNIC beside the virtio NIC."""
    fx = Fixture("erdma")
    mac = "00:16:3e:10:a4:22"
    virtio = "/devices/pci0000:00/0000:00:05.0"
    fx.pci(virtio, 0x1AF4, 0x1000, 0x1AF4, 0x0001, ETH_CLASS, "virtio-pci")
    vdev = fx.add(f"{virtio}/virtio2", "virtio",
                  [("DRIVER", "virtio_net"), ("MODALIAS", "virtio:d00000001v00001AF4")],
                  [("device", t("0x0001")), ("modalias", t("virtio:d00000001v00001AF4")),
                   ("vendor", t("0x1af4"))],
                  [("driver", "../../../../bus/virtio/drivers/virtio_net")])
    fx.net(vdev, "eth0", 2, mac)
    port = iwarp_port(mac, "eth0", "25 Gb/sec (1X EDR)")
    simple_pci_rdma(fx, "/devices/pci0000:00/0000:00:06.0", 0x1DED, 0x107F, 0x1DED, 0x107F,
                    "erdma", "erdma_0", 0, ABI["erdma"], 4, eui64(mac), "0.2.0", port,
                    pci_class=ETH_CLASS, node_desc="Elastic RDMA(iWARP) stack")
    return fx


def fx_qedr() -> Fixture:
    """Marvell/QLogic FastLinQ QL41000 (1077:8070) in RoCE mode: qedr0/qedr1 on the
    qede functions (stand-in values)."""
    fx = Fixture("qedr")
    for fn in range(2):
        mac = f"00:0e:1e:d6:62:{0x7c + fn:02x}"
        path = f"/devices/pci0000:00/0000:00:03.0/0000:04:00.{fn}"
        ifname = f"ens3f{fn}"
        port = roce_port(mac, ifname, "25 Gb/sec (1X EDR)", cap_mask="0x04010000")
        simple_pci_rdma(fx, path, 0x1077, 0x8070, 0x1077, 0x0011, "qede", f"qedr{fn}", fn,
                        ABI["qedr"], 1, eui64(mac), "8.55.0.0", port, revision=2,
                        extra=[("hca_type", t("FastLinQ QL41000")), ("hw_rev", t("0x0"))],
                        node_desc="QLogic Corporation FastLinQ QL41000 Series")
        fx.net(path, ifname, 4 + fn, mac)
    return fx


def fx_cxgb4() -> Fixture:
    """Chelsio T62100-CR (1425:6408, PF 4 is the NIC/RDMA function): iw_cxgb4 registers
    one iWARP RNIC cxgb4_0 with two ports (stand-in values)."""
    fx = Fixture("cxgb4")
    path = "/devices/pci0000:80/0000:80:02.0/0000:81:00.4"
    macs = ["00:07:43:4a:8b:50", "00:07:43:4a:8b:58"]
    ifnames = ["enp129s0f4", "enp129s0f4d1"]
    ports = [iwarp_port(m, i, "100 Gb/sec (4X EDR)") for m, i in zip(macs, ifnames)]
    b = mac_bytes(macs[0])
    guid = guid_fmt(int.from_bytes(bytes(b + [0, 0]), "big"))
    simple_pci_rdma(fx, path, 0x1425, 0x6408, 0x1425, 0x0000, "cxgb4", "cxgb4_0", 0,
                    ABI["cxgb4"], 4, guid, "1.27.4.0", ports[0], ports=ports, numa=1,
                    pci_class=ETH_CLASS,
                    extra=[("board_id", t("1425.6408")), ("hca_type", t("T6")),
                           ("hw_rev", t(0))],
                    node_desc="Chelsio T6 RDMA Driver")
    for n, (mac, ifname) in enumerate(zip(macs, ifnames)):
        fx.net(path, ifname, 5 + n, mac, dev_port=n)
    return fx


def fx_hfi1() -> Fixture:
    """Intel Omni-Path HFI 100 (8086:24f0), hfi1_0, port files as in the node-exporter
    issue (IB link layer, GID types listed), 100 Gb/s; IPoIB ib0 (stand-in values)."""
    fx = Fixture("hfi1")
    path = "/devices/pci0000:00/0000:00:02.0/0000:03:00.0"
    guid = "0011:7501:0179:e2ac"
    port = ib_port(guid, "0x7", "0x1", "100 Gb/sec (4X EDR)", cap_mask="0x00410022")
    simple_pci_rdma(fx, path, 0x8086, 0x24F0, 0x8086, 0x2628, "hfi1", "hfi1_0", 0,
                    ABI["hfi1"], 1, guid, "1.27.0", port, pci_class=0x020800, revision=0x11,
                    extra=[("board_id", t("Intel Omni-Path Host Fabric Interface Adapter "
                                          "100 Series")),
                           ("boardversion", t("ChipABI 3.0, ChipRev 7.17, SW Compat 3")),
                           ("hw_rev", t(17)), ("nctxts", t(40)), ("nfreectxts", t(40))],
                    node_desc="hfi1_0", mads=[(0, 1)], issms=[(0, 1)])
    fx.net(path, "ib0", 3, ipoib_addr(0, guid), arp_type=32, mtu=2044)
    return fx


def fx_qib() -> Fixture:
    """QLogic QLE7342 (1077:7322) dual-port QDR InfiniBand, qib0 (ib_qib; stand-in
    values)."""
    fx = Fixture("qib")
    path = "/devices/pci0000:00/0000:00:03.0/0000:05:00.0"
    guid = "0011:7500:0070:2a5c"
    ports = [ib_port("0011:7500:0070:2a5c", "0x12", "0x1", "40 Gb/sec (4X QDR)",
                     cap_mask="0x07610868"),
             ib_port("0011:7500:0070:2a5d", "0xffff", "0x0", "10 Gb/sec (4X SDR)",
                     state="1: DOWN", phys="2: Polling", cap_mask="0x07610868")]
    simple_pci_rdma(fx, path, 0x1077, 0x7322, 0x1077, 0x7322, "ib_qib", "qib0", 0,
                    ABI["qib"], 1, guid, "", ports[0], ports=ports, pci_class=0x0C0600,
                    revision=2,
                    extra=[("board_id", t("InfiniPath_QLE7342")), ("boardversion",
                           t("ChipABI 2.0,InfiniPath_QLE7342,InfiniPath1,SW Compat 2")),
                           ("hca_type", t("InfiniPath_QLE7342")), ("hw_rev", t(2))],
                    node_desc="qib0", mads=[(0, 1), (1, 2)], issms=[(0, 1), (1, 2)])
    return fx


def fx_ocrdma() -> Fixture:
    """Emulex OneConnect OCe14102 (10df:0720, be2net) RoCE, ocrdma0 (stand-in values)."""
    fx = Fixture("ocrdma")
    path = "/devices/pci0000:00/0000:00:02.0/0000:02:00.0"
    mac = "00:90:fa:8a:4c:10"
    port = roce_port(mac, "enp2s0f0", "10 Gb/sec (1X QDR)", cap_mask="0x04010000")
    simple_pci_rdma(fx, path, 0x10DF, 0x0720, 0x10DF, 0xE82A, "be2net", "ocrdma0", 0,
                    ABI["ocrdma"], 1, eui64(mac), "10.2.470.14", port, revision=0x10,
                    extra=[("hca_type", t("OCe14102-UX")), ("hw_rev", t("0x0"))],
                    node_desc="Emulex OneConnect RoCE HCA")
    fx.net(path, "enp2s0f0", 2, mac)
    return fx


def fx_mthca() -> Fixture:
    """Mellanox InfiniHost III Ex (15b3:6282, mem-free), mthca0, two DDR IB ports
    (stand-in values)."""
    fx = Fixture("mthca")
    path = "/devices/pci0000:00/0000:00:01.0/0000:03:00.0"
    ports = [ib_port("0002:c902:0024:a5e1", "0x3", "0x1", "20 Gb/sec (4X DDR)",
                     cap_mask="0x02510a68"),
             ib_port("0002:c902:0024:a5e2", "0x0", "0x0", "10 Gb/sec (4X SDR)",
                     state="1: DOWN", phys="2: Polling", cap_mask="0x02510a68")]
    simple_pci_rdma(fx, path, MLX, 0x6282, MLX, 0x6282, "ib_mthca", "mthca0", 0,
                    ABI["mthca"], 1, "0002:c902:0024:a5e0", "5.3.0", ports[0], ports=ports,
                    pci_class=0x0C0600, revision=0xA0, sysimg="0002:c902:0024:a5e3",
                    extra=[("board_id", t("MT_04A0110002")), ("hca_type", t("MT25208")),
                           ("hw_rev", t("a0"))],
                    node_desc="mthca0", mads=[(0, 1), (1, 2)], issms=[(0, 1), (1, 2)])
    return fx


def fx_vmw_pvrdma() -> Fixture:
    """VMware paravirtual RDMA (15ad:0820) as function 1 of a vmxnet3 device, whose
    netdev it uses (stand-in values)."""
    fx = Fixture("vmw_pvrdma")
    base = "/devices/pci0000:00/0000:00:15.0/0000:03:00"
    mac = "00:50:56:a1:3b:7c"
    fx.pci(f"{base}.0", 0x15AD, 0x07B0, 0x15AD, 0x07B0, ETH_CLASS, "vmxnet3", revision=1)
    fx.net(f"{base}.0", "ens160", 2, mac)
    port = roce_port(mac, "ens160", "10 Gb/sec (1X QDR)", cap_mask="0x04010000")
    simple_pci_rdma(fx, f"{base}.1", 0x15AD, 0x0820, 0x15AD, 0x0820, "vmw_pvrdma",
                    "vmw_pvrdma0", 0, ABI["vmw_pvrdma"], 1, eui64(mac), "3.0.000", port,
                    pci_class=0x028000, revision=2,
                    extra=[("board_id", t(1)), ("hca_type", t("VMW_PVRDMA-1.0")),
                           ("hw_rev", t(17))],
                    node_desc="vmw_pvrdma0")
    return fx


def fx_mana() -> Fixture:
    """Azure MANA (1414:00ba) VF on a Hyper-V vPCI bus: mana netdev plus the
    mana.rdma.0 auxiliary device that mana_ib binds (ib device mana_0)."""
    fx = Fixture("mana")
    vmbus = ("/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/"
             "7870c8f0-63b8-4f9b-ad3b-3c1b5e4fbac1")
    fx.add(vmbus, "vmbus",
           [("DRIVER", "hv_pci"), ("MODALIAS", "vmbus:1d8af4e1f2f44fa0a4f2b1a1b0fdf4f8")],
           [("class_id", t("{44c4f61d-4444-4400-9d52-802e27ede19f}")),
            ("device_id", t("{7870c8f0-63b8-4f9b-ad3b-3c1b5e4fbac1}"))],
           [("driver", "../../../../../../bus/vmbus/drivers/hv_pci")])
    path = f"{vmbus}/pci7870:00/7870:00:00.0"
    mac = "60:45:bd:a7:1c:0e"
    fx.pci(path, 0x1414, 0x00BA, 0x1414, 0x0000, ETH_CLASS, "mana", revision=0)
    fx.aux(path, "mana.rdma.0", "mana_ib")
    fx.net(path, "enP30832s1", 3, mac)
    port = roce_port(mac, "enP30832s1", "200 Gb/sec (4X HDR)", v1=False, cap_mask="0x04010000")
    fx.rdma(path, "mana_0", 0, ABI["mana"], 1, eui64(mac), eui64(mac), "0.0.0", [port],
            node_desc="mana_0")
    return fx


def fx_ionic() -> Fixture:
    """AMD Pensando DSC (1dd8:1002, ionic) RoCE via the ionic.rdma.0 auxiliary device
    (ionic_rdma), ib device ionic_0 (stand-in values)."""
    fx = Fixture("ionic")
    path = "/devices/pci0000:80/0000:80:01.1/0000:81:00.0/0000:82:00.0/0000:83:00.0"
    mac = "00:ae:cd:11:22:30"
    fx.pci(path, 0x1DD8, 0x1002, 0x1DD8, 0x5007, ETH_CLASS, "ionic", numa=1)
    fx.aux(path, "ionic.rdma.0", "ionic_rdma")
    fx.net(path, "enp131s0np0", 5, mac)
    port = roce_port(mac, "enp131s0np0", "400 Gb/sec (4X NDR)", cap_mask="0x04010000")
    fx.rdma(path, "ionic_0", 0, ABI["ionic"], 1, eui64(mac), eui64(mac), "1.80.0-E-77",
            [port], node_desc="ionic_0", extra=[("hca_type", t("Pensando DSC")),
                                                ("hw_rev", t(0))])
    return fx


def fx_usnic() -> Fixture:
    """Cisco VIC 1225 (1137:0043, enic) with usnic_verbs: ib device usnic_0 of node
    type 6 (usNIC UDP, what usnic_verbs registers); rdma-core has no usnic provider."""
    fx = Fixture("usnic")
    path = "/devices/pci0000:00/0000:00:03.0/0000:06:00.0/0000:07:00.0/0000:08:00.0"
    mac = "00:25:b5:00:00:1f"
    fx.pci(path, 0x1137, 0x0043, 0x1137, 0x012C, ETH_CLASS, "enic", revision=0xA2)
    fx.net(path, "enp8s0", 2, mac)
    port = Port("Ethernet", "4: ACTIVE", "5: LinkUp", "10 Gb/sec (1X QDR)", "0x0", "0x0",
                "0", "0", "0x00000000", gids=(gid(LINK_LOCAL, eui64(mac)),),
                gid_types=(), gid_ndevs=(), pkeys=("0xffff",))
    b = mac_bytes(mac)
    guid = guid_fmt(int.from_bytes(bytes([b[0] ^ 2] + b[1:3] + [0xFF, 0xFE] + b[3:]), "big"))
    fx.rdma(path, "usnic_0", 0, ABI["usnic"], 6, guid, guid, "2.2(2.5)", [port],
            node_desc="usnic_0",
            extra=[("board_id", t(300)), ("config", t("Cisco VIC (43:300) Enic 0x1 enp8s0")),
                   ("cq_per_vf", t(6)), ("iface", t("enp8s0")), ("max_vf", t(16)),
                   ("qp_per_vf", t(6))])
    return fx


def fx_mlx4() -> Fixture:
    """ConnectX-3 (15b3:1003) PF mlx4_0 with two IB ports and eight SR-IOV VFs
    (15b3:1004, mlx4_1..8) as in the hustcat k8s-rdma issue; mlx4_2's values (fw
    2.40.7000, GUIDs, board_id, LID 1, SM LID 2) are from the excerpt, the rest follows
    ConnectX-3 conventions (node GUID X0, port GUIDs X1/X2, system image X3)."""
    fx = Fixture("mlx4")
    pf = "/devices/pci0000:00/0000:00:03.0/0000:04:00.0"
    fw, board = "2.40.7000", "MT_1100120019"
    sysimg = "248a:0703:00e5:3d43"
    vfs = [f"0000:04:00.{i}" for i in range(1, 8)] + ["0000:04:01.0"]
    fdr = "56 Gb/sec (4X FDR)"
    ports = [ib_port("248a:0703:00e5:3d41", "0x1", "0x2", fdr, cap_mask="0x02514868"),
             ib_port("248a:0703:00e5:3d42", "0x3", "0x2", fdr, cap_mask="0x02514868")]
    fx.pci(pf, MLX, 0x1003, MLX, 0x0050, IB_CLASS, "mlx4_core",
           extra=[("sriov_numvfs", t(8)), ("sriov_totalvfs", t(8))],
           links=[(f"virtfn{i}", f"../{slot}") for i, slot in enumerate(vfs)])
    fx.rdma(pf, "mlx4_0", 0, ABI["mlx4"], 1, "248a:0703:00e5:3d40", sysimg, fw, ports,
            umad=[(0, 1), (1, 2)], issm=[(0, 1), (1, 2)], node_desc="mlx4_0",
            extra=[("board_id", t(board)), ("hca_type", t("MT4099")), ("hw_rev", t(1))])
    fx.net(pf, "ib0", 4, ipoib_addr(0, "248a:0703:00e5:3d41"), arp_type=32, mtu=2044)
    fx.net(pf, "ib1", 5, ipoib_addr(1, "248a:0703:00e5:3d42"), arp_type=32, mtu=2044,
           dev_port=1)
    for n, slot in enumerate(vfs):
        path = f"/devices/pci0000:00/0000:00:03.0/{slot}"
        guid = f"0014:0500:8cc6:cd{0x08 + n:02x}"
        fx.pci(path, MLX, 0x1004, MLX, 0x61B0, IB_CLASS, "mlx4_core", revision=1,
               links=[("physfn", "../0000:04:00.0")])
        port = ib_port(guid, hex(0x1 if n == 1 else 0x20 + n), "0x2", fdr, cap_mask="0x02514868")
        fx.rdma(path, f"mlx4_{n + 1}", n + 1, ABI["mlx4"], 1, guid, sysimg, fw, [port],
                node_desc=f"mlx4_{n + 1}",
                extra=[("board_id", t(board)), ("hca_type", t("MT4100")), ("hw_rev", t(1))])
    return fx


def fx_smi() -> Fixture:
    """XDR ConnectX-8 (15b3:1023) in a VMware guest (rdmamap PR #17 excerpt): mlx5_0
    and the plane/SMI device smi1 (four ports) on the same function 0000:0b:00.0.  smi1
    has an infiniband/ entry and umad1..4/issm1..4 but no uverbs device, so libibverbs
    never sees it.  Net: ibs192 (IPoIB) there, ens160 (vmxnet3) at 0000:03:00.0."""
    fx = Fixture("smi")
    fx.pci("/devices/pci0000:00/0000:00:15.0/0000:03:00.0", 0x15AD, 0x07B0, 0x15AD, 0x07B0,
           ETH_CLASS, "vmxnet3", revision=1)
    fx.net("/devices/pci0000:00/0000:00:15.0/0000:03:00.0", "ens160", 2, "00:50:56:8e:41:07")
    path = "/devices/pci0000:00/0000:00:16.0/0000:0b:00.0"
    guid = "a088:c203:00d1:4e20"
    xdr = "800 Gb/sec (4X XDR)"
    fx.pci(path, MLX, 0x1023, MLX, 0x0001, IB_CLASS, "mlx5_core")
    fx.aux(path, "mlx5_core.rdma.0", "mlx5_ib.rdma")
    extra = [("board_id", t("MT_0000001093")), ("hca_type", t("MT4131")), ("hw_rev", t("0x0"))]
    fw = "40.44.1036"
    fx.rdma(path, "mlx5_0", 0, ABI["mlx5"], 1, guid, guid, fw,
            [ib_port(guid, "0x1b", "0x1", xdr)], umad=[(0, 1)], issm=[],
            node_desc="xdr-vm mlx5_0", extra=extra)
    planes = [ib_port(f"a088:c203:00d1:4e2{p}", hex(0x1B + p), "0x1", xdr) for p in range(1, 5)]
    fx.rdma(path, "smi1", None, ABI["mlx5"], 1, guid, guid, fw, planes,
            umad=[(p, p) for p in range(1, 5)], issm=[(p, p) for p in range(1, 5)],
            node_desc="xdr-vm smi1", extra=extra)
    fx.net(path, "ibs192", 3, ipoib_addr(0, guid), arp_type=32, mtu=4092)
    return fx


def fx_azure_vf() -> Fixture:
    """Azure HBv2 VM (azhpc-images PR #44): a ConnectX-4 Lx VF (15b3:1016, RoCE, the
    Accelerated Networking VF of eth0) and a ConnectX VF on InfiniBand (vendor part
    4120 = 15b3:1018), each on its own Hyper-V vPCI domain under vmbus, renamed by the
    udev rule to rdmaP23800p0s2 / ibP57247p0s2 (domain in decimal).  fw_ver, GUIDs and
    board_id from the excerpt; the IB VF's board_id is cut off there (stand-in)."""
    fx = Fixture("azure-vf")
    vmbus_root = "/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00"
    # hv_netvsc synthetic NIC, the one the VF accelerates.
    fx.add(f"{vmbus_root}/000d3aac-5a53-000d-3aac-5a53000d3aac", "vmbus",
           [("DRIVER", "hv_netvsc"), ("MODALIAS", "vmbus:635161f83edfc546913ff2d2f965ed0e")],
           [("class_id", t("{f8615163-df3e-46c5-913f-f2d2f965ed0e}"))],
           [("driver", "../../../../../../bus/vmbus/drivers/hv_netvsc")])
    fx.net(f"{vmbus_root}/000d3aac-5a53-000d-3aac-5a53000d3aac", "eth0", 2,
           "00:0d:3a:ac:5a:53")
    for domain, dev, ib, mac_or_guid in (
        (23800, 0x1016, False, "00:0d:3a:ac:5a:53"),
        (57247, 0x1018, True, "0015:5dff:fe33:ff34"),
    ):
        guid_text = f"{domain:04x}c8f0-{dev:04x}-4f9b-ad3b-3c1b5e4fbac1"
        vmbus = f"{vmbus_root}/{guid_text}"
        fx.add(vmbus, "vmbus",
               [("DRIVER", "hv_pci"), ("MODALIAS", "vmbus:1d8af4e1f2f44fa0a4f2b1a1b0fdf4f8")],
               [("class_id", t("{44c4f61d-4444-4400-9d52-802e27ede19f}")),
                ("device_id", t("{" + guid_text + "}"))],
               [("driver", "../../../../../../bus/vmbus/drivers/hv_pci")])
        slot = f"{domain:04x}:00:02.0"
        path = f"{vmbus}/pci{domain:04x}:00/{slot}"
        if not ib:
            mac = mac_or_guid
            mlx5_function(fx, path, dev, 0x0190, index=0, uverbs=0, fw_ver="14.25.8102",
                          hca_type="MT4118", board_id="MSF0010110035",
                          node_guid="000d:3aff:feac:5a53", sys_image_guid="0000:0000:0000:0000",
                          port=roce_port(mac, f"enP{domain}s2", "40 Gb/sec (4X QDR)"),
                          ib_name=f"rdmaP{domain}p0s2", netdev=f"enP{domain}s2", ifindex=3,
                          mac=mac, pci_class=ETH_CLASS, revision=0x80)
        else:
            guid = mac_or_guid
            mlx5_function(fx, path, dev, 0x0190, index=1, uverbs=1, fw_ver="16.26.0206",
                          hca_type="MT4120", board_id="MT_0000000010", node_guid=guid,
                          sys_image_guid="0c42:a103:0001:65fc",
                          port=ib_port(guid, "0x2a1", "0x1", "200 Gb/sec (4X HDR)",
                                       cap_mask="0x2651ec48"),
                          ib_name=f"ibP{domain}p0s2", netdev="ib0", ifindex=4)
    return fx


def fx_mlx5_sf() -> Fixture:
    """A BlueField-3 Arm side in switchdev mode with one sub-function: the SF is the
    auxiliary device mlx5_core.sf.2 below the PF; its ib device and uverbs device hang
    below the SF, so device/modalias is ``auxiliary:mlx5_core.sf`` (no PCI id).  The
    lshca issue #25 shows the older mdev layout of the same idea (stand-in values)."""
    fx = Fixture("mlx5-sf")
    pf = "/devices/pci0000:00/0000:00:00.0/0000:01:00.0/0000:02:00.0/0000:03:00.0"
    mac = "b8:3f:d2:ba:6f:6a"
    mlx5_function(fx, pf, 0xA2DC, 0x0009, index=0, uverbs=0, node_guid=mlx_guid(mac),
                  sys_image_guid=mlx_guid(mac), port=roce_port(mac, "p0", "200 Gb/sec (2X NDR)"),
                  netdev="p0", ifindex=5, mac=mac, **BF3)
    sf = fx.aux(pf, "mlx5_core.sf.2", "mlx5_core.sf")
    sf_mac = "02:ac:5d:1e:00:01"
    fx.rdma(sf, "mlx5_2", 1, ABI["mlx5"], 1, mlx_guid(sf_mac), mlx_guid(mac), BF3["fw_ver"],
            [roce_port(sf_mac, "enp3s0f0s2", "200 Gb/sec (2X NDR)")], node_desc="bf3-arm mlx5_2",
            extra=[("board_id", t(BF3["board_id"])), ("hca_type", t(BF3["hca_type"])),
                   ("hw_rev", t("0x0"))])
    fx.net(sf, "enp3s0f0s2", 8, sf_mac)
    return fx


# ----------------------------------------------------------------- GPU hosts (placement)
#
# PROVENANCE of the GPU fixture hosts (gpu-*): what is real and what is filled in.
#
# gpu-dgx-a100: the complete PCI tree below the five root ports that lead to GPUs,
#   NICs and NVSwitches (129 functions: AMD root ports, Broadcom PEX88096 switch
#   ports 1000:c010, the GPU baseboard's switch ports 10de:13b8 and PLX 10b5:8725,
#   eight A100 SXM4 40GB 10de:20b0, six NVSwitches 10de:1af1, NVMe, switch
#   management endpoints) is copied from `udevadm info --export-db` of a real DGX
#   A100, canonical/checkbox checkbox-ng/checkbox_ng/support/parsers/tests/
#   udevadm_data/NVIDIA_DGXA100.txt (the same capture as the dgx-a100 fixture): paths,
#   classes, vendor/device and subsystem ids, drivers.  The capture has 256 CPUs and
#   8 NUMA nodes; 2x EPYC 7742 NPS4 numbering and the NUMA node of the GPUs' host
#   bridges (pci0000:00 -> 3, 40 -> 1, 80 -> 7, b0 -> 5) and the CPU affinity are from
#   a published `nvidia-smi topo -m` of a DGX A100 (oyanghd/gpu-compress-decompress,
#   docs/project_description_EN.md); the other host bridges' nodes (20 -> 2, 60 -> 0,
#   a0 -> 6, e0 -> 4) follow that pattern (filled in; e0 is on none of the GPUs'
#   nodes, as the matrix's SYS for NIC8/NIC9 says).  Filled in: the nvidia driver
#   binding and /proc/driver/nvidia (the capture had no driver bound), memory
#   sizes, the NICs' RDMA values (as in the dgx-a100 fixture).
# gpu-dgx-b200: the same for a real DGX B200 (canonical/checkbox .../udevadm_data/
#   DISK_SAMSUNG_KIOXIA.txt, the capture of the dgx-demo fixture): 122 functions,
#   eight B200 10de:2901 behind ConnectX-7 PCIe bridges 15b3:1979, the quad-function
#   ConnectX-7 on a root port, two BlueField-3 and NVMe behind Broadcom PEX890xx
#   1000:c030, the E810 with irdma; 224 CPUs and 2 NUMA nodes as in the capture
#   (2 sockets x 56 cores x 2 threads, as the published HGX B200 matrix of
#   NVIDIA/nccl-tests#333 shows: 0-55,112-167 / 56-111,168-223), host bridges below
#   0x80 on node 0.  Filled in as for the A100.
# gpu-hgx-h100: constructed after a published 8x H100 NCCL topology dump
#   (aliyun/SimAI#128: each H100 10de:2330 and a ConnectX-7 15b3:1021 on one
#   Broadcom PEX890xx switch 1000:c030, e.g. switch d7:00.0 with GPU d9:00.0 and NIC
#   da:00.0, GPU b8:00.0; NVSwitches 05..08:00.0 class 0x0680) and the published
#   matrix of sgl-project/sglang#30401 (GPUi-NICi PIX, NODE within a socket, SYS
#   across; CPUs 0-47,96-143 / 48-95,144-191).  The other bus numbers, the root
#   ports and the NVSwitches' switch are filled in.
# gpu-pcie-2socket: the ASUS ESC8000A-E12 of luigifcruz/stelline (its published
#   `lspci -tv`, `numactl --hardware` and `nvidia-smi topo -m`): 2x EPYC Genoa, 32
#   CPUs per node, four RTX 6000 Ada (10de:26b1, VGA class, each with its HD audio
#   function 10de:22ba) on root ports of host bridges 00, 40 (node 0), c0, e0
#   (node 1), the dual-port ConnectX-7 on 20:03.1.  The second ConnectX-7 (81:00.x)
#   is left out, so that socket 1's GPUs reach a NIC only across the sockets (SYS).
#   Filled in: root port ids, the NVMe switches are left out.
# gpu-cloud-vm: the KVM guest of NVIDIA/nccl-tests#256 (its `lspci -tvv`: QEMU q35,
#   every device on a root port 1b36:000c of pci0000:00: eight H200 10de:2335 on
#   01.4-02.3, ConnectX-7 on the following ports) with numa_node -1 everywhere, as
#   in the KVM guest matrix of sgl-project/sglang#24413 (GPU0-NIC0 PHB, NUMA 0).
#   Filled in: the number of NICs (4), vCPUs (1 socket x 48 x 2), memory.
# gpu-mi300x: constructed (no published tree found): 2 sockets x 96 cores (EPYC
#   9654 class), eight AMD Instinct MI300X (1002:74a1, class 0x1200 processing
#   accelerator, amdgpu) each behind its own bridge pair and one Broadcom PEX89xxx
#   switch shared with a ConnectX-7, as on OAM MI300X platforms.
# gpu-sriov-sf: constructed, for the NIC kinds placement must place: one L40S and a
#   ConnectX-7 PF with four SR-IOV VFs (physfn links) and two SFs (auxiliary
#   mlx5_core.sf.N with their own ib devices) on one switch, a bonded dual-port
#   ConnectX-7 (RoCE LAG, mlx5_bond_0), an E810 with irdma, and an NVMe behind an
#   Intel VMD domain (pci10000:e0 below the VMD endpoint 0000:00:0e.0).


def tree_entries(table: str) -> list[tuple[str, str, int, int, int, int, int, str | None]]:
    """A tree table's lines: (parent, BDF, class, vendor, device, sub vendor, sub
    device, driver); parent is another line's BDF or ``pciDDDD:BB``."""
    out = []
    for line in table.splitlines():
        parent, bdf, cls, ids, sub = line.split()[:5]
        drv = line.split()[5]
        if parent.startswith("pci") and ":" not in parent:
            parent = f"pci0000:{parent[3:]}"
        elif not parent.startswith("pci"):
            parent = "0000:" + parent
        v, d = (int(x, 16) for x in ids.split(":"))
        sv, sd = (int(x, 16) for x in sub.split(":"))
        out.append((parent, "0000:" + bdf, int(cls, 16), v, d, sv, sd,
                    None if drv == "-" else drv))
    return out


def lay_out_tree(fx: Fixture, table: str, numa_of: dict[str, int], *, gpu_model: str,
                 skip: Iterable[str] = ()) -> dict[str, str]:
    """Lay out a tree table with the testing kit: host bridges with their NUMA
    nodes, bridges (root port at depth 1, then upstream/downstream ports
    alternating), GPUs (with the nvidia driver and its /proc file), any other
    function as it is; functions in ``skip`` (the NICs, added with their RDMA
    devices by the caller) are only given a path.  Returns {BDF: path}."""
    host = fx.host
    paths: dict[str, str] = {}
    depth: dict[str, int] = {}
    skipped = set(skip)
    for parent, bdf, cls, vendor, device, sv, sd, drv in tree_entries(table):
        if parent.startswith("pci"):
            base = host.host_bridge(parent, numa_node=numa_of[parent])
            d = 1
        else:
            base = paths[parent]
            d = depth[parent] + 1
        path = paths[bdf] = f"{base}/{bdf}"
        depth[bdf] = d
        if bdf in skipped:
            continue
        if cls == 0x060400:
            port = "root" if d == 1 else ("upstream" if d % 2 == 0 else "downstream")
            host.pci_bridge(path, port=port, vendor=vendor, device=device, sub_vendor=sv,
                            sub_device=sd, driver=drv)
        elif vendor == 0x10DE and cls >> 8 in (0x0300, 0x0302):
            host.gpu(path, model=gpu_model)
        else:
            host.pci_device(path, vendor=vendor, device=device, pci_class=cls, driver=drv,
                            sub_vendor=sv, sub_device=sd)
    return paths


DGX_A100_TREE = """\
pci00      00:01.1 060400 1022:1483 1022:1453 pcieport
00:01.1    01:00.0 060400 1000:c010 1000:a096 pcieport
01:00.0    02:00.0 060400 1000:c010 1000:a096 pcieport
02:00.0    03:00.0 060400 1000:c010 1000:a096 pcieport
03:00.0    04:00.0 060400 1000:c010 1000:a096 pcieport
04:00.0    05:00.0 060400 1000:c010 10de:13b8 pcieport
05:00.0    06:00.0 060400 1000:c010 10de:13b8 pcieport
06:00.0    07:00.0 030200 10de:20b0 10de:134f -
03:00.0    04:10.0 060400 1000:c010 1000:a096 pcieport
03:00.0    04:14.0 060400 1000:c010 1000:a096 pcieport
04:14.0    09:00.0 010802 144d:a824 144d:a801 nvme
01:00.0    02:04.0 060400 1000:c010 1000:a096 pcieport
02:04.0    0a:00.0 060400 1000:c010 1000:a096 pcieport
0a:00.0    0b:00.0 060400 1000:c010 1000:a096 pcieport
0b:00.0    0c:00.0 020000 15b3:101b 15b3:0007 mlx5_core
0a:00.0    0b:10.0 060400 1000:c010 1000:a096 pcieport
0b:10.0    0d:00.0 060400 1000:c010 10de:13b8 pcieport
0d:00.0    0e:00.0 060400 1000:c010 10de:13b8 pcieport
0e:00.0    0f:00.0 030200 10de:20b0 10de:134f -
01:00.0    02:08.0 060400 1000:c010 1000:a096 pcieport
02:08.0    10:00.0 060400 1000:c010 1000:a096 pcieport
10:00.0    11:10.0 060400 1000:c010 1000:a096 pcieport
11:10.0    12:00.0 020000 15b3:101b 15b3:0007 mlx5_core
01:00.0    02:1c.0 060400 1000:c010 1000:a096 pcieport
02:1c.0    13:00.0 018000 1000:c010 1000:00b2 -
pci40      40:01.1 060400 1022:1483 1022:1453 pcieport
40:01.1    41:00.0 060400 1000:c010 1000:a096 pcieport
41:00.0    42:00.0 060400 1000:c010 1000:a096 pcieport
42:00.0    43:00.0 060400 1000:c010 1000:a096 pcieport
43:00.0    44:00.0 060400 1000:c010 1000:a096 pcieport
44:00.0    45:00.0 060400 1000:c010 10de:13b8 pcieport
45:00.0    46:00.0 060400 1000:c010 10de:13b8 pcieport
46:00.0    47:00.0 030200 10de:20b0 10de:134f -
45:00.0    46:1f.0 060400 1000:c010 10de:13b8 pcieport
46:1f.0    48:00.0 010700 1000:00b2 10de:13b8 mpt3sas
41:00.0    42:04.0 060400 1000:c010 1000:a096 pcieport
42:04.0    49:00.0 060400 1000:c010 1000:a096 pcieport
49:00.0    4a:00.0 060400 1000:c010 1000:a096 pcieport
4a:00.0    4b:00.0 020700 15b3:101b 15b3:0007 mlx5_core
49:00.0    4a:10.0 060400 1000:c010 1000:a096 pcieport
4a:10.0    4c:00.0 060400 1000:c010 10de:13b8 pcieport
4c:00.0    4d:00.0 060400 1000:c010 10de:13b8 pcieport
4d:00.0    4e:00.0 030200 10de:20b0 10de:134f -
4c:00.0    4d:1f.0 060400 1000:c010 10de:13b8 pcieport
4d:1f.0    4f:00.0 010700 1000:00b2 10de:13b8 mpt3sas
41:00.0    42:08.0 060400 1000:c010 1000:a096 pcieport
42:08.0    50:00.0 060400 1000:c010 1000:a096 pcieport
50:00.0    51:00.0 060400 1000:c010 1000:a096 pcieport
51:00.0    52:00.0 010802 144d:a824 144d:a801 nvme
50:00.0    51:04.0 060400 1000:c010 1000:a096 pcieport
50:00.0    51:10.0 060400 1000:c010 1000:a096 pcieport
51:10.0    54:00.0 020000 15b3:101b 15b3:0007 mlx5_core
41:00.0    42:1c.0 060400 1000:c010 1000:a096 pcieport
42:1c.0    55:00.0 018000 1000:c010 1000:00b2 -
pci80      80:01.1 060400 1022:1483 1022:1453 pcieport
80:01.1    81:00.0 060400 1000:c010 1000:a096 pcieport
81:00.0    82:00.0 060400 1000:c010 1000:a096 pcieport
82:00.0    83:00.0 060400 1000:c010 1000:a096 pcieport
83:00.0    84:00.0 060400 1000:c010 1000:a096 pcieport
84:00.0    85:00.0 060400 1000:c010 10de:13b8 pcieport
85:00.0    86:00.0 060400 1000:c010 10de:13b8 pcieport
86:00.0    87:00.0 030200 10de:20b0 10de:134f -
85:00.0    86:1f.0 060400 1000:c010 10de:13b8 pcieport
86:1f.0    88:00.0 010700 1000:00b2 10de:13b8 mpt3sas
83:00.0    84:10.0 060400 1000:c010 1000:a096 pcieport
83:00.0    84:14.0 060400 1000:c010 1000:a096 pcieport
84:14.0    8a:00.0 010802 144d:a824 144d:a801 nvme
81:00.0    82:04.0 060400 1000:c010 1000:a096 pcieport
82:04.0    8b:00.0 060400 1000:c010 1000:a096 pcieport
8b:00.0    8c:00.0 060400 1000:c010 1000:a096 pcieport
8c:00.0    8d:00.0 020000 15b3:101b 15b3:0007 mlx5_core
8b:00.0    8c:10.0 060400 1000:c010 1000:a096 pcieport
8c:10.0    8e:00.0 060400 1000:c010 10de:13b8 pcieport
8e:00.0    8f:00.0 060400 1000:c010 10de:13b8 pcieport
8f:00.0    90:00.0 030200 10de:20b0 10de:134f -
8e:00.0    8f:1f.0 060400 1000:c010 10de:13b8 pcieport
8f:1f.0    91:00.0 010700 1000:00b2 10de:13b8 mpt3sas
81:00.0    82:08.0 060400 1000:c010 1000:a096 pcieport
82:08.0    92:00.0 060400 1000:c010 1000:a096 pcieport
92:00.0    93:10.0 060400 1000:c010 1000:a096 pcieport
93:10.0    94:00.0 020000 15b3:101b 15b3:0007 mlx5_core
81:00.0    82:1c.0 060400 1000:c010 1000:a096 pcieport
82:1c.0    95:00.0 018000 1000:c010 1000:00b2 -
pcib0      b0:01.1 060400 1022:1483 1022:1453 pcieport
b0:01.1    b1:00.0 060400 1000:c010 1000:a096 pcieport
b1:00.0    b2:00.0 060400 1000:c010 1000:a096 pcieport
b2:00.0    b3:00.0 060400 1000:c010 1000:a096 pcieport
b3:00.0    b4:00.0 060400 1000:c010 1000:a096 pcieport
b4:00.0    b5:00.0 060400 1000:c010 10de:13b8 pcieport
b5:00.0    b6:00.0 060400 1000:c010 10de:13b8 pcieport
b6:00.0    b7:00.0 030200 10de:20b0 10de:134f -
b1:00.0    b2:04.0 060400 1000:c010 1000:a096 pcieport
b2:04.0    b8:00.0 060400 1000:c010 1000:a096 pcieport
b8:00.0    b9:00.0 060400 1000:c010 1000:a096 pcieport
b9:00.0    ba:00.0 020700 15b3:101b 15b3:0007 mlx5_core
b8:00.0    b9:10.0 060400 1000:c010 1000:a096 pcieport
b9:10.0    bb:00.0 060400 1000:c010 10de:13b8 pcieport
bb:00.0    bc:00.0 060400 1000:c010 10de:13b8 pcieport
bc:00.0    bd:00.0 030200 10de:20b0 10de:134f -
b1:00.0    b2:08.0 060400 1000:c010 1000:a096 pcieport
b2:08.0    be:00.0 060400 1000:c010 1000:a096 pcieport
be:00.0    bf:00.0 060400 1000:c010 1000:a096 pcieport
bf:00.0    c0:00.0 060400 1000:c010 10de:13b8 pcieport
c0:00.0    c1:00.0 060400 1000:c010 10de:13b8 pcieport
c1:00.0    c2:00.0 060400 10b5:8725 10de:13b8 pcieport
c2:00.0    c3:01.0 060400 10b5:8725 10de:13b8 pcieport
c3:01.0    c4:00.0 068000 10de:1af1 10de:13b8 -
c2:00.0    c3:02.0 060400 10b5:8725 10de:13b8 pcieport
c3:02.0    c5:00.0 068000 10de:1af1 10de:13b8 -
c2:00.0    c3:03.0 060400 10b5:8725 10de:13b8 pcieport
c3:03.0    c6:00.0 068000 10de:1af1 10de:13b8 -
c2:00.0    c3:04.0 060400 10b5:8725 10de:13b8 pcieport
c3:04.0    c7:00.0 068000 10de:1af1 10de:13b8 -
c2:00.0    c3:0b.0 060400 10b5:8725 10de:13b8 pcieport
c3:0b.0    c8:00.0 068000 10de:1af1 10de:13b8 -
c2:00.0    c3:0c.0 060400 10b5:8725 10de:13b8 pcieport
c3:0c.0    c9:00.0 068000 10de:1af1 10de:13b8 -
be:00.0    bf:04.0 060400 1000:c010 1000:a096 pcieport
bf:04.0    ca:00.0 010802 144d:a824 144d:a801 nvme
be:00.0    bf:08.0 060400 1000:c010 1000:a096 pcieport
be:00.0    bf:10.0 060400 1000:c010 1000:a096 pcieport
bf:10.0    cc:00.0 020000 15b3:101b 15b3:0007 mlx5_core
b1:00.0    b2:1c.0 060400 1000:c010 1000:a096 pcieport
b2:1c.0    cd:00.0 018000 1000:c010 1000:00b2 -
pcie0      e0:03.1 060400 1022:1483 1022:1453 pcieport
e0:03.1    e1:00.0 020000 15b3:101b 15b3:0009 mlx5_core
e0:03.1    e1:00.1 020000 15b3:101b 15b3:0009 mlx5_core
"""

DGX_B200_TREE = """\
pci00      00:0d.0 060400 8086:1bbd 8086:7270 pcieport
00:0d.0    05:00.0 020700 15b3:1021 15b3:0087 mlx5_core
00:0d.0    05:00.1 020700 15b3:1021 15b3:0087 mlx5_core
00:0d.0    05:00.2 020700 15b3:1021 15b3:0087 mlx5_core
00:0d.0    05:00.3 020700 15b3:1021 15b3:0087 mlx5_core
pci15      15:01.0 060400 8086:352a 8086:0000 pcieport
15:01.0    16:00.0 060400 15b3:1979 0000:0000 pcieport
16:00.0    17:00.0 060400 15b3:1979 0000:0000 pcieport
17:00.0    18:00.0 020700 15b3:1021 15b3:0050 mlx5_core
16:00.0    17:02.0 060400 15b3:1979 0000:0000 pcieport
17:02.0    19:00.0 060400 15b3:1979 0000:0000 pcieport
19:00.0    1a:00.0 060400 15b3:1979 0000:0000 pcieport
1a:00.0    1b:00.0 030200 10de:2901 10de:1999 -
pci24      24:01.0 060400 8086:352a 8086:0000 pcieport
24:01.0    25:00.0 060400 1000:c030 1000:0072 pcieport
25:00.0    26:00.0 060400 1000:c030 1000:1003 pcieport
26:00.0    27:00.0 060400 1000:c030 1000:1003 pcieport
27:00.0    28:00.0 060400 1000:c030 1000:0072 pcieport
28:00.0    29:00.0 020700 15b3:a2dc 15b3:0008 mlx5_core
28:00.0    29:00.1 020000 15b3:a2dc 15b3:0008 mlx5_core
28:00.0    29:00.2 080100 15b3:c2d5 15b3:0008 -
27:00.0    28:10.0 060400 1000:c030 1000:0072 pcieport
28:10.0    2a:00.0 010802 1e0f:0013 1e0f:004a nvme
27:00.0    28:14.0 060400 1000:c030 1000:0072 pcieport
28:14.0    2b:00.0 010802 1e0f:0013 1e0f:004a nvme
27:00.0    28:18.0 060400 1000:c030 1000:0072 pcieport
28:18.0    2c:00.0 010802 1e0f:0013 1e0f:004a nvme
27:00.0    28:1c.0 060400 1000:c030 1000:0072 pcieport
28:1c.0    2d:00.0 010802 1e0f:0013 1e0f:004a nvme
25:00.0    26:08.0 060400 1000:c030 1000:1003 -
26:08.0    2e:00.0 060400 1000:c030 1000:1003 pcieport
2e:00.0    2f:10.0 060400 1000:c030 1000:0072 pcieport
25:00.0    26:0c.0 060400 1000:c030 1000:1003 -
26:0c.0    31:00.0 060400 1000:c030 1000:1003 pcieport
25:00.0    26:10.0 060400 1000:c030 1000:1003 -
26:10.0    33:00.0 060400 1000:c030 1000:1003 pcieport
33:00.0    34:00.0 060400 1000:c030 1000:0072 pcieport
pci3d      3d:01.0 060400 8086:352a 8086:0000 pcieport
3d:01.0    3e:00.0 060400 15b3:1979 0000:0000 pcieport
3e:00.0    3f:00.0 060400 15b3:1979 0000:0000 pcieport
3f:00.0    40:00.0 020700 15b3:1021 15b3:0050 mlx5_core
3e:00.0    3f:02.0 060400 15b3:1979 0000:0000 pcieport
3f:02.0    41:00.0 060400 15b3:1979 0000:0000 pcieport
41:00.0    42:00.0 060400 15b3:1979 0000:0000 pcieport
42:00.0    43:00.0 030200 10de:2901 10de:1999 -
pci4c      4c:01.0 060400 8086:352a 8086:0000 pcieport
4c:01.0    4d:00.0 060400 15b3:1979 0000:0000 pcieport
4d:00.0    4e:00.0 060400 15b3:1979 0000:0000 pcieport
4e:00.0    4f:00.0 020700 15b3:1021 15b3:0050 mlx5_core
4d:00.0    4e:02.0 060400 15b3:1979 0000:0000 pcieport
4e:02.0    50:00.0 060400 15b3:1979 0000:0000 pcieport
50:00.0    51:00.0 060400 15b3:1979 0000:0000 pcieport
51:00.0    52:00.0 030200 10de:2901 10de:1999 -
pci5b      5b:01.0 060400 8086:352a 8086:0000 pcieport
5b:01.0    5c:00.0 060400 15b3:1979 0000:0000 pcieport
5c:00.0    5d:00.0 060400 15b3:1979 0000:0000 pcieport
5d:00.0    5e:00.0 020700 15b3:1021 15b3:0050 mlx5_core
5c:00.0    5d:02.0 060400 15b3:1979 0000:0000 pcieport
5d:02.0    5f:00.0 060400 15b3:1979 0000:0000 pcieport
5f:00.0    60:00.0 060400 15b3:1979 0000:0000 pcieport
60:00.0    61:00.0 030200 10de:2901 10de:1999 -
pci80      80:05.0 060400 8086:352c 8086:0000 pcieport
80:05.0    82:00.0 020000 8086:1592 8086:0002 ice
80:05.0    82:00.1 020000 8086:1592 8086:0002 ice
pci97      97:01.0 060400 8086:352a 8086:0000 pcieport
97:01.0    98:00.0 060400 15b3:1979 0000:0000 pcieport
98:00.0    99:00.0 060400 15b3:1979 0000:0000 pcieport
99:00.0    9a:00.0 020700 15b3:1021 15b3:0050 mlx5_core
98:00.0    99:02.0 060400 15b3:1979 0000:0000 pcieport
99:02.0    9b:00.0 060400 15b3:1979 0000:0000 pcieport
9b:00.0    9c:00.0 060400 15b3:1979 0000:0000 pcieport
9c:00.0    9d:00.0 030200 10de:2901 10de:1999 -
pcia5      a5:01.0 060400 8086:352a 8086:0000 pcieport
a5:01.0    a6:00.0 060400 1000:c030 1000:0072 pcieport
a6:00.0    a7:00.0 060400 1000:c030 1000:1003 pcieport
a7:00.0    a8:00.0 060400 1000:c030 1000:1003 pcieport
a8:00.0    a9:00.0 060400 1000:c030 1000:0072 pcieport
a9:00.0    aa:00.0 020700 15b3:a2dc 15b3:0008 mlx5_core
a9:00.0    aa:00.1 020000 15b3:a2dc 15b3:0008 mlx5_core
a9:00.0    aa:00.2 080100 15b3:c2d5 15b3:0008 -
a8:00.0    a9:10.0 060400 1000:c030 1000:0072 pcieport
a9:10.0    ab:00.0 010802 1e0f:0013 1e0f:004a nvme
a8:00.0    a9:14.0 060400 1000:c030 1000:0072 pcieport
a9:14.0    ac:00.0 010802 1e0f:0013 1e0f:004a nvme
a8:00.0    a9:18.0 060400 1000:c030 1000:0072 pcieport
a9:18.0    ad:00.0 010802 1e0f:0013 1e0f:004a nvme
a8:00.0    a9:1c.0 060400 1000:c030 1000:0072 pcieport
a9:1c.0    ae:00.0 010802 1e0f:0013 1e0f:004a nvme
a6:00.0    a7:08.0 060400 1000:c030 1000:1003 -
a7:08.0    af:00.0 060400 1000:c030 1000:1003 pcieport
af:00.0    b0:10.0 060400 1000:c030 1000:0072 pcieport
a6:00.0    a7:0c.0 060400 1000:c030 1000:1003 -
a7:0c.0    b2:00.0 060400 1000:c030 1000:1003 pcieport
a6:00.0    a7:10.0 060400 1000:c030 1000:1003 -
a7:10.0    b4:00.0 060400 1000:c030 1000:1003 pcieport
b4:00.0    b5:00.0 060400 1000:c030 1000:0072 pcieport
pcibd      bd:01.0 060400 8086:352a 8086:0000 pcieport
bd:01.0    be:00.0 060400 15b3:1979 0000:0000 pcieport
be:00.0    bf:00.0 060400 15b3:1979 0000:0000 pcieport
bf:00.0    c0:00.0 020700 15b3:1021 15b3:0050 mlx5_core
be:00.0    bf:02.0 060400 15b3:1979 0000:0000 pcieport
bf:02.0    c1:00.0 060400 15b3:1979 0000:0000 pcieport
c1:00.0    c2:00.0 060400 15b3:1979 0000:0000 pcieport
c2:00.0    c3:00.0 030200 10de:2901 10de:1999 -
pcicb      cb:01.0 060400 8086:352a 8086:0000 pcieport
cb:01.0    cc:00.0 060400 15b3:1979 0000:0000 pcieport
cc:00.0    cd:00.0 060400 15b3:1979 0000:0000 pcieport
cd:00.0    ce:00.0 020700 15b3:1021 15b3:0050 mlx5_core
cc:00.0    cd:02.0 060400 15b3:1979 0000:0000 pcieport
cd:02.0    cf:00.0 060400 15b3:1979 0000:0000 pcieport
cf:00.0    d0:00.0 060400 15b3:1979 0000:0000 pcieport
d0:00.0    d1:00.0 030200 10de:2901 10de:1999 -
pcid9      d9:01.0 060400 8086:352a 8086:0000 pcieport
d9:01.0    da:00.0 060400 15b3:1979 0000:0000 pcieport
da:00.0    db:00.0 060400 15b3:1979 0000:0000 pcieport
db:00.0    dc:00.0 020700 15b3:1021 15b3:0050 mlx5_core
da:00.0    db:02.0 060400 15b3:1979 0000:0000 pcieport
db:02.0    dd:00.0 060400 15b3:1979 0000:0000 pcieport
dd:00.0    de:00.0 060400 15b3:1979 0000:0000 pcieport
de:00.0    df:00.0 030200 10de:2901 10de:1999 -
"""

# EPYC 7742 NPS4: NUMA node of each root complex (see PROVENANCE above).
A100_NUMA = {"pci0000:00": 3, "pci0000:20": 2, "pci0000:40": 1, "pci0000:60": 0,
             "pci0000:80": 7, "pci0000:a0": 6, "pci0000:b0": 5, "pci0000:e0": 4}


def fx_gpu_dgx_a100() -> Fixture:
    """DGX A100 with its GPUs, PCIe switches, NVSwitches and CPUs (see PROVENANCE)."""
    fx = Fixture("gpu-dgx-a100")
    fx.host.cpu_topology(sockets=2, cores_per_socket=64, threads_per_core=2,
                         nodes_per_socket=4, mem_per_node_kb=131_000_000)
    nics = [p.rsplit("/", 1)[1] for p, *_ in A100_NICS] + ["0000:e1:00.0", "0000:e1:00.1"]
    lay_out_tree(fx, DGX_A100_TREE, A100_NUMA, gpu_model="a100", skip=nics)
    a100_nics(fx, A100_NUMA)
    return fx


def fx_gpu_dgx_b200() -> Fixture:
    """DGX B200 with its GPUs, bridges, 16 mlx5 and 2 irdma devices (see PROVENANCE)."""
    fx = Fixture("gpu-dgx-b200")
    fx.host.cpu_topology(sockets=2, cores_per_socket=56, threads_per_core=2,
                         mem_per_node_kb=1_056_000_000)
    hbs = {e[0] for e in tree_entries(DGX_B200_TREE) if e[0].startswith("pci")}
    numa = {hb: 0 if int(hb[-2:], 16) < 0x80 else 1 for hb in hbs}
    nics = [e[0].rsplit("/", 1)[1] for e in B200_MLX5] + ["0000:82:00.0", "0000:82:00.1"]
    lay_out_tree(fx, DGX_B200_TREE, numa, gpu_model="b200", skip=nics)
    ifindex = 4
    for entry in B200_MLX5:
        b200_function(fx, entry, ifindex=ifindex, mad=False)
        if entry[5]:
            ifindex += 1
    e810(fx, "/devices/pci0000:80/0000:80:05.0/0000:82:00.0", "irdma0", 16, aux_index=1,
         ifname="ens6f0np0", mac="6c:fe:54:9c:5c:48", ifindex=ifindex, numa=1, sub=0x0002)
    e810(fx, "/devices/pci0000:80/0000:80:05.0/0000:82:00.1", "irdma1", 17, aux_index=2,
         ifname="ens6f1np1", mac="6c:fe:54:9c:5c:49", ifindex=ifindex + 1, numa=1,
         sub=0x0002, port_state=("1: DOWN", "3: Disabled"))
    return fx


def switch_pair(fx: Fixture, usp_bus: int, numa: int, *, gpu_model: str, nic_index: int,
                root: tuple[int, int] = (0x8086, 0x352A),
                switch: tuple[int, int] = (0x1000, 0xC030),
                gpu_bridges: tuple[int, int] | None = None) -> tuple[str, str]:
    """A host bridge pci0000:<usp_bus-1> with one root port, a PCIe switch (upstream
    port on usp_bus), a GPU on its first downstream port (behind the GPU's own
    bridge pair ``gpu_bridges`` = (upstream, downstream) device ids, if any) and a
    ConnectX-7 (mlx5_<nic_index>) on the second.  Returns (GPU path, NIC path)."""
    host = fx.host
    hb_bus = usp_bus - 1
    hb = host.host_bridge(f"pci0000:{hb_bus:02x}", numa_node=numa)
    rp = host.pci_bridge(f"{hb}/0000:{hb_bus:02x}:01.0", port="root", vendor=root[0],
                         device=root[1], sub_vendor=root[0], sub_device=0)
    usp = host.pci_bridge(f"{rp}/0000:{usp_bus:02x}:00.0", port="upstream",
                          vendor=switch[0], device=switch[1])
    dsp_bus = usp_bus + 1
    dsp_gpu = host.pci_bridge(f"{usp}/0000:{dsp_bus:02x}:00.0", vendor=switch[0],
                              device=switch[1])
    dsp_nic = host.pci_bridge(f"{usp}/0000:{dsp_bus:02x}:01.0", vendor=switch[0],
                              device=switch[1])
    gpu_parent, gpu_bus = dsp_gpu, dsp_bus + 1
    if gpu_bridges is not None:
        up = host.pci_bridge(f"{dsp_gpu}/0000:{gpu_bus:02x}:00.0", port="upstream",
                             vendor=0x1002, device=gpu_bridges[0])
        gpu_parent = host.pci_bridge(f"{up}/0000:{gpu_bus + 1:02x}:00.0", vendor=0x1002,
                                     device=gpu_bridges[1])
        gpu_bus += 2
    gpu = host.gpu(f"{gpu_parent}/0000:{gpu_bus:02x}:00.0", model=gpu_model)
    nic_bus = gpu_bus + 1
    nic = f"{dsp_nic}/0000:{nic_bus:02x}:00.0"
    guid = guid_fmt(0xA088C20300E40000 + 0x100 * nic_index)
    mlx5_function(fx, nic, 0x1021, 0x0023, index=nic_index, uverbs=nic_index, node_guid=guid,
                  sys_image_guid=guid, numa=numa,
                  port=ib_port(guid, hex(0x21 + nic_index), "0x1", NDR),
                  netdev=f"ibp{nic_bus}s0", ifindex=4 + nic_index, **CX7)
    return gpu, nic


def fx_gpu_hgx_h100() -> Fixture:
    """HGX H100: eight GPU/ConnectX-7 pairs, each on one PCIe switch of its own host
    bridge, four per socket, and four NVSwitches (see PROVENANCE)."""
    fx = Fixture("gpu-hgx-h100")
    fx.host.cpu_topology(sockets=2, cores_per_socket=48, threads_per_core=2,
                         mem_per_node_kb=1_056_000_000)
    host = fx.host
    hb = host.host_bridge("pci0000:00", numa_node=0)
    rp = host.pci_bridge(f"{hb}/0000:00:01.0", port="root", vendor=0x8086, device=0x352A)
    usp = host.pci_bridge(f"{rp}/0000:03:00.0", port="upstream", vendor=0x1000,
                          device=0xC030)
    for n in range(4):
        dsp = host.pci_bridge(f"{usp}/0000:04:{n:02x}.0", vendor=0x1000, device=0xC030)
        host.pci_device(f"{dsp}/0000:{5 + n:02x}:00.0", vendor=0x10DE, device=0x22A3,
                        pci_class=0x068000, driver="nvidia", sub_vendor=0x10DE,
                        sub_device=0x1796)
    for i, usp_bus in enumerate((0x17, 0x37, 0x47, 0x57, 0x97, 0xB6, 0xC7, 0xD7)):
        switch_pair(fx, usp_bus, 0 if i < 4 else 1, gpu_model="h100", nic_index=i)
    return fx


def fx_gpu_mi300x() -> Fixture:
    """Eight AMD Instinct MI300X, each behind its bridge pair on a PCIe switch shared
    with a ConnectX-7, four per socket (constructed, see PROVENANCE)."""
    fx = Fixture("gpu-mi300x")
    fx.host.cpu_topology(sockets=2, cores_per_socket=96, threads_per_core=1,
                         mem_per_node_kb=1_150_000_000)
    for i, usp_bus in enumerate((0x05, 0x15, 0x25, 0x35, 0x85, 0x95, 0xA5, 0xB5)):
        switch_pair(fx, usp_bus, 0 if i < 4 else 1, gpu_model="mi300x", nic_index=i,
                    root=(0x1022, 0x14AB), gpu_bridges=(0x14A0, 0x14A1))
    return fx


def fx_gpu_pcie_2socket() -> Fixture:
    """A 2-socket PCIe server: four RTX 6000 Ada (with their audio functions) on
    both sockets, one dual-port ConnectX-7 on socket 0 (see PROVENANCE)."""
    fx = Fixture("gpu-pcie-2socket")
    host = fx.host
    host.cpu_topology(sockets=2, cores_per_socket=32, threads_per_core=1,
                      mem_per_node_kb=197_000_000, distances=[[10, 32], [32, 10]])
    for bus, numa in ((0x00, 0), (0x40, 0), (0xC0, 1), (0xE0, 1)):
        hb = host.host_bridge(f"pci0000:{bus:02x}", numa_node=numa)
        rp = host.pci_bridge(f"{hb}/0000:{bus:02x}:01.1", port="root", vendor=0x1022,
                             device=0x14AB, sub_vendor=0x1022, sub_device=0x1453)
        gpu = host.gpu(f"{rp}/0000:{bus + 1:02x}:00.0", model="rtx6000ada")
        host.pci_device(gpu[:-1] + "1", vendor=0x10DE, device=0x22BA, pci_class=0x040300,
                        driver="snd_hda_intel", sub_vendor=0x10DE, sub_device=0x16A1)
    hb = host.host_bridge("pci0000:20", numa_node=0)
    rp = host.pci_bridge(f"{hb}/0000:20:03.1", port="root", vendor=0x1022, device=0x14AB,
                         sub_vendor=0x1022, sub_device=0x1453)
    for fn in range(2):
        mac = f"94:6d:ae:8c:4e:{0x40 + fn:02x}"
        netdev = f"enp33s0f{fn}np{fn}"
        mlx5_function(fx, f"{rp}/0000:21:00.{fn}", 0x1021, 0x0041, index=fn, uverbs=fn,
                      node_guid=mlx_guid(mac), sys_image_guid=mlx_guid(mac.replace("41", "40")),
                      port=roce_port(mac, netdev, "200 Gb/sec (2X NDR)"), numa=0,
                      netdev=netdev, ifindex=4 + fn, mac=mac, **CX7)
    return fx


def fx_gpu_cloud_vm() -> Fixture:
    """A KVM guest: every device on a root port of pci0000:00, numa_node -1, eight
    H200 and four ConnectX-7 (see PROVENANCE)."""
    fx = Fixture("gpu-cloud-vm")
    host = fx.host
    host.cpu_topology(sockets=1, cores_per_socket=48, threads_per_core=2,
                      mem_per_node_kb=1_500_000_000)
    hb = host.host_bridge("pci0000:00", numa_node=-1)
    ports = [(1, f) for f in range(8)] + [(2, f) for f in range(8)]
    for n, (dev, fn) in enumerate(ports[:16]):
        bus = n + 1
        rp = host.pci_bridge(f"{hb}/0000:00:{dev:02x}.{fn}", port="root", vendor=0x1B36,
                             device=0x000C, sub_vendor=0x1B36, sub_device=0x0000,
                             revision=0)
        path = f"{rp}/0000:{bus:02x}:00.0"
        if n == 0:
            host.pci_device(path, vendor=0x1AF4, device=0x1041, pci_class=0x020000,
                            driver="virtio-pci", sub_vendor=0x1AF4, sub_device=0x1100)
        elif n in (1, 2, 3):
            cls, dv = ((0x0C0330, 0x000D), (0x078000, 0x1043), (0x010000, 0x1042))[n - 1]
            host.pci_device(path, vendor=0x1B36 if n == 1 else 0x1AF4, device=dv,
                            pci_class=cls, driver="xhci_hcd" if n == 1 else "virtio-pci")
        elif n < 12:
            host.gpu(path, model="h200")
        else:
            index = n - 12
            guid = guid_fmt(0xA088C20300E50000 + 0x100 * index)
            mlx5_function(fx, path, 0x1021, 0x0023, index=index, uverbs=index,
                          node_guid=guid, sys_image_guid=guid, numa=-1,
                          port=ib_port(guid, hex(0x31 + index), "0x1", NDR),
                          netdev=f"ibp{bus}s0", ifindex=4 + index, **CX7)
    return fx


def fx_gpu_sriov_sf() -> Fixture:
    """VFs, SFs, a bond, irdma and VMD on one host with a GPU (constructed, see
    PROVENANCE)."""
    fx = Fixture("gpu-sriov-sf")
    host = fx.host
    host.cpu_topology(sockets=1, cores_per_socket=16, threads_per_core=2,
                      mem_per_node_kb=257_000_000)
    hb = host.host_bridge("pci0000:00", numa_node=0)
    rp = host.pci_bridge(f"{hb}/0000:00:01.0", port="root", vendor=0x8086, device=0x352A)
    usp = host.pci_bridge(f"{rp}/0000:01:00.0", port="upstream")
    dsp_gpu = host.pci_bridge(f"{usp}/0000:02:00.0")
    dsp_nic = host.pci_bridge(f"{usp}/0000:02:01.0")
    host.gpu(f"{dsp_gpu}/0000:03:00.0", model="l40s")
    host.mlx5(path=f"{dsp_nic}/0000:04:00.0", model="cx7", vfs=4, sfs=2,
              link_layer="Ethernet", netdev="enp4s0f0np0")
    host.mlx5(path=f"{dsp_nic}/0000:04:00.1", model="cx7", link_layer="Ethernet")
    rp2 = host.pci_bridge(f"{hb}/0000:00:02.0", port="root", vendor=0x8086, device=0x352A)
    host.mlx5_bond([f"{rp2}/0000:05:00.0", f"{rp2}/0000:05:00.1"])
    rp3 = host.pci_bridge(f"{hb}/0000:00:03.0", port="root", vendor=0x8086, device=0x352A)
    host.irdma(path=f"{rp3}/0000:06:00.0")
    vmd = host.pci_device(f"{hb}/0000:00:0e.0", vendor=0x8086, device=0x28C0,
                          pci_class=0x010400, driver="vmd")
    vhb = host.host_bridge("pci10000:e0", numa_node=0, parent=vmd)
    vrp = host.pci_bridge(f"{vhb}/10000:e0:1d.0", port="root", vendor=0x8086, device=0x352B)
    host.pci_device(f"{vrp}/10000:e1:00.0", vendor=0x144D, device=0xA80A, pci_class=0x010802,
                    driver="nvme", sub_vendor=0x144D, sub_device=0xA801)
    return fx


def fx_empty() -> Fixture:
    """ib_uverbs loaded, no RDMA device: only /sys/class/infiniband_verbs/abi_version."""
    return Fixture("empty")


FIXTURES = {
    "azure-vf": fx_azure_vf,
    "bluefield3": fx_bluefield3,
    "bnxt_re": fx_bnxt_re,
    "cxgb4": fx_cxgb4,
    "dgx-a100": fx_dgx_a100,
    "dgx-demo": fx_dgx_demo,
    "efa": fx_efa,
    "empty": fx_empty,
    "erdma": fx_erdma,
    "gpu-cloud-vm": fx_gpu_cloud_vm,
    "gpu-dgx-a100": fx_gpu_dgx_a100,
    "gpu-dgx-b200": fx_gpu_dgx_b200,
    "gpu-hgx-h100": fx_gpu_hgx_h100,
    "gpu-mi300x": fx_gpu_mi300x,
    "gpu-pcie-2socket": fx_gpu_pcie_2socket,
    "gpu-sriov-sf": fx_gpu_sriov_sf,
    "hfi1": fx_hfi1,
    "hns": fx_hns,
    "ionic": fx_ionic,
    "irdma": fx_irdma,
    "mana": fx_mana,
    "mlx4": fx_mlx4,
    "mlx5-cx6": fx_mlx5_cx6,
    "mlx5-cx7": fx_mlx5_cx7,
    "mlx5-sf": fx_mlx5_sf,
    "mlx5-sriov": fx_mlx5_sriov,
    "mthca": fx_mthca,
    "ocrdma": fx_ocrdma,
    "qedr": fx_qedr,
    "qib": fx_qib,
    "rxe": fx_rxe,
    "siw": fx_siw,
    "smi": fx_smi,
    "usnic": fx_usnic,
    "vmw_pvrdma": fx_vmw_pvrdma,
}


def render(name: str) -> str:
    text = dumps(FIXTURES[name]().recording())
    parse(text)  # what we write must be valid
    return text


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare with the checked-in files instead of writing")
    ap.add_argument("--out", type=Path, default=OUT_DIR, help="output directory")
    ap.add_argument("names", nargs="*", help="fixtures to write (default: all)")
    args = ap.parse_args(argv)
    names = args.names or sorted(FIXTURES)
    stale = []
    for name in names:
        text = render(name)
        path = args.out / f"{name}.umockdev"
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

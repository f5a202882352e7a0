"""Fixture hosts of the RDMA vendors other than Mellanox/NVIDIA (Intel E810 and
Omni-Path, Amazon EFA, Broadcom, HiSilicon, Alibaba, Marvell/QLogic, Chelsio, Emulex,
VMware, Microsoft, AMD Pensando, Cisco) and of the software devices (rxe, siw)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sysverbs.testing.layout import ETH_CLASS, Port
from sysverbs.testing.layout import guid_text as guid_fmt

from .builder import (
    ABI,
    LINK_LOCAL,
    ZERO_GID,
    Fixture,
    eui64,
    gid,
    ib_port,
    ipoib_addr,
    iwarp_port,
    mac_bytes,
    roce_port,
    t,
)


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

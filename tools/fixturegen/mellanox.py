"""Fixture hosts with Mellanox/NVIDIA NICs: mlx5 (ConnectX-4 to -8, BlueField-3,
SR-IOV VFs, a sub-function, Azure VFs, the XDR SMI device), mlx4 and mthca, and the DGX
A100 and DGX B200 hosts of the udev captures."""

from __future__ import annotations

from collections.abc import Iterable

from sysverbs.testing.layout import ETH_CLASS, IB_CLASS, Port
from sysverbs.testing.layout import guid_text as guid_fmt

from .builder import ABI, Fixture, hostname, ib_port, ipoib_addr, mlx_guid, roce_port, t
from .vendors import e810, rxe, simple_pci_rdma

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

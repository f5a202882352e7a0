"""Grace hosts for :class:`~sysverbs.testing.HostBuilder`: a GB200 NVL72 compute tray
(ConnectX-7 + BlueField-3), a GB300 NVL72 compute tray (ConnectX-8 Data Direct), a DGX
Station GB300 and a GH200, each a function returning the builder (``GRACE_HOSTS``).

Every address, id and name comes from a public capture or vendor document (the
sources are listed in docs/placement.md, "Grace and Data Direct"); what none shows is
marked ``choice`` below.  The layouts, as rdma-core's ``kernel-boot/rdma_topo`` names
them:

* DMA-based (GB300, DGX Station GB300): each GPU at ``<D>:06:00.0`` behind a ConnectX-8
  PCIe switch (15b3:197c) under a Grace root port ``<D>:00:00.0``, beside the CX-8's
  Data Direct DMA function ``<D>:03:00.0`` (15b3:2100, class 0x080100, no infiniband/
  or net/ child); the CX-8's RDMA PFs in other PCI domains.  The PF and its DMA
  function share the VPD ``V3`` keyword (read only by root), the one sysfs fact that
  ties them.
* NUMA-based (GB200 with CX-7, GH200): each GPU alone under its own Grace root port,
  the NICs in other domains of the same NUMA node.

GPU memory is CPU-less NUMA nodes (8 per GPU on GB200/GB300, HBM in the first);
a GPU's PCI ``numa_node`` is its CPU node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

from .builder import HostBuilder
from .layout import Port, Value, net_attrs, net_device, port_files, roce_gids

__all__ = ["GRACE_HOSTS", "vpd_image", "endpoint_config", "gb200_nvl72_tray",
           "gb300_nvl72_tray", "dgx_station_gb300", "gh200", "inline_cx_switch", "OTHER_HOSTS",
           "oci_gb300_tray", "VARIANTS"]

GRACE_RP = 0x22B1  # choice: rdma_topo knows 10de:22b1/22b2/22b8; no capture says which
CX_SWITCH = 0x197C  # the CX-8 switch ports of NCCL's GB300 topology dump
CX_DMA = 0x2100  # the ConnectX-8 Data Direct DMA function
DMA_CLASS = 0x080100
_MB = 1024  # kB


def vpd_image(name: str, keywords: Mapping[str, str]) -> bytes:
    """A PCI VPD image: the identifier string, a read-only (VPD-R) section with
    ``keywords`` and its ``RV`` checksum, the end tag (PCI Local Bus spec, VPD)."""
    ident = name.encode()
    body = b"".join(k.encode() + bytes((len(v),)) + v.encode() for k, v in keywords.items())
    head = bytes((0x82, len(ident) & 0xFF, len(ident) >> 8)) + ident
    ro_len = len(body) + 4  # RV: key, length 1, the checksum byte
    ro = bytes((0x90, ro_len & 0xFF, ro_len >> 8)) + body + b"RV\x01"
    checksum = (-sum(head + ro)) & 0xFF
    return head + ro + bytes((checksum, 0x78))


def endpoint_config(vendor: int, device: int, pci_class: int, revision: int = 0) -> bytes:
    """64 bytes of a type-0 config header (what an unprivileged reader gets): ids,
    class, revision; no capability."""
    cfg = bytearray(64)
    cfg[0:4] = vendor.to_bytes(2, "little") + device.to_bytes(2, "little")
    cfg[8] = revision
    cfg[9:12] = pci_class.to_bytes(3, "little")
    return bytes(cfg)


def _grace_numa(b: HostBuilder, gpus: int, *, sockets: int, hbm_kb: int,
                lpddr_kb: int) -> None:
    """CPUs (72 Neoverse V2 cores per Grace, one thread each) and ``8 * gpus``
    CPU-less nodes after the CPU nodes, the first of each GPU's eight holding its HBM
    (GB200: 2, 10, 18, 26 of 34; GH200: 1 of 9)."""
    first = sockets
    memory = {first + i: (hbm_kb if i % 8 == 0 else 0) for i in range(8 * gpus)}
    b.cpu_topology(sockets=sockets, cores_per_socket=72, mem_per_node_kb=lpddr_kb,
                   memory_nodes=memory, caches="grace")


def _root(b: HostBuilder, domain: str, numa: int) -> str:
    hb = b.host_bridge(f"pci{domain}:00", numa_node=numa)
    return b.pci_bridge(f"{hb}/{domain}:00:00.0", port="root", vendor=0x10DE,
                        device=GRACE_RP, link=(5, 16))


def _endpoint(b: HostBuilder, path: str, vendor: int, device: int, pci_class: int,
              vpd: bytes = b"") -> None:
    b.pci_file(path, "config", endpoint_config(vendor, device, pci_class))
    if vpd:
        b.pci_file(path, "vpd", vpd)


def _gpu(b: HostBuilder, path: str, model: str, hbm_node: int) -> None:
    from .builder_tables import GPU_MODELS

    gm = GPU_MODELS[model]
    b.gpu(path, model=model)
    _endpoint(b, path, gm.vendor, gm.device, gm.pci_class)
    # choice: no numa_status capture was found; hwloc reads its "Node:" line
    bdf = path.rsplit("/", 1)[1]
    b.proc_file(path, f"/proc/driver/nvidia/gpus/{bdf}/numa_status", f"Node: {hbm_node}\n")


def _cx(b: HostBuilder, path: str, model: str, vpd: bytes, **options: object) -> None:
    from .builder_tables import MLX5_MODELS

    b.mlx5(model=model, path=path, **options)  # type: ignore[arg-type]
    _endpoint(b, path, 0x15B3, MLX5_MODELS[model].device, 0x020700
              if options.get("link_layer", "InfiniBand") == "InfiniBand" else 0x020000, vpd)


def _dma_segment(b: HostBuilder, domain: str, numa: int, *, gpu_dsp: str, model: str,
                 hbm_node: int, v3: str, sn: str, vpd: bool) -> None:
    """A Grace root port, the CX-8 switch, its DMA function and the GPU below it
    (DGX Station's ``rdma_topo check``; NVIDIA's LKML tree; NCCL's GB300 dump)."""
    rp = _root(b, domain, numa)
    usp = b.pci_bridge(f"{rp}/{domain}:01:00.0", port="upstream", vendor=0x15B3,
                       device=CX_SWITCH, sub_vendor=0, sub_device=0, link=(4, 1))
    dsp = b.pci_bridge(f"{usp}/{domain}:02:00.0", vendor=0x15B3, device=CX_SWITCH,
                       sub_vendor=0, sub_device=0, link=(6, 16))
    dma = b.pci_device(f"{dsp}/{domain}:03:00.0", vendor=0x15B3, device=CX_DMA,
                       pci_class=DMA_CLASS, driver="mlx5_ib", sub_vendor=0x15B3,
                       sub_device=0x0071)  # choice: subsystem id
    # choice: the DMA function's VPD product name; V3 equal to its PFs' (rdma_topo's tie)
    _endpoint(b, dma, 0x15B3, CX_DMA, DMA_CLASS,
              vpd_image("ConnectX-8 Data Direct", {"SN": sn, "V3": v3}) if vpd else b"")
    dsp_g = b.pci_bridge(f"{usp}/{domain}:{gpu_dsp}", vendor=0x15B3, device=CX_SWITCH,
                         sub_vendor=0, sub_device=0, link=(6, 16))
    usp2 = b.pci_bridge(f"{dsp_g}/{domain}:04:00.0", port="upstream", vendor=0x15B3,
                        device=CX_SWITCH, sub_vendor=0, sub_device=0, link=(6, 16))
    dsp2 = b.pci_bridge(f"{usp2}/{domain}:05:00.0", vendor=0x15B3, device=CX_SWITCH,
                        sub_vendor=0, sub_device=0, link=(6, 16))
    _gpu(b, f"{dsp2}/{domain}:06:00.0", model, hbm_node)


def _nic_segment(b: HostBuilder, domain: str, numa: int, switch: bool) -> str:
    """A root port (and with ``switch`` a switch's upstream and downstream port, the
    2-level switch of NVIDIA's GB200 lspci excerpt) for a NIC at ``<domain>:03:00.x``
    (``:01:00.x`` without); returns the parent path.  choice: the switch's ids (the
    CX switch id, as in the GPU's domain; no capture shows the PF side's)."""
    rp = _root(b, domain, numa)
    if not switch:
        return rp
    usp = b.pci_bridge(f"{rp}/{domain}:01:00.0", port="upstream", vendor=0x15B3,
                       device=CX_SWITCH, sub_vendor=0, sub_device=0)
    return b.pci_bridge(f"{usp}/{domain}:02:00.0", vendor=0x15B3, device=CX_SWITCH,
                        sub_vendor=0, sub_device=0)


def _uuid(n: int) -> str:
    return f"{0x5EB0C8D0 + n:08x}00004a2b8c3d00000000{n:04x}"  # choice: made-up V3 UUIDs


#: (GPU domain, its CX-8 PF domain, NUMA node, PF name) of a GB300 tray.  The domains,
#: NUMA nodes and names are evidenced (OCI/dranet slices, NCCL's dump, a GB300
#: ``ibstat``); which PF domain's CX-8 serves which GPU domain is a choice: no capture
#: ties a PF to a DMA function on a tray.
GB300_RAILS = (("0008", "0000", 0, "ibp3s0"), ("0009", "0002", 0, "ibP2p3s0"),
               ("0018", "0010", 1, "ibP16p3s0"), ("0019", "0012", 1, "ibP18p3s0"))


def gb300_nvl72_tray(*, vpd: bool = True, crossed: bool = False,
                     orphan: bool = False) -> HostBuilder:
    """A GB300 NVL72 compute tray: 2 Grace, 4 GB300 (10de:31c2) at
    ``00{08,09,18,19}:06:00.0``, each with a CX-8 DMA function at ``<D>:03:00.0``;
    the 4 CX-8 PFs (15b3:1023, InfiniBand XDR) at ``00{00,02,10,12}:03:00.0`` named as
    rdma-core's udev rules name them; a dual-port BlueField-3 (Ethernet, ``roceP22p1s0f0``)
    at ``0016:01:00.x`` and one at ``0006:01:00.x`` (choice: mirrors socket 1's); 34
    NUMA nodes.  ``vpd=False``: no ``vpd`` files (what a reader without root sees: the
    PF-DMA link cannot be resolved).  ``crossed``: each socket's two CX-8s serve the
    GPUs the other way round (the PF in 0000 the GPU in 0009...): no capture says which
    way a tray is wired, so pairing must follow the tie, not the addresses.
    ``orphan``: the last CX-8's PF carries a V3 no DMA function has (a board swapped
    without its DMA function, or VPD misread): that GPU's DMA function resolves to no
    PF, the other three do."""
    b = HostBuilder()
    _grace_numa(b, 4, sockets=2, hbm_kb=279 << 20, lpddr_kb=489960 * _MB)  # choice: HBM
    for i, (gdom, _, numa, _) in enumerate(GB300_RAILS):
        gpu_dsp = "02:03.0"  # NVIDIA's LKML tree of a GB tray
        _dma_segment(b, gdom, numa, gpu_dsp=gpu_dsp, model="gb300", hbm_node=2 + 8 * i,
                     v3=_uuid(i), sn=f"MT2451X0{i:04d}", vpd=vpd)  # choice: serials
    # The RDMA devices in PCI order, the kernel's probe (and uverbs) order.
    nics = [(pdom, numa, i, name) for i, (_, pdom, numa, name) in enumerate(GB300_RAILS)]
    nics += [("0006", 0, -1, "P6"), ("0016", 1, -1, "P22")]
    for dom, numa, i, name in sorted(nics):
        if i < 0:  # a BlueField-3
            parent = _nic_segment(b, dom, numa, False)
            for fn in (0, 1):
                _cx(b, f"{parent}/{dom}:01:00.{fn}", "bf3", b"", name=f"roce{name}p1s0f{fn}",
                    link_layer="Ethernet")
            continue
        parent = _nic_segment(b, dom, numa, True)
        j = i ^ 1 if crossed else i  # the DMA function (GPU) this PF's CX-8 serves
        j = 99 if orphan and i == len(GB300_RAILS) - 1 else j
        _cx(b, f"{parent}/{dom}:03:00.0", "cx8",
            vpd_image("NVIDIA ConnectX-8", {"SN": f"MT2451X0{j:04d}", "V3": _uuid(j)})
            if vpd else b"", name=name, link_layer="InfiniBand")
    return b


def _plane_port(mac_tail: int, netdev: str) -> Port:
    """A RoCE port of a multi-plane PF (OCI's GB300.4 table: 200 Gb/s, ACTIVE):
    choice: its link-local GID from a made-up MAC."""
    gid = f"fe80:0000:0000:0000:02c5:c0ff:fe00:{mac_tail:04x}"
    return Port("Ethernet", rate="200 Gb/sec (2X NDR)", cap_mask="0x04010000",
                **roce_gids(gid, netdev, v1=False))


def oci_gb300_tray() -> HostBuilder:
    """OCI BM.GPU.GB300.4 (its dranet README's table and live ResourceSlices): the
    GB300 tray's GPUs and DMA functions, and per rail N a multi-plane CX-8: the PF
    ``<P>:03:00.0`` one RDMA device ``rdma_rail<N>`` whose four ports are the planes
    (netdev ``rdma<N>``), the other planes' functions ``.1``-``.3`` with netdevs
    ``rdma_p<k>_rail<N>`` and no RDMA device, one SR-IOV VF ``.4``
    (``rdma_vf_rail<N>``, 200 Gb/s, the device a pod claims).  choice: the PF-to-GPU
    tie (as :func:`gb300_nvl72_tray`), the VPD, GIDs and MACs; no BlueField-3."""
    b = HostBuilder()
    _grace_numa(b, 4, sockets=2, hbm_kb=279 << 20, lpddr_kb=489960 * _MB)
    for i, (gdom, _, numa, _) in enumerate(GB300_RAILS):
        _dma_segment(b, gdom, numa, gpu_dsp="02:03.0", model="gb300", hbm_node=2 + 8 * i,
                     v3=_uuid(i), sn=f"MT2451X0{i:04d}", vpd=True)
    for i, (_, dom, numa, _) in enumerate(GB300_RAILS):
        parent = _nic_segment(b, dom, numa, True)
        pf = f"{parent}/{dom}:03:00.0"
        planes = {f"{k}": _plane_port(0x100 * i + k, f"rdma_p{k}_rail{i}") for k in range(4)}
        extra: dict[str, Value] = {}
        for k in range(4):
            extra.update(port_files(k + 1, planes[f"{k}"]))
        card = vpd_image("NVIDIA ConnectX-8", {"SN": f"MT2451X0{i:04d}", "V3": _uuid(i)})
        _cx(b, pf, "cx8", card, name=f"rdma_rail{i}", link_layer="Ethernet",
            netdev=f"rdma{i}", vfs=1, vf_offset=4, vf_names=[f"rdma_vf_rail{i}"],
            ib_attrs=extra)
        for k in range(1, 4):  # choice: each function carries the card's VPD
            fn = b.pci_device(f"{parent}/{dom}:03:00.{k}", vendor=0x15B3, device=0x1023,
                              pci_class=0x020000, driver="mlx5_core", sub_vendor=0x15B3,
                              sub_device=0x0071)
            _endpoint(b, fn, 0x15B3, 0x1023, 0x020000, card)
            mac = f"02:c5:c0:00:{i:02x}:{k:02x}"
            b.add_record(net_device(fn, f"rdma_p{k}_rail{i}", 100 + 4 * i + k,
                                    net_attrs(mac, 100 + 4 * i + k)))
    return b


def dgx_station_gb300(*, vpd: bool = True) -> HostBuilder:
    """A DGX Station GB300: one Grace (CPUs 0-71), one GB300 at ``0009:06:00.0``, its
    CX-8 DMA function at ``0009:03:00.0`` and the GPU's switch port at ``0009:02:02.0``
    (NVIDIA's ``rdma_topo check`` example, NCCL's Data Direct path), the dual-port CX-8
    ``mlx5_0``/``mlx5_1`` (RoCE) at ``0001:03:00.0``/``.1`` (inferred from NCCL's OOB
    netdev ``enP1p3s0f0np0``).  choice: the bridges above the PFs, 9 NUMA nodes as on a
    GH200 (HBM in node 1), no RTX PRO display GPU (its PCI id is not in the sources)."""
    b = HostBuilder()
    _grace_numa(b, 1, sockets=1, hbm_kb=279 << 20, lpddr_kb=480 << 20)
    sn = "MT2501X00001"
    _dma_segment(b, "0009", 0, gpu_dsp="02:02.0", model="gb300", hbm_node=1,
                 v3=_uuid(9), sn=sn, vpd=vpd)
    parent = _nic_segment(b, "0001", 0, True)
    for fn in (0, 1):
        netdev = f"enP1p3s0f{fn}np{fn}"
        _cx(b, f"{parent}/0001:03:00.{fn}", "cx8",
            vpd_image("NVIDIA ConnectX-8", {"SN": sn, "V3": _uuid(9)}) if vpd else b"",
            name=f"mlx5_{fn}", link_layer="Ethernet", netdev=netdev,
            ib_attrs=_roce_gids(f"fe80:0000:0000:0000:b859:9f03:00a2:{fn + 1:04x}",
                                f"192.168.{100 + fn}.2", netdev))
    return b


def _roce_gids(link_local: str, ipv4: str, netdev: str) -> dict[str, Value]:
    """A configured RoCE port's GID table files (``ports/1/gids``, ``gid_attrs``) as
    mlx5 fills it: the link-local GID and the netdev's IPv4 address, each as RoCE v1 and
    v2 (:func:`~sysverbs.testing.layout.roce_gids`).  choice: the addresses (no source
    shows them; an addressed port, as a host that runs NCCL across machines has)."""
    port = Port("Ethernet", **roce_gids(link_local, netdev, ipv4))
    return {name: data for name, data in port_files(1, port) if "/gid" in name}


def gb200_nvl72_tray() -> HostBuilder:
    """A GB200 NVL72 compute tray: 2 Grace (CPUs 0-71, 72-143), 4 GB200 (10de:2941) at
    ``00{08,09,18,19}:01:00.0`` each alone under its Grace root port; CX-7 (InfiniBand)
    ``mlx5_0``/``1``/``4``/``5`` at ``00{00,02,10,12}:03:00.0`` behind a 2-level switch,
    BlueField-3 ``mlx5_2``/``3`` at ``0006:03:00.0``/``.1`` and ``mlx5_6``/``7`` at
    ``0016:03:00.x`` (NVIDIA's North-South deploy guide table; ``nvidia-smi topo -m``
    of a tray); 34 NUMA nodes, HBM in 2, 10, 18, 26.  choice: the BF-3's link layer
    port names and the switches' ids."""
    b = HostBuilder()
    _grace_numa(b, 4, sockets=2, hbm_kb=188416 * _MB, lpddr_kb=489960 * _MB)
    for i, dom in enumerate(("0008", "0009", "0018", "0019")):
        rp = _root(b, dom, 0 if i < 2 else 1)
        _gpu(b, f"{rp}/{dom}:01:00.0", "gb200", 2 + 8 * i)
    # In PCI order, the kernel's probe order: mlx5_N and uverbsN follow it.
    nics = (("0000", 0, ("mlx5_0",)), ("0002", 0, ("mlx5_1",)),
            ("0006", 0, ("mlx5_2", "mlx5_3")), ("0010", 1, ("mlx5_4",)),
            ("0012", 1, ("mlx5_5",)), ("0016", 1, ("mlx5_6", "mlx5_7")))
    for i, (dom, numa, names) in enumerate(nics):
        parent = _nic_segment(b, dom, numa, True)
        for fn, name in enumerate(names):
            if len(names) == 1:  # a ConnectX-7
                _cx(b, f"{parent}/{dom}:03:00.0", "cx7",
                    vpd_image("NVIDIA ConnectX-7", {"SN": f"MT2420X0{i:04d}"}), name=name,
                    link_layer="InfiniBand")
            else:
                _cx(b, f"{parent}/{dom}:03:00.{fn}", "bf3", b"", name=name,
                    link_layer="Ethernet")
    return b


def gh200() -> HostBuilder:
    """A GH200 (one Grace, CPUs 0-71, one H100 GPU 10de:2342 at ``0009:01:00.0`` under
    its Grace root port, NUMA node 0) with a dual-port CX-7 ``mlx5_0``/``mlx5_1``
    (Ethernet, ``enp1s0f0np0``/``enp1s0f1np1``) at ``0000:01:00.0``/``.1`` under root
    port ``0000:00:00.0`` (lspci, rdma link and nvidia-smi of a GH200 in a public blog);
    9 NUMA nodes, HBM in node 1 (lscpu; CUDA's GPU memory NUMA id).  choice: memory
    sizes."""
    b = HostBuilder()
    _grace_numa(b, 1, sockets=1, hbm_kb=96 << 20, lpddr_kb=480 << 20)
    rp = _root(b, "0009", 0)
    _gpu(b, f"{rp}/0009:01:00.0", "gh200", 1)
    parent = _nic_segment(b, "0000", 0, False)
    for fn in (0, 1):
        _cx(b, f"{parent}/0000:01:00.{fn}", "cx7",
            vpd_image("NVIDIA ConnectX-7", {"SN": "MT2330X00001"}), name=f"mlx5_{fn}",
            link_layer="Ethernet", netdev=f"enp1s0f{fn}np{fn}")
    return b


def inline_cx_switch() -> HostBuilder:
    """rdma_topo's third shape, "Inline": a GPU and a ConnectX-8 PF below one CX
    switch with no DMA function, on an x86 root port.  choice: all of it is the shape
    of rdma_topo's Inline matcher (rdma-core PR #1725's "a ConnectX NIC and GPU share a
    PCIe switch"), no machine's capture: a B200 and a dual-port CX-8."""
    b = HostBuilder()
    b.cpu_topology(sockets=1, cores_per_socket=8)
    hb = b.host_bridge("pci0000:00", numa_node=0)
    rp = b.pci_bridge(f"{hb}/0000:00:01.0", port="root", vendor=0x8086, device=0x352A)
    usp = b.pci_bridge(f"{rp}/0000:01:00.0", port="upstream", vendor=0x15B3,
                       device=CX_SWITCH, sub_vendor=0, sub_device=0)
    dsp_n = b.pci_bridge(f"{usp}/0000:02:00.0", vendor=0x15B3, device=CX_SWITCH,
                         sub_vendor=0, sub_device=0)
    for fn in (0, 1):
        _cx(b, f"{dsp_n}/0000:03:00.{fn}", "cx8",
            vpd_image("NVIDIA ConnectX-8", {"SN": "MT2501X00002"}), name=f"mlx5_{fn}",
            link_layer="InfiniBand")
    dsp_g = b.pci_bridge(f"{usp}/0000:02:03.0", vendor=0x15B3, device=CX_SWITCH,
                         sub_vendor=0, sub_device=0)
    usp2 = b.pci_bridge(f"{dsp_g}/0000:04:00.0", port="upstream", vendor=0x15B3,
                        device=CX_SWITCH, sub_vendor=0, sub_device=0)
    dsp2 = b.pci_bridge(f"{usp2}/0000:05:00.0", vendor=0x15B3, device=CX_SWITCH,
                        sub_vendor=0, sub_device=0)
    b.gpu(f"{dsp2}/0000:06:00.0", model="b200")
    _endpoint(b, f"{dsp2}/0000:06:00.0", 0x10DE, 0x2901, 0x030200)
    return b


#: The Grace hosts by name: each a function returning a fresh builder.
GRACE_HOSTS: Mapping[str, Callable[[], HostBuilder]] = {
    "gb200-nvl72": gb200_nvl72_tray,
    "gb300-nvl72": gb300_nvl72_tray,
    "dgx-station-gb300": dgx_station_gb300,
    "gh200": gh200,
}
#: The other layouts rdma_topo knows, beside the Grace hosts (not a Grace machine).
OTHER_HOSTS: Mapping[str, Callable[[], HostBuilder]] = {"inline-cx8": inline_cx_switch}
#: The generated Data Direct variants: the PF-DMA tie unreadable (no VPD), permuted,
#: one DMA function no PF ties to; multi-plane PFs with VFs (OCI's GB300.4).
VARIANTS: Mapping[str, Callable[[], HostBuilder]] = {
    "gb300-nvl72-novpd": lambda: gb300_nvl72_tray(vpd=False),
    "gb300-nvl72-crossed": lambda: gb300_nvl72_tray(crossed=True),
    "gb300-nvl72-orphan": lambda: gb300_nvl72_tray(orphan=True),
    "oci-gb300-planes-vfs": oci_gb300_tray,
}

"""Fixture hosts with GPUs (gpu-*), for placement: the DGX A100 and DGX B200 of the
udev captures, an HGX H100, an MI300X host, a 2-socket PCIe server, a cloud VM and a
host with SR-IOV VFs, SFs, a bond, irdma and VMD."""

from __future__ import annotations

from collections.abc import Iterable

from sysverbs.testing.layout import guid_text as guid_fmt

from .builder import Fixture, ib_port, mlx_guid, roce_port
from .mellanox import A100_NICS, B200_MLX5, CX7, NDR, a100_nics, b200_function, mlx5_function
from .pci_trees import DGX_A100_TREE, DGX_B200_TREE
from .vendors import e810

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
#
# CPU CACHES of the GPU hosts (cpu_topology's cores_per_l3 and caches; the sizes and
# ways of each model are in sysverbs/testing/builder_machine.py CPU_CACHES):
# gpu-dgx-a100: 2x EPYC 7742 (NVIDIA's DGX A100 datasheet), Zen 2: 16 CCX of 4 cores
#   per socket, each with its own 16 MB L3 (AMD's EPYC 7742 page: 256 MB L3), so four
#   L3s per NPS4 node (cores_per_l3=4); 32K L1d/L1i, 512K L2 per core.
# gpu-dgx-b200: 2x Xeon Platinum 8570 (NVIDIA's DGX B200 datasheet: 56 cores each),
#   Emerald Rapids: one 300 MB L3 per socket (Intel's product page); 48K L1d, 32K L1i,
#   2 MB L2 per core.
# gpu-hgx-h100: Sapphire Rapids with 48 cores per socket, as the matrix's CPU lists
#   show (0-47,96-143); filled in, as the matrix names no model: the Xeon Platinum
#   8468, Intel's 48-core part, one 105 MB L3 per socket (Intel's product page).
# gpu-mi300x: EPYC 9654 (Genoa, see PROVENANCE): 12 CCDs of 8 cores, each with its
#   own 32 MB L3 (AMD: 384 MB), so twelve L3s per socket and node (cores_per_l3=8);
#   1 MB L2 per core.
# gpu-pcie-2socket: Genoa (its lspci shows the Genoa CCP/PSP) with 32 CPUs per node
#   and names no model; filled in: EPYC 9354, a 32-core part with 256 MB L3 = 8 CCDs
#   of 4 cores with 32 MB each (AMD's product page), cores_per_l3=4.
# gpu-cloud-vm: QEMU's default cache model of a -cpu host guest (one 16 MB L3 for
#   the whole socket, 4 MB L2 per core: target/i386/cpu.c legacy_*_cache).
# gpu-sriov-sf: constructed (Sapphire Rapids root ports): a 16-core Xeon Gold 6426Y,
#   one 37.5 MB L3 per socket.


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


# EPYC 7742 NPS4: NUMA node of each root complex (see PROVENANCE above).
A100_NUMA = {"pci0000:00": 3, "pci0000:20": 2, "pci0000:40": 1, "pci0000:60": 0,
             "pci0000:80": 7, "pci0000:a0": 6, "pci0000:b0": 5, "pci0000:e0": 4}


def fx_gpu_dgx_a100() -> Fixture:
    """DGX A100 with its GPUs, PCIe switches, NVSwitches and CPUs (see PROVENANCE)."""
    fx = Fixture("gpu-dgx-a100")
    fx.host.cpu_topology(sockets=2, cores_per_socket=64, threads_per_core=2,
                         nodes_per_socket=4, mem_per_node_kb=131_000_000,
                         cores_per_l3=4, caches="epyc-7742")
    nics = [p.rsplit("/", 1)[1] for p, *_ in A100_NICS] + ["0000:e1:00.0", "0000:e1:00.1"]
    lay_out_tree(fx, DGX_A100_TREE, A100_NUMA, gpu_model="a100", skip=nics)
    a100_nics(fx, A100_NUMA)
    return fx


def fx_gpu_dgx_b200() -> Fixture:
    """DGX B200 with its GPUs, bridges, 16 mlx5 and 2 irdma devices (see PROVENANCE)."""
    fx = Fixture("gpu-dgx-b200")
    fx.host.cpu_topology(sockets=2, cores_per_socket=56, threads_per_core=2,
                         mem_per_node_kb=1_056_000_000, caches="xeon-8570")
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
                         mem_per_node_kb=1_056_000_000, caches="xeon-8468")
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
                         mem_per_node_kb=1_150_000_000, cores_per_l3=8, caches="epyc-genoa")
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
                      mem_per_node_kb=197_000_000, distances=[[10, 32], [32, 10]],
                      cores_per_l3=4, caches="epyc-genoa")
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
                      mem_per_node_kb=1_500_000_000, caches="qemu")
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
                      mem_per_node_kb=257_000_000, caches="xeon-6426y")
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

"""``sysverbs topo``'s matrix byte for byte against real ``nvidia-smi topo -m`` outputs
(tests/data/nvidia-smi-topo), on hosts rebuilt from the same sources."""

from __future__ import annotations

import os
import re
from pathlib import Path

from sysverbs.placement import assign, read_host

from .pcitree import PciTree, oci_a100, parse_lspci_tv
from .placement_trees import DATA, ETH, dgx_a100, nic_legend, nvlink_free, parse_matrix

# ------------------------------------------- byte-exact against the tab-preserved samples


def test_rocep_names_byte_for_byte(tmp_path: Path) -> None:
    """s114 (driver 570.133.20): the RDMA devices are renamed by udev (rocep4s0f0 is
    PCI bus 4, rocep137s0f0 bus 0x89); the GPUs 08:00.0 and 85:00.0."""
    t = PciTree(tmp_path)
    t.node(0, "0-13,28-41").node(1, "14-27,42-55")
    for hb, numa, cpus, gpu, nic in (("pci0000:00", 0, "0-13,28-41", "0000:08:00.0", 0x04),
                                     ("pci0000:80", 1, "14-27,42-55", "0000:85:00.0", 0x89)):
        grp, nrp = f"{hb}/{hb[3:]}:03.0", f"{hb}/{hb[3:]}:02.0"
        t.bridges(grp, nrp, numa=numa)
        t.gpu(f"{grp}/{gpu}", numa=numa, cpus=cpus)
        for f in (0, 1):
            t.rdma(f"rocep{nic}s0f{f}", f"{nrp}/0000:{nic:02x}:00.{f}", ports=(ETH,),
                   numa=numa, cpus=cpus, cls=0x020000)
    from sysverbs.placement import render_matrix as render

    real = (DATA / "pcie-2socket-2xv100sxm2-4nic-rocep.txt").read_text()
    assert render(read_host(t.sys), legend="m") == real


def test_dgx_a100_byte_for_byte_but_nvlink(tmp_path: Path) -> None:
    """Driver 525.105.17: no GPU NUMA ID column, NIC rows end in two tabs."""
    from sysverbs.placement import render_matrix as render

    mine = render(read_host(dgx_a100(tmp_path).sys), "525", legend="m")
    real = (DATA / "dgx-a100-epyc7742-10nic.txt").read_text()
    assert mine == nvlink_free(real, mine)
    assert "NV" not in mine.split("Legend")[0]


def test_hgx_a100_ansi_header_byte_for_byte_but_nvlink(tmp_path: Path) -> None:
    """Driver 580.105.08 writing to a file: the header underlined with ESC[4m; four
    GPUs on NUMA 1, the one RoCE NIC rocep49s0 (bus 0x31) on NUMA 0."""
    t = PciTree(tmp_path)
    t.node(0, "0-31,64-95").node(1, "32-63,96-127")
    for i, bus in enumerate((0x81, 0x82, 0xC1, 0xC2)):
        hb = "pci0000:80" if i < 2 else "pci0000:c0"
        rp = f"{hb}/0000:{bus - 1 & 0xF0:02x}:0{i % 2 + 1}.1"
        t.pci(rp, numa=1)
        t.gpu(f"{rp}/0000:{bus:02x}:00.0", numa=1, cpus="32-63,96-127")
    t.pci("pci0000:30/0000:30:01.1", numa=0)
    t.rdma("rocep49s0", "pci0000:30/0000:30:01.1/0000:31:00.0", ports=(ETH,), numa=0,
           cpus="0-31,64-95", cls=0x020000)
    from sysverbs.placement import render_matrix as render

    mine = render(read_host(t.sys), underline=True, legend="m")
    real = (DATA / "hgx-a100-4gpu-epyc7532-1nic-ansi.txt").read_text()
    assert mine == nvlink_free(real, mine)


def test_consumer_no_nic_byte_for_byte(tmp_path: Path) -> None:
    """Two PCIe GPUs on two root ports of one host bridge, no NIC: PHB, and the output
    ends after the Legend (no NIC Legend)."""
    t = PciTree(tmp_path)
    t.node(0, "0-63")
    for i in (1, 3):
        t.pci(f"pci0000:00/0000:00:0{i}.1")
        t.gpu(f"pci0000:00/0000:00:0{i}.1/0000:0{i}:00.0", cpus="0-63", device=0x2B85)
    from sysverbs.placement import render_matrix as render

    assert render(read_host(t.sys), legend="m") == (
        DATA / "consumer-2x5090-nonic.txt").read_text()


def test_hgx_h200_byte_for_byte_but_nvlink(tmp_path: Path) -> None:
    """Driver 570.211.01, EPYC 9534: each GPU with one NIC (PIX) below its own host
    bridge; the NICs are numbered in the kernel's registration order (uverbs), which is
    not the GPUs' PCI order here (GPU0's NIC is mlx5_4)."""
    nic_of_gpu = [4, 1, 0, 3, 6, 7, 5, 2]
    t = PciTree(tmp_path)
    t.node(0, "0-63,128-191").node(1, "64-127,192-255")
    for i, nic in enumerate(nic_of_gpu):
        numa = i // 4
        cpus = "0-63,128-191" if numa == 0 else "64-127,192-255"
        bus = 0x10 + 0x1C * i
        hb = f"pci0000:{bus:02x}"
        rp = f"{hb}/0000:{bus:02x}:01.1"
        usp = f"{rp}/0000:{bus + 1:02x}:00.0"
        t.bridges(rp, usp, numa=numa)
        for j in range(2):
            dsp = f"{usp}/0000:{bus + 2:02x}:{j:02x}.0"
            t.pci(dsp, numa=numa)
            end = f"{dsp}/0000:{bus + 3 + j:02x}:00.0"
            if j == 0:
                t.gpu(end, numa=numa, cpus=cpus)
            else:
                t.rdma(f"mlx5_{nic}", end, numa=numa, cpus=cpus, uverbs=nic)
    from sysverbs.placement import render_matrix as render

    mine = render(read_host(t.sys), legend="m")
    real = (DATA / "hgx-h200-epyc9534-8nic.txt").read_text()
    assert mine == nvlink_free(real, mine)


# ----------------------------------------- cells of the samples pasted as spaces


def test_genoa_from_its_lspci(tmp_path: Path) -> None:
    """ASUS ESC8000A-E12 (2x EPYC Genoa): rebuilt from the page's lspci -tv; host
    bridges below bus 0x80 on NUMA 0 (0-31), the others on NUMA 1 (32-63)."""
    stem = "pcie-2socket-genoa-4xrtx6000ada-4nic"
    t = PciTree(tmp_path)
    t.node(0, "0-31").node(1, "32-63")
    entries = parse_lspci_tv((DATA / f"{stem}.lspci.txt").read_text())
    parents = {"/".join(p[:-1]) for p, _ in entries}
    nic = 0
    for path, desc in sorted(entries, key=lambda e: e[0][-1]):
        p = "/".join(path)
        numa = 0 if int(path[0][-2:], 16) < 0x80 else 1
        cpus = "0-31" if numa == 0 else "32-63"
        if p in parents or not desc:
            t.pci(p, numa=numa)
        elif desc.startswith("NVIDIA") and "Audio" not in desc:
            t.gpu(p, numa=numa, cpus=cpus)
        elif desc.startswith("Mellanox"):
            t.rdma(f"mlx5_{nic}", p, ports=(ETH,), numa=numa, cpus=cpus, cls=0x020000)
            nic += 1
        else:
            t.pci(p, cls=0x010802, vendor=0x1022, numa=numa)
    from sysverbs.placement import render_matrix as render

    mine = render(read_host(t.sys))
    real = (DATA / f"{stem}.txt").read_text()
    assert parse_matrix(mine) == parse_matrix(real)
    assert nic_legend(mine) == nic_legend(real)


def test_kvm_guest(tmp_path: Path) -> None:
    """A KVM guest: the GPU and the passed-through NIC on QEMU root ports of the one
    emulated host bridge: PHB."""
    t = PciTree(tmp_path)
    t.node(0, "0-251")
    t.pci("pci0000:00/0000:00:02.0")
    t.pci("pci0000:00/0000:00:02.1")
    t.gpu("pci0000:00/0000:00:02.0/0000:01:00.0", cpus="0-251", device=0x2331)
    t.rdma("mlx5_0", "pci0000:00/0000:00:02.1/0000:02:00.0", cpus="0-251")
    from sysverbs.placement import render_matrix as render

    mine = render(read_host(t.sys))
    real = (DATA / "vm-kvm-h100pcie-1nic.txt").read_text()
    assert parse_matrix(mine) == parse_matrix(real)
    assert nic_legend(mine) == nic_legend(real)


def test_dell_h100_topo_mp_byte_for_byte(tmp_path: Path) -> None:
    """``nvidia-smi topo -mp`` (the PCIe-only matrix, GPU-GPU cells PCIe classes, no
    NV# legend line) of a Dell 8x H100: GPU0 and GPU4 share their PCIe switch with
    three NICs, the others with one; every GPU below its own host bridge; the CPU
    affinity of a cpuset-limited container, as a comma list.  Every byte is compared,
    GPU-GPU cells included: this is the matrix sysfs can show."""
    t = PciTree(tmp_path)
    cpus = ("0,2,4,6,8,10", "1,3,5,7,9,11")
    t.node(0, cpus[0]).node(1, cpus[1])
    nic = 0
    for i in range(8):
        numa = i // 4
        bus = 0x10 + 0x1C * i
        hb = f"pci0000:{bus:02x}"
        rp = f"{hb}/0000:{bus:02x}:01.0"
        usp = f"{rp}/0000:{bus + 1:02x}:00.0"
        t.bridges(rp, usp, numa=numa)
        for j in range(4 if i % 4 == 0 else 2):
            dsp = f"{usp}/0000:{bus + 2:02x}:{j:02x}.0"
            t.pci(dsp, numa=numa)
            end = f"{dsp}/0000:{bus + 3 + j:02x}:00.0"
            if j == 0:
                t.gpu(end, numa=numa, cpus=cpus[numa])
            else:
                t.rdma(f"mlx5_{nic}", end, numa=numa, cpus=cpus[numa])
                nic += 1
    from sysverbs.placement import render_matrix

    mine = render_matrix(read_host(t.sys))
    real = (DATA / "dell-h100-8gpu-12nic-topo-mp.txt").read_text()
    assert mine.rstrip("\n") == real.rstrip("\n")
    assert "NV" not in mine


def test_hgx_h100_bonded_cards_byte_for_byte_but_nvlink(tmp_path: Path) -> None:
    """HGX H100 on one NUMA node with 12 mlx5: eight rail NICs, each PIX to one GPU
    below its own host bridge, and two dual-port cards whose first ports are in bond0
    (PCI buses from the netdev names of the same log's ibdev2netdev: enp25s0np0 is bus
    25 = 0x19 ...).  Then the assignment: each GPU its rail NIC; the bond slaves and
    the DOWN ports left out, with their reasons."""
    stem = "hgx-h100-1numa-12nic"
    nd = {}
    for line in (DATA / f"{stem}.ibdev2netdev.txt").read_text().splitlines():
        m = re.fullmatch(r"(mlx5_\d+) port 1 ==> (\S+) \((Up|Down)\)", line)
        assert m
        nd[m.group(1)] = (m.group(2), m.group(3))
    rail = {0: "mlx5_0", 1: "mlx5_1", 2: "mlx5_2", 3: "mlx5_5", 4: "mlx5_6", 5: "mlx5_7",
            6: "mlx5_8", 7: "mlx5_11"}
    t = PciTree(tmp_path)
    t.node(0, "0-191")

    def bus_of(ifname: str) -> tuple[int, int]:
        m = re.fullmatch(r"enp(\d+)s0(?:f(\d))?np\d", ifname)
        assert m
        return int(m.group(1)), int(m.group(2) or 0)

    for name in rail.values():
        bus, _ = bus_of(nd[name][0])
        hb = f"pci0000:{bus - 3:02x}"
        rp = f"{hb}/0000:{bus - 3:02x}:01.0"
        usp = f"{rp}/0000:{bus - 2:02x}:00.0"
        t.bridges(rp, usp)
        t.pci(f"{usp}/0000:{bus - 1:02x}:00.0")
        t.pci(f"{usp}/0000:{bus - 1:02x}:01.0")
        t.rdma(name, f"{usp}/0000:{bus - 1:02x}:00.0/0000:{bus:02x}:00.0", ports=(ETH,),
               cpus="0-191", cls=0x020000, netdev=nd[name][0], uverbs=int(name[5:]))
        t.gpu(f"{usp}/0000:{bus - 1:02x}:01.0/0000:{bus + 1:02x}:00.0", cpus="0-191")
    bond = t.netdev("bond0", None)
    (bond / "bonding").mkdir()
    for first, second in (("mlx5_3", "mlx5_4"), ("mlx5_9", "mlx5_10")):
        bus, _ = bus_of(nd[second][0])
        rp = f"pci0000:{bus - 1:02x}/0000:{bus - 1:02x}:01.0"
        t.pci(rp)
        down = ("1: DOWN", "Ethernet", "100 Gb/sec (4X EDR)")
        for fn, name in enumerate((first, second)):
            pf = f"{rp}/0000:{bus:02x}:00.{fn}"
            ifname = f"enp{bus}s0f{fn}np{fn}"
            t.rdma(name, pf, ports=(ETH if fn == 0 else down,), cpus="0-191", cls=0x020000,
                   netdev=ifname, uverbs=int(name[5:]))
            if fn == 0:
                link = t.sys / "devices" / pf / "net" / ifname / "master"
                os.symlink(os.path.relpath(bond, link.parent), link)
                (t.sys / "devices" / pf / "infiniband" / name / "ports/1/gid_attrs/ndevs/0"
                 ).write_text("bond0\n")
    host = read_host(t.sys)
    from sysverbs.placement import render_matrix

    mine = render_matrix(host, legend="m")
    real = (DATA / f"{stem}.txt").read_text()
    assert mine == nvlink_free(real, mine)
    plan = assign(host)
    assert [[n.device for n in a.nics] for a in plan] == [[rail[i]] for i in range(8)]
    assert all(n.netdevs == (nd[n.device][0],) for a in plan for n in a.nics)
    codes = {(f.device, f.code) for f in plan[0].filtered}
    assert codes == {("mlx5_3", "bond_slave"), ("mlx5_9", "bond_slave"),
                     ("mlx5_4", "port_not_active"), ("mlx5_10", "port_not_active")}


def test_oci_a100_18_nics_cells_and_multi_rail(tmp_path: Path) -> None:
    """OCI bare-metal A100 (8 NUMA nodes, 18 mlx5): per GPU pair a two-level switch with
    the GPUs behind one sub-switch and two dual-port NICs behind two others (GPU-NIC PXB,
    the ports of a card PIX); mlx5_0 and mlx5_13 on host bridges of NUMA nodes without a
    GPU (SYS to all).  The cells and affinities of the published matrix; then each GPU
    of a pair gets one of its two cards, both ports (multi-rail, split evenly)."""
    t = oci_a100(PciTree(tmp_path))
    host = read_host(t.sys)
    from sysverbs.placement import render_matrix

    names, cells, tail = parse_matrix((DATA / "oci-bm-a100-8gpu-18nic.txt").read_text())
    m_names, m_cells, m_tail = parse_matrix(render_matrix(host))
    assert m_names == names and m_tail == tail
    for row, values in cells.items():
        for col, value in zip(names, values):
            if not (row.startswith("GPU") and col.startswith("GPU")):
                assert m_cells[row][names.index(col)] == value, (row, col)
    plan = assign(host)
    assert [[n.device for n in a.nics] for a in plan[:2]] == [["mlx5_5", "mlx5_6"],
                                                             ["mlx5_7", "mlx5_8"]]
    assert "shared out among 2 GPUs (GPU0, GPU1), 2 each" in plan[0].reason
    every = assign(host, split_ties=False)
    assert [n.device for n in every[0].nics] == ["mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8"]


def test_dgx1_old_format_cells(tmp_path: Path) -> None:
    """DGX-1 (V100, ~2019 driver: NIC columns named by device, legend 'PIX = a single
    PCIe switch'): per socket two PLX switches on root ports of one host bridge, each
    with two GPUs and one NIC: GPU-NIC PIX on a switch, PHB across the socket's
    switches, SYS across sockets.  Compared cell by cell by name (that format's NIC
    column order was readdir's)."""
    t = PciTree(tmp_path)
    t.node(0, "0-19,40-59").node(1, "20-39,60-79")
    layout = {0: (0x00, ("mlx5_0", "mlx5_1")), 1: (0x80, ("mlx5_2", "mlx5_3"))}
    gpu_of_nic = {"mlx5_0": (0, 1), "mlx5_1": (2, 3), "mlx5_2": (4, 5), "mlx5_3": (6, 7)}
    for numa, (hb, nics) in layout.items():
        cpus = "0-19,40-59" if numa == 0 else "20-39,60-79"
        for k, nic in enumerate(nics):
            base = hb + 0x10 * k
            rp = f"pci0000:{hb:02x}/0000:{hb:02x}:0{k + 2}.0"
            usp = f"{rp}/0000:{base + 1:02x}:00.0"
            t.bridges(rp, usp, numa=numa)
            for j in range(3):
                dsp = f"{usp}/0000:{base + 2:02x}:{8 + 8 * j:02x}.0"
                t.pci(dsp, numa=numa)
                end = f"{dsp}/0000:{base + 3 + j:02x}:00.0"
                if j < 2:
                    t.gpu(end, numa=numa, cpus=cpus)
                else:
                    t.rdma(nic, end, numa=numa, cpus=cpus)
    host = read_host(t.sys)
    assert [g.index for g in host.gpus] == list(range(8))
    text = (DATA / "dgx1-v100-4nic-oldfmt.txt").read_text()
    names, cells, tail = parse_matrix(text)
    for row, values in cells.items():
        for col, value in zip(names, values):
            a = host.gpus[int(row[3:])] if row.startswith("GPU") else row
            b = host.gpus[int(col[3:])] if col.startswith("GPU") else col
            if row.startswith("GPU") and col.startswith("GPU"):
                continue  # NVLink (NV1/NV2) where the cube mesh joins them
            assert host.smi_class(a, b) == value, (row, col)
    # Its CPU Affinity is socket 0's for every GPU: nvidia-smi intersects the GPU's
    # CPUs with the CPUs the process may use (docs/placement.md); the cells still show
    # GPU4-7 on the other socket.
    assert {v[0] for v in tail.values() if v} == {"0-19,40-59"}
    for nic, gpus in gpu_of_nic.items():
        assert [a.nics[0].device for a in assign(host, require_active=False)
                if a.gpu is not None and a.gpu.index in gpus] == [nic, nic]

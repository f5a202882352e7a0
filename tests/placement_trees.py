"""The hosts and matrix helpers that the placement tests share: trees rebuilt from real
hosts' ``lspci -tv`` and ``nvidia-smi topo -m`` outputs (tests/data/nvidia-smi-topo)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from .pcitree import PciTree, parse_lspci_tv

DATA = Path(__file__).parent / "data/nvidia-smi-topo"
ETH = ("4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)")
IB = ("4: ACTIVE", "InfiniBand", "400 Gb/sec (4X NDR)")


def parse_matrix(text: str) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
    """(column names, cells per row, affinity fields per row) of a topo -m text, tabs or
    the spaces a web page turned them into."""
    lines = text.splitlines()
    names = re.findall(r"\b(?:GPU\d+|NIC\d+|mlx5_\d+)\b", lines[0])
    cells: dict[str, list[str]] = {}
    tail: dict[str, list[str]] = {}
    for line in lines[1:]:
        if not line.strip():
            break
        tok = line.split()
        cells[tok[0]] = tok[1:1 + len(names)]
        tail[tok[0]] = tok[1 + len(names):]
    return names, cells, tail


def nic_legend(text: str) -> list[str]:
    return re.findall(r"^  NIC\d+: (\S+)$", text, re.M)


def nvlink_free(real: str, mine: str) -> str:
    """``real`` with its GPU-GPU cells (NV# where NVLink joins them, which sysfs cannot
    see) replaced by ``mine``'s; every other byte is kept.  Tab-separated texts only."""
    rl, ml = real.split("\n"), mine.split("\n")
    n = len(re.findall(r"GPU\d+", rl[0]))
    out = []
    for i, line in enumerate(rl):
        if re.match(r"GPU\d+\t", line) and i < len(ml):
            f, g = line.split("\t"), ml[i].split("\t")
            f[1:1 + n] = g[1:1 + n]
            line = "\t".join(f)
        out.append(line)
    return "\n".join(out)


def two_socket(tmp: Path) -> PciTree:
    """pcie-2socket-2xv100sxm2-4nic: GPU 08:00.0 and dual-port NIC 04:00.x under
    pci0000:00 (NUMA 0), GPU 85:00.0 and NIC 89:00.x under pci0000:80 (NUMA 1), each
    on its own root port (the source's nvidia-smi output gives the GPU bus ids)."""
    t = PciTree(tmp)
    t.node(0, "0-13,28-41").node(1, "14-27,42-55")
    for hb, numa, cpus, gpu_rp, gpu, nic_rp, nic in (
        ("pci0000:00", 0, "0-13,28-41", "0000:00:03.0", "0000:08:00.0", "0000:00:02.0",
         "0000:04:00"),
        ("pci0000:80", 1, "14-27,42-55", "0000:80:03.0", "0000:85:00.0", "0000:80:02.0",
         "0000:89:00"),
    ):
        t.bridges(f"{hb}/{gpu_rp}", f"{hb}/{nic_rp}", numa=numa)
        t.gpu(f"{hb}/{gpu_rp}/{gpu}", numa=numa, cpus=cpus, device=0x1DB1)
        for f in (0, 1):
            n = len(list((t.sys / "class/infiniband").iterdir()))
            t.rdma(f"mlx5_{n}", f"{hb}/{nic_rp}/{nic}.{f}", ports=(ETH,), numa=numa,
                   cpus=cpus, cls=0x020000, netdev=f"ens{n}")
    return t


def from_lspci(tmp: Path, lspci: str, nodes: dict[int, str], numa: int,
               written: Optional[int] = None) -> PciTree:
    """Write the tree of an ``lspci -tv`` listing: NVIDIA display functions are GPUs,
    Mellanox functions RDMA devices (named mlx5_N in PCI order), everything with
    children a bridge; every function on node ``numa``, its ``numa_node`` file saying
    ``written`` (default ``numa``; -1: unknown)."""
    cpus = nodes[numa]
    numa = numa if written is None else written
    t = PciTree(tmp)
    for n, node_cpus in nodes.items():
        t.node(n, node_cpus)
    entries = parse_lspci_tv(lspci)
    parents = {"/".join(p[:-1]) for p, _ in entries}
    nic = 0
    for path, desc in sorted(entries, key=lambda e: e[0][-1]):
        p = "/".join(path)
        if p in parents or not desc:
            t.pci(p, numa=numa, cpus=cpus)
        elif desc.startswith("NVIDIA") and "Audio" not in desc:
            t.gpu(p, numa=numa, cpus=cpus)
        elif desc.startswith("Mellanox"):
            t.rdma(f"mlx5_{nic}", p, ports=(ETH,), numa=numa, cpus=cpus, cls=0x020000)
            nic += 1
        else:
            t.pci(p, cls=0x010802, vendor=0x1022, numa=numa, cpus=cpus)
    return t


def hgx(tmp: Path, nics_per_gpu: int = 1) -> PciTree:
    """8 GPUs, each with its NIC(s) behind one PCIe switch below its own host bridge,
    4 per socket (as the Xeon HGX H100 sample: GPU-NIC PIX, same socket NODE)."""
    t = PciTree(tmp)
    t.node(0, "0-47,96-143").node(1, "48-95,144-191")
    n = 0
    for i in range(8):
        numa = i // 4
        cpus = "0-47,96-143" if numa == 0 else "48-95,144-191"
        bus = 0x10 + 0x20 * i
        hb = f"pci0000:{bus:02x}"
        rp = f"{hb}/0000:{bus:02x}:01.0"
        usp = f"{rp}/0000:{bus + 1:02x}:00.0"
        t.bridges(rp, usp, numa=numa)
        dsp = f"{usp}/0000:{bus + 2:02x}:00.0"
        t.pci(dsp, numa=numa)
        t.gpu(f"{dsp}/0000:{bus + 3:02x}:00.0", numa=numa, cpus=cpus, device=0x2330,
              uuid=f"GPU-{i:08x}-1111-2222-3333-444455556666", minor=i)
        for k in range(nics_per_gpu):
            ndsp = f"{usp}/0000:{bus + 2:02x}:{k + 1:02x}.0"
            t.pci(ndsp, numa=numa)
            t.rdma(f"mlx5_{n}", f"{ndsp}/0000:{bus + 4 + k:02x}:00.0", ports=(IB,),
                   numa=numa, cpus=cpus)
            n += 1
    return t


def dgx_a100(tmp: Path) -> PciTree:
    """DGX A100: per GPU pair a two-level PCIe switch below its own host bridge: the two
    GPUs behind one sub-switch, the two NICs behind two others (GPU-NIC PXB); NPS4 NUMA
    nodes 3, 1, 7, 5; a dual-port storage card (mlx5_8/9) on its own root port."""
    t = PciTree(tmp)
    for n in range(8):
        lo = 16 * n
        t.node(n, f"{lo}-{lo + 15},{lo + 128}-{lo + 143}")
    n_nic = 0
    for hb, numa in ((0x00, 3), (0x40, 1), (0x80, 7), (0xB0, 5)):
        cpus = f"{16 * numa}-{16 * numa + 15},{16 * numa + 128}-{16 * numa + 143}"
        rp = f"pci0000:{hb:02x}/0000:{hb:02x}:01.1"
        usp = f"{rp}/0000:{hb + 1:02x}:00.0"
        t.bridges(rp, usp, numa=numa)
        for j, kind in enumerate(("gpu", "nic", "nic")):
            dsp = f"{usp}/0000:{hb + 2:02x}:{4 * j:02x}.0"
            sub = f"{dsp}/0000:{hb + 3 + 4 * j:02x}:00.0"
            t.bridges(dsp, sub, numa=numa)
            for e in range(2 if kind == "gpu" else 1):
                sdsp = f"{sub}/0000:{hb + 4 + 4 * j:02x}:{8 * e:02x}.0"
                t.pci(sdsp, numa=numa)
                end = f"{sdsp}/0000:{hb + 5 + 4 * j + e:02x}:00.0"
                if kind == "gpu":
                    t.gpu(end, numa=numa, cpus=cpus)
                else:
                    t.rdma(f"mlx5_{n_nic}", end, numa=numa, cpus=cpus)
                    n_nic += 1
    rp = "pci0000:e0/0000:e0:03.1"
    t.pci(rp, numa=6)
    for f in (0, 1):
        t.rdma(f"mlx5_{8 + f}", f"{rp}/0000:e1:00.{f}", numa=6, cpus="96-111,224-239")
    return t

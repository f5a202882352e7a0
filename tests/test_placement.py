"""sysverbs.placement and ``sysverbs topo``: the PCI model, distances, the matrix in
nvidia-smi's layout (against real ``nvidia-smi topo -m`` outputs in
tests/data/nvidia-smi-topo, rebuilt from the same sources' ``lspci -tv``), the
assignment and bad input."""

from __future__ import annotations

import collections
import contextlib
import doctest
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import sysverbs.placement as placement
from sysverbs import cli, recording
from sysverbs.errors import NotFoundError, UsageError
from sysverbs.placement import assign, assign_rank, local_rank, read_host, visible_gpus
from tests.fuzz.profiles import fuzz_settings

from .pcitree import PciTree, oci_a100, parse_lspci_tv

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


def test_doctests() -> None:
    assert doctest.testmod(placement).failed == 0


def test_import_is_lazy() -> None:
    code = ("import sys, sysverbs, sysverbs.cli; sysverbs.cli._parser(); "
            "print('sysverbs.placement' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_topo_imports_only_what_the_matrix_needs(tmp_path: Path) -> None:
    """``sysverbs topo`` (the matrix) loads neither the assignment nor the modules of
    other commands, nor json or typing (benchmarks/bench_placement.py measures why)."""
    t = two_socket(tmp_path / "host")
    unwanted = ["json", "typing", "subprocess", "sysverbs.topology", "sysverbs.attributes",
                "sysverbs.diagnosis", "sysverbs.placement._assign", "dataclasses", "shutil",
                "sysverbs.cli.nccl", "sysverbs.cli.env"]
    # (what the interpreter loads by itself does not count: PyPy's site loads typing)
    code = ("import contextlib, io, sys\n"
            "before = set(sys.modules)\n"
            "from sysverbs.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    rc = main(['topo', '--sysfs-path', {str(t.sys)!r}, "
            f"'--proc-path', {str(t.proc)!r}])\n"
            "assert rc == 0 and 'GPU0' in out.getvalue(), out.getvalue()\n"
            f"print([m for m in {unwanted!r} if m in set(sys.modules) - before])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ a 2-socket host


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


def test_two_socket_matches_nvidia_smi_byte_for_byte(tmp_path: Path) -> None:
    t = two_socket(tmp_path)
    host = read_host(t.sys, t.proc)
    from sysverbs.placement import render_matrix as render

    real = (DATA / "pcie-2socket-2xv100sxm2-4nic-mlx5.txt").read_text()
    assert render(host, legend="m") == real.rstrip("\n") + "\n\n"
    assert host.problems == ()


def test_two_socket_model(tmp_path: Path) -> None:
    t = two_socket(tmp_path)
    host = read_host(t.sys, t.proc)
    g0, g1 = host.gpus
    assert (g0.address, g0.pci.bridges, g0.pci.host_bridge) == (
        "0000:08:00.0", ("0000:00:03.0",), "pci0000:00")
    d = host.distance(g0, "mlx5_0")
    assert (d.smi, d.nccl, d.hops) == ("PHB", "PHB", 3)
    assert host.distance(g0, g1).smi == "SYS" and host.distance(g0, g1).nccl == "SYS"
    m = host.distance("mlx5_0", "mlx5_1")
    assert (m.smi, m.nccl, m.hops) == ("PIX", "LOC", 1)  # NCCL merges the two functions
    assert host.numa_nodes[1] == frozenset(range(14, 28)) | frozenset(range(42, 56))


# ------------------------------------------------------------ rebuilt from lspci -tv


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


def test_threadripper_from_its_lspci(tmp_path: Path) -> None:
    stem = "ws-threadripper-2xrtx6000ada-2nic"
    t = from_lspci(tmp_path, (DATA / f"{stem}.lspci.txt").read_text(), {0: "0-23"}, 0)
    host = read_host(t.sys, t.proc)
    from sysverbs.placement import render_matrix as render

    mine = render(host)
    real = (DATA / f"{stem}.txt").read_text()
    assert parse_matrix(mine) == parse_matrix(real)
    assert nic_legend(mine) == nic_legend(real)


# ------------------------------------------------------------- HGX H100-like


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


def test_hgx_cells_match_the_real_h100_matrix(tmp_path: Path) -> None:
    t = hgx(tmp_path)
    host = read_host(t.sys, t.proc)
    from sysverbs.placement import render_matrix as render

    mine = render(host)
    names, cells, tail = parse_matrix((DATA / "hgx-h100-8nic-sglang.txt").read_text())
    m_names, m_cells, m_tail = parse_matrix(mine)
    assert m_names == names
    for row, values in cells.items():
        for col, value in zip(names, values):
            if row.startswith("GPU") and col.startswith("GPU"):
                assert m_cells[row][names.index(col)] in ("X", "NODE", "SYS")  # NVLink
            else:
                assert m_cells[row][names.index(col)] == value, (row, col)
    assert {k: v for k, v in m_tail.items()} == tail
    assert "NV" not in "".join("".join(v) for v in m_cells.values())


def test_hgx_assignment_one_nic_per_gpu(tmp_path: Path) -> None:
    host = read_host(hgx(tmp_path).sys)
    plan = assign(host)
    assert [[n.device for n in a.nics] for a in plan] == [[f"mlx5_{i}"] for i in range(8)]
    assert all(a.nics[0].smi == "PIX" and a.nics[0].nccl == "PIX" for a in plan)
    assert "PIX" in plan[0].reason and plan[0].nics[0].reason


def test_hgx_multi_rail(tmp_path: Path) -> None:
    host = read_host(hgx(tmp_path, nics_per_gpu=2).sys)
    plan = assign(host)
    assert [n.device for n in plan[3].nics] == ["mlx5_6", "mlx5_7"]
    assert all(len(a.nics) == 2 for a in plan)


def test_fewer_nics_than_gpus_are_shared_evenly(tmp_path: Path) -> None:
    t = hgx(tmp_path)
    for name in ("mlx5_1", "mlx5_2", "mlx5_3", "mlx5_5", "mlx5_6", "mlx5_7"):
        (t.sys / "class/infiniband" / name).unlink()
    plan = assign(read_host(t.sys))
    used = [a.nics[0].device for a in plan]
    assert used.count("mlx5_0") == 4 and used.count("mlx5_4") == 4
    assert used[0] == "mlx5_0" and used[4] == "mlx5_4"  # nearest GPU keeps its NIC
    assert "fewer" in plan[1].reason


def test_filters_and_reasons(tmp_path: Path) -> None:
    t = hgx(tmp_path)
    (t.sys / "devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:01.0/0000:14:00.0"
     "/infiniband/mlx5_0/ports/1/state").write_text("1: DOWN\n")
    plan = assign(read_host(t.sys))
    assert plan[0].nics[0].device != "mlx5_0"
    assert any(f.device == "mlx5_0" and f.code == "port_not_active" for f in plan[0].filtered)
    assert all(a.nics == () for a in assign(read_host(t.sys), link_layer="Ethernet"))
    slow = assign(read_host(t.sys), min_rate_gbps=800)
    assert slow[0].nics == () and slow[0].filtered[0].code in ("rate", "port_not_active")
    with pytest.raises(ValueError):
        assign(read_host(t.sys), link_layer="carrier-pigeon")


def test_readdir_order_does_not_matter(tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    t = hgx(tmp_path, nics_per_gpu=2)
    before = [a.as_dict() for a in assign(read_host(t.sys))]
    from sysverbs.placement import render_matrix

    matrix = render_matrix(read_host(t.sys))
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p: list(reversed(real_listdir(p))))
    assert [a.as_dict() for a in assign(read_host(t.sys))] == before
    assert render_matrix(read_host(t.sys)) == matrix


# --------------------------------------------------------------- ranks and CUDA env


def test_local_rank_variables() -> None:
    assert local_rank({"LOCAL_RANK": "3", "SLURM_LOCALID": "1"})[0] == 3
    assert local_rank({"OMPI_COMM_WORLD_LOCAL_RANK": "2"})[0] == 2
    assert local_rank({"SLURM_LOCALID": "5"})[0] == 5
    assert local_rank({"LOCAL_RANK": "x"})[0] is None
    assert local_rank({})[0] is None


def test_visible_gpus(tmp_path: Path) -> None:
    t = hgx(tmp_path)
    host = read_host(t.sys, t.proc)
    assert [g.index for g in visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "3,1"})[0]] == [3, 1]
    uuid = visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "GPU-00000005,GPU-0000000"})
    assert [g.index for g in uuid[0]] == [5] and "stops" in uuid[1]  # ambiguous prefix
    assert [g.index for g in visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "2,9,1"})[0]] == [2]
    assert visible_gpus(host, {"CUDA_VISIBLE_DEVICES": ""})[0] == ()
    assert len(visible_gpus(host, {"NVIDIA_VISIBLE_DEVICES": "all"})[0]) == 8
    # the container's GPUs first, then CUDA's indices into them
    both = {"NVIDIA_VISIBLE_DEVICES": "GPU-00000004,GPU-00000006", "CUDA_VISIBLE_DEVICES": "1"}
    assert [g.index for g in visible_gpus(host, both)[0]] == [6]
    assert visible_gpus(host, {"NVIDIA_VISIBLE_DEVICES": "void"})[0] == ()
    a = assign_rank(host, env={"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert a.gpu is not None and a.gpu.index == 5 and [n.device for n in a.nics] == ["mlx5_5"]
    assert (a.nics[0].port, a.nics[0].link_layer) == (1, "InfiniBand")
    one = assign_rank(host, env={"LOCAL_RANK": "6", "CUDA_VISIBLE_DEVICES": "2"})
    assert one.gpu is not None and one.gpu.index == 2
    with pytest.raises(NotFoundError, match=r"local rank 6 has no GPU: LOCAL_RANK=6, "
                       r"but only 2 GPUs are visible \(CUDA_VISIBLE_DEVICES=0,1\), "
                       r"ranks 0 to 1"):
        assign_rank(host, env={"LOCAL_RANK": "6", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert host.gpu("GPU-00000003") is not None and host.gpus[3].minor == 3


# ------------------------------------------------------------------ NCCL specifics


def test_nccl_bcm_switch_flattened(tmp_path: Path) -> None:
    """A Broadcom PEX gen5 two-level switch: nvidia-smi sees PXB, NCCL merges the
    sub-switch into its parent and sees PIX (topo.cc ncclTopoFlattenBcmSwitches)."""
    t = PciTree(tmp_path)
    rp = "pci0000:00/0000:00:01.0"
    top = f"{rp}/0000:01:00.0"
    t.pci(rp)
    t.pci(top, vendor=0x1000, device=0xC030, sub=(0x1000, 0x0100))
    for k, (dsp_bus, sub_bus) in enumerate(((0x02, 0x03), (0x02, 0x06))):
        dsp = f"{top}/0000:{dsp_bus:02x}:{k:02x}.0"
        sub_usp = f"{dsp}/0000:{sub_bus:02x}:00.0"
        t.pci(dsp, vendor=0x1000, device=0xC030, sub=(0x1000, 0x0100))
        t.pci(sub_usp, vendor=0x1000, device=0xC030, sub=(0x1000, 0x1100))
        sub_dsp = f"{sub_usp}/0000:{sub_bus + 1:02x}:00.0"
        t.pci(sub_dsp, vendor=0x1000, device=0xC030, sub=(0x1000, 0x1100))
        end = f"{sub_dsp}/0000:{sub_bus + 2:02x}:00.0"
        if k == 0:
            t.gpu(end)
        else:
            t.rdma("mlx5_0", end)
    host = read_host(t.sys)
    d = host.distance(host.gpus[0], "mlx5_0")
    assert (d.smi, d.nccl) == ("PXB", "PIX")


def test_vmd_domain(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    vmd = "pci0000:00/0000:00:0e.0"
    t.pci(vmd, cls=0x010400)
    rp = f"{vmd}/pci10000:e0/10000:e0:1d.0"
    t.pci(rp)
    t.rdma("mlx5_0", f"{rp}/10000:e1:00.0")
    t.gpu("pci0000:00/0000:00:01.0/0000:01:00.0")
    t.pci("pci0000:00/0000:00:01.0")
    host = read_host(t.sys)
    nic = host.pci["10000:e1:00.0"]
    assert (nic.bridges, nic.host_bridge, nic.vmd) == (
        ("10000:e0:1d.0",), "pci10000:e0", "0000:00:0e.0")
    assert host.distance(host.gpus[0], "mlx5_0").smi == "PHB"
    assert host.distance(host.gpus[0], "mlx5_0").nccl == "PHB"
    # PCI functions in address order, domains as numbers (ffff before 10000)
    t.pci("pciffff:00/ffff:00:02.0")
    assert list(read_host(t.sys).pci) == [
        "0000:00:01.0", "0000:00:0e.0", "0000:01:00.0", "ffff:00:02.0", "10000:e0:1d.0",
        "10000:e1:00.0"]


# ----------------------------------------------------- SR-IOV, SF, soft devices


def test_vf_sf_rxe_placement(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    rp = "pci0000:00/0000:00:02.0"
    t.pci(rp)
    t.gpu("pci0000:00/0000:00:03.0/0000:05:00.0")
    t.pci("pci0000:00/0000:00:03.0")
    pf = f"{rp}/0000:03:00.0"
    t.rdma("mlx5_0", pf, ports=(ETH,), netdev="ens1f0")
    t.rdma("mlx5_2", f"{rp}/0000:03:00.2", ports=(ETH,), physfn=pf)
    t.rdma("mlx5_3", f"{pf}/mlx5_core.sf.2", ports=(ETH,), pci_function=False)
    t.rdma("rxe0", None, ports=(ETH,), soft_parent="ens1f0")
    t.rdma("rxe1", None, ports=(ETH,), soft_parent="veth0")
    t.netdev("veth0", None)
    host = read_host(t.sys)
    kinds = {n.name: (n.kind, n.address) for n in host.nics}
    assert kinds == {
        "mlx5_0": ("pf", "0000:03:00.0"), "mlx5_2": ("vf", "0000:03:00.2"),
        "mlx5_3": ("sf", "0000:03:00.0"), "rxe0": ("soft", "0000:03:00.0"),
        "rxe1": ("unplaced", None)}
    assert any("rxe1" in p and "virtual" in p for p in host.problems)
    plan = assign(host)
    assert [n.device for n in plan[0].nics] == ["mlx5_0", "rxe0"]
    codes = {f.device: f.code for f in plan[0].filtered}
    assert codes == {"mlx5_2": "vf", "mlx5_3": "vf", "rxe1": "unplaced"}
    with_vfs = assign(host, include_vfs=True)
    assert {n.device for n in with_vfs[0].nics} == {"mlx5_0", "mlx5_2", "mlx5_3", "rxe0"}
    assert host.nccl_path("mlx5_0", "mlx5_2") == "LOC"  # NCCL_IB_MERGE_VFS
    d = host.distance("mlx5_0", "mlx5_3")  # an SF on its PF: not the diagonal
    assert (d.smi, d.nccl, d.hops) == ("PIX", "LOC", 0)
    assert host.smi_class("0000:03:00.0", "mlx5_0") == "X"


def test_bond_slave_excluded(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    rp = "pci0000:00/0000:00:02.0"
    t.pci(rp)
    t.gpu("pci0000:00/0000:00:03.0/0000:05:00.0")
    t.rdma("mlx5_0", f"{rp}/0000:03:00.0", ports=(ETH,), netdev="ens1f0")
    bond = t.netdev("bond0", None)
    (bond / "bonding").mkdir()
    nd = t.sys / "devices" / rp / "0000:03:00.0/net/ens1f0"
    os.symlink(os.path.relpath(bond, nd), nd / "master")
    host = read_host(t.sys)
    assert host.nics[0].bond_slave
    assert assign(host)[0].filtered[0].code == "bond_slave"
    assert assign(host, include_bond_slaves=True)[0].nics[0].device == "mlx5_0"


# ------------------------------------------------------------------ bad input


def test_filter_keywords_are_checked(tmp_path: Path) -> None:
    """The NIC filters are declared once (``NicFilters``); a misspelt or mistyped one is
    a WrongTypeError (a TypeError) in assign() and assign_rank(), never ignored, and a
    bad link layer a UsageError (a ValueError)."""
    from sysverbs.errors import UsageError, WrongTypeError

    t = PciTree(tmp_path)
    t.gpu("pci0000:00/0000:00:03.0/0000:05:00.0")
    t.rdma("mlx5_0", "pci0000:00/0000:00:02.0/0000:03:00.0", ports=(ETH,), netdev="ens1f0")
    host = read_host(t.sys)
    for bad in ({"include_vf": True}, {"min_rate_gbps": "100"}, {"min_rate_gbps": True},
                {"link_layer": 3}):
        with pytest.raises(WrongTypeError, match=next(iter(bad))):
            assign(host, **bad)  # type: ignore[arg-type]
        with pytest.raises(WrongTypeError, match=next(iter(bad))):
            assign_rank(host, 0, {}, **bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="InfiniBand or Ethernet"):
        assign(host, link_layer="fddi")
    assert assign(host, link_layer="roce", min_rate_gbps=0)[0].nics[0].device == "mlx5_0"


def test_bad_trees_are_said_not_raised(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    t.node(0, "0-3").node(1, "4-7")
    t.pci("pci0000:00/0000:00:01.0", numa=None)
    t.gpu("pci0000:00/0000:00:01.0/0000:01:00.0", numa=-1)  # numa -1, 2 nodes
    t.rdma("mlx5_0", "pci0000:80/0000:80:01.0/0000:81:00.0", numa=1, cpus="4-7")
    # dangling bus/pci/devices link, a link out of the root, a loop in a path
    os.symlink("../../../devices/pci0000:00/0000:00:09.0", t.sys / "bus/pci/devices/0000:00:09.0")
    os.symlink("/nonexistent/0000:00:0a.0", t.sys / "bus/pci/devices/0000:00:0a.0")
    t.pci("pci0000:00/0000:00:0b.0/0000:00:0b.0", listed=True)
    # an RDMA device on a platform device (no PCI ancestor), one with a dangling link
    t.rdma("hns_0", "platform/HISI0001:00", pci_function=False)
    ib = t.rdma("mlx5_9", "pci0000:00/0000:00:0c.0", numa=0)
    (ib / "device").unlink()
    os.symlink("../../../nowhere", ib / "device")
    # an unreadable attribute (a directory where a file should be)
    for name in ("class", "uevent"):
        unreadable = t.sys / "devices/pci0000:80/0000:80:01.0/0000:81:00.0" / name
        unreadable.unlink()
        unreadable.mkdir()
    host = read_host(t.sys, t.proc)
    text = "\n".join(host.problems)
    assert "0000:00:09.0: dangling" in text.replace("bus/pci/devices/", "")
    assert "loop" in text
    assert "hns_0: unplaced" in text and "mlx5_9: unplaced" in text
    gpu = host.gpus[0]
    assert gpu.pci.numa_node is None and gpu.pci.numa_raw == "-1"
    d = host.distance(gpu, "mlx5_0")
    assert d.smi is None and "unknown" in d.reason
    assert host.pci["0000:81:00.0"].pci_class is None
    from sysverbs.placement import host_json as model
    from sysverbs.placement import render_matrix as render

    assert "N/A" in render(host)
    json.dumps(model(host))
    plan = assign(host)
    assert plan[0].nics[0].device == "mlx5_0" and plan[0].nics[0].smi is None


def test_gpu_without_nic_and_nic_without_gpu(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    t.gpu("pci0000:00/0000:00:01.0/0000:01:00.0")
    host = read_host(t.sys)
    (a,) = assign(host)
    assert a.nics == () and a.reason == "no RDMA device"
    u = PciTree(tmp_path / "nics")
    u.rdma("mlx5_0", "pci0000:00/0000:00:01.0/0000:01:00.0")
    nh = read_host(u.sys)
    assert assign(nh) == () and nh.gpus == ()
    from sysverbs.placement import render_matrix as render

    assert render(nh).startswith("\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nNIC0\t X ")


def test_empty_and_missing_roots(tmp_path: Path) -> None:
    host = read_host(tmp_path / "nothing", tmp_path / "noproc")
    assert (host.pci, host.gpus, host.nics) == ({}, (), ())


def test_amd_gpus_and_excluded_functions(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    rp = "pci0000:00/0000:00:01.0"
    t.pci(rp)
    t.gpu(f"{rp}/0000:01:00.0", vendor=0x1002, cls=0x120000, device=0x74A1)  # MI300X
    t.pci(f"{rp}/0000:01:00.1", vendor=0x1002, cls=0x040300)  # audio
    t.pci(f"{rp}/0000:02:00.0", vendor=0x10DE, cls=0x068000)  # NVSwitch
    t.pci(f"{rp}/0000:03:00.0", vendor=0x10DE, cls=0x060400)  # bridge
    t.gpu(f"{rp}/0000:04:00.0")
    host = read_host(t.sys)
    assert [(g.vendor, g.address) for g in host.gpus] == [
        ("amd", "0000:01:00.0"), ("nvidia", "0000:04:00.0")]


# ---------------------------------------------------------------------- the CLI


def test_cli_topo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = two_socket(tmp_path)
    args = ["topo", "--sysfs-path", str(t.sys), "--proc-path", str(t.proc)]
    assert cli.main(args) == 0
    assert capsys.readouterr().out.startswith("\tGPU0\tGPU1\tNIC0")
    assert cli.main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "sysverbs.topo/1" and len(doc["gpus"]) == 2
    assert cli.main([*args, "--assign", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["device"] for n in doc["assignments"][1]["nics"]] == ["mlx5_2", "mlx5_3"]
    assert cli.main([*args, "--assign"]) == 0
    out = capsys.readouterr().out
    assert "GPU0 0000:08:00.0 (NUMA 0) -> mlx5_0:1, mlx5_1:1" in out and "why:" in out
    assert cli.main([*args, "--assign", "--rank", "x"]) == 2
    assert cli.main(["topo", "--sysfs-path", str(tmp_path / "nowhere")]) == 1
    assert "not a sysfs tree" in capsys.readouterr().err
    assert cli.main(["topo", "--fixture", "dgx-a100"]) == 0
    assert "NIC9: mlx5_9" in capsys.readouterr().out


@pytest.mark.usefixtures("fast_fixture_tmp")
def test_topo_reads_the_proc_beside_the_sysfs_root(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    """With --fixture (or a --sysfs-path of a materialized host) and no --proc-path, the
    GPUs' UUIDs come from the fixture's own proc, never from this machine's /proc;
    --proc-path replaces it (with --sysfs-path: --fixture names a whole host)."""
    assert cli.main(["topo", "--fixture", "gpu-pcie-2socket", "--json"]) == 0
    uuids = [g["uuid"] for g in json.loads(capsys.readouterr().out)["gpus"]]
    assert len(uuids) == 4 and all(u and u.startswith("GPU-") for u in uuids)
    host = recording.materialize(recording.fixture_path("gpu-pcie-2socket"), tmp_path)
    assert cli.main(["topo", "--sysfs-path", str(host.sysfs), "--json"]) == 0
    assert [g["uuid"] for g in json.loads(capsys.readouterr().out)["gpus"]] == uuids
    assert cli.main(["topo", "--sysfs-path", str(host.sysfs), "--json",
                     "--proc-path", "/nonexistent"]) == 0
    assert all(g["uuid"] is None for g in json.loads(capsys.readouterr().out)["gpus"])
    assert cli.main(["topo", "--fixture", "gpu-pcie-2socket", "--proc-path", "/x"]) == 2
    assert "--fixture names a whole host" in capsys.readouterr().err


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


# ------------------------------------------------- ties: NICs shared out evenly


GPU_FIXTURES = ("gpu-dgx-a100", "gpu-dgx-b200", "gpu-hgx-h100", "gpu-mi300x",
                "gpu-pcie-2socket", "gpu-cloud-vm", "gpu-sriov-sf")


def _fixture_host(name: str, tmp: Path) -> placement.Host:
    from sysverbs import recording

    fake = recording.materialize(recording.fixture_path(name), tmp)
    return read_host(fake.sysfs, fake.proc, fake.dev)


def _mirror_bits(val: int, pow2: int) -> int:
    """NCCL's mirrorBits (src/graph/topo.cc): ``val``'s low log2(pow2) bits reversed."""
    out, b, mb = 0, 1, pow2 >> 1
    while b < pow2:
        if val & b:
            out |= mb
        b, mb = b << 1, mb >> 1
    return out


def nccl_local_net(host: placement.Host, gpu: placement.Gpu,
                   nics: list[placement.Nic]) -> tuple[list[str], str]:
    """NCCL's ncclTopoGetLocalNet for channel 0 (NVIDIA/nccl src/graph/topo.cc, 2.19 and
    later; bandwidths taken equal): the GPU's local nets are the NICs at its best path
    type, in NCCL's net-device order (libibverbs' order); the local GPUs those of the
    first local net's best type; net = dev % localGpuCount (dev: the GPU's NVML index,
    PCI bus order), mirrorBits'd when the local nets are a power of two."""
    order = ["LOC", "PIX", "PXB", "PXN", "PHB", "SYS"]

    def best(items: list[Any], dist: Any) -> list[Any]:
        top = min(order.index(dist(x)) for x in items)
        return [x for x in items if order.index(dist(x)) == top]

    local = best(nics, lambda n: host.distance(gpu, n).nccl)
    gpus = best(list(host.gpus), lambda g: host.distance(local[0], g).nccl)
    net = gpu.index % len(gpus)
    if len(local) & (len(local) - 1) == 0:
        net = _mirror_bits(net, len(local))
    return [n.name for n in local], local[net % len(local)].name


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_tied_gpus_share_their_nics_evenly(tmp_path: Path, name: str) -> None:
    """On every GPU fixture: GPUs whose NICs overlap have as many NICs each (never one
    GPU both NICs and the other one of them); each GPU's first NIC is one of NCCL's
    local nets for it, and the NICs are used as many times each as NCCL's channel-0
    choice uses them (NCCL's rule, ncclTopoGetLocalNet)."""
    from sysverbs.placement._smi import matrix_nics

    host = _fixture_host(name, tmp_path)
    plan = assign(host)
    nics = [n for n in matrix_nics(host) if n.kind not in ("vf", "sf")
            and any(p.state == "ACTIVE" for p in n.ports) and not n.bond_slave]
    # NCCL is given one link layer (InfiniBand and RoCE ports cannot be joined)
    one = placement.host_link_layer([p.link_layer for n in nics for p in n.ports
                                     if p.state == "ACTIVE"])
    nics = [n for n in nics if one is None or any(p.state == "ACTIVE" and p.link_layer == one
                                                  for p in n.ports)]
    mine = {a.gpu.name: [n.device for n in a.nics] for a in plan if a.gpu}
    for a, b in itertools.combinations(mine.values(), 2):
        if set(a) & set(b):
            assert len(a) == len(b), mine
    nccl = {g.name: nccl_local_net(host, g, nics) for g in host.gpus}
    for g, (local, _) in nccl.items():
        assert mine[g][0] in local, (g, mine[g], local)
    used = sorted(collections.Counter(m[0] for m in mine.values()).values())
    assert used == sorted(collections.Counter(c for _, c in nccl.values()).values())


def test_dgx_a100_one_rail_per_gpu(tmp_path: Path) -> None:
    """The DGX A100 (the fixture holds the real machine's DEVPATHs): the odd GPU shares
    an inner switch with the pair's first NIC (5 hops) and the even GPU is 9 hops from
    both, all PXB.  The pair gets one rail each, GPU2k mlx5_2k and GPU2k+1 mlx5_2k+1:
    NCCL's channel-0 choice for each GPU (ncclTopoGetLocalNet) and NVIDIA's one-NIC-per-
    GPU rail layout.  Before: GPU0 got mlx5_0 and mlx5_1, GPU1 mlx5_0 alone."""
    from sysverbs.placement._smi import matrix_nics

    host = _fixture_host("gpu-dgx-a100", tmp_path / "fixture")
    # the capture's mlx5_2 and mlx5_6 are InfiniBand, the other six RoCE: every rank
    # uses RoCE (host_link_layer), so GPU2/GPU3 and GPU6/GPU7 share a rail
    plan = assign(host)
    assert [[n.device for n in a.nics] for a in plan] == [
        [f"mlx5_{i}"] for i in (0, 1, 3, 3, 4, 5, 7, 7)]
    assert [f.device for f in plan[0].filtered if f.code == "link_layer"] == [
        "mlx5_2", "mlx5_6"]
    plan = assign(host, link_layer="Ethernet")
    for i, rail in ((2, "mlx5_2"), (6, "mlx5_6")):
        plan = (*plan[:i], assign(host, link_layer="InfiniBand")[i], *plan[i + 1:])
        assert [n.device for n in plan[i].nics] == [rail]
    assert [[n.device for n in a.nics] for a in plan] == [[f"mlx5_{i}"] for i in range(8)]
    assert all(a.nics[0].smi == "PXB" for a in plan)
    assert "shared out among 2 GPUs (GPU0, GPU1), 1 each" in plan[1].reason
    # the reason says why GPU1 is not given the 5-hop NIC (issue 40, finding 10)
    assert "(mlx5_0:1 is nearer, 5 hops, but hops do not split a class" in plan[1].reason
    rails = matrix_nics(host)[:8]
    assert [nccl_local_net(host, g, rails)[1] for g in host.gpus] == [
        f"mlx5_{i}" for i in range(8)]
    # the tree rebuilt from the real nvidia-smi matrix (equal hops): the same rails
    real = assign(read_host(dgx_a100(tmp_path / "real").sys))
    assert [[n.device for n in a.nics] for a in real] == [[f"mlx5_{i}"] for i in range(8)]


def _switch_host(tmp: Path, layout: list[list[str]]) -> PciTree:
    """One host bridge, a root port and a switch whose downstream ports each hold a
    sub-switch with the given devices ("gpu" or "nic", PCI order = list order)."""
    t = PciTree(tmp)
    t.node(0, "0-31")
    rp = "pci0000:00/0000:00:01.0"
    usp = f"{rp}/0000:01:00.0"
    t.bridges(rp, usp)
    bus = 0x10
    n_nic = 0
    for j, devices in enumerate(layout):
        dsp = f"{usp}/0000:02:{j:02x}.0"
        sub = f"{dsp}/0000:{bus:02x}:00.0"
        t.bridges(dsp, sub)
        for e, kind in enumerate(devices):
            sdsp = f"{sub}/0000:{bus + 1:02x}:{e:02x}.0"
            t.pci(sdsp)
            end = f"{sdsp}/0000:{bus + 2 + e:02x}:00.0"
            if kind == "gpu":
                t.gpu(end, cpus="0-31")
            else:
                t.rdma(f"mlx5_{n_nic}", end, cpus="0-31")
                n_nic += 1
        bus += 0x10
    return t


def test_leftover_ports_are_shared_one_more_each(tmp_path: Path) -> None:
    """Two GPUs and three NICs at one class: each GPU its own NIC and the third one,
    shared, named in both reasons (before: GPU0 got one NIC, GPU1 two)."""
    t = _switch_host(tmp_path, [["gpu", "gpu", "nic", "nic", "nic"]])
    plan = assign(read_host(t.sys))
    assert [[n.device for n in a.nics] for a in plan] == [["mlx5_0", "mlx5_2"],
                                                         ["mlx5_1", "mlx5_2"]]
    assert "shares a port with GPU1" in plan[0].reason
    assert "2 each" in plan[1].reason


def test_the_gpu_with_fewer_candidates_chooses_first(tmp_path: Path) -> None:
    """GPU1 shares a sub-switch with mlx5_1 (PIX: its only candidate); GPU0, on its own
    sub-switch, is PXB to both NICs.  GPU1 keeps mlx5_1 and GPU0 takes mlx5_0: one rail
    each, where GPU0 used to get both and GPU1 a shared one."""
    t = _switch_host(tmp_path, [["gpu"], ["nic"], ["gpu", "nic"]])
    host = read_host(t.sys)
    plan = assign(host)
    assert [[(n.device, n.smi) for n in a.nics] for a in plan] == [
        [("mlx5_0", "PXB")], [("mlx5_1", "PIX")]]


def test_fewer_ports_than_gpus_round_robin(tmp_path: Path) -> None:
    """gpu-cloud-vm: eight GPUs and four NICs, all PHB: round-robin by PCI order, said
    in the reason with the GPU it shares with."""
    plan = assign(_fixture_host("gpu-cloud-vm", tmp_path))
    assert [a.nics[0].device for a in plan] == [f"mlx5_{i % 4}" for i in range(8)]
    assert "shared round-robin; shares a port with GPU5" in plan[1].reason


def test_a_rank_without_a_gpu_is_an_error(tmp_path: Path) -> None:
    """``topo --assign --rank 99`` on an 8-GPU host printed "undecided" and exited 0:
    assign_rank raises NotFoundError (a LookupError) for a rank past the visible GPUs
    or with none visible, UsageError for a negative rank; assign refuses a GPU of
    another host."""
    host = _fixture_host("gpu-dgx-a100", tmp_path / "a")
    for rank in (8, 99):
        with pytest.raises(NotFoundError, match=rf"^local rank {rank} has no GPU: rank "
                           rf"{rank} \(given\), but only 8 GPUs are visible \(all GPUs"):
            assign_rank(host, rank)
    with pytest.raises(LookupError, match="no GPU is visible"):
        assign_rank(host, 0, env={"CUDA_VISIBLE_DEVICES": ""})
    with pytest.raises(UsageError):
        assign_rank(host, -1)
    assert assign_rank(host, 7).gpu == host.gpus[7]
    other = _fixture_host("gpu-hgx-h100", tmp_path / "b")
    with pytest.raises(NotFoundError, match="is not a GPU of this host"):
        assign(host, [other.gpus[0]])


# --------------------------------------------- NUMA Affinity when numa_node is -1


def test_threadripper_numa_affinity_from_local_cpus(tmp_path: Path) -> None:
    """The Threadripper PRO workstation: one NUMA node and ``numa_node`` -1 on every PCI
    device; real nvidia-smi printed NUMA Affinity 0 (the one node whose CPUs hold the
    GPU's local CPUs); sysverbs printed N/A before."""
    stem = "ws-threadripper-2xrtx6000ada-2nic"
    t = from_lspci(tmp_path, (DATA / f"{stem}.lspci.txt").read_text(), {0: "0-23"}, 0,
                   written=-1)
    host = read_host(t.sys, t.proc)
    from sysverbs.placement import host_json, render_matrix

    assert all(d.numa_node is None and d.numa_raw == "-1" for d in host.pci.values())
    assert parse_matrix(render_matrix(host)) == parse_matrix((DATA / f"{stem}.txt").read_text())
    doc = host_json(host)
    assert [(g["numa_node"], g["numa_affinity"], g["numa_affinity_source"])
            for g in doc["gpus"]] == [(None, 0, "local_cpulist")] * 2
    assert host.numa_affinity("mlx5_0") == (0, "local_cpulist")


def test_one_node_hosts_with_unknown_numa_say_node_0(tmp_path: Path) -> None:
    """The KVM guest and the two-GPU desktop (one NUMA node each; real outputs: NUMA
    Affinity 0) written with ``numa_node`` -1, as a guest without ACPI proximity
    domains has it: node 0 from the local CPUs."""
    t = PciTree(tmp_path / "kvm")
    t.node(0, "0-251")
    t.pci("pci0000:00/0000:00:02.0", numa=-1)
    t.pci("pci0000:00/0000:00:02.1", numa=-1)
    t.gpu("pci0000:00/0000:00:02.0/0000:01:00.0", numa=-1, cpus="0-251", device=0x2331)
    t.rdma("mlx5_0", "pci0000:00/0000:00:02.1/0000:02:00.0", numa=-1, cpus="0-251")
    from sysverbs.placement import render_matrix as render

    real = (DATA / "vm-kvm-h100pcie-1nic.txt").read_text()
    assert parse_matrix(render(read_host(t.sys))) == parse_matrix(real)
    d = PciTree(tmp_path / "desktop")
    d.node(0, "0-63")
    for i in (1, 3):
        d.pci(f"pci0000:00/0000:00:0{i}.1", numa=-1)
        d.gpu(f"pci0000:00/0000:00:0{i}.1/0000:0{i}:00.0", numa=-1, cpus="0-63",
              device=0x2B85)
    assert render(read_host(d.sys), legend="m") == (
        DATA / "consumer-2x5090-nonic.txt").read_text()


def test_two_socket_fixtures_without_numa_node(tmp_path: Path) -> None:
    """The 2-socket fixtures with every ``numa_node`` removed: each GPU's node comes
    from its local CPUs (they lie within one node); a device whose local CPUs are every
    CPU (the kernel's answer for an unknown node) has none on a host of two nodes."""
    from sysverbs import recording
    from sysverbs.placement import host_json, render_matrix

    for name in ("gpu-pcie-2socket", "gpu-hgx-h100", "gpu-dgx-b200"):
        fake = recording.materialize(recording.fixture_path(name), tmp_path / name)
        before = read_host(fake.sysfs, fake.proc)
        want = [g.pci.numa_node for g in before.gpus]
        for f in (fake.sysfs / "devices").rglob("numa_node"):
            f.unlink()
        host = read_host(fake.sysfs, fake.proc)
        assert all(g.pci.numa_node is None for g in host.gpus)
        assert [host.numa_affinity(g) for g in host.gpus] == [
            (n, "local_cpulist") for n in want]
        assert [row[1] for row in parse_matrix(render_matrix(host))[2].values()
                if row] == [str(n) for n in want]
        assert {g["numa_affinity_source"] for g in host_json(host)["gpus"]} == {
            "local_cpulist"}
        assert {g["numa_affinity_source"] for g in host_json(before)["gpus"]} == {
            "numa_node"}
    every = ",".join(host_json(host)["numa_nodes"].values())  # the last fixture's CPUs
    (fake.sysfs / "devices" / host.gpus[0].pci.path / "local_cpulist").write_text(every)
    wide = read_host(fake.sysfs, fake.proc)
    assert wide.gpus[0].pci.local_cpus == frozenset(
        c for cpus in wide.numa_nodes.values() for c in cpus)
    assert wide.numa_affinity(wide.gpus[0]) == (None, "unknown")
    assert parse_matrix(render_matrix(wide))[2]["GPU0"][1] == "N/A"


def test_distance_is_symmetric_and_order_free(tmp_path: Path) -> None:
    host = read_host(dgx_a100(tmp_path).sys)
    ends = [*host.gpus, *host.nics]
    for a in ends:
        for b in ends:
            assert host.distance(a, b).smi == host.distance(b, a).smi
            assert host.distance(a, b).nccl == host.distance(b, a).nccl
            assert host.distance(a, b).hops == host.distance(b, a).hops


def test_duplicate_bdf_on_two_paths(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    t.pci("pci0000:00/0000:00:01.0")
    t.gpu("pci0000:00/0000:00:01.0/0000:05:00.0")
    # an RDMA device whose parent is a second directory with the same BDF elsewhere
    t.rdma("mlx5_0", "pci0000:80/0000:80:01.0/0000:05:00.0", pci_function=False)
    host = read_host(t.sys)
    assert any("two sysfs paths" in p for p in host.problems)
    assert host.pci["0000:05:00.0"].host_bridge == "pci0000:00"  # the first one is kept


_GARBAGE = st.one_of(st.binary(max_size=40), st.sampled_from(
    [b"", b"\n", b"-1\n", b"0x\n", b"99999999999\n", b"1-\n", b"PCI_ID=zz:yy\n",
     b"4: ACTIVE", b"InfiniBand\n", b"a Gb/sec\n", b"\xff\xfe\n"]))


@fuzz_settings(ci=40, deep=400)
@given(values=st.lists(_GARBAGE, min_size=12, max_size=12))
def test_garbage_values_never_raise(tmp_path_factory: pytest.TempPathFactory,
                                    values: list[bytes]) -> None:
    """Any bytes in the files placement reads give an answer, never an exception; and
    the answer is what the tree still says (derived by hand from two_socket: GPU
    08:00.0 + mlx5_0/1 at 04:00.x under pci0000:00, GPU 85:00.0 + mlx5_2/3 at 89:00.x
    under pci0000:80, every port ACTIVE Ethernet 100 Gb/s)."""
    assume(values[7].strip() != b"Ethernet")
    t = two_socket(tmp_path_factory.mktemp("g"))
    targets = [
        "devices/pci0000:00/0000:00:03.0/0000:08:00.0/uevent",
        "devices/pci0000:00/0000:00:03.0/0000:08:00.0/numa_node",
        "devices/pci0000:00/0000:00:03.0/0000:08:00.0/local_cpulist",
        "devices/pci0000:00/0000:00:03.0/0000:08:00.0/class",
        "devices/pci0000:80/0000:80:02.0/0000:89:00.0/uevent",
        "devices/pci0000:80/0000:80:02.0/0000:89:00.0/numa_node",
        "devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0/ports/1/state",
        "devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0/ports/1/link_layer",
        "devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0/ports/1/rate",
        "devices/system/node/node0/cpulist",
        "devices/pci0000:00/0000:00:03.0/uevent",
        "devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0/node_guid",
    ]
    for rel, value in zip(targets, values):
        (t.sys / rel).write_bytes(value)
    host = read_host(t.sys, t.proc)
    from sysverbs.placement import host_json, render_matrix

    render_matrix(host)
    json.dumps(host_json(host))
    plan = assign(host, min_rate_gbps=10, link_layer="Ethernet")
    for a in plan:
        json.dumps(a.as_dict())
    with contextlib.suppress(NotFoundError):  # a rank without a GPU: said, not a crash
        assign_rank(host, env={"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "GPU-1,0"})
    # 08:00.0's uevent (PCI_CLASS) and class file both hold junk in every example, so
    # nothing says it is a display controller; 85:00.0's files are untouched.
    assert [g.address for g in host.gpus] == ["0000:85:00.0"]
    # no device link was touched: every RDMA device stays at its PCI function
    assert [(n.name, n.address) for n in host.nics] == [
        ("mlx5_0", "0000:04:00.0"), ("mlx5_1", "0000:04:00.1"),
        ("mlx5_2", "0000:89:00.0"), ("mlx5_3", "0000:89:00.1")]
    # GPU 85:00.0 keeps both ports of its card, each one root port away (PHB)
    assert [(a.gpu.address, [(n.device, n.smi) for n in a.nics]) for a in plan] == [
        ("0000:85:00.0", [("mlx5_2", "PHB"), ("mlx5_3", "PHB")])]
    # mlx5_0's port files are junk: its state is ACTIVE only if the file says the
    # kernel's "4: ACTIVE"; its link layer is never "Ethernet" (assumed above)
    code = "link_layer" if values[6].strip() == b"4: ACTIVE" else "port_not_active"
    assert {(f.device, f.port, f.code) for f in plan[0].filtered} == {("mlx5_0", 1, code)}
    # node0's cpulist: empty is a memoryless node; bytes no CPU list has are reported
    unreadable = "devices/system/node/node0/cpulist unreadable"
    if values[9] in (b"", b"\n"):
        assert unreadable not in host.problems and host.numa_nodes[0] == frozenset()
    elif values[9].translate(None, b"0123456789-,\n"):
        assert unreadable in host.problems


_HEX4 = st.integers(0, 0xFFFF)


@fuzz_settings(ci=40, deep=400)
@given(driver=st.one_of(st.none(), st.just(""), st.from_regex(r"[a-z0-9_.\-]{1,12}",
                                                             fullmatch=True)),
       cls=st.integers(0, 0xFFFFFF), ids=st.tuples(_HEX4, _HEX4, _HEX4, _HEX4),
       form=st.sampled_from(["kernel", "kernel+modalias", "no slot", "lower case",
                             "reordered", "padded class", "PCI_ID twice"]))
def test_uevent_ids_do_not_depend_on_its_form(tmp_path_factory: pytest.TempPathFactory,
                                              driver: str | None, cls: int,
                                              ids: tuple[int, int, int, int], form: str
                                              ) -> None:
    """The ids of a ``uevent`` as the kernel writes it (read in one match) are those
    of the same lines in any other form (read line by line): lower-case hex, another
    order, a missing line; a key given twice counts as its last value."""
    v, d, sv, sd = ids
    x = (lambda n, w: f"{n:0{w}x}") if form == "lower case" else (lambda n, w: f"{n:0{w}X}")
    lines = [f"PCI_CLASS={x(cls, 6 if form == 'padded class' else 1)}",
             f"PCI_ID={x(v, 4)}:{x(d, 4)}", f"PCI_SUBSYS_ID={x(sv, 4)}:{x(sd, 4)}",
             "PCI_SLOT_NAME=0000:05:00.0"]
    if form == "no slot":
        lines.pop()
    if form == "kernel+modalias":
        lines.append(f"MODALIAS=pci:v0000{v:04X}d0000{d:04X}sv0000{sv:04X}sd0000{sd:04X}"
                     f"bc{cls >> 16:02X}sc{cls >> 8 & 0xFF:02X}i{cls & 0xFF:02X}")
    if form == "reordered":
        lines.reverse()
    if driver is not None:
        lines.insert(0, f"DRIVER={driver}")
    if form == "PCI_ID twice":  # the later line counts
        lines[lines.index(f"PCI_ID={x(v, 4)}:{x(d, 4)}")] = f"PCI_ID={v ^ 1:04X}:{d ^ 1:04X}"
        lines.append(f"PCI_ID={x(v, 4)}:{x(d, 4)}")
    t = PciTree(tmp_path_factory.mktemp("u"))
    t.pci("pci0000:00/0000:00:01.0")
    t.pci("pci0000:00/0000:00:01.0/0000:05:00.0")
    uevent = t.sys / "devices/pci0000:00/0000:00:01.0/0000:05:00.0/uevent"
    uevent.write_text("\n".join(lines) + "\n")
    got = read_host(t.sys).pci["0000:05:00.0"]
    assert (got.vendor, got.device, got.subsystem_vendor, got.subsystem_device) == ids
    assert got.pci_class == cls
    assert got.driver == (driver or None)


def test_reading_a_host_leaves_no_descriptor_open(tmp_path: Path) -> None:
    """The bus walk's directory descriptors are closed, on a whole tree and on one
    whose bus/pci/devices or devices/ cannot be opened as a directory."""
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    t = two_socket(tmp_path / "host")
    before = open_fds()
    host = read_host(t.sys, t.proc)
    assert host.gpus and host.nics and open_fds() == before
    devices = t.sys / "devices"
    devices.rename(t.sys / "devices.real")
    devices.symlink_to("devices.real")  # not opened (O_NOFOLLOW): looked up by path
    assert len(read_host(t.sys).gpus) == len(host.gpus) and open_fds() == before


def test_without_bus_pci_devices_the_tree_is_walked(tmp_path: Path) -> None:
    """A tree with no bus/pci/devices (a partial copy of /sys): the PCI functions are
    found by walking devices/pci*/."""
    t = PciTree(tmp_path)
    t.pci("pci0000:00/0000:00:01.0", listed=False)
    t.gpu("pci0000:00/0000:00:01.0/0000:01:00.0")
    t.rdma("mlx5_0", "pci0000:00/0000:00:01.0/0000:02:00.0")
    for link in (t.sys / "bus/pci/devices").iterdir():
        link.unlink()
    host = read_host(t.sys)
    assert [g.address for g in host.gpus] == ["0000:01:00.0"]
    assert host.smi_class(host.gpus[0], "mlx5_0") == "PIX"


def test_nothing_outside_the_roots_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """Every path placement opens, lists, stats or reads a link of is below the given
    roots, also when the tree's links point out of it (absolute /sys/... links are
    taken as meaning this root; anything else outside is dangling)."""
    t = two_socket(tmp_path / "host")
    os.symlink("/etc", t.sys / "bus/pci/devices/0000:00:1f.0")
    os.symlink("/sys/devices/pci0000:00/0000:00:03.0/0000:08:00.0",
               t.sys / "bus/pci/devices/0000:08:00.0.abs")
    os.symlink("/proc/self", t.sys / "class/net/lo")
    t.rdma("rxe0", None, soft_parent="lo")
    roots = (str(tmp_path / "host"),)
    seen: list[str] = []
    fd_path = os.readlink  # (not the spy)

    def spy(name: str) -> None:
        real = getattr(os, name)

        def wrapper(path: object, *a: object, **k: object) -> object:
            if not isinstance(path, int):
                where = os.fsdecode(path)  # type: ignore[arg-type]
                fd = k.get("dir_fd")
                if isinstance(fd, int):  # a name looked up from an open directory
                    where = os.path.join(fd_path(f"/proc/self/fd/{fd}"), where)
                seen.append(where)
            return real(path, *a, **k)

        monkeypatch.setattr(os, name, wrapper)

    import sysverbs.placement._assign  # noqa: F401  (imports done before spying)
    for name in ("open", "readlink", "listdir", "stat", "lstat", "scandir"):
        spy(name)
    host = read_host(t.sys, t.proc, t.dev)
    from sysverbs.placement import host_json, render_matrix

    render_matrix(host)
    host_json(host)
    assign(host)
    monkeypatch.undo()
    assert len(seen) > 50
    outside = [p for p in seen if not p.startswith(roots)]
    assert outside == []
    assert any("rxe0: unplaced" in p for p in host.problems)


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


def test_unknown_numa_is_decided_by_cpus_within_one_node_only(tmp_path: Path) -> None:
    t = PciTree(tmp_path)
    t.node(0, "0-3").node(1, "4-7")
    for hb, numa, cpus in (("00", None, "0-7"), ("40", None, "0-7"), ("80", None, "4-5"),
                           ("c0", 1, "4-7")):
        rp = f"pci0000:{hb}/0000:{hb}:01.0"
        t.pci(rp, numa=numa)
        t.gpu(f"{rp}/0000:{int(hb, 16) + 1:02x}:00.0", numa=-1 if numa is None else numa,
              cpus=cpus)
    host = read_host(t.sys)
    g = host.gpus
    assert host.smi_class(g[0], g[1]) is None  # machine-wide CPUs: undecided
    assert host.smi_class(g[2], g[3]) == "NODE"  # CPUs 4-5 lie in node 1
    assert host.smi_class(g[0], g[3]) is None

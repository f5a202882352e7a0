"""sysverbs.placement and ``sysverbs topo``: the PCI model, distances, the matrix in
nvidia-smi's layout (against real ``nvidia-smi topo -m`` outputs in
tests/data/nvidia-smi-topo, rebuilt from the same sources' ``lspci -tv``), the
assignment and bad input."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sysverbs.placement as placement
from sysverbs import cli, testing
from sysverbs.ground.errors import NotFoundError, UsageError
from sysverbs.placement import assign, assign_rank, local_rank, read_host, visible_gpus

from .pcitree import PciTree
from .placement_trees import DATA, ETH, from_lspci, hgx, nic_legend, parse_matrix, two_socket


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
    unwanted = ["json", "typing", "subprocess", "sysverbs.devices.location",
                "sysverbs.devices.attributes", "sysverbs.devices.diagnosis",
                "sysverbs.placement._assign", "dataclasses", "shutil", "sysverbs.cli.nccl",
                "sysverbs.cli.env"]
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
    from sysverbs.ground.errors import WrongTypeError

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
    host = testing.materialize(testing.fixture_path("gpu-pcie-2socket"), tmp_path)
    assert cli.main(["topo", "--sysfs-path", str(host.sysfs), "--json"]) == 0
    assert [g["uuid"] for g in json.loads(capsys.readouterr().out)["gpus"]] == uuids
    assert cli.main(["topo", "--sysfs-path", str(host.sysfs), "--json",
                     "--proc-path", "/nonexistent"]) == 0
    assert all(g["uuid"] is None for g in json.loads(capsys.readouterr().out)["gpus"])
    assert cli.main(["topo", "--fixture", "gpu-pcie-2socket", "--proc-path", "/x"]) == 2
    assert "--fixture names a whole host" in capsys.readouterr().err

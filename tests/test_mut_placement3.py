"""The Grace layout, the steady scrape, the assignment and ACS (issue 41: the mutants of
``make mutation``): placement/_layout.py's VPD reading (against real ``lspci -vv`` on the
same bytes) and kinds, fleet/steady.py on a fake one-file snapshot, placement/_assign.py's
environment rules, filters and reasons, placement/_acs.py's edges; generated trees and
pure functions, one lspci.  The matrix, distances and pairing:
tests/test_mut_placement2.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from sysverbs.placement import Nic, Port, Topology, read_host
from sysverbs.placement._assign import (
    assign_rank,
    host_link_layer,
    local_rank,
    visible_gpus,
)
from sysverbs.placement._layout import layout, parse_vpd, read_data_direct, read_vpd
from tests.conftest import fast_tmpdir

from .pcitree import PciTree
from .placement_trees import hgx

# ------------------------------------------------------------------ placement/_layout.py

def vpd_image(name: Optional[str], ro: list[tuple[str, str]],
              rw: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A PCI VPD image as a device holds it: the identifier string, the read-only
    fields closed by RV (its checksum making the bytes so far sum to 0), the
    read-write fields, the end tag."""
    out = b"" if name is None else b"\x82" + len(name).to_bytes(2, "little") + name.encode()
    body = b"".join(k.encode() + bytes([len(v)]) + v.encode() for k, v in ro)
    head = out + b"\x90" + (len(body) + 4).to_bytes(2, "little") + body + b"RV\x01"
    out = head + bytes([-sum(head) & 0xFF])
    if rw:
        fields = b"".join(k.encode() + bytes([len(v)]) + v.encode() for k, v in rw)
        out += b"\x91" + len(fields).to_bytes(2, "little") + fields
    return out + b"\x78"


VPDS = {
    "0000:01:00.0": vpd_image("ConnectX-8 Data Direct", [
        ("SN", "MT2451X00001"), ("V3", "5eb0c8d100004a2b8c3d000000000001")]),
    "0000:02:00.0": vpd_image("NVIDIA ConnectX-7 HHHL adapter card   ", [
        ("PN", "MCX75310AAS-NEAT  "), ("EC", "A7"), ("V2", "MCX75310AAS-NEAT"),
        ("SN", "MT2231T07M55"), ("V3", "c0cd10e64a2eed11800088e9a4d9b2de"), ("VA", "")],
        (("V1", "rw"), ("YA", "asset"))),
    "0000:03:00.0": vpd_image(None, [("V3", "0" * 32), ("V0", "x" * 40)]),
    # an identifier string past 255 bytes: its length's high byte counts
    "0000:04:00.0": vpd_image("NVIDIA ConnectX-8 SuperNIC, 2x400G; " * 8, [("SN", "1")]),
}


def _lspci_vpd(tmp: Path) -> dict[str, dict[str, str]]:
    """Real ``lspci -vv`` (pciutils' sysfs access) of functions whose ``config`` has a
    VPD capability and whose ``vpd`` file holds :data:`VPDS`: each one's product name
    and read-only fields, as it decodes them."""
    import shutil
    import subprocess

    from tests.conftest import require

    require(None if shutil.which("lspci") else "lspci not on PATH (Debian's pciutils)",
            "lspci")
    config = bytearray(256)
    config[0:4] = (0x15B3 | 0x1021 << 16).to_bytes(4, "little")
    config[6], config[0x0B], config[0x34], config[0x40] = 0x10, 0x02, 0x40, 0x03
    for bdf, image in VPDS.items():
        d = tmp / "devices" / bdf
        d.mkdir(parents=True)
        (d / "config").write_bytes(bytes(config))
        (d / "vpd").write_bytes(image)
        (d / "irq").write_text("0\n")
        (d / "resource").write_text("0x0 0x0 0x0\n" * 7)
        for attr, value in (("vendor", "0x15b3"), ("device", "0x1021"), ("class", "0x020000"),
                            ("subsystem_vendor", "0x15b3"), ("subsystem_device", "0x0021")):
            (d / attr).write_text(value + "\n")
    out = subprocess.run(["lspci", "-A", "linux-sysfs", "-O", f"sysfs.path={tmp}", "-D",
                          "-vv"], capture_output=True, text=True, timeout=60, check=True).stdout
    found: dict[str, dict[str, str]] = {}
    fields: dict[str, str] = {}
    section = ""
    for line in out.splitlines():
        if line and not line[0].isspace():
            fields = found.setdefault(line.split()[0], {})
        text = line.strip()
        if text.startswith("Product Name: "):
            fields["name"] = text[len("Product Name: "):].strip()
        elif text.endswith("fields:"):
            section = text
        elif text.startswith("[") and section == "Read-only fields:" and "[RV]" not in text:
            key, value = text[1:3], text.split(": ", 1)[1] if ": " in text else ""
            fields[key] = value.strip()
    return found


def test_parse_vpd_reads_what_lspci_reads(tmp_path: Path) -> None:
    """parse_vpd against real lspci on the same bytes: the identifier string and every
    read-only keyword but RV, values stripped; the read-write ones left out."""
    real = _lspci_vpd(tmp_path)
    assert {bdf: parse_vpd(image) for bdf, image in VPDS.items()} == real
    assert real["0000:02:00.0"]["PN"] == "MCX75310AAS-NEAT" and "V1" not in real[
        "0000:02:00.0"]


@pytest.mark.parametrize(("data", "want"), [
    (b"", {}), (b"\x82\x05", {}),  # a large tag cut before its length
    (b"\x82\x05\x00AB", {"name": "AB"}),  # a body cut short: what is there
    (b"\x90\x03\x00VA\x00\x78", {"VA": ""}),  # an empty value ending the section
    (b"\x90\x07\x00SN\x02abXY\x78", {"SN": "ab"}),  # two stray bytes: no keyword
    (b"\x90\x06\x00SN\x05abc\x78", {"SN": "abc"}),  # a value cut by its section's end
    (b"\x0a\x01\x02\x82\x02\x00AB\x78", {"name": "AB"}),  # a small item skipped whole
    (b"\x09\x01\x82\x02\x00AB\x78", {"name": "AB"}),  # one of odd length (bit 0 set)
    (b"\x0b\x00\x00\x78\x82\x02\x00AB\x78", {"name": "AB"}),  # its 3 bytes all skipped
    (b"\x82\x00\x00", {"name": ""}),  # an empty identifier string, at the very end
    (b"\x78\x82\x02\x00AB", {}),  # nothing after the end tag
    (b"\x91\x05\x00V1\x02ab\x82\x02\x00AB", {"name": "AB"}),  # VPD-W skipped
])
def test_parse_vpd_edges(data: bytes, want: dict[str, str]) -> None:
    assert parse_vpd(data) == want


def _fn_at(address: str, vendor: int, device: int, *bridges: str, cls: int = 0x060400,
           numa: Optional[int] = 0) -> Any:
    return SimpleNamespace(address=address, vendor=vendor, device=device, pci_class=cls,
                           bridges=bridges, numa_node=numa, path=f"/nonexistent/{address}")


def _grace_tree(*fns: Any, gpus: tuple[str, ...] = (), nics: tuple[Any, ...] = (),
                sysfs: str = "/tmp/tree", recorded: bool = False, dev: str = "/") -> Any:
    pci = {f.address: f for f in fns}
    return SimpleNamespace(pci=pci, gpus=[SimpleNamespace(pci=pci[a]) for a in gpus],
                           nics=list(nics), sysfs_path=sysfs, recorded=recorded, dev_dir=dev)


_NUMA_REASON = ("GPUs directly under a CPU root port ({}): no PCIe path joins a GPU and a "
                "NIC; each GPU pairs with the ConnectX PFs of its CPU NUMA node (no 1:1 "
                "pairing; BlueField-3 and other NICs are left out)")


@pytest.mark.parametrize(("rp_id", "cpu"), [
    (0x22B1, "Grace"), (0x22B2, "Grace"), (0x22B8, "Grace"), (0x2F95, "Vera"),
    (0x2F96, "Vera"), (0x22B3, None), (0x2F94, None)])
def test_grace_root_ports(rp_id: int, cpu: Optional[str]) -> None:
    host = _grace_tree(_fn_at("0009:00:00.0", 0x10DE, rp_id),
                       _fn_at("0009:01:00.0", 0x10DE, 0x2941, "0009:00:00.0", cls=0x030200),
                       gpus=("0009:01:00.0",))
    got = layout(host)
    # an AMD GPU there, or an NVIDIA function of another class, is not paired
    for vendor, cls in ((0x1002, 0x030000), (0x10DE, 0x120000)):
        other = _grace_tree(_fn_at("0009:00:00.0", 0x10DE, rp_id),
                            _fn_at("0009:01:00.0", vendor, 0x2941, "0009:00:00.0", cls=cls),
                            gpus=("0009:01:00.0",))
        assert layout(other).kind == "pcie"
    if cpu is None:
        assert got.kind == "pcie"
    else:
        assert (got.kind, got.reason) == ("numa-based", _NUMA_REASON.format(
            f"0009:01:00.0 under {cpu} root port 0009:00:00.0"))


def test_inline_below_a_grace_root_port() -> None:
    """A GPU behind two ConnectX switches that a ConnectX PF shares is inline, even
    with a Grace root port above the switches (not directly under it)."""
    rp, usp1, dsp1, usp2, dsp2 = ("0008:00:00.0", "0008:01:00.0", "0008:02:00.0",
                                  "0008:03:00.0", "0008:04:00.0")
    cx = 0x15B3
    host = _grace_tree(
        _fn_at("0000:00:01.0", 0x8086, 0x1234),  # a GPU elsewhere first: passed over
        _fn_at("0000:01:00.0", 0x10DE, 0x2941, "0000:00:01.0", cls=0x030200),
        _fn_at(rp, 0x10DE, 0x22B1), _fn_at(usp1, cx, 0x197C, rp),
        _fn_at(dsp1, cx, 0x1979, usp1, rp), _fn_at(usp2, cx, 0x197C, dsp1, usp1, rp),
        _fn_at(dsp2, cx, 0x1979, usp2, dsp1, usp1, rp),
        _fn_at("0008:05:00.0", 0x10DE, 0x2941, dsp2, usp2, dsp1, usp1, rp, cls=0x030200),
        _fn_at("0008:06:00.0", cx, 0x1023, dsp2, usp2, dsp1, usp1, rp, cls=0x020700),
        gpus=("0000:01:00.0", "0008:05:00.0"),
        nics=(SimpleNamespace(name="mlx5_0", address="0008:06:00.0"),))
    got = layout(host)
    assert (got.kind, got.reason) == ("inline", "1 GPU(s) share a ConnectX switch with a "
                                      "ConnectX PF (no DMA function): PCIe locality pairs them")
    assert got.complexes == ({"gpu": "0008:05:00.0", "switch": usp1, "pfs": [
        {"address": "0008:06:00.0", "model": "ConnectX-8", "numa_node": 0,
         "rdma_devices": ["mlx5_0"]}]},)


def test_a_dma_function_off_a_grace_root_port_pairs_no_gpu() -> None:
    rp, usp, dsp, cx = "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", 0x15B3
    host = _grace_tree(_fn_at(rp, 0x8086, 0x22B1), _fn_at(usp, cx, 0x197C, rp),
                       _fn_at(dsp, cx, 0x1979, usp, rp),
                       _fn_at("0000:03:00.1", cx, 0x2100, dsp, usp, rp, cls=0x080100))
    (entry,) = layout(host).complexes
    assert (entry["gpu"], entry["problem"]) == (None, "not below a CX switch under a "
                                                "Grace/Vera root port: no GPU pairs with it")
    assert (entry["switch"], entry["root_port"]) == (usp, rp)
    (alone,) = layout(_grace_tree(_fn_at("0000:03:00.1", cx, 0x2100, cls=0x080100))).complexes
    assert (alone["switch"], alone["root_port"], alone["gpu"]) == (None, None, None)


def test_the_kernels_tie_is_asked_on_this_machine_only(tmp_path: Path) -> None:
    """read_data_direct asks each ConnectX PF once, through its first RDMA device with a
    uverbs node; only for /sys not recorded, with a DMA function."""
    cx = 0x15B3
    fns = (_fn_at("0000:03:00.0", cx, 0x1023, cls=0x020700),
           _fn_at("0000:03:00.1", cx, 0x1023, cls=0x020700),
           _fn_at("0000:04:00.0", cx, 0x2100, cls=0x080100))
    nics = (SimpleNamespace(name="mlx5_3", address="0000:04:00.0", uverbs=3),
            SimpleNamespace(name="mlx5_2", address="0000:03:00.1", uverbs=None),
            SimpleNamespace(name="mlx5_0", address="0000:03:00.0", uverbs=0),
            SimpleNamespace(name="mlx5_1", address="0000:03:00.0", uverbs=1))
    live = _grace_tree(*fns, nics=nics, sysfs="/sys", dev=str(tmp_path))
    assert read_data_direct(live) == {"0000:03:00.0": "errno ENOENT: No such file or directory"}
    assert read_data_direct(_grace_tree(*fns, nics=nics, dev=str(tmp_path))) == {}
    assert read_data_direct(_grace_tree(*fns, nics=nics, sysfs="/sys", recorded=True,
                                        dev=str(tmp_path))) == {}
    assert read_data_direct(_grace_tree(*fns[:2], nics=nics, sysfs="/sys",
                                        dev=str(tmp_path))) == {}


def test_short_switch_chains_and_resolved_nics() -> None:
    """A GPU below fewer than four ConnectX switch ports is no inline GPU; a DMA
    function the kernel ties to its PF is resolved, with no candidates."""
    cx = 0x15B3
    rp, usp, dsp = "0009:00:00.0", "0009:01:00.0", "0009:02:00.0"
    for bridges in ((dsp, usp), (dsp, usp, "0009:00:01.0")):
        fns = [_fn_at(b, cx, 0x197C) for b in bridges]
        host = _grace_tree(*fns, _fn_at("0009:05:00.0", 0x10DE, 0x2941, *bridges,
                                        cls=0x030200), gpus=("0009:05:00.0",))
        assert layout(host).kind == "pcie"
    host = _grace_tree(
        _fn_at(rp, 0x10DE, 0x22B1), _fn_at(usp, cx, 0x197C, rp), _fn_at(dsp, cx, 0x1979, usp, rp),
        _fn_at("0009:03:00.1", cx, 0x2100, dsp, usp, rp, cls=0x080100),
        _fn_at("0009:04:00.0", 0x10DE, 0x2941, dsp, usp, rp, cls=0x030200),
        _fn_at("0000:03:00.0", cx, 0x1023, cls=0x020700), gpus=("0009:04:00.0",))
    got = layout(host, None, {"0000:03:00.0": "0009:03:00.1"})
    assert got.reason == (
        "1 ConnectX-8 Data Direct DMA function(s) (15b3:2100): 0009:03:00.1; GPUs pair with "
        "the CX-8 whose DMA function shares their switch (0009:04:00.0), not by the PF's "
        "PCIe path")
    (entry,) = got.complexes
    assert entry["gpu"] == "0009:04:00.0" and "problem" not in entry
    assert (entry["switch"], entry["root_port"]) == (usp, rp)
    assert entry["nic"] == {
        "status": "resolved", "via": "the kernel (uverbs ioctl "
        "MLX5_IB_METHOD_GET_DATA_DIRECT_SYSFS_PATH)", "pfs": [
            {"address": "0000:03:00.0", "model": "ConnectX-8", "numa_node": 0,
             "rdma_devices": []}]}


def test_read_vpd(tmp_path: Path) -> None:
    """Each DMA function's and ConnectX PF's vpd: its bytes (at most the 32 KiB a VPD
    holds), absent, or unreadable; nothing without a DMA function."""
    cx = 0x15B3
    fns = []
    for address, device, vpd in (("0000:03:00.1", 0x2100, b"x" * 40000),
                                 ("0000:04:00.0", 0x1023, None), ("0000:05:00.0", 0x1023, "dir"),
                                 ("0000:06:00.0", 0x1021, b"\x78")):
        d = tmp_path / address
        d.mkdir()
        if vpd == "dir":
            (d / "vpd").mkdir()
        elif isinstance(vpd, bytes):
            (d / "vpd").write_bytes(vpd)
        fn = _fn_at(address, cx, device, cls=0x020700)
        fn.path = str(d)
        fns.append(fn)
    got = read_vpd(_grace_tree(*fns))
    assert {k: (len(v) if isinstance(v, bytes) else v) for k, v in got.items()} == {
        "0000:03:00.1": 32768, "0000:04:00.0": "absent", "0000:05:00.0": "unreadable",
        "0000:06:00.0": 1}
    assert read_vpd(_grace_tree(*fns[1:])) == {}


# ------------------------------------------------------------------ fleet/steady.py

@dataclass(frozen=True)
class _Part:
    name: str
    success: bool
    duration_seconds: float


@dataclass(frozen=True)
class _Snapshot:
    """What Steady reads of a snapshot (HostFacts' collectors and sysfs_path)."""

    sysfs_path: str
    collectors: tuple[_Part, ...]
    value: bytes


def test_steady_reuses_the_last_snapshot_until_an_input_changes(tmp_path: Path) -> None:
    """A snapshot of one file: the second scrape is the first again (one collection),
    with this scrape's duration on its first part and 0 on the others; a changed file, a
    failed part, a changed environment and a tree gone are each a new collection."""
    from sysverbs.fleet.steady import Steady
    from sysverbs.ground.hostroot import HostRoot
    from sysverbs.ground.sysfs_read import read_sysfs_file
    from sysverbs.model import HostModel

    sys_dir = tmp_path / "sys"
    (sys_dir / "devices").mkdir(parents=True)
    (sys_dir / "devices" / "x").write_text("1\n")
    root = HostRoot.resolve(str(sys_dir))
    ok = [True, True]

    def collect(model: HostModel) -> Any:
        value = read_sysfs_file(str(sys_dir / "devices" / "x"), 64)
        return _Snapshot(str(sys_dir), (_Part("topology", ok[0], 0.5), _Part("gpus", ok[1],
                                                                             0.25)), value)

    environ = {"NCCL_IB_HCA": "mlx5_0"}
    steady = Steady(collect, lambda: HostModel(root), environ)
    assert steady.recheck is None
    first = steady()
    assert (steady.collected, steady.reused, steady.why) == (1, 0, "first")
    assert steady.recheck is not None
    start = time.perf_counter()
    again = steady()
    within = time.perf_counter() - start
    assert (steady.collected, steady.reused) == (1, 1) and again.value == first.value
    took, rest = again.collectors[0].duration_seconds, again.collectors[1].duration_seconds
    assert 0.0 < took <= within and rest == 0.0  # this scrape's, not the snapshot's 0.5
    (sys_dir / "devices" / "x").write_text("2\n")
    assert steady().value == b"2" and (steady.collected, steady.reused) == (2, 1)
    assert steady.why.endswith("devices/x")
    ok[1] = False
    (sys_dir / "devices" / "x").write_text("3\n")
    steady()
    steady()
    assert steady.collected == 4 and steady.why == "the gpus part failed"
    ok[0] = False
    (sys_dir / "devices" / "x").write_text("4\n")
    steady()
    steady()
    assert steady.collected == 6 and steady.why == "the topology part failed"  # the first
    ok[:] = [True, True]
    steady()
    steady()
    assert (steady.collected, steady.reused) == (7, 2)
    environ["NCCL_IB_HCA"] = "mlx5_1"
    steady()
    assert steady.collected == 8 and steady.why.startswith("this process")
    (sys_dir / "devices" / "x").unlink()
    (sys_dir / "devices").rmdir()
    steady()
    assert steady.collected == 9 and steady.why == "no sysfs tree"


def test_process_inputs_errno() -> None:
    from sysverbs.fleet.steady import _proc, process_inputs

    assert _proc("/nonexistent/status") == b"errno 2"
    assert _proc("/proc/self/cgroup") == Path("/proc/self/cgroup").read_bytes()
    mine = process_inputs({"A": "1"})
    assert mine[0] == {"A": "1"} and mine[1] == dict(os.environ)
    assert process_inputs()[0] is None and all(x.startswith(b"Cap") for x in mine[8])
    assert len(mine[8]) == 5  # CapInh, CapPrm, CapEff, CapBnd, CapAmb


# ------------------------------------------------------------------ placement/_assign.py

IBL, ETHL = "InfiniBand", "Ethernet"


@pytest.mark.parametrize(("layers", "want"), [
    ([IBL, ETHL, ETHL], ETHL), ([IBL, IBL, ETHL], IBL), ([IBL, ETHL], IBL),
    ([IBL, IBL], None), ([ETHL], None), ([None, IBL], None), ([], None),
])
def test_host_link_layer(layers: list[Optional[str]], want: Optional[str]) -> None:
    assert host_link_layer(layers) == want


@pytest.mark.parametrize(("env", "want"), [
    ({}, (None, "none of LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, "
                "MPI_LOCALRANKID, PALS_LOCAL_RANKID, MV2_COMM_WORLD_LOCAL_RANK, "
                "JSM_NAMESPACE_LOCAL_RANK is set")),
    ({"SLURM_LOCALID": " 3 ", "JSM_NAMESPACE_LOCAL_RANK": "5"}, (3, "SLURM_LOCALID=3")),
    ({"OMPI_COMM_WORLD_LOCAL_RANK": "2", "LOCAL_RANK": "1"}, (1, "LOCAL_RANK=1")),
    ({"LOCAL_RANK": "x", "SLURM_LOCALID": "1"}, (None, "LOCAL_RANK='x' is not a local rank")),
    ({"LOCAL_RANK": "123456"}, (123456, "LOCAL_RANK=123456")),
    ({"LOCAL_RANK": "1234567"}, (None, "LOCAL_RANK='1234567' is not a local rank")),
    ({"JSM_NAMESPACE_LOCAL_RANK": "0"}, (0, "JSM_NAMESPACE_LOCAL_RANK=0")),
])
def test_local_rank(env: dict[str, str], want: tuple[Optional[int], str]) -> None:
    assert local_rank(env) == want


@pytest.fixture(scope="module")
def hgx8() -> Iterator[Topology]:
    """8 GPUs (uuid GPU-0000000N-1111-...), each with one NIC behind its own switch."""
    with fast_tmpdir("sv-mut-hgx-") as base:
        yield read_host(hgx(base).sys, base / "proc")


@pytest.mark.parametrize(("env", "want", "why"), [
    ({}, [0, 1, 2, 3, 4, 5, 6, 7], "all GPUs (no CUDA_VISIBLE_DEVICES)"),
    ({"NVIDIA_VISIBLE_DEVICES": "ALL"}, [0, 1, 2, 3, 4, 5, 6, 7], "NVIDIA_VISIBLE_DEVICES=ALL"),
    ({"NVIDIA_VISIBLE_DEVICES": " void "}, [],
     "NVIDIA_VISIBLE_DEVICES='void': no GPU in this container"),
    ({"NVIDIA_VISIBLE_DEVICES": ""}, [], "NVIDIA_VISIBLE_DEVICES='': no GPU in this container"),
    ({"NVIDIA_VISIBLE_DEVICES": "none"}, [],
     "NVIDIA_VISIBLE_DEVICES='none': no GPU in this container"),
    ({"NVIDIA_VISIBLE_DEVICES": "5,3", "CUDA_VISIBLE_DEVICES": "1"}, [3],
     "NVIDIA_VISIBLE_DEVICES=5,3; CUDA_VISIBLE_DEVICES=1"),
    ({"CUDA_VISIBLE_DEVICES": "2, 9,1"}, [2],
     "CUDA_VISIBLE_DEVICES=2, 9,1; CUDA_VISIBLE_DEVICES stops at '9' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": "2,2"}, [2],
     "CUDA_VISIBLE_DEVICES=2,2; CUDA_VISIBLE_DEVICES stops at '2' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": "7,8"}, [7],
     "CUDA_VISIBLE_DEVICES=7,8; CUDA_VISIBLE_DEVICES stops at '8' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": "00006"}, [],
     "CUDA_VISIBLE_DEVICES=00006; CUDA_VISIBLE_DEVICES stops at '00006' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": "gpu-00000003,GPU-00000001-1111"}, [3, 1],
     "CUDA_VISIBLE_DEVICES=gpu-00000003,GPU-00000001-1111"),
    ({"CUDA_VISIBLE_DEVICES": "GPU-0000000,1"}, [],
     "CUDA_VISIBLE_DEVICES=GPU-0000000,1; GPU-0000000 is an ambiguous UUID prefix; "
     "CUDA_VISIBLE_DEVICES stops at 'GPU-0000000' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": "GPU-fff"}, [],
     "CUDA_VISIBLE_DEVICES=GPU-fff; CUDA_VISIBLE_DEVICES stops at 'GPU-fff' (as CUDA does)"),
    ({"NVIDIA_VISIBLE_DEVICES": "GPU-00000006", "CUDA_VISIBLE_DEVICES": "0"}, [6],
     "NVIDIA_VISIBLE_DEVICES=GPU-00000006; CUDA_VISIBLE_DEVICES=0"),
    ({"NVIDIA_VISIBLE_DEVICES": "1,x"}, [1],
     "NVIDIA_VISIBLE_DEVICES=1,x; NVIDIA_VISIBLE_DEVICES stops at 'x' (as CUDA does)"),
    ({"CUDA_VISIBLE_DEVICES": " "}, [], "CUDA_VISIBLE_DEVICES='': no GPU visible"),
    ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, [],
     "CUDA_VISIBLE_DEVICES='NoDevFiles': no GPU visible"),
])
def test_visible_gpus(hgx8: Topology, env: dict[str, str], want: list[int], why: str) -> None:
    gpus, said = visible_gpus(hgx8, env)
    assert ([g.index for g in gpus], said) == (want, why)


def test_visible_gpus_of_two_models(tmp_path: Path) -> None:
    """Two GPU models: CUDA's default FASTEST_FIRST order is not PCI order, and said;
    UUIDs unknown without /proc/driver/nvidia."""
    t = PciTree(tmp_path)
    t.node(0, "0-7")
    t.pci("pci0000:00/0000:00:01.0")
    t.gpu("pci0000:00/0000:00:01.0/0000:01:00.0", device=0x2330)
    t.gpu("pci0000:00/0000:00:01.0/0000:02:00.0", device=0x20B0)
    host = read_host(t.sys)
    order = ("CUDA_DEVICE_ORDER is not PCI_BUS_ID and the GPUs differ: CUDA's FASTEST_FIRST "
             "index order cannot be known from sysfs; PCI bus order is assumed")
    gpus, said = visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "1,0"})
    assert [g.index for g in gpus] == [1, 0] and said == f"CUDA_VISIBLE_DEVICES=1,0; {order}"
    gpus, said = visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "1",
                                     "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert [g.index for g in gpus] == [1] and said == "CUDA_VISIBLE_DEVICES=1"
    gpus, said = visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "GPU-1",
                                     "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert gpus == () and said == (
        "CUDA_VISIBLE_DEVICES=GPU-1; GPU-1: no GPU UUID known (no /proc/driver/nvidia); "
        "CUDA_VISIBLE_DEVICES stops at 'GPU-1' (as CUDA does)")
    # one visible GPU of the NVIDIA runtime's selection: models of the pool only
    gpus, said = visible_gpus(host, {"NVIDIA_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "0"})
    assert [g.index for g in gpus] == [0] and said == (
        "NVIDIA_VISIBLE_DEVICES=0; CUDA_VISIBLE_DEVICES=0")


def test_assign_rank_edges(hgx8: Topology) -> None:
    from sysverbs.ground.errors import NotFoundError, UsageError

    none = assign_rank(hgx8, env={})
    assert (none.gpu, none.rank, none.nics) == (None, None, ()) and none.reason.startswith(
        "no local rank: none of LOCAL_RANK")
    with pytest.raises(UsageError):
        assign_rank(hgx8, -1, env={})
    with pytest.raises(NotFoundError, match=r"^local rank 0 has no GPU: rank 0 \(given\), but "
                       r"no GPU is visible \(CUDA_VISIBLE_DEVICES='': no GPU visible\)$"):
        assign_rank(hgx8, 0, env={"CUDA_VISIBLE_DEVICES": ""})
    with pytest.raises(NotFoundError, match=r"^local rank 2 has no GPU: LOCAL_RANK=2, but only "
                       r"2 GPUs are visible \(CUDA_VISIBLE_DEVICES=4,5\), ranks 0 to 1$"):
        assign_rank(hgx8, env={"LOCAL_RANK": "2", "CUDA_VISIBLE_DEVICES": "4,5"})
    a = assign_rank(hgx8, env={"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "4,5"})
    assert (a.gpu.index, a.rank, [n.device for n in a.nics]) == (5, 1, ["mlx5_5"])  # type: ignore[union-attr]
    assert a.reason.startswith("LOCAL_RANK=1 -> GPU5 (0000:b3:00.0; CUDA_VISIBLE_DEVICES=4,5); "
                               "nearest class PIX, ")
    # one visible GPU: the plan is the host's, the rank may be any
    b = assign_rank(hgx8, 6, env={"CUDA_VISIBLE_DEVICES": "3"})
    assert (b.gpu.index, b.rank, [n.device for n in b.nics]) == (3, 6, ["mlx5_3"])  # type: ignore[union-attr]


def _port(n: int, state: Optional[str] = "ACTIVE", layer: Optional[str] = IBL,
          rate: Optional[float] = 400.0) -> Port:
    return Port(n, state, layer, rate, None, ())


def _rdma(name: str, address: Optional[str], *ports: Port, kind: str = "pf",
          bond_slave: bool = False) -> Nic:
    return Nic(name, address, kind, "pci" if address else "no PCI device above it", None,
               ports, bond_slave, None)


def test_candidates_and_what_each_filter_leaves_out() -> None:
    from sysverbs.ground.errors import UsageError, WrongTypeError
    from sysverbs.placement._assign import candidates

    host: Any = SimpleNamespace(nics=[
        _rdma("b", "0000:02:00.0", _port(2), _port(1)),
        _rdma("a10", "0000:01:00.0", _port(1)), _rdma("a9", "0000:01:00.0", _port(1)),
        _rdma("soft", None), _rdma("vf", "0000:03:00.2", _port(1), kind="vf"),
        _rdma("sf", "0000:03:00.3", _port(1), kind="sf"),
        _rdma("bf", "0000:04:00.0", _port(1)),
        _rdma("slave", "0000:05:00.0", _port(1), bond_slave=True),
        _rdma("empty", "0000:06:00.0"),
        _rdma("down", "0000:07:00.0", _port(1, "DOWN"), _port(2, None)),
        _rdma("eth", "0000:08:00.0", _port(1, layer=ETHL), _port(2, layer=None)),
        _rdma("a_slow", "0000:09:00.0", _port(1, rate=100.0), _port(2, rate=None),
              _port(3, rate=200.0))])
    keep, out = candidates(host, drop={"bf": "BlueField-3 (15b3:a2dc): a DPU"},
                           min_rate_gbps=200, link_layer="ib")
    assert [(c.nic.name, c.port.port) for c in keep] == [
        ("a9", 1), ("a10", 1), ("b", 1), ("b", 2), ("a_slow", 3)]
    assert [(f.device, f.port, f.code, f.reason) for f in out] == [
        ("soft", None, "unplaced", "not placed: no PCI device above it"),
        ("vf", None, "vf", "an SR-IOV VF (include_vfs to use it)"),
        ("sf", None, "vf", "a sub-function (include_vfs to use it)"),
        ("bf", None, "role", "not a compute NIC: BlueField-3 (15b3:a2dc): a DPU "
                             "(include_non_compute to use it)"),
        ("slave", None, "bond_slave", "its netdev is a bond slave (use the bond)"),
        ("empty", None, "no_ports", "no ports in sysfs"),
        ("down", 1, "port_not_active", "port state DOWN, not ACTIVE"),
        ("down", 2, "port_not_active", "port state unknown, not ACTIVE"),
        ("eth", 1, "link_layer", "link layer Ethernet, not InfiniBand"),
        ("eth", 2, "link_layer", "link layer unknown, not InfiniBand"),
        ("a_slow", 1, "rate", "rate 100 Gb/s below 200 Gb/s"),
        ("a_slow", 2, "rate", "rate unknown below 200 Gb/s")]
    # the defaults: any link layer, any rate, inactive ports left out; VFs, bond
    # slaves and inactive ports kept when asked for
    keep, out = candidates(host, include_vfs=True, include_bond_slaves=True,
                           require_active=False)
    names = [(c.nic.name, c.port.port) for c in keep]
    assert ("vf", 1) in names and ("sf", 1) in names and ("slave", 1) in names
    assert ("down", 1) in names and ("bf", 1) in names and ("a_slow", 2) in names
    # InfiniBand and Ethernet mixed: the host's one link layer (more ports: InfiniBand)
    assert ("eth", 1) not in names and ("eth", 2) not in names
    assert [(f.device, f.port, f.code, f.reason) for f in out if f.device == "eth"] == [
        ("eth", 1, "link_layer", "link layer Ethernet: this host's ports are InfiniBand and "
         "Ethernet (RoCE), which NCCL cannot join, so every rank uses InfiniBand (more "
         "ports, InfiniBand on a tie; link_layer= chooses)"),
        ("eth", 2, "link_layer", "link layer unknown: this host's ports are InfiniBand and "
         "Ethernet (RoCE), which NCCL cannot join, so every rank uses InfiniBand (more "
         "ports, InfiniBand on a tie; link_layer= chooses)")]
    with pytest.raises(WrongTypeError, match="^unexpected keyword argument 'colour'$"):
        candidates(host, colour=1)  # type: ignore[call-arg]
    with pytest.raises(WrongTypeError, match="^link_layer must be a str or None, not 1$"):
        candidates(host, link_layer=1)  # type: ignore[arg-type]
    with pytest.raises(WrongTypeError, match="^min_rate_gbps must be a number or None, not "
                                             "True$"):
        candidates(host, min_rate_gbps=True)
    with pytest.raises(WrongTypeError, match="^min_rate_gbps must be a number or None, not "
                                             "'1'$"):
        candidates(host, min_rate_gbps="1")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="^link layer must be InfiniBand or Ethernet, not "
                                         "'opa'$"):
        candidates(host, link_layer="opa")
    keep, _ = candidates(host, link_layer=" RoCE ", min_rate_gbps=0.5)
    assert [(c.nic.name, c.port.port) for c in keep] == [("eth", 1)]


# ------------------------------------------------------------------ placement/_acs.py

def test_acs_message_names_the_functions_apart_from_their_port() -> None:
    from sysverbs.placement._acs import AcsRedirect

    def by_groups(peer: str) -> str:
        return AcsRedirect("0000:04:00.0", "mlx5_0", "0000:03:00.0", "gpu", "0000:01:00.0",
                           ("0000:02:01.0", "0000:02:00.0"), "iommu_group", (None, None),
                           (("12", "10"), (peer, "11"))).message()

    assert by_groups("11").endswith(
        "Evidence: 0000:04:00.0 in iommu_group 12, its port 0000:02:01.0 in 10 (apart "
        "from its port: the port's ACS isolates it; run as root to read the ACS bits).")
    assert by_groups("13").endswith(
        "Evidence: 0000:04:00.0 in iommu_group 12, its port 0000:02:01.0 in 10; "
        "0000:03:00.0 in iommu_group 13, its port 0000:02:00.0 in 11 (apart from its port: "
        "the port's ACS isolates it; run as root to read the ACS bits).")


def test_acs_records_are_frozen() -> None:
    import dataclasses

    from sysverbs.placement._acs import AcsRedirect, IommuMode, TranslatedNic

    for record in (AcsRedirect("a", "n", "p", "gpu", "s", ("x", "y"), "acs_ctl", (12, 0),
                               ((None, None), (None, None))),
                   IommuMode("off", "e"), TranslatedNic("a", "n", "e")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.evidence = "x"  # type: ignore[misc]


def test_ext_capability_edges() -> None:
    from sysverbs.placement._acs import acs_control, ext_capability

    last = bytearray(0x104)  # a header in the last 4 bytes: read, its body empty
    last[0x100:0x104] = (0x000D | 1 << 16).to_bytes(4, "little")
    assert ext_capability(bytes(last), 0x000D) == b""
    # an all-zero header: no extended capability at all (PCIe), not a capability 0
    assert ext_capability(bytes(0x1000), 0) is None
    assert acs_control(bytes(257)) == 0  # past 256 bytes: the extended space is there
    assert acs_control(bytes(256)) is None
    # a device gone from the bus reads all ones: no capability, whatever the id asked
    assert ext_capability(b"\xff" * 4096, 0xFFFF) is None
    # the next pointer's two low bits are reserved: masked off (the kernel's
    # PCI_EXT_CAP_NEXT); the register whole (reserved bit 8 too); an Egress Control
    # Vector after it is not part of it
    acs = bytearray(4096)
    acs[0x100:0x104] = (0x0001 | 1 << 16 | 0x149 << 20).to_bytes(4, "little")
    acs[0x148:0x14C] = (0x000D | 1 << 16).to_bytes(4, "little")
    acs[0x14E:0x154] = bytes([0x1D, 0x01, 0xFF, 0xFF, 0xFF, 0xFF])
    assert acs_control(bytes(acs)) == 0x011D
    # the capability in the config space's last 8 bytes: its control register its last 2
    end = bytearray(4096)
    end[0x100:0x104] = (0x0001 | 1 << 16 | 0xFF8 << 20).to_bytes(4, "little")
    end[0xFF8:0xFFC] = (0x000D | 1 << 16).to_bytes(4, "little")
    end[0xFFE:0x1000] = (0b11101).to_bytes(2, "little")
    assert acs_control(bytes(end)) == 0b11101
    # cut reads: the control register's second byte missing; a header's last byte
    assert acs_control(bytes(end[:0xFFF])) == 0
    cut = bytearray(0x183)
    cut[0x100:0x104] = (0x0001 | 1 << 16 | 0x180 << 20).to_bytes(4, "little")
    cut[0x180:0x182] = (0x000D).to_bytes(2, "little")
    assert ext_capability(bytes(cut), 0x000D) is None
    # an ACS capability whose next pointer is itself: read to the end of the bytes
    loop = bytearray(0x110)
    loop[0x100:0x104] = (0x000D | 1 << 16 | 0x100 << 20).to_bytes(4, "little")
    loop[0x106:0x108] = (0b100).to_bytes(2, "little")
    assert acs_control(bytes(loop)) == 0b100


def test_nvme_peers_are_physical_functions() -> None:
    from sysverbs.placement._acs import acs_redirects

    fn = SimpleNamespace
    host: Any = SimpleNamespace(gpus=[SimpleNamespace(address="0000:03:00.0")], nics=[], pci={
        "0000:05:00.0": fn(pci_class=0x010802, is_vf=False),
        "0000:05:00.1": fn(pci_class=0x010802, is_vf=True),
        "0000:06:00.0": fn(pci_class=0x010801, is_vf=False)})
    from sysverbs.placement import _acs

    assert list(_acs._peers(host)) == [("0000:03:00.0", "gpu"), ("0000:05:00.0", "nvme")]
    assert acs_redirects(host) == ()


def test_only_a_switch_below_its_upstream_port_redirects(tmp_path: Path) -> None:
    """Two functions meet at a switch when each hangs below one of its downstream
    ports: not at a root port, not with one right below the upstream port."""
    from sysverbs.placement._acs import find_redirects

    redirect = bytearray(4096)  # its ACS capability last, as the full 4096 bytes hold it
    redirect[0x100:0x104] = (0x0001 | 1 << 16 | 0xFF8 << 20).to_bytes(4, "little")
    redirect[0xFF8:0xFFC] = (0x000D | 1 << 16).to_bytes(4, "little")
    redirect[0xFFE:0x1000] = (0b11101).to_bytes(2, "little")

    def dev(address: str, *bridges: str) -> Any:
        d = tmp_path / address
        d.mkdir()
        (d / "config").write_bytes(bytes(redirect))
        return SimpleNamespace(address=address, bridges=bridges, path=str(d))

    rp, usp, dsp, x = "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:08.0"
    pci = {d.address: d for d in (
        dev(rp), dev(usp, rp), dev(dsp, usp, rp), dev(x, usp, rp),
        dev("0000:03:00.0", dsp, usp, rp), dev("0000:04:00.0", x, usp, rp),
        dev("0000:01:00.1", usp, rp), dev("0000:09:00.0", "0000:08:00.0", rp),
        dev("0000:08:00.0", rp), dev("0000:04:00.1", x, usp, rp), dev("0000:01:00.2", usp, rp),
        dev("0000:81:00.0", "0000:80:01.0"))}
    # peers that share no switch with a NIC, or are not in the tree, come first: each is
    # passed over, not the end of the NIC's peers
    found = find_redirects(
        pci, [("0000:0f:00.0", "gone"), ("0000:01:00.1", "mlx5_1"), ("0000:04:00.0", "mlx5_0")],
        [("0000:0e:00.0", "gpu"), ("0000:09:00.0", "nvme"), ("0000:81:00.0", "gpu"),
         ("0000:04:00.1", "gpu"), ("0000:01:00.2", "nvme"), ("0000:03:00.0", "gpu")])
    assert [(r.device, r.peer, r.switch, r.ports, r.evidence, r.controls) for r in found] == [
        ("0000:04:00.0", "0000:03:00.0", usp, (x, dsp), "acs_ctl", (0b11101, 0b11101))]


def test_nic_functions_once_per_pf() -> None:
    from sysverbs.placement import _acs

    host: Any = SimpleNamespace(nics=[
        _rdma("lost", "0000:0f:00.0"), _rdma("none", None), _rdma("pf", "0000:05:00.0"),
        _rdma("vf", "0000:05:00.2", kind="vf"), _rdma("other", "0000:06:00.0")], pci={
        "0000:05:00.0": SimpleNamespace(address="0000:05:00.0", physfn=None),
        "0000:05:00.2": SimpleNamespace(address="0000:05:00.2", physfn="0000:05:00.0"),
        "0000:06:00.0": SimpleNamespace(address="0000:06:00.0", physfn=None)})
    assert list(_acs._nic_functions(host)) == [("0000:05:00.0", "pf"), ("0000:06:00.0", "other")]

"""The steady scrape, the assignment and ACS (issue 41: the mutants of ``make
mutation``): fleet/steady.py on a fake one-file snapshot, placement/_assign.py's
environment rules, filters and reasons, placement/_acs.py's edges; generated trees and
pure functions, no subprocess.  The matrix, distances, pairing and VPD:
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
from tests.conftest import fast_tmpdir

from .pcitree import PciTree
from .placement_trees import hgx

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
        _rdma("slow", "0000:09:00.0", _port(1, rate=100.0), _port(2, rate=None),
              _port(3, rate=200.0))])
    keep, out = candidates(host, drop={"bf": "BlueField-3 (15b3:a2dc): a DPU"},
                           min_rate_gbps=200, link_layer="ib")
    assert [(c.nic.name, c.port.port) for c in keep] == [
        ("a9", 1), ("a10", 1), ("b", 1), ("b", 2), ("slow", 3)]
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
        ("slow", 1, "rate", "rate 100 Gb/s below 200 Gb/s"),
        ("slow", 2, "rate", "rate unknown below 200 Gb/s")]
    # the defaults: any link layer, any rate, inactive ports left out; VFs, bond
    # slaves and inactive ports kept when asked for
    keep, out = candidates(host, include_vfs=True, include_bond_slaves=True,
                           require_active=False)
    names = [(c.nic.name, c.port.port) for c in keep]
    assert ("vf", 1) in names and ("sf", 1) in names and ("slave", 1) in names
    assert ("down", 1) in names and ("bf", 1) in names and ("slow", 2) in names
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

    redirect = bytearray(4096)
    redirect[0x100:0x104] = (0x000D | 1 << 16).to_bytes(4, "little")
    redirect[0x106:0x108] = (0b11101).to_bytes(2, "little")

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
        dev("0000:08:00.0", rp))}
    found = find_redirects(pci, [("0000:04:00.0", "mlx5_0"), ("0000:01:00.1", "mlx5_1")],
                           [("0000:03:00.0", "gpu"), ("0000:09:00.0", "nvme")])
    assert [(r.device, r.peer, r.switch, r.ports, r.evidence, r.controls) for r in found] == [
        ("0000:04:00.0", "0000:03:00.0", usp, (x, dsp), "acs_ctl", (0b11101, 0b11101))]

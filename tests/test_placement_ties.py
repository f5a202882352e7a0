"""sysverbs.placement's assignment when GPUs tie: NICs shared out evenly, as NCCL does."""

from __future__ import annotations

import collections
import itertools
from pathlib import Path
from typing import Any

import pytest

import sysverbs.placement as placement
from sysverbs import testing
from sysverbs.ground.errors import NotFoundError, UsageError
from sysverbs.placement import assign, assign_rank, read_host

from .pcitree import PciTree
from .placement_trees import dgx_a100

# ------------------------------------------------- ties: NICs shared out evenly


GPU_FIXTURES = ("gpu-dgx-a100", "gpu-dgx-b200", "gpu-hgx-h100", "gpu-mi300x",
                "gpu-pcie-2socket", "gpu-cloud-vm", "gpu-sriov-sf")


def _fixture_host(name: str, tmp: Path) -> placement.Topology:

    fake = testing.materialize(testing.fixture_path(name), tmp)
    return read_host(fake.sysfs, fake.proc, fake.dev)


def _mirror_bits(val: int, pow2: int) -> int:
    """NCCL's mirrorBits (src/graph/topo.cc): ``val``'s low log2(pow2) bits reversed."""
    out, b, mb = 0, 1, pow2 >> 1
    while b < pow2:
        if val & b:
            out |= mb
        b, mb = b << 1, mb >> 1
    return out


def nccl_local_net(host: placement.Topology, gpu: placement.Gpu,
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

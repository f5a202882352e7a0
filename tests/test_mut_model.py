"""The host model's verdicts' edges (issue 41: the mutants of ``make mutation``):
model/linklayer.py's one link layer, on gpu-dgx-a100's real assignments and on small
hand-made ones.  Pure functions: no subprocess.
"""

from __future__ import annotations

from sysverbs.model import HostModel
from sysverbs.model.linklayer import host_link_layer_verdict, link_layer_verdict
from sysverbs.placement import Assignment, NicChoice, Topology
from sysverbs.testing.cache import fixture_tree


def _host(name: str) -> Topology:
    return HostModel(fixture_tree(name).host_root).placement


def _nic(device: str, port: int, smi: str, hops: int) -> NicChoice:
    return NicChoice(device, port, None, (), None, None, smi, None, hops, "")


def _rank(*nics: NicChoice) -> Assignment:
    return Assignment(None, None, tuple(nics), "")


_LEFT = ("is InfiniBand: left out because every rank of this host uses Ethernet (NCCL "
         "cannot join InfiniBand and RoCE ports; Ethernet has more, InfiniBand on a tie): "
         "it gets {} instead")


def test_dgx_a100_names_the_ranks_and_their_ports() -> None:
    """Two InfiniBand rails among eight RoCE ports: every rank on Ethernet; GPU2/6 lose a
    port as near, GPU3/7 a nearer one (the texts exactly)."""
    v = host_link_layer_verdict(_host("gpu-dgx-a100"))
    assert v is not None and (v.layer, v.other, v.unserved) == ("Ethernet", "InfiniBand", ())
    assert v.changed == (
        (2, "rank 2 (GPU2): port mlx5_2:1, as near (PXB, 9 hops), "
            + _LEFT.format("mlx5_3:1 (PXB, 9 hops)")),
        (3, "rank 3 (GPU3): port mlx5_2:1, nearer (PXB, 5 hops), "
            + _LEFT.format("mlx5_3:1 (PXB, 9 hops)")),
        (6, "rank 6 (GPU6): port mlx5_6:1, as near (PXB, 9 hops), "
            + _LEFT.format("mlx5_7:1 (PXB, 9 hops)")),
        (7, "rank 7 (GPU7): port mlx5_6:1, nearer (PXB, 5 hops), "
            + _LEFT.format("mlx5_7:1 (PXB, 9 hops)")))
    assert v.ok() and v.warnings([3, 6]) == [v.changed[1][1], v.changed[2][1]]
    assert v.warnings() == [why for _, why in v.changed] and v.warnings([0]) == []


def test_no_verdict_when_the_layer_is_named_or_one() -> None:
    host = _host("gpu-dgx-a100")
    assert host_link_layer_verdict(host, link_layer="Ethernet") is None
    assert host_link_layer_verdict(host, link_layer="InfiniBand") is None
    assert host_link_layer_verdict(_host("gpu-hgx-h100")) is None  # InfiniBand only
    v = host_link_layer_verdict(_host("gpu-dgx-b200"))  # InfiniBand rails, RoCE beside
    assert v is not None and (v.layer, v.other, v.changed, v.unserved) == (
        "InfiniBand", "Ethernet", (), ())


def test_unserved_and_changed_ranks() -> None:
    """Rank 0: the other layer has nothing (no verdict); rank 1: nothing on the chosen
    layer (unserved); rank 2: the same device on both layers (nothing to say); rank 3: a
    farther port on the other layer (nothing); rank 4: a nearer one, of no GPU."""
    near, far = _nic("mlx5_0", 1, "PIX", 1), _nic("mlx5_1", 2, "SYS", 9)
    chosen = [_rank(), _rank(), _rank(near), _rank(near), _rank(far)]
    other = [_rank(), _rank(near), _rank(_nic("mlx5_0", 2, "PIX", 1)), _rank(far),
             _rank(near)]
    v = link_layer_verdict("InfiniBand", "Ethernet", chosen, other)
    assert v.unserved == (1,) and not v.ok()
    assert v.changed == ((4, "rank 4: port mlx5_0:1, nearer (PIX, 1 hops), is Ethernet: "
                             "left out because every rank of this host uses InfiniBand "
                             "(NCCL cannot join InfiniBand and RoCE ports; InfiniBand has "
                             "more, InfiniBand on a tie): it gets mlx5_1:2 (SYS, 9 hops) "
                             "instead"),)
    lines = v.warnings([0])
    assert lines == ["no single link layer serves every rank of this host: InfiniBand "
                     "gives rank 1 no NIC and Ethernet cannot be joined to it in one "
                     "communicator (choose with --link-layer, or name the NICs)"]
    two = link_layer_verdict("InfiniBand", "Ethernet", [_rank(), _rank()],
                             [_rank(near), _rank(near)])
    assert two.warnings([])[-1].startswith("no single link layer serves every rank of "
                                           "this host: InfiniBand gives rank 0, rank 1 no")


def test_each_layers_first_nic_is_compared() -> None:
    """The first NIC of each assignment (the one the rank uses), not the last."""
    near, far = _nic("mlx5_0", 1, "PIX", 1), _nic("mlx5_1", 2, "SYS", 9)
    other = _rank(_nic("mlx5_2", 1, "PIX", 1), _nic("mlx5_3", 1, "SYS", 12))
    v = link_layer_verdict("Ethernet", "InfiniBand", [_rank(far, near)], [other])
    assert v.changed == ((0, "rank 0: port mlx5_2:1, nearer (PIX, 1 hops), "
                             + _LEFT.format("mlx5_1:2 (SYS, 9 hops)")),)

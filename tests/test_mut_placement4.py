"""placement/_assign.py's plans (issue 41: the mutants of ``make mutation``): the
reasons, the shares of tied GPUs, anchors, the records' dicts and the errors, on small
generated trees (placement_trees.hgx: a GPU and its NIC per switch; one switch for
several GPUs and NICs).  In-process, but one import check in a child.  The environment
rules and the filters: tests/test_mut_placement3.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sysverbs.ground.errors import NotFoundError, WrongTypeError
from sysverbs.placement import Gpu, Topology, assign, find_anchor, read_host
from tests.conftest import fast_tmpdir

from .pcitree import PciTree
from .placement_trees import IB, hgx

ONE = "nearest class PIX, 3 hops; the one port at its nearest class"


@pytest.fixture(scope="module")
def hosts() -> Iterator[dict[str, Topology]]:
    """``hgx``: 8 GPUs, each with its NIC below its own switch; ``shared``: one switch,
    GPUs 0-2 and mlx5_0-2 each on a downstream port of its own; ``few``: the same with
    two NICs; ``four``, ``five``: two GPUs and four or five NICs."""
    with fast_tmpdir("sv-mut-assign-") as base:
        out = {"hgx": read_host(hgx(base / "hgx").sys, base / "hgx" / "proc")}
        for name, gpus, nics in (("shared", 3, 3), ("few", 3, 2), ("four", 2, 4),
                                 ("five", 2, 5)):
            t = PciTree(base / name)
            t.node(0, "0-7")
            rp = "pci0000:00/0000:00:01.0"
            usp = f"{rp}/0000:01:00.0"
            t.bridges(rp, usp)
            for i in range(gpus + nics):
                dsp = f"{usp}/0000:02:{i:02x}.0"
                t.pci(dsp)
                if i < gpus:
                    t.gpu(f"{dsp}/0000:{3 + i:02x}:00.0", cpus="0-7")
                else:
                    t.rdma(f"mlx5_{i - gpus}", f"{dsp}/0000:{3 + i:02x}:00.0", ports=(IB,))
            out[name] = read_host(t.sys)
        yield out


def test_one_nic_per_gpu_and_its_dict(hosts: dict[str, Topology]) -> None:
    host = hosts["hgx"]
    plan = assign(host)
    assert [[n.device for n in a.nics] for a in plan] == [[f"mlx5_{i}"] for i in range(8)]
    assert {a.reason for a in plan} == {ONE}
    assert plan[0].as_dict() == {
        "rank": None, "gpu": {"index": 0, "address": "0000:13:00.0",
                              "uuid": "GPU-00000000-1111-2222-3333-444455556666",
                              "numa_node": 0},
        "nics": [{"device": "mlx5_0", "port": 1, "link_layer": "InfiniBand", "netdevs": [],
                  "address": "0000:14:00.0", "rate_gbps": 400.0, "smi": "PIX", "nccl": "PIX",
                  "hops": 3, "reason": "PIX, 3 hops: they meet at bridge 0000:11:00.0 (a "
                                       "single switch)"}],
        "reason": ONE, "filtered": []}


def test_given_gpus_and_anchors_in_their_order(hosts: dict[str, Topology]) -> None:
    host = hosts["hgx"]
    nic = find_anchor(host, "mlx5_2")
    plan = assign(host, [host.gpus[3], nic, host.gpus[1], host.gpus[3], nic])
    assert [(a.gpu.name if a.gpu else None, a.anchor.name if a.anchor else None,
             [n.device for n in a.nics]) for a in plan] == [
        ("GPU3", None, ["mlx5_3"]), (None, "mlx5_2", ["mlx5_2"]), ("GPU1", None, ["mlx5_1"]),
        ("GPU3", None, ["mlx5_3"]), (None, "mlx5_2", ["mlx5_2"])]
    assert plan[1].reason == "nearest class X, 0 hops; the one port at its nearest class"
    assert plan[1].as_dict()["anchor"] == nic.as_dict() and "anchor" not in plan[0].as_dict()
    assert assign(host, []) == ()


def test_assign_refuses_what_is_not_the_hosts(hosts: dict[str, Topology]) -> None:
    host = hosts["hgx"]
    with pytest.raises(WrongTypeError, match=r"^gpus must be the host's Gpu objects \(or "
                                             r"Anchor objects\)$"):
        assign(host, ["GPU0"])  # type: ignore[list-item]
    g = host.gpus[0]
    stranger = Gpu(9, "0000:ff:00.0", g.vendor, g.pci, None, None, None)
    with pytest.raises(NotFoundError, match=r"^GPU9 \(0000:ff:00.0\) is not a GPU of this "
                                            r"host$"):
        assign(host, [stranger])
    other = find_anchor(hosts["shared"], "mlx5_0")
    far = type(other)(other.name, other.kind, "0000:fe:00.0", other.pci, None, other.via)
    with pytest.raises(NotFoundError, match=r"^mlx5_0 \(0000:fe:00.0\) is not a PCI function "
                                            r"of this host$"):
        assign(host, [far])


def test_nothing_left_or_nothing_there(hosts: dict[str, Topology], tmp_path: Path) -> None:
    plan = assign(hosts["hgx"], link_layer="eth")
    assert {(a.reason, a.nics) for a in plan} == {("no NIC port left after the filters", ())}
    assert [(f.device, f.code) for f in plan[0].filtered] == [
        (f"mlx5_{i}", "link_layer") for i in range(8)]
    t = PciTree(tmp_path)
    t.node(0, "0-7")
    t.pci("pci0000:00/0000:00:01.0")
    t.gpu("pci0000:00/0000:00:01.0/0000:01:00.0")
    (alone,) = assign(read_host(t.sys))
    assert (alone.reason, alone.nics, alone.filtered) == ("no RDMA device", (), ())


_SHARED = ("nearest class PIX, 3 hops; 3 ports at the nearest class shared out among {k} "
           "{noun} ({names}), {n} each, in PCI address order")


def test_tied_gpus_share_their_ports(hosts: dict[str, Topology]) -> None:
    """m ports for k tied GPUs: m // k each in PCI address order, the m % k left over
    shared, one more each; split_ties=False: all to each; an anchor shares as a device."""
    host = hosts["shared"]
    two = assign(host, host.gpus[:2])
    assert [([n.device for n in a.nics], a.reason) for a in two] == [
        (["mlx5_0", "mlx5_2"], _SHARED.format(k=2, noun="GPUs", names="GPU0, GPU1", n=2)
         + "; shares a port with GPU1"),
        (["mlx5_1", "mlx5_2"], _SHARED.format(k=2, noun="GPUs", names="GPU0, GPU1", n=2)
         + "; shares a port with GPU0")]
    three = assign(host)
    assert [([n.device for n in a.nics], a.reason) for a in three] == [
        ([f"mlx5_{i}"], _SHARED.format(k=3, noun="GPUs", names="GPU0, GPU1, GPU2", n=1))
        for i in range(3)]
    whole = assign(host, host.gpus[:2], split_ties=False)
    assert {(tuple(n.device for n in a.nics), a.reason) for a in whole} == {
        (("mlx5_0", "mlx5_1", "mlx5_2"), "nearest class PIX, 3 hops; all 3 ports at its "
         "nearest class (shared by 2 GPUs: GPU0, GPU1)")}
    nic = find_anchor(host, "mlx5_0")
    mixed = assign(host, [host.gpus[0], nic])
    assert [([n.device for n in a.nics], a.reason) for a in mixed] == [
        (["mlx5_1", "mlx5_2"], _SHARED.format(k=2, noun="devices", names="GPU0, mlx5_0", n=2)),
        (["mlx5_0"], _SHARED.format(k=2, noun="devices", names="GPU0, mlx5_0", n=1).replace(
            "nearest class PIX, 3 hops", "nearest class X, 0 hops"))]


def test_fewer_ports_than_gpus(hosts: dict[str, Topology]) -> None:
    host = hosts["few"]
    plan = assign(host)
    assert [[n.device for n in a.nics] for a in plan] == [["mlx5_0"], ["mlx5_1"], ["mlx5_0"]]
    head = ("nearest class PIX, 3 hops; fewer NIC ports (2) than GPUs (3: GPU0, GPU1, GPU2) "
            "at the nearest class: shared round-robin")
    assert [a.reason for a in plan] == [head + "; shares a port with GPU2", head,
                                        head + "; shares a port with GPU0"]


def test_nearest_first_within_a_class(tmp_path: Path) -> None:
    """Two NICs at PXB, 5 and 7 hops: both (hops do not split a class), the nearer
    first, and the reason names the nearer's hops."""
    t = PciTree(tmp_path)
    t.node(0, "0-7")
    rp = "pci0000:00/0000:00:01.0"
    usp = f"{rp}/0000:01:00.0"
    gpu_port, near, far = f"{usp}/0000:02:00.0", f"{usp}/0000:02:01.0", f"{usp}/0000:02:02.0"
    t.bridges(rp, usp, gpu_port)
    t.gpu(f"{gpu_port}/0000:03:00.0")
    chain_near = [near, f"{near}/0000:04:00.0", f"{near}/0000:04:00.0/0000:05:00.0"]
    chain_far = [far]
    for bus in range(7, 11):
        chain_far.append(f"{chain_far[-1]}/0000:{bus:02x}:00.0")
    t.bridges(*chain_near, *chain_far)
    t.rdma("mlx5_0", f"{chain_far[-1]}/0000:0b:00.0", ports=(IB,))
    t.rdma("mlx5_1", f"{chain_near[-1]}/0000:06:00.0", ports=(IB,))
    (a,) = assign(read_host(t.sys))
    assert [(n.device, n.smi, n.hops) for n in a.nics] == [("mlx5_1", "PXB", 5),
                                                          ("mlx5_0", "PXB", 7)]
    assert a.reason == "nearest class PXB, 5 hops; all 2 ports at its nearest class"


def test_gpus_before_anchors_whatever_the_order_given(hosts: dict[str, Topology]) -> None:
    host = hosts["shared"]
    nic = find_anchor(host, "mlx5_0")
    plan = assign(host, [nic, host.gpus[0]])
    assert [(a.anchor is not None, [n.device for n in a.nics]) for a in plan] == [
        (True, ["mlx5_0"]), (False, ["mlx5_1", "mlx5_2"])]
    assert all("among 2 devices (GPU0, mlx5_0)" in a.reason for a in plan)
    later = assign(host, [nic, host.gpus[1]])
    assert all("among 2 devices (GPU1, mlx5_0)" in a.reason for a in later)


def test_grace_pairings_left_without_ports(hosts: dict[str, Topology]) -> None:
    """A GPU paired by the Grace rule whose NICs are unresolved gets none, with the
    pairing's reason as it is; resolved to NICs that are not left: said so."""
    from types import SimpleNamespace

    host = hosts["hgx"]
    g0, g1 = host.gpus[0].address, host.gpus[1].address
    lay: Any = SimpleNamespace(kind="dma-based", complexes=[
        {"gpu": g0, "dma_function": "0000:16:00.1",
         "nic": {"status": "unresolved", "reason": "its vpd is absent", "candidates": []}},
        {"gpu": g1, "dma_function": "0000:36:00.1",
         "nic": {"status": "resolved", "via": "VPD V3", "pfs": [{"address": "0000:99:00.0"}]}}])
    plan = assign(host, layout=lay, include_non_compute=True)
    assert [a.gpu.address for a in plan[:2]] == [g0, g1]  # type: ignore[union-attr]
    assert plan[0].nics == () and plan[0].reason == (
        "Data Direct: the CX-8 of DMA function 0000:16:00.1 is unresolved: its vpd is absent; "
        "candidates none (no guess: NCCL resolves it itself when NCCL_IB_HCA is not set)")
    assert plan[1].nics == () and plan[1].reason == (
        "Data Direct: the CX-8 whose DMA function 0000:36:00.1 sits below this GPU's CX switch "
        "(tied by VPD V3) has no RDMA device; none of its NICs' ports is left after the "
        "filters")
    assert [n.device for n in plan[2].nics] == ["mlx5_2"] and plan[2].pairing is None


def test_unknown_filters_and_usable_devices() -> None:
    from sysverbs.model import HostModel
    from sysverbs.placement._assign import candidates
    from sysverbs.testing.cache import fixture_tree

    host = HostModel(fixture_tree("gpu-dgx-a100").host_root).placement
    with pytest.raises(WrongTypeError, match="^unexpected keyword argument 'bar'$"):
        candidates(host, foo=1, bar=2)  # type: ignore[call-arg]
    every, _ = candidates(host)
    usable, left = candidates(host, require_usable=True)  # every device of it is usable
    assert [c.nic.name for c in usable] == [c.nic.name for c in every] and len(every) == 8
    assert "not_usable" not in {f.code for f in left}


def test_the_assignment_needs_no_typing_extensions() -> None:
    """typing_extensions (Unpack) is the type checker's only: no dependency of sysverbs."""
    import subprocess
    import sys

    code = "import sys, sysverbs.placement._assign; print('typing_extensions' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_one_hop_and_a_two_gpu_uuid_prefix(tmp_path: Path) -> None:
    """A GPU and a NIC on one port: 1 hop (not "1 hops"); a UUID prefix two GPUs share
    is ambiguous, as one all share is."""
    from sysverbs.placement._assign import visible_gpus

    t = PciTree(tmp_path)
    t.node(0, "0-7")
    rp = "pci0000:00/0000:00:01.0"
    t.pci(rp)
    for i, uuid in enumerate(("GPU-aaaa1111", "GPU-aaaa2222", "GPU-bbbb3333")):
        t.gpu(f"{rp}/0000:01:00.{i}", uuid=f"{uuid}-1111-2222-3333-444455556666", minor=i)
    t.rdma("mlx5_0", f"{rp}/0000:01:00.4", ports=(IB,))
    host = read_host(t.sys, tmp_path / "proc")
    plan = assign(host, host.gpus[:1])
    assert plan[0].reason.startswith("nearest class PIX, 1 hop; ")
    assert plan[0].nics[0].reason.startswith("PIX, 1 hop: ")
    gpus, said = visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "GPU-aaaa"})
    assert gpus == () and said == ("CUDA_VISIBLE_DEVICES=GPU-aaaa; GPU-aaaa is an ambiguous "
                                   "UUID prefix; CUDA_VISIBLE_DEVICES stops at 'GPU-aaaa' (as "
                                   "CUDA does)")
    assert [g.index for g in visible_gpus(host, {"CUDA_VISIBLE_DEVICES": "GPU-b"})[0]] == [2]


def test_even_shares_leave_nothing_over(hosts: dict[str, Topology]) -> None:
    """4 ports for 2 tied GPUs: 2 each, none shared."""
    plan = assign(hosts["four"])
    assert [[n.device for n in a.nics] for a in plan] == [["mlx5_0", "mlx5_1"],
                                                          ["mlx5_2", "mlx5_3"]]
    assert plan[0].reason.endswith("4 ports at the nearest class shared out among 2 GPUs "
                                   "(GPU0, GPU1), 2 each, in PCI address order")


def test_each_anchor_keeps_its_own_name(hosts: dict[str, Topology]) -> None:
    """Two anchors on one function, or an anchor on a GPU given too: the same NICs, each
    under its own anchor."""
    host = hosts["hgx"]
    by_name, by_bdf = find_anchor(host, "mlx5_2"), find_anchor(host, "0000:54:00.0")
    gpu = find_anchor(host, host.gpus[0].address)
    plan = assign(host, [by_name, by_bdf, host.gpus[0], gpu])
    assert [(a.anchor.name if a.anchor else None, a.gpu.name if a.gpu else None,
             [n.device for n in a.nics]) for a in plan] == [
        ("mlx5_2", None, ["mlx5_2"]), ("0000:54:00.0", None, ["mlx5_2"]),
        (None, "GPU0", ["mlx5_0"]), ("GPU0", "GPU0", ["mlx5_0"])]


def test_require_usable_on_a_tree_without_device_nodes(hosts: dict[str, Topology]) -> None:
    from sysverbs.placement._assign import candidates

    keep, left = candidates(hosts["hgx"], require_usable=True)
    assert keep == [] and [(f.device, f.port, f.code, f.reason) for f in left] == [
        (f"mlx5_{i}", None, "not_usable", "diagnose() says it cannot be used (sysverbs doctor)")
        for i in range(8)]


def test_five_ports_for_two_gpus(hosts: dict[str, Topology]) -> None:
    """m // k = 2 each, the one left over shared: three each."""
    plan = assign(hosts["five"])
    assert [[n.device for n in a.nics] for a in plan] == [["mlx5_0", "mlx5_1", "mlx5_4"],
                                                          ["mlx5_2", "mlx5_3", "mlx5_4"]]


@pytest.mark.parametrize("error", [OSError(13, "Permission denied"), ValueError("bad")])
def test_a_failed_diagnose_leaves_every_device_out(hosts: dict[str, Topology],
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   error: Exception) -> None:
    from sysverbs.devices import diagnosis
    from sysverbs.placement._assign import candidates

    def fail(**options: object) -> None:
        raise error

    monkeypatch.setattr(diagnosis, "diagnose", fail)
    keep, left = candidates(hosts["hgx"], require_usable=True)
    assert keep == [] and {(f.code, f.reason) for f in left} == {
        ("not_usable", f"diagnose() failed: {error}")} and len(left) == 8

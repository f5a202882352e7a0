"""The layout (sysverbs/placement/_layout.py) against rdma-core's ``kernel-boot/rdma_topo``:
its outputs on every Grace host of the testing kit, on an Inline host and on two of
today's PCIe fixtures are recorded in tests/data/rdma_topo/ (by
tools/rdma_topo_outputs.py, with the rdma-core commit); sysverbs must name the same
layout and find the same GPU / DMA function / NIC complexes, where it differs only
where docs/placement.md says so.  rdma_topo is not needed at test time."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from sysverbs import testing
from sysverbs.placement import (
    Layout,
    Topology,
    assign,
    layout,
    parse_vpd,
    read_host,
    read_layout,
    read_vpd,
)
from sysverbs.testing.builder_grace import GRACE_HOSTS, OTHER_HOSTS, VARIANTS
from tests.conftest import fast_tmpdir

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "rdma_topo"
FIXTURES = ("gpu-dgx-a100", "gpu-pcie-2socket")
TREES = (*GRACE_HOSTS, *OTHER_HOSTS, *VARIANTS, *FIXTURES)
#: rdma_topo's words for a layout: check's first line, or its error.
RDMA_TOPO_KIND = (("All ConnectX DMA functions", "dma-based"),
                  ("All NUMA-based complexes", "numa-based"),
                  ("All NIC/GPU complexes", "inline"),
                  ("does not have a VPD V3 UUID", "dma-based"),  # DMA-based, then no tie
                  ("No CX NICs found in NUMA-based complex", "numa-based"),
                  ("No supported topology detected", "pcie"))
#: Where sysverbs names another layout, and why (docs/placement.md): rdma_topo's NUMA
#: rule takes a GPU on any root port; sysverbs only on a Grace/Vera root port.
DIVERGES = {"gpu-pcie-2socket": ("numa-based", "pcie")}


def recorded(tree: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / f"{tree}.json").read_text())
    return doc


def rdma_topo_kind(doc: dict[str, Any]) -> str:
    text = doc["runs"][1]["stdout"]
    for words, kind in RDMA_TOPO_KIND:
        if words in text:
            return kind
    raise AssertionError(f"rdma_topo's check says nothing known: {text!r}")


def rdma_topo_complexes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    run = doc["runs"][0]
    if run["rc"] != 0:
        return []
    out: list[dict[str, Any]] = json.loads(run["stdout"])
    return out


@pytest.fixture(scope="module")
def hosts() -> Iterator[dict[str, Topology]]:
    with fast_tmpdir("sv-layout-") as base:
        out = {}
        for name, make in {**GRACE_HOSTS, **OTHER_HOSTS, **VARIANTS}.items():
            fake = make().materialize(base / name)
            out[name] = read_host(fake.sysfs, fake.root / "proc")
        for name in FIXTURES:
            fake = testing.materialize(name, base / name)
            out[name] = read_host(fake.sysfs, fake.root / "proc")
        yield out


def test_data_is_recorded_for_every_tree() -> None:
    """Each tree has its recording, all from one rdma-core commit."""
    commits = set()
    for tree in TREES:
        doc = recorded(tree)
        assert doc["tree"] == tree and doc["script"] == "kernel-boot/rdma_topo"
        assert [r["args"] for r in doc["runs"]] == [["topo", "-j"], ["check"]]
        commits.add(doc["rdma_core_commit"])
    assert len(commits) == 1 and re.fullmatch(r"[0-9a-f]{40}", commits.pop())


@pytest.mark.parametrize("tree", [t for t in TREES if t != "gb300-nvl72-orphan"])
def test_layout_kind_is_rdma_topos(tree: str, hosts: dict[str, Topology]) -> None:
    theirs = rdma_topo_kind(recorded(tree))
    ours = read_layout(hosts[tree])
    assert ours.kind in ("dma-based", "numa-based", "inline", "pcie") and ours.reason
    assert (theirs, ours.kind) == DIVERGES.get(tree, (theirs, theirs))


def _pf_names(c: dict[str, Any]) -> dict[str, list[str]]:
    return {p["address"]: p["rdma_devices"] for p in c["pfs"]}


def _their_names(c: dict[str, Any], pfs: set[str]) -> dict[str, list[str]]:
    return {a: sorted(s.get("infiniband", [])) for a, s in c["subsystems"].items()
            if a in pfs}


@pytest.mark.parametrize("tree", ["gb300-nvl72", "gb300-nvl72-crossed", "dgx-station-gb300",
                                  "oci-gb300-planes-vfs"])
def test_dma_based_complexes_are_rdma_topos(tree: str, hosts: dict[str, Topology]) -> None:
    """Each DMA function: the same GPU, the same PFs (tied by VPD V3, as rdma_topo
    ties them) with the same RDMA devices; the NIC's VPD name is rdma_topo's."""
    ours = read_layout(hosts[tree])
    theirs = rdma_topo_complexes(recorded(tree))
    assert len(theirs) == len(ours.complexes) > 0
    by_dma = {str(c["dma_function"]): c for c in ours.complexes}
    for t in theirs:
        c = by_dma[t["rdma_dma_bdf"]]
        assert c["gpu"] == t["gpu_bdf"]
        nic: Any = c["nic"]
        assert nic["status"] == "resolved" and "V3" in nic["via"]
        pfs = _pf_names(nic)
        assert min(pfs) == t["rdma_nic_pf_bdf"]
        their_pfs = set(t["subsystems"])  # the functions with the DMA function's V3
        assert set(pfs) == their_pfs
        assert pfs == _their_names(t, their_pfs)
        assert {p["numa_node"] for p in nic["pfs"]} == {t["numa_node"]}
        pf_dir = hosts[tree].pci[t["rdma_nic_pf_bdf"]].path
        assert parse_vpd(Path(pf_dir, "vpd").read_bytes())["name"] == t["rdma_nic_vpd_name"]


def _their_numa_pfs(t: dict[str, Any]) -> set[str]:
    if "rdma_nic_pf_bdf" in t:
        return {t["rdma_nic_pf_bdf"]}
    return {pf for board in t["rdma_nic_boards"] for nic in board["nics"]
            for pf in nic["pf_bdfs"]}


@pytest.mark.parametrize("tree", ["gb200-nvl72", "gh200"])
def test_numa_based_complexes_are_rdma_topos(tree: str, hosts: dict[str, Topology]) -> None:
    """One complex per NUMA node: its GPUs and its ConnectX PFs (BlueField-3 left
    out, named in ``left_out``), with their RDMA devices."""
    ours = {c["numa_node"]: c for c in read_layout(hosts[tree]).complexes}
    theirs = rdma_topo_complexes(recorded(tree))
    assert sorted(ours) == sorted(t["numa_node"] for t in theirs)
    for t in theirs:
        c = ours[t["numa_node"]]
        assert c["gpus"] == sorted(t["gpu_bdfs"])
        pfs = _their_numa_pfs(t)
        assert set(_pf_names(c)) == pfs
        assert _pf_names(c) == _their_names(t, pfs)
    if tree == "gb200-nvl72":  # the BlueField-3s of NVIDIA's table
        assert [c["left_out"] for _, c in sorted(ours.items())] == [
            ["mlx5_2", "mlx5_3"], ["mlx5_6", "mlx5_7"]]


def test_inline_complex_is_rdma_topos(hosts: dict[str, Topology]) -> None:
    """The GPU and the PFs below its CX switch; rdma_topo names one PF of them."""
    (c,) = read_layout(hosts["inline-cx8"]).complexes
    (t,) = rdma_topo_complexes(recorded("inline-cx8"))
    assert c["gpu"] == t["gpu_bdf"]
    assert t["rdma_nic_pf_bdf"] in _pf_names(c)
    assert _pf_names(c) == {"0000:03:00.0": ["mlx5_0"], "0000:03:00.1": ["mlx5_1"]}


def test_without_vpd_the_nic_is_unresolved(hosts: dict[str, Topology]) -> None:
    """Without ``vpd`` rdma_topo stops (no V3 UUID); sysverbs keeps each GPU's DMA
    function (a PCIe fact) and says ``unresolved`` with every CX-8 PF as a candidate,
    never a guess."""
    text = recorded("gb300-nvl72-novpd")["runs"][0]["stdout"]
    assert "does not have a VPD V3 UUID" in text
    ours = read_layout(hosts["gb300-nvl72-novpd"])
    full = read_layout(hosts["gb300-nvl72"])
    assert [(c["dma_function"], c["gpu"]) for c in ours.complexes] == [
        (c["dma_function"], c["gpu"]) for c in full.complexes]
    for c in ours.complexes:
        nic: Any = c["nic"]
        assert nic["status"] == "unresolved" and "pfs" not in nic
        assert "its vpd is absent" in nic["reason"]
        assert [p["address"] for p in nic["candidates"]] == [
            "0000:03:00.0", "0002:03:00.0", "0010:03:00.0", "0012:03:00.0"]


def test_unreadable_or_mismatched_vpd_is_unresolved(hosts: dict[str, Topology]) -> None:
    """The pure function: a DMA function whose vpd is unreadable (not root), or whose
    V3 no PF carries, leaves its NIC unresolved and says why."""
    host = hosts["dgx-station-gb300"]
    vpd = read_vpd(host)
    assert isinstance(vpd["0009:03:00.0"], bytes)
    resolved = layout(host, vpd).complexes[0]["nic"]
    assert isinstance(resolved, dict) and resolved["status"] == "resolved"
    unreadable: Any = layout(host, {**vpd, "0009:03:00.0": "unreadable"}).complexes[0]["nic"]
    assert unreadable["status"] == "unresolved" and "root only" in unreadable["reason"]
    other = vpd["0001:03:00.0"]
    assert isinstance(other, bytes)
    changed = other.replace(b"5eb0c8d9", b"5eb0c8d8")
    mismatch: Any = layout(host, {**vpd, "0001:03:00.0": changed,
                                  "0001:03:00.1": changed}).complexes[0]["nic"]
    assert mismatch["status"] == "unresolved" and "no ConnectX PF has" in mismatch["reason"]
    assert [p["rdma_devices"] for p in mismatch["candidates"]] == [["mlx5_0"], ["mlx5_1"]]


def test_layout_is_a_record() -> None:
    lay = Layout("pcie", "why")
    assert lay.as_dict() == {"kind": "pcie", "reason": "why", "complexes": []}


def test_topo_json_has_the_layout(tmp_path: Path) -> None:
    """``sysverbs topo --json``'s ``layout`` object, valid against its schema."""
    fake = GRACE_HOSTS["gb300-nvl72"]().materialize(tmp_path / "h")
    proc = subprocess.run([sys.executable, "-m", "sysverbs", "topo", "--json", "--sysfs-path",
                           str(fake.sysfs)], capture_output=True, text=True, check=True,
                          cwd=ROOT, timeout=120)
    doc = json.loads(proc.stdout)
    schema = json.loads((ROOT / "sysverbs/cli/schemas/topo.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["layout"]["kind"] == "dma-based"
    assert [(c["gpu"], c["dma_function"], [p["rdma_devices"] for p in c["nic"]["pfs"]])
            for c in doc["layout"]["complexes"]] == [
        ("0008:06:00.0", "0008:03:00.0", [["ibp3s0"]]),
        ("0009:06:00.0", "0009:03:00.0", [["ibP2p3s0"]]),
        ("0018:06:00.0", "0018:03:00.0", [["ibP16p3s0"]]),
        ("0019:06:00.0", "0019:03:00.0", [["ibP18p3s0"]])]


def test_vpd_is_read_only_with_a_dma_function(hosts: dict[str, Topology]) -> None:
    """A VPD read goes to the device: hosts without a DMA function read none."""
    assert read_vpd(hosts["gb200-nvl72"]) == {}
    assert sorted(read_vpd(hosts["gb300-nvl72"])) == [
        "0000:03:00.0", "0002:03:00.0", "0008:03:00.0", "0009:03:00.0", "0010:03:00.0",
        "0012:03:00.0", "0018:03:00.0", "0019:03:00.0"]


def test_a_dma_function_no_pf_ties_to(hosts: dict[str, Topology]) -> None:
    """One CX-8's PF carries a V3 no DMA function has: rdma_topo stops with a traceback
    (its V3 table holds the DMA function itself, so its "does not have a matching PF"
    check never fires and an empty PF list is indexed); sysverbs resolves the other
    three GPUs as rdma_topo does on the whole tray and leaves the fourth unresolved,
    its one untied PF a candidate, saying why."""
    run = recorded("gb300-nvl72-orphan")["runs"][0]
    assert run["rc"] == 1 and run["stderr_last_line"].startswith("IndexError")
    ours = read_layout(hosts["gb300-nvl72-orphan"]).complexes
    theirs = {t["rdma_dma_bdf"]: t for t in rdma_topo_complexes(recorded("gb300-nvl72"))}
    for c in ours[:3]:
        nic: Any = c["nic"]
        assert nic["status"] == "resolved"
        assert list(_pf_names(nic)) == [theirs[str(c["dma_function"])]["rdma_nic_pf_bdf"]]
    last: Any = ours[3]
    assert last["dma_function"] == "0019:03:00.0" and last["nic"]["status"] == "unresolved"
    assert "no ConnectX PF has its VPD V3 keyword" in last["nic"]["reason"]
    assert [p["address"] for p in last["nic"]["candidates"]] == ["0012:03:00.0"]


def test_multi_plane_pfs_and_their_vfs(hosts: dict[str, Topology]) -> None:
    """OCI's GB300.4: each CX-8 one RDMA device whose four ports are its planes, the
    planes' other functions (netdevs only) and one VF.  The complexes are rdma_topo's
    (checked above); each GPU's pairing adds the VF of its PF, which rdma_topo does not
    list: OCI's NCCL log uses ``rdma_vf_rail<N>_dma``, the VF's Data Direct twin."""
    host = hosts["oci-gb300-planes-vfs"]
    by_name = {n.name: n for n in host.nics}
    for i in range(4):
        assert [p.port for p in by_name[f"rdma_rail{i}"].ports] == [1, 2, 3, 4]
        assert by_name[f"rdma_vf_rail{i}"].address == by_name[f"rdma_rail{i}"].address[:-1] + "4"
    for a in assign(host):
        assert a.pairing is not None and a.pairing.status == "resolved"
        i = a.gpu.index
        assert a.pairing.nics == (f"rdma_rail{i}", f"rdma_vf_rail{i}")
        assert f"rdma_vf_rail{i}_dma" in a.pairing.reason

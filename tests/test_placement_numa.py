"""sysverbs.placement's NUMA affinity when ``numa_node`` is -1: decided from the CPUs."""

from __future__ import annotations

from pathlib import Path

from sysverbs import testing
from sysverbs.placement import read_host

from .pcitree import PciTree
from .placement_trees import DATA, from_lspci, parse_matrix

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
    from sysverbs.placement import host_json, render_matrix

    for name in ("gpu-pcie-2socket", "gpu-hgx-h100", "gpu-dgx-b200"):
        fake = testing.materialize(testing.fixture_path(name), tmp_path / name)
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

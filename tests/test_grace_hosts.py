"""The testing kit's Grace hosts (sysverbs/testing/builder_grace.py): their NUMA nodes
and GPU memory as hwloc (Debian's ``lstopo-no-graphics``) reads them, their PCI tree as
the public captures show it, and the VPD images as the PCI spec lays them out."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from sysverbs.testing.builder_grace import GRACE_HOSTS, endpoint_config, vpd_image
from tests.conftest import fast_tmpdir, require
from tests.oracle import hwloc

#: name -> (NUMA nodes, CPU nodes, GPU memory node -> the GPU's address)
EXPECTED = {
    "gb200-nvl72": (34, {0: "0-71", 1: "72-143"},
                    {2: "0008:01:00.0", 10: "0009:01:00.0", 18: "0018:01:00.0",
                     26: "0019:01:00.0"}),
    "gb300-nvl72": (34, {0: "0-71", 1: "72-143"},
                    {2: "0008:06:00.0", 10: "0009:06:00.0", 18: "0018:06:00.0",
                     26: "0019:06:00.0"}),
    "dgx-station-gb300": (9, {0: "0-71"}, {1: "0009:06:00.0"}),
    "gh200": (9, {0: "0-71"}, {1: "0009:01:00.0"}),
}


@pytest.fixture(scope="module")
def roots() -> Iterator[dict[str, Path]]:
    with fast_tmpdir("sv-grace-") as base:
        yield {name: make().materialize(base / name).root
               for name, make in GRACE_HOSTS.items()}


def test_every_host_is_expected() -> None:
    assert set(GRACE_HOSTS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_numa_nodes_in_sysfs(name: str, roots: dict[str, Path]) -> None:
    """CPU nodes first, then the CPU-less GPU memory nodes; ``has_cpu`` lists only the
    CPU nodes, ``has_memory`` adds the HBM nodes (GB200: 34 nodes, HBM in 2/10/18/26)."""
    count, cpus, hbm = EXPECTED[name]
    node = roots[name] / "sys/devices/system/node"
    listed = sorted(int(p.name[4:]) for p in node.glob("node[0-9]*"))
    assert listed == list(range(count))
    for n in listed:
        assert (node / f"node{n}/cpulist").read_text().strip() == cpus.get(n, "")
    assert (node / "has_cpu").read_text().strip() == hwloc_list(sorted(cpus))
    with_memory = sorted([*cpus, *hbm])
    assert (node / "has_memory").read_text().strip() == hwloc_list(with_memory)
    for n, gpu in hbm.items():
        status = roots[name] / f"proc/driver/nvidia/gpus/{gpu}/numa_status"
        assert status.read_text() == f"Node: {n}\n"
        pci = next(roots[name].joinpath("sys/bus/pci/devices").glob(gpu)).resolve()
        assert (pci / "numa_node").read_text().strip() in {str(c) for c in cpus}


def hwloc_list(nodes: list[int]) -> str:
    out: list[str] = []
    for n in nodes:
        if out and out[-1].split("-")[-1] == str(n - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ",".join(out)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hwloc_finds_the_gpu_memory_nodes(name: str, roots: dict[str, Path]) -> None:
    """hwloc reads ``numa_status`` and the nodes as it does on a real Grace machine: the
    HBM nodes become ``GPUMemory`` NUMA nodes of the right GPU (with
    ``HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES=1``), local to the GPU's CPUs; the other
    CPU-less nodes stay plain NUMA nodes."""
    require(hwloc.unavailable_reason(), "hwloc (lstopo-no-graphics)")
    count, cpus, hbm = EXPECTED[name]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    env.update(HWLOC_FSROOT=str(roots[name]), HWLOC_COMPONENTS="-x86", HWLOC_THISSYSTEM="0",
               HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES="1", LC_ALL="C")
    proc = subprocess.run([hwloc.LSTOPO, "--of", "xml", "-"], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    gpu_memory: dict[int, str] = {}
    nodes = set()
    for obj in ET.fromstring(proc.stdout).iter("object"):
        if obj.get("type") != "NUMANode":
            continue
        index = int(obj.get("os_index", "-1"))
        nodes.add(index)
        if obj.get("subtype") == "GPUMemory":
            bus = [i.get("value") for i in obj.iter("info") if i.get("name") == "PCIBusID"]
            gpu_memory[index] = bus[0] if bus else ""
    assert nodes == set(range(count))
    assert gpu_memory == hbm


def test_vpd_image_checksum_and_layout() -> None:
    """PCI spec: the identifier string (0x82), the read-only section (0x90) whose ``RV``
    checksum makes every byte up to it sum to 0, the end tag (0x78)."""
    image = vpd_image("NVIDIA ConnectX-8", {"SN": "MT1", "V3": "abc"})
    assert image[0] == 0x82 and image[-1] == 0x78
    rv = image.index(b"RV\x01")
    assert sum(image[:rv + 4]) % 256 == 0
    assert b"SN\x03MT1V3\x03abc" in image


def test_endpoint_config_header() -> None:
    cfg = endpoint_config(0x15B3, 0x2100, 0x080100, 0xA1)
    assert len(cfg) == 64
    assert cfg[0:4] == bytes((0xB3, 0x15, 0x00, 0x21))
    assert cfg[8:12] == bytes((0xA1, 0x00, 0x01, 0x08))

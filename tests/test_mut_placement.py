"""placement's small readers' edges (issue 41: the mutants of ``make mutation``):
_gpumem.py's ``numa_status`` line and read, on small hand-written files.  Pure
functions: no subprocess.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from sysverbs.placement._gpumem import gpu_memory_node, parse_numa_status

# ------------------------------------------------------------------ placement/_gpumem.py


@pytest.mark.parametrize(("text", "want"), [
    ("Status: online\nNode: 3\n", 3),  # not the first line
    ("Nodes: 4\nNode: 5\n", 5),  # the key whole
    ("  Node :  10  \n", 10),  # spaces around key and value
    ("Node: x\nNode: 2\n", None),  # the first Node line decides
    ("Node: +2\n", None), ("Node:\n", None), ("Status: online\n", None),
])
def test_the_node_line(text: str, want: Optional[int]) -> None:
    assert parse_numa_status(text) == want


def _gpu_node(tmp_path: Path, data: Optional[bytes]) -> Optional[int]:
    d = tmp_path / "driver" / "nvidia" / "gpus" / "0009:01:00.0"
    d.mkdir(parents=True)
    if data is not None:
        (d / "numa_status").write_bytes(data)
    host = SimpleNamespace(proc_path=str(tmp_path))
    return gpu_memory_node(host, SimpleNamespace(address="0009:01:00.0"))  # type: ignore[arg-type]


@pytest.mark.parametrize(("data", "want"), [
    (None, None), (b"Node: 18\nStatus: online\n", 18), (b"Node: 2\xff\n", None),
    # one read of 4096 bytes: a Node line at its end is cut there
    (b"x" * 4088 + b"\nNode: 17\n", 1), (b"x" * 4089 + b"\nNode: 17\n", None),
])
def test_the_memory_node_of_a_gpu(tmp_path: Path, data: Optional[bytes],
                                  want: Optional[int]) -> None:
    assert _gpu_node(tmp_path, data) == want


# ------------------------------------------------------------------ placement/_dra.py

_ROOT_OK = "../../../devices/pci0000:00/0000:01:00.0/0000:02:00.0"


@pytest.mark.parametrize(("bdf", "link", "want"), [
    ("0000:02:00.0", _ROOT_OK, ("pci0000:00", "")),
    ("0000:02:00.0", "../../../devices/pci0000:00/0000:02:00.0", ("pci0000:00", "")),
    ("", _ROOT_OK, (None, "PCI Bus ID cannot be empty")),
    ("0000:02:00.0x", _ROOT_OK, (None, "invalid PCI Bus ID format: 0000:02:00.0x")),
    ("0000:0A:00.0", _ROOT_OK, (None, "invalid PCI Bus ID format: 0000:0A:00.0")),
    ("0000:02:00.0", None, (None, "failed to read symlink for PCI Bus ID 0000:02:00.0: no "
                                  "such file or directory")),
    # an absolute link is taken as it is: it does not start with devices/pci
    ("0000:02:00.0", "/sys/devices/pci0000:00/0000:02:00.0",
     (None, "symlink target for PCI Bus ID 0000:02:00.0 is invalid: it must start with "
            "devices/pci: /sys/devices/pci0000:00/0000:02:00.0")),
    ("0000:02:00.0", "../../../devices/pci0000:00/0000:02:00.1",
     (None, "symlink target for PCI Bus ID 0000:02:00.0 is invalid: it must end with "
            "0000:02:00.0: devices/pci0000:00/0000:02:00.1")),
])
def test_pcie_root_texts(bdf: str, link: Optional[str],
                         want: tuple[Optional[str], str]) -> None:
    from sysverbs.placement._dra import pcie_root

    assert pcie_root(bdf, link) == want


@pytest.mark.parametrize(("node", "row", "sockets", "want"), [
    (None, "10", {}, (None, "failed to read NUMA node")),
    (-2, "10", {}, (None, "no NUMA affinity (numa_node=-2): no numaNode attribute")),
    (1024, "10", {}, (None, "invalid NUMA node 1024: exceeds maximum supported (1023)")),
    (1023, None, {}, ([1023], "")),  # the last node there is; no row
    (0, "10 x 20", {}, ([0], "")),  # a row that is not numbers is none
    (2, "10 20", {}, ([2], "")),  # a row too short for the node
    (0, "", {}, ([0], "")),
    # the nearest others, in order; a socket unknown on either side does not filter
    (1, "20 10 20 30 20", {1: 0, 0: 1, 2: None, 4: 0}, ([1, 2, 4], "")),
    (1, "20 10 20 20", {0: 0, 2: 0, 3: 1}, ([1, 0, 2, 3], "")),  # its own socket unknown
    (3, "21 21 11 10", {}, ([3, 2], "")),
])
def test_numa_node_lists(node: Optional[int], row: Optional[str],
                         sockets: dict[int, Optional[int]],
                         want: tuple[Optional[list[int]], str]) -> None:
    from sysverbs.placement._dra import numa_node_list

    assert numa_node_list(node, row, sockets) == want


def test_read_dra_inputs(tmp_path: Path) -> None:
    """Each address's link (none: None), each node's distance row and the package of
    its first CPU (unreadable, not a number, no CPU: None; -1 as it is)."""
    from sysverbs.placement._dra import read_dra_inputs

    sysfs = tmp_path / "sys"
    (sysfs / "bus/pci/devices").mkdir(parents=True)
    (sysfs / "bus/pci/devices/0000:02:00.0").symlink_to(_ROOT_OK)
    for node, cpus, pkg in ((0, "4-7,2", "1"), (1, "9", "-1"), (2, "", None), (3, "8", "x"),
                            (4, "12", None)):
        d = sysfs / f"devices/system/node/node{node}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpus + "\n")
        if node != 4:
            (d / "distance").write_text(f"1{node} 20\n")
        if pkg is not None:
            t = sysfs / f"devices/system/cpu/cpu{cpus.split(',')[-1].split('-')[0]}/topology"
            t.mkdir(parents=True)
            (t / "physical_package_id").write_text(pkg + "\n")
    host = SimpleNamespace(sysfs_path=str(sysfs), numa_nodes={4: None, 0: None, 2: None,
                                                               1: None, 3: None})
    links, distance, socket = read_dra_inputs(host,  # type: ignore[arg-type]
                                              ["0000:02:00.0", "0000:03:00.0"])
    assert links == {"0000:02:00.0": _ROOT_OK, "0000:03:00.0": None}
    assert distance == {0: "10 20", 1: "11 20", 2: "12 20", 3: "13 20", 4: None}
    assert list(distance) == [0, 1, 2, 3, 4]
    assert socket == {0: 1, 1: -1, 2: None, 3: None, 4: None}


def test_dra_report_of_a_dgx_a100(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPUs first, then the RDMA devices, in the host's order; the NUMA lists from the
    distance rows; with a pairing given for four GPUs: aligned (the NICs on the GPU's
    root), not aligned (the warning names both sets, and the DMA function when there is
    one), none, and a pairing not resolved (aligned whatever the roots)."""
    from sysverbs.model import HostModel
    from sysverbs.placement import _dra, read_layout
    from sysverbs.testing.cache import fixture_tree

    host = HostModel(fixture_tree("gpu-dgx-a100").host_root).placement
    rule = {"0000:07:00.0": ("resolved", ("mlx5_1", "mlx5_0"), None),
            "0000:47:00.0": ("resolved", ("mlx5_9",), None),
            "0000:87:00.0": ("resolved", (), "0000:87:00.1"),
            "0000:b7:00.0": ("unresolved", ("mlx5_9",), None)}
    monkeypatch.setattr(_dra, "pairing", lambda h, lay: {
        a: SimpleNamespace(rule="numa", status=s, nics=n, dma_function=f)
        for a, (s, n, f) in rule.items()})
    doc = _dra.read_dra(host, read_layout(host))
    devices: list[dict[str, Any]] = doc["devices"]  # type: ignore[assignment]
    assert [d["name"] for d in devices] == [f"GPU{i}" for i in range(8)] + [
        f"mlx5_{i}" for i in range(10)]
    numa = "resource.kubernetes.io/numaNode"
    assert [d["attributes"][numa] for d in devices[:8:2]] == [
        [3, 0, 1, 2], [1, 0, 2, 3], [7, 4, 5, 6], [5, 4, 6, 7]]
    assert [d.get("pairing", {}).get("pcie_root_aligned") for d in devices[:8]] == [
        True, None, False, None, False, None, True, None]
    assert devices[0]["pairing"] == {"rule": "numa", "status": "resolved",
                                     "nics": ["mlx5_1", "mlx5_0"], "dma_function": None,
                                     "pcie_root_aligned": True}
    assert doc["warnings"] == [
        "GPU2 (0000:47:00.0, resource.kubernetes.io/pcieRoot pci0000:40): aligning on "
        "pcieRoot gives mlx5_2, mlx5_3, the numa rule mlx5_9: select the NIC by pciBusID "
        "or name, not by pcieRoot",
        "GPU4 (0000:87:00.0, resource.kubernetes.io/pcieRoot pci0000:80): aligning on "
        "pcieRoot gives mlx5_4, mlx5_5, the numa rule none (its CX-8's DMA function "
        "0000:87:00.1 shares the GPU's root; the PF does not): select the NIC by pciBusID "
        "or name, not by pcieRoot"]


def test_dra_report_of_devices_without_a_pci_function_or_node() -> None:
    """rxe1 (no PCI function): no attribute; a cloud VM's GPUs (numa_node unreadable):
    no numaNode, said."""
    from sysverbs.model import HostModel
    from sysverbs.placement import read_dra, read_layout
    from sysverbs.testing.cache import fixture_tree

    host = HostModel(fixture_tree("rxe").host_root).placement
    devices: Any = read_dra(host, read_layout(host))["devices"]
    assert devices[1] == {"kind": "rdma", "name": "rxe1", "attributes": {},
                          "problems": ["not on a PCI function: no PCI attribute"]}
    host = HostModel(fixture_tree("gpu-cloud-vm").host_root).placement
    gpu0: Any = read_dra(host, read_layout(host))["devices"][0]
    assert gpu0["problems"] == ["resource.kubernetes.io/numaNode: failed to read NUMA node"]
    assert list(gpu0["attributes"]) == ["resource.kubernetes.io/pciBusID",
                                        "resource.kubernetes.io/pcieRoot"]

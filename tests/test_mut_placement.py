"""placement's small readers' edges (issue 41: the mutants of ``make mutation``):
_gpumem.py's ``numa_status`` line and read, on small hand-written files.  Pure
functions: no subprocess.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Optional

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

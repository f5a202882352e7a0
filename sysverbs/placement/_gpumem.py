"""A GPU's memory NUMA node: on Grace (GH200, GB200, GB300) the driver onlines the GPU's
memory as CPU-less NUMA nodes and ``/proc/driver/nvidia/gpus/<BDF>/numa_status`` names
the node in its ``Node:`` line (hwloc reads that line, ``topology-linux.c``).  That node
is never the GPU's node for placement: its PCI ``numa_node`` (the CPU node) is.  This is
what nvidia-smi's ``GPU NUMA ID`` column shows (2, 10, 18, 26 on a GB200 tray)."""

from __future__ import annotations

import os

from ..ground.sysfs_read import read_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from ._topology import Gpu, Topology

__all__ = ["gpu_memory_node", "parse_numa_status"]


def parse_numa_status(text: str) -> Optional[int]:
    """The node of a ``numa_status`` text's ``Node:`` line (None: none, or -1).

    >>> parse_numa_status("Node: 2\\n"), parse_numa_status("Node: -1\\n")
    (2, None)
    """
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Node":
            value = value.strip()
            return int(value) if value.isdigit() else None
    return None


def gpu_memory_node(host: Topology, gpu: Gpu) -> Optional[int]:
    """``gpu``'s memory node from its ``numa_status`` (None: no such file or line)."""
    path = os.path.join(host.proc_path, "driver", "nvidia", "gpus", gpu.address,
                        "numa_status")
    data = read_file(path, 4096)  # as every file of the host is read (once per command)
    return None if isinstance(data, int) else parse_numa_status(
        data.decode("utf-8", "replace"))

"""GPU/NIC placement from sysfs alone: the PCI tree, distances as ``nvidia-smi topo -m``
and NCCL name them, and which RDMA device each GPU or local rank should use.

Imported on first use (``import sysverbs`` does not import it).  See
``docs/placement.md``.  NVLink/NVSwitch links cannot be seen in sysfs: every distance
here is a PCIe distance.  :data:`GPU_CLASSES` says what counts as a GPU: PCI vendor id
-> the class codes (``class >> 8``) that make a function of that vendor with nothing
below it a GPU or accelerator.

>>> import tempfile
>>> from sysverbs import testing
>>> from sysverbs.placement import read_host, assign
>>> with tempfile.TemporaryDirectory() as tmp:
...     fake = testing.materialize("dgx-a100", tmp)
...     host = read_host(fake.sysfs)
>>> [n.name for n in host.nics][:3], len(host.gpus)
(['mlx5_0', 'mlx5_1', 'mlx5_2'], 0)
>>> host.smi_class("mlx5_0", "mlx5_1")
'PXB'
"""

from __future__ import annotations

from ..ground.text import cpulist_text
from ._anchor import find_anchor, gpu_anchor
from ._bind import CPU_MODES, MEM_MODES, cpu_node, cpu_set, mem_node, socket_nodes
from ._cpus import CpuTopology, read_cpus
from ._distance import Distance
from ._dra import read_dra
from ._gpumem import gpu_memory_node
from ._layout import Layout, layout, parse_vpd, read_data_direct, read_layout, read_vpd
from ._pci import PciDevice
from ._read import GPU_CLASSES, read_host, read_host_at
from ._smi import FORMATS, host_json, render_matrix
from ._topology import Anchor, Gpu, Nic, Port, Topology

#: The names of ``_assign``, imported on first use (``sysverbs topo`` without
#: ``--assign`` does not need them).
_ASSIGN = ("RANK_VARIABLES", "Assignment", "Filtered", "NicChoice", "assign", "assign_rank",
           "host_link_layer", "local_rank", "visible_gpus")
#: The names of ``_links``, imported on first use (the matrix does not need them).
_LINKS = ("DegradedLink", "degraded_links")
#: The names of ``_acs`` (acs_redirect, iommu_translated), imported on first use.
_ACS = ("AcsRedirect", "TranslatedNic", "acs_redirects", "translated_nics")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._acs import AcsRedirect, TranslatedNic, acs_redirects, translated_nics
    from ._assign import (
        RANK_VARIABLES,
        Assignment,
        Filtered,
        NicChoice,
        assign,
        assign_rank,
        host_link_layer,
        local_rank,
        visible_gpus,
    )
    from ._links import DegradedLink, degraded_links

__all__ = [
    "AcsRedirect",
    "CPU_MODES",
    "CpuTopology",
    "FORMATS",
    "MEM_MODES",
    "Anchor",
    "Assignment",
    "DegradedLink",
    "Distance",
    "Filtered",
    "GPU_CLASSES",
    "Gpu",
    "Topology",
    "Layout",
    "Nic",
    "NicChoice",
    "PciDevice",
    "Port",
    "RANK_VARIABLES",
    "TranslatedNic",
    "acs_redirects",
    "assign",
    "assign_rank",
    "cpu_node",
    "cpu_set",
    "cpulist_text",
    "degraded_links",
    "find_anchor",
    "gpu_anchor",
    "host_json",
    "layout",
    "host_link_layer",
    "local_rank",
    "mem_node",
    "parse_vpd",
    "gpu_memory_node",
    "read_cpus",
    "read_data_direct",
    "read_dra",
    "read_host",
    "read_layout",
    "read_vpd",
    "read_host_at",
    "render_matrix",
    "socket_nodes",
    "translated_nics",
    "visible_gpus",
]


def __getattr__(name: str) -> Any:
    if name in _ACS:
        from . import _acs

        value = globals()[name] = getattr(_acs, name)
        return value
    if name in _LINKS:
        from . import _links

        value = globals()[name] = getattr(_links, name)
        return value
    if name not in _ASSIGN:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _assign

    for other in _ASSIGN:
        globals()[other] = getattr(_assign, other)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

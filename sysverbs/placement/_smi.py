"""``nvidia-smi topo -mp``'s layout, from a :class:`Topology` (and the JSON model).

``topo -mp`` is the PCIe-only matrix: GPU-GPU cells are PCIe classes, as here (NVLink
is not visible in sysfs), and its Legend has no ``NV#`` line; ``legend="m"`` adds the
line ``topo -m`` prints.  The layout is that of the NVIDIA driver since the
``GPU NUMA ID`` column (R535+): a tab-separated header, one row per GPU then per NIC,
`` X `` on the diagonal, ``CPU Affinity``, ``NUMA Affinity``, an empty field and
``GPU NUMA ID`` on GPU rows (NIC rows have the same fields, empty), then the Legend and
the NIC Legend.  NICs are in libibverbs' order (see :func:`matrix_nics`).  GPU-GPU cells are PCIe
classes: NVLink is not visible in sysfs, so no cell is ever ``NV#``.
"""

from __future__ import annotations

from ..ground.errors import UsageError
from ..ground.text import cpulist_text
from ._distance import numa_affinity
from ._gpumem import gpu_memory_node
from ._names import bdf_key, natural_key
from ._topology import endpoints, host_arg, smi_between

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from ._topology import Nic, Topology

LEGEND = """\
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
"""  # noqa: E501  (nvidia-smi's text, verbatim)
#: The line ``topo -m`` adds (``topo -mp``, the PCIe-only matrix, has none).
NVLINK_LINE = "  NV#  = Connection traversing a bonded set of # NVLinks\n"
#: ``"mp"``: ``nvidia-smi topo -mp``'s legend (the PCIe matrix: what sysfs shows);
#: ``"m"``: ``topo -m``'s, with its NV# line (no cell is ever NV#).
LEGENDS = ("mp", "m")

UNDECIDED = "N/A"


def cpulist(cpus: Optional[frozenset[int]]) -> str:
    """{0, 1, 2, 3, 8} -> ``"0-3,8"`` (nvidia-smi's CPU Affinity form); ``""`` for None."""
    return cpulist_text(cpus or ())


def matrix_nics(host: Topology) -> list[Nic]:
    """The NICs of the matrix, in nvidia-smi's order: the order libibverbs lists them
    (the kernel's registration order, which is the order of their ``uverbsN`` numbers;
    devices without one after, by name); unplaced devices are left out."""
    placed = [n for n in host.nics if n.address is not None]
    return sorted(placed, key=lambda n: (n.uverbs is None, n.uverbs or 0,
                                         natural_key(n.name), bdf_key(n.address or "")))


#: Output layouts: "535" (R535 and later: GPU NUMA ID column), "525" (no GPU NUMA ID).
FORMATS = ("535", "525")


def render_matrix(host: Topology, fmt: str = "535", underline: bool = False,
                  legend: str = "mp") -> str:
    """The matrix in ``nvidia-smi topo -mp``'s exact layout (``legend="m"``: with
    ``topo -m``'s legend; ``fmt``: see :data:`FORMATS`; ``underline``: the
    ESC[4m..ESC[0m header R580 writes)."""
    host_arg(host)
    if fmt not in FORMATS:
        raise UsageError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if legend not in LEGENDS:
        raise UsageError(f"legend must be one of {', '.join(LEGENDS)}, not {legend!r}")
    gpus = list(host.gpus)
    nics = matrix_nics(host)
    names = [g.name for g in gpus] + [f"NIC{i}" for i in range(len(nics))]
    ends: list[Any] = [*gpus, *nics]
    extra = ["CPU Affinity", "NUMA Affinity"] + (["GPU NUMA ID"] if fmt == "535" else [])
    header = "\t".join([*names, *extra])
    lines = ["\t" + ("\x1b[4m" + header + "\x1b[0m" if underline else header)]
    where = endpoints(host, ends)
    # The class is symmetric: each pair once (the upper triangle), mirrored.
    cell = [[" X "] * len(ends) for _ in ends]
    for i, a in enumerate(where):
        for j in range(i + 1, len(where)):
            cell[i][j] = cell[j][i] = smi_between(host, a, where[j])[0] or UNDECIDED
    for i in range(len(ends)):
        cells = cell[i]
        if i < len(gpus):
            pci = gpus[i].pci
            node = numa_affinity(pci, host.numa_nodes)[0]
            numa = str(node) if node is not None else UNDECIDED
            mem = gpu_memory_node(host, gpus[i])  # Grace: the GPU memory's own node
            tail = [cpulist(pci.local_cpus), numa] + (
                ["", "N/A" if mem is None else str(mem)] if fmt == "535" else [])
        else:
            tail = ["", "", "", ""] if fmt == "535" else ["", ""]
        lines.append(names[i] + "\t" + "\t".join(cells + tail))
    text = "\n".join(lines) + "\n\n" + LEGEND + (NVLINK_LINE if legend == "m" else "")
    if nics:
        text += "\nNIC Legend:\n\n" + "".join(
            f"  NIC{i}: {n.name}\n" for i, n in enumerate(nics)) + "\n"
    return text


def host_json(host: Topology) -> dict[str, Any]:
    """The model as JSON-ready data (schema ``sysverbs.topo/1``, docs/placement.md)."""
    nics = matrix_nics(host_arg(host))
    ends: list[Any] = [*host.gpus, *nics]
    names = [g.name for g in host.gpus] + [f"NIC{i}" for i in range(len(nics))]
    pairs = []
    for i, a in enumerate(ends):
        for j in range(i + 1, len(ends)):
            d = host.distance(a, ends[j])
            pairs.append({"a": names[i], "b": names[j], "smi": d.smi, "nccl": d.nccl,
                          "hops": d.hops, "reason": d.reason})
    return {
        "schema": "sysverbs.topo/1",
        "sysfs_path": host.sysfs_path,
        "nvlink": "not visible in sysfs: every distance is a PCIe distance",
        "numa_nodes": {str(k): cpulist(v) for k, v in host.numa_nodes.items()},
        "host_bridges": list(host.host_bridges),
        "gpus": [{"name": g.name, "index": g.index, "address": g.address,
                  "vendor": g.vendor, "uuid": g.uuid, "minor": g.minor, "model": g.model,
                  "numa_node": g.pci.numa_node, "memory_node": gpu_memory_node(host, g),
                  "numa_affinity": numa_affinity(g.pci, host.numa_nodes)[0],
                  "numa_affinity_source": numa_affinity(g.pci, host.numa_nodes)[1],
                  "cpus": cpulist(g.pci.local_cpus),
                  "bridges": list(g.pci.bridges), "host_bridge": g.pci.host_bridge}
                 for g in host.gpus],
        "nics": [{"name": f"NIC{nics.index(n)}" if n in nics else None, "device": n.name,
                  "address": n.address, "kind": n.kind, "placement": n.placement,
                  "bond_slave": n.bond_slave,
                  "numa_node": host.pci[n.address].numa_node if n.address else None,
                  "numa_affinity": host.numa_affinity(n)[0],
                  "numa_affinity_source": host.numa_affinity(n)[1],
                  "bridges": list(host.pci[n.address].bridges) if n.address else [],
                  "host_bridge": host.pci[n.address].host_bridge if n.address else None,
                  "ports": [{"port": p.port, "state": p.state, "link_layer": p.link_layer,
                             "rate_gbps": p.rate_gbps, "netdevs": list(p.netdevs)}
                            for p in n.ports]}
                 for n in host.nics],
        "pairs": pairs,
        "pci": [{"address": d.address, "class": f"0x{d.pci_class:06x}"
                 if d.pci_class is not None else None,
                 "vendor": f"0x{d.vendor:04x}" if d.vendor is not None else None,
                 "device": f"0x{d.device:04x}" if d.device is not None else None,
                 "driver": d.driver, "numa_node": d.numa_node,
                 "bridges": list(d.bridges), "host_bridge": d.host_bridge, "vmd": d.vmd,
                 "physfn": d.physfn}
                for d in host.pci.values()],
        "problems": list(host.problems),
    }

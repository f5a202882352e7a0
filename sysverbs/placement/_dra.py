"""Kubernetes DRA's standard device attributes for each GPU and RDMA device, exactly as
``k8s.io/dynamic-resource-allocation/deviceattribute`` computes them, beside the pairing
sysverbs uses, and a warning wherever aligning GPU and NIC on ``pcieRoot`` would pick
other NICs than that pairing (docs/placement.md, "Kubernetes DRA").

deviceattribute's rules (its ``pci_linux.go`` and ``numa_linux.go``; the cases of their
tests are tests/test_grace_dra.py's table):

* ``resource.kubernetes.io/pciBusID``: the BDF, which must match
  ``^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-9a-f]$`` (else "invalid PCI Bus ID
  format"; empty: "PCI Bus ID cannot be empty").
* ``resource.kubernetes.io/pcieRoot``: the link ``bus/pci/devices/<BDF>``, joined to
  that directory and cleaned, must start with ``devices/pci`` and end with the BDF; the
  root is its first component after ``devices/`` (``pci0008:00``).
* ``resource.kubernetes.io/numaNode``, list form: the device's ``numa_node`` (-1: no
  attribute; 1024 and above: none either), first; then the nodes at the smallest
  non-self distance of its ``nodeN/distance`` row, less those whose socket (the
  ``physical_package_id`` of a CPU of their ``cpulist``) is known and differs from the
  node's; ``[node]`` when the row is missing, unreadable or has no other node.

The pure functions take what :func:`read_dra_inputs` read.
"""

from __future__ import annotations

import os
import posixpath
import re

from ..ground.text import parse_cpulist
from ._pairing import pairing
from ._pci import read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Optional

    from ._layout import Layout
    from ._topology import Topology

__all__ = ["MAX_NUMA_NODES", "NUMA_NODE", "PCIE_ROOT", "PCI_BUS_ID", "dra_report",
           "numa_node_list", "pcie_root", "read_dra", "read_dra_inputs"]

PREFIX = "resource.kubernetes.io/"
PCIE_ROOT, PCI_BUS_ID, NUMA_NODE = PREFIX + "pcieRoot", PREFIX + "pciBusID", PREFIX + "numaNode"
MAX_NUMA_NODES = 1024  # deviceattribute's maxNUMANodes (MAX_NUMNODES, CONFIG_NODES_SHIFT 10)
_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")


def bdf_error(bdf: str) -> Optional[str]:
    """deviceattribute's check of a PCI Bus ID: None, or its error."""
    if bdf == "":
        return "PCI Bus ID cannot be empty"
    if not _BDF.fullmatch(bdf):
        return f"invalid PCI Bus ID format: {bdf}"
    return None


def pcie_root(bdf: str, link: Optional[str]) -> tuple[Optional[str], str]:
    """``pcieRoot`` of ``bdf`` whose ``bus/pci/devices/<bdf>`` link reads ``link``
    (None: no such link): (the root, "") or (None, deviceattribute's error)."""
    bad = bdf_error(bdf)
    if bad:
        return None, bad
    if link is None:
        return None, f"failed to read symlink for PCI Bus ID {bdf}: no such file or directory"
    target = link
    if not posixpath.isabs(target):
        target = posixpath.normpath(posixpath.join("bus/pci/devices", target))
    if not target.startswith("devices/pci"):
        return None, (f"symlink target for PCI Bus ID {bdf} is invalid: it must start with "
                      f"devices/pci: {target}")
    if posixpath.basename(target) != bdf:
        return None, (f"symlink target for PCI Bus ID {bdf} is invalid: it must end with "
                      f"{bdf}: {target}")
    return target[len("devices/"):].split("/")[0], ""


def numa_node_list(node: Optional[int], distance: Optional[str],
                   socket_of: Mapping[int, Optional[int]]) -> tuple[Optional[list[int]], str]:
    """The list-form ``numaNode`` of a device on ``node`` (None: unreadable), with the
    text of ``node<node>/distance`` (None: unreadable) and each node's socket (None or
    absent: unknown): (the list, "") or (None, why there is none)."""
    if node is None:
        return None, "failed to read NUMA node"
    if node < 0:
        return None, f"no NUMA affinity (numa_node={node}): no numaNode attribute"
    if node >= MAX_NUMA_NODES:
        return None, f"invalid NUMA node {node}: exceeds maximum supported (1023)"
    fields = (distance or "").split()
    try:
        row = [int(f) for f in fields]
    except ValueError:
        row = []
    if node >= len(row):
        return [node], ""
    others = [d for i, d in enumerate(row) if i != node]
    if not others:
        return [node], ""
    least = min(others)
    mine = socket_of.get(node)
    near = [i for i, d in enumerate(row) if i != node and d == least
            and (mine is None or socket_of.get(i) is None or socket_of.get(i) == mine)]
    return [node, *sorted(near)], ""


def _read(path: str) -> Optional[str]:
    """The file's text, read as every sysfs file is (once inside a command's read-once
    scope); None when it cannot be read."""
    return read_text(os.fsencode(path))


def read_dra_inputs(host: Topology, addresses: Sequence[str]
                    ) -> tuple[dict[str, Optional[str]], dict[int, Optional[str]],
                               dict[int, Optional[int]]]:
    """What the attributes read: each address's ``bus/pci/devices`` link (None:
    none), each NUMA node's ``distance`` row and socket (its first CPU's
    ``physical_package_id``)."""
    from ..ground import inputs

    sysfs = host.sysfs_path
    links: dict[str, Optional[str]] = {}
    for a in addresses:
        try:
            links[a] = os.fsdecode(inputs.readlink(os.path.join(sysfs, "bus/pci/devices", a)))
        except OSError:
            links[a] = None
    base = os.path.join(sysfs, "devices/system/node")
    distance: dict[int, Optional[str]] = {}
    socket: dict[int, Optional[int]] = {}
    for node in sorted(host.numa_nodes):
        distance[node] = _read(os.path.join(base, f"node{node}", "distance"))
        cpus = parse_cpulist((_read(os.path.join(base, f"node{node}", "cpulist")) or "").strip())
        pkg = _read(os.path.join(sysfs, f"devices/system/cpu/cpu{min(cpus)}/topology/"
                                 "physical_package_id")) if cpus else None
        socket[node] = int(pkg) if pkg and pkg.strip().lstrip("-").isdigit() else None
    return links, distance, socket


def _device(kind: str, name: str, bdf: Optional[str], numa: Optional[int],
            links: Mapping[str, Optional[str]], distance: Mapping[int, Optional[str]],
            socket: Mapping[int, Optional[int]]) -> dict[str, object]:
    attrs: dict[str, object] = {}
    problems: list[str] = []
    if bdf is None:
        problems.append("not on a PCI function: no PCI attribute")
    else:
        if bdf_error(bdf) is None:
            attrs[PCI_BUS_ID] = bdf
        root, why = pcie_root(bdf, links.get(bdf))
        if root is not None:
            attrs[PCIE_ROOT] = root
        else:
            problems.append(f"{PCIE_ROOT}: {why}")
        nodes, why = numa_node_list(numa, distance.get(numa) if numa is not None else None,
                                    socket)
        if nodes is not None:
            attrs[NUMA_NODE] = nodes
        else:
            problems.append(f"{NUMA_NODE}: {why}")
    return {"kind": kind, "name": name, "attributes": attrs, "problems": problems}


def dra_report(host: Topology, lay: Layout, links: Mapping[str, Optional[str]],
               distance: Mapping[int, Optional[str]], socket: Mapping[int, Optional[int]]
               ) -> dict[str, object]:
    """``devices``: each GPU and RDMA device with its attributes (and ``pairing``: the
    NICs sysverbs pairs a GPU with, the rule); ``warnings``: each GPU for which a claim
    aligning GPU and NIC on ``pcieRoot`` gets other NICs than that pairing."""
    pairs = pairing(host, lay)
    devices: list[dict[str, object]] = []
    roots: dict[str, Optional[str]] = {}
    for n in host.nics:
        dev = host.pci.get(n.address or "")
        numa = dev.numa_node if dev is not None else None
        d = _device("rdma", n.name, n.address, numa, links, distance, socket)
        roots[n.name] = d["attributes"].get(PCIE_ROOT)  # type: ignore[attr-defined]
        devices.append(d)
    warnings: list[str] = []
    for g in host.gpus:
        d = _device("gpu", g.name, g.address, g.pci.numa_node, links, distance, socket)
        root = d["attributes"].get(PCIE_ROOT)  # type: ignore[attr-defined]
        p = pairs.get(g.address)
        if p is not None:
            aligned = sorted(n for n, r in roots.items() if r is not None and r == root)
            same = p.status != "resolved" or aligned == sorted(p.nics)
            d["pairing"] = {"rule": p.rule, "status": p.status, "nics": list(p.nics),
                            "dma_function": p.dma_function, "pcie_root_aligned": same}
            if not same:
                got = ", ".join(aligned) or "no NIC"
                warnings.append(
                    f"{g.name} ({g.address}, {PCIE_ROOT} {root}): aligning on pcieRoot "
                    f"gives {got}, the {p.rule} rule {', '.join(p.nics) or 'none'}"
                    + (f" (its CX-8's DMA function {p.dma_function} shares the GPU's "
                       "root; the PF does not)" if p.dma_function else "")
                    + ": select the NIC by pciBusID or name, not by pcieRoot")
        devices.insert(len([x for x in devices if x["kind"] == "gpu"]), d)
    return {"devices": devices, "warnings": warnings}


def read_dra(host: Topology, lay: Layout) -> dict[str, object]:
    """:func:`dra_report` with its inputs read from the host's sysfs."""
    addresses = [g.address for g in host.gpus] + [n.address for n in host.nics if n.address]
    return dra_report(host, lay, *read_dra_inputs(host, addresses))

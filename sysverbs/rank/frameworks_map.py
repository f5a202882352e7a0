"""The whole host's GPU->NICs map (``sysverbs env --map``, schema ``sysverbs.nic-map/1``)
and the GPU->first-NIC pairs vLLM takes (:class:`~sysverbs.rank.frameworks.HostPair`).

Mooncake's topology file (:func:`mooncake_topology`, ``env --for mooncake --map FILE``).
For frameworks whose NIC variables no source establishes (SGLang, Mooncake, NIXL...):
each GPU (PCI address, index, UUID, NUMA node) with its NICs in placement's order,
each NIC with its RDMA device, port, PCI address, link layer, netdevs and the GID
index NCCL's own scan picks on it (:func:`sysverbs.rank.gid.nccl_gid_index`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ..placement import Topology
from .frameworks import HostPair
from .gid import gid_text, nccl_gid_index, read_gid_table

__all__ = ["MAP_SCHEMA", "VLLM_KINDS", "host_pairs", "host_map", "mooncake_topology",
           "vllm_name"]

MAP_SCHEMA = "sysverbs.nic-map/1"
#: RDMA devices whose ``device`` link is their PCI function: the ones vLLM's
#: ``rdma_name_for_nic_pci`` can find by address (an SF's or irdma's link is an
#: auxiliary device, a soft device has none).
VLLM_KINDS = frozenset({"pf", "vf", "bond"})


def vllm_name(host: Topology, address: Optional[str]) -> Optional[str]:
    """The RDMA device vLLM finds at this PCI address: the first, sorted by name, of
    those whose ``device`` link is that function."""
    names = sorted(n.name for n in host.nics if n.address == address and n.kind in VLLM_KINDS)
    return names[0] if names and address is not None else None


def host_pairs(host: Topology, plan: Sequence[Any]) -> list[HostPair]:
    """Each assigned GPU and its first NIC (``plan``: :func:`sysverbs.placement.assign`'s
    answer)."""
    out: list[HostPair] = []
    for a in plan:
        if a.gpu is None:
            continue
        first = a.nics[0] if a.nics else None
        out.append(HostPair(a.gpu.name, a.gpu.address,
                            None if first is None else first.device,
                            None if first is None else first.port,
                            None if first is None else first.address,
                            None if first is None else vllm_name(host, first.address)))
    return out


def _gid(device: str, port: int, link_layer: Optional[str], sysfs_path: Optional[str],
         environ: Mapping[str, str]) -> dict[str, Any]:
    # read_gid_table() raises nothing on a tree's content: a file it cannot read is empty
    table = read_gid_table(device, port, sysfs_path=sysfs_path, link_layer=link_layer)
    choice = nccl_gid_index(table, environ)
    if not choice.suitable:
        return {"gid_index": None, "gid": None,
                "gid_rule": f"no suitable GID (NCCL's scan: {choice.rule})"}
    return {"gid_index": choice.index, "gid": gid_text(choice.gid), "gid_rule": choice.rule}


def host_map(host: Topology, plan: Sequence[Any], *, sysfs_path: Optional[str] = None,
             environ: Optional[Mapping[str, str]] = None, where: str = "this host"
             ) -> dict[str, Any]:
    """The JSON GPU->NICs map of the whole host (``plan``: ``assign(host)``)."""
    env = dict(environ or {})
    gpus: list[dict[str, Any]] = []
    for a in plan:
        if a.gpu is None:
            continue
        node, _ = host.numa_affinity(a.gpu)
        nics = [{"device": n.device, "port": n.port, "address": n.address,
                 "link_layer": n.link_layer, "netdevs": list(n.netdevs),
                 "rate_gbps": n.rate_gbps,
                 **_gid(n.device, n.port, n.link_layer, sysfs_path, env)}
                for n in a.nics]
        gpus.append({"index": a.gpu.index, "name": a.gpu.name, "address": a.gpu.address,
                     "uuid": a.gpu.uuid, "numa_node": node, "nics": nics,
                     "reason": a.reason})
    return {"schema": MAP_SCHEMA, "host": where, "gpus": gpus}


def mooncake_topology(host: Topology, plan: Sequence[Any]) -> dict[str, list[list[str]]]:
    """Mooncake's topology file (``MC_CUSTOM_TOPO_JSON``): ``cuda:N`` for each GPU (N its
    index in PCI bus order, CUDA's ordinal when every GPU is visible under
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``) with its assigned devices preferred, ``cpu:NODE``
    for each NUMA node with the devices on that node preferred; the other devices of
    the assignment, in order, are each entry's second list.  Only the devices placement
    assigned appear (Mooncake opens every device the file names)."""
    devices = list(dict.fromkeys(n.device for a in plan for n in a.nics))
    out: dict[str, list[list[str]]] = {}
    for node in sorted(host.numa_nodes):
        near = [d for d in devices if host.numa_affinity(d)[0] == node]
        out[f"cpu:{node}"] = [near, [d for d in devices if d not in near]]
    for a in plan:
        if a.gpu is None:
            continue
        mine = list(dict.fromkeys(n.device for n in a.nics))
        out[f"cuda:{a.gpu.index}"] = [mine, [d for d in devices if d not in mine]]
    return out

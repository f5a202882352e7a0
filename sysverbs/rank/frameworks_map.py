"""The whole host's GPU->NICs map (``sysverbs env --map``, schema ``sysverbs.nic-map/1``)
and the GPU->first-NIC pairs vLLM takes (:class:`~sysverbs.rank.frameworks.HostPair`).

For frameworks whose NIC variables no source establishes (SGLang, Mooncake, NIXL...):
each GPU (PCI address, index, UUID, NUMA node) with its NICs in placement's order,
each NIC with its RDMA device, port, PCI address, link layer, netdevs and the GID
index NCCL's own scan picks on it (:func:`sysverbs.rank.gid.nccl_gid_index`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ..placement import Host
from .frameworks import HostPair
from .gid import gid_text, nccl_gid_index, read_gid_table

__all__ = ["MAP_SCHEMA", "VLLM_KINDS", "host_pairs", "host_map", "vllm_name"]

MAP_SCHEMA = "sysverbs.nic-map/1"
#: RDMA devices whose ``device`` link is their PCI function: the ones vLLM's
#: ``rdma_name_for_nic_pci`` can find by address (an SF's or irdma's link is an
#: auxiliary device, a soft device has none).
VLLM_KINDS = frozenset({"pf", "vf", "bond"})


def vllm_name(host: Host, address: Optional[str]) -> Optional[str]:
    """The RDMA device vLLM finds at this PCI address: the first, sorted by name, of
    those whose ``device`` link is that function."""
    names = sorted(n.name for n in host.nics if n.address == address and n.kind in VLLM_KINDS)
    return names[0] if names and address is not None else None


def host_pairs(host: Host, plan: Sequence[Any]) -> list[HostPair]:
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
    try:
        table = read_gid_table(device, port, sysfs_path=sysfs_path, link_layer=link_layer)
        choice = nccl_gid_index(table, environ)
    except OSError as e:
        return {"gid_index": None, "gid": None, "gid_rule": f"unreadable: {e.strerror or e}"}
    if not choice.suitable:
        return {"gid_index": None, "gid": None,
                "gid_rule": f"no suitable GID (NCCL's scan: {choice.rule})"}
    return {"gid_index": choice.index, "gid": gid_text(choice.gid), "gid_rule": choice.rule}


def host_map(host: Host, plan: Sequence[Any], *, sysfs_path: Optional[str] = None,
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

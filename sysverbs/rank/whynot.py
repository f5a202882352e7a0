"""The host findings of :mod:`sysverbs.rank.gdr` and :mod:`sysverbs.rank.addrgid` on one
read host, and the inputs of :func:`sysverbs.rank.predict.predict`, gathered once for
``sysverbs doctor`` and the fleet's facts (docs/diagnose.md)."""

from __future__ import annotations

import os
from typing import NamedTuple

from .addrgid import CODE as ADDRESS_CODE
from .addrgid import AddressGidFinding, address_gid_findings, roce_ports
from .gdr import (
    GdrPair,
    GdrSupport,
    gdr_findings,
    gdr_pairs,
    gdr_support,
    gpu_facts,
    read_gdr_facts,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Optional

    from ..devices.diagnosis import Diagnosis
    from ..placement import Assignment, Topology
    from .predict import DeviceView

__all__ = ["CODES", "Findings", "device_views", "read_findings"]

#: Every code this module's findings have (severity "warning").
CODES = ("gdr_unavailable", "gdr_disabled_by_distance", ADDRESS_CODE)


class Findings(NamedTuple):
    gdr: GdrSupport
    pairs: tuple[GdrPair, ...]
    addr: tuple[AddressGidFinding, ...]

    def reasons(self) -> list[tuple[str, str]]:
        """(code, message) of every finding, GDR's first."""
        return [*gdr_findings(self.gdr, self.pairs),
                *((ADDRESS_CODE, f.message) for f in self.addr)]


def read_findings(host: Topology, environ: Mapping[str, str], *, live: bool,
                  addresses: Optional[Mapping[str, Sequence[str]]] = None,
                  assigned: Optional[Sequence[Assignment]] = None) -> Findings:
    """The findings of ``host`` with NCCL's environment ``environ``.  ``live``: the tree
    is this machine's own, so this namespace's addresses (``addresses``, default
    rtnetlink's) are compared with its GIDs; otherwise no address finding.
    ``assigned``: :func:`~sysverbs.placement.assign` of ``host``, when the caller has
    made it already (default: made here)."""
    from ..placement import assign

    if any(g.vendor == "nvidia" for g in host.gpus):
        facts = read_gdr_facts(host.sysfs_path, host.proc_path)
        support = gdr_support(facts._replace(gpus=gpu_facts(host.gpus)), environ)
        pairs = gdr_pairs(host, assign(host) if assigned is None else assigned, support,
                          environ)
    else:
        support, pairs = GdrSupport("n/a", "no NVIDIA GPU"), ()
    addr: tuple[AddressGidFinding, ...] = ()
    if live and not host.recorded:
        if addresses is None:
            from ..ground import inputs
            from .rtnetlink import interface_addresses

            # one rtnetlink dump, an input of the scope: asked again at the next scrape
            addresses = inputs.observe("rtnetlink addresses", None, interface_addresses)
        if addresses is not None:
            addr = tuple(address_gid_findings(roce_ports(host), addresses))
    return Findings(support, pairs, addr)


def device_views(host: Topology, found: Sequence[Diagnosis]) -> list[DeviceView]:
    """The prediction's view of each diagnosed device (``found``: diagnose()'s), its
    ports from ``host`` and sysfs."""
    from ..devices.attributes import read_text
    from .predict import DeviceView, PortView

    gids = {(p.device, p.port): len(p.gids) for p in roce_ports(host)}
    out = []
    for d in found:
        name = d.name
        if d.management:
            continue
        nic = host.nic(name)
        ports = tuple(PortView(name, p.port, p.state or "", p.link_layer or "",
                               gids.get((name, p.port), 0) if p.link_layer == "Ethernet"
                               else 1, p.netdevs)
                      for p in (nic.ports if nic is not None else ()))
        text = read_text(os.fsencode(os.path.join(host.sysfs_path, "class", "infiniband",
                                                  name, "node_type"))) or ""
        # (a device libibverbs drops for a warning, netns_exclusive: that warning)
        errors = [r.code for r in d.reasons if r.severity == "error"] or [
            r.code for r in d.reasons[:1] if not d.usable]
        out.append(DeviceView(name, d.provider or "", d.listed, d.usable,
                              text.split(":", 1)[-1].strip(), errors[0] if errors else "",
                              ports))
    return out

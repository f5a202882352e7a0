"""A host's facts as Prometheus metrics: the families, the text exposition, the HTTP
server and the file for node_exporter's textfile collector (``sysverbs metrics``).

:func:`families` turns a :class:`~sysverbs.fleet.facts.HostFacts` into the metric
families (plain records: no prometheus_client needed, ``sysverbs metrics --json`` prints
them); :class:`FactsCollector` is a prometheus_client custom collector that takes a fresh
snapshot and builds fresh ``GaugeMetricFamily``/``InfoMetricFamily`` objects at every
collection; :func:`render` is the text exposition (format 0.0.4), :func:`exposition` the
format a client asks for, :func:`serve` the HTTP server (:mod:`sysverbs.fleet.serve`) on
the address given (there is no default address), :func:`write_textfile` writes
``DIR/sysverbs.prom`` atomically (a temporary file in ``DIR``, then a rename; no
timestamps, which the textfile collector refuses); :class:`Pages` keeps a long-running
exporter's last page, so that a snapshot given again costs only its durations.  Every
metric is a gauge; nothing here counts or repeats node_exporter's ``node_infiniband_*``
port counters and states: the ``device`` and ``port`` labels are node_exporter's, for
joins.

prometheus_client (``pip install 'sysverbs[metrics]'``) is imported only by
:func:`render`, :func:`exposition`, :func:`serve`, :func:`write_textfile`, the pages and
the collector.

>>> from sysverbs.fleet.metrics import families
>>> from sysverbs.fleet.facts import HostFacts
>>> empty = HostFacts("0.1.0", "44", "/sys", False, (), (), False, float("inf"), (), (), (),
...                   (), "socket", ())
>>> [f.name for f in families(empty)][:3]
['sysverbs_build_info', 'sysverbs_rdma_device_info', 'sysverbs_rdma_device_listed']
>>> [s for f in families(empty) if f.name == "sysverbs_nccl_transport" for s in f.samples][:2]
[((('transport', 'ib'),), 0.0), ((('transport', 'socket'),), 1.0)]
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional

from ..ground.errors import UsageError
from ..rank.netplugin import TRANSPORTS
from .facts import COLLECTORS, DEVICE_REASONS, GID_TYPES, HOST_REASONS, HostFacts, nvml_bus_id
from .files import replace_file
from .serve import MAX_AGE, Server

if TYPE_CHECKING:
    from collections.abc import Iterator

    from prometheus_client.registry import CollectorRegistry

    from .facts import CollectorResult, PortFacts

__all__ = ["CONTENT_TYPE", "FAMILY_NAMES", "TEXTFILE_NAME", "Family", "FactsCollector",
           "Pages", "exposition", "families", "label_value", "missing_client", "registry",
           "render", "rules_path", "serve", "write_textfile"]

#: The file :func:`write_textfile` writes in the textfile collector's directory.
TEXTFILE_NAME = "sysverbs.prom"
#: The text exposition format :func:`render` writes.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_USABLE_HELP = (
    "1 if the device is listed and its char device opens with no error among its reasons "
    "(sysverbs doctor), 0 if not; judged with THIS EXPORTER's credentials: its uid, gids, "
    "device cgroup and RLIMIT_MEMLOCK, not those of the jobs that will use the device; no "
    "series for an XDR SMI device (no verbs device) nor while a file its state rests on "
    "cannot be read (problem reason unknown)")

#: name -> (kind, help, label names): the families, in the order they are written.
_FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "sysverbs_build_info": (
        "info", "sysverbs' version and the rdma-core release whose rules it applies",
        ("version", "rdma_core")),
    "sysverbs_rdma_device_info": (
        "info", "One per RDMA device of /sys/class/infiniband: its node type and GUID, the "
        "driver, PCI address, PCIe root (pciDDDD:BB) and NUMA node (as sysfs says) of its "
        "PCI function, the libibverbs provider that matches it",
        ("device", "node_type", "node_guid", "kernel_driver", "provider", "pci_address",
         "pcie_root", "numa_node")),
    "sysverbs_rdma_device_listed": (
        "gauge", "1 if ibv_get_device_list() would return the device, 0 if libibverbs "
        "drops it", ("device",)),
    "sysverbs_rdma_device_usable": ("gauge", _USABLE_HELP, ("device",)),
    "sysverbs_rdma_device_problem": (
        "gauge", "1 while sysverbs doctor finds this reason for the device; present only "
        "while found (no series: no such problem; --detail writes every device-level "
        "reason code, 0 or 1; codes: docs/diagnose.md); judged with this exporter's "
        "credentials", ("device", "reason")),
    "sysverbs_rdma_host_problem": (
        "gauge", "1 while sysverbs doctor finds this host-level reason; present only while "
        "found (no series: no such problem; --detail writes every host-level reason code, "
        "0 or 1; memlock: this exporter's RLIMIT_MEMLOCK)", ("reason",)),
    "sysverbs_rdma_port_info": (
        "info", "One per RDMA device port: its link layer and first network interface "
        "(empty when none), for joins with node_infiniband_* on device and port",
        ("device", "port", "link_layer", "netdev")),
    "sysverbs_rdma_port_gids": (
        "gauge", "Valid GIDs of the port by type: ib on an InfiniBand port, roce_v1 and "
        "roce_v2 on an Ethernet one (0 included), any other type only while it has some "
        "(--detail: all three on every port)",
        ("device", "port", "gid_type")),
    "sysverbs_rdma_cm_available": (
        "gauge", "1 if librdmacm's rdma_cm char device exists with a usable ABI and opens "
        "for this exporter, else 0", ()),
    "sysverbs_memlock_limit_bytes": (
        "gauge", "This exporter's soft RLIMIT_MEMLOCK in bytes (+Inf when unlimited); a job "
        "has its own; no series for a recording (--fixture)", ()),
    "sysverbs_gpu_nic_link": (
        "gauge", "1 per GPU and RDMA device: their PCIe class as nvidia-smi topo -m and "
        "sysverbs topo name it (PIX, PXB, PHB, NODE, SYS; N/A undecidable); gpu is the "
        "nvidia-smi index, pci_bus_id as NVML and DCGM write it; fixed for a host (GPUs x "
        "devices series), so written only with --detail",
        ("gpu", "pci_bus_id", "device", "link")),
    "sysverbs_gpu_nic_assigned": (
        "gauge", "1 for each NIC port sysverbs' placement (sysverbs topo --assign) gives "
        "the GPU, with their PCIe class (link, as in sysverbs_gpu_nic_link)",
        ("gpu", "pci_bus_id", "device", "port", "link")),
    "sysverbs_nccl_net_device_info": (
        "info", "One per device port NCCL's IB transport would use, with this exporter's "
        "environment and NCCL's config files (sysverbs nccl check)", ("device", "port")),
    "sysverbs_nccl_transport": (
        "gauge", "1 for the network NCCL would use between nodes, 0 for the others: ib "
        "(its IB transport), socket, ofi (aws-ofi-nccl's Libfabric network: AWS EFA), "
        "plugin (another net plugin NCCL_NET_PLUGIN names); all 0 when NCCL would fail to "
        "initialise (NCCL_NET names no network it has) or the nccl collector failed",
        ("transport",)),
    "sysverbs_nccl_gid_problem": (
        "gauge", "1 for each RoCE port NCCL's IB transport would use whose GID NCCL would "
        "not route as asked, with the verdict sysverbs nccl check and sysverbs env give it "
        "(a warning there): gid-link-local (a link-local or empty GID), gid-unsuitable "
        "(another family or RoCE version), gid-lookup-fails; no series while none is",
        ("device", "port", "reason")),
    "sysverbs_pcie_link_degraded": (
        "gauge", "1 for each PCIe link of a GPU, RDMA NIC, NVMe or bridge on their paths "
        "that runs below the speed or width both its ends support (reseat the card; "
        "sysverbs doctor has the evidence); no series while none is", (
            "device", "role", "port", "what", "current", "capable")),
    "sysverbs_gdr_unavailable": (
        "gauge", "1 while NCCL would not use GPUDirect RDMA on any NIC of this host: no "
        "peer-memory module (nvidia_peermem) and no DMA-BUF path (sysverbs doctor has "
        "why); no series while it would, or cannot be told (no GPU driver)", ()),
    "sysverbs_gdr_disabled_by_distance": (
        "gauge", "1 for each GPU and NIC port placement gives it whose NCCL path type is "
        "beyond NCCL_NET_GDR_LEVEL (this exporter's environment): NCCL stages through host "
        "memory; no series while none is", ("gpu", "pci_bus_id", "device", "port", "path",
                                            "level")),
    "sysverbs_no_rdma_gid_for_address": (
        "gauge", "1 for each RoCE port whose netdev in the exporter's network namespace "
        "has addresses none of its GIDs carries (device and port empty: no RoCE netdev is "
        "in the namespace and no GID carries its addresses); rdma_cm cannot resolve them",
        ("device", "port")),
    "sysverbs_acs_redirect": (
        "gauge", "1 for each RDMA NIC and GPU or NVMe below one PCIe switch whose peer "
        "traffic ACS redirects to the root complex (evidence: acs_ctl, the ports' ACS "
        "bits read as root, or iommu_group; sysverbs doctor has it); no series while none "
        "is", ("device", "name", "peer", "peer_role", "switch", "evidence")),
    "sysverbs_iommu_translated": (
        "gauge", "1 for each RDMA NIC whose DMA the IOMMU translates (its iommu_group's "
        "type DMA or DMA-FQ: boot with iommu=pt); no series while none is",
        ("device", "name")),
    "sysverbs_collector_success": (
        "gauge", "1 if the collector (discovery, topology, nccl) ran, 0 if it failed (the "
        "other collectors still report)", ("collector",)),
    "sysverbs_collector_duration_seconds": (
        "gauge", "How long the collector took in the snapshot this page shows (sysverbs "
        "metrics --listen answers the scrapes less than --max-age seconds, 5 by default, "
        "after a snapshot with that snapshot; on a scrape that found none of the last "
        "snapshot's inputs changed and gave it again, discovery is the time asking them "
        "and the others 0)", ("collector",)),
}
#: Every family name, in the order they are written.
FAMILY_NAMES = tuple(_FAMILIES)
#: The last family written: the page of a host that did not change is the last one's with
#: only this family written again (:class:`Pages`).
_DURATIONS = "sysverbs_collector_duration_seconds"


class Family(NamedTuple):
    """One metric family: ``kind`` ``"gauge"`` or ``"info"`` (a gauge of 1 whose name ends
    in ``_info``, OpenMetrics' info type), the label names, and the samples: the label
    values as ``(name, value)`` pairs in that order, and the value."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...]
    samples: tuple[tuple[tuple[tuple[str, str], ...], float], ...]


def _flag(value: bool) -> float:
    return 1.0 if value else 0.0


#: The GID types a port of each link layer can have: their counts are written, 0 included
#: (another type's only while it has GIDs: its 0 is constant by construction).
_LAYER_GIDS = {"InfiniBand": ("ib",), "Ethernet": ("roce_v1", "roce_v2")}


def _gid_types(port: PortFacts, detail: bool) -> tuple[str, ...]:
    own = _LAYER_GIDS.get(port.link_layer, ())
    return tuple(t for t in GID_TYPES if detail or t in own or port.gid_count(t))


def _samples(facts: HostFacts, detail: bool
             ) -> dict[str, list[tuple[tuple[str, ...], float]]]:
    out: dict[str, list[tuple[tuple[str, ...], float]]] = {n: [] for n in _FAMILIES}
    out["sysverbs_build_info"].append(((facts.version, facts.rdma_core), 1.0))
    for d in facts.devices:
        out["sysverbs_rdma_device_info"].append(((
            d.name, d.node_type, d.node_guid, d.kernel_driver, d.provider, d.pci_address,
            d.pcie_root, d.numa_node), 1.0))
        if d.listed is not None:
            out["sysverbs_rdma_device_listed"].append(((d.name,), _flag(d.listed)))
            if d.usable is not None:  # none for SMI devices and unknown states
                out["sysverbs_rdma_device_usable"].append(((d.name,), _flag(d.usable)))
            for code in DEVICE_REASONS:
                if detail or code in d.reasons:
                    out["sysverbs_rdma_device_problem"].append(((d.name, code),
                                                                _flag(code in d.reasons)))
        for p in d.ports:
            port = str(p.port)
            out["sysverbs_rdma_port_info"].append(((d.name, port, p.link_layer, p.netdev),
                                                   1.0))
            for gid_type in _gid_types(p, detail):
                out["sysverbs_rdma_port_gids"].append(((d.name, port, gid_type),
                                                       float(p.gid_count(gid_type))))
    if facts.host_reasons is not None:
        for code in HOST_REASONS:
            if detail or code in facts.host_reasons:
                out["sysverbs_rdma_host_problem"].append(((code,),
                                                          _flag(code in facts.host_reasons)))
        out["sysverbs_rdma_cm_available"].append(((), _flag(facts.rdma_cm_available)))
    if not math.isnan(facts.memlock_limit_bytes):  # a recording's is not this process's
        out["sysverbs_memlock_limit_bytes"].append(((), facts.memlock_limit_bytes))
    for link in facts.gpu_links if detail else ():
        out["sysverbs_gpu_nic_link"].append(((str(link.gpu), link.pci_bus_id, link.device,
                                              link.link), 1.0))
    for a in facts.assigned:
        out["sysverbs_gpu_nic_assigned"].append(((str(a.gpu), a.pci_bus_id, a.device,
                                                  str(a.port), a.link), 1.0))
    for device, number in facts.nccl_devices:
        out["sysverbs_nccl_net_device_info"].append(((device, str(number)), 1.0))
    for transport in TRANSPORTS:
        out["sysverbs_nccl_transport"].append(((transport,),
                                               _flag(facts.nccl_transport == transport)))
    for device, number, code in facts.nccl_gid_problems:
        out["sysverbs_nccl_gid_problem"].append(((device, str(number), code), 1.0))
    for pl in facts.pcie_links:
        out["sysverbs_pcie_link_degraded"].append(((pl.device, pl.role, pl.port, pl.what,
                                                    *pl.rates()), 1.0))
    found = facts.findings
    if found is not None:
        offs = [gp.code for gp in found.pairs] if found.gdr.code is None else []
        if found.gdr.code is not None or "gdr_unavailable" in offs:
            out["sysverbs_gdr_unavailable"].append(((), 1.0))
        for gp, off in zip(found.pairs, offs):
            if off == "gdr_disabled_by_distance":
                out["sysverbs_gdr_disabled_by_distance"].append(((
                    str(gp.gpu), nvml_bus_id(gp.pci_bus_id), gp.device, str(gp.port),
                    gp.path or "", gp.level), 1.0))
        for af in found.addr:
            out["sysverbs_no_rdma_gid_for_address"].append(((
                af.device or "", "" if af.port is None else str(af.port)), 1.0))
    for r in facts.acs_redirects:
        out["sysverbs_acs_redirect"].append(((r.device, r.name, r.peer, r.peer_role, r.switch,
                                              r.evidence), 1.0))
    for t in facts.translated_nics:
        out["sysverbs_iommu_translated"].append(((t.device, t.name), 1.0))
    for c in _collectors(facts):
        out["sysverbs_collector_success"].append(((c.name,), _flag(c.success)))
        out[_DURATIONS].append(((c.name,), c.duration_seconds))
    return out


def _collectors(facts: HostFacts) -> list[CollectorResult]:
    """The collectors of ``facts`` that ran, in :data:`COLLECTORS` order."""
    by_name = {c.name: c for c in facts.collectors}
    return [by_name[name] for name in COLLECTORS if name in by_name]


def label_value(text: str) -> str:
    """A label value as UTF-8 can hold it: bytes of a sysfs name or file that are no UTF-8
    (decoded with ``surrogateescape``) become ``\\xNN`` text, so that two such names stay
    two series and the page stays valid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def families(facts: HostFacts, detail: bool = False) -> list[Family]:
    """The metric families of ``facts``, in :data:`FAMILY_NAMES` order (a family with no
    sample is still there: its HELP and TYPE are written).  Label values are
    :func:`label_value`'s.  By default a problem is a series only while it is found, a
    port's GID counts are those of the types its link layer can have, and
    ``sysverbs_gpu_nic_link`` (fixed for a host) is left out; ``detail`` writes them all:
    every reason 0 or 1, every GID type, every GPU/device pair."""
    found = _samples(facts, detail)
    return [_family(name, found[name]) for name in _FAMILIES]


def _family(name: str, found: list[tuple[tuple[str, ...], float]]) -> Family:
    kind, text, labels = _FAMILIES[name]
    return Family(name, kind, text, labels,
                  tuple((tuple(zip(labels, map(label_value, values))), value)
                        for values, value in found))


def _durations(facts: HostFacts) -> Family:
    """The last family of :func:`families`, the collectors' durations."""
    return _family(_DURATIONS, [((c.name,), c.duration_seconds) for c in _collectors(facts)])


def missing_client() -> Optional[str]:
    """None when prometheus_client can be imported, else what to install."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return "needs prometheus_client: pip install 'sysverbs[metrics]'"
    return None


class FactsCollector:
    """A prometheus_client custom collector: each :meth:`collect` calls ``collect_facts``
    (a fresh snapshot; one at a time, so concurrent scrapes do not read the host twice
    at once) and yields fresh metric families built from it.  ``on_facts`` sees each
    snapshot (the command prints the failures)."""

    def __init__(self, collect_facts: Callable[[], HostFacts],
                 on_facts: Optional[Callable[[HostFacts], None]] = None,
                 detail: bool = False) -> None:
        self._collect = collect_facts
        self._on_facts = on_facts
        self._detail = detail
        self._lock = threading.Lock()

    def describe(self) -> list[object]:
        """Nothing: registering the collector takes no snapshot."""
        return []

    def collect(self) -> Iterator[object]:
        with self._lock:
            facts = self._collect()
        if self._on_facts is not None:
            self._on_facts(facts)
        return _client_families(families(facts, self._detail))


def _client_families(fams: list[Family]) -> Iterator[object]:
    """prometheus_client's families of ``fams``."""
    from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

    for fam in fams:
        if fam.kind == "info":  # written name_info{labels...} 1
            info = InfoMetricFamily(fam.name[: -len("_info")], fam.help, labels=())
            for pairs, _ in fam.samples:
                info.add_metric((), dict(pairs))
            yield info
        else:
            gauge = GaugeMetricFamily(fam.name, fam.help, labels=fam.labels)
            for pairs, value in fam.samples:
                gauge.add_metric([v for _, v in pairs], value)
            yield gauge


class _Fixed:
    """A prometheus_client collector of given families."""

    def __init__(self, fams: list[Family]) -> None:
        self._fams = fams

    def collect(self) -> Iterator[object]:
        return _client_families(self._fams)


def _encode(encoder: Callable[[CollectorRegistry], bytes], fams: list[Family]) -> bytes:
    """The page ``encoder`` (prometheus_client's text or OpenMetrics) writes of ``fams``."""
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(fams))  # type: ignore[arg-type]
    return encoder(reg)


class Pages:
    """The pages of one exporter's snapshots, in the formats asked (``detail``:
    :func:`families`'), each the bytes ``encoder(registry(lambda: facts))`` gives.  A
    snapshot equal to the last one but for its collectors' durations (what
    :class:`~sysverbs.fleet.steady.Steady` gives while the host does not change) gets
    the last page of the format again up to the durations family, the last one written,
    and that family written afresh; any other snapshot is written whole.  Not for
    concurrent use (the server and the textfile loop each have one thread)."""

    def __init__(self, detail: bool = False) -> None:
        self._detail = detail
        self._last: Optional[HostFacts] = None  # the last snapshot, its durations 0
        self._heads: dict[str, bytes] = {}  # content type -> the page before the durations

    @property
    def detail(self) -> bool:
        """Whether the pages carry :func:`families`' per-series detail."""
        return self._detail

    def page(self, facts: HostFacts, content_type: str,
             encoder: Callable[[CollectorRegistry], bytes]) -> bytes:
        """``facts`` written by ``encoder``, the writer of ``content_type`` (the format's
        name: prometheus_client makes a new OpenMetrics encoder for each request)."""
        same = replace(facts, collectors=tuple(replace(c, duration_seconds=0.0)
                                               for c in facts.collectors))
        if same != self._last:
            self._last, self._heads = same, {}
        head = self._heads.get(content_type)
        if head is not None:
            return head + _encode(encoder, [_durations(facts)])
        whole = _encode(encoder, families(facts, self._detail))
        tail = _encode(encoder, [_durations(facts)])
        if whole.endswith(tail):  # each family written alone, then the format's end
            self._heads[content_type] = whole[: len(whole) - len(tail)]
        return whole


def registry(collect_facts: Callable[[], HostFacts],
             on_facts: Optional[Callable[[HostFacts], None]] = None,
             detail: bool = False) -> CollectorRegistry:
    """A registry of its own (no process or platform collectors) holding a
    :class:`FactsCollector` (``detail``: :func:`families`')."""
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(FactsCollector(collect_facts, on_facts, detail))  # type: ignore[arg-type]
    return reg


def _detail(detail: Optional[bool], pages: Optional[Pages]) -> bool:
    """The ``detail`` of a page: the one given, else that of ``pages``, else False; a
    ``detail`` given other than that of the ``pages`` given is a
    :class:`~sysverbs.ground.errors.UsageError`."""
    if pages is None:
        return bool(detail)
    if detail is not None and detail != pages.detail:
        raise UsageError(f"detail={detail!r} with pages made with detail={pages.detail!r}: "
                         "a page has the detail of the Pages that write it")
    return pages.detail


def render(facts: HostFacts, detail: Optional[bool] = None, pages: Optional[Pages] = None
           ) -> bytes:
    """The text exposition (format 0.0.4, :data:`CONTENT_TYPE`) of ``facts``
    (``detail``: :func:`families`', False unless given; ``pages``: written by them, with
    their ``detail``)."""
    from prometheus_client import generate_latest

    detail = _detail(detail, pages)
    if pages is not None:
        return pages.page(facts, CONTENT_TYPE, generate_latest)
    return generate_latest(registry(lambda: facts, detail=detail))


def write_textfile(directory: str, facts: HostFacts, name: str = TEXTFILE_NAME,
                   detail: Optional[bool] = None, pages: Optional[Pages] = None) -> str:
    """Write ``render(facts, detail, pages)`` to ``directory/name`` (default
    ``sysverbs.prom``) for node_exporter's textfile collector, atomically and readable by
    its user (:func:`sysverbs.fleet.files.replace_file`).  Returns the path."""
    if not name.endswith(".prom"):
        raise ValueError(f"the textfile collector reads *.prom files only, not {name!r}")
    return replace_file(directory, name, render(facts, detail, pages))


def exposition(accept: str, detail: Optional[bool] = None, pages: Optional[Pages] = None
               ) -> tuple[str, Callable[[HostFacts], bytes]]:
    """The format a client's ``Accept`` header asks for, as prometheus_client chooses it
    (OpenMetrics for Prometheus, else text 0.0.4): its content type and the page of a
    snapshot in it (``detail`` and ``pages`` as for :func:`render`)."""
    from prometheus_client.exposition import choose_encoder

    encoder, content_type = choose_encoder(accept)
    detail = _detail(detail, pages)
    if pages is not None:
        return content_type, partial(pages.page, content_type=content_type, encoder=encoder)
    return content_type, lambda facts: encoder(registry(lambda: facts, detail=detail))


def serve(addr: str, port: int, collect_facts: Callable[[], HostFacts],
          on_facts: Optional[Callable[[HostFacts], None]] = None, *,
          max_age: float = MAX_AGE, on_error: Optional[Callable[[str], None]] = None,
          detail: bool = False) -> Server[HostFacts]:
    """Serve ``/metrics`` on ``addr:port`` (exactly there: pass ``0.0.0.0`` yourself to
    listen on every interface) from a daemon thread, with the bounded server of
    :mod:`sysverbs.fleet.serve`: concurrent scrapes share one snapshot, and a scrape
    less than ``max_age`` seconds after the last snapshot was taken gets its page again
    (0: a fresh snapshot for each).  ``on_facts`` sees each snapshot once, ``on_error``
    why a page could not be made.  Returns the started :class:`~sysverbs.fleet.serve.Server`
    (``close()`` stops it); a port in use raises :class:`OSError`."""
    from prometheus_client import generate_latest  # noqa: F401 (missing: fail now)

    def collect() -> HostFacts:
        facts = collect_facts()
        if on_facts is not None:
            on_facts(facts)
        return facts

    pages = Pages(detail)  # an unchanged host's page: only its durations written again

    def page(accept: str) -> tuple[str, Callable[[HostFacts], bytes]]:
        return exposition(accept, pages=pages)

    return Server(addr, port, collect, page, max_age=max_age,
                  on_error=on_error).start()


def rules_path() -> str:
    """The alert rules shipped with the package (``sysverbs metrics --rules``)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules.yml")

"""One snapshot of a host for the fleet: what its metrics and node labels are made of.

:func:`collect_facts` reads the host once, in three parts, each timed and guarded:

* ``discovery``: :func:`sysverbs.diagnose` (listed, usable and the reason codes of every
  device the kernel shows, the host's own findings), then each device's attributes and
  topology (node type and GUID, ports, link layers, netdevs, GIDs, its PCI function,
  driver, NUMA node and PCIe root), ``rdma_cm`` and this process's RLIMIT_MEMLOCK;
* ``topology``: :func:`sysverbs.placement.read_host`, the GPU/NIC classes of ``sysverbs
  topo``'s matrix and :func:`sysverbs.placement.assign`'s NIC port for each GPU;
* ``nccl``: :func:`sysverbs.rank.nccl.predict_ib`, the device ports NCCL's IB transport would
  use with this process's environment and NCCL's config files, and so which network NCCL
  would use between nodes: a net plugin's (aws-ofi-nccl on EFA), IB, or sockets.

A part that raises records ``success`` False and its error in :attr:`HostFacts.collectors`
and the others still fill in; a device whose files cannot be read keeps its name, the
diagnosis and an ``error``, and never hides the other devices; a device whose verdict
files are ``unknown`` (unreadable or unparseable: :mod:`sysverbs.devices.readable`) keeps
its series, has ``usable`` None and its findings as ``error``, and the discovery part
records ``success`` False (what it covers is not known to be healthy).  Bad sysfs content never
raises: the listing options are checked first (a wrong option is the caller's
:class:`~sysverbs.ground.errors.UsageError`), everything after is guarded.  The records are plain
frozen dataclasses: :mod:`sysverbs.fleet.metrics` turns them into Prometheus metrics,
other writers (node labels) read them as they are.

>>> import tempfile
>>> from sysverbs import testing
>>> from sysverbs.fleet.facts import collect_facts
>>> with tempfile.TemporaryDirectory() as tmp:
...     host = testing.materialize("gpu-dgx-b200", tmp)
...     facts = collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
...                           source="sysfs", recorded=True)
>>> [(c.name, c.success) for c in facts.collectors]
[('discovery', True), ('topology', True), ('nccl', True)]
>>> len(facts.devices), sum(d.usable for d in facts.devices), len(facts.gpu_links)
(18, 18, 144)
>>> facts.device("mlx5_0").pcie_root, facts.device("mlx5_0").ports[0].link_layer
('pci0000:00', 'InfiniBand')
>>> facts.assigned[0]
GpuAssigned(gpu=0, pci_bus_id='00000000:1B:00.0', device='mlx5_4', port=1, link='PXB')
>>> facts.nccl_transport, facts.worst_assigned_link()
('ib', 'PXB')
"""

from __future__ import annotations

import errno
import math
import os
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

from ..devices.diagnosis import CODES
from ..ground import inputs
from ..ground.hostroot import HostRoot
from ..ground.sysfs_read import listdir
from ..model import HostModel

if TYPE_CHECKING:
    from collections.abc import Mapping

    from typing_extensions import Unpack

    from ..devices.diagnosis import DiagnosisList
    from ..engine.api import ListOptions, Options
    from ..placement import AcsRedirect, DegradedLink, Topology, TranslatedNic
    from ..rank.ib import IbSelection
    from ..rank.whynot import Findings

    T = TypeVar("T")

__all__ = ["COLLECTORS", "DEVICE_REASONS", "GID_TYPES", "HOST_REASONS", "LINKS",
           "CollectorResult", "DeviceFacts", "GpuAssigned", "GpuFacts", "GpuLink",
           "HostFacts", "PortFacts", "collect_facts", "nvml_bus_id"]

#: The parts of a snapshot, in the order they run.
COLLECTORS = ("discovery", "topology", "nccl")

#: The reason codes :func:`sysverbs.diagnose` gives the machine as a whole
#: (``DiagnosisList.host``); the others are about one device.  Three are both: a
#: missing uverbs module, a too long sysfs path and a bad kernel ABI are said for the
#: host and for every device, since each device is unusable for that reason.
_HOST_ONLY = ("no_kernel_support", "no_providers_installed", "memlock", "memlock_low",
              "no_ipc_lock", "no_rdma_cm",
              "rdma_cm_abi", "recorded_host")
_BOTH = ("sysfs_path_too_long", "no_uverbs_module", "kernel_abi")
#: The reason codes a device can have (``Diagnosis.reasons``), in :data:`CODES` order.
#: Notes (``management_device``) are no problem: not among them.
DEVICE_REASONS: tuple[str, ...] = tuple(c for c in CODES
                                        if c not in _HOST_ONLY and CODES[c][0] != "note")
#: The reason codes the host can have (``DiagnosisList.host``), in :data:`CODES` order.
HOST_REASONS: tuple[str, ...] = tuple(c for c in CODES if c in _HOST_ONLY or c in _BOTH)

#: GID types counted per port (``ibv_gid_type``'s, as the kernel's ``gid_attrs/types``
#: reads on that port's link layer).
GID_TYPES = ("ib", "roce_v1", "roce_v2")

#: nvidia-smi's PCIe classes, nearest first; ``N/A`` when sysfs cannot decide.
LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS")


@dataclass(frozen=True)
class PortFacts:
    """One port: ``link_layer`` as sysfs writes it (``InfiniBand``, ``Ethernet``; ``""``
    when unreadable), ``state`` (``ACTIVE``...; ``""``), ``netdev`` the first network
    interface ``sysverbs netdev`` finds for it (``""`` when none), ``gids`` the number
    of valid GIDs of each type of :data:`GID_TYPES`."""

    port: int
    link_layer: str
    state: str
    netdev: str
    gids: tuple[tuple[str, int], ...]

    def gid_count(self, gid_type: str) -> int:
        return dict(self.gids).get(gid_type, 0)


@dataclass(frozen=True)
class DeviceFacts:
    """One device of ``class/infiniband`` (or a uverbs entry naming one).

    ``listed``/``usable``/``reasons``: :func:`sysverbs.diagnose`'s (None and ``()``
    when the diagnosis failed; ``usable`` None for an SMI device, ``management_device``,
    which is no verbs device, and for a device whose state is ``unknown``);
    ``node_type`` (``CA``, ``RNIC``...), ``node_guid`` (16 hex digits, as ``ibv_devices``),
    ``provider``, ``kernel_driver`` (the driver of its PCI function), ``pci_address``,
    ``pcie_root`` (the ``pciDDDD:BB`` host bridge its PCI function hangs under, as
    Kubernetes DRA's ``pcieRoot``), ``numa_node`` (the PCI function's ``numa_node`` text,
    ``-1`` included): ``""`` when unknown.  ``error``: why its files could not be read
    (``""``; the ``unknown`` findings with their paths and errno)."""

    name: str
    listed: Optional[bool]
    usable: Optional[bool]
    reasons: tuple[str, ...]
    provider: str
    node_type: str
    node_guid: str
    kernel_driver: str
    pci_address: str
    pcie_root: str
    numa_node: str
    ports: tuple[PortFacts, ...]
    error: str = ""


@dataclass(frozen=True)
class GpuFacts:
    """A GPU: ``index`` in PCI bus order (nvidia-smi's and ``CUDA_DEVICE_ORDER=PCI_BUS_ID``),
    ``address`` its sysfs BDF (``0000:1b:00.0``), ``pci_bus_id`` as NVML and DCGM write it
    (``00000000:1B:00.0``, :func:`nvml_bus_id`)."""

    index: int
    address: str
    pci_bus_id: str
    vendor: str


@dataclass(frozen=True)
class GpuLink:
    """The class of the GPU/NIC cell of ``sysverbs topo``'s matrix (:data:`LINKS`, or
    ``N/A``)."""

    gpu: int
    pci_bus_id: str
    device: str
    link: str


@dataclass(frozen=True)
class GpuAssigned:
    """A NIC port :func:`sysverbs.placement.assign` gives a GPU, and its class."""

    gpu: int
    pci_bus_id: str
    device: str
    port: int
    link: str


@dataclass(frozen=True)
class CollectorResult:
    """How one part went: ``success``, its wall time, and the error when it raised."""

    name: str
    success: bool
    duration_seconds: float
    error: str = ""


@dataclass(frozen=True)
class HostFacts:
    """What :func:`collect_facts` found.  ``memlock_limit_bytes``: this process's soft
    RLIMIT_MEMLOCK (``math.inf`` when unlimited, ``nan`` for a recording: not the recorded
    host's); ``nccl_transport``: one of :data:`sysverbs.rank.netplugin.TRANSPORTS`
    (``ib``, ``socket``, ``ofi``: aws-ofi-nccl, ``plugin``: another net plugin), ``""``
    when NCCL would fail to initialise or the nccl part failed; ``recorded``: the tree is
    a recording of another host (a bundled fixture)."""

    version: str
    rdma_core: str
    sysfs_path: str
    recorded: bool
    devices: tuple[DeviceFacts, ...]
    host_reasons: Optional[tuple[str, ...]]
    rdma_cm_available: bool
    memlock_limit_bytes: float
    gpus: tuple[GpuFacts, ...]
    gpu_links: tuple[GpuLink, ...]
    assigned: tuple[GpuAssigned, ...]
    nccl_devices: tuple[tuple[str, int], ...]
    nccl_transport: str
    collectors: tuple[CollectorResult, ...]
    #: the PCIe links below what both ends support (``pcie_link_degraded``)
    pcie_links: tuple[DegradedLink, ...] = ()
    #: GPUDirect RDMA and the RoCE address GIDs (:mod:`sysverbs.rank.whynot`); None when
    #: the topology part failed
    findings: Optional[Findings] = None
    #: (device, port, code): the GID verdict (:func:`~sysverbs.rank.gid.gid_verdict`) of
    #: each RoCE port NCCL would use, as ``nccl check`` and ``env`` judge it
    nccl_gid_problems: tuple[tuple[str, int, str], ...] = ()
    #: the NICs' peer traffic ACS redirects (``acs_redirect``)
    acs_redirects: tuple[AcsRedirect, ...] = ()
    #: the NICs whose DMA the IOMMU translates (``iommu_translated``)
    translated_nics: tuple[TranslatedNic, ...] = ()
    #: the layout (placement's ``read_layout``: dma-based, numa-based, inline, pcie) and
    #: the GPUs for which aligning on DRA's pcieRoot picks other NICs than its pairing
    layout: str = ""
    pcie_root_misaligned: tuple[int, ...] = ()

    def device(self, name: str) -> Optional[DeviceFacts]:
        for d in self.devices:
            if d.name == name:
                return d
        return None

    def collector(self, name: str) -> Optional[CollectorResult]:
        for c in self.collectors:
            if c.name == name:
                return c
        return None

    def worst_assigned_link(self) -> Optional[str]:
        """The farthest class among the GPUs' assigned NIC ports (``PIX``: every GPU has
        a NIC on its PCIe switch); None without assignments.  Each GPU counts with its
        nearest assigned port; a GPU that got no NIC is not counted."""
        order = {c: i for i, c in enumerate(LINKS)}
        best: dict[int, int] = {}
        for a in self.assigned:
            rank = order.get(a.link, len(LINKS))
            best[a.gpu] = min(best.get(a.gpu, rank), rank)
        if not best:
            return None
        worst = max(best.values())
        return LINKS[worst] if worst < len(LINKS) else "N/A"


def nvml_bus_id(address: str) -> str:
    """``0000:1b:00.0`` -> ``00000000:1B:00.0``: NVML's ``pciBusId`` (``%08X:%02X:%02X.%X``),
    the ``pci_bus_id`` label of DCGM's exporter.  Text that is no BDF is returned as is."""
    parts = address.split(":")
    if len(parts) != 3 or "." not in parts[2]:
        return address
    domain, bus, rest = parts
    dev, _, fn = rest.partition(".")
    try:
        return f"{int(domain, 16):08X}:{int(bus, 16):02X}:{int(dev, 16):02X}.{int(fn, 16):X}"
    except ValueError:
        return address


def _error_text(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _timed(name: str, results: list[CollectorResult], fn: Callable[[], T]) -> Optional[T]:
    start = time.perf_counter()
    try:
        value = fn()
    except Exception as e:  # a part that fails is reported, never raised
        results.append(CollectorResult(name, False, time.perf_counter() - start,
                                       _error_text(e)))
        return None
    results.append(CollectorResult(name, True, time.perf_counter() - start))
    return value


def _on_root(root: str, fn: Callable[[], T], out: object = None) -> Callable[[], T]:
    """``fn``, a part that reads the sysfs tree ``root`` (into ``out``), failing when
    ``root`` is not, or no longer, a sysfs tree, before or after it reads (removed or
    unmounted under a running exporter: never a healthy host without RDMA; ``out`` is
    then emptied).  The rule of the commands' start-up check
    (:func:`~sysverbs.ground.sysfs_read.check_sysfs_root`)."""
    from ..ground.sysfs_read import check_sysfs_root

    def part() -> T:
        check_sysfs_root(root)
        try:
            value = fn()
        finally:
            try:
                check_sysfs_root(root)
            except OSError:
                if out is not None:  # what it read is not the host's
                    vars(out).update(vars(type(out)()))
                raise
        return value

    return part


# ------------------------------------------------------------------------ discovery


def _gid_counts(port: object) -> tuple[tuple[str, int], ...]:
    from ..devices.attributes import GidType, PortStatus

    assert isinstance(port, PortStatus)
    counts = dict.fromkeys(GID_TYPES, 0)
    names = {GidType.IB: "ib", GidType.ROCE_V1: "roce_v1", GidType.ROCE_V2: "roce_v2"}
    for gid in port.gids:
        if gid.type is not None:
            counts[names[gid.type]] += 1
    return tuple(counts.items())


def _pcie_root(devices: str, pci_path: str) -> str:
    """The first component below ``devices`` (the real path of ``<sysfs>/devices``) of
    the PCI function's directory (a real path: DRA's ``pcieRoot``, ``pci0000:15``), ``""``
    when it is no ``pci*`` host bridge."""
    if not pci_path.startswith(devices + os.sep):
        return ""
    first = pci_path[len(devices) + 1:].split(os.sep, 1)[0]
    return first if first.startswith("pci") else ""


def _device(name: str, opts: Options, devices: str, diag: Optional[object]) -> DeviceFacts:
    """One device's facts; its attributes and topology read under a guard."""
    from ..devices.diagnosis import Diagnosis

    listed: Optional[bool] = None
    usable: Optional[bool] = None
    reasons: tuple[str, ...] = ()
    provider = unknown = ""
    if isinstance(diag, Diagnosis):
        listed, provider = diag.listed, diag.provider or ""
        # an SMI device is no verbs device, an unknown one is not known to be unusable
        usable = None if diag.management or diag.unknown else diag.usable
        reasons = tuple(dict.fromkeys(r.code for r in diag.reasons))
        unknown = " ".join(r.message for r in diag.reasons if r.code == "unknown")
    try:
        found = _read_device(name, opts, devices, listed, usable, reasons, provider)
        return replace(found, error=unknown) if unknown else found
    except Exception as e:  # one bad directory never blanks the others
        return DeviceFacts(name, listed, usable, reasons, provider, "", "", "", "", "", "",
                           (), _error_text(e))


def _read_device(name: str, opts: Options, devices: str, listed: Optional[bool],
                 usable: Optional[bool], reasons: tuple[str, ...], provider: str
                 ) -> DeviceFacts:
    from ..devices.attributes import device_status
    from ..devices.location import device_location

    ibdev = os.path.join(opts.sysfs_path, "class", "infiniband", name)
    if not inputs.isdir(ibdev):  # a uverbs entry naming a device the kernel lacks
        return DeviceFacts(name, listed, usable, reasons, provider, "", "", "", "", "", "",
                           ())
    attrs = device_status(ibdev)
    topo = device_location(ibdev, dev_dir=opts.dev_dir)
    ports = []
    for p in attrs.ports:
        netdevs = [n.name for n in topo.netdevs if n.port == p.port]
        ports.append(PortFacts(p.port, p.raw["link_layer"] or "",
                               p.state.name if p.state is not None else "",
                               netdevs[0] if netdevs else "", _gid_counts(p)))
    pci = topo.pci
    return DeviceFacts(
        name=name, listed=listed, usable=usable, reasons=reasons, provider=provider,
        node_type=attrs.node_type.name if attrs.node_type is not None else "",
        node_guid=f"{attrs.node_guid:016x}" if attrs.node_guid is not None else "",
        kernel_driver=(pci.driver or "") if pci is not None else "",
        pci_address=pci.address if pci is not None else "",
        pcie_root=_pcie_root(devices, pci.path) if pci is not None else "",
        numa_node=(pci.raw["numa_node"] or "").strip() if pci is not None else "",
        ports=tuple(ports))


def _kernel_names(sysfs: str) -> list[str]:
    try:
        return sorted(os.fsdecode(n) for n in listdir(os.path.join(sysfs, "class", "infiniband"))
                      if not n.startswith(b"."))
    except (OSError, ValueError):
        return []


def _rdma_cm(opts: Options, host_reasons: tuple[str, ...], recorded: bool) -> bool:
    """librdmacm's char device: ``class/misc/rdma_cm`` with an ABI librdmacm takes and its
    ``/dev`` node, opened read-write on a live host (a recording's stand-in counts)."""
    if "rdma_cm_abi" in host_reasons or "no_rdma_cm" in host_reasons:
        return False
    if not inputs.isdir(os.path.join(opts.sysfs_path, "class", "misc", "rdma_cm")):
        return False
    node = os.path.join(opts.dev_dir, "rdma_cm")
    if recorded:
        return inputs.exists(node)
    return inputs.probe_open(node, os.O_RDWR) == 0


def memlock_limit() -> float:
    """This process's soft RLIMIT_MEMLOCK in bytes, ``math.inf`` when unlimited, ``nan``
    when it cannot be read."""
    import resource

    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (OSError, ValueError):
        return math.nan
    return math.inf if soft == resource.RLIM_INFINITY else float(soft)


class _Discovery:
    """The discovery part's results (filled even when the diagnosis fails)."""

    def __init__(self) -> None:
        self.devices: tuple[DeviceFacts, ...] = ()
        self.host_reasons: Optional[tuple[str, ...]] = None
        self.rdma_cm = False


def _discover(out: _Discovery, opts: Options, options: Mapping[str, object],
              recorded: bool, probe_open: bool) -> None:
    from ..devices.diagnosis import diagnose
    from ..devices.location import LocationScan

    diagnosis: Optional[DiagnosisList] = None
    failure: Optional[Exception] = None
    try:
        diagnosis = diagnose(probe_open=probe_open, recorded=recorded,
                             **options)  # type: ignore[arg-type]
    except Exception as e:  # still read each device, then report the failure
        failure = e
    by_name = {d.name: d for d in diagnosis} if diagnosis is not None else {}
    names = list(by_name) + [n for n in _kernel_names(opts.sysfs_path) if n not in by_name]
    devices = os.fsdecode(inputs.realpath(os.path.join(opts.sysfs_path, "devices")))
    with LocationScan():  # the char-device directories read once, not once per device
        out.devices = tuple(_device(n, opts, devices, by_name.get(n)) for n in names)
    if diagnosis is not None:
        out.host_reasons = tuple(dict.fromkeys(r.code for r in diagnosis.host))
        out.rdma_cm = _rdma_cm(opts, out.host_reasons, recorded)
    if failure is not None:
        raise failure
    unknown = [d for d in out.devices if "unknown" in d.reasons]
    if unknown:  # every device is reported; the part says it could not read them all
        raise OSError(errno.EIO, f"unknown: {len(unknown)} device(s) have files that cannot "
                      f"be read or parsed ({', '.join(d.name for d in unknown)}): "
                      f"{unknown[0].error}")


# ------------------------------------------------------------------------- topology


class _Topology:
    def __init__(self) -> None:
        self.gpus: tuple[GpuFacts, ...] = ()
        self.links: tuple[GpuLink, ...] = ()
        self.assigned: tuple[GpuAssigned, ...] = ()
        self.pcie_links: tuple[DegradedLink, ...] = ()
        self.findings: Optional[Findings] = None
        self.acs_redirects: tuple[AcsRedirect, ...] = ()
        self.translated_nics: tuple[TranslatedNic, ...] = ()
        self.layout = ""
        self.misaligned: tuple[int, ...] = ()


def _topology(out: _Topology, model: HostModel, gpu_links: bool,
              environ: Optional[Mapping[str, str]] = None) -> None:
    from ..placement import (
        acs_redirects,
        assign,
        degraded_links,
        read_dra,
        read_layout,
        translated_nics,
    )
    from ..rank.whynot import read_findings

    host: Topology = model.placement
    out.pcie_links = degraded_links(host)
    lay = read_layout(host) if host.gpus else None  # the Grace pairing follows it
    assigned = assign(host, layout=lay) if host.gpus else ()
    out.findings = read_findings(host, environ or {}, live=model.root.live,
                                 assigned=assigned)
    out.acs_redirects, out.translated_nics = acs_redirects(host), translated_nics(host)
    out.gpus = tuple(GpuFacts(g.index, g.address, nvml_bus_id(g.address), g.vendor)
                     for g in host.gpus)
    bus = {g.index: nvml_bus_id(g.address) for g in host.gpus}
    if gpu_links:
        placed = [n for n in host.nics if n.address is not None]
        out.links = tuple(GpuLink(g.index, bus[g.index], n.name,
                                  host.smi_class(g, n) or "N/A")
                          for g in host.gpus for n in placed)
    if lay is not None:  # DRA's pcieRoot may not follow the layout
        out.layout = lay.kind
        dra: Any = read_dra(host, lay)
        off = {d["name"] for d in dra["devices"] if d.get("pairing", {}).get(
            "pcie_root_aligned") is False}
        out.misaligned = tuple(g.index for g in host.gpus if g.name in off)
        out.assigned = tuple(
            GpuAssigned(a.gpu.index, bus[a.gpu.index], n.device, n.port, n.smi or "N/A")
            for a in assigned if a.gpu is not None for n in a.nics)


# ----------------------------------------------------------------------------- NCCL


def _nccl(opts: Options, options: Mapping[str, object], environ: Mapping[str, str],
          conf_root: Optional[str], found: tuple[DeviceFacts, ...]
          ) -> tuple[tuple[tuple[str, int], ...], str, tuple[tuple[str, int, str], ...]]:
    from ..rank.netplugin import net_transport, uses_ib

    sel, gids = _nccl_gids(options, environ, conf_root)
    devices = tuple(dict.fromkeys((d.device, d.port) for d in sel.devices))
    ib = uses_ib(len(devices), sel.disabled, sel.failure)
    efa = any(d.usable and d.provider == "efa" for d in found)
    return devices, net_transport(environ, ib_ports=ib, efa_devices=efa), gids


def _nccl_gids(options: Mapping[str, object], environ: Mapping[str, str],
               conf_root: Optional[str]) -> tuple[IbSelection, tuple[tuple[str, int, str], ...]]:
    """NCCL's selection, and the GID verdict of each RoCE port it selects: (device,
    port, code) of :func:`~sysverbs.rank.gid.gid_verdict`, the one ``nccl check`` and
    ``env`` give (``gid-link-local``...)."""
    from ..rank.lint import gid_warnings
    from ..rank.nccl import host_ports, nccl_environment, predict_ib

    sel = predict_ib(environ, conf_root=conf_root, **options)  # type: ignore[arg-type]
    if not any(d.link == "RoCE" for d in sel.devices):
        return sel, ()
    full_env, _ = nccl_environment(environ, root=conf_root)
    ports = host_ports(gid_tables=True, **options)  # type: ignore[arg-type]
    out = []
    for w in gid_warnings(sel, ports, full_env):
        device, _, port = w.entry.rpartition(":")
        out.append((device, int(port), w.code))
    return sel, tuple(out)


# ---------------------------------------------------------------------------- public


def collect_facts(*, gpu_links: bool = True, proc_path: Optional[str] = None,
                  recorded: bool = False, probe_open: bool = True,
                  environ: Optional[Mapping[str, str]] = None,
                  conf_root: Optional[str] = None, model: Optional[HostModel] = None,
                  **options: Unpack[ListOptions]) -> HostFacts:
    """One snapshot of the host (see the module's docstring).

    ``options`` are the listing options of :func:`sysverbs.get_device_list` (checked
    first: a bad one raises :class:`~sysverbs.ground.errors.UsageError`).  ``gpu_links``: also
    the GPU x NIC classes (False: :attr:`HostFacts.gpu_links` is empty; the assignment
    is still made).  ``proc_path``: the ``/proc`` root for the GPUs' UUIDs (default: the
    ``proc`` beside the sysfs root: ``/proc`` for ``/sys``).  ``recorded``: the tree is
    a recording (a bundled fixture), judged as ``sysverbs doctor --fixture`` does.
    ``probe_open``: open each listed device's char device to see whether it works.
    ``environ`` (default ``os.environ``) and ``conf_root``: what NCCL reads
    (``NCCL_IB_HCA``, ``NCCL_IB_DISABLE``..., its config files).  ``model``: the
    invocation's :class:`~sysverbs.model.HostModel` of the same host; its parts are taken
    instead of reading them again, and the snapshot reads through it (each file once).
    """
    from ..engine.api import resolve

    opts = resolve(**options)
    env: Mapping[str, str] = os.environ if environ is None else environ
    if model is None:
        model = HostModel(HostRoot.resolve(opts.sysfs_path, opts.dev_dir, proc_path,
                                           recorded=recorded))
    with model.reading():
        return _collect(model, opts, options, env, conf_root, recorded, probe_open,
                        gpu_links)


def _collect(model: HostModel, opts: Options, options: Mapping[str, object],
             env: Mapping[str, str], conf_root: Optional[str], recorded: bool,
             probe_open: bool, gpu_links: bool) -> HostFacts:
    from ..ground import __version__

    results: list[CollectorResult] = []
    disc = _Discovery()
    root = opts.sysfs_path
    _timed("discovery", results,
           _on_root(root, lambda: _discover(disc, opts, options, recorded, probe_open), disc))
    topo = _Topology()
    _timed("topology", results,
           _on_root(root, lambda: _topology(topo, model, gpu_links, env), topo))
    nccl = _timed("nccl", results,
                  _on_root(root, lambda: _nccl(opts, options, env, conf_root, disc.devices)))
    return HostFacts(
        version=__version__, rdma_core=str(opts.rdma_core), sysfs_path=opts.sysfs_path,
        recorded=recorded, devices=disc.devices, host_reasons=disc.host_reasons,
        rdma_cm_available=disc.rdma_cm,
        memlock_limit_bytes=math.nan if recorded else memlock_limit(),
        gpus=topo.gpus, gpu_links=topo.links, assigned=topo.assigned,
        nccl_devices=nccl[0] if nccl is not None else (),
        nccl_transport=nccl[1] if nccl is not None else "",
        nccl_gid_problems=nccl[2] if nccl is not None else (),
        collectors=tuple(results), pcie_links=topo.pcie_links, findings=topo.findings,
        acs_redirects=topo.acs_redirects, translated_nics=topo.translated_nics,
        layout=topo.layout, pcie_root_misaligned=topo.misaligned)

"""What each RDMA library would do on this host, in this process, and the one reason
(``sysverbs doctor --predict``; docs/diagnose.md, "Predicted").

:func:`predict` is a pure function over what the other verdicts found: the device
diagnoses (``sysverbs.devices.diagnosis.diagnose``), the host findings, NCCL's network
(:func:`sysverbs.rank.netplugin.net_transport`), GPUDirect RDMA
(:mod:`sysverbs.rank.gdr`) and the address GIDs (:mod:`sysverbs.rank.addrgid`).
The rules of each library, and where they come from:

* libibverbs: the devices ``ibv_get_device_list()`` returns and which open (diagnose()).
* librdmacm: ``rdma_get_devices()`` fails with EPERM on an rdma_cm ABI outside 3..4 and
  ENODEV without an open device (docs/diagnose.md, "librdmacm"); connecting needs
  ``/dev/infiniband/rdma_cm`` and, on RoCE, a GID for the address (addrgid).
* NCCL: its network (netplugin), the IB ports it uses (``sysverbs nccl check``), GDR.
* UCX (openucx/ucx ``src/uct/ib``): a device whose transport type is not InfiniBand
  (iWARP) is skipped (``uct_ib_device_is_supported``, ib_md.c:821-829); a port is
  skipped unless ACTIVE with a GID (``uct_ib_device_port_check``, ib_device.c:788-860);
  ``rc_verbs``/``ud_verbs`` on any other verbs device, ``rc_mlx5``/``ud_mlx5``/``dc_mlx5``
  on mlx5 (``UCT_IB_DEVICE_FLAG_MLX5_PRM``; DC where the device has it, on RoCE too
  with ``UCX_IB_ETH_PAUSE_ON=y``, its default), ``srd`` on EFA (src/uct/ib/efa).
* libfabric's verbs provider (``fi_info -p verbs``): :func:`fabric_verbs`, the rules of
  :mod:`sysverbs.rank.fabric_rules` (read in libfabric v1.17.0, Debian 12's, and the
  newest): a MSG domain (and ``verbs;ofi_rxm``) on a device with an address rdma_cm binds
  to it or, without ``FI_VERBS_IFACE``, a GID; a ``-dgram`` domain (and
  ``verbs;ofi_rxd``) on every InfiniBand-transport device; none without an ACTIVE port.
"""

from __future__ import annotations

from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence
    from typing import Optional

    from .addrgid import AddressGidFinding
    from .gdr import GdrPair, GdrSupport

__all__ = ["LIBRARIES", "DeviceView", "NcclView", "PortView", "Prediction", "fabric_verbs",
           "predict", "ucx_transports"]

LIBRARIES = ("libibverbs", "librdmacm", "nccl", "ucx", "libfabric-verbs")
#: UCX's IB transports by provider (the others: the verbs ones).
UCX_TRANSPORTS = {
    "mlx5": ("rc_verbs", "ud_verbs", "rc_mlx5", "ud_mlx5", "dc_mlx5"),
    "efa": ("srd",),
}
UCX_VERBS = ("rc_verbs", "ud_verbs")
#: sysfs node types of the InfiniBand transport (RoCE too), and iWARP's (fabric_rules)
IB_NODE_TYPES = ("CA", "switch", "router")
IWARP_NODE_TYPE = "RNIC"
#: fi_info -p verbs's (provider, domain suffix, endpoint type) per MSG domain (ofi_rxm's
#: only with rdma_cm), DGRAM domain
FABRIC_RXM = ("verbs;ofi_rxm", "", "FI_EP_RDM")
FABRIC_MSG = (("verbs", "", "FI_EP_MSG"),)
FABRIC_DGRAM = (("verbs", "-dgram", "FI_EP_DGRAM"), ("verbs;ofi_rxd", "-dgram", "FI_EP_RDM"))


class PortView(NamedTuple):
    device: str
    port: int
    state: str
    link_layer: str
    gids: int  # non-zero GIDs (InfiniBand: its table's length)
    netdevs: tuple[str, ...] = ()


class DeviceView(NamedTuple):
    """A device as the prediction needs it: ``error`` its first error code ("" none)."""

    name: str
    provider: str
    listed: bool
    usable: bool
    node_type: str  # "CA", "RNIC"...
    error: str
    ports: tuple[PortView, ...]


class NcclView(NamedTuple):
    """``transport`` (netplugin's), ``devices`` (``mlx5_0:1``...), ``why`` no IB."""

    transport: str
    devices: tuple[str, ...]
    why: str


class Prediction(NamedTuple):
    library: str
    outcome: str
    reason: str
    details: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {"library": self.library, "outcome": self.outcome, "reason": self.reason,
                "details": list(self.details)}


def ucx_transports(d: DeviceView) -> list[str]:
    """``ucx_info -d``'s lines for a device: ``mlx5_0:1 rc_verbs ud_verbs ...``."""
    if not d.usable or d.node_type == "RNIC":
        return []
    tls = UCX_TRANSPORTS.get(d.provider, UCX_VERBS)
    return [f"{p.device}:{p.port} {' '.join(tls)}" for p in d.ports
            if p.state == "ACTIVE" and p.gids > 0]


def _verbs(devices: Sequence[DeviceView], host: Collection[str]) -> Prediction:
    listed = [d for d in devices if d.listed]
    usable = [d for d in listed if d.usable]
    if not listed:
        why = next((d.error for d in devices if d.error), "") or next(iter(host), "")
        return Prediction("libibverbs", "lists no device", why or "no RDMA device")
    bad = next((f"{d.name}: {d.error}" for d in listed if not d.usable), "")
    return Prediction("libibverbs", f"lists {len(listed)}, {len(usable)} open",
                      bad or "every listed device opens", tuple(d.name for d in usable))


def _rdmacm(devices: Sequence[DeviceView], host: Collection[str],
            addr: Sequence[AddressGidFinding]) -> Prediction:
    usable = [d.name for d in devices if d.usable]
    if "rdma_cm_abi" in host:
        return Prediction("librdmacm", "rdma_get_devices fails (EPERM)", "rdma_cm_abi")
    if not usable:
        return Prediction("librdmacm", "rdma_get_devices fails (ENODEV)",
                          "no listed device opens")
    if "no_rdma_cm" in host:
        return Prediction("librdmacm", "no connection (rdma_create_id fails)", "no_rdma_cm",
                          tuple(usable))
    if addr:
        return Prediction("librdmacm", "RoCE addresses do not resolve (rdma_resolve_addr "
                          "fails)", "no_rdma_gid_for_address",
                          tuple(a for f in addr for a in f.addresses))
    why = ("devices open; a recording: rdma_cm not checked" if "recorded_host" in host
           else "rdma_cm present, devices open")
    return Prediction("librdmacm", f"connects through {len(usable)} device(s)", why,
                      tuple(usable))


def _nccl(nccl: NcclView, gdr: GdrSupport, pairs: Sequence[GdrPair]) -> Prediction:
    if nccl.transport == "":
        return Prediction("nccl", "fails to initialise", nccl.why or "NCCL_NET names no "
                          "network it has")
    if nccl.transport != "ib":
        names = {"socket": "sockets (TCP)", "ofi": "aws-ofi-nccl (Libfabric)",
                 "plugin": "its net plugin"}
        return Prediction("nccl", names[nccl.transport], nccl.why or nccl.transport)
    off = [p.code for p in pairs if p.code is not None]
    if gdr.state == "n/a":
        how, why = "GDR n/a", gdr.reason
    elif gdr.state == "none":
        how, why = "no GDR", "gdr_unavailable"
    elif off:  # the GPU's own lack first: it is the reason whatever the NIC
        how, why = f"no GDR on {len(off)} of {len(pairs)} GPU-NIC pairs", \
            min(off, key=("gdr_unavailable", "gdr_disabled_by_distance").index)
    elif gdr.state == "unknown":
        how, why = "GDR unknown", gdr.reason
    else:
        how, why = f"GDR ({gdr.state})", gdr.reason
    return Prediction("nccl", f"IB transport on {len(nccl.devices)} port(s), {how}", why,
                      nccl.devices)


def _ucx(devices: Sequence[DeviceView]) -> Prediction:
    lines = [line for d in devices for line in ucx_transports(d)]
    if lines:
        return Prediction("ucx", f"{len(lines)} IB device port(s)", "ACTIVE ports with a "
                          "GID on open devices", tuple(lines))
    usable = [d for d in devices if d.usable]
    if not usable:
        why = "no listed device opens"
    elif all(d.node_type == "RNIC" for d in usable):
        why = "iWARP devices: UCX's IB transports need the InfiniBand transport type"
    else:
        why = "no ACTIVE port with a GID"
    return Prediction("ucx", "no IB transport (tcp, shared memory only)", why)


def _bound(d: DeviceView, iface: str, addresses: Mapping[str, Sequence[str]],
           unbound: Collection[str]) -> bool:
    """Whether an address of ``d``'s netdevs that ``FI_VERBS_IFACE`` (``iface``) lets
    through binds to ``d`` (on RoCE: has its GID, i.e. no addrgid finding names it)."""
    names = {*addresses, *(n for p in d.ports for n in p.netdevs)}
    exact = iface in names
    return any(a not in unbound for p in d.ports for n in p.netdevs
               if not iface or (n == iface if exact else n.startswith(iface))
               for a in addresses.get(n, ()))


def _has_msg(d: DeviceView, ib: bool, iface: str,
             addresses: Optional[Mapping[str, Sequence[str]]], rdma_cm: bool,
             unbound: Collection[tuple[Optional[str], str]]) -> bool:
    """A MSG domain: a GID (InfiniBand transport, FI_VERBS_IFACE unset) or a bound address
    (``unbound``: (device or None for the namespace, address) without a RoCE GID; iWARP
    binds by MAC and needs none)."""
    if not iface and ib and any(p.gids > 0 for p in d.ports):
        return True
    return addresses is not None and rdma_cm and _bound(
        d, iface, addresses, {a for n, a in unbound if ib and n in (d.name, None)})


def _no_msg(d: DeviceView, iface: str, addresses: Optional[Mapping[str, Sequence[str]]],
            rdma_cm: bool) -> str:
    """Why ``d`` has no MSG domain (it has neither a GID counted nor a bound address)."""
    if not rdma_cm:
        return f"{d.name}: no MSG domain: no_rdma_cm (rdma_cm binds the addresses)"
    if addresses is None:
        return f"{d.name}: no MSG domain: a recording, its addresses are not read"
    if iface:
        return f"{d.name}: no MSG domain: FI_VERBS_IFACE={iface} leaves it no address"
    return f"{d.name}: no MSG domain: no address rdma_cm binds to it, no GID"


def fabric_verbs(devices: Sequence[DeviceView], host: Collection[str],
                 environ: Mapping[str, str],
                 addresses: Optional[Mapping[str, Sequence[str]]] = None,
                 addr: Sequence[AddressGidFinding] = (), none_why: str = "") -> Prediction:
    """``fi_info -p verbs`` (libfabric 1.17.0's verbs provider; the rules of
    :mod:`sysverbs.rank.fabric_rules`), pure.  ``environ``: its ``FI_VERBS_IFACE`` and
    ``FI_VERBS_DEVICE_NAME``; ``addresses``: this namespace's interface addresses (None:
    not read); ``addr``: the RoCE addresses without a GID; ``none_why``: libibverbs's
    reason when no device opens.  Details: fi_info's ``provider domain type`` lines."""
    lib, nothing = "libfabric-verbs", "no verbs domain (fi_getinfo -61)"
    usable = [d for d in devices if d.listed and d.usable]
    if not any(d.provider != "efa" for d in usable):
        return Prediction(lib, nothing, "only EFA devices: the efa provider's" if usable
                          else none_why or "no listed device opens")
    if "rdma_cm_abi" in host:
        return Prediction(lib, nothing, "rdma_cm_abi")
    rdma_cm = "no_rdma_cm" not in host
    iface = environ.get("FI_VERBS_IFACE", "")
    prefix = environ.get("FI_VERBS_DEVICE_NAME", "").lower()
    unbound = {(f.device, a) for f in addr for a in f.addresses}
    msg: list[str] = []
    dgram: list[str] = []
    why: list[str] = []
    for d in usable:
        ib = d.node_type in IB_NODE_TYPES
        if not d.name.lower().startswith(prefix):
            why.append(f"{d.name}: FI_VERBS_DEVICE_NAME={prefix} leaves it out")
        elif not ib and d.node_type != IWARP_NODE_TYPE:
            why.append(f"{d.name}: transport neither InfiniBand nor iWARP")
        elif not any(p.state == "ACTIVE" for p in d.ports):
            why.append(f"{d.name}: no ACTIVE port")
        else:
            if _has_msg(d, ib, iface, addresses, rdma_cm, unbound):
                msg.append(d.name)
            else:
                why.append(_no_msg(d, iface, addresses, rdma_cm))
            if ib:
                dgram.append(d.name)
    tables = (((FABRIC_RXM, *FABRIC_MSG) if rdma_cm else FABRIC_MSG, msg),
              (FABRIC_DGRAM, dgram))
    lines = [f"{prov} {name}{suffix} {kind}" for name in (d.name for d in usable)
             for table, names in tables if name in names for prov, suffix, kind in table]
    if not lines:
        return Prediction(lib, nothing, why[0])
    if msg and not rdma_cm:  # what RDM users (MPI, NCCL's ofi plugin) miss first
        why.insert(0, "no_rdma_cm: no ofi_rxm (its rdma_create_id fails)")
    outcome = "; ".join(
        [f"{'verbs;ofi_rxm' if rdma_cm else 'MSG'} domains for {', '.join(msg)}" if msg
         else "no MSG domain"] + [f"dgram for {', '.join(dgram)}"] * bool(dgram))
    return Prediction(lib, outcome, why[0] if why else "each device: an ACTIVE port, a GID "
                      "or an address for MSG", tuple(lines))


def predict(devices: Sequence[DeviceView], host: Collection[str], *, nccl: NcclView,
            gdr: GdrSupport, pairs: Sequence[GdrPair] = (),
            addr: Sequence[AddressGidFinding] = (), environ: Optional[Mapping[str, str]] = None,
            addresses: Optional[Mapping[str, Sequence[str]]] = None) -> tuple[Prediction, ...]:
    """One :class:`Prediction` per library of :data:`LIBRARIES` (pure).  ``host``: the
    host findings' codes; ``environ`` (libfabric's ``FI_VERBS_*``) and ``addresses``:
    :func:`fabric_verbs`'s."""
    verbs = _verbs(devices, host)
    if nccl.transport == "socket" and not any(d.usable for d in devices) and nccl.why:
        nccl = nccl._replace(why=f"{nccl.why}: {verbs.reason}")  # the one reason behind
    return (verbs, _rdmacm(devices, host, addr), _nccl(nccl, gdr, pairs),
            _ucx(devices),
            fabric_verbs(devices, host, environ or {}, addresses, addr,
                         "" if verbs.details else verbs.reason))

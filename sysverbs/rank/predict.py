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
* libfabric's verbs provider: not modelled (no source of it was read): said so.
"""

from __future__ import annotations

from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from .addrgid import AddressGidFinding
    from .gdr import GdrPair, GdrSupport

__all__ = ["LIBRARIES", "DeviceView", "NcclView", "PortView", "Prediction", "predict",
           "ucx_transports"]

LIBRARIES = ("libibverbs", "librdmacm", "nccl", "ucx", "libfabric-verbs")
#: UCX's IB transports by provider (the others: the verbs ones).
UCX_TRANSPORTS = {
    "mlx5": ("rc_verbs", "ud_verbs", "rc_mlx5", "ud_mlx5", "dc_mlx5"),
    "efa": ("srd",),
}
UCX_VERBS = ("rc_verbs", "ud_verbs")


class PortView(NamedTuple):
    device: str
    port: int
    state: str
    link_layer: str
    gids: int  # non-zero GIDs (InfiniBand: its table's length)


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
    off = [p for p in pairs if p.enabled is False]
    if gdr.state == "n/a":
        how, why = "GDR n/a", gdr.reason
    elif gdr.state == "none":
        how, why = "no GDR", "gdr_unavailable"
    elif off:
        how, why = f"no GDR on {len(off)} of {len(pairs)} GPU-NIC pairs", \
            "gdr_disabled_by_distance"
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


def predict(devices: Sequence[DeviceView], host: Collection[str], *, nccl: NcclView,
            gdr: GdrSupport, pairs: Sequence[GdrPair] = (),
            addr: Sequence[AddressGidFinding] = ()) -> tuple[Prediction, ...]:
    """One :class:`Prediction` per library of :data:`LIBRARIES` (pure).  ``host``: the
    host findings' codes."""
    verbs = _verbs(devices, host)
    if nccl.transport == "socket" and not any(d.usable for d in devices) and nccl.why:
        nccl = nccl._replace(why=f"{nccl.why}: {verbs.reason}")  # the one reason behind
    return (verbs, _rdmacm(devices, host, addr), _nccl(nccl, gdr, pairs),
            _ucx(devices),
            Prediction("libfabric-verbs", "not predicted", "libfabric's verbs provider "
                       "rules are not modelled; it connects through rdma_cm, see librdmacm"))

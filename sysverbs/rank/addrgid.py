"""RoCE ports with no GID for any address of this network namespace
(``no_rdma_gid_for_address``; docs/diagnose.md).

On RoCE a connection is addressed by IP: librdmacm's ``rdma_resolve_addr`` (and so
UCX's rdmacm, libfabric's verbs provider, MPI over RDMA CM) turns the peer's address
into a route through one of this namespace's netdevs, then needs the GID that carries
the local address on that netdev (the kernel's ``rdma_find_gid_by_port``); without one it
fails.  The kernel adds a GID (``::ffff:a.b.c.d`` for IPv4, the address itself for IPv6)
for each address of a RoCE port's netdev and its upper devices (VLAN, bond, macvlan), so
a port whose netdev here has addresses but whose table has none of them, or a namespace
(a pod with a veth) whose addresses no RoCE port carries, cannot be reached by address.

The rule, pure over data (:func:`address_gid_findings`): only global addresses count
(not loopback, not IPv6 link-local: the default ``fe80::`` GID is the MAC's, not an
address's).  A RoCE port with at least one GID and a netdev in this namespace that has
such an address is a finding when no GID of it equals one of those addresses; when no
RoCE port has a netdev here, the namespace is one finding (port None) when it has
addresses and no RoCE GID equals any of them.  Nothing is said about a recording or a
tree that is not this host's (its addresses are not this namespace's).

>>> ports = [RocePort("mlx5_0", 1, ("eth2",), ("fe80::1", "::ffff:192.168.1.5"))]
>>> address_gid_findings(ports, {"eth2": ("192.168.1.5",), "lo": ("127.0.0.1",)})
[]
>>> [f.port for f in address_gid_findings(ports, {"eth2": ("192.168.1.6",)})]
[1]
>>> [f.port for f in address_gid_findings(ports, {"eth0": ("10.244.1.7",)})]
[None]
"""

from __future__ import annotations

import ipaddress
from typing import NamedTuple, Optional

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from ..placement import Topology

__all__ = ["CODE", "AddressGidFinding", "RocePort", "address_gid_findings", "roce_ports"]

CODE = "no_rdma_gid_for_address"
FIX = ("rdma_cm (and UCX's rdmacm, libfabric's verbs provider) cannot resolve these "
       "addresses to this device; NCCL still picks a GID by index. Give the RoCE netdev "
       "(or a VLAN/macvlan on it) the address the job uses, or run the job in the "
       "namespace that has it (hostNetwork, or a CNI that moves the RoCE netdev or VF in)")


class RocePort(NamedTuple):
    """An Ethernet-link-layer port: its netdevs and its non-zero GIDs (text)."""

    device: str
    port: int
    netdevs: tuple[str, ...]
    gids: tuple[str, ...]


class AddressGidFinding(NamedTuple):
    """``port`` None: the namespace as a whole; ``addresses`` those that have no GID."""

    device: Optional[str]
    port: Optional[int]
    addresses: tuple[str, ...]
    message: str

    def as_dict(self) -> dict[str, object]:
        return {"code": CODE, "device": self.device, "port": self.port,
                "addresses": list(self.addresses), "message": self.message}


def _global(text: str) -> Optional[ipaddress.IPv6Address]:
    """The address as a GID would carry it, or None when it does not count."""
    try:
        a = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if a.is_loopback or (a.version == 6 and a.is_link_local):
        return None
    if isinstance(a, ipaddress.IPv4Address):
        return ipaddress.IPv6Address("::ffff:" + str(a))
    return a


def _gids(texts: Iterable[str]) -> set[ipaddress.IPv6Address]:
    out = set()
    for t in texts:
        try:
            out.add(ipaddress.IPv6Address(t))
        except ValueError:
            continue
    return out


def address_gid_findings(ports: Sequence[RocePort],
                         addresses: Mapping[str, Sequence[str]]) -> list[AddressGidFinding]:
    """The findings (pure): ``ports`` the RoCE ports, ``addresses`` this namespace's
    interfaces and their addresses (:func:`~sysverbs.rank.rtnetlink.interface_addresses`)."""
    out: list[AddressGidFinding] = []
    here = [p for p in ports if p.gids and any(n in addresses for n in p.netdevs)]
    for p in here:
        texts = [a for n in p.netdevs for a in addresses.get(n, ())]
        wanted = [(a, g) for a in texts for g in (_global(a),) if g is not None]
        if not wanted or _gids(p.gids) & {g for _, g in wanted}:
            continue
        shown = tuple(a for a, _ in wanted)
        out.append(AddressGidFinding(
            p.device, p.port, shown,
            f"{p.device} port {p.port}: its netdev {', '.join(p.netdevs)} has "
            f"{', '.join(shown)}, and no GID of the port carries any of them: {FIX}"))
    if here or not any(p.gids for p in ports):
        return out
    texts = [a for name in sorted(addresses) for a in addresses[name]]
    wanted = [(a, g) for a in texts for g in (_global(a),) if g is not None]
    every = set().union(*(_gids(p.gids) for p in ports))
    if wanted and not every & {g for _, g in wanted}:
        shown = tuple(a for a, _ in wanted)
        out.append(AddressGidFinding(
            None, None, shown,
            f"no RoCE netdev is in this network namespace, and no GID of "
            f"{', '.join(sorted({f'{p.device}:{p.port}' for p in ports if p.gids}))} "
            f"carries its addresses ({', '.join(shown)}): {FIX}"))
    return out


def roce_ports(host: Topology) -> list[RocePort]:
    """The Ethernet ports of the host's RDMA devices and their GIDs, from sysfs."""
    from .gid import gid_text, read_gid_table

    out = []
    for nic in host.nics:
        for p in nic.ports:
            if p.link_layer != "Ethernet":
                continue
            try:
                table = read_gid_table(nic.name, p.port, sysfs_path=host.sysfs_path,
                                       link_layer=p.link_layer)
            except OSError:
                continue
            gids = tuple(gid_text(e.address) for e in table.entries if int(e.address))
            out.append(RocePort(nic.name, p.port, p.netdevs, gids))
    return out

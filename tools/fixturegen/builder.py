"""The fixtures' builder: per-driver ABI versions, sysfs value helpers (GUIDs, GIDs,
ports) and :class:`Fixture`, the record list one fixture file is written from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sysverbs.testing import HostBuilder
from sysverbs.testing.layout import (
    NODE_TYPES,
    Port,
    ib_device,
    loopback,
    mad_device,
    net_attrs,
    net_device,
    port_files,
    roce_gids,
)
from sysverbs.testing.layout import guid_text as guid_fmt
from sysverbs.testing.umockdev import Recording

from .counters import with_counters

# Per-driver uverbs ABI (drivers' ``.uverbs_abi_ver``, include/uapi/rdma/*-abi.h).
ABI = {
    "mlx5": 1,  # MLX5_IB_UVERBS_ABI_VERSION
    "mlx4": 4,  # MLX4_IB_UVERBS_ABI_VERSION
    "rxe": 2,  # RXE_UVERBS_ABI_VERSION (seen as 2 in the kernel-lab VM)
    "efa": 1,  # EFA_UVERBS_ABI_VERSION
    "irdma": 5,  # IRDMA_ABI_VER
    "bnxt_re": 1,  # BNXT_RE_ABI_VERSION
    "hns": 1,  # HNS_ROCE_ABI_VERSION
    "erdma": 1,  # ERDMA_ABI_VERSION
    "qedr": 8,  # QEDR_ABI_VERSION
    "cxgb4": 3,  # C4IW_UVERBS_ABI_VERSION
    "hfi1": 2,  # RVT_UVERBS_ABI_VERSION (rdmavt)
    "qib": 2,  # RVT_UVERBS_ABI_VERSION (rdmavt)
    "ocrdma": 2,  # OCRDMA_ABI_VERSION
    "mthca": 1,  # MTHCA_UVERBS_ABI_VERSION
    "vmw_pvrdma": 3,  # PVRDMA_UVERBS_ABI_VERSION
    "siw": 1,  # SIW_ABI_VERSION
    "mana": 1,  # MANA_IB_UVERBS_ABI_VERSION
    "ionic": 1,  # IONIC_ABI_VERSION
    "usnic": 4,  # USNIC_UVERBS_ABI_VERSION
}


def t(value: object) -> str:
    """A sysfs show() value: the text plus the newline the kernel adds."""
    return f"{value}\n"


# ------------------------------------------------------------------ value helpers


def mac_bytes(mac: str) -> list[int]:
    return [int(x, 16) for x in mac.split(":")]


def mlx_guid(mac: str) -> str:
    """Mellanox GUID of a port with this MAC: OUI, 03:00, NIC part (0c42:a103:00a5:1c30)."""
    b = mac_bytes(mac)
    return guid_fmt(int.from_bytes(bytes(b[:3] + [0x03, 0x00] + b[3:]), "big"))


def eui64(mac: str) -> str:
    """Modified EUI-64 of a MAC, as the kernel derives RoCE GIDs and rxe GUIDs."""
    b = mac_bytes(mac)
    return guid_fmt(int.from_bytes(bytes([b[0] ^ 2] + b[1:3] + [0xFF, 0xFE] + b[3:]), "big"))


def gid(prefix: str, guid: str) -> str:
    return f"{prefix}:{guid}"


LINK_LOCAL = "fe80:0000:0000:0000"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


# --------------------------------------------------------------------- builder


def ib_port(guid: str, lid: str, sm_lid: str, rate: str, *, state: str = "4: ACTIVE",
            phys: str = "5: LinkUp", prefix: str = LINK_LOCAL,
            cap_mask: str = "0xa659e848") -> Port:
    """An InfiniBand port: GID 0 is the subnet prefix plus the port GUID."""
    return Port("InfiniBand", state, phys, rate, lid, sm_lid, "0", "0", cap_mask,
                gids=(gid(prefix, guid),), gid_types=("IB/RoCE v1",), gid_ndevs=(),
                pkeys=("0xffff",))


def roce_port(mac: str, netdev: str, rate: str, *, state: str = "4: ACTIVE",
              phys: str = "5: LinkUp", ipv4: str | None = None,
              cap_mask: str = "0x04010000", v1: bool = True) -> Port:
    """A RoCE port: link-local GIDs from the MAC (v1 and v2), then the IPv4 ones."""
    table = roce_gids(gid(LINK_LOCAL, eui64(mac)), netdev, ipv4, v1=v1)
    return Port("Ethernet", state, phys, rate, "0x0", "0x0", "0", "0", cap_mask,
                gids=table["gids"], gid_types=table["gid_types"],
                gid_ndevs=table["gid_ndevs"], pkeys=("0xffff",))


def iwarp_port(mac: str, netdev: str, rate: str, *, state: str = "4: ACTIVE",
               phys: str = "5: LinkUp", cap_mask: str = "0x00000000") -> Port:
    """An iWARP port: GID 0 is the MAC padded with zeros."""
    b = mac_bytes(mac)
    g = f"{b[0]:02x}{b[1]:02x}:{b[2]:02x}{b[3]:02x}:{b[4]:02x}{b[5]:02x}:0000:0000:0000:0000:0000"
    return Port("Ethernet", state, phys, rate, "0x0", "0x0", "0", "0", cap_mask,
                gids=(g,), gid_types=(), gid_ndevs=(), pkeys=())


def encoded(attrs: Iterable[tuple[str, str]]) -> list[tuple[str, bytes | None]]:
    """Attribute values (:func:`t` texts) as the testing kit takes them (bytes)."""
    return [(n, v.encode()) for n, v in attrs]


@dataclass
class Fixture:
    """One fixture: a :class:`HostBuilder` and the records added to it, in the order
    they will be written.

    Every record is laid out by the testing kit (:mod:`sysverbs.testing.layout`, which
    HostBuilder uses too); what is here is the fixtures' data: multi-port ib devices
    with all their port files, umad/issm devices, net and loopback records with every
    file a captured host shows.
    """

    name: str
    umad: bool = False
    host: HostBuilder = field(default_factory=HostBuilder)

    def add(self, path: str, subsystem: str, props: Iterable[tuple[str, str]] = (),
            attrs: Iterable[tuple[str, str]] = (), links: Iterable[tuple[str, str]] = (),
            node: str | None = None, dev_links: Iterable[str] = ()) -> str:
        return self.host.add_device(path, subsystem, props, encoded(attrs), links, node, dev_links)

    # -- hardware -------------------------------------------------------------

    def pci(self, path: str, vendor: int, device: int, sub_vendor: int, sub_device: int,
            pci_class: int, driver: str | None, *, numa: int = 0, revision: int = 0,
            extra: Iterable[tuple[str, str]] = (), links: Iterable[tuple[str, str]] = ()
            ) -> str:
        """A PCI function, with the attributes and uevent keys the kernel gives it."""
        return self.host.add_pci_function(path, vendor, device, sub_vendor, sub_device,
                                          pci_class, driver, numa_node=numa,
                                          revision=revision, extra=encoded(extra), links=links)

    def aux(self, parent: str, name: str, driver: str) -> str:
        """An auxiliary-bus device (mlx5_core.rdma.0, ice.roce.1, bnxt_en.rdma.0...)."""
        return self.host.add_aux_device(parent, name, driver)

    def net(self, parent: str | None, ifname: str, ifindex: int, address: str, *,
            arp_type: int = 1, mtu: int = 1500, operstate: str = "up", dev_port: int = 0,
            broadcast: str | None = None) -> str:
        """A network interface (``net/<ifname>``) with all its files."""
        rec = net_device(parent, ifname, ifindex,
                         net_attrs(address, ifindex, full=True, arp_type=arp_type, mtu=mtu,
                                   operstate=operstate, dev_port=dev_port,
                                   broadcast=broadcast))
        self.host.add_record(rec)
        return rec.path

    # -- RDMA ----------------------------------------------------------------

    def ibdev(self, parent: str | None, name: str, node_type: int, node_guid: str,
              sys_image_guid: str, fw_ver: str, ports: Sequence[Port], *,
              node_desc: str | None = None, extra: Iterable[tuple[str, str]] = (),
              first_port: int = 1) -> str:
        """An ib_device (``infiniband/<name>``) with its ports."""
        attrs = sorted([
            ("fw_ver", t(fw_ver)),
            ("node_desc", t(name if node_desc is None else node_desc)),
            ("node_guid", t(node_guid)),
            ("node_type", t(NODE_TYPES[node_type])),
            ("sys_image_guid", t(sys_image_guid)),
            *extra,
        ])
        files = encoded(attrs)
        for i, port in enumerate(ports):
            files += port_files(first_port + i, port)
        rec = ib_device(parent, name, files)
        self.host.add_record(rec)
        return rec.path

    def uverbs(self, parent: str | None, index: int, ibdev: str, abi: int) -> str:
        """``infiniband_verbs/uverbsN`` with its /dev node and rdma-core's udev links."""
        last = parent.rsplit("/", 1)[1] if parent else ""
        pci = last if parent and "/pci" in parent and last.count(":") == 2 else None
        return self.host.add_uverbs(parent, index, ibdev, abi, pci=pci)

    def mad(self, parent: str | None, kind: str, index: int, ibdev: str, port: int) -> str:
        """``infiniband_mad/umadN`` or ``issmN`` (ib_umad) with its /dev node."""
        self.umad = True
        rec = mad_device(parent, kind, index, ibdev, port)
        self.host.add_record(rec)
        return rec.path

    def rdma(self, parent: str | None, name: str, uverbs: int | None, abi: int,
             node_type: int, node_guid: str, sys_image_guid: str, fw_ver: str,
             ports: Sequence[Port], *, umad: Sequence[tuple[int, int]] = (),
             issm: Sequence[tuple[int, int]] = (), node_desc: str | None = None,
             extra: Iterable[tuple[str, str]] = ()) -> str:
        """An ib device with its uverbs device and (index, port) umad/issm devices."""
        path = self.ibdev(parent, name, node_type, node_guid, sys_image_guid, fw_ver, ports,
                          node_desc=node_desc, extra=extra)
        if uverbs is not None:
            self.uverbs(parent, uverbs, name, abi)
        for index, port in umad:
            self.mad(parent, "umad", index, name, port)
        for index, port in issm:
            self.mad(parent, "issm", index, name, port)
        return path

    def recording(self) -> Recording:
        lo = loopback(verbs_abi=6, mad_abi=5 if self.umad else None, full=True)
        # counters/ and hw_counters/ of the drivers that have them (fixturegen/counters.py)
        return with_counters(Recording((lo, *self.host.build(loopback=False).records)))


HOSTNAMES = {
    "mlx5-cx6": "jazz03",
    "mlx5-sriov": "cloud-hv01",
    "dgx-demo": "dgx-b200",
    "dgx-a100": "dgx-a100",
    "bluefield3": "dgx-b200",
    "mlx5-cx7": "dgx-b200",
    "smi": "xdr-vm",
    "azure-vf": "hbv2vm2",
    "mlx5-sf": "bf3-arm",
    "gpu-dgx-a100": "dgx-a100",
    "gpu-dgx-b200": "dgx-b200",
    "gpu-hgx-h100": "hgx-h100",
    "gpu-mi300x": "mi300x",
    "gpu-pcie-2socket": "esc8000a",
    "gpu-cloud-vm": "h200-vm",
}


def hostname(fx: Fixture) -> str:
    return HOSTNAMES.get(fx.name, "localhost")


def ipoib_addr(qpn_seed: int, port_guid: str) -> str:
    """A 20-byte IPoIB hardware address: flags+QPN, fe80 prefix, port GUID."""
    g = port_guid.replace(":", "")
    qpn = 0x000010C9 + 0x80 * qpn_seed
    raw = f"{qpn:08x}fe80000000000000{g}"
    return ":".join(raw[i : i + 2] for i in range(0, 40, 2))

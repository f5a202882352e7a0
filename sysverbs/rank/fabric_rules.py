"""When libfabric's verbs provider lists a device's domains (``fi_info -p verbs``), as
read in its source: the rules :func:`sysverbs.rank.predict.fabric_verbs` applies
(``sysverbs doctor --predict``, docs/diagnose.md, "Predicted").

Data only.  Each rule: its key, what it says, and where: ``prov/verbs/src/<file>:<line>``
at libfabric v1.17.0 (:data:`V1_17_0`, Debian 12's libfabric1 1.17.0-3: its
``FI_LOG_LEVEL=info`` log names the same lines, e.g. ``vrb_init_info():1346 no RDMA
devices found``) and at :data:`NEWEST` (where the file is verbs_init.c there, the name
says so; ``src/`` is libfabric's core).  The kernel lab checks them against Debian's
``fi_info`` (libfabric-bin) in tests/kernel/test_access_lab.py.

Not modelled: ``FI_VERBS_GID_IDX`` past port 1's GID table (ibv_query_gid fails: no
domain), a device whose PD, CQ or QP cannot be made while listing (vrb_get_qp_cap:
on hardware that pins its queues, a tiny RLIMIT_MEMLOCK without CAP_IPC_LOCK), the
addresses of upper devices (macvlan, VLAN) that rdma_cm binds to the lower device, two
RDMA devices on one netdev (rdma_bind_addr gives an address to the first of them), and
the newest's comma-separated ``FI_VERBS_IFACE`` and ``FI_VERBS_DEVICE_NAME`` (1.17.0
takes each whole).
"""

from __future__ import annotations

__all__ = ["NEWEST", "RULES", "V1_17_0"]

#: github.com/ofiwg/libfabric tag v1.17.0
V1_17_0 = "4a7d3ad0a4dfbb25bfc37cf91a038edd33f6dbc2"
#: the newest read: main at v2.6.0rc1-427-gaf8ddbe92 (2026-08-21)
NEWEST = "af8ddbe92f033b7deb9c4e4f47197d1fd4bcf150"

#: (key, rule, v1.17.0 place, newest place)
RULES: tuple[tuple[str, str, str, str], ...] = (
    ("have_device",
     "the provider lists nothing (fi_getinfo -61, FI_ENODATA) unless some device of "
     "ibv_get_device_list() opens, answers ibv_query_device and is not Amazon's (vendor "
     "0x1d0f: EFA is the efa provider's)",
     "verbs_info.c:696-731, 1344-1348", "verbs_info.c:759-794, 1470-1474"),
    ("rdma_get_devices",
     "then rdma_get_devices() must return devices (an rdma_cm ABI outside 3..4 fails it: "
     "nothing listed); a device it cannot open is skipped",
     "verbs_info.c:1377-1391", "verbs_info.c:1505-1522"),
    ("device_name",
     "FI_VERBS_DEVICE_NAME: only devices whose name starts with it, case ignored (newest: "
     "a comma-separated list of such prefixes)",
     "fi_verbs.c:702-706, verbs_info.c:1403-1406", "verbs_init.c:728, verbs_info.c:1524-1540"),
    ("active_port",
     "a device without an ACTIVE port has no domain at all",
     "verbs_info.c:603-620", "verbs_info.c:664-681"),
    ("transport",
     "transport InfiniBand (node type CA, switch, router: IB and RoCE ports): MSG and "
     "DGRAM domains; iWARP (RNIC): MSG only; any other (usNIC, unspecified as EFA): none",
     "verbs_info.c:756-759, 810-860", "verbs_info.c:835-838, 890-940"),
    ("msg_address",
     "a MSG domain (named as the device) needs an 'IPoIB address': an UP, non-loopback "
     "interface's address that rdma_cm binds to the device (getifaddrs, rdma_create_id "
     "on /dev/infiniband/rdma_cm, rdma_bind_addr: on RoCE the address needs its GID)",
     "verbs_info.c:940-1003, 1122-1193, 1394-1402", "verbs_info.c:1022-1085, 1203-1293, "
     "1542-1551"),
    ("msg_gid",
     "or, with FI_VERBS_IFACE unset, a port GID with a non-zero subnet prefix and "
     "interface id (RoCE's fe80:: default GID, IB's port GID) and a non-zero P_Key "
     "(vrb_get_sib: AF_IB, no rdma_cm needed); iWARP GIDs have no interface id",
     "verbs_info.c:1045-1119, 1362-1363", "verbs_info.c:1127-1201, 1490-1491"),
    ("iface",
     "FI_VERBS_IFACE: only that interface's addresses (exact name if an interface has it, "
     "else the interfaces it prefixes; newest: a comma-separated list)",
     "fi_verbs.c:720-725, verbs_info.c:1144-1176", "verbs_init.c:747, verbs_info.c:1203-"
     "1245, 1279-1285"),
    ("dgram",
     "a DGRAM domain '<device>-dgram' on every InfiniBand-transport device, address or "
     "not", "verbs_info.c:156-160, 756-759", "verbs_info.c:835-838"),
    ("xrc",
     "an XRC domain '<device>-xrc' only where the device has IBV_DEVICE_XRC, and fi_getinfo "
     "shows it only to hints with rx_ctx_cnt FI_SHARED_CONTEXT (fi_info never asks)",
     "verbs_info.c:560-567, 1537-1547", "verbs_info.c:622-628, 1683-1693"),
    ("layered",
     "the utility providers layer on them: ofi_rxd (FI_EP_RDM) on each DGRAM domain; "
     "ofi_rxm (FI_EP_RDM) on each MSG domain only when its core fi_getinfo (FI_EP_MSG "
     "hints: the sockaddr path alone) gets an rdma_cm id, rdma_create_id needing "
     "/dev/infiniband/rdma_cm (without it libfabric logs 'vrb_get_rai_id():278 "
     "rdma_create_id'); fi_info -p verbs names them 'verbs;ofi_rxd' and 'verbs;ofi_rxm'",
     "src/fabric.c:1142-1153, fi_verbs.c:257-313, verbs_info.c:1770-1816",
     "src/fabric.c:1363-1374, verbs_init.c:271, verbs_info.c:1920-1968"),
)

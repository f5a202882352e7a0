"""Port counters as real hosts have them: ``ports/N/counters/`` (the InfiniBand PMA
counters ib_core makes for a driver with ``process_mad``) and ``hw_counters/`` (the
driver's ``rdma_hw_stats``), added to the fixtures' ib devices by their driver.

Which files exist (facts; the values are made up, see :func:`counter_files`):

* ``counters/``: ib_core, ``drivers/infiniband/core/sysfs.c`` (Linux 6.1,
  ``pma_attrs_ext``: the 12 error counters, the 64-bit data and packet counters,
  ``port_xmit_wait`` and the unicast/multicast ones) for a device whose driver has
  ``process_mad``: mlx5 (IB and RoCE ports alike; the lshca TRAFFIC recordings of
  ConnectX hosts in tests/data/PROVENANCE.md read ``ports/1/counters/port_rcv_data`` and
  ``port_xmit_data`` of a RoCE bond).  irdma, bnxt_re and efa have no ``process_mad``,
  hence no ``counters/`` (node_exporter issues #2769/#2846 for irdma, procfs #687 for
  bnxt_re say the same of real hosts).
* ``hw_counters/`` of mlx5: ``drivers/infiniband/hw/mlx5/counters.c`` (6.1):
  basic, out-of-sequence, retransmission and extended-error queue counters on every
  port, congestion, RoCE-acceleration and ``rx_icrc_encapsulated`` on Ethernet ports
  only (they depend on RoCE capabilities: not sure every ConnectX has all of them).
  The lshca recordings read ``hw_counters/packet_seq_err`` of a ConnectX-6 Dx.
* irdma: ``irdma_hw_stat_names`` of ``drivers/infiniband/hw/irdma/verbs.c`` (6.1, the
  gen2 set an E810 has), per port.
* bnxt_re: ``bnxt_re_stat_descs`` of ``drivers/infiniband/hw/bnxt_re/hw_counters.c``
  (the 5.x-6.1 core list up to ``res_oos_drop_count``; later kernels add more, and
  the exact end of the list on a given release is not certain), per port.
* efa: ``EFA_DEFINE_DEVICE_STATS`` (device ``hw_counters/``) and
  ``EFA_DEFINE_PORT_STATS`` (port) of ``drivers/infiniband/hw/efa/efa_verbs.c`` (6.1 with
  the RDMA write counters of 6.2; not sure of the release that added each).

Every ``hw_counters/`` has ``lifespan`` (ib_core, ms, default 10).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sysverbs.testing.umockdev import Recording
from sysverbs.testing.umockdev_model import Attribute, Record

PMA = (
    "VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
    "local_link_integrity_errors", "multicast_rcv_packets", "multicast_xmit_packets",
    "port_rcv_constraint_errors", "port_rcv_data", "port_rcv_errors", "port_rcv_packets",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards",
    "port_xmit_packets", "port_xmit_wait", "symbol_error", "unicast_rcv_packets",
    "unicast_xmit_packets",
)

MLX5_PORT = (
    "duplicate_request", "implied_nak_seq_err", "local_ack_timeout_err", "out_of_buffer",
    "out_of_sequence", "packet_seq_err", "req_cqe_error", "req_cqe_flush_error",
    "req_remote_access_errors", "req_remote_invalid_request", "resp_cqe_error",
    "resp_cqe_flush_error", "resp_local_length_error", "resp_remote_access_errors",
    "rnr_nak_retry_err", "rx_atomic_requests", "rx_dct_connect", "rx_read_requests",
    "rx_write_requests",
)
MLX5_ROCE = (
    "np_cnp_sent", "np_ecn_marked_roce_packets", "roce_adp_retrans", "roce_adp_retrans_to",
    "roce_slow_restart", "roce_slow_restart_cnps", "roce_slow_restart_trans",
    "rp_cnp_handled", "rp_cnp_ignored", "rx_icrc_encapsulated",
)

IRDMA_PORT = (
    "RxECNMrkd", "RxUDP", "TxUDP", "cnpHandled", "cnpIgnored", "cnpSent",
    "ip4InDiscards", "ip4InMcastOctets", "ip4InMcastPkts", "ip4InOctets", "ip4InPkts",
    "ip4InReasmRqd", "ip4InTruncatedPkts", "ip4OutMcastOctets", "ip4OutMcastPkts",
    "ip4OutNoRoutes", "ip4OutOctets", "ip4OutPkts", "ip4OutSegRqd", "ip6InDiscards",
    "ip6InMcastOctets", "ip6InMcastPkts", "ip6InOctets", "ip6InPkts", "ip6InReasmRqd",
    "ip6InTruncatedPkts", "ip6OutMcastOctets", "ip6OutMcastPkts", "ip6OutNoRoutes",
    "ip6OutOctets", "ip6OutPkts", "ip6OutSegRqd", "iwInRdmaReads", "iwInRdmaSends",
    "iwInRdmaWrites", "iwOutRdmaReads", "iwOutRdmaSends", "iwOutRdmaWrites", "iwRdmaBnd",
    "iwRdmaInv", "rxVlanErrors", "tcpInOptErrors", "tcpInProtoErrors", "tcpInSegs",
    "tcpOutSegs", "tcpRetransSegs",
)

BNXT_RE_PORT = (
    "active_ahs", "active_cqs", "active_mrs", "active_mws", "active_pds", "active_qps",
    "active_srqs", "bad_resp_err", "dup_req", "local_protection_err", "local_qp_op_err",
    "max_retry_exceeded", "mem_mgmt_op_err", "missing_resp", "recoverable_errors",
    "remote_access_err", "remote_invalid_req_err", "remote_op_err", "res_cmp_err",
    "res_cq_load_err", "res_exceed_max", "res_exceeds_wqe", "res_invalid_dup_rkey",
    "res_irrq_oflow", "res_length_mismatch", "res_mem_error", "res_oos_drop_count",
    "res_opcode_err", "res_rem_inv_err", "res_rx_domain_err", "res_rx_invalid_rkey",
    "res_rx_no_perm", "res_rx_pci_err", "res_rx_range_err", "res_srq_err",
    "res_srq_load_err", "res_tx_domain_err", "res_tx_invalid_rkey", "res_tx_no_perm",
    "res_tx_pci_err", "res_tx_range_err", "res_unaligned_atomic", "res_unsup_opcode",
    "res_wqe_format_err", "rnr_naks_rcvd", "rx_bytes", "rx_pkts", "rx_roce_discards",
    "rx_roce_errors", "seq_err_naks_rcvd", "to_retransmits", "tx_bytes", "tx_pkts",
    "tx_roce_discards", "tx_roce_errors", "unrecoverable_err",
)

EFA_DEVICE = (
    "alloc_pd_err", "alloc_ucontext_err", "cmds_err", "completed_cmds", "create_ah_err",
    "create_cq_err", "create_qp_err", "keep_alive_rcvd", "mmap_err", "no_completion_cmds",
    "reg_mr_err", "submitted_cmds",
)
EFA_PORT = (
    "rdma_read_bytes", "rdma_read_resp_bytes", "rdma_read_wr_err", "rdma_read_wrs",
    "rdma_write_bytes", "rdma_write_recv_bytes", "rdma_write_wr_err", "rdma_write_wrs",
    "recv_bytes", "recv_wrs", "rx_bytes", "rx_drops", "rx_pkts", "send_bytes", "send_wrs",
    "tx_bytes", "tx_pkts",
)

#: The PCI (or auxiliary) driver of an ib device's parent -> (has counters/, port
#: hw_counters on every port, more port hw_counters on Ethernet ports, device hw_counters).
LAYOUTS: dict[str, tuple[bool, Sequence[str], Sequence[str], Sequence[str]]] = {
    "mlx5_core": (True, MLX5_PORT, MLX5_ROCE, ()),
    "mlx5_core.sf": (True, MLX5_PORT, MLX5_ROCE, ()),
    "ice": (False, IRDMA_PORT, (), ()),
    "bnxt_en": (False, BNXT_RE_PORT, (), ()),
    "efa": (False, EFA_PORT, (), EFA_DEVICE),
}

#: Made-up values: errors 0, except these (one of each kind, so a test can tell them).
ERRORS = {"symbol_error": 3, "link_error_recovery": 1, "out_of_sequence": 7,
          "packet_seq_err": 2, "rx_drops": 5, "ip4InDiscards": 4, "to_retransmits": 6}


def counter_value(name: str, ordinal: int, port: int) -> int:
    """A made-up, fixed value of counter ``name`` of the ``ordinal``-th ib device of a
    fixture (0, 1...), port ``port``: traffic counters grow with both, error counters
    are 0 but for :data:`ERRORS`."""
    if name in ERRORS:
        return ERRORS[name]
    traffic = ("data", "packets", "bytes", "Octets", "Pkts", "requests", "wrs", "Segs",
               "cmds", "keep_alive", "active_", "UDP", "Reads", "Sends", "Writes")
    if not any(word in name for word in traffic):
        return 0
    return (ordinal + 1) * 1_000_000_000 + port * 1_000_000 + len(name) * 1_000


def _driver(record: Record, by_path: dict[str, Record]) -> str | None:
    parent = by_path.get(record.path.rsplit("/", 2)[0])
    link = parent.attribute("driver") if parent is not None else None
    return link.link.rsplit("/", 1)[-1] if link is not None and link.link else None


def _ports(record: Record) -> dict[int, str]:
    """Port number -> link layer of an ib device record."""
    out = {}
    for attr in record.attributes:
        parts = attr.name.split("/")
        if len(parts) == 3 and parts[0] == "ports" and parts[2] == "link_layer":
            out[int(parts[1])] = attr.value.decode().strip()
    return out


def counter_files(record: Record, driver: str, ordinal: int) -> list[Attribute]:
    """The ``counters/`` and ``hw_counters/`` files of ib device ``record``."""
    pma, every, ethernet, device = LAYOUTS[driver]
    files: list[tuple[str, int]] = [(f"hw_counters/{n}", counter_value(n, ordinal, 0))
                                    for n in device]
    if device:
        files.append(("hw_counters/lifespan", 10))
    for port, link_layer in sorted(_ports(record).items()):
        p = f"ports/{port}"
        if pma:
            files += [(f"{p}/counters/{n}", counter_value(n, ordinal, port)) for n in PMA]
        hw = [*every, *(ethernet if link_layer == "Ethernet" else ())]
        files += [(f"{p}/hw_counters/{n}", counter_value(n, ordinal, port)) for n in hw]
        files.append((f"{p}/hw_counters/lifespan", 10))
    return [Attribute(name, f"{value}\n".encode()) for name, value in files]


def with_counters(recording: Recording) -> Recording:
    """``recording`` with the counter files of every ib device whose driver has a
    layout in :data:`LAYOUTS` (SMI devices excepted: planes of a port, no counters
    known), numbered in the recording's order."""
    by_path = {r.path: r for r in recording.records}
    records = []
    ordinal = 0
    for r in recording.records:
        parts = r.path.rsplit("/", 2)
        driver = _driver(r, by_path) if len(parts) == 3 and parts[1] == "infiniband" else None
        if driver in LAYOUTS and not parts[2].startswith("smi"):
            assert driver is not None
            extra = tuple(counter_files(r, driver, ordinal))
            r = replace(r, attributes=r.attributes + extra)
            ordinal += 1
        records.append(r)
    return Recording(tuple(records))

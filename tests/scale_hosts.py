"""SR-IOV hosts of any size for the scaling checks (tests/test_scale_reads.py and
benchmarks/bench_scale.py): ConnectX-6 PFs, each with its VFs, every function an mlx5
RDMA device of its own, as the kernel lays out an SR-IOV Kubernetes node (issue 42:
8 ConnectX x 127 functions = 1,016 devices).  Each device also gets its ``umadN``
(``infiniband_mad``), as ib_umad gives every InfiniBand port one."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Union

from sysverbs.testing import FakeHost, HostBuilder
from sysverbs.testing.layout import mad_device
from sysverbs.testing.umockdev import Attribute

__all__ = ["sriov_host", "shape", "COUNTERS"]

#: The port counters of a ConnectX port (``ports/1/counters/``), which node_exporter's
#: infiniband collector needs to report a device at all.
COUNTERS = ("VL15_dropped", "excessive_buffer_overrun_errors", "link_downed",
            "link_error_recovery", "local_link_integrity_errors", "multicast_rcv_packets",
            "multicast_xmit_packets", "port_rcv_constraint_errors", "port_rcv_data",
            "port_rcv_errors", "port_rcv_packets", "port_rcv_remote_physical_errors",
            "port_rcv_switch_relay_errors", "port_xmit_constraint_errors", "port_xmit_data",
            "port_xmit_discards", "port_xmit_packets", "port_xmit_wait", "symbol_error",
            "unicast_rcv_packets", "unicast_xmit_packets")


def shape(devices: int, per_pf: int = 128) -> tuple[int, int]:
    """(PFs, VFs per PF) of a host of ``devices`` devices, ``per_pf`` functions a card
    at most: 256 -> (2, 127), 1024 -> (8, 127), 5000 -> (40, 124); 1016 with
    ``per_pf=127`` -> (8, 126)."""
    pfs = -(-devices // per_pf)
    if devices % pfs:
        raise ValueError(f"{devices} devices do not split evenly over {pfs} cards")
    return pfs, devices // pfs - 1


def sriov_host(devices: int, root: Union[str, os.PathLike[str]], *, per_pf: int = 128,
               umad: bool = True, counters: bool = False) -> FakeHost:
    """Materialize below ``root`` a host of ``devices`` mlx5 devices (see :func:`shape`);
    ``counters``: each port's :data:`COUNTERS` too (carried by the umad record, as a
    recording carries class files: attributes climbing into the IB device)."""
    pfs, vfs = shape(devices, per_pf)
    b = HostBuilder()
    for _ in range(pfs):
        b.mlx5(model="cx6", vfs=vfs)
    if umad:
        for i, dev in enumerate(b.devices):
            mad = mad_device(dev.parent, "umad", i, dev.ibdev, 1)
            if counters:
                up = f"../../infiniband/{dev.ibdev}/ports/1/counters/"
                mad = replace(mad, attributes=mad.attributes + tuple(
                    Attribute(up + name, b"0\n") for name in COUNTERS))
            b.add_record(mad)
    return b.materialize(root)

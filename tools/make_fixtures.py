#!/usr/bin/env python3
"""Write sysverbs' bundled device fixtures (``sysverbs/testing/fixtures/*.umockdev``).

Each fixture is a plain umockdev recording (see ``sysverbs/testing/umockdev.py``) laid out the
way the Linux kernel lays out sysfs: PCI functions under ``/devices/pciDDDD:BB/...``,
``infiniband/<ibdev>`` and ``infiniband_verbs/uverbsN`` (and ``infiniband_mad/umadN``)
below the device's parent, ``net/<ifname>`` beside them, software devices (rxe) under
``/devices/virtual``.  The fixtures are checked in; this script is how they were made::

    python3 tools/make_fixtures.py            # rewrite them all
    python3 tools/make_fixtures.py --check    # fail if a checked-in file differs

Where the values come from (the public sources are named in ``tests/data/PROVENANCE.md``,
where the captures the tests read are kept):

* udev-dgx-a100 / udev-dgx-b200: DEVPATHs, PCI ids, subsystem ids, classes, modaliases,
  drivers, uverbs numbers and majors/minors, net interface names and MACs, auxiliary
  device names of DGX A100 and DGX B200 systems (``dgx-demo``, ``mlx5-cx7``,
  ``bluefield3``, ``dgx-a100``).  Neither capture has an infiniband_mad record (ib_umad
  was not loaded), so these fixtures have no umad/issm devices.  udev records carry no
  attribute values: firmware strings, GUIDs of IB-mode ports and port state there are
  made up in the real format.
* lshca-connectx: attribute values (fw_ver, hca_type, board_id, sys_image_guid, GIDs,
  LIDs, SM LIDs, port state and rate, NUMA node, driver and physfn links, lspci ids)
  of ConnectX-5/6 hosts, among them one with 40 SR-IOV VFs (``mlx5-cx6``,
  ``mlx5-sriov``).
* issue excerpts: EFA names and uverbs numbering on p5 (``efa``), the renamed irdma
  device of an E810 (``irdma``), Azure HBv2 VFs (``azure-vf``), the XDR SMI device and
  umad/issm layout (``smi``), mlx4 VF values (``mlx4``), hfi1 port files (``hfi1``).
* kernel-lab (a real 6.1 kernel with rdma_rxe): the whole rxe layout (``rxe``).
* the Grace hosts (``gpu-gb200-nvl72``, ``gpu-gb300-nvl72``, ``gpu-dgx-station-gb300``,
  ``gpu-gh200``): the testing kit's Grace builders (``sysverbs/testing/builder_grace.py``)
  recorded, each fact from a public nvidia-smi matrix, lspci, NCCL log, DRA
  ResourceSlice or vendor table, every choice marked ``constructed`` in
  ``tests/data/PROVENANCE.md`` ("The Grace fixtures").
* kernel sources: per-driver uverbs ABI versions (``abi_version`` of uverbsN), node
  type strings, device names and which sysfs attributes each driver adds.

Values not found in any capture are realistic stand-ins in the kernel's format; the
comments say which.  Every fixture carries the class files libibverbs reads
(``/sys/class/infiniband_verbs/abi_version`` = 6, and ``/sys/class/infiniband_mad/
abi_version`` = 5 where umad devices exist) as attributes of the loopback interface's
record, which is the first record of every file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The fixtures' builder and hosts are in tools/fixturegen/ (the PROVENANCE of the GPU
# hosts, gpu-*, in fixturegen/gpu_hosts.py).
from fixturegen.builder import Fixture  # noqa: E402
from fixturegen.gpu_hosts import (  # noqa: E402
    fx_gpu_cloud_vm,
    fx_gpu_dgx_a100,
    fx_gpu_dgx_b200,
    fx_gpu_hgx_h100,
    fx_gpu_mi300x,
    fx_gpu_pcie_2socket,
    fx_gpu_sriov_sf,
)
from fixturegen.grace_hosts import (  # noqa: E402
    fx_gpu_dgx_station_gb300,
    fx_gpu_gb200_nvl72,
    fx_gpu_gb300_nvl72,
    fx_gpu_gh200,
)
from fixturegen.mellanox import (  # noqa: E402
    fx_azure_vf,
    fx_bluefield3,
    fx_dgx_a100,
    fx_dgx_demo,
    fx_mlx4,
    fx_mlx5_cx6,
    fx_mlx5_cx7,
    fx_mlx5_sf,
    fx_mlx5_sriov,
    fx_mthca,
    fx_smi,
)
from fixturegen.vendors import (  # noqa: E402
    fx_bnxt_re,
    fx_cxgb4,
    fx_efa,
    fx_erdma,
    fx_hfi1,
    fx_hns,
    fx_ionic,
    fx_irdma,
    fx_mana,
    fx_ocrdma,
    fx_qedr,
    fx_qib,
    fx_rxe,
    fx_siw,
    fx_usnic,
    fx_vmw_pvrdma,
)

from sysverbs.testing.umockdev import dumps, parse  # noqa: E402

OUT_DIR = ROOT / "sysverbs" / "testing" / "fixtures"


def fx_empty() -> Fixture:
    """ib_uverbs loaded, no RDMA device: only /sys/class/infiniband_verbs/abi_version."""
    return Fixture("empty")


FIXTURES = {
    "azure-vf": fx_azure_vf,
    "bluefield3": fx_bluefield3,
    "bnxt_re": fx_bnxt_re,
    "cxgb4": fx_cxgb4,
    "dgx-a100": fx_dgx_a100,
    "dgx-demo": fx_dgx_demo,
    "efa": fx_efa,
    "empty": fx_empty,
    "erdma": fx_erdma,
    "gpu-cloud-vm": fx_gpu_cloud_vm,
    "gpu-dgx-a100": fx_gpu_dgx_a100,
    "gpu-dgx-b200": fx_gpu_dgx_b200,
    "gpu-dgx-station-gb300": fx_gpu_dgx_station_gb300,
    "gpu-gb200-nvl72": fx_gpu_gb200_nvl72,
    "gpu-gb300-nvl72": fx_gpu_gb300_nvl72,
    "gpu-gh200": fx_gpu_gh200,
    "gpu-hgx-h100": fx_gpu_hgx_h100,
    "gpu-mi300x": fx_gpu_mi300x,
    "gpu-pcie-2socket": fx_gpu_pcie_2socket,
    "gpu-sriov-sf": fx_gpu_sriov_sf,
    "hfi1": fx_hfi1,
    "hns": fx_hns,
    "ionic": fx_ionic,
    "irdma": fx_irdma,
    "mana": fx_mana,
    "mlx4": fx_mlx4,
    "mlx5-cx6": fx_mlx5_cx6,
    "mlx5-cx7": fx_mlx5_cx7,
    "mlx5-sf": fx_mlx5_sf,
    "mlx5-sriov": fx_mlx5_sriov,
    "mthca": fx_mthca,
    "ocrdma": fx_ocrdma,
    "qedr": fx_qedr,
    "qib": fx_qib,
    "rxe": fx_rxe,
    "siw": fx_siw,
    "smi": fx_smi,
    "usnic": fx_usnic,
    "vmw_pvrdma": fx_vmw_pvrdma,
}


def render(name: str) -> str:
    text = dumps(FIXTURES[name]().recording())
    parse(text)  # what we write must be valid
    return text


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare with the checked-in files instead of writing")
    ap.add_argument("--out", type=Path, default=OUT_DIR, help="output directory")
    ap.add_argument("names", nargs="*", help="fixtures to write (default: all)")
    args = ap.parse_args(argv)
    names = args.names or sorted(FIXTURES)
    stale = []
    for name in names:
        text = render(name)
        path = args.out / f"{name}.umockdev"
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Record what rdma-core's ``kernel-boot/rdma_topo`` says about the testing kit's Grace
hosts (and a few of today's PCIe fixtures), as test data for tests/test_grace_layout.py.

Usage::

    git -C RDMA_CORE show HEAD:kernel-boot/rdma_topo > /tmp/rdma_topo
    tools/rdma_topo_outputs.py /tmp/rdma_topo --commit "$(git -C RDMA_CORE log -1 --format=%H)"

For each tree it materializes the host in a temporary directory and runs the script
(with this interpreter, outside the repository) twice, its ``RDMA_TOPO_DEVDIR``
pointing at the tree's ``sys/bus/pci/devices/``:

* ``topo -j``: the complexes as JSON (each GPU's NIC PFs and DMA function, or each NUMA
  node's GPUs and NICs); on a host it does not support, ``E: No supported topology
  detected...`` and exit status 100;
The trees: the Grace hosts, the Inline host, the Data Direct variants (``VARIANTS``:
no VPD, the PF-DMA tie permuted, one DMA function no PF ties to, multi-plane PFs with
VFs) and the PCIe fixtures below.

* ``check``: its first line names the layout it recognised ("All ConnectX DMA
  functions...", "All NUMA-based complexes...", "All NIC/GPU complexes..."); the rest
  are ACS and IOMMU group checks, which the generated trees do not model (no ACS
  capability, no ``iommu_group``): recorded as they come, not compared.

Each tree's outputs go to ``OUT/<tree>.json`` with the rdma-core commit.  Nothing of
rdma_topo is copied: only its outputs are kept.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sysverbs import testing  # noqa: E402
from sysverbs.testing.builder_grace import (  # noqa: E402
    GRACE_HOSTS,
    OTHER_HOSTS,
    VARIANTS,
    endpoint_config,
)

#: The PCIe fixtures also recorded (rdma_topo finds no supported topology there, or
#: says what it does find).
FIXTURES = ("gpu-dgx-a100", "gpu-pcie-2socket")
OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "rdma_topo"


def trees() -> dict[str, Callable[[Path], Path]]:
    """Tree name -> a function that writes the tree below a directory and returns its
    sysfs root."""
    out: dict[str, Callable[[Path], Path]] = {}
    for name, make in {**GRACE_HOSTS, **OTHER_HOSTS, **VARIANTS}.items():
        out[name] = lambda d, make=make: make().materialize(d).sysfs
    for name in FIXTURES:
        out[name] = lambda d, name=name: testing.materialize(name, d).sysfs
    return out


def fill_config(sysfs: Path) -> list[str]:
    """Give each PCI function without a ``config`` file (the bundled fixtures did not
    record the endpoints') the 64-byte header an unprivileged read of real sysfs gives,
    made from its own ``vendor``, ``device``, ``class`` and ``revision`` files: every PCI
    function has one, and rdma_topo requires it.  Returns the functions filled in."""
    filled = []
    devices = sysfs / "bus" / "pci" / "devices"
    for link in sorted(devices.iterdir()):
        fn = link.resolve()
        if (fn / "config").exists():
            continue

        def num(name: str, fn: Path = fn) -> int:
            return int((fn / name).read_text().strip(), 16)

        (fn / "config").write_bytes(endpoint_config(num("vendor"), num("device"),
                                                    num("class"), num("revision")))
        filled.append(link.name)
    return filled


def run(script: Path, sysfs: Path, args: list[str]) -> dict[str, object]:
    env = dict(os.environ, RDMA_TOPO_DEVDIR=str(sysfs / "bus" / "pci" / "devices") + "/")
    proc = subprocess.run([sys.executable, str(script), *args], env=env, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, timeout=120, check=False)
    stderr = proc.stderr.strip().splitlines()
    return {"args": args, "rc": proc.returncode,
            "stdout": proc.stdout.replace(str(sysfs.parent), "<tree>"),
            # a traceback names paths of this run: only its last line is kept
            "stderr_last_line": stderr[-1] if stderr else ""}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("rdma_topo", type=Path, help="the rdma_topo script (rdma-core >= 61)")
    p.add_argument("--commit", required=True, help="the rdma-core commit it comes from")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--only", action="append", help="only these trees")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    for name, write in trees().items():
        if a.only and name not in a.only:
            continue
        with tempfile.TemporaryDirectory(prefix="rdma-topo-") as tmp:
            sysfs = write(Path(tmp) / name)
            doc = {"tree": name, "rdma_core_commit": a.commit,
                   "script": "kernel-boot/rdma_topo",
                   "devdir": "RDMA_TOPO_DEVDIR=<tree>/sys/bus/pci/devices/",
                   "config_filled_in": fill_config(sysfs),
                   "runs": [run(a.rdma_topo, sysfs, ["topo", "-j"]),
                            run(a.rdma_topo, sysfs, ["check"])]}
        (a.out / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"{name}: topo rc {doc['runs'][0]['rc']}")  # type: ignore[index]
    return 0


if __name__ == "__main__":
    sys.exit(main())

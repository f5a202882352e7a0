"""The kernel lab's second machine: a q35 VM with two NUMA nodes and PCIe switches.

Its own boot, beside the first machine's (``lab.py``, whose scenarios it leaves
alone): two vCPUs, one per NUMA node, each node with a PCIe expander host bridge
(``pxb-pcie``, ``numa_node=N``) and below it root ports, a switch, an e1000e NIC
(soft-RoCE on it) and an NVMe controller.  The kernel gives every device below an
expander its node (``numa_node``, ``local_cpulist``), as on a two-socket server.
:data:`LAYOUT` is what was built; ``numa_scenarios.py`` runs inside and
``test_numa_lab.py`` checks its results against the real tools (hwloc's
``lstopo``, ``numactl``, Open MPI's ``mpirun``, ``/proc/self/status``).

    python -m tests.kernel.numa_vm [WORKDIR]       one boot, results kept in WORKDIR
    python -m tests.kernel.numa_vm --shared BASE   one boot for everyone with BASE

``python -m tests.kernel.lab --shared BASE`` (what ``make test`` starts) also starts
``--shared BASE/numa`` beside its own boot.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from tests.kernel import lab, vmlab

#: MiB of memory per node.
NODE_MEM = 512


@dataclass(frozen=True)
class Endpoint:
    """A device the machine has, and where the layout puts it."""

    name: str  # its role: nic0, nvme1...
    kind: str  # "nic" or "nvme"
    node: int
    address: str  # PCI address the kernel gives it
    bridges: tuple[str, ...]  # the PCI bridges above it, nearest first
    host_bridge: str  # pci0000:BB
    netdev: Optional[str] = None  # NICs: the name the lab gives it, and its rxe device
    rdma: Optional[str] = None
    block: Optional[str] = None  # NVMe: the namespace's block device


#: Node 0: root port 10:00.0 -> switch (upstream 11:00.0, downstream 12:00.0 and
#: 12:01.0) -> the NIC and the NVMe (they share the switch: PIX).  Node 1: the NIC and
#: the NVMe on two root ports of the host bridge (PHB).  The lab probes the NICs and
#: NVMe controllers in this order, so that eth0, rxe0 and nvme0n1 are on node 0.
LAYOUT = (
    Endpoint("nic0", "nic", 0, "0000:13:00.0", ("0000:12:00.0", "0000:11:00.0", "0000:10:00.0"),
             "pci0000:10", netdev="eth0", rdma="rxe0"),
    Endpoint("nic1", "nic", 1, "0000:41:00.0", ("0000:40:00.0",), "pci0000:40",
             netdev="eth1", rdma="rxe1"),
    Endpoint("nvme0", "nvme", 0, "0000:14:00.0",
             ("0000:12:01.0", "0000:11:00.0", "0000:10:00.0"), "pci0000:10", block="nvme0n1"),
    Endpoint("nvme1", "nvme", 1, "0000:42:00.0", ("0000:40:01.0",), "pci0000:40",
             block="nvme1n1"),
)
#: The PCI bridges (root ports and switch ports) of the layout, and the node of each.
BRIDGES = {"0000:10:00.0": 0, "0000:11:00.0": 0, "0000:12:00.0": 0, "0000:12:01.0": 0,
           "0000:40:00.0": 1, "0000:40:01.0": 1}


#: The root port 40:01.0's link settings (qemu's ``x-speed``, ``x-width``).
SLOW_PORT = "x-speed=5,x-width=2"
#: The kernel's command line beside the lab's: the vIOMMU on, translating.
APPEND = "intel_iommu=on"


def qemu_args() -> tuple[str, ...]:
    """The machine's qemu arguments (beside the lab's kernel, initramfs and 9p shares)."""
    # a vIOMMU (first: the devices after it are behind it), so that the kernel makes
    # real iommu_groups and the NICs' DMA is translated (acs_scenarios.py); without
    # interrupt remapping: under a loaded TCG the kernel's timer check through a
    # remapped IO-APIC failed once ("timer doesn't work through Interrupt-remapped
    # IO-APIC", a panic at boot)
    a: list[str] = ["-M", "q35", "-device", "intel-iommu,intremap=off"]
    for n in (0, 1):
        a += ["-object", f"memory-backend-ram,id=m{n},size={NODE_MEM}M",
              "-numa", f"node,nodeid={n},cpus={n},memdev=m{n}"]
    a += [
        "-device", "pxb-pcie,id=pxb0,bus_nr=16,numa_node=0,bus=pcie.0",
        "-device", "pxb-pcie,id=pxb1,bus_nr=64,numa_node=1,bus=pcie.0",
        # node 0: a root port, a switch below it, the NIC and the NVMe below the switch
        "-device", "pcie-root-port,id=rp0,bus=pxb0,chassis=1",
        "-device", "x3130-upstream,id=up0,bus=rp0",
        "-device", "xio3130-downstream,id=dn0a,bus=up0,chassis=2,slot=0",
        "-device", "xio3130-downstream,id=dn0b,bus=up0,chassis=3,slot=0",
        # node 1: two root ports; the NVMe's trained below its slot's x-speed/x-width
        "-device", "pcie-root-port,id=rp1a,bus=pxb1,chassis=4",
        "-device", f"pcie-root-port,id=rp1b,bus=pxb1,chassis=5,{SLOW_PORT}",
    ]
    for n, nic_bus, nvme_bus in ((0, "dn0a", "dn0b"), (1, "rp1a", "rp1b")):
        # one hub for both NICs: a backend that keeps the link up (no host network)
        a += ["-netdev", f"hubport,id=net{n},hubid=0",
              "-device", f"e1000e,netdev=net{n},bus={nic_bus},mac=52:54:00:5e:00:1{n},romfile=",
              "-blockdev", f"driver=null-co,node-name=nvm{n},size=16777216,read-zeroes=on",
              "-device", f"nvme,serial=sv-node{n},drive=nvm{n},bus={nvme_bus}"]
    return tuple(a)


def machine() -> vmlab.Machine:
    # one package of two cores, a NUMA node each (as sub-NUMA clustering makes them)
    return vmlab.Machine(mem=2 * NODE_MEM, smp="2,sockets=1,cores=2,threads=1",
                         args=qemu_args(), append=APPEND)


@dataclass
class NumaResults:
    """The outcome of one boot of the NUMA machine."""

    workdir: Path
    seconds: float
    accel: str
    data: dict[str, Any]  # results.json: "sysfs", "setup", "scenarios", "timings"

    def scenario(self, name: str) -> dict[str, Any]:
        scenarios: dict[str, Any] = self.data.get("scenarios", {})
        if name not in scenarios:
            raise KeyError(f"NUMA lab scenario {name!r} did not run (logs: {self.workdir})")
        result: dict[str, Any] = scenarios[name]
        return result


#: The real tools the scenarios run (the VM runs this machine's disk).
TOOLS = {"lstopo-no-graphics": "hwloc", "numactl": "numactl", "mpirun": "openmpi-bin",
         "rdma": "iproute2", "ip": "iproute2"}


def unavailable_reason() -> Optional[str]:
    """Why this machine cannot boot here (None if it may)."""
    reason = vmlab.unavailable_reason()
    if reason:
        return reason
    for tool, package in TOOLS.items():
        if shutil.which(tool, path=lab.VM_PATH) is None:
            return f"{tool} is not installed (apt-get install {package})"
    return None


def load_results(workdir: Path, seconds: float = 0.0, accel: str = "reused") -> NumaResults:
    data = json.loads((workdir / "out" / "results.json").read_text())
    return NumaResults(workdir, seconds, accel, data)


def run_numa(workdir: Optional[Path] = None) -> NumaResults:
    """Boot once, run every scenario; raises :class:`vmlab.VmError`."""
    reason = unavailable_reason()
    if reason:
        raise vmlab.VmError("unavailable", reason)
    workdir = lab.lab_workdir(workdir, "sysverbs-numa-lab-")
    code = lab.stage_code(workdir)
    layout = workdir / "layout.json"
    layout.write_text(json.dumps([e.__dict__ for e in LAYOUT], indent=1))
    layout.chmod(0o644)
    q = shlex.quote
    script = "\n".join([
        f"cd {q(str(code))}",
        f"export PYTHONPATH={q(str(code))} PYTHONDONTWRITEBYTECODE=1 PATH={lab.VM_PATH}",
        # the host's / is read-only in the VM: homes and temporary files on /run
        "export HOME=/run/home TMPDIR=/run/tmp",
        "unset SYSFS_PATH LD_PRELOAD LOCAL_RANK OMPI_COMM_WORLD_LOCAL_RANK SLURM_LOCALID",
        "mkdir -p /run/home /run/tmp",
        *([f"export SV_NUMA_ONLY={q(os.environ['SV_NUMA_ONLY'])}"]  # debugging: a subset
          if os.environ.get("SV_NUMA_ONLY") else []),
        f"{q(sys.executable)} -S -m tests.kernel.numa_scenarios {q(str(layout))} /run/vmout",
        "",
    ])
    result = vmlab.run(script, workdir, machine=machine())
    out = result.outdir / "results.json"
    if not out.exists():
        raise vmlab.VmError(
            "script", f"the NUMA scenarios wrote no results (exit status {result.exit_status});"
            f" console ends {result.console.strip().splitlines()[-8:]!r}", workdir)
    if result.exit_status != 0:
        raise vmlab.VmError(
            "script", f"the NUMA scenarios failed with status {result.exit_status}; "
            f"console ends {result.console.strip().splitlines()[-8:]!r}", workdir)
    return load_results(workdir, result.seconds, result.accel)


def boot(workdir: Optional[Path] = None) -> dict[str, str]:
    """One boot and how it ended, as :func:`lab.boot` says it."""
    reason = unavailable_reason()
    if reason:
        return {"kind": "unavailable", "message": reason}
    try:
        done = run_numa(workdir)
    except vmlab.VmError as e:
        return {"kind": "fail" if e.kind == "script" else "unavailable", "message": str(e)}
    return {"kind": "ok", "seconds": f"{done.seconds:.1f}", "accel": done.accel}


def shared_boot(base: Path) -> dict[str, str]:
    """One boot for everyone who asks with the same ``base`` (:func:`lab.shared_boot`);
    the results are in ``base/lab``."""
    return lab.shared_boot(base, lambda workdir: boot(workdir))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--shared"]:
        done = shared_boot(Path(sys.argv[2]))
        print(f"NUMA lab: {done['kind']} {done.get('message', '')}".rstrip(), flush=True)
        sys.exit(0)
    res = run_numa(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    print(f"{res.seconds:.0f} s ({res.accel}); results in {res.workdir}")

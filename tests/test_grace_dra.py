"""Kubernetes DRA's standard attributes (sysverbs/placement/_dra.py) as
``k8s.io/dynamic-resource-allocation/deviceattribute`` computes them: the cases of its
own tests (``pci_linux_test.go``, ``numa_linux_test.go``) carried over as a table; then
the Grace hosts: the values dranet's live ResourceSlices show for the same machines
(OCI BM.GPU.GB200-v3.4, GB300; docs/placement.md), and the warning that aligning on
``pcieRoot`` pairs no NIC with a Grace GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Optional

import jsonschema
import pytest

from sysverbs.placement._dra import numa_node_list, pcie_root
from sysverbs.testing.builder_grace import GRACE_HOSTS

ROOT = Path(__file__).resolve().parent.parent
BUS = "0000:02:00.0"
#: pci_linux_test.go, TestGetPCIeRootAttributePCIBusID: (case, BDF, the link of
#: bus/pci/devices/<BDF> or None, the root or a piece of the error).
PCIE_ROOT_CASES = [
    ("valid", BUS, "../../../devices/pci0000:00/0000:01:00.0/0000:02:00.0", "pci0000:00"),
    ("invalid empty PCI Bus ID", "", None, "PCI Bus ID cannot be empty"),
    ("invalid PCI Bus ID format", "invalid-pci-id", None,
     "invalid PCI Bus ID format: invalid-pci-id"),
    ("invalid no exist PCI Bus ID", BUS, None, "no such file or directory"),
    ("invalid symlink (invalid prefix)", BUS,
     "../../../devices/invalid-pci-root/0000:01:00.0/0000:02:00.0",
     f"symlink target for PCI Bus ID {BUS} is invalid: it must start with"),
    ("invalid symlink (invalid suffix)", BUS,
     "../../../devices/pci0000:00/0000:01:00.0/0000:00:13.1",
     f"symlink target for PCI Bus ID {BUS} is invalid: it must end with"),
]
#: numa_linux_test.go, TestGetNUMANodeAttributeByPCIBusID, list form: (case, the
#: device's numa_node, its node's distance row, each node's socket, the list or a piece
#: of the error).
NUMA_CASES: list[tuple[str, Optional[int], Optional[str], dict[int, Optional[int]], object]] = [
    ("list with equidistant nodes", 1, "12 10 12\n", {}, [1, 0, 2]),
    ("list single NUMA node", 0, "10\n", {}, [0]),
    ("list with same-socket filter", 0, "10 12 12 20\n", {0: 0, 1: 0, 2: 1}, [0, 1]),
    ("no NUMA affinity is rejected", -1, None, {}, "no NUMA affinity"),
    ("missing numa_node", None, None, {}, "failed to read NUMA node"),
    # TestGetNUMANodeAttribute: the same rule for a node already known
    ("node known, equidistant", 1, "12 10 12\n", {}, [1, 0, 2]),
    # makeNUMANodeListAttribute: no distance row gives [node]
    ("no distance row", 3, None, {}, [3]),
    ("node at the limit", 1024, None, {}, "exceeds maximum supported"),
]


@pytest.mark.parametrize("case,bdf,link,want", PCIE_ROOT_CASES, ids=[c[0] for c in PCIE_ROOT_CASES])
def test_pcie_root_as_deviceattribute(case: str, bdf: str, link: Optional[str],
                                      want: str) -> None:
    root, err = pcie_root(bdf, link)
    if want.startswith("pci0"):
        assert (root, err) == (want, "")
    else:
        assert root is None and want in err


@pytest.mark.parametrize("case,node,row,sockets,want", NUMA_CASES, ids=[c[0] for c in NUMA_CASES])
def test_numa_node_list_as_deviceattribute(case: str, node: Optional[int],
                                           row: Optional[str],
                                           sockets: dict[int, Optional[int]],
                                           want: object) -> None:
    got, err = numa_node_list(node, row, sockets)
    if isinstance(want, list):
        assert (got, err) == (want, "")
    else:
        assert got is None and str(want) in err


@pytest.fixture(scope="module")
def gb300_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    fake = GRACE_HOSTS["gb300-nvl72"]().materialize(tmp_path_factory.mktemp("dra") / "h")
    proc = subprocess.run([sys.executable, "-m", "sysverbs", "topo", "--json",
                           "--sysfs-path", str(fake.sysfs)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=True)
    doc: dict[str, object] = json.loads(proc.stdout)
    schema = json.loads((ROOT / "sysverbs/cli/schemas/topo.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    return doc


def test_grace_attributes_are_the_live_slices(gb300_doc: dict[str, object]) -> None:
    """dranet's slices of OCI GB300 / GB200-v3.4 trays: GPUs ``0008:06:00.0`` ...
    with pcieRoot ``pci0008:00`` ...; the CX-8 PFs ``0000:03:00.0`` ... with pcieRoot
    ``pci0000:00`` ..., NUMA 0 for domains below 0x10, 1 above."""
    dra: dict[str, list[dict[str, object]]] = gb300_doc["dra"]  # type: ignore[assignment]
    attrs = {d["name"]: d["attributes"] for d in dra["devices"]}
    for i, dom in enumerate(("0008", "0009", "0018", "0019")):
        assert attrs[f"GPU{i}"] == {"resource.kubernetes.io/pciBusID": f"{dom}:06:00.0",
                                    "resource.kubernetes.io/pcieRoot": f"pci{dom}:00",
                                    "resource.kubernetes.io/numaNode": [0 if i < 2 else 1]}
    for name, dom, numa in (("ibp3s0", "0000", 0), ("ibP2p3s0", "0002", 0),
                            ("ibP16p3s0", "0010", 1), ("ibP18p3s0", "0012", 1)):
        assert attrs[name] == {"resource.kubernetes.io/pciBusID": f"{dom}:03:00.0",
                               "resource.kubernetes.io/pcieRoot": f"pci{dom}:00",
                               "resource.kubernetes.io/numaNode": [numa]}


def test_pcie_root_alignment_is_warned_on_every_data_direct_gpu(
        gb300_doc: dict[str, object]) -> None:
    dra: dict[str, list[object]] = gb300_doc["dra"]  # type: ignore[assignment]
    warnings = [str(w) for w in dra["warnings"]]
    assert len(warnings) == 4
    assert warnings[0].startswith("GPU0 (0008:06:00.0, resource.kubernetes.io/pcieRoot "
                                  "pci0008:00): aligning on pcieRoot gives no NIC, the "
                                  "data-direct rule ibp3s0")
    gpu0 = next(d for d in dra["devices"] if d["name"] == "GPU0")  # type: ignore[index]
    assert gpu0["pairing"] == {"rule": "data-direct", "status": "resolved",  # type: ignore[index]
                               "nics": ["ibp3s0"], "dma_function": "0008:03:00.0",
                               "pcie_root_aligned": False}


def test_nfd_labels_say_the_layout_and_the_misalignment(tmp_path: Path) -> None:
    """nfd on the GB300 tray: the layout, and pcieRoot alignment marked false."""
    fake = GRACE_HOSTS["gb300-nvl72"]().materialize(tmp_path / "h")
    out = subprocess.run([sys.executable, "-m", "sysverbs", "nfd", "--sysfs-path",
                          str(fake.sysfs), "--dev-dir", str(fake.root / "dev/infiniband")],
                         capture_output=True, text=True, cwd=ROOT, timeout=120).stdout
    labels = dict(line.split("/", 1)[1].split("=", 1) for line in out.splitlines()
                  if line.startswith("sysverbs.feature"))
    assert labels["gpu-nic.layout"] == "dma-based"
    assert labels["gpu-nic.pcie-root-aligned"] == "false"

"""Build small sysfs/dev trees for tests: exact bytes, links, directories, anything broken."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union


@dataclass(frozen=True)
class Link:
    """A symbolic link to ``target``."""

    target: str


@dataclass(frozen=True)
class Dir:
    """An (empty) directory."""


Entry = Union[bytes, str, Link, Dir]
Tree = dict[str, Entry]

MLX5_MODALIAS = "pci:v000015B3d0000101Bsv000015B3sd00000007bc02sc07i00\n"
CLASS_ABI = {"sys/class/infiniband_verbs/abi_version": "6\n"}


def build(root: Path, tree: Tree) -> Path:
    """Create ``tree`` under ``root`` (paths relative to it); returns root."""
    (root / "sys/class/infiniband_verbs").mkdir(parents=True, exist_ok=True)
    (root / "sys/class/infiniband").mkdir(parents=True, exist_ok=True)
    (root / "dev/infiniband").mkdir(parents=True, exist_ok=True)
    for rel, entry in tree.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(entry, Link):
            os.symlink(entry.target, path)
        elif isinstance(entry, Dir):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.write_bytes(entry.encode() if isinstance(entry, str) else entry)
    return root


def rdma_dev(
    uverbs: str,
    ibdev: Union[str, bytes],
    *,
    pci: str = "0000:07:00.0",
    modalias: Optional[Union[str, bytes]] = MLX5_MODALIAS,
    abi: Optional[Union[str, bytes]] = "1\n",
    node_type: Optional[Union[str, bytes]] = "1: CA\n",
    guid: Optional[Union[str, bytes]] = "0c42:a103:00a5:1c30\n",
    dev: Optional[Union[str, bytes]] = "231:192\n",
    dev_node: bool = True,
    ibdev_file: Optional[Union[str, bytes]] = None,
) -> Tree:
    """One device laid out as the kernel does: device dirs under /sys/devices, class links."""
    name = ibdev if isinstance(ibdev, str) else os.fsdecode(ibdev)
    base = f"sys/devices/pci0000:00/{pci}"
    ib = f"{base}/infiniband/{name}"
    uv = f"{base}/infiniband_verbs/{uverbs}"
    tree: Tree = {
        f"sys/class/infiniband/{name}": Link(f"../../devices/pci0000:00/{pci}/infiniband/{name}"),
        f"sys/class/infiniband_verbs/{uverbs}": Link(
            f"../../devices/pci0000:00/{pci}/infiniband_verbs/{uverbs}"
        ),
        f"{ib}/device": Link("../../../" + pci),
        f"{uv}/device": Link("../../../" + pci),
        f"{uv}/ibdev": ibdev_file
        if ibdev_file is not None
        else ((ibdev + "\n") if isinstance(ibdev, str) else ibdev + b"\n"),
    }
    for rel, value in (
        (f"{base}/modalias", modalias),
        (f"{ib}/node_type", node_type),
        (f"{ib}/node_guid", guid),
        (f"{uv}/abi_version", abi),
        (f"{uv}/dev", dev),
    ):
        if value is not None:
            tree[rel] = value
    if dev_node:
        tree[f"dev/infiniband/{uverbs}"] = b""
    return tree


def rxe_dev(uverbs: str, ibdev: str, **kw: object) -> Tree:
    """A soft-RoCE device: matched by name, no modalias."""
    kw.setdefault("modalias", None)
    kw.setdefault("abi", "2\n")
    return rdma_dev(uverbs, ibdev, pci=f"virtual-{ibdev}", **kw)  # type: ignore[arg-type]


def host(*devices: Tree, extra: Optional[Tree] = None, class_abi: bool = True) -> Tree:
    """Merge device trees (plus the class abi_version) into one host tree."""
    tree: Tree = dict(CLASS_ABI) if class_abi else {}
    for d in devices:
        tree.update(d)
    if extra:
        tree.update(extra)
    return tree

"""Anchors: any device a rank is placed by, as the PCI function it sits on.

A GPU is the usual anchor; storage servers and GPUDirect Storage place by an NVMe
drive, others by a NIC.  :func:`find_anchor` takes a GPU (``GPU0``, its index, BDF or
UUID), a PCI address (``0000:3b:00.0``, or ``3b:00.0`` in domain 0), an RDMA device
(``mlx5_0``), a netdev (``eth0``) or a block or NVMe device (``nvme0n1``, ``nvme0``),
and finds the PCI function below which the kernel placed it.
"""

from __future__ import annotations

import os
import re

from ..ground.errors import NotFoundError, UsageError
from ._names import is_bdf
from ._pci import resolve_link
from ._topology import Anchor, Gpu, Topology, host_arg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

__all__ = ["find_anchor", "gpu_anchor"]

_SHORT_BDF = re.compile(r"[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
#: The classes a device name is looked up in, in order, and the kind each gives.
_CLASSES = (("net", "netdev"), ("block", "block"), ("nvme", "nvme"))


def gpu_anchor(gpu: Gpu) -> Anchor:
    """The anchor of a GPU of the host."""
    return Anchor(gpu.name, "gpu", gpu.address, gpu.pci, gpu, f"GPU{gpu.index} {gpu.address}")


def _pci_below(host: Topology, target: bytes) -> Optional[str]:
    """The PCI function whose directory holds ``target`` (nearest first)."""
    by_path = {os.fsencode(d.path): a for a, d in host.pci.items()}
    path = target
    while path.count(b"/") > 1:
        found = by_path.get(path)
        if found is not None:
            return found
        path = path.rsplit(b"/", 1)[0]
    return None


def find_anchor(host: Topology, spec: str) -> Anchor:
    """The :class:`Anchor` ``spec`` names on ``host`` (see the module).  A name that
    is none of these is a :class:`~sysverbs.ground.errors.NotFoundError` saying where it was
    looked for; a device that is not below a PCI function (a virtual netdev, a RAM
    disk) one saying so."""
    host_arg(host)
    if not isinstance(spec, str):
        from ..ground.errors import WrongTypeError

        raise WrongTypeError(f"an anchor is a device name, not {type(spec).__name__}")
    name = spec.strip()
    if not name or "/" in name or "\0" in name:
        raise UsageError(f"{spec!r} is not a device name")
    gpu = host.gpu(int(name)) if name.isdigit() else host.gpu(name)
    if gpu is not None:
        return gpu_anchor(gpu)
    bdf = "0000:" + name if _SHORT_BDF.fullmatch(name) else name
    if is_bdf(bdf.lower()):
        dev = host.pci.get(bdf.lower())
        if dev is None:
            raise NotFoundError(f"no PCI function {bdf} on this host")
        g = host.gpu(dev.address)
        if g is not None:
            return gpu_anchor(g)
        return Anchor(name, "pci", dev.address, dev, None, f"PCI function {dev.address}")
    nic = host.nic(name)
    if nic is not None:
        if nic.address is None:
            raise NotFoundError(f"RDMA device {name} is not placed on a PCI function "
                                f"({nic.placement})")
        return Anchor(name, "rdma", nic.address, host.pci[nic.address], None,
                      f"RDMA device {name} on {nic.address} ({nic.placement})")
    root = os.fsencode(host.sysfs_path)
    for cls, kind in _CLASSES:
        link = root + b"/class/" + cls.encode() + b"/" + os.fsencode(name)
        if not os.path.lexists(link):
            continue
        target = resolve_link(root, link)
        address = None if target is None else _pci_below(host, target)
        if address is None:
            raise NotFoundError(f"{cls} device {name} is not below a PCI function "
                                "(virtual, or its link does not resolve in the tree)")
        return Anchor(name, kind, address, host.pci[address], host.gpu(address),
                      f"class/{cls}/{name} below PCI function {address}")
    raise NotFoundError(
        f"no device {name!r}: not a GPU, a PCI address, an RDMA device, or a netdev, "
        "block or NVMe device of class/net, class/block, class/nvme")

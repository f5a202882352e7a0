"""What :mod:`sysverbs.compat.pyverbs` leaves out, and the error that says so.

pyverbs' names and modules for an opened device (a verbs context, PD, QP, CQ, MR,
AH...) raise :class:`~sysverbs.ground.errors.OutOfScopeError` when they are imported, with
what sysverbs offers instead.  The modules are answered by a finder on
``sys.meta_path`` that knows only rdma-core's pyverbs module names below this package.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Optional

from ...ground.errors import OutOfScopeError

__all__ = ["PACKAGE", "MODULES", "out_of_scope", "install_finder"]

PACKAGE = "sysverbs.compat.pyverbs"

#: rdma-core's pyverbs modules beyond discovery: those of rdma-core 44 (Debian 12's) and
#: the ones later releases added (``comp_cntr``; ``enums`` and ``cm_enums`` were renamed
#: ``libibverbs_enums`` and ``librdmacm_enums``).
MODULES = frozenset({
    "addr", "base", "cm_enums", "cmid", "comp_cntr", "cq", "dma_util", "dmabuf", "flow",
    "libibverbs", "libibverbs_enums", "librdmacm", "librdmacm_enums", "mem_alloc", "mr",
    "pd", "providers", "qp", "spec", "srq", "utils", "wq", "wr", "xrcd",
})

_WHY = (
    "sysverbs discovers RDMA devices, it does not open them: there is no verbs context, "
    "so no PD, QP, CQ, MR or AH. sysverbs.compat.pyverbs has device (get_device_list, "
    "rdma_get_devices, Device), pyverbs_error, enums (node, transport and fork types) "
    "and fork. Instead of a Context: sysverbs.device_attributes(name) and "
    "sysverbs.port_attributes(name, port) read from sysfs what ibv_query_device and "
    "ibv_query_port report (`sysverbs devinfo -d NAME -v` prints them in ibv_devinfo's "
    "layout), and sysverbs.open_device(dev) opens the uverbs char device. To create "
    "verbs objects, use the real pyverbs (Debian: python3-pyverbs) on a host with RDMA "
    "kernel support."
)


def out_of_scope(name: str) -> OutOfScopeError:
    """The error for ``name``, a dotted name below this package."""
    pyverbs_name = "pyverbs" + name[len(PACKAGE):] if name.startswith(PACKAGE) else name
    return OutOfScopeError(f"{name} ({pyverbs_name}) is out of scope: {_WHY}", name=name)


class OutOfScopeFinder:
    """Raises :func:`out_of_scope` for an import of one of :data:`MODULES` (or anything
    below one) from this package; finds nothing else."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: object = None) -> None:
        head, dot, rest = fullname.partition(PACKAGE + ".")
        if not head and dot and rest.split(".")[0] in MODULES:
            raise out_of_scope(fullname)
        return None


def install_finder() -> None:
    """Append one :class:`OutOfScopeFinder` to ``sys.meta_path`` (once): after every
    other finder, so that it sees only names no file of this package answers."""
    if not any(isinstance(f, OutOfScopeFinder) for f in sys.meta_path):
        sys.meta_path.append(OutOfScopeFinder())

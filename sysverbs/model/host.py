"""One host model, read once per invocation (docs/architecture.md, "One host model").

A :class:`HostModel` is built from a :class:`~sysverbs.ground.hostroot.HostRoot` and
holds what every command reads of that host: the placement host (PCI tree, GPUs and
their NUMA answer with its rule, RDMA devices, ports, link layers, netdevs, what could
not be read and why) and the CPUs, nodes and caches.  Each part is read the first time it
is asked for, then kept; nothing is read at build time.  Every read the model's parts
and the commands' library calls make while :meth:`HostModel.reading` is in force goes
through one :class:`~sysverbs.ground.sysfs_read.ReadOnce`: no sysfs file is read twice
in one invocation, and every part sees the same content.  A command that runs more than
once (``metrics --interval``, ``nfd --interval``) builds a model per round.
"""

from __future__ import annotations

import os

from ..ground.errors import WrongTypeError
from ..ground.hostroot import HostRoot
from ..ground.sysfs_read import ReadOnce

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    from ..placement import CpuTopology, Topology

    T = TypeVar("T")

__all__ = ["HostModel"]


class HostModel:
    """The facts of the host ``root`` names, each read at most once (lazily) and kept:
    :attr:`placement` (a :class:`~sysverbs.placement.Topology`) and :attr:`cpus` (a
    :class:`~sysverbs.placement.CpuTopology`).  ``reads``: the invocation's
    :class:`~sysverbs.ground.sysfs_read.ReadOnce`, entered by :meth:`reading` (and by
    every part while it reads).  Its parts are never replaced once read."""

    __slots__ = ("root", "reads", "_parts")

    def __init__(self, root: HostRoot) -> None:
        if not isinstance(root, HostRoot):
            raise WrongTypeError(f"root must be a HostRoot, not {type(root).__name__}")
        self.root = root
        self.reads = ReadOnce()
        self._parts: dict[str, object] = {}

    def reading(self) -> ReadOnce:
        """``with model.reading():`` every sysfs read of this thread goes through the
        model's :class:`~sysverbs.ground.sysfs_read.ReadOnce` (each file once)."""
        return self.reads

    def _part(self, name: str, build: Callable[[], T]) -> T:
        if name not in self._parts:
            with self.reads:
                self._parts[name] = build()
        return self._parts[name]  # type: ignore[return-value]

    @property
    def placement(self) -> Topology:
        """The placement host (:func:`~sysverbs.placement.read_host_at` of ``root``)."""
        from ..placement import read_host_at

        return self._part("placement", lambda: read_host_at(self.root))

    @property
    def cpus(self) -> CpuTopology:
        """The CPUs, caches and nodes (:func:`~sysverbs.placement.read_cpus`)."""
        from ..placement import read_cpus

        return self._part("cpus", lambda: read_cpus(os.path.abspath(self.root.sysfs or b"/")))

    def __repr__(self) -> str:
        return f"HostModel({self.root.describe()}, read: {', '.join(self._parts) or 'nothing'})"

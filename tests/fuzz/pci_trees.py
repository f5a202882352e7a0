"""A hypothesis strategy for PCI trees (host bridges, root ports, PCIe switches of any
depth and fan-out, GPUs, NICs, NUMA layouts), rendered through the testing kit's
:class:`sysverbs.testing.HostBuilder`, so that hwloc and the placement model read the
same generated host.

Buses are numbered depth-first as the kernel numbers them (every bridge's subtree
gets a contiguous range ``[secondary, subordinate]``), one PCI domain, at most 256
buses (larger draws are rejected with ``assume``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from hypothesis import assume
from hypothesis import strategies as st

from sysverbs.testing import HostBuilder

__all__ = ["Leaf", "Switch", "TreeSpec", "bus_count", "pci_trees", "render"]

LEAVES = ("gpu", "nic", "nic2", "nvme")


@dataclass(frozen=True)
class Leaf:
    """An endpoint on a port: a GPU, a one- or two-function mlx5 NIC, an NVMe."""

    kind: str


@dataclass(frozen=True)
class Switch:
    """A PCIe switch on a port: one subtree per downstream port."""

    ports: tuple[Subtree, ...]


Subtree = Union[Leaf, Switch]


@dataclass(frozen=True)
class TreeSpec:
    sockets: int
    nodes_per_socket: int
    threads: int
    # per host bridge: its NUMA node (-1: unknown) and one subtree per root port
    host_bridges: tuple[tuple[int, tuple[Subtree, ...]], ...]

    @property
    def nodes(self) -> int:
        return self.sockets * self.nodes_per_socket


def _subtrees(max_depth: int, fan_out: int) -> st.SearchStrategy[Subtree]:
    leaf = st.builds(Leaf, st.sampled_from(LEAVES))
    return st.recursive(
        leaf,
        lambda inner: st.builds(
            Switch, st.lists(inner, min_size=1, max_size=fan_out).map(tuple)),
        max_leaves=max_depth * fan_out,
    )


@st.composite
def pci_trees(draw: st.DrawFn, *, max_host_bridges: int = 4, max_root_ports: int = 3,
              max_depth: int = 3, fan_out: int = 3) -> TreeSpec:
    """A host: 1-2 sockets of 1-2 NUMA nodes, up to ``max_host_bridges`` host bridges
    (each on a node, or -1), each with root ports carrying switches and endpoints."""
    sockets = draw(st.integers(1, 2))
    per_socket = draw(st.integers(1, 2))
    threads = draw(st.integers(1, 2))
    nodes = sockets * per_socket
    hbs = draw(st.lists(
        st.tuples(st.integers(-1, nodes - 1),
                  st.lists(_subtrees(max_depth, fan_out), min_size=1,
                           max_size=max_root_ports).map(tuple)),
        min_size=1, max_size=max_host_bridges))
    spec = TreeSpec(sockets, per_socket, threads, tuple(hbs))
    assume(bus_count(spec) <= 0x100)
    return spec


def _buses_below(tree: Subtree) -> int:
    if isinstance(tree, Leaf):
        return 0
    return 1 + sum(1 + _buses_below(sub) for sub in tree.ports)


def bus_count(spec: TreeSpec) -> int:
    """How many buses :func:`render` numbers for ``spec``."""
    return sum(1 + sum(1 + _buses_below(sub) for sub in ports)
               for _, ports in spec.host_bridges)


class _Buses:
    def __init__(self) -> None:
        self.next = 0

    def take(self) -> int:
        bus = self.next
        if bus > 0xFF:
            raise ValueError("more than 256 PCI buses")
        self.next += 1
        return bus


def render(spec: TreeSpec) -> HostBuilder:
    """The host of ``spec`` as a builder (materialize it to read it)."""
    hb = HostBuilder()
    hb.cpu_topology(sockets=spec.sockets, cores_per_socket=2 * spec.nodes_per_socket,
                    threads_per_core=spec.threads, nodes_per_socket=spec.nodes_per_socket,
                    mem_per_node_kb=1 << 20)
    buses = _Buses()

    def place(parent: str, bus: int, tree: Subtree) -> None:
        if isinstance(tree, Leaf):
            path = f"{parent}/0000:{bus:02x}:00.0"
            if tree.kind == "gpu":
                hb.gpu(path, model="h100")
            elif tree.kind == "nvme":
                hb.pci_device(path, vendor=0x144D, device=0xA824, pci_class=0x010802,
                              driver="nvme")
            else:
                hb.mlx5(path=path, model="cx7")
                if tree.kind == "nic2":
                    hb.mlx5(path=path[:-1] + "1", model="cx7", link_layer="Ethernet")
            return
        usp = hb.pci_bridge(f"{parent}/0000:{bus:02x}:00.0", port="upstream")
        inner = buses.take()
        for dev, sub in enumerate(tree.ports):
            dsp = hb.pci_bridge(f"{usp}/0000:{inner:02x}:{dev:02x}.0")
            place(dsp, buses.take(), sub)

    for numa, ports in spec.host_bridges:
        root_bus = buses.take()
        host_bridge = hb.host_bridge(f"pci0000:{root_bus:02x}", numa_node=numa)
        for dev, sub in enumerate(ports):
            rp = hb.pci_bridge(f"{host_bridge}/0000:{root_bus:02x}:{dev + 1:02x}.0",
                               port="root", vendor=0x8086, device=0x352A)
            place(rp, buses.take(), sub)
    return hb

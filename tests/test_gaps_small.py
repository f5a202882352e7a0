"""Small gaps a mutation audit found (issue 41): each value below could change with no
test failing.  Hosts are generated (tests/test_launch.py's two-node host); pyverbs'
names come from the real pyverbs (Debian's python3-pyverbs) where it is installed."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sysverbs.compat.pyverbs import enums, fork
from sysverbs.ground import errors
from sysverbs.placement import CpuTopology, cpu_set, mem_node, read_cpus
from sysverbs.providers.static import static_link, static_names, unmodeled
from sysverbs.rank.launch import plan
from sysverbs.testing import HostBuilder
from tests.conftest import require
from tests.test_launch import NODE0, NODE1, cpus, two_node_host

# ------------------------------------------------------------------ rank/launch.py


def test_a_local_size_of_zero_is_skipped(tmp_path: Path) -> None:
    """LOCAL_WORLD_SIZE=0 is no size: the search goes on to Open MPI's variable (2 ranks:
    rank 1 gets the second half of node 1's cores)."""
    _, h = two_node_host(tmp_path)
    env = {"LOCAL_WORLD_SIZE": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    got = plan("nvme0n1", sysfs_path=str(h.sysfs), environ=env, cpu="exclusive", nics=False)
    assert got.rank == 1 and got.cpus == cpus((12, 15), (28, 31))


# ----------------------------------------------------------- placement/_cpus.py


def _node(sysfs: Path) -> Path:
    return sysfs / "devices" / "system" / "node"


def _memory(sysfs: Path, has_memory: str | None, meminfo1: str | None) -> None:
    node = _node(sysfs)
    if has_memory is None:
        (node / "has_memory").unlink(missing_ok=True)
    else:
        (node / "has_memory").write_text(has_memory + "\n")
    if meminfo1 is None:
        (node / "node1" / "meminfo").unlink(missing_ok=True)
    else:
        (node / "node1" / "meminfo").write_text(meminfo1 + "\n")


@pytest.mark.parametrize(("has_memory", "meminfo1", "memory"), [
    ("0", "Node 1 MemTotal:       65536000 kB", {0}),  # has_memory wins
    (None, "Node 1 MemTotal:              0 kB", {0}),  # no has_memory: MemTotal decides
    (None, "Node 1 MemTotal:       65536000 kB", {0, 1}),
    (None, None, {0, 1}),  # neither: every node
])
def test_nodes_with_memory(tmp_path: Path, has_memory: str | None, meminfo1: str | None,
                           memory: set[int]) -> None:
    """A memory-less node is in no plan's memory nodes: not in ``memory``, not in the
    allowed memory nodes of a recorded host's plan, never the node bound to."""
    _, h = two_node_host(tmp_path)
    _memory(h.sysfs, has_memory, meminfo1)
    node0 = _node(h.sysfs) / "node0" / "meminfo"
    if not node0.exists():
        node0.write_text("Node 0 MemTotal:       65536000 kB\n")
    assert read_cpus(os.fsencode(h.sysfs)).memory == memory
    got = plan("nvme0n1", sysfs_path=str(h.sysfs), environ={}, nics=False)
    assert got.allowed_mems == memory
    assert got.node == 1 and got.cpus == NODE1 and got.mems == {1 if 1 in memory else 0}


def test_a_node_whose_cpus_are_all_offline(tmp_path: Path) -> None:
    """Node 1's CPUs offline: it has no CPU left, and its device runs on node 0."""
    _, h = two_node_host(tmp_path)
    (h.sysfs / "devices" / "system" / "cpu" / "online").write_text("0-7,16-23\n")
    topo = read_cpus(os.fsencode(h.sysfs))
    assert topo.online == NODE0
    assert dict(topo.nodes) == {0: NODE0, 1: frozenset()}
    # the online CPUs after the offline ones (16-23) are read too
    assert dict(topo.core) == {c: c % 16 for c in NODE0}
    assert dict(topo.package) == dict.fromkeys(NODE0, 0)
    assert dict(topo.llc) == {c: (c % 16) // 4 * 4 for c in NODE0} and topo.llc_level == 3
    got = plan("nvme0n1", sysfs_path=str(h.sysfs), environ={}, nics=False)
    assert got.node == 0 and got.cpus == NODE0


def test_cpus_online_after_offline_ones_are_read(tmp_path: Path) -> None:
    """CPUs 8-15 offline: their SMT siblings 24-31 (node 1) are read all the same, each
    keyed by the lowest CPU of its thread_siblings_list, as the docstring says."""
    _, h = two_node_host(tmp_path)
    (h.sysfs / "devices" / "system" / "cpu" / "online").write_text("0-7,16-31\n")
    topo = read_cpus(os.fsencode(h.sysfs))
    assert dict(topo.nodes) == {0: NODE0, 1: cpus((24, 31))}
    assert {c: topo.package.get(c) for c in cpus((24, 31))} == dict.fromkeys(cpus((24, 31)), 1)
    assert {c: topo.core.get(c) for c in cpus((24, 31))} == {c: c - 16 for c in cpus((24, 31))}


@pytest.mark.parametrize("all_caches", [True, False])
def test_the_last_level_cache(tmp_path: Path, all_caches: bool) -> None:
    """x86 Linux's index0-3 (L1d, L1i, L2, L3) or the L3 alone: the L3 groups of 4 cores;
    without any cache directory, level 0 and each CPU its own group."""
    hb = HostBuilder().cpu_topology(sockets=1, cores_per_socket=8, cores_per_l3=4,
                                    all_caches=all_caches)
    host = hb.materialize(tmp_path / "host")
    topo = read_cpus(os.fsencode(host.sysfs))
    assert (topo.llc_level, dict(topo.llc)) == (3, {c: c // 4 * 4 for c in range(8)})
    for cache in (host.sysfs / "devices" / "system" / "cpu").glob("cpu*/cache"):
        shutil.rmtree(cache)
    (host.sysfs / "devices" / "system" / "node" / "node0" / "distance").unlink()
    topo = read_cpus(os.fsencode(host.sysfs))
    assert (topo.llc_level, dict(topo.llc)) == (0, {c: c for c in range(8)})
    assert topo.problems == ()  # one node: no distance needed
    assert (topo.node_of_cpu(7), topo.node_of_cpu(8)) == (0, None)


def test_an_unreadable_distance_is_a_problem(tmp_path: Path) -> None:
    _, h = two_node_host(tmp_path)
    (_node(h.sysfs) / "node1" / "distance").unlink()
    topo = read_cpus(os.fsencode(h.sysfs))
    assert topo.problems == ("node1/distance unreadable or not one entry per node",)
    assert dict(topo.distance) == {(0, 0): 10, (0, 1): 32}  # node 0's row only


# ----------------------------------------------------------- placement/_bind.py


def _topology(llc: dict[int, int]) -> CpuTopology:
    """One node of 4 CPUs, each its own core, with the last-level caches given."""
    cpus = frozenset(range(4))
    return CpuTopology(cpus, dict.fromkeys(cpus, 0), {c: c for c in cpus}, llc, 3,
                       {0: cpus}, frozenset({0}), {(0, 0): 10})


def test_more_ranks_than_twice_the_cores() -> None:
    """10 ranks on 4 cores: exclusive cannot give each a core, so none gets a set (run
    then fails, or runs unbound with --fallback), and the reason says why."""
    topo = _topology({c: 0 for c in range(4)})
    got = [cpu_set(topo, "exclusive", 0, topo.online, i, 10) for i in range(10)]
    assert [c for c, _ in got] == [frozenset()] * 10
    assert got[9][1] == ("only 4 physical cores on node 0 for the 10 ranks placed there: "
                         "exclusive needs a core each at least")


def test_a_split_says_which_rank() -> None:
    topo = _topology({c: 0 for c in range(4)})
    cpus_, why = cpu_set(topo, "exclusive", 0, topo.online, 1, 2)
    assert cpus_ == {2, 3} and "share 1 (of 0 to 1)" in why
    cpus_, why = cpu_set(topo, "exclusive", 0, topo.online, 3, 4)  # as many cores as ranks
    assert cpus_ == {3} and "4 physical cores of node 0 split among the 4 ranks" in why
    assert "share 3 (of 0 to 3)" in why


def test_core_complex_takes_the_largest_cache_group_first() -> None:
    """Cache groups {0} and {1, 2, 3}: rank 0 gets the group of three, rank 1 the one."""
    topo = _topology({0: 0, 1: 1, 2: 1, 3: 1})
    got = [cpu_set(topo, "core-complex", 0, topo.online, i, 2)[0] for i in range(5)]
    assert got == [frozenset({1, 2, 3}), frozenset({0})] * 2 + [frozenset({1, 2, 3})]
    assert cpu_set(topo, "core-complex", 0, topo.online, 1, 2)[1] == (
        "L3 cache group 1 of the 2 on node 0 (largest first): share 1 (of 0 to 1)")


def test_core_complex_without_cache_files_takes_the_node() -> None:
    cpus = frozenset(range(4))
    topo = CpuTopology(cpus, dict.fromkeys(cpus, 0), {c: c for c in cpus}, {}, 0,
                       {0: cpus}, frozenset({0}), {(0, 0): 10})
    assert cpu_set(topo, "core-complex", 0, cpus, 1, 2)[0] == cpus


def test_an_uneven_split_says_who_gets_one_more() -> None:
    topo = _topology({c: 0 for c in range(4)})
    got = [cpu_set(topo, "exclusive", 0, topo.online, i, 3) for i in range(3)]
    assert [c for c, _ in got] == [{0, 1}, {2}, {3}]
    assert all("(1 each, the first 1 one more)" in why for _, why in got)
    assert "(2 each)" in cpu_set(topo, "exclusive", 0, topo.online, 0, 2)[1]


def test_memory_of_a_memory_less_node_allowed() -> None:
    """A memory-less node among the allowed ones still takes the nearest node's memory."""
    cpus = frozenset(range(4))
    topo = CpuTopology(cpus, dict.fromkeys(cpus, 0), {c: c for c in cpus}, {}, 0,
                       {0: frozenset({0, 1}), 1: frozenset({2, 3})}, frozenset({0}),
                       {(0, 0): 10, (0, 1): 20, (1, 0): 20, (1, 1): 10})
    assert mem_node(topo, 1, frozenset({0, 1}))[0] == 0
    assert mem_node(topo, 0, frozenset({0, 1}))[0] == 0
    assert mem_node(topo, 0, frozenset({1}))[0] is None


def test_socket_takes_the_package_beyond_the_node() -> None:
    """A package of two nodes: socket mode gives all four CPUs; a CPU without
    physical_package_id gives the node's own."""
    cpus = frozenset(range(4))

    def socket(package: dict[int, int]) -> frozenset[int]:
        topo = CpuTopology(cpus, package, {c: c for c in cpus}, {c: c for c in cpus}, 3,
                           {0: frozenset({0, 1}), 1: frozenset({2, 3})}, frozenset({0, 1}),
                           {(0, 0): 10, (0, 1): 20, (1, 0): 20, (1, 1): 10})
        return cpu_set(topo, "socket", 0, cpus, 0, 1)[0]

    assert socket(dict.fromkeys(cpus, 0)) == cpus
    assert socket({}) == {0, 1}


# ----------------------------------------------------------- providers/static.py


def test_providers_rdma_core_dropped() -> None:
    """rdma-core 27 dropped cxgb3 and nes, 37 replaced i40iw by irdma (static.json, read
    from rdma-core's CMakeLists.txt by tools/check_static_providers.py)."""
    have = {r: {n for n in ("cxgb3", "nes", "i40iw", "irdma") if n in static_names(r)}
            for r in (26, 27, 36, 37)}
    assert have == {26: {"cxgb3", "nes", "i40iw"}, 27: {"i40iw"}, 36: {"i40iw"},
                    37: {"irdma"}}
    assert static_link("cxgb3,mlx5", 26).linked == ("cxgb3", "mlx5")
    with pytest.raises(errors.UsageError, match="'cxgb3' is not a provider of rdma-core 27"):
        static_link("cxgb3,mlx5", 27)
    assert unmodeled(26, static_link("all", 26).linked) == ("cxgb3", "i40iw", "nes")
    assert unmodeled(37, static_link("all", 37).linked) == ()


# ----------------------------------------------------------- compat/pyverbs


@pytest.mark.parametrize(("raised", "code"), [(OSError(errno.ENOSYS, "x"), errno.ENOSYS),
                                              (OSError(errno.ENOMEM, "x"), errno.ENOMEM),
                                              (OSError("no errno"), -1)])
def test_fork_init_error_code(monkeypatch: pytest.MonkeyPatch, raised: OSError,
                              code: int) -> None:
    """pyverbs raises PyverbsRDMAError with ibv_fork_init()'s return value, the errno."""
    def fail() -> Any:
        raise raised

    monkeypatch.setattr(fork, "ibv_fork_init", fail)
    with pytest.raises(errors.PyverbsRDMAError) as e:
        fork.fork_init()
    assert e.value.error_code == code
    assert e.value.errno == (None if code == -1 else code)


def _real_pyverbs(code: str) -> Any:
    """What ``code`` prints as JSON under the system Python, with rdma-core's pyverbs."""
    p = subprocess.run([shutil.which("python3", path="/usr/bin") or "/usr/bin/python3", "-c",
                        "import json, pyverbs.enums as e; print(json.dumps(" + code + "))"],
                       capture_output=True, text=True)
    require(None if p.returncode == 0 else p.stderr.strip()[-200:],
            "rdma-core's pyverbs (python3-pyverbs)")
    return json.loads(p.stdout)


@pytest.mark.oracle
def test_enum_values_are_pyverbs() -> None:
    """Every member of the three enum classes, and each as a module constant, has the
    real pyverbs' name and value."""
    classes = ("ibv_node_type", "ibv_transport_type", "ibv_fork_status")
    real = _real_pyverbs("{c: {m.name: int(m) for m in getattr(e, c)} for c in "
                         f"{classes!r}}}")
    ours = {c: {m.name: int(m) for m in getattr(enums, c)} for c in classes}
    assert ours == real
    assert {n: int(getattr(enums, n)) for c in real.values() for n in c} == \
        {n: v for c in real.values() for n, v in c.items()}


@pytest.mark.oracle
def test_private_ibv_names_are_out_of_scope() -> None:
    """pyverbs.enums' ``_IBV_*`` names (the real module's, where installed) are out of
    scope, as its IBV_ names are: OutOfScopeError, not a plain AttributeError."""
    names = _real_pyverbs("[n for n in dir(e) if n.startswith('_IBV_')]")
    assert names
    for name in names:
        with pytest.raises(errors.OutOfScopeError, match=name):
            getattr(enums, name)
    with pytest.raises(AttributeError) as e:
        enums.no_such_name  # noqa: B018
    assert not isinstance(e.value, errors.OutOfScopeError)

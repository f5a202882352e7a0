"""placement/_cpus.py's fallbacks, on small hand-written CPU trees (issue 41: the
mutants of ``make mutation`` that the generated hosts left alive, since those always
write every file).

The tree: 4 online CPUs in one package, two physical cores (SMT siblings 0,2 and 1,3),
one L2 per core and one L3 for all, as the kernel lays out ``devices/system/cpu`` and
``devices/system/node`` (with the entries beside ``cpuN``/``nodeN`` that are no CPU or
node: ``cpufreq``, ``possible``, ``power``, a cache directory's ``uevent``).  Each test
takes files away or spoils them and checks the values that ``read_cpus`` gives then.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sysverbs.placement import read_cpus
from sysverbs.placement._cpus import CpuTopology

ALL = frozenset(range(4))
SIBLINGS = {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"}


def _cpu_files(cpu: int) -> dict[str, str]:
    topo = f"cpu/cpu{cpu}/topology/"
    cache = f"cpu/cpu{cpu}/cache/"
    files = {topo + "physical_package_id": "0", topo + "package_cpus_list": "0-3",
             topo + "core_siblings_list": "0-3", topo + "thread_siblings_list": SIBLINGS[cpu],
             cache + "uevent": ""}
    for index, (kind, level, shared) in enumerate([
            ("Data", "1", str(cpu)), ("Instruction", "1", str(cpu)),
            ("Unified", "2", SIBLINGS[cpu]), ("Unified", "3", "0-3")]):
        files |= {f"{cache}index{index}/type": kind, f"{cache}index{index}/level": level,
                  f"{cache}index{index}/shared_cpu_list": shared}
    return files


def _tree(tmp_path: Path, drop: tuple[str, ...] = (), **change: str) -> bytes:
    """The host, without the files ``drop`` names, with ``change``'s contents (keys:
    paths below devices/system with ``/`` as ``__``)."""
    files = {"cpu/online": "0-3", "cpu/possible": "0-3", "cpu/cpufreq/boost": "1",
             "node/possible": "0-1", "node/has_memory": "0",
             "node/node0/cpulist": "0-3", "node/node0/distance": "10 20",
             "node/node0/meminfo": "Node 0 MemTotal:       65536000 kB",
             "node/node1/cpulist": "", "node/node1/distance": "20 10",
             "node/node1/meminfo": "Node 1 MemTotal:              0 kB",
             "node/power/async": "disabled"}
    for cpu in range(4):
        files |= _cpu_files(cpu)
    files |= {k.replace("__", "/"): v for k, v in change.items()}
    base = tmp_path / "sys" / "devices" / "system"
    for name, text in files.items():
        if name in drop:
            continue
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(text + "\n")
    return os.fsencode(tmp_path / "sys")


def test_the_whole_tree(tmp_path: Path) -> None:
    topo = read_cpus(_tree(tmp_path))
    assert topo.online == ALL
    assert dict(topo.package) == dict.fromkeys(ALL, 0)
    assert dict(topo.core) == {0: 0, 1: 1, 2: 0, 3: 1}
    assert (topo.llc_level, dict(topo.llc)) == (3, dict.fromkeys(ALL, 0))
    assert dict(topo.nodes) == {0: ALL, 1: frozenset()}
    assert topo.memory == {0}
    assert dict(topo.distance) == {(0, 0): 10, (0, 1): 20, (1, 0): 20, (1, 1): 10}
    assert topo.problems == ()
    assert [topo.node_of_cpu(c) for c in (0, 3, 4)] == [0, 0, None]


@pytest.mark.parametrize(("drop", "package"), [
    ((), dict.fromkeys(ALL, 0)),  # package_cpus_list
    (("cpu/cpu0/topology/package_cpus_list",), dict.fromkeys(ALL, 0)),  # core_siblings_list
    (("cpu/cpu0/topology/package_cpus_list", "cpu/cpu0/topology/core_siblings_list"), {0: 0}),
])
def test_one_package_read_covers_the_cpus_its_list_names(
        tmp_path: Path, drop: tuple[str, ...], package: dict[int, int]) -> None:
    """The CPUs that cpu0's package_cpus_list (else core_siblings_list, its older name)
    names take cpu0's package without a read of their own: here only cpu0 has a
    physical_package_id; with neither list, cpu0 alone has a package."""
    drop += tuple(f"cpu/cpu{c}/topology/physical_package_id" for c in (1, 2, 3))
    assert dict(read_cpus(_tree(tmp_path, drop)).package) == package


def test_an_offline_cpu_takes_nothing_from_the_lists(tmp_path: Path) -> None:
    """cpu3 offline: named by the package, thread-sibling and cache lists of the others,
    it has no package, core or cache; its node has the online CPUs only."""
    topo = read_cpus(_tree(tmp_path, cpu__online="0-2"))
    assert topo.online == {0, 1, 2}
    assert dict(topo.package) == dict.fromkeys((0, 1, 2), 0)
    assert dict(topo.core) == {0: 0, 1: 1, 2: 0}
    assert dict(topo.llc) == dict.fromkeys((0, 1, 2), 0)
    assert dict(topo.nodes) == {0: {0, 1, 2}, 1: frozenset()}


def test_without_an_online_list_every_cpu_directory_is_online(tmp_path: Path) -> None:
    topo = read_cpus(_tree(tmp_path, ("cpu/online",)))
    assert topo.online == ALL and dict(topo.package) == dict.fromkeys(ALL, 0)


@pytest.mark.parametrize("siblings", [None, ""])
def test_a_cpu_without_thread_siblings_is_its_own_core(tmp_path: Path,
                                                       siblings: str | None) -> None:
    """cpu1 and cpu3 without (or with an empty) thread_siblings_list: each is its own
    core, and each is a problem."""
    names = ("cpu/cpu1/topology/thread_siblings_list", "cpu/cpu3/topology/thread_siblings_list")
    if siblings is None:
        sysfs = _tree(tmp_path, names)
    else:
        sysfs = _tree(tmp_path, **{n.replace("/", "__"): siblings for n in names})
    topo = read_cpus(sysfs)
    assert dict(topo.core) == {0: 0, 1: 1, 2: 0, 3: 3}
    assert topo.problems == tuple(f"cpu{c}/topology/thread_siblings_list unreadable: its own "
                                  "core" for c in (1, 3))


def test_a_siblings_list_without_the_cpu_itself(tmp_path: Path) -> None:
    """cpu1's list names only cpu3: cpu1 still belongs to the core it keys (the lowest
    of the list and the CPU itself)."""
    topo = read_cpus(_tree(tmp_path, cpu__cpu1__topology__thread_siblings_list="3"))
    assert dict(topo.core) == {0: 0, 1: 1, 2: 0, 3: 1}


@pytest.mark.parametrize("spoil", ["level", "shared_cpu_list"])
def test_an_unreadable_cache_level_falls_back_to_the_next(tmp_path: Path, spoil: str) -> None:
    """The L3's level or shared_cpu_list unreadable on every CPU: the L2 (one per core)
    is the last-level cache, and the L3 of each CPU read is a problem (cpu2 and cpu3 are
    covered by cpu0's and cpu1's L2 lists, and not read)."""
    topo = read_cpus(_tree(tmp_path, tuple(f"cpu/cpu{c}/cache/index3/{spoil}" for c in ALL)))
    assert (topo.llc_level, dict(topo.llc)) == (2, {0: 0, 1: 1, 2: 0, 3: 1})
    assert topo.problems == ("cpu0/cache/index3 unreadable", "cpu1/cache/index3 unreadable")


def test_an_unreadable_cache_below_the_last_one(tmp_path: Path) -> None:
    """The L2's level unreadable: a problem, and the L3 after it is still the last."""
    topo = read_cpus(_tree(tmp_path, tuple(f"cpu/cpu{c}/cache/index2/level" for c in ALL)))
    assert (topo.llc_level, dict(topo.llc)) == (3, dict.fromkeys(ALL, 0))
    assert topo.problems == ("cpu0/cache/index2 unreadable",)


def test_instruction_and_typeless_caches_do_not_count(tmp_path: Path) -> None:
    """An Instruction cache, even of the highest level, is not the last-level cache; a
    cache directory without a type is passed over quietly, and so is a directory that is
    no ``indexN`` (before or after those)."""
    change = {f"cpu__cpu{c}__cache__index1__level": "4" for c in ALL}
    change |= {f"cpu__cpu{c}__cache__index1__shared_cpu_list": "0-3" for c in ALL}
    change |= {f"cpu__cpu{c}__cache__index9__level": "5" for c in ALL}
    change |= {f"cpu__cpu{c}__cache__indexes__type": "Unified" for c in ALL}
    change |= {f"cpu__cpu{c}__cache__indexes__level": "6" for c in ALL}
    change |= {f"cpu__cpu{c}__cache__indexes__shared_cpu_list": "0-3" for c in ALL}
    change |= {f"cpu__cpu{c}__cache__cache9__{f}": v for c in ALL  # before the index*
               for f, v in (("type", "Unified"), ("level", "1"), ("shared_cpu_list", "0-3"))}
    drop = tuple(f"cpu/cpu{c}/cache/index3/type" for c in ALL)
    topo = read_cpus(_tree(tmp_path, drop, **change))
    assert (topo.llc_level, dict(topo.llc)) == (2, {0: 0, 1: 1, 2: 0, 3: 1})
    assert topo.problems == ()


def test_a_malformed_node_cpulist(tmp_path: Path) -> None:
    """A cpulist that is no CPU list is a problem and no CPU; an empty one (a CPU-less
    node's) is none."""
    topo = read_cpus(_tree(tmp_path, node__node0__cpulist="3-1"))
    assert dict(topo.nodes) == {0: frozenset(), 1: frozenset()}
    assert topo.problems == ("node0/cpulist unreadable",)
    assert topo.node_of_cpu(0) is None


@pytest.mark.parametrize(("row", "distance"), [
    ("10 20 30", {(1, 0): 20, (1, 1): 10}),  # one entry too many
    ("10 2x", {(1, 0): 20, (1, 1): 10}),  # not a number
])
def test_a_distance_row_that_is_not_one_number_per_node(
        tmp_path: Path, row: str, distance: dict[tuple[int, int], int]) -> None:
    topo = read_cpus(_tree(tmp_path, node__node0__distance=row))
    assert dict(topo.distance) == distance
    assert topo.problems == ("node0/distance unreadable or not one entry per node",)


def test_one_node_needs_no_distance(tmp_path: Path) -> None:
    drop = ("node/node0/distance", "node/node1/cpulist", "node/node1/distance",
            "node/node1/meminfo")
    topo = read_cpus(_tree(tmp_path, drop))
    assert (dict(topo.nodes), dict(topo.distance), topo.problems) == ({0: ALL}, {}, ())


@pytest.mark.parametrize(("kb", "memory"), [("1", {0, 1}), ("0", {0})])
def test_without_has_memory_meminfo_decides(tmp_path: Path, kb: str, memory: set[int]) -> None:
    """No has_memory: a node with any memory (1 kB) has memory, one of 0 kB has none."""
    meminfo = f"Node 1 MemTotal:       {kb} kB"
    topo = read_cpus(_tree(tmp_path, ("node/has_memory",), node__node1__meminfo=meminfo))
    assert topo.memory == memory


@pytest.mark.parametrize(("has_memory", "memory"), [("0-1", {0, 1}), ("0,5", {0}), ("", {0})])
def test_has_memory_names_only_the_nodes_there_are(tmp_path: Path, has_memory: str,
                                                   memory: set[int]) -> None:
    """has_memory wins over meminfo (node1's MemTotal is 0 kB), but a node it names
    that has no directory is no node; an empty has_memory leaves it to meminfo."""
    topo = read_cpus(_tree(tmp_path, node__has_memory=has_memory))
    assert topo.memory == memory


def test_no_tree_at_all() -> None:
    """A path that cannot be a directory (a NUL in it) or is not one: nothing, no error."""
    empty = CpuTopology(frozenset(), {}, {}, {}, 0, {}, frozenset(), {}, ())
    for sysfs in (b"/nonexistent\0", b"/nonexistent"):
        topo = read_cpus(sysfs)
        assert [getattr(topo, f) for f in CpuTopology._fields] == \
            [getattr(empty, f) for f in CpuTopology._fields]

"""sysverbs.rdma_get_devices / rdma_free_devices against the REAL librdmacm
(docs/behaviour.md: librdmacm).

Both run the same plan on copies of the same tree, in private mount namespaces
(tests/oracle/harness.py), and must print the same results and the same stderr.
Opening a device for real needs a char device: as in spec experiment 22, the
``/dev/infiniband/uverbsN`` nodes are ``mknod c 1 3`` (/dev/null) with ``dev``
``1:3``, against which rxe's open, query_device and query_port succeed.  Plain-file
nodes make every open fail.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

import pytest

from tests import trees
from tests.oracle import harness

pytestmark = [pytest.mark.oracle, pytest.mark.usefixtures("librdmacm")]

PROBE = Path(__file__).resolve().parent / "oracle" / "rdmacm_probe.py"
OPTIONS = {"rdma_core": "44"}


@pytest.fixture(scope="module")
def librdmacm() -> None:
    import ctypes.util

    from tests.conftest import require

    require(
        None
        if ctypes.util.find_library("rdmacm")
        else "librdmacm is not installed (apt-get install librdmacm1)",
        "librdmacm oracle",
    )


def _guid(n: Optional[int]) -> Optional[str]:
    if n is None:
        return None
    h = f"{n:016x}"
    return ":".join(h[i : i + 4] for i in range(0, 16, 4)) + "\n"


def rxe_host(spec: Mapping[int, tuple[str, Optional[int], bool]], **kw: Any) -> trees.Tree:
    """uverbsN -> (ibdev name, GUID or None, openable): rxe devices whose /dev node is
    /dev/null (openable) or a plain file."""
    devs = [
        trees.rxe_dev(f"uverbs{n}", name, guid=_guid(guid), dev="1:3\n")
        for n, (name, guid, _) in spec.items()
    ]
    return trees.host(*devs, **kw)


def make_build(
    spec: Mapping[int, tuple[str, Optional[int], bool]],
    extra: Optional[trees.Extra | trees.Tree] = None,
    class_abi: bool = True,
) -> Any:
    def build(root: Path) -> None:
        trees.build(root, rxe_host(spec, extra=extra, class_abi=class_abi))
        for n, (_, _, openable) in spec.items():
            if openable:
                null_node(root / f"dev/infiniband/uverbs{n}")

    return build


def null_node(path: Path) -> None:
    if path.exists():
        path.unlink()
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))


def _ties_unordered(results: list[dict[str, Any]]) -> list[Any]:
    """The results with each run of equal GUIDs in a list of contexts taken as a set:
    librdmacm orders devices of equal GUID by their ``struct ibv_device`` address, which
    malloc decides (the module's documented difference); sysverbs assumes allocation
    order.  One CI run had malloc disagree (rxe_b before rxe_d, sysverbs rxe_d first)."""
    out: list[Any] = []
    for r in results:
        if "contexts" not in r:
            out.append(r)
            continue
        keyed = sorted((c["guid"], c["name"]) for c in r["contexts"])
        out.append({**r, "contexts": [c["guid"] for c in r["contexts"]], "by_guid": keyed})
    return out


def run_both(
    tmp: Path, build: Any, steps: list[dict[str, Any]], env: Optional[dict[str, str]] = None,
    ties_in_any_order: bool = False,
) -> list[dict[str, Any]]:
    real_src, ours_src, dst = harness.materialize_pair(tmp, build)
    out = []
    for impl, src in (("librdmacm", real_src), ("sysverbs", ours_src)):
        plan = {"root": str(dst), "steps": steps, "options": OPTIONS}
        out.append(
            harness.run_in_ns(
                src, dst, [sys.executable, str(PROBE), impl, json.dumps(plan)], env=env
            )
        )
    real, ours = out
    assert real.returncode == 0, real.stderr.decode(errors="replace")
    assert ours.returncode == 0, ours.stderr.decode(errors="replace")
    if ties_in_any_order:
        assert _ties_unordered(ours.results()) == _ties_unordered(real.results())
    else:
        assert ours.results() == real.results()
    assert ours.stderr == real.stderr
    return real.results()


def names(result: dict[str, Any]) -> list[str]:
    return [c["name"] for c in result["contexts"]]


SIX = {
    0: ("rxe_a", 5, True),
    1: ("rxe_b", 2, True),
    2: ("rxe_c", 9, True),
    3: ("rxe_d", 2, True),
    4: ("rxe_e", None, True),
    5: ("rxe_f", 0xFFFFFFFFFFFFFFFF, True),
}


def test_order_by_guid_with_ties(otmp: Path) -> None:
    """Spec experiment 22: ascending GUID; a missing GUID (0) first; equal GUIDs in the
    order of their ``struct ibv_device`` addresses (which malloc decides: compared as a
    set); the same contexts come back on the next call."""
    res = run_both(
        otmp,
        make_build(SIX),
        [
            {"op": "ibv_list"},
            {"op": "rdma_get"},
            {"op": "rdma_get"},
            {"op": "rdma_free", "list": 0},
            {"op": "rdma_free", "list": 1},
            {"op": "rdma_get"},
        ],
        env={"IBV_SHOW_WARNINGS": "1"},
        ties_in_any_order=True,
    )
    got = names(res[1])
    assert got[0] == "rxe_e" and got[-1] == "rxe_f" and got[3:5] == ["rxe_a", "rxe_c"]
    assert set(got[1:3]) == {"rxe_b", "rxe_d"}
    assert res[1]["contexts"] == res[2]["contexts"] == res[5]["contexts"]


def test_first_call_without_prior_ibv_list(otmp: Path) -> None:
    run_both(otmp, make_build(SIX), [{"op": "rdma_get"}, {"op": "ibv_list"}])


def test_plain_file_nodes_give_an_empty_list(otmp: Path) -> None:
    spec = {n: (name, guid, False) for n, (name, guid, _) in SIX.items()}
    res = run_both(otmp, make_build(spec), [{"op": "rdma_get"}, {"op": "rdma_get"}])
    assert res[0]["contexts"] == [] and res[1]["contexts"] == []


def test_dead_entries_stay_dead_until_recreated(otmp: Path) -> None:
    """A device whose open failed is never retried, even once its node works; a new
    ibv_device (its IB directory's mtime changed) is a new entry and is opened."""
    spec = {0: ("rxe_a", 1, True), 1: ("rxe_b", 2, False), 2: ("rxe_c", 3, True)}
    steps: list[dict[str, Any]] = [
        {"op": "rdma_get"},
        {"op": "remove", "path": "dev/infiniband/uverbs1"},
        {"op": "mknod", "path": "dev/infiniband/uverbs1", "major": 1, "minor": 3},
        {"op": "rdma_get"},
        {"op": "touch", "path": "sys/class/infiniband/rxe_b", "seconds": 5},
        {"op": "rdma_get"},
        {"op": "rdma_free", "list": 0},
        {"op": "rdma_free", "list": 1},
        {"op": "rdma_free", "list": 2},
        {"op": "rdma_get"},
    ]
    res = run_both(otmp, make_build(spec), steps)
    assert names(res[0]) == ["rxe_a", "rxe_c"]
    assert names(res[3]) == ["rxe_a", "rxe_c"]
    assert names(res[5]) == ["rxe_a", "rxe_b", "rxe_c"]


def test_later_insertions_go_before_equal_guids(otmp: Path) -> None:
    spec = {
        0: ("rxe_a", 7, True),
        1: ("rxe_b", 3, True),
        2: ("rxe_c", 7, True),
        3: ("rxe_d", 1, True),
    }
    hidden = ("uverbs2", "uverbs3")  # their class links appear later

    def build(root: Path) -> None:
        make_build(spec)(root)
        for n in hidden:
            (root / "sys/class/infiniband_verbs" / n).unlink()

    steps: list[dict[str, Any]] = [{"op": "rdma_get"}]
    for n in hidden:
        link = trees.paths(trees.rxe_dev(n, spec[int(n[-1])][0]))[f"sys/class/infiniband_verbs/{n}"]
        assert isinstance(link, trees.Link)
        steps.append(
            {"op": "symlink", "path": f"sys/class/infiniband_verbs/{n}", "target": link.target}
        )
    steps += [{"op": "rdma_get"}, {"op": "ibv_list"}, {"op": "rdma_get"}]
    res = run_both(otmp, build, steps)
    assert names(res[0]) == ["rxe_b", "rxe_a"]
    assert names(res[3]) == ["rxe_d", "rxe_b", "rxe_c", "rxe_a"]
    assert res[3]["contexts"] == res[5]["contexts"]


def test_vanished_devices_removed_or_kept_while_held(otmp: Path) -> None:
    spec = {0: ("rxe_a", 1, True), 1: ("rxe_b", 2, True), 2: ("rxe_c", 3, True)}
    steps: list[dict[str, Any]] = [
        {"op": "rdma_get"},
        {"op": "rdma_free", "list": 0},
        {"op": "remove", "path": "sys/class/infiniband_verbs/uverbs0"},
        {"op": "rdma_get"},  # rxe_a was not held: removed
        {"op": "remove", "path": "dev/infiniband/uverbs1"},
        {"op": "rdma_get"},  # rxe_b is held by list 1: dead, not listed
        {"op": "rdma_free", "list": 1},
        {"op": "rdma_get"},
        {"op": "ibv_list"},
    ]
    res = run_both(otmp, make_build(spec), steps)
    assert names(res[3]) == ["rxe_b", "rxe_c"]
    assert names(res[5]) == ["rxe_c"]
    assert names(res[7]) == ["rxe_c"]


def test_everything_vanishes_then_comes_back(otmp: Path) -> None:
    spec = {0: ("rxe_a", 1, True)}
    steps: list[dict[str, Any]] = [
        {"op": "rdma_get"},
        {
            "op": "rename",
            "path": "sys/class/infiniband_verbs/uverbs0",
            "to": "sys/class/infiniband_verbs/.hidden",
        },
        {"op": "rdma_get"},
        {
            "op": "rename",
            "path": "sys/class/infiniband_verbs/.hidden",
            "to": "sys/class/infiniband_verbs/uverbs0",
        },
        {"op": "rdma_get"},
    ]
    res = run_both(otmp, make_build(spec), steps)
    assert res[2]["errno"] == 19  # ENODEV
    assert names(res[4]) == ["rxe_a"]


@pytest.mark.parametrize(
    "files, expect",
    [
        ({}, "ok"),
        ({"misc": "4\n"}, "ok"),
        ({"misc": "3"}, "ok"),
        ({"misc": "4junk\n"}, "ok"),
        ({"misc": "5\n"}, 1),
        ({"misc": "junk\n"}, 1),
        ({"misc": "2\n"}, 1),
        ({"misc": "2\n", "ucma": "4\n"}, 1),  # the first readable file decides
        ({"ucma": "4\n"}, "ok"),
        ({"ucma": "5\n"}, 1),
        ({"misc": "123456789"}, "ok"),  # unreadable (8 bytes, no newline): 4
        ({"misc": "123456789", "ucma": "7\n"}, 1),
        ({"misc": "-1\n"}, 1),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else str(v),
)
def test_rdma_cm_abi(otmp: Path, files: dict[str, str], expect: Any) -> None:
    extra: trees.Extra = {}
    if "misc" in files:
        extra["sys/class/misc/rdma_cm/abi_version"] = files["misc"]
    if "ucma" in files:
        extra["sys/class/infiniband_ucma/abi_version"] = files["ucma"]
    res = run_both(
        otmp, make_build({0: ("rxe_a", 1, True)}, extra), [{"op": "rdma_get"}, {"op": "rdma_get"}]
    )
    if expect == "ok":
        assert names(res[0]) == ["rxe_a"]
    else:
        assert res[0]["errno"] == res[1]["errno"] == 1  # EPERM, and it stays


def test_abi_minus_one_is_read_again(otmp: Path) -> None:
    """An ABI that parses to -1 is 'not checked yet': the next call reads again."""
    extra: trees.Extra = {"sys/class/misc/rdma_cm/abi_version": "-1\n"}
    res = run_both(
        otmp,
        make_build({0: ("rxe_a", 1, True)}, extra),
        [
            {"op": "rdma_get"},
            {"op": "write", "path": "sys/class/misc/rdma_cm/abi_version", "data": b"4\n".hex()},
            {"op": "rdma_get"},
        ],
    )
    assert res[0]["errno"] == 1 and names(res[2]) == ["rxe_a"]


def test_rejected_abi_is_cached(otmp: Path) -> None:
    extra: trees.Extra = {"sys/class/misc/rdma_cm/abi_version": "5\n"}
    res = run_both(
        otmp,
        make_build({0: ("rxe_a", 1, True)}, extra),
        [
            {"op": "rdma_get"},
            {"op": "write", "path": "sys/class/misc/rdma_cm/abi_version", "data": b"4\n".hex()},
            {"op": "rdma_get"},
        ],
    )
    assert res[0]["errno"] == res[2]["errno"] == 1


def test_no_devices_is_enodev(otmp: Path) -> None:
    res = run_both(otmp, make_build({}), [{"op": "rdma_get"}, {"op": "ibv_list"}])
    assert res[0]["errno"] == 19 and res[1]["result"] == []


def test_missing_class_is_enodev_not_enosys(otmp: Path) -> None:
    def build(root: Path) -> None:
        (root / "sys").mkdir()
        (root / "dev/infiniband").mkdir(parents=True)

    res = run_both(otmp, build, [{"op": "rdma_get"}, {"op": "ibv_list"}])
    assert res[0]["errno"] == 19 and res[1]["result"] == 38


def test_libibverbs_fatal_then_ok(otmp: Path) -> None:
    """Class ABI 7: libibverbs fails once (Fatal, ENODEV here), then passes."""
    extra: trees.Extra = {"sys/class/infiniband_verbs/abi_version": "7\n"}
    res = run_both(
        otmp, make_build({0: ("rxe_a", 1, True)}, extra), [{"op": "rdma_get"}, {"op": "rdma_get"}]
    )
    assert res[0]["errno"] == 19 and names(res[1]) == ["rxe_a"]


def test_show_warnings_twice_on_first_call(otmp: Path) -> None:
    spec = {0: ("rxe_a", 1, True)}
    extra = trees.rdma_dev("uverbs7", "usnic_0", modalias="pci:v00001137d00000043sv*\n")
    res = run_both(
        otmp,
        make_build(spec, extra),
        [{"op": "rdma_get"}, {"op": "rdma_get"}],
        env={"IBV_SHOW_WARNINGS": "1"},
    )
    assert names(res[0]) == ["rxe_a"]


def test_builtin_fixture_hosts(otmp: Path) -> None:
    """A realistic fixture (plain-file nodes): every open fails, so an empty list."""
    from sysverbs import testing

    res = run_both(
        otmp,
        lambda root: testing.materialize(testing.fixture_path("dgx-demo"), root),
        [{"op": "rdma_get"}],
    )
    assert res[0]["contexts"] == []

"""The static oracle (tests/oracle/static.py, static_probe.c) and the facts of the real
STATIC libibverbs/librdmacm (rdma-core 44, Debian 12's libibverbs-dev) that need no
sysverbs option: the probe against the real ``ibv_devices`` and the dynamic library,
what the build refuses and what it silently drops, the driver order of a static
program (the link order, not the define's order), what a static program ignores.
The findings, each with the test that shows it: docs/static-linking.md.
tests/test_static_oracle.py compares sysverbs' ``static_providers`` with it.

CPython only, like the other oracle files (the Makefile leaves it out of the pypy3 run).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Optional, Union

import pytest

from tests import trees
from tests.conftest import require
from tests.fuzz.model import Case, Dir, Entry, Fifo, Link
from tests.fuzz.regressions import rxe_entries
from tests.fuzz.runner import Runner
from tests.oracle import harness, static
from tests.trees import rdma_dev, rxe_dev

pytestmark = [pytest.mark.oracle, pytest.mark.usefixtures("static_ready")]

SHOW = {"IBV_SHOW_WARNINGS": "1"}
NOBODY = "--reuid=65534 --regid=65534 --clear-groups"
MLX4_MODALIAS = "pci:v000015B3d00001003sv000015B3sd00000006bc02sc00i00\n"
PVRDMA_MODALIAS = "pci:v000015ADd00000820sv000015ADsd00000820bc02sc00i00\n"
#: Every provider, in the order of the archives on pkg-config's link line.
LINK_ORDER = ("bnxt_re", "cxgb4", "efa", "erdma", "hns", "irdma", "mana", "mlx4", "mlx5",
              "mthca", "ocrdma", "qedr", "vmw_pvrdma", "hfi1verbs", "ipathverbs", "rxe", "siw")


@pytest.fixture(scope="module")
def static_ready() -> None:
    require(static.unavailable_reason(), "static libibverbs oracle")


def pair(tmp: Path, tree: trees.Tree, *,
         null_nodes: tuple[int, ...] = ()) -> tuple[Path, Path, Path]:
    """Two copies of ``tree`` (for the static probe and for its counterpart) and the
    mount point; ``/dev/infiniband/uverbsN`` of ``null_nodes`` are /dev/null."""
    def build(root: Path) -> None:
        trees.build(root, tree)
        for n in null_nodes:
            node = root / f"dev/infiniband/uverbs{n}"
            node.unlink()
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return harness.materialize_pair(tmp, build)


def run_static(defines: Optional[str], src: Path, dst: Path, ops: list[str],
               **kw: Any) -> harness.Run:
    run = static.run(static.build(defines), src, dst, ops, **kw)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    return run


def names(run: harness.Run, step: int = 0) -> list[str]:
    return [d["name"] for d in run.results()[step]["devices"]]


def abi_warning(driver: str, abi: int, lo: int, hi: int, dst: Path, dev: str) -> bytes:
    return (f"libibverbs: Warning: Driver {driver} does not support the kernel ABI of {abi} "
            f"(supports {lo} to {hi}) for device {dst}/sys/class/infiniband/{dev}\n").encode()


def no_driver(dev: str) -> bytes:
    return f"libibverbs: Warning: no userspace device-specific driver found for {dev}\n".encode()


# -- the harness ----------------------------------------------------------------------------------


def test_build_is_cached_per_variant() -> None:
    first = static.build("mlx5")
    assert static.build("mlx5") == first
    assert first.parent.parent == static.cache_root()
    assert len(first.parent.name) == 64 and int(first.parent.name, 16) >= 0
    assert "-DRDMA_STATIC_PROVIDERS=mlx5" in (first.parent / "command").read_text()
    others = {static.build(None), static.build("mlx4,mlx5"), static.build("mlx5,mlx4"),
              static.build("mlx5", no_ibv_call=True)}
    assert first not in others and len(others) == 4


#: Names whose bytes test the probe's JSON strings against probe.py's (os.fsdecode,
#: json.dumps): not UTF-8, UTF-8 of 2, 3 and 4 bytes, a quote, a backslash, a tab.
ODD_NAMES: tuple[Union[str, bytes], ...] = (
    b"mlx5_\xff", "mlx5_\u00e9", "mlx5_\u20ac", "mlx5_\U0001f600", b"mlx5_\xed\xa0\x80",
    b"mlx5_\xc0\xaf", 'mlx5_"q', "mlx5_\\b", "mlx5_\tt", b"mlx5_\xe2\x82",
)


def test_list_equals_the_dynamic_library(otmp: Path) -> None:
    """``all`` lists what the dynamic libibverbs lists where no device is claimed by
    two providers: every field, the order, the labels across calls, the bytes of odd
    names (the probe's JSON is probe.py's)."""
    devs = [rdma_dev(f"uverbs{i}", name, pci=f"0000:{i + 16:02x}:00.0")
            for i, name in enumerate(ODD_NAMES)]
    devs.append(rxe_dev("uverbs20", "rxe0", guid="0000:0000:0000:0001\n"))
    devs.append(rdma_dev("uverbs21", "mlx4_0", pci="0000:30:00.0", modalias=MLX4_MODALIAS,
                         abi="4\n", guid=None, node_type="4\n"))
    devs.append(rdma_dev("uverbs22", "efa_0", pci="0000:31:00.0", modalias=None))
    dyn_src, st_src, dst = pair(otmp, trees.host(*devs))
    ops = ["list", "list", "free", "0", "list"]
    ours = run_static("all", st_src, dst, ops, env=SHOW)
    real = harness.run_impl("libibverbs", dyn_src, dst, static.plan_steps(ops), env=SHOW)
    assert real.returncode == 0
    assert ours.results() == real.results()
    assert ours.stderr == real.stderr == no_driver("efa_0") * 3  # each call says it
    assert len(names(real)) == len(devs) - 1


def test_tree_changes_and_open_equal_the_dynamic_probe(otmp: Path) -> None:
    """Without ``--fuzz`` the probe runs tests/oracle/probe.py's steps as probe.py does:
    every tree change (a device added with mkdir, write and symlink, then touched,
    renamed, chmod, utime, mknod, a tree removed), ``open`` and the fork calls; the
    results equal the dynamic library's."""
    tree = trees.host(rxe_dev("uverbs0", "rxe0"), rdma_dev("uverbs1", "mlx5_0"))
    dyn_src, st_src, dst = pair(otmp, tree)
    dev = "sys/devices/virtual/rxe9"
    ops = ["list", "mkdir", f"{dev}/uv", "mkdir", f"{dev}/ib/", "write", f"{dev}/uv/ibdev",
           b"rxe9\n".hex(), "write", f"{dev}/uv/dev", b"231:9\n".hex(), "write",
           f"{dev}/uv/abi_version", b"2\n".hex(), "symlink",
           "sys/class/infiniband_verbs/uverbs9", f"../../../{dev}/uv", "symlink",
           "sys/class/infiniband/rxe9", f"../../../{dev}/ib", "write", "dev/infiniband/uverbs9",
           "", "list", "open", "1", "0", "open", "1", "2", "touch", "sys/class/infiniband/rxe0",
           "5", "utime", "sys/class/infiniband/rxe9", "sys/class/infiniband/rxe0", "chmod",
           f"{dev}/uv/dev", "600", "mknod", "dev/infiniband/uverbs7", "1", "3", "rename",
           "sys/class/infiniband_verbs/uverbs1", "sys/class/infiniband_verbs/uverbs7",
           "remove", dev, "list", "fork_init", "fork_status"]
    ours = run_static("all", st_src, dst, ops)
    real = harness.run_impl("libibverbs", dyn_src, dst, static.plan_steps(ops))
    assert real.returncode == 0, real.stderr
    assert (ours.results(), ours.stderr) == (real.results(), real.stderr)
    lists = [sorted(d["dev_name"] + " " + d["name"] for d in r["devices"])
             for r in ours.results() if r["op"] == "list"]
    assert lists == [["uverbs0 rxe0", "uverbs1 mlx5_0"],
                     ["uverbs0 rxe0", "uverbs1 mlx5_0", "uverbs9 rxe9"],
                     ["uverbs0 rxe0", "uverbs7 mlx5_0"]]
    assert [r["errno"] for r in ours.results() if r["op"] == "open"] == [2, 2]


def open_case(static_value: Optional[str]) -> Case:
    """rxe devices whose ``/dev`` nodes are what the fuzzer makes of them (a regular file,
    missing, a directory, a dangling link, a loop, a link to ``.``, a FIFO), with their
    ``dev`` and with 0:0, opened before and after a node is removed, before and after
    their list is freed."""
    nodes: list[Optional[Entry]] = [b"", None, Dir(), Link("/nonexistent"), Link("uverbs4"),
                                    Link("."), Fifo(), b"", Dir(), Fifo()]
    tree: dict[str, Entry] = {"sys/class/infiniband_verbs": Dir(), "sys/class/infiniband": Dir(),
                              "sys/class/infiniband_verbs/abi_version": b"6\n"}
    for n, node in enumerate(nodes):
        tree.update(rxe_entries(n, f"rxe{n}"))
        if n >= 7:
            tree[f"sys/devices/d{n}/uv/dev"] = b"0:0\n"
        if node is None:
            del tree[f"dev/infiniband/uverbs{n}"]
        else:
            tree[f"dev/infiniband/uverbs{n}"] = node
    opens = [{"op": "open", "list": 0, "device": i} for i in range(len(nodes) + 1)]
    steps = [{"op": "list"}, *opens, {"op": "remove", "path": "dev/infiniband/uverbs0"},
             {"op": "list"}, {"op": "open", "list": 1, "device": 0}, {"op": "free", "list": 0},
             *opens[:1], {"op": "open", "list": 2, "device": 0}]
    return Case(tree=tree, steps=steps, static=static_value)


def test_open_equals_the_dynamic_library() -> None:
    """``--fuzz``'s ``open`` (tests/fuzz/probe.py's rules): the static library's
    ibv_open_device fails as the dynamic one does on the fuzzer's /dev nodes, errno
    for errno (null where it leaves errno alone), and both equal sysverbs."""
    with Runner() as runner:
        dynamic = runner.run(open_case(None))
        linked = runner.run(open_case("all"))
    assert dynamic.differences() == [] and linked.differences() == []
    assert linked.real.stdout == dynamic.real.stdout
    got = [r.get("errno", "skipped") for r in linked.real.results() if r["op"] == "open"]
    # null: a node that is no char device with dev 0:0; EISDIR, ENOENT (the list's
    # order, so which is which, is the work directory's readdir order)
    assert set(got[:-2]) == {None, 21, 2} and got[-2:] == ["skipped", "skipped"]


def test_devices_is_ibv_devices(otmp: Path) -> None:
    """The probe's ``devices`` prints what /usr/bin/ibv_devices prints, byte for byte,
    on a tree where both list the same devices, on an empty one, and where there is
    no class directory (perror's line, exit status 1)."""
    tree = trees.host(
        rdma_dev("uverbs0", "mlx5_0"),
        rxe_dev("uverbs1", "rxe_with_a_name_of_30_chars_xx", guid="0000:0000:0000:00ff\n"),
        rdma_dev("uverbs2", "mlx5_1", pci="0000:08:00.0", guid=None),
    )
    dyn_src, st_src, dst = pair(otmp / "a", tree)
    ours = static.run(static.build("all"), st_src, dst, ["devices"])
    real = harness.run_in_ns(dyn_src, dst, ["/usr/bin/ibv_devices"])
    assert (ours.returncode, ours.stdout, ours.stderr) == (real.returncode, real.stdout,
                                                          real.stderr)
    assert real.stdout.startswith("    device          \t   node GUID\n"
                                  "    ------          \t----------------\n")
    assert "    rxe_with_a_name_of_30_chars_xx\t00000000000000ff\n" in real.stdout
    assert len(real.stdout.splitlines()) == 5
    dyn_src, st_src, dst = pair(otmp / "b", trees.CLASS_ABI)
    for sysfs in (None, str(dst / "nothing")):
        ours = static.run(static.build(None), st_src, dst, ["devices"], sysfs_path=sysfs)
        real = harness.run_in_ns(dyn_src, dst, ["/usr/bin/ibv_devices"], sysfs_path=sysfs)
        assert (ours.returncode, ours.stdout, ours.stderr) == (real.returncode, real.stdout,
                                                              real.stderr)
    assert real.returncode == 1
    assert real.stderr == b"Failed to get IB devices list: Function not implemented\n"


# -- what the build takes ----------------------------------------------------------------------


@pytest.mark.parametrize("defines,missing", [
    ("foo", "foo"), ("", ""), ("pvrdma", "pvrdma"), ("MLX5", "MLX5"), ("mlx5,foo", "foo"),
    ("1", "1"),
])
def test_a_name_not_a_provider_does_not_compile(defines: str, missing: str) -> None:
    """Every name becomes ``&verbs_provider_<name>``: one that verbs.h does not declare
    is a compile error (the empty define too; the ops name ``pvrdma`` is not the
    provider name ``vmw_pvrdma``)."""
    err = static.build_error(defines)
    assert f"error: 'verbs_provider_{missing}' undeclared (first use in this function)" in err
    with pytest.raises(static.StaticBuildError, match=f"verbs_provider_{missing}'"):
        static.build(defines)


@pytest.mark.parametrize("defines", [
    "none", "all", "mlx4, mlx5", "mlx5,mlx5", "all,mlx5", *LINK_ORDER,
    ",".join(["none"] * 19 + ["foo"]),
])
def test_what_compiles(defines: str) -> None:
    """Every provider of the link line, ``all``, ``none``, spaces, repeats; a 20th name
    is not compiled at all (verbs.h's macro has 19 slots), even one that is no provider."""
    assert static.build_error(defines) == ""


def test_names_past_the_nineteenth_are_dropped(otmp: Path) -> None:
    tree = trees.host(rdma_dev("uverbs0", "mlx4_0", modalias=MLX4_MODALIAS, abi="4\n"))
    _, src, dst = pair(otmp, tree)
    kept = run_static(",".join(["none"] * 18 + ["mlx4"]), src, dst, ["list"], env=SHOW)
    dropped = run_static(",".join(["none"] * 19 + ["mlx4"]), src, dst, ["list"], env=SHOW)
    assert (names(kept), kept.stderr) == (["mlx4_0"], b"")
    assert (names(dropped), dropped.stderr) == ([], no_driver("mlx4_0"))


@pytest.mark.parametrize("defines", [None, "none"])
def test_no_provider_lists_nothing(otmp: Path, defines: Optional[str]) -> None:
    """No define (or ``none``): no provider is linked, the list is empty, and each call
    says so for every device with IBV_SHOW_WARNINGS (nothing without it)."""
    tree = trees.host(rdma_dev("uverbs0", "mlx5_0"), rxe_dev("uverbs1", "rxe0"))
    _, src, dst = pair(otmp, tree)
    quiet = run_static(defines, src, dst, ["list", "list"])
    shown = run_static(defines, src, dst, ["list", "list"], env=SHOW)
    assert quiet.results() == shown.results() == [{"op": "list", "devices": []}] * 2
    assert quiet.stderr == b""
    assert sorted(shown.stderr.splitlines(keepends=True)) == sorted(
        [no_driver("mlx5_0"), no_driver("rxe0")] * 2)


# -- the driver order: the link order -------------------------------------------------------


@pytest.mark.parametrize("pci,first,abi,lo,hi", [
    (trees.MLX5_MODALIAS, "mlx5", 2, 1, 1),
    (MLX4_MODALIAS, "mlx4", 1, 2, 4),
    (PVRDMA_MODALIAS, "vmw_pvrdma", 2, 3, 3),
])
def test_link_order_not_define_order(otmp: Path, pci: str, first: str, abi: int, lo: int,
                                     hi: int) -> None:
    """A device named rxe* (rxe's name entry) with a PCI provider's modalias and an ABI
    only rxe supports: the PCI provider, before rxe on the link line, is tried first in
    both orders of the define (its ABI warning, then rxe takes the device).  The dynamic
    library's order (Debian's) tries rxe before mlx5 and pvrdma: no warning there."""
    tree = trees.host(rdma_dev("uverbs0", "rxe_x", modalias=pci, abi=f"{abi}\n"))
    dyn_src, src, dst = pair(otmp, tree)
    ops_name = "pvrdma" if first == "vmw_pvrdma" else first
    warning = abi_warning(ops_name, abi, lo, hi, dst, "rxe_x")
    for defines in (f"{first},rxe", f"rxe,{first}"):
        run = run_static(defines, src, dst, ["list"])
        assert (names(run), run.stderr) == (["rxe_x"], warning), defines
    real = harness.run_impl("libibverbs", dyn_src, dst, [{"op": "list"}])
    assert [d["name"] for d in real.results()[0]["devices"]] == ["rxe_x"]
    assert real.stderr == (warning if first == "mlx4" else b"")


# -- what a static program ignores, what it still says -----------------------------------------


@pytest.mark.parametrize("env", [
    {"RDMAV_DRIVERS": "rxe"}, {"IBV_DRIVERS": "/nonexistent/libfoo"},
    {"RDMAV_DRIVERS": "/usr/lib/x86_64-linux-gnu/libibverbs/librxe"}, {"config": "1"},
])
def test_config_and_driver_variables_change_nothing(otmp: Path, env: dict[str, str]) -> None:
    tree = trees.host(rdma_dev("uverbs0", "mlx5_0"), rxe_dev("uverbs1", "rxe0"))
    _, src, dst = pair(otmp, tree)
    conf = otmp / "conf"
    conf.mkdir()
    (conf / "rxe.driver").write_text("driver rxe\nDriver efa\nfoo bar\n")
    (conf / "dangling.driver").symlink_to("/nonexistent/x")
    kw: dict[str, Any] = {"config_dir": conf} if env.pop("config", None) else {}
    base = run_static("mlx5", src, dst, ["list"], env=SHOW)
    run = run_static("mlx5", src, dst, ["list"], env={**SHOW, **env}, **kw)
    assert (run.results(), run.stderr) == (base.results(), base.stderr)
    assert (names(run), run.stderr) == (["mlx5_0"], no_driver("rxe0"))


@pytest.mark.parametrize("memlock", [32768, 33792])
def test_memlock_warning_as_user(otmp: Path, memlock: int) -> None:
    tree = trees.host(rdma_dev("uverbs0", "mlx5_0"))
    _, src, dst = pair(otmp, tree)
    run = run_static("mlx5", src, dst, ["list", "list"], memlock=memlock, setpriv=NOBODY)
    assert names(run, 1) == ["mlx5_0"]
    expect = (b"libibverbs: Warning: RLIMIT_MEMLOCK is 32768 bytes.\n"
              b"    This will severely limit memory registrations.\n")
    assert run.stderr == (expect if memlock == 32768 else b"")


def test_setuid_ignores_sysfs_path(otmp: Path) -> None:
    tree = trees.host(rdma_dev("uverbs0", "mlx5_0"))
    _, src, dst = pair(otmp, tree)
    run = run_static("mlx5", src, dst, ["list"], setpriv="--ruid=65534")
    assert run.results() == [{"op": "list", "errno": 38}]


# -- librdmacm in a static program --------------------------------------------------------------


def test_rdma_get_devices_needs_the_programs_define(otmp: Path) -> None:
    """librdmacm.a calls the plain ibv_get_device_list: the providers are those the
    program's own ibv_get_device_list linked in.  A program that never calls it
    (PROBE_NO_IBV_CALL) links none, whatever it defines: rdma_get_devices fails with
    ENODEV, each call saying for every device that no driver was found."""
    tree = trees.host(rxe_dev("uverbs0", "rxe_b", guid="0000:0000:0000:0030\n", dev="1:3\n"),
                      rxe_dev("uverbs1", "rxe_a", guid="0000:0000:0000:0010\n", dev="1:3\n"))
    _, src, dst = pair(otmp, tree, null_nodes=(0, 1))
    listed = run_static("rxe", src, dst, ["rdma_get", "list", "rdma_get"], env=SHOW)
    contexts = listed.results()[0]["contexts"]
    assert [c["name"] for c in contexts] == ["rxe_a", "rxe_b"]
    assert listed.results()[2]["contexts"] == contexts
    assert listed.stderr == b""
    for defines in ("rxe", None):
        run = static.run(static.build(defines, no_ibv_call=True), src, dst,
                         ["rdma_get", "rdma_get"], env=SHOW)
        assert run.returncode == 0
        assert run.results() == [{"op": "rdma_get", "errno": 19}] * 2
        assert sorted(run.stderr.splitlines(keepends=True)) == sorted(
            [no_driver("rxe_a"), no_driver("rxe_b")] * 2)


# -- the second driver pass ---------------------------------------------------------------------


@pytest.mark.parametrize("stash", [False, True])
def test_second_pass_repeats_the_abi_warning(otmp: Path, stash: bool) -> None:
    """ibverbs_get_device_list tries the drivers again over the devices left unclaimed,
    once per process, at the first call that leaves one (the dynamic library loads its
    providers in between, and its first pass has none); the static program tries the
    same providers twice, so that call prints the ABI warning twice, every later call
    once.  A call that leaves nothing unclaimed does not count (``stash``: rxe0 appears
    after the first call)."""
    tree = trees.host(rdma_dev("uverbs1", "mlx5_0", pci="0000:08:00.0"),
                      rxe_dev("uverbs9", "rxe0", abi="3\n"))
    dyn_src, src, dst = pair(otmp, tree)
    ops = ["list", "list", "list"]
    if stash:
        for root in (dyn_src, src):
            (root / "sys/class/stash").mkdir()
            (root / "sys/class/infiniband_verbs/uverbs9").rename(root / "sys/class/stash/uverbs9")
        ops[1:1] = ["rename", "sys/class/stash/uverbs9", "sys/class/infiniband_verbs/uverbs9"]
    warning = abi_warning("rxe", 3, 1, 2, dst, "rxe0")
    run = run_static("rxe,mlx5", src, dst, ops, env=SHOW)
    per_call = [warning * 2 + no_driver("rxe0"), warning + no_driver("rxe0")]
    assert run.stderr == b"".join(per_call if stash else [per_call[0], *per_call[1:] * 2])
    steps = static.plan_steps(ops)
    assert [names(run, i) for i, st in enumerate(steps) if st["op"] == "list"] == [["mlx5_0"]] * 3
    # the dynamic library: one pass with providers, so once per call
    real = harness.run_impl("libibverbs", dyn_src, dst, steps, env=SHOW)
    assert real.stderr == (warning + no_driver("rxe0")) * (2 if stash else 3)

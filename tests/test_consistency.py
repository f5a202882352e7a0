"""No two commands disagree (issue 40, "What to deliver" 3): on every bundled fixture,
on generated PCI trees and on corrupted fixture trees, for every local rank,

* ``env``'s status and warnings equal ``nccl check``'s on the NCCL_IB_HCA ``env`` wrote
  (in the environment it wrote: its NCCL_IB_GID_INDEX, NCCL_IB_ADDR_FAMILY);
* ``topo --assign``, ``env`` and ``run`` name the same NICs, every rank of a host one
  link layer, and ``topo``, ``topo --assign`` and ``run`` the same NUMA node;
* ``doctor``'s usable equals ``metrics``' and ``nfd``'s, device by device;
* ``metrics``' NCCL transport equals ``nfd``'s equals what ``nccl check`` predicts;
* the GID verdict of each RoCE port NCCL would use is one: ``nccl check``'s ``gid-*``
  warnings are ``metrics``' ``sysverbs_nccl_gid_problem`` series, port by port, and
  ``nfd``'s ``nccl.problem.*`` labels;
* a user's NCCL_IB_HCA is kept, and judged, alike by ``env`` and ``run``; the ranks the
  host's one link layer costs their nearest NIC are named by ``topo --assign``, ``env``
  and ``run`` alike.

Everything is compared through the commands' public outputs (``--json``), each command
run in-process through ``sysverbs.cli.main`` (no process per case).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Optional
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sysverbs.placement import RANK_VARIABLES
from sysverbs.testing import fixture_names
from sysverbs.testing.cache import cached_fixture
from tests.conftest import fast_tmpdir
from tests.fuzz.pci_trees import TreeSpec, pci_trees, render
from tests.fuzz.profiles import fuzz_settings
from tests.inprocess import run_main

#: ``env``'s own warnings, about what it writes besides NCCL_IB_HCA (NCCL_IB_GID_INDEX,
#: UCX_NET_DEVICES, names no list can hold): ``nccl check`` has no word on them.
ENV_ONLY = ("need different GID indexes", "UCX accepts at most", "cannot be written in a "
            "device list", "is not ACTIVE", "NCCL reads only the first",
            "longer than 63 characters")
NCCL_PREFIX = "sysverbs.feature.node.kubernetes.io/"


def _clean_environ() -> dict[str, str]:
    """os.environ without what would steer a command (NCCL, UCX, ranks, visible GPUs)."""
    drop = {*RANK_VARIABLES, "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}
    return {k: v for k, v in os.environ.items()
            if k not in drop and not k.startswith(("NCCL_", "UCX_"))}


def run_cli(args: Sequence[str], environ: Optional[dict[str, str]] = None
            ) -> tuple[int, str, str]:
    """``sysverbs ARGS`` in-process (tests/inprocess.py), in a clean environment plus
    ``environ``: (exit status, stdout, stderr)."""
    rc, out, err = run_main(list(args), {**_clean_environ(), **(environ or {})})
    return rc, out, err


def cli(args: Sequence[str], environ: Optional[dict[str, str]] = None
        ) -> tuple[int, Any, str]:
    """:func:`run_cli` with ``--json``: (exit status, the JSON printed or None, stderr)."""
    rc, text, err = run_cli(args, environ)
    try:
        doc = json.loads(text) if text.strip() else None
    except ValueError:
        doc = None
    return rc, doc, err


class Host:
    """How the commands are pointed at one host, and the empty NCCL config root."""

    def __init__(self, where: list[str], conf: str, probe: list[str]) -> None:
        self.where = where
        self.conf = ["--conf-root", conf]
        self.probe = probe  # doctor/metrics/nfd: whether they open the device nodes

    def run(self, *args: str, environ: Optional[dict[str, str]] = None
            ) -> tuple[int, Any, str]:
        head, sep, tail = list(args), [], []
        if "--" in head:
            i = head.index("--")
            head, sep, tail = head[:i], ["--"], head[i + 1:]
        where = list(self.where)
        if args[0] in ("doctor", "nccl") and "--proc-path" in where:  # they have none
            i = where.index("--proc-path")
            del where[i:i + 2]
        return cli([*head, *where, *sep, *tail], environ)


def _ranks(topo: Any) -> list[Optional[int]]:
    gpus = topo["gpus"] if topo else []
    return list(range(len(gpus))) if len(gpus) > 1 else [None]


def _value(env_doc: Any, name: str) -> Optional[str]:
    for v in env_doc["variables"]:
        if v["name"] == name:
            return v["value"]  # type: ignore[no-any-return]
    return None


def _check_rank(h: Host, rank: Optional[int], topo: Any, assign: Any) -> Optional[str]:
    """One rank: env against nccl check, env against topo --assign and run. Returns the
    link layer of the rank's NICs (None: no NIC)."""
    rank_args = [] if rank is None else ["--local-rank", str(rank)]
    rc, env_doc, err = h.run("env", "--json", *rank_args, *h.conf)
    if rc == 2 or env_doc is None or "nics" not in env_doc:
        return None  # a usage error or no NIC: nothing written to compare
    nics = [f"{n['device']}:{n['port']}" for n in env_doc["nics"]]
    hca = _value(env_doc, "NCCL_IB_HCA")
    warnings = list(env_doc["warnings"])
    if hca is not None:
        written = {v["name"]: v["value"] for v in env_doc["variables"]
                   if v["value"] is not None and v["name"] != "NCCL_IB_HCA"}
        crc, check, _ = h.run("nccl", "check", "--json", hca, *h.conf, environ=written)
        assert check is not None, (h.where, rank, hca)
        from_check = [f"NCCL_IB_HCA={hca!r}: {w['message']} [nccl check: {w['code']}]"
                      for w in check["warnings"]]
        said = [w for w in warnings if "[nccl check: " in w]
        assert said == from_check, (h.where, rank, hca)
        own = [w for w in warnings if w not in said]
        assert all(any(k in w for k in ENV_ONLY) for w in own), (h.where, rank, own)
        if not own:
            assert rc == crc, (h.where, rank, rc, crc, warnings)
    assert rc == (1 if warnings else 0) or not nics, (h.where, rank, rc)
    if not topo or not topo["gpus"]:
        return _one_layer(env_doc)
    # topo --assign for the same rank names the same NICs and the NUMA node topo gives
    mine = next((a for a in assign["assignments"]
                 if a["gpu"] is not None and (rank is None or a["gpu"]["index"] == rank)),
                None) if assign else None
    if mine is not None and mine["nics"]:
        assert [f"{n['device']}:{n['port']}" for n in mine["nics"]] == nics, (h.where, rank)
        gpu = next(g for g in topo["gpus"] if g["address"] == mine["gpu"]["address"])
        assert mine["gpu"]["numa_affinity"] == gpu["numa_affinity"]
        assert mine["gpu"]["numa_affinity_source"] == gpu["numa_affinity_source"]
    # run places the rank on the same NICs, with env's variables (none when env warns)
    rrc, plan, _ = h.run("run", "--dry-run", "--json", *rank_args, "--", "true")
    if plan is not None and "nics" in plan and rrc == 0:
        assert plan["nics"] == nics, (h.where, rank, plan["nics"], nics)
        exports = {v["name"]: v["value"] for v in env_doc["variables"]
                   if v["value"] is not None}
        assert plan["env"] == ({} if warnings else exports), (h.where, rank)
        if mine is not None:
            node = mine["gpu"]["numa_affinity"]
            cpus = {str(n): c for n, c in (topo.get("numa_nodes") or {}).items()}
            if node is not None and cpus.get(str(node)):
                assert plan["node"] == node, (h.where, rank, plan["node"], node)
    return _one_layer(env_doc)


def _one_layer(env_doc: Any) -> Optional[str]:
    """The rank's link layer: InfiniBand or Ethernet, never both (a port of another,
    a corrupted file's, is nccl check's port-inactive, compared above)."""
    layers = {n["link_layer"] for n in env_doc["nics"]} & {"InfiniBand", "Ethernet"}
    assert len(layers) <= 1, env_doc["nics"]
    return layers.pop() if layers else None


def _fleet(h: Host) -> None:
    """doctor, metrics and nfd judge each device alike; metrics' and nfd's transport is
    what nccl check predicts with NCCL_IB_HCA unset."""
    rc, doctor, _ = h.run("doctor", "--json", *h.probe)
    if doctor is None or "devices" not in doctor:
        return
    _, metrics, _ = h.run("metrics", "--json", *h.probe, *h.conf)
    _, nfd, _ = h.run("nfd", "--json", *h.probe, *h.conf)
    assert metrics is not None and nfd is not None, h.where
    # an SMI device is no verbs device (no usable series, no label); a device whose
    # files cannot be read is unknown (no usable series: the discovery collector fails)
    usable = {d["name"]: bool(d["usable"]) for d in doctor["devices"]
              if not any(r["code"] in ("management_device", "unknown") for r in d["reasons"])}
    fams = {f["name"]: f["samples"] for f in metrics["families"]}
    by_metrics = {s["labels"]["device"]: s["value"] == 1
                  for s in fams.get("sysverbs_rdma_device_usable", [])}
    features = {**nfd["labels"], **nfd["features"]}
    by_nfd = {d: features.get(f"{NCCL_PREFIX}rdma.device.{d}.usable") == "true"
              for d in usable}
    assert by_metrics == usable, (h.where, usable, by_metrics)
    assert by_nfd == usable, (h.where, usable, by_nfd)
    transport = [s["labels"]["transport"] for s in fams["sysverbs_nccl_transport"]
                 if s["value"] == 1]
    _, check, _ = h.run("nccl", "check", "--json", *h.conf)
    predicted = check["transport"] if check is not None else "socket"
    assert transport == ([predicted] if predicted else []), (h.where, transport, predicted)
    assert nfd["labels"].get(f"{NCCL_PREFIX}nccl.transport") == (predicted or "none"), h.where
    # one GID verdict: nccl check's warnings, metrics' series, nfd's labels
    by_check = {(w["entry"], w["code"]) for w in (check or {}).get("warnings", [])
                if w["code"].startswith("gid-")}
    gid_series = {(f"{s['labels']['device']}:{s['labels']['port']}", s["labels"]["reason"])
                  for s in fams.get("sysverbs_nccl_gid_problem", []) if s["value"] == 1}
    assert gid_series == by_check, (h.where, gid_series, by_check)
    labelled = {k.rpartition("nccl.problem.")[2] for k in nfd["labels"]
                if k.startswith(f"{NCCL_PREFIX}nccl.problem.")}
    assert labelled == {code for _, code in by_check}, (h.where, labelled, by_check)


def check_host(h: Host) -> None:
    _, topo, _ = h.run("topo", "--json")
    _, assign, _ = h.run("topo", "--assign", "--json")
    topo = topo if topo and "gpus" in topo else None  # else an error document
    assign = assign if assign and "assignments" in assign else None
    layers = {_check_rank(h, r, topo, assign) for r in _ranks(topo)} - {None}
    if topo and len(topo["gpus"]) > 1:  # every rank of a host: one link layer
        assert len(layers) <= 1, (h.where, layers)
    _fleet(h)


@pytest.fixture(scope="module")
def conf_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("no-nccl-conf"))


@pytest.mark.parametrize("fixture", fixture_names())
def test_every_fixture_every_rank(fixture: str, conf_root: str,
                                  fast_fixture_tmp: None) -> None:
    check_host(Host(["--fixture", fixture], conf_root, []))


def _tree_host(sysfs: Path, dev: Path, proc: Path, conf: Path) -> Host:
    conf.mkdir(exist_ok=True)
    return Host(["--sysfs-path", str(sysfs), "--dev-dir", str(dev), "--proc-path",
                 str(proc), "--providers", "builtin"], str(conf), ["--no-open"])


@fuzz_settings(ci=15, deep=200)
@given(spec=pci_trees(max_host_bridges=3))
def test_generated_trees(spec: TreeSpec) -> None:
    with fast_tmpdir("sv-consistency-") as root:
        fake = render(spec).materialize(root / "host")
        check_host(_tree_host(fake.sysfs, fake.dev, fake.proc, root / "conf"))


#: What a corrupted file reads: empty, garbage, a wrong number, a partial line.
GARBAGE = ("", "\x00\xff", "-1\n", "zz\n", "4: ACT", "Ether", "99999999999999999999\n",
           "fe80:0000:0000:0000:0000:0000:0000:0001\n")
#: The files corrupted, by name: what placement, env and nccl check read.
TARGETS = ("numa_node", "local_cpulist", "link_layer", "state", "rate", "gids",
           "types", "ndevs", "class", "vendor", "sys_image_guid")


def _corruptible(sysfs: Path) -> Iterator[Path]:
    for path in sorted((sysfs / "devices").rglob("*")):
        if path.is_file() and not path.is_symlink() and (
                path.name in TARGETS or path.parent.name in TARGETS):
            yield path


@fuzz_settings(ci=15, deep=200)
@given(fixture=st.sampled_from(["gpu-pcie-2socket", "gpu-sriov-sf", "gpu-cloud-vm",
                                "bnxt_re", "rxe"]),
       seed=st.integers(0, 1 << 30), count=st.integers(1, 6),
       garbage=st.lists(st.sampled_from(GARBAGE), min_size=6, max_size=6))
def test_corrupted_trees(fixture: str, seed: int, count: int, garbage: list[str]) -> None:
    src = cached_fixture(fixture)
    with fast_tmpdir("sv-consistency-") as root:
        copy = root / "host"
        shutil.copytree(src.root, copy, symlinks=True)
        sysfs, dev, proc = (copy / p.relative_to(src.root)
                            for p in (src.sysfs, src.dev, src.proc))
        files = list(_corruptible(sysfs))
        for path, text in zip(random.Random(seed).sample(files, min(count, len(files))),
                              garbage):
            path.write_bytes(text.encode("latin-1"))
        check_host(_tree_host(sysfs, dev, proc, root / "conf"))


def test_the_gid_verdict_is_one_on_a_roce_host(conf_root: str, fast_fixture_tmp: None
                                               ) -> None:
    """gpu-dgx-a100: NCCL would use link-local GIDs on its eight RoCE ports (the netdevs
    carry no IPv4 address).  nccl check warns (exit 1); metrics has a series per port and
    nfd a label, where before both said nothing."""
    h = Host(["--fixture", "gpu-dgx-a100"], conf_root, [])
    rc, check, _ = h.run("nccl", "check", "--json", *h.conf)
    codes = sorted(w["entry"] for w in check["warnings"] if w["code"] == "gid-link-local")
    assert rc == 1 and codes == [f"mlx5_{i}:1" for i in (0, 1, 3, 4, 5, 7, 8, 9)]
    _fleet(h)  # metrics' series and nfd's label are the same verdict
    _, nfd, _ = h.run("nfd", "--json", *h.conf)
    assert nfd["labels"][f"{NCCL_PREFIX}nccl.problem.gid-link-local"] == "true"


def test_env_and_run_keep_and_judge_the_users_hca(conf_root: str, fast_fixture_tmp: None
                                                  ) -> None:
    """One rule for a user's NCCL_IB_HCA (keep_set): env and run keep it, and judge the
    value in force with nccl check; one that selects nothing is a warning in both, and
    neither sets anything (before: run kept it silently and set UCX_NET_DEVICES...)."""
    h = Host(["--fixture", "gpu-hgx-h100"], conf_root, [])
    bad = {"NCCL_IB_HCA": "mlx5_9"}
    rc, env_doc, _ = h.run("env", "--json", "--local-rank", "0", *h.conf, environ=bad)
    warned = [w for w in env_doc["warnings"] if "[nccl check: no-match]" in w]
    assert rc == 1 and warned and warned[0].startswith("NCCL_IB_HCA='mlx5_9': ")
    rrc, plan, err = h.run("run", "--dry-run", "--json", "--local-rank", "0", "--", "true",
                           environ=bad)
    assert rrc == 0 and plan["env"] == {} and plan["kept"] == {}
    assert all(w in plan["warnings"] for w in env_doc["warnings"]), plan["warnings"]
    assert all(f"sysverbs run: warning: {w}" in err for w in warned)
    good = {"NCCL_IB_HCA": "=mlx5_1:1"}  # kept, and said, by both
    rc, env_doc, _ = h.run("env", "--json", "--local-rank", "0", *h.conf, environ=good)
    _, plan, _ = h.run("run", "--dry-run", "--json", "--local-rank", "0", "--", "true",
                       environ=good)
    kept = [v for v in env_doc["variables"] if v["name"] == "NCCL_IB_HCA"]
    assert rc == 0 and kept[0]["value"] is None and "kept" in kept[0]["reason"]
    assert plan["kept"] == good and "NCCL_IB_HCA" not in plan["env"]
    assert any("already set to '=mlx5_1:1': kept" in w for w in plan["warnings"])


def test_the_ranks_one_link_layer_costs_are_named(conf_root: str, fast_fixture_tmp: None
                                                  ) -> None:
    """gpu-dgx-a100 has two InfiniBand rails (mlx5_2, mlx5_6) among eight: every rank
    uses RoCE, and GPU2/3 and GPU6/7 lose the InfiniBand port as near as (or nearer than)
    the one they get.  Before: only topo --assign's "left out" lines, no rank named."""
    h = Host(["--fixture", "gpu-dgx-a100"], conf_root, [])
    rc, _, err = run_cli(["topo", "--assign", *h.where])
    named = sorted(int(line.split("rank ")[1].split(" ")[0]) for line in err.splitlines()
                   if "is InfiniBand: left out because every rank" in line)
    assert rc == 0 and named == [2, 3, 6, 7]
    assert "rank 3 (GPU3): port mlx5_2:1, nearer (PXB, 5 hops)" in err
    for rank, said in ((3, True), (0, False)):
        _, _, err = run_cli(["env", "--local-rank", str(rank), *h.where, *h.conf])
        assert (f"sysverbs env: warning: rank {rank} (GPU{rank}): port " in err) == said
        _, _, err = run_cli(["run", "--dry-run", "--local-rank", str(rank), *h.where,
                             "--", "true"])
        assert (f"sysverbs run: warning: rank {rank} (GPU{rank}): port " in err) == said


def test_no_single_link_layer_fails_every_command(conf_root: str, fast_fixture_tmp: None
                                                  ) -> None:
    """Where the host's one link layer leaves a rank no NIC that the other layer would
    give it, the verdict names the rank and topo --assign, env and run exit 1.  No
    bundled host is so (placement gives every GPU a NIC of the chosen layer), so the
    verdict is made from gpu-dgx-a100's two real assignments with rank 1's emptied."""
    from sysverbs.model import HostModel, linklayer
    from sysverbs.placement import Assignment, assign
    from sysverbs.testing.cache import fixture_tree

    host = HostModel(fixture_tree("gpu-dgx-a100").host_root).placement
    chosen = list(assign(host, link_layer="Ethernet"))
    chosen[1] = Assignment(chosen[1].gpu, None, (), "no NIC")
    verdict = linklayer.link_layer_verdict("Ethernet", "InfiniBand", chosen,
                                           assign(host, link_layer="InfiniBand"))
    assert verdict.unserved == (1,) and not verdict.ok()
    assert [r for r, _ in verdict.changed] == [2, 3, 6, 7]
    assert "Ethernet gives rank 1 no NIC" in verdict.warnings([5])[-1]
    real = linklayer.link_layer_verdict
    h = Host(["--fixture", "gpu-dgx-a100"], conf_root, [])
    with mock.patch.object(linklayer, "link_layer_verdict",
                           lambda layer, other, a, b: real(layer, other, chosen, b)):
        for args in (["topo", "--assign"], ["env", "--local-rank", "0", *h.conf],
                     ["run", "--dry-run", "--local-rank", "0", "--", "true"]):
            rc, _, err = h.run(*args)
            assert rc == 1 and "no single link layer serves every rank" in err, args

"""rank/launch.py's plan by value (issue 41: the survivors of its mutation run): the
``sysverbs run --dry-run`` text of a plan, the anchors' errors with their rank ranges, the
allowed sets' argument checks, the memory policy each mode names.  On the two-socket host
of tests/test_launch.py (whose layout is written out there by hand)."""

from __future__ import annotations

from typing import Any

import pytest

from sysverbs.ground.errors import NotFoundError, UsageError, WrongTypeError
from sysverbs.rank.launch import plan
from tests.test_launch import two_node_host


@pytest.fixture(scope="module")
def sysfs(tmp_path_factory: pytest.TempPathFactory) -> str:
    _, host = two_node_host(tmp_path_factory.mktemp("launch"))
    return str(host.sysfs)


def test_the_dry_run_text(sysfs: str) -> None:
    gpu = plan(sysfs_path=sysfs, environ={}, local_rank=2).render().splitlines()
    assert gpu[:6] == ["rank 2: near GPU2 (0000:92:00.0), node 1",
                       "  cpus 8-15,24-31 (node)", "  mems 1 (preferred)",
                       "  nics mlx5_0:1", "  set NCCL_IB_HCA==mlx5_0:1",
                       "  set UCX_NET_DEVICES=mlx5_0:1"]
    assert "  why mems: MPOL_PREFERRED on node 1, where the CPUs are" in gpu
    bare = plan("nvme0n1", sysfs_path=sysfs, environ={}, cpu="none", mem="none",
                nics=False).render()
    assert bare.startswith("rank -: near nvme0n1 (0000:a0:00.0), node 1\n"
                           "  cpus 0-31 (none, not set)\n  mems - (none, not set)\n"
                           "  nics none\n  why rank: none of LOCAL_RANK")
    assert bare.endswith("  why nics: not asked for\n") and not bare.endswith("\n\n")


@pytest.mark.parametrize("kw,error,text", [
    ({"near": "mlx5_0,nvme0n1", "local_rank": 5}, NotFoundError,
     "local rank 5 has no device: near names 2 (mlx5_0, nvme0n1), ranks 0 to 1"),
    ({"local_rank": 7}, NotFoundError, "local rank 7 has no GPU: rank 7 (given), but only 3 "
     "GPUs are visible (all GPUs (no CUDA_VISIBLE_DEVICES)), ranks 0 to 2"),
    ({}, UsageError, "3 GPUs are visible and no local rank is known (none of LOCAL_RANK"),
    ({"near": " ,x"}, UsageError, "near must name one or more devices, not ' ,x'"),
    ({"near": ["mlx5_0", ""]}, UsageError, "near must name one or more devices"),
    ({"near": "mlx5_0", "local_size": 0}, UsageError, "local_size must be at least 1"),
    ({"allowed_cpus": {0, True}}, WrongTypeError, "allowed_cpus must be a list text"),
    ({"allowed_cpus": {-1}}, WrongTypeError, "allowed_cpus must be a list text"),
    ({"allowed_cpus": [0.5]}, WrongTypeError, "allowed_cpus must be a list text"),
    ({"allowed_cpus": 5}, WrongTypeError, "allowed_cpus must be a list text"),
    ({"allowed_cpus": ""}, UsageError, "allowed_cpus '' is not a list such as 0-3,8"),
])
def test_errors_name_the_ranks_there_are(sysfs: str, kw: dict[str, Any], error: type,
                                         text: str) -> None:
    with pytest.raises(error) as got:
        plan(sysfs_path=sysfs, environ={}, nics=False, **kw)
    assert str(got.value).startswith(text), str(got.value)


def test_the_anchor_and_its_share(sysfs: str) -> None:
    one = plan("mlx5_0", sysfs_path=sysfs, environ={}, local_size=1, nics=False)
    assert one.reasons["anchor"].endswith("; 1 ranks near it (given)")
    alone = plan("nvme0n1", sysfs_path=sysfs, environ={}, nics=False)
    assert alone.reasons["anchor"].startswith("near nvme0n1: ")
    assert "; one rank near it (none of LOCAL_WORLD_SIZE" in alone.reasons["anchor"]
    three = plan("mlx5_0", sysfs_path=sysfs, environ={}, local_size=3, local_rank=4,
                 nics=False, cpu="exclusive")
    assert three.reasons["anchor"].endswith("; 3 ranks near it (given)")
    assert three.anchor.name == "mlx5_0" and three.cpus  # rank 4 of 3: the second share
    assert three.cpus != plan("mlx5_0", sysfs_path=sysfs, environ={}, local_size=3,
                              local_rank=0, nics=False, cpu="exclusive").cpus
    zero = plan(sysfs_path=sysfs, environ={}, local_rank=0, allowed_cpus={0, 16},
                nics=False)
    assert zero.cpus == frozenset({0, 16})  # CPU 0 is a CPU


def test_one_visible_gpu_is_every_ranks(sysfs: str) -> None:
    p = plan(sysfs_path=sysfs, environ={"CUDA_VISIBLE_DEVICES": "2"}, local_rank=3,
             nics=False)
    assert (p.anchor.name, p.node) == ("GPU2", 1)
    assert p.reasons["anchor"].startswith("rank 3 (given) -> GPU2 0000:92:00.0 (")


@pytest.mark.parametrize("mem,policy", [("bind", "MPOL_BIND"), ("preferred", "MPOL_PREFERRED")])
def test_each_mem_mode_names_its_policy(sysfs: str, mem: str, policy: str) -> None:
    p = plan(sysfs_path=sysfs, environ={}, local_rank=0, mem=mem, nics=False)
    assert p.reasons["mems"] == f"{policy} on node 0, where the CPUs are"
    assert p.mems == frozenset({0})


def test_the_visible_gpus_without_a_rank(sysfs: str) -> None:
    one = plan(sysfs_path=sysfs, environ={"CUDA_VISIBLE_DEVICES": "1"}, nics=False)
    assert one.anchor.name == "GPU1"  # the one visible GPU is the rank's
    with pytest.raises(UsageError, match="^2 GPUs are visible and no local rank is known"):
        plan(sysfs_path=sysfs, environ={"CUDA_VISIBLE_DEVICES": "0,2"}, nics=False)


def test_one_rank_near_a_device_has_its_whole_share(sysfs: str) -> None:
    alone = plan("mlx5_0", sysfs_path=sysfs, environ={}, cpu="exclusive", nics=False)
    given = plan("mlx5_0", sysfs_path=sysfs, environ={}, cpu="exclusive", local_size=1,
                 nics=False)
    assert alone.cpus == given.cpus == frozenset(range(8, 16)) | frozenset(range(24, 32))

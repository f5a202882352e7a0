"""Issue 40's findings about commands that disagree (1, 2, 6, 7, 10 and parts of 11): one
test each, on the bundled fixtures named in the issue; each fails on the code before
the fix (the comment says what it gave)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require
from tests.test_consistency import cli
from tests.test_consistency import run_cli as _lines


@pytest.fixture
def conf(tmp_path: Path) -> list[str]:
    return ["--conf-root", str(tmp_path)]


@pytest.mark.parametrize("fixture", ["gpu-dgx-a100", "gpu-pcie-2socket", "gpu-sriov-sf"])
def test_1_env_and_nccl_check_say_the_same_of_a_link_local_gid(
        fixture: str, conf: list[str], fast_fixture_tmp: None) -> None:
    """env warned that RoCE 'will fail' and exited 1; nccl check on the same value
    warned of nothing and exited 0. Now both give gid_verdict's words, exit 1."""
    rc, env, _ = cli(["env", "--json", "--fixture", fixture, "--local-rank", "0", *conf])
    value = next(v["value"] for v in env["variables"] if v["name"] == "NCCL_IB_HCA")
    crc, check, _ = cli(["nccl", "check", "--json", "--fixture", fixture, value, *conf])
    gid = [w for w in check["warnings"] if w["code"] == "gid-link-local"]
    assert crc == rc == 1 and gid  # before: nccl check 0, no warning
    assert "may work between hosts on one L2 segment and fails across routers" in \
        gid[0]["message"]
    assert env["warnings"] == [f"NCCL_IB_HCA={value!r}: {w['message']} "
                               f"[nccl check: {w['code']}]" for w in check["warnings"]]


def test_2_every_rank_of_a_host_gets_one_link_layer(conf: list[str],
                                                    fast_fixture_tmp: None) -> None:
    """topo --assign gave GPU2 and GPU6 InfiniBand ports and the others RoCE, and env
    for rank 2 exited 0 with mlx5_2:1 (IB). Now every rank gets RoCE (six ports of
    eight), the IB ports are left out with the reason, and env agrees."""
    rc, plan, _ = cli(["topo", "--assign", "--json", "--fixture", "gpu-dgx-a100"])
    layers = {n["link_layer"] for a in plan["assignments"] for n in a["nics"]}
    assert rc == 0 and layers == {"Ethernet"}  # before: {"Ethernet", "InfiniBand"}
    left = [(f["device"], f["reason"]) for f in plan["assignments"][0]["filtered"]
            if f["code"] == "link_layer"]
    assert [d for d, _ in left] == ["mlx5_2", "mlx5_6"]
    assert "which NCCL cannot join, so every rank uses Ethernet" in left[0][1]
    _, env, _ = cli(["env", "--json", "--fixture", "gpu-dgx-a100", "--local-rank", "2",
                     *conf])
    assert [(n["device"], n["link_layer"]) for n in env["nics"]] == [("mlx5_3", "Ethernet")]


def test_6_one_gpu_one_numa_answer(fast_fixture_tmp: None) -> None:
    """gpu-cloud-vm (numa_node -1): topo said NUMA Affinity 0, topo --assign '(NUMA N/A)',
    run node 0 (local_cpulist). Now topo --assign says 0 and the rule that gave it."""
    rc, text, _ = _lines(["topo", "--assign", "--fixture", "gpu-cloud-vm"])
    assert rc == 0 and "GPU0 0000:05:00.0 (NUMA 0, from local_cpulist) -> " in text
    assert "(NUMA N/A)" not in text  # before: every GPU
    _, topo, _ = cli(["topo", "--json", "--fixture", "gpu-cloud-vm"])
    _, plan, _ = cli(["topo", "--assign", "--json", "--fixture", "gpu-cloud-vm"])
    _, run, _ = cli(["run", "--dry-run", "--json", "--fixture", "gpu-cloud-vm",
                     "--local-rank", "0", "--", "true"])
    gpu0 = plan["assignments"][0]["gpu"]
    assert (gpu0["numa_affinity"], gpu0["numa_affinity_source"]) == (
        topo["gpus"][0]["numa_affinity"], topo["gpus"][0]["numa_affinity_source"]) == (
        0, "local_cpulist")
    assert run["node"] == 0


def test_7_env_keeps_what_the_user_set(conf: list[str], fast_fixture_tmp: None) -> None:
    """env overwrote a user's NCCL_IB_HCA silently; run kept it. Now env keeps it too,
    says so, and checks the value in force."""
    user = {"NCCL_IB_HCA": "=mlx5_1:1"}
    rc, text, _ = _lines(["env", "--fixture", "gpu-hgx-h100", "--local-rank", "0", *conf],
                         user)
    assert rc == 0
    assert "export NCCL_IB_HCA" not in text  # before: export NCCL_IB_HCA='=mlx5_0:1'
    assert "# NCCL_IB_HCA left alone: already set to '=mlx5_1:1' in the environment: " \
           "kept, as sysverbs run keeps it" in text
    assert "# note: NCCL_IB_HCA is already set to '=mlx5_1:1': kept (sysverbs env would " \
           "write '=mlx5_0:1'; unset it to take that)" in text
    assert "export UCX_NET_DEVICES=mlx5_0:1" in text
    _, run, _ = cli(["run", "--dry-run", "--json", "--fixture", "gpu-hgx-h100",
                     "--local-rank", "0", "--", "true"], user)
    assert run["kept"] == user and "NCCL_IB_HCA" not in run["env"]
    # the value in force is checked: a user's value that selects nothing is a warning
    rc, _, err = _lines(["env", "--fixture", "gpu-hgx-h100", "--local-rank", "0", *conf],
                        {"NCCL_IB_HCA": "mlx5_9"})
    assert rc == 1 and "NCCL_IB_HCA='mlx5_9': " in err and "[nccl check: no-match]" in err


def test_10_the_explanations_match_the_choice(fast_fixture_tmp: None) -> None:
    """GPU1 was explained by 'PXB, 9 hops' with no word of the 5-hop NIC topo --json
    shows; two devices of one node were 'NUMA node 0 and 0'."""
    _, plan, _ = cli(["topo", "--assign", "--json", "--fixture", "gpu-dgx-a100"])
    _, topo, _ = cli(["topo", "--json", "--fixture", "gpu-dgx-a100"])
    gpu1 = plan["assignments"][1]
    nearest = min((p for p in topo["pairs"] if p["a"] == "GPU1" and p["b"].startswith("NIC")
                   and p["smi"] == "PXB"), key=lambda p: p["hops"])
    assert nearest["hops"] == 5 and gpu1["nics"][0]["hops"] == 9
    assert "(mlx5_0:1 is nearer, 5 hops, but hops do not split a class" in gpu1["reason"]
    _, text, _ = _lines(["topo", "--json", "--fixture", "gpu-hgx-h100"])
    assert "NUMA node 0 and 0" not in text and "both on NUMA node 0" in text


def test_11_device_lists_port_overflow_and_set_e(tmp_path: Path, conf: list[str],
                                                 fast_fixture_tmp: None) -> None:
    """--device 'mlx5_0:1,mlx5_1:1' was read as the device 'mlx5_0:1,mlx5_1' port 1;
    'mlx5_0:4294967297' passed nccl check silently (atoi wraps it to 1); eval "$(sysverbs
    env)" under set -e went on when every export was commented out (real bash)."""
    rc, env, _ = cli(["env", "--json", "--fixture", "gpu-hgx-h100", "--device",
                      "mlx5_0:1,mlx5_1:1", *conf])
    assert rc == 0 and [n["device"] for n in env["nics"]] == ["mlx5_0", "mlx5_1"]
    rc, check, _ = cli(["nccl", "check", "--json", "--fixture", "gpu-hgx-h100",
                        "mlx5_0:4294967297", *conf])
    assert rc == 1 and [w["code"] for w in check["warnings"]] == ["bad-port"]
    assert "does not fit a C int: atoi wraps it to 1" in check["warnings"][0]["message"]
    rc, text, _ = _lines(["env", "--fixture", "rxe", *conf])
    assert rc == 1 and text.endswith("\nfalse\n")
    bash = shutil.which("bash")
    require(None if bash else "no bash", "bash")
    script = tmp_path / "out.sh"
    script.write_text(text)
    p = subprocess.run([str(bash), "-c", f'set -e; eval "$(cat {script})"; echo went on'],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "went on" not in p.stdout


def test_10_doctor_says_no_rdma_once_on_stdout(tmp_path: Path) -> None:
    """A sysfs tree without RDMA devices: doctor's stdout says it once (the host reason,
    with the fix), the contract's warning once on stderr; not a third time."""
    root = tmp_path / "sys"
    (root / "devices").mkdir(parents=True)
    p = subprocess.run([sys.executable, "-m", "sysverbs", "doctor", "--sysfs-path", str(root)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert p.stdout.count("no RDMA device") == 1, p.stdout
    assert p.stdout.startswith("host: error: The kernel shows no RDMA devices"), p.stdout
    assert p.stderr.count("\n") == 1 and "warning: no RDMA device" in p.stderr, p.stderr

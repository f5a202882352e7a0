"""What a newcomer meets on the command line (the README, then ``topo``, ``env``, ``nccl
check``, ``doctor`` on the GPU fixtures): ranks that do not exist, ``env`` and ``nccl
check`` agreeing, a tree given without its device nodes, ``fixtures``, bash completion.
The rules every command shares are in tests/test_cli_contract.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sysverbs.ground.errors import NotFoundError, UsageError
from sysverbs.placement import RANK_VARIABLES, read_host
from sysverbs.rank import nccl
from sysverbs.rank.environment import rank_environment
from sysverbs.rank.launch import SIZE_VARIABLES
from sysverbs.testing import fixture_names
from sysverbs.testing.cache import cached_fixture

ROOT = Path(__file__).resolve().parents[1]
GPU_FIXTURES = [n for n in fixture_names() if n.startswith("gpu-")]


def sv(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    for name in ("SYSFS_PATH", *RANK_VARIABLES, *SIZE_VARIABLES, "NCCL_IB_HCA",
                 "CUDA_VISIBLE_DEVICES"):
        if name not in env:
            full.pop(name, None)
    return subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                          text=True, timeout=120, env=full)


# -------------------------------------------------------------------- bad ranks (item 4)


def test_a_rank_without_a_gpu_is_an_error() -> None:
    """``topo --assign --rank 99`` and ``env --local-rank 8`` on an 8-GPU host exit 1
    and say which ranks exist (they printed "undecided", or fell back to round-robin,
    and exited 0)."""
    topo = sv("topo", "--fixture", "gpu-hgx-h100", "--assign", "--rank", "99")
    assert (topo.returncode, topo.stdout) == (1, "")
    assert topo.stderr.startswith("sysverbs topo: error: local rank 99 has no GPU: ")
    assert "ranks 0 to 7" in topo.stderr
    env = sv("env", "--fixture", "gpu-hgx-h100", "--local-rank", "8")
    assert (env.returncode, env.stdout) == (1, "")
    assert env.stderr.startswith("sysverbs env: error: local rank 8 has no GPU: ")
    js = sv("env", "--fixture", "gpu-hgx-h100", "--local-rank", "8", "--json")
    assert json.loads(js.stdout)["error"]["kind"] == "not-found"


def test_usable_filter_on_a_fixture() -> None:
    """``topo --assign --usable --fixture``: the recorded devices were usable, so every
    GPU keeps its NIC (the stand-in nodes, plain files, made every device unusable)."""
    p = sv("topo", "--fixture", "gpu-hgx-h100", "--assign", "--usable", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [[n["device"] for n in a["nics"]] for a in doc["assignments"]] == \
           [[f"mlx5_{i}"] for i in range(8)]


def test_rank_needs_assign() -> None:
    p = sv("topo", "--fixture", "gpu-hgx-h100", "--rank", "3")
    assert p.returncode == 2 and "--rank needs --assign" in p.stderr


def test_env_without_a_rank_on_a_host_with_several_gpus() -> None:
    """No rank on an 8-GPU host: a usage error (it exported all eight NICs); the rank
    from LOCAL_RANK is used; a host with one GPU needs none."""
    p = sv("env", "--fixture", "gpu-hgx-h100")
    assert (p.returncode, p.stdout) == (2, "")
    assert "this host has 8 GPUs and no local rank" in p.stderr
    ok = sv("env", "--fixture", "gpu-hgx-h100", LOCAL_RANK="3")
    assert ok.returncode == 0, ok.stderr
    assert "export NCCL_IB_HCA='=mlx5_3:1'" in ok.stdout.splitlines()
    assert "# note: placement: LOCAL_RANK=3 -> GPU3 " in ok.stdout
    one = rank_environment(environ={}, **_roots("gpu-sriov-sf"))
    assert any(n.startswith("placement: rank 0 (given) -> GPU0 ") for n in one.notes), one
    with pytest.raises(UsageError, match="8 GPUs and no local rank"):
        rank_environment(environ={}, **_roots("gpu-hgx-h100"))
    with pytest.raises(NotFoundError, match="local rank 8 has no GPU"):
        rank_environment(environ={}, local_rank=8, **_roots("gpu-hgx-h100"))


def test_env_device_with_a_bad_port() -> None:
    for value, what in (("mlx5_0:abc", "bad port 'abc'"), ("mlx5_0:0", "bad port '0'"),
                        (":1", "not NAME or NAME:PORT")):
        p = sv("env", "--fixture", "gpu-hgx-h100", "--device", value)
        assert p.returncode == 2 and what in p.stderr, (value, p.stderr)
    p = sv("env", "--fixture", "gpu-hgx-h100", "--device", "mlx5_99:1")
    assert p.returncode == 1 and "no RDMA device 'mlx5_99'" in p.stderr


# ------------------------------------------------------------ env and nccl check (item 3)


def _roots(fixture: str) -> dict[str, object]:
    host = cached_fixture(fixture)
    return {"sysfs_path": str(host.sysfs), "dev_dir": str(host.dev),
            "proc_path": str(host.proc), "list_options": {"providers": "builtin"}}


def _ranks(fixture: str) -> list[int | None]:
    gpus = read_host(str(cached_fixture(fixture).sysfs)).gpus
    return list(range(len(gpus))) if len(gpus) > 1 else [None]


@pytest.mark.parametrize("fixture", fixture_names())
def test_what_env_writes_passes_nccl_check(fixture: str) -> None:
    """On every fixture and for every local rank: the NCCL_IB_HCA that ``env`` writes
    draws no warning from the NCCL linter (the matcher the real-NCCL oracle proves), or
    ``env`` carries that linter's warnings itself (and the command then exits 1 and
    exports nothing, test below)."""
    roots = _roots(fixture)
    host = cached_fixture(fixture)
    ports = nccl.host_ports(sysfs_path=str(host.sysfs), dev_dir=str(host.dev),
                            source="sysfs", providers="builtin", gid_tables=True)
    for rank in _ranks(fixture):
        try:
            env = rank_environment(environ={}, local_rank=rank, **roots)  # type: ignore
        except OSError:
            continue  # no device list (no class/infiniband_verbs): the command says so
        value = env.exports().get("NCCL_IB_HCA")
        if value is None:
            continue
        lint = nccl.lint_hca(value, ports, env.exports())  # as written (GID index too)
        said = [w for w in env.warnings if "[nccl check: " in w]
        assert [f"[nccl check: {w.code}]" for w in lint.warnings] == \
               [w[w.index("[nccl check: "):] for w in said], (fixture, rank, value)
        if fixture == "dgx-demo":  # IB and RoCE ports: env keeps one link layer
            assert not lint.warnings and len(env.nics) == 14


def test_env_with_warnings_exports_nothing_and_exits_1() -> None:
    """A predicted failure is a warning on stderr and exit 1, and nothing is exported
    (env exported NCCL_IB_HCA='=mlx5_2:1,mlx5_3:1', IB and RoCE, and exited 0)."""
    p = sv("env", "--fixture", "gpu-dgx-a100", "--device", "mlx5_2:1", "--device", "mlx5_3:1")
    assert p.returncode == 1
    assert "sysverbs env: warning: NCCL_IB_HCA='=mlx5_2:1,mlx5_3:1': " in p.stderr
    assert "[nccl check: mixed-link-layer]" in p.stderr
    assert not [line for line in p.stdout.splitlines() if line.startswith("export ")]
    assert "# (not set) export NCCL_IB_HCA='=mlx5_2:1,mlx5_3:1'" in p.stdout
    check = sv("nccl", "check", "--fixture", "gpu-dgx-a100", "=mlx5_2:1,mlx5_3:1")
    assert check.returncode == 1 and "[mixed-link-layer]" in check.stdout
    # what env writes for rank 2 now: one rail, which nccl check passes
    ok = sv("env", "--fixture", "gpu-dgx-a100", "--local-rank", "2", "--device", "mlx5_2")
    value = json.loads(sv("env", "--fixture", "gpu-dgx-a100", "--local-rank", "2",
                          "--device", "mlx5_2", "--json").stdout)["variables"][0]["value"]
    assert ok.returncode == 0 and value == "=mlx5_2:1"
    assert sv("nccl", "check", "--fixture", "gpu-dgx-a100", value).returncode == 0


def test_env_on_the_demo_host_passes_nccl_check() -> None:
    """``env --fixture dgx-demo`` (no GPU, InfiniBand and RoCE ports): one link layer,
    the others named in a note; fed back to ``nccl check``: clean, exit 0 (it printed
    "Attempted to merge incompatible devices" twice as a note)."""
    p = sv("env", "--fixture", "dgx-demo")
    assert p.returncode == 0, p.stderr
    assert "# note: InfiniBand ports only " in p.stdout
    value = next(line for line in p.stdout.splitlines()
                 if line.startswith("export NCCL_IB_HCA="))[len("export NCCL_IB_HCA="):]
    check = sv("nccl", "check", "--fixture", "dgx-demo", value.strip("'"))
    assert (check.returncode, check.stderr) == (0, ""), check.stdout
    assert "warning" not in check.stdout and "incompatible" not in check.stdout


# ------------------------------------------------- a tree without its device nodes (item 6)


def test_nccl_check_on_a_tree_without_its_dev_dir() -> None:
    """``--sysfs-path D/sys`` without ``--dev-dir``: libibverbs lists no device (their
    nodes are not under /dev/infiniband), and nccl check says that, names the tree (not
    "this host") and the dev dir to give; with --dev-dir the device is found."""
    host = cached_fixture("gpu-dgx-a100")
    p = sv("nccl", "check", "--sysfs-path", str(host.sysfs), "mlx5_2")
    assert p.returncode == 1
    assert (f"sysverbs nccl check: warning: libibverbs lists none of the 10 RDMA devices "
            f"of the tree {host.sysfs}: no device node of uverbs0, uverbs1, uverbs2... is "
            f"under /dev/infiniband") in p.stderr
    assert str(host.dev) in p.stderr
    assert "this host" not in p.stdout + p.stderr
    ok = sv("nccl", "check", "--sysfs-path", str(host.sysfs), "--dev-dir", str(host.dev),
            "=mlx5_2:1")
    assert ok.returncode == 0 and "[0]mlx5_2:1/IB" in ok.stdout, ok.stdout + ok.stderr


def test_nccl_version_outside_the_model() -> None:
    p = sv("nccl", "check", "--fixture", "rxe", "--nccl-version", "3.0")
    assert p.returncode == 2 and "not an NCCL 2 release" in p.stderr
    # mthca: InfiniBand (rxe's link-local GIDs are a warning, gid-link-local)
    newer = sv("nccl", "check", "--fixture", "mthca", "--nccl-version", "2.99.1")
    assert newer.returncode == 0
    assert "newer than the newest release whose rules sysverbs knows" in newer.stderr
    assert f"NCCL {'.'.join(map(str, nccl.LATEST))} rules" in newer.stdout


# ---------------------------------------------------------------- fixtures and completion


def test_fixtures_lists_every_fixture_with_true_counts() -> None:
    """One line per bundled fixture; its device and GPU counts are those of the tree
    it unpacks to (class/infiniband, placement's GPUs)."""
    p = sv("fixtures", "--json")
    assert p.returncode == 0
    rows = {r["name"]: r for r in json.loads(p.stdout)["fixtures"]}
    assert sorted(rows) == sorted(fixture_names())
    for name, row in rows.items():
        host = cached_fixture(name)
        ib = host.sysfs / "class" / "infiniband"
        assert row["rdma_devices"] == (len(os.listdir(ib)) if ib.is_dir() else 0), name
        assert row["gpus"] == len(read_host(str(host.sysfs)).gpus), name
        assert row["description"], name
    text = sv("fixtures").stdout.splitlines()
    assert len(text) == len(rows)
    assert any(line.startswith("gpu-hgx-h100 ") and " 8 RDMA devices, 8 GPUs: HGX H100" in line
               for line in text)


BASH = shutil.which("bash")


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@pytest.mark.parametrize(("words", "want"), [
    ("sysverbs to", "topo"),
    ("sysverbs ", "devices devinfo netdev doctor watch snapshot topo nccl env run metrics "
                  "nfd fixtures "
                  "-h --help --version --completion"),
    ("sysverbs topo --fix", "--fixture"),
    ("sysverbs topo --fixture gpu-h", "gpu-hgx-h100"),
    ("sysverbs nccl ", "check"),
    ("sysverbs nccl check --nccl", "--nccl-version"),
    ("sysverbs env --format ", "sh dotenv json"),
    ("sysverbs devices --source n", "netlink"),
    ("sysverbs topo --fixture gpu-hgx-h100 --as", "--assign"),
])
def test_bash_completion(words: str, want: str, tmp_path: Path) -> None:
    """The script ``sysverbs --completion bash`` prints, run by the real bash: what
    it completes for the words typed so far."""
    script = sv("--completion", "bash")
    assert script.returncode == 0
    (tmp_path / "c.sh").write_text(script.stdout)
    typed = words.split(" ")
    driver = (f"source {tmp_path / 'c.sh'}\n"
              f"COMP_WORDS=({' '.join(repr(w) for w in typed)}); "
              f"COMP_CWORD={len(typed) - 1}; _sysverbs; echo \"${{COMPREPLY[*]}}\"\n")
    out = subprocess.run([BASH, "--norc", "-c", driver], capture_output=True, text=True,
                         timeout=60)
    assert out.stderr == "" and out.stdout.split() == want.split(), out


def test_bash_completion_of_directories(tmp_path: Path) -> None:
    (tmp_path / "sysroot").mkdir()
    script = sv("--completion", "bash").stdout
    (tmp_path / "c.sh").write_text(script)
    driver = (f"source {tmp_path / 'c.sh'}; COMP_WORDS=(sysverbs devices --sysfs-path "
              f"{tmp_path}/sys); COMP_CWORD=3; _sysverbs; echo \"${{COMPREPLY[*]}}\"")
    out = subprocess.run([str(BASH), "--norc", "-c", driver], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.split() == [f"{tmp_path}/sysroot"]

"""``sysverbs env --for`` and ``--map``: each framework's variables in its own syntax
(docs/frameworks.md).

UCX_NET_DEVICES is checked against UCX's own parser and matcher (Debian's ucx_info:
every entry not among its resources is named, whole, in its "not available" warning;
an exact resource name is taken, a prefix is not).  NVSHMEM's parser is internal to
its transport libraries (no exported symbol), so NVSHMEM_HCA_LIST is checked against
its rules carried as facts (nvshmemt_parse_hca_list: '^' once, ',' entries, name up to
':', port by atoi, names compared with strcmp).  vLLM's mapping is checked against the
tree itself: each NIC address's first RDMA device, sorted, whose ``device`` link is that
function (os.path.realpath, not sysverbs' reading) is the device placement chose.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from sysverbs import cli
from sysverbs.ground.errors import UsageError
from sysverbs.placement import RANK_VARIABLES, assign, read_host
from sysverbs.rank.environment import Nic, RankEnvironment, Variable
from sysverbs.rank.frameworks import (
    FRAMEWORKS,
    SOURCES,
    HostPair,
    for_frameworks,
    framework_names,
    nvshmem_hca_list,
    uccl_rdma_dev,
    vllm_mapping,
    vllm_selection,
)
from sysverbs.testing import cache
from tests.conftest import require

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORK_VARS = [v for names in FRAMEWORKS.values() for v in names]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*RANK_VARIABLES, *FRAMEWORK_VARS, "CUDA_VISIBLE_DEVICES",
                 "NVIDIA_VISIBLE_DEVICES", "NCCL_CONF_FILE"):
        monkeypatch.delenv(name, raising=False)


def _env(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, str], str]:
    rc = cli.main(["env", *argv, "--format", "dotenv"])
    out = capsys.readouterr()
    values = dict(line.split("=", 1) for line in out.out.splitlines()
                  if line and not line.startswith("#"))
    return rc, {k: json.loads(v) if v.startswith('"') else v for k, v in values.items()}, out.out


def nvshmem_parse(text: str) -> tuple[bool, list[tuple[str, int]]]:
    """NVSHMEM_HCA_LIST as nvshmemt_parse_hca_list reads it (its rules, as facts):
    a leading '^' excludes, ',' ends an entry, ':' ends the name and atoi reads the
    port (-1 when none)."""
    exclude = text.startswith("^")
    out: list[tuple[str, int]] = []
    for entry in text[exclude:].split(","):
        name, _, rest = entry.partition(":")
        digits = ""
        for c in rest.split(":")[0]:
            if not c.isdigit():
                break
            digits += c
        if name:
            out.append((name, int(digits or 0) if rest or _ else -1))
    return exclude, out


# ----------------------------------------------------------------------------- pure rules


def test_every_variable_has_its_source() -> None:
    for var in FRAMEWORK_VARS:
        src = SOURCES[var]
        assert src.repo.count("/") == 1 and src.path and src.rule, var
        assert src.commit is None or len(src.commit) == 40, var
    assert framework_names("NCCL, ucx,nccl,nixl") == ["nccl", "ucx", "nixl"]
    with pytest.raises(UsageError, match="unknown framework 'horovod'"):
        framework_names("nccl,horovod")


def test_nvshmem_and_uccl_syntax() -> None:
    v = nvshmem_hca_list([("mlx5_1", 1), ("mlx5_10", 2)])
    assert v.value == "mlx5_1:1,mlx5_10:2"
    assert nvshmem_parse(v.value) == (False, [("mlx5_1", 1), ("mlx5_10", 2)])
    assert nvshmem_hca_list([("x" * 64, 1)]).value is None      # char name[64]
    assert nvshmem_hca_list([(f"d{i}", 1) for i in range(49)]).value is None  # 48 entries
    assert nvshmem_hca_list([("^a", 1)]).value is None           # would exclude
    u = uccl_rdma_dev([("mlx5_0", 1), ("mlx5_0", 2), ("4", 1), ("irdma-mkp0", 1)])
    assert u.value == "mlx5_0,irdma-mkp0"                        # "4" would be an index
    assert "[1, 2]" in u.reason


def _pair(gpu: int, dev: str, port: int = 1, found: Any = True) -> HostPair:
    nic = f"0000:{gpu + 0x10:02x}:00.0"
    return HostPair(f"GPU{gpu}", f"0000:{gpu + 0x20:02x}:00.0", dev, port, nic,
                    dev if found is True else found)


def test_vllm_selection_rules() -> None:
    assert vllm_mapping([("0000:1b:00.0", "0000:1a:00.0")]).value == "0000:1b:00.0=0000:1a:00.0"
    pairs = [_pair(0, "mlx5_0"), _pair(1, "mlx5_1")]
    sel, taken, notes = vllm_selection(pairs, [], ["mlx5_0", "mlx5_1"])
    assert sel.value == "NCCL_IB_HCA:1,UCX_NET_DEVICES:1" and taken == ["NCCL_IB_HCA",
                                                                        "UCX_NET_DEVICES"]
    # vLLM writes the bare name: NCCL would take mlx5_1 as a prefix of mlx5_10
    sel, taken, notes = vllm_selection(pairs, ["nccl", "uccl"], ["mlx5_0", "mlx5_1", "mlx5_10"])
    assert sel.value == "UCCL_P2P_RDMA_DEV" and "prefix" in notes[0]
    # one suffix for every GPU: different ports cannot be written
    sel, _, notes = vllm_selection([_pair(0, "mlx5_0", 1), _pair(1, "mlx5_0", 2)], ["ucx"],
                                   ["mlx5_0"])
    assert sel.value is None and "different ports" in notes[0]


def test_for_frameworks_keeps_and_filters() -> None:
    nics = (Nic("mlx5_0", 1, "InfiniBand"), Nic("mlx5_3", 1, "InfiniBand"))
    env = RankEnvironment(nics, (Variable("NCCL_IB_HCA", "=mlx5_0:1,mlx5_3:1", "r"),
                                 Variable("UCX_NET_DEVICES", "mlx5_0:1,mlx5_3:1", "r")))
    out = for_frameworks(env, ["nvshmem", "uccl", "sglang"],
                         environ={"UCCL_P2P_RDMA_DEV": "mlx5_9"})
    assert out.exports() == {"NVSHMEM_HCA_LIST": "mlx5_0:1,mlx5_3:1",
                             "NVSHMEM_ENABLE_NIC_PE_MAPPING": "1",
                             "UCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}
    kept = [v for v in out.variables if v.name == "UCCL_P2P_RDMA_DEV"][0]
    assert kept.value is None and "'mlx5_9'" in kept.reason
    assert any(n.startswith("sglang: nothing written") for n in out.notes)
    vllm = for_frameworks(env, ["ucx", "vllm"], pairs=[_pair(0, "mlx5_0"),
                                                      _pair(1, "mlx5_3", found="mlx5_2")],
                          all_devices=["mlx5_0", "mlx5_2", "mlx5_3"])
    assert vllm.exports() == {"VLLM_GPU_NIC_PCIE_MAPPING": "0000:20:00.0=0000:10:00.0",
                              "VLLM_NIC_SELECTION_VARS": "UCX_NET_DEVICES:1"}
    assert any("mlx5_2 is found there" in n for n in vllm.notes)


# ----------------------------------------------------------------------------- on fixtures


def _vllm_name(sysfs: str, bdf: str) -> str:
    """What vLLM finds at a NIC address, read from the tree without sysverbs."""
    base = Path(sysfs) / "class/infiniband"
    names = sorted(n for n in os.listdir(base)
                   if os.path.basename(os.path.realpath(base / n / "device")) == bdf)
    return names[0]


def test_env_for_every_framework_on_a_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    rc, got, text = _env(capsys, "--fixture", "gpu-dgx-b200", "--local-rank", "2",
                         "--for", "nccl,ucx,nvshmem,uccl")
    assert rc == 0, text
    hca = got["NCCL_IB_HCA"]
    assert hca.startswith("=") and got["UCX_NET_DEVICES"] == hca[1:]
    assert got["UCCL_IB_HCA"] == hca
    assert nvshmem_parse(got["NVSHMEM_HCA_LIST"])[1] == [
        (d, int(p)) for d, p in (e.split(":") for e in hca[1:].split(","))]
    assert got["NVSHMEM_ENABLE_NIC_PE_MAPPING"] == "1"
    assert got["UCCL_P2P_RDMA_DEV"].split(",") == list(dict.fromkeys(
        e.split(":")[0] for e in hca[1:].split(",")))
    assert not any(k.startswith("VLLM") for k in got)


def test_vllm_mapping_resolves_on_the_tree(capsys: pytest.CaptureFixture[str]) -> None:
    tree = cache.fixture_tree("gpu-hgx-h100")
    rc, got, text = _env(capsys, "--fixture", "gpu-hgx-h100", "--for", "vllm")
    assert rc == 0, text
    host = read_host(tree.sysfs)
    chosen = {a.gpu.address: a.nics[0].device for a in assign(host) if a.gpu and a.nics}
    pairs = dict(p.split("=") for p in got["VLLM_GPU_NIC_PCIE_MAPPING"].split(","))
    assert len(pairs) == len(host.gpus) == 8
    assert {g: _vllm_name(tree.sysfs, n) for g, n in pairs.items()} == chosen
    assert got["VLLM_NIC_SELECTION_VARS"] == "NCCL_IB_HCA:1,UCX_NET_DEVICES:1"


def test_map_document(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "map.json"
    assert cli.main(["env", "--fixture", "gpu-sriov-sf", "--map", str(out)]) == 0
    doc = json.loads(out.read_text())
    schema = json.loads((ROOT / "sysverbs/cli/schemas/nic-map.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    (gpu,) = doc["gpus"]
    assert gpu["address"] == "0000:03:00.0" and gpu["numa_node"] == 0
    assert [(n["device"], n["port"], n["address"]) for n in gpu["nics"]] == [
        ("mlx5_0", 1, "0000:04:00.0"), ("mlx5_7", 1, "0000:04:00.1")]
    assert cli.main(["env", "--fixture", "mlx5-cx7", "--map", "-"]) == 1
    assert "no GPU on fixture mlx5-cx7" in capsys.readouterr().err
    assert cli.main(["env", "--fixture", "gpu-sriov-sf", "--map", "-", "--for", "ucx"]) == 2


# ----------------------------------------------------------------------------- UCX itself


def _ucx_warning(value: str) -> str:
    ucx_info = shutil.which("ucx_info")
    if ucx_info is None:
        require("ucx_info is not installed (apt-get install ucx-utils)", "UCX's ucx_info")
    assert ucx_info is not None
    p = subprocess.run([ucx_info, "-e", "-u", "t"], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, UCX_NET_DEVICES=value))
    return "\n".join(line for line in (p.stdout + p.stderr).splitlines() if "WARN" in line)


def test_ucx_parses_the_value_written(capsys: pytest.CaptureFixture[str]) -> None:
    """UCX splits what env writes at ',' into whole 'dev:port' names and compares
    each with its resources exactly: here (no RDMA device) it names each entry, whole,
    as not available; beside 'lo', a resource it has, only ours are named."""
    rc, got, text = _env(capsys, "--fixture", "gpu-hgx-h100", "--device", "mlx5_0,mlx5_3",
                         "--for", "ucx")
    assert rc == 0, text
    value = got["UCX_NET_DEVICES"]
    warn = _ucx_warning("lo," + value)
    entries = value.split(",")
    named = "','".join(entries)
    assert (f"network device{'s' if len(entries) > 1 else ''} '{named}' "
            f"{'are' if len(entries) > 1 else 'is'} not available") in warn, warn
    assert "'lo'(tcp)" in warn and "'lo'," not in warn.split("available")[0]
    assert _ucx_warning("lo") == ""                      # an exact name is taken
    assert "device 'l' is not available" in _ucx_warning("l")  # no prefixes


def test_mooncake_topology_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Mooncake's Topology::parse takes an object of 'cpu:NODE'/'cuda:ORDINAL' keys, each
    exactly [[preferred names], [other names]] (its rules, as facts; Mooncake's own
    parser is C++ inside its wheel): every NUMA node and GPU of the tree has its key,
    each GPU prefers the devices placement chose, and every name is a device of the
    tree."""
    out = tmp_path / "mc.json"
    rc, got, text = _env(capsys, "--fixture", "gpu-pcie-2socket", "--for", "mooncake",
                         "--map", str(out))
    assert rc == 0 and got == {"MC_CUSTOM_TOPO_JSON": str(out)}, text
    doc = json.loads(out.read_text())
    tree = cache.fixture_tree("gpu-pcie-2socket")
    nodes = sorted(n[4:] for n in os.listdir(Path(tree.sysfs) / "devices/system/node")
                   if n.startswith("node"))
    host = read_host(tree.sysfs)
    plan = {a.gpu.index: [n.device for n in a.nics] for a in assign(host) if a.gpu}
    assert set(doc) == {f"cpu:{n}" for n in nodes} | {f"cuda:{i}" for i in plan}
    names = set(os.listdir(Path(tree.sysfs) / "class/infiniband"))
    for key, value in doc.items():
        assert isinstance(value, list) and len(value) == 2, key
        assert all(isinstance(d, str) and d in names for part in value for d in part), key
        assert not set(value[0]) & set(value[1]), key
    assert {i: doc[f"cuda:{i}"][0] for i in plan} == plan
    assert cli.main(["env", "--fixture", "gpu-pcie-2socket", "--for", "mooncake"]) == 1
    assert "--map FILE writes one" in capsys.readouterr().err

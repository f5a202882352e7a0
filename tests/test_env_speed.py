"""What keeps ``sysverbs env`` and ``run --dry-run`` near ``sysverbs topo``'s cost
(issue 40; benchmarks/bench_run.py measures the times, nothing here does): the modules
they load import neither ``dataclasses`` (it brings ``inspect``, ``ast``, ``dis``),
``typing`` nor ``json``; the records those modules declare without dataclasses behave
as the frozen dataclasses they were; an InfiniBand port's IPoIB netdevs, found without
reading the whole device, are those :func:`device_location` finds; and ``env`` warns
about the rank's GPU as placement placed it, without placing it again."""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import sysverbs
from sysverbs import testing
from sysverbs.devices.attributes import numbered_entries
from sysverbs.devices.location import device_location
from sysverbs.ground.records import FrozenRecord
from sysverbs.rank.environment import rank_environment, read_nics

PACKAGE = Path(sysverbs.__file__).resolve().parent
#: the packages ``env`` and ``run`` load beyond ``topo``'s (tests/test_placement.py
#: holds topo's own list)
THEIRS = ("rank", "devices/attributes.py", "devices/location.py")


@pytest.fixture(scope="module")
def gpu_host(tmp_path_factory: pytest.TempPathFactory) -> testing.FakeHost:
    """gpu-pcie-2socket: GPUs and NICs on two sockets."""
    return testing.materialize("gpu-pcie-2socket", tmp_path_factory.mktemp("2s"))


def test_env_and_run_load_neither_dataclasses_typing_nor_json(
        gpu_host: testing.FakeHost) -> None:
    """One child runs both commands (a RoCE rank: its GID table, NCCL's check and its
    GID warning, exit status 1); what the interpreter loads by itself (PyPy's site
    loads typing) does not count."""
    where = ["--sysfs-path", str(gpu_host.sysfs), "--dev-dir", str(gpu_host.dev),
             "--providers", "builtin", "--source", "sysfs"]
    unwanted = ["dataclasses", "inspect", "ast", "typing", "json"]
    code = ("import contextlib, io, sys\n"
            "before = set(sys.modules)\n"
            "from sysverbs.cli import main\n"
            "for argv in (['env', '--local-rank', '1'], ['run', '--dry-run', "
            "'--local-rank', '1', '--cpu', 'exclusive']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"        rc = main(argv + {where!r})\n"
            "    assert rc in (0, 1) and 'mlx5_1:1' in out.getvalue(), (argv, out.getvalue())\n"
            f"print([m for m in {unwanted!r} if m in set(sys.modules) - before])")
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "SYSFS_PATH")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def _frozen_records() -> list[type[FrozenRecord]]:
    """Every FrozenRecord of the modules ``env`` and ``run`` load beyond topo's (found
    in the source, so that a new one is checked without being listed here)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(THEIRS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and b.id == "FrozenRecord" for b in node.bases):
                module = "sysverbs." + rel[:-3].replace("/", ".")
                found.append(getattr(importlib.import_module(module), node.name))
    return found


RECORDS = _frozen_records()


def test_the_records_are_found() -> None:
    assert {c.__name__ for c in RECORDS} >= {
        "Nic", "Netdev", "Variable", "RankEnvironment", "GidTable", "GidChoice", "HcaFilter",
        "IbSelection", "LintResult", "Rate", "PortAttributes", "DeviceLocation"}


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_records_behave_as_frozen_dataclasses(cls: type[FrozenRecord]) -> None:
    """Built by keyword in ``_fields`` order (defaults as before), equal and hashed by
    their fields, frozen, shown as ``Name(field=value, ...)``, copied, pickled and
    ``_replace``d (what dataclasses.replace() did)."""
    params = inspect.signature(cls).parameters
    assert tuple(params) == cls._fields
    required = {n: f"value {i}" for i, (n, p) in enumerate(params.items())
                if p.default is p.empty}
    record = cls(**required)
    values = {n: getattr(record, n) for n in cls._fields}
    assert values == {n: required.get(n, p.default) for n, p in params.items()}
    twin = cls(**required)
    assert record == twin and hash(record) == hash(twin) and record is not twin
    assert record != cls(**{**required, next(iter(required)): "other"})
    inner = ", ".join(f"{n}={v!r}" for n, v in values.items())
    assert repr(record) == f"{cls.__name__}({inner})"
    for name in cls._fields:
        with pytest.raises(AttributeError):
            setattr(record, name, "new")
    with pytest.raises(AttributeError):
        record.extra = 1  # type: ignore[attr-defined]
    first = next(iter(required))
    changed = record._replace(**{first: "changed"})
    assert type(changed) is cls and getattr(changed, first) == "changed"
    assert getattr(record, first) == required[first]
    with pytest.raises(ValueError, match="unexpected field names: \\['nope'\\]"):
        record._replace(nope=1)
    for clone in (pickle.loads(pickle.dumps(record)), copy.copy(record), copy.deepcopy(record)):
        assert type(clone) is cls and clone == record


@pytest.mark.parametrize("fixture", ["mlx4", "smi", "mlx5-cx6"])
def test_ipoib_netdevs_are_device_locations(fixture: str, tmp_path: Path) -> None:
    """read_nics() finds an InfiniBand port's netdevs by its GUID alone; they are those
    device_location() finds reading the whole device (mlx4: two ports, one PCI
    function, two IPoIB netdevs told apart by the GUID)."""
    host = testing.materialize(fixture, tmp_path)
    cls = Path(host.sysfs) / "class" / "infiniband"
    seen = 0
    for dev in sorted(os.listdir(cls)):
        where = device_location(dev, sysfs_path=host.sysfs, dev_dir=host.dev)
        for port in numbered_entries(os.fsencode(cls / dev / "ports")):
            nic, = read_nics([f"{dev}:{port}"], sysfs_path=host.sysfs, dev_dir=host.dev,
                             addresses={})
            assert [n.name for n in nic.netdevs] == list(where.port_netdevs(port)), (dev, port)
            seen += nic.link_layer == "InfiniBand" and bool(nic.netdevs)
    assert seen


def test_rank_environment_says_the_gpu_placement_chose(gpu_host: testing.FakeHost) -> None:
    """RankEnvironment.gpu is placement's GPU for the rank (None for named NICs): what
    ``env``'s link-layer warning is about (tests/test_consistency.py checks those
    warnings for every rank of every fixture)."""
    opts = {"sysfs_path": str(gpu_host.sysfs), "dev_dir": str(gpu_host.dev)}
    for rank in (0, 1):
        placed = rank_environment(local_rank=rank, environ={}, **opts)
        assert placed.gpu == rank and placed.nics
        assert any(n.startswith(f"placement: rank {rank} (given) -> GPU{rank} ")
                   for n in placed.notes), placed.notes
    nic = placed.nics[0]
    assert rank_environment([(nic.device, nic.port)], environ={}, **opts).gpu is None

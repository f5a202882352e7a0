"""One contract for every ``sysverbs`` command (docs/cli.md, "The contract"), checked by
one table over all of them: exit statuses, the error prefix, ``--json`` with a ``schema``
key validated against the JSON Schema file the package ships, the same answer for a
root that is not a sysfs tree and for a host without RDMA devices, warnings on stderr.

``devices`` and ``devinfo`` answer as ``ibv_devices`` and ``ibv_devinfo``: what they print
is compared with the real tools in tests/test_oracle_cli.py; here they are held to the
rest of the contract (``--json``, schemas, usage errors).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache as memo
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import pytest

from sysverbs.cli import COMMANDS, _parser
from sysverbs.cli.completion import command_words
from sysverbs.cli.contract import POLICY
from sysverbs.placement import RANK_VARIABLES
from sysverbs.rank.launch import SIZE_VARIABLES
from sysverbs.testing import fixture_names
from tests.inprocess import Run, run_main

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "sysverbs" / "cli" / "schemas"


class Command(NamedTuple):
    """A command as the contract sees it: how to run it with --json on a fixture, its
    policy for a host without RDMA, the schemas its documents may name."""

    argv: tuple[str, ...]
    policy: str
    schemas: tuple[str, ...]
    #: exit statuses it may give on a bundled fixture
    statuses: frozenset[int] = frozenset({0, 1})


TABLE: dict[str, Command] = {
    "devices": Command(("devices",), "rdma-core", ("sysverbs.devices/1",)),
    "devinfo": Command(("devinfo",), "rdma-core", ("sysverbs.devinfo/1",),
                       frozenset({0, 255})),
    "devinfo -l": Command(("devinfo", "-l"), "rdma-core", ("sysverbs.devinfo-list/1",),
                          frozenset({0, 255})),
    "netdev": Command(("netdev",), "fails", ("sysverbs.netdev/1",)),
    "doctor": Command(("doctor", "--predict"), "reports", ("sysverbs.doctor/1",)),
    "watch": Command(("watch", "--existing", "--timeout", "0.2", "--interval", "0.05"),
                     "waits", ("sysverbs.event/1",), frozenset({0})),
    "snapshot": Command(("snapshot",), "reports", ("sysverbs.snapshot/1",)),
    "topo": Command(("topo",), "gpus", ("sysverbs.topo/1",)),
    "topo --assign": Command(("topo", "--assign"), "gpus", ("sysverbs.assign/1",)),
    "nccl check": Command(("nccl", "check"), "reports", ("sysverbs.nccl-check/1",)),
    "env": Command(("env", "--local-rank", "0"), "fails", ("sysverbs.env/1",)),
    "env --map": Command(("env", "--map", "-"), "fails", ("sysverbs.env/1",
                                                           "sysverbs.nic-map/1")),
    "run": Command(("run", "--dry-run", "--local-rank", "0", "--cpu", "exclusive"), "gpus",
                   ("sysverbs.run/1",)),
    "metrics": Command(("metrics",), "waits", ("sysverbs.metrics/1",), frozenset({0})),
    "nfd": Command(("nfd",), "waits", ("sysverbs.nfd/1",), frozenset({0})),
    "fixtures": Command(("fixtures",), "none", ("sysverbs.fixtures/1",), frozenset({0})),
}


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), LC_ALL="C.UTF-8")
    env.pop("SYSFS_PATH", None)
    for name in (*RANK_VARIABLES, *SIZE_VARIABLES, "NCCL_IB_HCA", "CUDA_VISIBLE_DEVICES"):
        env.pop(name, None)
    return env


def sv(*argv: str) -> Run:
    """``python -m sysverbs ARGV``: the real entry point, in a child."""
    p = subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                       text=True, timeout=120, env=_env())
    return Run(p.returncode, p.stdout, p.stderr)


def sv_here(*argv: str) -> Run:
    """The same command in this process (tests/inprocess.py): what a child prints."""
    return run_main(list(argv), _env())


#: The fixtures whose every command also runs through the real entry point, in a child:
#: a plain host, a GPU host, an unusable device.
CHILD_FIXTURES = ("rxe", "gpu-dgx-a100", "smi")


@memo
def validator(schema: str) -> Any:
    name = schema.split(".", 1)[1].split("/")[0]
    doc = json.loads((SCHEMAS / f"{name}.json").read_text())
    return jsonschema.Draft202012Validator(doc)


def documents(cmd: str, out: str) -> list[Any]:
    if cmd == "watch":
        return [json.loads(line) for line in out.splitlines()]
    return [json.loads(out)]


def check_documents(cmd: str, run: Run) -> list[Any]:
    docs = documents(cmd, run.out)
    for doc in docs:
        assert doc["schema"] in TABLE[cmd].schemas, (cmd, doc["schema"])
        errors = sorted(validator(doc["schema"]).iter_errors(doc), key=str)
        assert not errors, (cmd, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]])
        assert "error" not in doc or run.rc != 0, (cmd, doc)
    return docs


STDERR_OK = re.compile(
    r"sysverbs (?P<cmd>[a-z]+(?: check)?): (?:error|warning): .+"
    # rdma-core's own lines, byte for byte as the C tools print them
    r"|Failed to get IB devices list: .+|No IB devices found|libibverbs: Warning: .+"
    r"|IB device '.*' wasn't found|sysverbs snapshot: wrote .+")


def check_stderr(cmd: str, err: str) -> None:
    """Every stderr line is a prefixed message of this command (or rdma-core's)."""
    name = cmd.split(" -")[0]
    for line in err.splitlines():
        m = STDERR_OK.fullmatch(line)
        assert m is not None, (cmd, line)
        if m.group("cmd") is not None:
            assert m.group("cmd") == name, (cmd, line)


def test_the_table_covers_every_command() -> None:
    """Every command of the parser is in the table, with the policy the code applies."""
    words = set(command_words(_parser())) - {"nccl"}
    assert words == {c.split(" -")[0] for c in TABLE}
    assert set(COMMANDS) == {c.split()[0] for c in TABLE}
    for cmd, spec in TABLE.items():
        assert POLICY[cmd.split(" -")[0]] == spec.policy, cmd


def test_docs_table_is_the_contract() -> None:
    """docs/cli.md's contract table names every command, with its schemas."""
    text = (ROOT / "docs" / "cli.md").read_text()
    rows = {}
    for line in text[text.index("## The contract"):].splitlines():
        m = re.match(r"\| `([a-z ]+)` \|(.*)\|$", line)
        if m:
            rows[m.group(1)] = re.findall(r"`(sysverbs\.[a-z-]+/1)`", m.group(2))
    want: dict[str, set[str]] = {}
    for cmd, spec in TABLE.items():
        want.setdefault(cmd.split(" -")[0], set()).update(spec.schemas)
    assert {k: set(v) for k, v in rows.items()} == want


def test_schema_files_are_schemas_and_each_is_used() -> None:
    used = {s for spec in TABLE.values() for s in spec.schemas}
    files = sorted(SCHEMAS.glob("*.json"))
    assert {json.loads(f.read_text())["$id"] for f in files} == used
    for f in files:
        doc = json.loads(f.read_text())
        jsonschema.Draft202012Validator.check_schema(doc)
        assert doc["$id"] == f"sysverbs.{f.stem}/1"


@pytest.mark.parametrize("fixture", fixture_names())
def test_json_of_every_command_on_every_fixture(fixture: str) -> None:
    """On every bundled fixture, every command's --json is one valid document of its
    schema (an error document when it fails), stderr holds only prefixed messages, and
    the exit status is one the contract allows."""
    for cmd, spec in TABLE.items():
        argv = [*spec.argv, "--json"] + ([] if cmd == "fixtures" else ["--fixture", fixture])
        run = sv_here(*argv)
        assert run.rc in spec.statuses, (cmd, run.rc, run.err)
        check_documents(cmd, run)
        check_stderr(cmd, run.err)
        if fixture in CHILD_FIXTURES:
            child = sv(*argv)
            assert (child.rc, _stable(cmd, child.out), child.err) == \
                (run.rc, _stable(cmd, run.out), run.err), (cmd, fixture)


def _stable(cmd: str, out: str) -> Any:
    """A command's documents without what changes from one run to the next: times
    and durations (the numbers that are not whole, the ISO 8601 times)."""
    def walk(x: Any) -> Any:
        if isinstance(x, float) and not x.is_integer():
            return "a fraction"
        if isinstance(x, str):
            return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z?", "a time", x)
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x
    return [walk(d) for d in documents(cmd, out)]


def _tree(tmp_path: Path, *, infiniband: bool) -> Path:
    root = tmp_path / "sys"
    (root / "devices" / "system").mkdir(parents=True)
    (root / "class" / "net").mkdir(parents=True)
    if infiniband:
        (root / "class" / "infiniband").mkdir()
    return root


def _expect_root_answer(cmd: str, spec: Command, run: Run, message: str) -> None:
    name = cmd.split(" -")[0]
    if spec.policy == "fails" or (spec.policy == "gpus" and "not a sysfs" in message):
        assert run.rc == 1, (cmd, run)
        assert run.err == f"sysverbs {name}: error: {message}\n", cmd
    elif spec.policy == "gpus":  # no GPU either: one line, exit 1
        assert run.rc == 1 and run.err.count("\n") == 1, (cmd, run)
        assert run.err.startswith(f"sysverbs {name}: error: no GPU and no RDMA device on "), cmd
    elif "not a sysfs" in message:
        assert run.rc == 1 and run.err == f"sysverbs {name}: error: {message}\n", (cmd, run)
    elif spec.policy == "reports":
        assert run.rc == 1, (cmd, run)
        assert run.err.splitlines()[0] == f"sysverbs {name}: warning: {message}", cmd
    elif spec.policy == "waits":
        assert run.rc == 0 and run.err.splitlines()[0] == f"sysverbs {name}: warning: {message}"


@pytest.mark.parametrize("case", ["not-sysfs", "no-class-infiniband", "empty-class-infiniband"])
def test_one_answer_for_no_sysfs_and_no_rdma(case: str, tmp_path: Path) -> None:
    """A root that is not a sysfs tree, and a sysfs tree without RDMA devices, get the
    same message from every command (error or warning, by its policy), the same exit
    status, and with --json an error document of the command's schema."""
    if case == "not-sysfs":
        root = tmp_path / "nonexistent"
        message = f"{root}: not a sysfs tree (no devices/)"
    else:
        root = _tree(tmp_path, infiniband=case == "empty-class-infiniband")
        ib = root / "class" / "infiniband"
        message = (f"no RDMA device: {ib} is empty (the RDMA drivers found no adapter)"
                   if case.startswith("empty") else
                   f"no RDMA device: {ib} does not exist (no RDMA driver is loaded, or this "
                   "is not the host's sysfs)")
    for cmd, spec in TABLE.items():
        if spec.policy in ("rdma-core", "none"):
            continue
        argv = [*spec.argv, "--sysfs-path", str(root), "--dev-dir", str(tmp_path / "dev")]
        run = sv_here(*argv)
        _expect_root_answer(cmd, spec, run, message)
        js = sv_here(*argv, "--json")
        assert js.rc == run.rc and js.err.splitlines()[:1] == run.err.splitlines()[:1], cmd
        docs = check_documents(cmd, js)
        if spec.policy == "fails" or "not a sysfs" in message or spec.policy == "gpus":
            kind = "not-sysfs" if "not a sysfs" in message else (
                "nothing-found" if spec.policy == "gpus" else "no-rdma")
            assert docs == [{"schema": spec.schemas[0],
                             "error": {"kind": kind, "message": docs[0]["error"]["message"]}}]


def test_rdma_core_commands_keep_rdma_cores_answer(tmp_path: Path) -> None:
    """devices and devinfo answer a missing root as ibv_devices / ibv_devinfo do (the
    oracle tests compare the bytes), and with --json add an error document."""
    root = str(tmp_path / "nonexistent")
    for cmd, rc in (("devices", 1), ("devinfo", 255), ("devinfo -l", 255)):
        spec = TABLE[cmd]
        run = sv(*spec.argv, "--sysfs-path", root)
        assert (run.rc, run.out) == (rc, ""), cmd
        assert run.err == "Failed to get IB devices list: Function not implemented\n", cmd
        js = sv(*spec.argv, "--sysfs-path", root, "--json")
        assert js.rc == rc and js.err == run.err
        (doc,) = check_documents(cmd, js)
        assert doc["error"]["kind"] == "no-device-list"


USAGE_ERRORS = [
    ("--bogus-option",),
    ("--fixture", "no-such-host"),
    ("--fixture", "rxe", "--sysfs-path", "/sys"),
    ("--fixture", "rxe", "--dev-dir", "/dev/infiniband"),
    ("--source", "nope"),
]


@pytest.mark.parametrize("extra", USAGE_ERRORS, ids=lambda e: " ".join(e))
def test_usage_errors_exit_2_with_the_prefix(extra: tuple[str, ...]) -> None:
    """A usage error: exit 2, no document on stdout, and the last stderr line is
    ``sysverbs <command>: error: ...``."""
    for cmd, spec in TABLE.items():
        if cmd == "fixtures" and extra[0] != "--bogus-option":
            continue
        name = cmd.split(" -")[0]
        run = sv_here(*spec.argv, *extra, "--json")
        assert run.rc == 2 and run.out == "", (cmd, extra, run)
        if extra == USAGE_ERRORS[0]:  # argparse's own exit, through the real entry point
            assert sv(*spec.argv, *extra, "--json") == run, cmd
        assert run.err.splitlines()[-1].startswith(f"sysverbs {name}: error: "), (cmd, run.err)


def test_unknown_fixture_says_where_the_names_are() -> None:
    run = sv("topo", "--fixture", "gpu-hgx")
    assert run.rc == 2 and "sysverbs fixtures" in run.err and "gpu-hgx-h100" in run.err


def test_version_and_help() -> None:
    from sysverbs import __version__

    run = sv("--version")
    assert (run.rc, run.out) == (0, f"sysverbs {__version__}\n")
    top = sv("--help").out
    for cmd in COMMANDS:  # each command is listed once
        assert len(re.findall(rf"^    {cmd} ", top, re.M)) == 1, cmd

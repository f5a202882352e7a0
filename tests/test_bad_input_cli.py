"""Every command on broken trees and with bad option values (issue 25, item 9): an exit
status that docs/cli.md allows, an error line when it fails, never a traceback or a hang.

docs/cli.md's contract: ``devices`` 0, or 1 when the list cannot be read;
``devinfo`` 0, or 255 (no list, no device, ``-d`` names none); ``doctor`` 0 when every
device is usable, else 1; ``watch`` 0 at ``--timeout``/``--count``; ``snapshot`` 1 when
the sysfs root cannot be read; ``nccl check`` 0 clean, 1 warnings, 2 errors; every
command 2 for a usage error or a bad option value.  ``netdev``, ``topo`` and ``env``
have no status of their own there: 0, or 1 with a ``sysverbs <command>:`` line, as
:func:`sysverbs.cli.main` gives any command an OSError.

Each command runs on each kind of :mod:`tests.bad_input` corruption, in process
(:func:`sysverbs.cli.main`: an exception out of it is a traceback), and once per kind
as ``python -m sysverbs`` in a subprocess with a timeout.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from sysverbs import cli
from sysverbs.testing import FakeHost
from tests.bad_input import CORRUPTIONS, build_host, copy_host, corrupt

REPO = Path(__file__).resolve().parents[1]

#: The commands, with options that make each run its whole path and stop by itself.
COMMANDS: dict[str, tuple[str, ...]] = {
    "devices": ("devices",),
    "devices --json": ("devices", "--json"),
    "devinfo": ("devinfo", "-v"),
    "devinfo -l": ("devinfo", "-l"),
    "devinfo --json": ("devinfo", "--json"),
    "netdev": ("netdev", "--json"),
    "doctor": ("doctor", "-v"),
    "doctor --json": ("doctor", "--json"),
    "topo": ("topo",),
    "topo --assign": ("topo", "--assign", "--json"),
    "env": ("env", "--format", "json", "--local-rank", "0"),
    "env --device": ("env", "--device", "rxe0:1"),
    "nccl check": ("nccl", "check", "mlx5,rxe0:1"),
    "nccl check --json": ("nccl", "check", "--json"),
    "snapshot": ("snapshot", "--all-devices"),
    "watch": ("watch", "--existing", "--json", "--count", "3", "--timeout", "1",
              "--backend", "poll", "--interval", "0.1"),
    "metrics": ("metrics",),
    "metrics --json": ("metrics", "--json"),
}
_TAKES_PROC = ("topo", "env", "metrics")

#: Exit statuses docs/cli.md allows for each command (2, a usage error, for all).
ALLOWED: dict[str, frozenset[int]] = {
    "devices": frozenset({0, 1}), "devinfo": frozenset({0, 255}),
    "netdev": frozenset({0, 1}), "doctor": frozenset({0, 1}), "topo": frozenset({0, 1}),
    "env": frozenset({0, 1}), "nccl": frozenset({0, 1}), "snapshot": frozenset({0, 1}),
    "watch": frozenset({0, 1}), "metrics": frozenset({0, 1}),
}
#: The statuses that say the command failed, so stderr must say why.
FAILED = {"devices": {1}, "devinfo": {255}, "netdev": {1}, "doctor": set(), "topo": {1},
          "env": {1},
          "nccl": set(), "snapshot": {1}, "watch": {1}, "metrics": {1}}
#: How a failure's line starts: the C tools' own messages, else ``sysverbs``.
ERROR_PREFIXES = ("sysverbs", "Failed to get IB devices list", "No IB devices found",
                  "IB device '", "libibverbs: ")


def argv(command: Sequence[str], h: FakeHost) -> list[str]:
    out = [*command, "--sysfs-path", str(h.sysfs), "--dev-dir", str(h.dev),
           "--source", "sysfs", "--providers", "builtin"]
    if command[0] in _TAKES_PROC:
        out += ["--proc-path", str(h.root / "proc")]
    if command[0] in ("env", "nccl", "metrics"):
        out += ["--conf-root", str(h.root)]
    if command[0] == "snapshot":
        out += ["-o", str(h.root / "snapshot.umockdev")]
    return out


def check(command: Sequence[str], rc: int, stderr: str) -> None:
    """The exit status is one docs/cli.md allows, and a failure says why."""
    name = command[0]
    assert "Traceback" not in stderr, stderr
    assert rc == 2 or rc in ALLOWED[name], (command, rc, stderr)
    if rc == 2 or rc in FAILED[name]:
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        assert lines and lines[-1].startswith(ERROR_PREFIXES), (command, rc, stderr)


def run_in_process(words: Sequence[str]) -> tuple[int, str]:
    """:func:`sysverbs.cli.main` with stdin empty and stdout/stderr captured; an
    exception out of it fails the test (it would be a traceback).  The streams are
    strict UTF-8, as Python makes them in a UTF-8 locale such as en_US.UTF-8 (not in
    the C locale): text from a junk file must still be printed."""
    streams = (io.TextIOWrapper(io.BytesIO()),
               io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True),
               io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace",
                                write_through=True))
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        try:
            rc = cli.main(list(words))
        except SystemExit as e:  # argparse
            rc = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    streams[2].flush()
    err: bytes = streams[2].buffer.getvalue()  # type: ignore[attr-defined]
    return rc, err.decode("utf-8", "replace")


def run_subprocess(words: Sequence[str], timeout: float = 30) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-m", "sysverbs", *words], cwd=REPO,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                       env={**os.environ, "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": ""})
    return r.returncode, r.stderr.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> FakeHost:
    return build_host(tmp_path_factory.mktemp("bad-input-cli") / "host")


@pytest.fixture(scope="module")
def broken(host: FakeHost, tmp_path_factory: pytest.TempPathFactory) -> dict[str, FakeHost]:
    """One copy of the host per corruption kind."""
    out = {}
    for kind in CORRUPTIONS:
        h = copy_host(host, tmp_path_factory.mktemp(kind) / "h")
        corrupt(h, kind)
        out[kind] = h
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["valid", *CORRUPTIONS])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_command_on_broken_tree(host: FakeHost, broken: dict[str, FakeHost], kind: str,
                                command: str) -> None:
    h = host if kind == "valid" else broken[kind]
    words = argv(COMMANDS[command], h)
    rc, err = run_in_process(words)
    check(words, rc, err)
    if kind == "valid":
        assert rc in (0, 1), (command, rc, err)  # 1: doctor (no /dev node), nccl warnings


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["fifo", "link-self-loop", "junk", "dangling"])
def test_commands_as_processes(broken: dict[str, FakeHost], kind: str) -> None:
    """The same as real processes (exit status, stderr): a few commands per kind."""
    for command in ("devinfo", "doctor", "topo --assign", "env", "nccl check", "snapshot",
                    "watch", "metrics"):
        words = argv(COMMANDS[command], broken[kind])
        rc, err = run_subprocess(words)
        check(words, rc, err)


def _roots(tmp: Path) -> dict[str, Path]:
    fifo, file = tmp / "fifo", tmp / "file"
    os.mkfifo(fifo)
    file.write_bytes(b"junk")
    (tmp / "loop").symlink_to("loop")
    return {"missing": tmp / "missing", "fifo": fifo, "file": file, "loop": tmp / "loop",
            "empty-dir": tmp}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("root", ["missing", "fifo", "file", "loop", "empty-dir"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_command_on_no_tree(tmp_path: Path, root: str, command: str) -> None:
    """A sysfs root that is missing, a FIFO, a file, a looping link or empty."""
    r = _roots(tmp_path)[root]
    h = FakeHost(tmp_path, r, r / "dev", ())
    words = argv(COMMANDS[command], h)
    rc, err = run_in_process(words)
    check(words, rc, err)


_E40 = "é" * 40

#: Bad option values, each against the valid host: the status docs/cli.md gives.
BAD_OPTIONS: list[tuple[tuple[str, ...], frozenset[int]]] = [
    (("env", "--local-rank", "a"), frozenset({2})),
    (("env", "--local-rank", "-1"), frozenset({2})),
    (("env", "--device", "x:y"), frozenset({2})),
    (("env", "--device", _E40), frozenset({1})),
    (("env", "--format", "xml"), frozenset({2})),
    (("topo", "--assign", "--rank", "a"), frozenset({2})),
    (("topo", "--assign", "--rank", "-1"), frozenset({2})),
    (("topo", "--assign", "--min-rate", "x"), frozenset({2})),
    (("nccl", "check", _E40), frozenset({1})),
    (("nccl", "check", "--json", _E40), frozenset({1})),
    (("nccl", "check", "--nccl-version", "junk"), frozenset({2})),
    (("devices", "--rdma-core", "junk"), frozenset({2})),
    (("devices", "--fixture", "nope"), frozenset({2})),
    (("devices", "--source", "nowhere"), frozenset({2})),
    (("watch", "--timeout", "nan"), frozenset({2})),
    (("watch", "--timeout", "-1"), frozenset({2})),
    (("watch", "--interval", "nan", "--timeout", "1"), frozenset({2})),
    (("watch", "--interval", "0", "--timeout", "1"), frozenset({2})),
    (("watch", "--count", "x"), frozenset({2})),
    (("devinfo", "-d", "nope"), frozenset({255})),
    (("devinfo", "-i", "9"), frozenset({4})),
    (("devinfo", "-i", "0"), frozenset({1})),
    (("devinfo", "-i", "zz"), frozenset({1})),
    (("snapshot", "--bogus"), frozenset({2})),
    (("nope",), frozenset({2})),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("words,statuses", BAD_OPTIONS, ids=[" ".join(w).replace(_E40, "e40")
                                                      for w, _ in BAD_OPTIONS])
def test_bad_option_values(host: FakeHost, words: tuple[str, ...],
                           statuses: frozenset[int]) -> None:
    """Failed before: ``watch --timeout nan`` ended in a traceback (ValueError from
    select), ``env --local-rank -1`` exited 0 (rank -1 took the last GPU), and ``nccl
    check`` of ``'é' * 40`` printed a lone surrogate (``\\udcc3``) in its fix and JSON,
    a UnicodeEncodeError on strict UTF-8 streams."""
    full = [*words, "--sysfs-path", str(host.sysfs), "--dev-dir", str(host.dev),
            "--source", "sysfs"] if words[0] != "nope" else list(words)
    if words[0] == "watch":
        full += ["--backend", "poll"]
    rc, err = run_in_process(full)
    assert "Traceback" not in err
    assert rc in statuses, (words, rc, err)
    if rc == 2:
        assert err.strip().splitlines()[-1].startswith("sysverbs"), err


@pytest.mark.timeout(60)
def test_nccl_check_cut_name_prints_utf8(host: FakeHost) -> None:
    """``nccl check 'é' * 40`` as a process: stdout is valid UTF-8 (no byte of a cut
    character), the JSON has no ``\\udcXX``."""
    for extra in ((), ("--json",)):
        r = subprocess.run([sys.executable, "-m", "sysverbs", "nccl", "check", *extra, _E40,
                            "--sysfs-path", str(host.sysfs), "--source", "sysfs"],
                           cwd=REPO, capture_output=True, timeout=30,
                           env={**os.environ, "LC_ALL": "C.UTF-8"})
        assert r.returncode == 1, r.stderr
        text = r.stdout.decode("utf-8")  # strict: a lone 0xc3 would fail here
        if extra:
            doc = json.loads(text)
            cut = [w["message"] for w in doc["warnings"] if w["code"] == "too-long"]
            assert len(cut) == 1 and "to '" + "é" * 31 + "'" in cut[0]
            json.dumps(doc, ensure_ascii=False).encode("utf-8")  # no \udcXX in it
        else:  # the name as NCCL cuts it (no fix: no device has a name that long)
            assert "cut at 63 bytes to '" + "é" * 31 + "'" in text


# ----------------------------------------------------------------------------- unprivileged

#: One command of each kind, as uid 65534 runs them.
_AS_USER = ("devices", "devinfo", "netdev", "doctor", "topo --assign", "env", "nccl check",
            "snapshot", "watch", "metrics --json")


def _unreadable(h: FakeHost, what: str) -> None:
    """Mode 0 on every attribute file, or on every directory below the devices' own."""
    from tests.bad_input import attribute_files

    if what == "files":
        for p in attribute_files(h.sysfs):
            os.chmod(p, 0)
        return
    for top in ("class/infiniband", "class/net", "devices"):
        for dirpath, dirnames, _ in os.walk(h.sysfs / top, topdown=False):
            for d in dirnames:
                p = Path(dirpath) / d
                if not p.is_symlink() and d in ("ports", "gids", "gid_attrs", "net",
                                                 "infiniband", "power", "queues"):
                    os.chmod(p, 0)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("what", ["files", "directories"])
def test_commands_unprivileged(host: FakeHost, what: str) -> None:
    """As uid 65534, on a tree whose files (or directories) it cannot read: root's
    ``chmod 0`` denies nothing to root, so only another user sees EACCES."""
    import shutil
    import tempfile

    from tests import staging

    python = staging.user_python()
    code_env = staging.user_env({"LC_ALL": "C.UTF-8"})
    base = Path(tempfile.mkdtemp(prefix="sysverbs-bad-input-", dir=staging.stage().parent))
    try:
        os.chmod(base, 0o755)
        h = copy_host(host, base / "h")
        os.chmod(h.root, 0o777)  # snapshot -o writes here
        _unreadable(h, what)
        for command in _AS_USER:
            words = argv(COMMANDS[command], h)
            r = subprocess.run(
                [*staging.AS_NOBODY, python, "-m", "sysverbs", *words],
                cwd="/", stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                env=code_env)
            check(words, r.returncode, r.stderr.decode("utf-8", "replace"))
    finally:
        for dirpath, dirnames, _ in os.walk(base):
            for d in dirnames:
                p = Path(dirpath) / d
                if not p.is_symlink():
                    os.chmod(p, 0o755)
        shutil.rmtree(base, ignore_errors=True)

"""The command line's basics (issue 40 item 11, issue 42 item 8): every interval within
documented bounds, ``--min-rate`` and ``--link-layer`` as users write them, the shared
options before the command, Ctrl-C anywhere, and one rule for the files the fleet
commands write (once, unless ``--interval``).  Each of these ended in a traceback, a
misleading message or a busy loop before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sysverbs.cli import COMMANDS, _parser
from sysverbs.cli.completion import command_words
from sysverbs.cli.contract import (
    GLOBAL_OPTIONS,
    POLL_INTERVAL,
    REWRITE_INTERVAL,
    hoist_options,
)

ROOT = Path(__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    """A child's environment: this tree's sysverbs, no variable of the host's RDMA."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), LC_ALL="C.UTF-8")
    for name in ("SYSFS_PATH", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_CONF_FILE"):
        env.pop(name, None)
    return env


def sv(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                          text=True, env=child_env(), timeout=timeout)


# ------------------------------------------------------------------------ intervals

BAD_SECONDS = ("1e20", "1e308", "1e10", "inf", "-inf", "nan", "-1", "0", "0.000001", "x", "")
INTERVALS = {
    "metrics": (["metrics", "--fixture", "rxe", "--textfile", "/tmp"], REWRITE_INTERVAL),
    "nfd": (["nfd", "--fixture", "rxe", "--features-dir", "/tmp"], REWRITE_INTERVAL),
    "watch": (["watch", "--fixture", "rxe"], POLL_INTERVAL),
}


@pytest.mark.parametrize("command", sorted(INTERVALS))
def test_an_interval_out_of_bounds_is_a_usage_error(command: str,
                                                    capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    """NaN, infinities, 0, negative, below the minimum (a busy loop) or past the maximum
    (``time.sleep`` overflows: a traceback after the first write): exit 2, naming the
    bounds."""
    argv, (low, high) = INTERVALS[command]
    for bad in BAD_SECONDS:
        parser = _parser(command)
        with pytest.raises(SystemExit) as e:
            parser.parse_args([*argv, f"--interval={bad}"])
        err = capsys.readouterr().err
        assert e.value.code == 2, bad
        assert err.splitlines()[-1] == (f"sysverbs {command}: error: argument --interval: "
                                        f"{bad!r}: not a number of seconds from {low:g} to "
                                        f"{high:g}"), err
    for good in (low, high, 60):
        assert _parser(command).parse_args([*argv, "--interval", str(good)]).interval == good


@pytest.mark.parametrize("argv", [
    ["metrics", "--fixture", "rxe", "--textfile", "{tmp}", "--interval", "1e20"],
    ["nfd", "--fixture", "rxe", "--features-dir", "{tmp}", "--interval", "1e308"],
    ["metrics", "--fixture", "rxe", "--textfile", "{tmp}", "--interval", "1e10"],
], ids=lambda a: " ".join(a[-2:]) + " " + a[0])
def test_a_huge_interval_ends_with_2_not_a_traceback(argv: list[str], tmp_path: Path) -> None:
    """Failed before: a traceback (OverflowError, ValueError) after the first write, or a
    process that sleeps for 300 years."""
    p = sv(*[w.format(tmp=tmp_path) for w in argv], timeout=30)
    assert (p.returncode, p.stdout) == (2, "")
    assert "Traceback" not in p.stderr
    assert p.stderr.splitlines()[-1].startswith(f"sysverbs {argv[0]}: error: argument "
                                                "--interval: ")
    assert os.listdir(tmp_path) == []


# -------------------------------------------------------------- topo's port filters


@pytest.mark.parametrize("bad", ["-5", "nan", "inf", "-inf", "x"])
def test_min_rate_must_be_a_rate(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed before: ``--min-rate -5`` and ``nan`` were taken (nan keeps no port)."""
    with pytest.raises(SystemExit) as e:
        _parser("topo").parse_args(["topo", f"--min-rate={bad}"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"sysverbs topo: error: argument --min-rate: {bad!r}: not a rate in Gb/s (a number "
        ">= 0)")
    assert _parser("topo").parse_args(["topo", "--min-rate", "0"]).min_rate == 0


@pytest.mark.parametrize("typed,meant", [
    ("infiniband", "InfiniBand"), ("INFINIBAND", "InfiniBand"), ("ib", "IB"),
    ("ethernet", "Ethernet"), ("eth", "Ethernet"), ("Eth", "Ethernet"), ("roce", "RoCE"),
    ("InfiniBand", "InfiniBand"), ("RoCE", "RoCE"),
])
def test_link_layer_in_any_case(typed: str, meant: str) -> None:
    """Failed before: ``--link-layer infiniband`` (ibv_devinfo writes ``InfiniBand``,
    users type it in lower case) was an invalid choice."""
    assert _parser("topo").parse_args(["topo", "--link-layer", typed]).link_layer == meant


def test_link_layer_spellings_choose_the_same_ports() -> None:
    """On a host with InfiniBand and RoCE ports, each spelling keeps the same ports as
    the documented one."""
    def chosen(layer: str) -> list[tuple[str, int]]:
        p = sv("topo", "--fixture", "gpu-hgx-h100", "--assign", "--json", "--any-state",
               "--link-layer", layer)
        assert p.returncode in (0, 1), p.stderr
        doc = json.loads(p.stdout)
        return sorted({(n["device"], n["port"]) for a in doc["assignments"] for n in a["nics"]})

    ib = chosen("InfiniBand")
    assert ib and chosen("infiniband") == ib


def test_bad_link_layer_names_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser("topo").parse_args(["topo", "--link-layer", "omnipath"])
    assert "invalid choice: 'omnipath' (choose from 'InfiniBand', 'Ethernet', 'IB', " \
        "'RoCE')" in capsys.readouterr().err


# --------------------------------------------------- shared options before the command


def test_global_options_are_the_shared_ones() -> None:
    """The table :func:`hoist_options` reads is the parser's: every option of ``devices``
    (the shared listing options and ``--json``), with whether it takes a value."""
    parser = command_words(_parser("devices"))["devices"]
    options = {s: a.nargs != 0 for a in parser._actions for s in a.option_strings
               if s.startswith("--") and s != "--help"}
    assert options == GLOBAL_OPTIONS


@pytest.mark.parametrize("words,moved", [
    ("--fixture X topo --assign", "topo --fixture X --assign"),
    ("--json devices", "devices --json"),
    ("--fixture=X --json nccl check mlx5", "nccl check --fixture=X --json mlx5"),
    ("--json run -- ls -l", "run --json -- ls -l"),
    ("--sysfs-path devices devices", "devices --sysfs-path devices"),
    ("--version", "--version"), ("--help topo", "--help topo"),
    ("--bogus devices", "--bogus devices"), ("--json", "--json"),
    ("--fixture X", "--fixture X"), ("topo --fixture X", "topo --fixture X"),
])
def test_hoist_options(words: str, moved: str) -> None:
    assert hoist_options(words.split(), COMMANDS) == moved.split()


@pytest.mark.parametrize("before,after", [
    (["--fixture", "rxe", "devices"], ["devices", "--fixture", "rxe"]),
    (["--json", "--fixture", "rxe", "devices"], ["devices", "--json", "--fixture", "rxe"]),
    (["--fixture", "gpu-hgx-h100", "topo"], ["topo", "--fixture", "gpu-hgx-h100"]),
    (["--fixture=rxe", "--json", "nccl", "check"], ["nccl", "check", "--fixture=rxe",
                                                    "--json"]),
], ids=" ".join)
def test_global_options_before_the_command(before: list[str], after: list[str]) -> None:
    """Failed before: ``sysverbs --fixture X topo`` said ``invalid choice: 'X'``,
    ``sysverbs --json devices`` ``unrecognized arguments: --json``.  Both orders give the
    same output and status."""
    a, b = sv(*before), sv(*after)
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
    # nccl check on rxe warns of its link-local GID (exit 1): the status is the
    # command's own, the same in both orders
    assert a.returncode in (0, 1) and a.stdout and "usage" not in a.stderr, a.stderr


@pytest.mark.parametrize("argv,what", [
    (["--fixture", "rxe"], "no command"),
    (["--fixture", "rxe", "bogus"], "'bogus' is not a command"),
    (["--json"], "no command"),
])
def test_options_with_no_command_after_them(argv: list[str], what: str) -> None:
    """Failed before: ``sysverbs --fixture rxe`` said ``invalid choice: 'rxe'``, as if
    the fixture were the command."""
    p = sv(*argv)
    given = " ".join(argv[:2] if argv[0] == "--fixture" else argv[:1])
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == (f"sysverbs: error: {what} after {given}: sysverbs COMMAND {given} "
                        f"(COMMAND: {', '.join(COMMANDS)})\n")


def test_an_option_the_command_lacks_is_its_own_error() -> None:
    p = sv("--fixture", "rxe", "fixtures")
    assert p.returncode == 2
    assert p.stderr.splitlines()[-1] == ("sysverbs fixtures: error: unrecognized arguments: "
                                         "--fixture rxe")


# --------------------------------------------------------------------------- Ctrl-C

# A child that runs sysverbs' main() and gets a real SIGINT at its first directory
# listing (listdir or scandir), wherever that falls: the fixture cache, the listing...
_INTERRUPTED = """
import os, signal, sys
calls = [0]
def interrupting(real):
    def call(*a, **k):
        calls[0] += 1
        if calls[0] == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return real(*a, **k)
    return call
os.listdir, os.scandir = interrupting(os.listdir), interrupting(os.scandir)
from sysverbs.cli import main
sys.exit(main(sys.argv[1:]))
"""

ONE_SHOT = [
    ["devices", "--fixture", "rxe"], ["devinfo", "--fixture", "rxe"],
    ["netdev", "--fixture", "rxe"], ["doctor", "--fixture", "rxe"],
    ["snapshot", "--fixture", "rxe"], ["topo", "--fixture", "gpu-hgx-h100", "--assign"],
    ["nccl", "check", "--fixture", "rxe"], ["env", "--fixture", "rxe"],
    ["run", "--fixture", "gpu-hgx-h100", "--dry-run", "--", "true"],
    ["metrics", "--fixture", "rxe", "--json"], ["nfd", "--fixture", "rxe"],
]


@pytest.mark.parametrize("argv", ONE_SHOT, ids=lambda a: " ".join(a[:2]))
def test_ctrl_c_in_a_one_shot_command(argv: list[str]) -> None:
    """Failed before: a KeyboardInterrupt traceback and exit 1.  Now 130 (128 + SIGINT,
    as a shell reports it) and one line."""
    p = subprocess.run([sys.executable, "-c", _INTERRUPTED, *argv], capture_output=True,
                       text=True, env=child_env(), timeout=60)
    name = " ".join(argv[:2]) if argv[0] == "nccl" else argv[0]
    assert (p.returncode, p.stderr) == (130, f"sysverbs {name}: error: interrupted\n")


def test_ctrl_c_stops_a_rewrite_loop(tmp_path: Path) -> None:
    """``metrics --textfile DIR --interval``: SIGINT after a write ends it with 130, the
    last whole file and nothing else in DIR, no traceback."""
    p = subprocess.Popen([sys.executable, "-m", "sysverbs", "metrics", "--fixture", "rxe",
                          "--textfile", str(tmp_path), "--interval", "1"],
                         stderr=subprocess.PIPE, text=True, env=child_env())
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "sysverbs.prom").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (130, "")
    assert os.listdir(tmp_path) == ["sysverbs.prom"]


# ---------------------------------------------------- once, unless --interval (both)


@pytest.mark.parametrize("argv,name", [
    (["metrics", "--fixture", "rxe", "--textfile"], "sysverbs.prom"),
    (["nfd", "--fixture", "rxe", "--features-dir"], "sysverbs"),
], ids=lambda a: a if isinstance(a, str) else a[0])
def test_a_file_is_written_once_unless_interval(argv: list[str], name: str,
                                                tmp_path: Path) -> None:
    """Failed before for nfd: ``--features-dir DIR`` looped until stopped while
    ``metrics --textfile DIR`` wrote once.  Both write once and exit 0 now."""
    p = sv(*argv, str(tmp_path), timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert os.listdir(tmp_path) == [name]

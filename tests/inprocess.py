"""``sysverbs ARGV`` run in this process, as ``python -m sysverbs ARGV`` would print it.

A child interpreter per command costs its start and the package's imports (about a
third of a small command's time); tests that run many commands on many trees (the
contract's every command on every fixture) run them here and keep a few runs through
the real entry point (``python -m sysverbs``) to show the two agree
(tests/test_cli_contract.py, ``test_in_process_runs_are_the_entry_points``).

What differs from a child: the process-wide state of the package (one device list per
set of options, ``$SYSFS_PATH`` read once) is this process's, and Python's warnings
follow pytest's filters.  The streams are byte streams under text wrappers, as a
child's are, so that the commands that write bytes (``devices``, ``devinfo``) and the
``surrogateescape`` reconfiguration work.
"""

from __future__ import annotations

import io
import os
import sys
from typing import NamedTuple
from unittest import mock

from sysverbs.cli import main

__all__ = ["Run", "run_main"]


class Run(NamedTuple):
    rc: int
    out: str
    err: str


def _stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape",
                            write_through=True)


def run_main(argv: list[str], env: dict[str, str]) -> Run:
    """Exit status, stdout and stderr of ``main(argv)`` with exactly ``env`` as the
    environment (decoded as a UTF-8 child's would be)."""
    out, err = _stream(), _stream()
    with mock.patch.dict(os.environ, env, clear=True), \
            mock.patch.object(sys, "stdout", out), mock.patch.object(sys, "stderr", err):
        try:
            rc = main(list(argv))
        except SystemExit as e:  # argparse's usage errors and --help
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out.flush()
        err.flush()
    texts = [s.buffer.getvalue().decode("utf-8", "surrogateescape")  # type: ignore[attr-defined]
             for s in (out, err)]
    return Run(rc, texts[0], texts[1])

"""The README's Python examples run, and print what the README says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _blocks() -> list[tuple[str, str]]:
    """(code, expected output or "") for each ```python block."""
    out = []
    for m in re.finditer(r"```python\n(.*?)```\n(?:\nprints\n\n```\n(.*?)```)?", README, re.S):
        out.append((m.group(1), m.group(2) or ""))
    return out


def test_readme_has_examples() -> None:
    assert len(_blocks()) >= 2


def test_readme_examples_run() -> None:
    for code, expected in _blocks():
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, "README.md", "exec"), {})
        if expected:
            assert buf.getvalue() == expected

"""The Python examples of README.md and docs/*.md run, in order, one namespace per
document, and print exactly what the text after them ("prints") shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```\n(?:\nprints\n\n```\n(.*?)```)?", re.S)


def test_docs_have_examples() -> None:
    assert len(BLOCK.findall((ROOT / "README.md").read_text())) >= 2
    assert len(BLOCK.findall((ROOT / "docs/coming-from-libibverbs.md").read_text())) >= 4


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_examples_run(doc: Path) -> None:
    namespace: dict[str, object] = {}
    for m in BLOCK.finditer(doc.read_text()):
        code, expected = m.group(1), m.group(2)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, str(doc), "exec"), namespace)
        if expected is not None:
            assert buf.getvalue() == expected, f"{doc.name}: example output differs"

"""The Python examples of README.md and docs/*.md run, in order, one namespace per
document, and print exactly what the text after them ("prints") shows."""

from __future__ import annotations

import contextlib
import importlib
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
def test_examples_run(doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An example's set_stderr() must not outlive it: later tests in this process read
    # libibverbs' messages from their own captured stderr.
    messages = importlib.import_module("sysverbs._core.messages")
    monkeypatch.setattr(messages, "_stream", messages._stream)
    namespace: dict[str, object] = {}
    for m in BLOCK.finditer(doc.read_text()):
        code, expected = m.group(1), m.group(2)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, str(doc), "exec"), namespace)
        if expected is not None:
            assert buf.getvalue() == expected, f"{doc.name}: example output differs"


def test_readme_is_short_and_keeps_its_sections() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for title in ("## The two commands", "## API", "## Command line",
                  "## Compared with libibverbs", "## Performance", "## Development"):
        assert title in text


def test_docs_cite_only_the_repository() -> None:
    """Docstrings and docs name rdma-core's functions or the project's own docs, never a
    document outside the repository."""
    texts = [p.read_text() for p in [*DOCS, *(ROOT / "sysverbs").rglob("*.py")]]
    for text in texts:
        assert not re.search(r"\bspec [0-9]|\.\./shared|\bissue [0-9]", text)

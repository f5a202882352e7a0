"""The Python examples of README.md and docs/*.md run, in order, one namespace per
document, and print exactly what the text after them ("prints") shows."""

from __future__ import annotations

import ast
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
    messages = importlib.import_module("sysverbs.ground.messages")
    monkeypatch.setattr(messages, "_stream", messages._stream)
    namespace: dict[str, object] = {}
    for m in BLOCK.finditer(doc.read_text()):
        code, expected = m.group(1), m.group(2)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, str(doc), "exec"), namespace)
        if expected is not None:
            assert buf.getvalue() == expected, f"{doc.name}: example output differs"


def test_examples_use_only_public_modules() -> None:
    """A docs example imports what a user may import: no ``sysverbs._x`` module (an
    internal can move at any release; environment.md once imported the GID index's private
    module)."""
    private = re.compile(r"\bsysverbs(?:\.[a-z]\w*)*\._\w+")
    for doc in DOCS:
        for m in BLOCK.finditer(doc.read_text()):
            assert not private.search(m.group(1)), f"{doc.name}: {private.search(m.group(1))}"
        assert not private.search(doc.read_text()), f"{doc.name} names a private module"


DOTTED = re.compile(r"(?<![\w./])sysverbs(?:\.[A-Za-z_]\w*)+(?![\w/.-])")


def _resolves(dotted: str) -> bool:
    """``dotted`` is a module of this checkout, or a module and attributes of it."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        path = ROOT.joinpath(*parts[:n])
        if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
            continue
        obj: object = importlib.import_module(".".join(parts[:n]))
        for attr in parts[n:]:
            try:
                obj = getattr(obj, attr)
            except AttributeError:
                return False
            except ImportError:  # a name pyverbs has and sysverbs refuses, by name
                return True
        return True
    return False


def test_docs_name_modules_where_the_code_lives() -> None:
    """Every ``sysverbs.x.y`` that README.md and docs/*.md name exists: a module, or a
    name in one (``sysverbs.nccl``, a second path to ``sysverbs.rank.nccl``, is gone)."""
    named = {m for doc in DOCS for m in DOTTED.findall(doc.read_text())}
    named.discard("sysverbs.feature.node.kubernetes.io")  # NFD's label namespace
    assert {"sysverbs.rank.nccl", "sysverbs.ground.errors"} <= named
    assert not _resolves("sysverbs.nccl") and _resolves("sysverbs.rank.nccl.parse_hca")
    assert sorted(m for m in named if not _resolves(m)) == []


def test_top_level_fixtures_are_the_bundled_ones() -> None:
    """``fixtures/`` at the top (docs/development.md) shows the fixtures the package ships
    (it once linked to a directory that did not exist)."""
    from sysverbs.testing import fixture_names
    from sysverbs.testing.host import FIXTURE_DIR

    top = ROOT / "fixtures"
    assert top.resolve() == FIXTURE_DIR.resolve()
    assert sorted(p.stem for p in top.glob("*.umockdev")) == sorted(fixture_names())
    assert len(fixture_names()) > 20


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


def _property_test_counts() -> dict[str, tuple[int, int]]:
    """``file::test`` -> (ci, deep) for every property test in tests/: the ``ci=`` and
    ``deep=`` numbers of the :func:`tests.fuzz.profiles.fuzz_settings` call (or of a
    helper's call with those two keywords) in the test or around its ``@given``."""
    counts: dict[str, tuple[int, int]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for top in tree.body:
            if not isinstance(top, ast.FunctionDef):
                continue
            key = f"{path.relative_to(ROOT)}::{top.name}"
            nodes = list(ast.walk(top))
            calls = [n for n in nodes if isinstance(n, ast.Call)
                     and sorted(k.arg or "" for k in n.keywords) == ["ci", "deep"]]
            given = any(isinstance(d, ast.Call) and getattr(d.func, "id", None) == "given"
                        for n in nodes if isinstance(n, ast.FunctionDef)
                        for d in n.decorator_list)
            assert len(calls) <= 1, f"{key}: two example counts"
            assert not given or calls, f"{key}: a @given without fuzz_settings(ci=, deep=)"
            if calls:
                kw = {k.arg: k.value for k in calls[0].keywords}
                assert all(isinstance(v, ast.Constant) for v in kw.values()), key
                counts[key] = (kw["ci"].value, kw["deep"].value)  # type: ignore[attr-defined]
    return counts


def test_reliability_md_lists_every_property_tests_counts() -> None:
    """docs/reliability.md's table of example counts is the code's, row for row."""
    text = (ROOT / "docs/reliability.md").read_text()
    rows = re.findall(r"^\| `(tests/[\w/]+\.py::\w+)` \| ([\d,]+) \| ([\d,]+) \|$", text, re.M)
    documented = {k: (int(ci.replace(",", "")), int(deep.replace(",", ""))) for k, ci, deep in rows}
    code = _property_test_counts()
    assert len(code) >= 20
    assert documented == code, "rows the docs should have:\n" + "\n".join(
        f"| `{k}` | {ci:,} | {deep:,} |" for k, (ci, deep) in sorted(code.items()))


def test_architecture_md_names_what_exists() -> None:
    """docs/architecture.md: every file and folder it names exists, every ``name()`` it
    places in a file is defined or imported there, and its table has every layer of
    tests/test_layout.py's LAYERS."""
    from tests.test_layout import LAYERS

    text = (ROOT / "docs/architecture.md").read_text()
    paths = re.findall(r"`(sysverbs/[\w/.]*)`", text)
    assert len(paths) > 20
    for path in paths:
        assert (ROOT / path).exists(), path
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`sysverbs/" in line]
    for row in rows:  # a bare file name in a row is a file of that row's folder
        folders = re.findall(r"`(sysverbs/[\w/]*/)`", row)
        for name in re.findall(r"\(`([\w/]+\.(?:py|json))`", row):
            assert any((ROOT / f / name).exists() for f in [*folders, "sysverbs/"]), (name, row)
    named = {f"sysverbs/{f}/".replace("//", "/") for layer in LAYERS for f in layer} - {
        "sysverbs/sources/netlink/"}
    assert named <= set(paths), named - set(paths)
    for name, path in re.findall(r"`(\w+)\(\)`[^`]{0,40}?`(sysverbs/[\w/]+\.py)`", text):
        tree = ast.parse((ROOT / path).read_text())
        defined = {n.name for n in ast.walk(tree)
                   if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        defined |= {a.asname or a.name for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) for a in n.names}
        assert name in defined, (name, path)


def _modules_with_examples() -> list[str]:
    package = ROOT / "sysverbs"
    names = []
    for path in sorted(package.rglob("*.py")):
        if ">>> " in path.read_text(encoding="utf-8") and path.name != "__main__.py":
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.mark.parametrize("module", _modules_with_examples())
def test_every_docstring_example_runs(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each module whose source has examples runs them."""
    import doctest

    messages = importlib.import_module("sysverbs.ground.messages")
    monkeypatch.setattr(messages, "_stream", messages._stream)
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and result.failed == 0

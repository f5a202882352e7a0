"""Properties of the code's layout, guarded instead of asked for in comments: the layers
and their one direction of dependency, no import cycle between files or folders, files
that hold one thing, no private name used across modules, and a cheap
``import sysverbs`` (docs/architecture.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import sysverbs

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sysverbs"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, except what sits under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for other in node.orelse:
                yield other
                yield from _run_time_nodes(other)
            continue
        yield node
        yield from _run_time_nodes(node)


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path, *, run_time: bool = True) -> Iterator[tuple[str, str, int]]:
    """(imported module, imported name or "", line) of each import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = _run_time_nodes(tree) if run_time else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, path, node)
            for alias in node.names:
                yield target, alias.name, node.lineno


def import_graph(*, run_time_only: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports: at module level, inside functions and
    under ``if TYPE_CHECKING:`` (``run_time_only``: not the last).  A name that is a
    module counts as that module; ``sysverbs/__init__``'s table-driven imports are added."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for target, name, _ in _imports(module, path, run_time=run_time_only):
            if f"{target}.{name}" in modules:
                graph[module].add(f"{target}.{name}")
            elif target in modules:
                graph[module].add(target)
        graph[module].discard(module)
    graph["sysverbs"] |= {f"sysverbs.{m}" for m in sysverbs._API}
    return graph


#: The layers, lowest first.  A file may import the files of its own folder and of the
#: folders of the layers below its own; a subfolder may also import its parent folder's
#: files (sources/netlink/ uses sources/base.py).  Nothing else: no folder imports a
#: peer of its layer, none a layer above it.  "" is the top level: ``sysverbs/__init__``
#: (the API of ``import sysverbs``) and ``__main__``, nothing else.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("ground",),
    ("sources", "sources/netlink", "providers"),
    ("engine",),
    ("devices", "testing"),
    ("placement",),
    ("rank",),
    ("model",),
    ("fleet",),
    ("cli", "compat", "compat/pyverbs"),
    ("",),
)


def folder_of(module: str) -> str:
    """The folder of ``module`` relative to ``sysverbs/`` ("" for the top level)."""
    path = _modules()[module]
    return path.parent.relative_to(PACKAGE).as_posix().replace(".", "")


def layering_offences(graph: dict[str, set[str]], folder: Callable[[str], str],
                      layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    """Each import of ``graph`` against the order of ``layers``."""
    level = {f: i for i, names in enumerate(layers) for f in names}
    offences = []
    for module, targets in sorted(graph.items()):
        a = folder(module)
        for target in sorted(targets):
            b = folder(target)
            if a == b or level[b] < level[a] or (level[a] == level[b] and a.startswith(b + "/")):
                continue
            offences.append(f"{module} ({a or 'top level'}, layer {level[a]}) imports "
                            f"{target} ({b or 'top level'}, layer {level[b]})")
    return offences


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (empty when there is none)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_import_graph_has_no_cycle_between_files() -> None:
    """Counting imports inside functions and under ``if TYPE_CHECKING:`` (a type two
    modules need belongs in a module below both)."""
    graph = import_graph()
    assert graph["sysverbs.engine.api"], "the graph should see the package's imports"
    assert "sysverbs.ground.errors" in graph["sysverbs.sources.base"]
    assert find_cycle(graph) == []


def test_the_import_graph_has_no_cycle_between_folders() -> None:
    folders: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        folders.setdefault(folder_of(module), set()).update(
            folder_of(t) for t in targets if folder_of(t) != folder_of(module))
    assert set(folders) >= {"ground", "engine", "cli"}
    assert find_cycle(folders) == []


def test_layering_offences_finds_an_upward_import() -> None:
    graph = {"g.a": {"g.b"}, "g.b": set(), "e.x": {"g.a"}, "g.c": {"e.x"}, "p.y": {"q.z"},
             "q.z": set(), "p/s.w": {"p.y"}, "p.y2": {"p/s.w"}}
    layers = (("g",), ("e",), ("p", "p/s", "q"))
    assert layering_offences(graph, lambda m: m.split(".")[0], layers) == [
        "g.c (g, layer 0) imports e.x (e, layer 1)",
        "p.y (p, layer 2) imports q.z (q, layer 2)",
        "p.y2 (p, layer 2) imports p/s.w (p/s, layer 2)",
    ]


def test_every_import_follows_the_layers() -> None:
    """docs/architecture.md names the layers; every folder of the package is in one."""
    folders = {folder_of(m) for m in _modules()}
    assert folders == {f for names in LAYERS for f in names}
    assert layering_offences(import_graph(), folder_of) == []


def test_a_public_name_is_where_its_code_lives() -> None:
    """No second import path to a module: the top level is ``__init__`` (the names of
    ``import sysverbs``, bound from the modules that define them) and ``__main__``; a
    module that only re-exports another (``sysverbs/nccl.py`` was ``sysverbs.rank.nccl``
    again) is gone, and the docs name the module where the code is."""
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]
    star = [f"{m}:{n.lineno}" for m, path in _modules().items()
            for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)]
    assert star == []


#: Files longer than MAX_LINES that are data tables (none today).
TABLES: frozenset[str] = frozenset()
MAX_LINES = 700


def test_a_file_holds_one_thing() -> None:
    """No Python file of the package, tests/, benchmarks/ or tools/ over MAX_LINES lines,
    except data tables (a test file that grows past it is split by what it tests)."""
    long = {}
    folders = [PACKAGE, *(ROOT / f for f in ("tests", "benchmarks", "tools"))]
    paths = [p for folder in folders for p in folder.rglob("*.py")]
    assert {p.parent.name for p in paths} >= {"sysverbs", "tests", "benchmarks", "tools"}
    for path in paths:
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > MAX_LINES and path.relative_to(ROOT).as_posix() not in TABLES:
            long[path.relative_to(ROOT).as_posix()] = lines
    assert long == {}


def _tool_modules() -> dict[str, Path]:
    """tools/' modules by the names they import each other by (tools/ is on the path of
    its scripts: ``fixturegen.builder``, ``provider_history.cpp``)."""
    tools = ROOT / "tools"
    out = {}
    for path in sorted(tools.rglob("*.py")):
        parts = list(path.relative_to(tools).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def test_no_module_imports_another_modules_private_name() -> None:
    """``from x import _name`` and ``x._name`` across the package's modules and tools/
    (a module's own private names are its own business)."""
    modules = {**_modules(), **_tool_modules()}
    ours = {m.split(".")[0] for m in modules}
    offences = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported_modules: set[str] = set()
        for target, name, line in _imports(module, path, run_time=False):
            if target.split(".")[0] not in ours or target == module:
                continue
            if f"{target}.{name}" in modules:
                imported_modules.add(name)
            elif name.startswith("_") and not name.startswith("__"):
                offences.append(f"{path.relative_to(ROOT)}:{line}: {target}.{name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in ours:
                        imported_modules.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.asname and alias.name in imported_modules:
                        imported_modules.add(alias.asname)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in imported_modules):
                offences.append(f"{path.relative_to(ROOT)}:{node.lineno}: "
                                f"{node.value.id}.{node.attr}")
    assert {m.split(".")[0] for m in _tool_modules()} >= {"fixturegen", "make_fixtures"}
    assert offences == []


def test_the_api_table_and_the_type_checkers_imports_agree() -> None:
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    seen: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.level == 1:
                    for alias in stmt.names:
                        seen[alias.name] = stmt.module or ""
    assert seen == {n: m for m, names in sysverbs._API.items() for n in names}
    assert sysverbs.__all__ == [n for names in sysverbs._API.values() for n in names]
    assert set(dir(sysverbs)) >= set(sysverbs.__all__)
    for name in sysverbs.__all__:
        assert getattr(sysverbs, name) is not None


# What ``import sysverbs`` may load: the modules of the public API's first call and
# the few standard modules they need (``python -I -S``: nothing else imported first).
# The rest (placement, the CLI, netlink, udev, typing, re, enum, dataclasses, json...)
# is imported by the functions that need it.  The time the import takes is measured,
# not tested: benchmarks/bench_list.py's target "import sysverbs adds <= 15 ms to
# interpreter start" (make bench); a machine beside a VM can make any time bound fail.
EAGER_SYSVERBS = {
    "sysverbs", "sysverbs.engine", "sysverbs.engine.api", "sysverbs.engine.device",
    "sysverbs.engine.devlist", "sysverbs.ground", "sysverbs.ground.hostroot",
    "sysverbs.ground.messages", "sysverbs.ground.records", "sysverbs.ground.sysfs_read",
    "sysverbs.ground.errors", "sysverbs.providers",
    "sysverbs.providers.matching", "sysverbs.providers.table", "sysverbs.sources",
    "sysverbs.sources.base", "sysverbs.sources.sysfs",
}
ALLOWED_STDLIB = {
    "__future__", "_collections_abc", "_stat", "errno", "genericpath", "os", "os.path",
    "posixpath", "stat", "warnings",
}
IMPORT_PROBE = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
before = set(sys.modules)
import sysverbs
print("\\n".join(sorted(set(sys.modules) - before)))
"""


def test_import_sysverbs_loads_only_what_its_first_call_needs() -> None:
    """``python -I -S -c "import sysverbs"``: which modules it loads, not how long."""
    out = subprocess.run([sys.executable, "-I", "-S", "-c", IMPORT_PROBE],
                         capture_output=True, text=True, check=True).stdout
    loaded = set(out.split())
    assert {m for m in loaded if m.split(".")[0] == "sysverbs"} == EAGER_SYSVERBS
    assert {m for m in loaded if m.split(".")[0] != "sysverbs"} <= ALLOWED_STDLIB


def test_the_list_options_are_declared_once() -> None:
    """The seven listing options are spelled out in ``ListOptions`` only: every listing
    function takes ``**options: Unpack[ListOptions]``.  (The constructors of the record
    tuples that hold what they resolve to, :class:`sysverbs.Options` and the sources'
    ``LibraryKey``, have a field for each: they are no listing functions.)"""
    names = {"source", "sysfs_path", "dev_dir", "config_dir", "providers", "rdma_core",
             "static_providers"}
    from sysverbs.engine.api import OPTION_NAMES

    assert set(OPTION_NAMES) == names
    for path in _modules().values():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        record = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                  and any(isinstance(b, ast.Name) and b.id == "RecordTuple" for b in c.bases)
                  for f in c.body
                  if isinstance(f, ast.FunctionDef) and f.name == "__new__"}
        # and the one constructor of the host value, a parameter for each of its paths
        record |= {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                   and c.name == "HostRoot" for f in c.body
                   if isinstance(f, ast.FunctionDef) and f.name == "resolve"}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(node) not in record:
                args = node.args
                params = {a.arg for a in [*args.args, *args.kwonlyargs, *args.posonlyargs]}
                assert len(params & names) < 3, f"{path.name}: {node.name} spells the options"


NAMES_PROBE = f"""
import importlib, pkgutil, sys
sys.path.insert(0, {str(ROOT)!r})
import sysverbs
for info in pkgutil.walk_packages(sysverbs.__path__, "sysverbs."):
    if info.name != "sysverbs.__main__":
        importlib.import_module(info.name)
wrong = [name for name, module in sysverbs._MODULE_OF.items()
         if getattr(sysverbs, name) is not getattr(sys.modules["sysverbs." + module], name)]
print(" ".join(wrong))
"""


def test_every_public_name_stays_itself_once_every_module_is_imported() -> None:
    """Importing a submodule binds it on its package: ``sysverbs.monitor`` was the
    function until ``sysverbs/monitor.py`` was imported (``sysverbs watch`` does), then
    the module, and ``sysverbs.monitor()`` raised TypeError."""
    out = subprocess.run([sys.executable, "-c", NAMES_PROBE], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == []
    assert not {m.split(".")[1] for m in _modules() if m.count(".") >= 1} & set(sysverbs.__all__)

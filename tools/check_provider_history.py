#!/usr/bin/env python3
"""Re-derive the release history in ``sysverbs/providers/providers.json`` from rdma-core's git.

Usage::

    tools/check_provider_history.py /path/to/rdma-core(.git) [--data FILE] [--head REF]
    tools/check_provider_history.py /path/to/rdma-core --emit > providers.json

For every rdma-core major release (one tag per release: ``vN.0``/``vN``, else the last
``vN-rcM``; the newest release may be an untagged ``--head`` whose CMake
``PACKAGE_VERSION`` names it) the script reads the provider sources straight out of the
git object store, runs a small C preprocessor over them (object- and function-like
macros, ``#``/``##``, ``#if``/``#ifdef``, quoted includes and ``<rdma/*.h>`` from
``kernel-headers``) and extracts:

* the provider's device-match table: the ``verbs_match_ent`` array named by
  ``.match_table`` (rdma-core >= 16), or, before that, the static ``{vendor, device}``
  PCI table the provider's ``driver_init`` walked (PCI entries only; providers that
  matched in code, e.g. rxe by name or vmw_pvrdma by a single ID, have no table then);
* ``.match_min_abi_version`` / ``.match_max_abi_version`` (rdma-core >= 16);
* the library name from ``rdma_provider()`` in the provider's CMakeLists.txt;
* the PABI number (``IBVERBS_PABI_VERSION``, or the ``rdmavN`` library extension of
  the releases before it existed).

From those per-release snapshots it derives ``since``/``until`` for every provider and
entry, the ABI history and the PABI table, and prints every difference from the data
file.  The exit status is 0 when there are none, 1 otherwise.  With ``--emit`` it prints
a freshly derived data file instead (provider order and the ``comment`` are taken from
the existing data file, or from ``--order FILE``, a list shaped like the spec dumps).

Nothing here uses rdma-core code; it only reads the facts (IDs, ranges) out of it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

# ---------------------------------------------------------------------------
# git access


class Git:
    """Read-only access to a (possibly bare) git repository."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._blobs: dict[str, str] = {}
        self._trees: dict[tuple[str, str], dict[str, str]] = {}
        self._batch: Optional[subprocess.Popen[bytes]] = None

    def run(self, *args: str) -> str:
        out = subprocess.run(
            ["git", "-C", self.path, *args], check=True, capture_output=True
        ).stdout
        return out.decode("utf-8", "replace")

    def tags(self) -> list[str]:
        return self.run("tag", "-l", "v*").split()

    def tree(self, ref: str, prefix: str = "") -> dict[str, str]:
        """Map of path -> blob id for every file under ``prefix`` at ``ref``."""
        key = (ref, prefix)
        if key not in self._trees:
            args = ["ls-tree", "-r", ref]
            if prefix:
                args += ["--", prefix]
            files: dict[str, str] = {}
            for line in self.run(*args).splitlines():
                meta, _, path = line.partition("\t")
                parts = meta.split()
                if len(parts) == 3 and parts[1] == "blob":
                    files[path] = parts[2]
            self._trees[key] = files
        return self._trees[key]

    def blob(self, sha: str) -> str:
        if sha in self._blobs:
            return self._blobs[sha]
        if self._batch is None:
            self._batch = subprocess.Popen(
                ["git", "-C", self.path, "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        proc = self._batch
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(sha.encode() + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            raise KeyError(sha)
        data = proc.stdout.read(int(header[2]))
        proc.stdout.read(1)
        text = data.decode("utf-8", "replace")
        self._blobs[sha] = text
        return text

    def file(self, ref: str, path: str) -> Optional[str]:
        sha = self.tree(ref).get(path)
        return None if sha is None else self.blob(sha)

    def close(self) -> None:
        if self._batch is not None:
            if self._batch.stdin is not None:
                self._batch.stdin.close()
            self._batch.wait()
            self._batch = None


# ---------------------------------------------------------------------------
# a small C preprocessor

Reader = Callable[[str], Optional[str]]  # repository path -> text, None if absent

_TOKEN_RE = re.compile(
    r"""[A-Za-z_]\w*
      | \.?\d(?:[eEpP][+-]|[\w.])*
      | "(?:\\.|[^"\\\n])*"
      | '(?:\\.|[^'\\\n])*'
      | \#\# | <<= | >>= | \.\.\. | -> | \+\+ | -- | << | >> | <= | >= | == | != | && | \|\|
      | [-+*/%&|^!~<>=?:;,.(){}\[\]\#]
      | \S""",
    re.VERBOSE,
)
_COMMENT_RE = re.compile(
    r"""//[^\n]*|/\*.*?\*/|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')""", re.DOTALL
)
_IDENT_RE = re.compile(r"[A-Za-z_]\w*\Z")


def tokenize(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def strip_comments(text: str) -> str:
    text = text.replace("\\\r\n", "").replace("\\\n", "")

    def repl(m: re.Match[str]) -> str:
        return m.group(1) if m.group(1) is not None else " "

    return _COMMENT_RE.sub(repl, text)


@dataclass
class Macro:
    params: Optional[list[str]]  # None for object-like macros
    body: list[str]
    variadic: bool = False


def _split_args(tokens: list[str], start: int) -> tuple[list[list[str]], int]:
    """Split the argument list whose '(' is at ``start``; return args and index after ')'."""
    depth = 0
    args: list[list[str]] = [[]]
    i = start
    while i < len(tokens):
        t = tokens[i]
        if t == "(":
            depth += 1
            if depth > 1:
                args[-1].append(t)
        elif t == ")":
            depth -= 1
            if depth == 0:
                return args, i + 1
            args[-1].append(t)
        elif t == "," and depth == 1:
            args.append([])
        else:
            args[-1].append(t)
        i += 1
    raise ValueError("unterminated macro argument list")


def _stringify(tokens: list[str]) -> str:
    text = " ".join(tokens)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Preprocessor:
    """Enough of cpp to expand rdma-core's provider match tables."""

    def __init__(self, read: Reader, predefined: Optional[dict[str, str]] = None) -> None:
        self.read = read
        self.macros: dict[str, Macro] = {}
        for name, value in (predefined or {}).items():
            self.macros[name] = Macro(None, tokenize(value))
        self.included: set[str] = set()
        self.enums: dict[str, int] = {}

    # -- expansion -------------------------------------------------------
    def expand(self, tokens: list[str], disabled: frozenset[str] = frozenset()) -> list[str]:
        out: list[str] = []
        i = 0
        while i < len(tokens):
            t = tokens[i]
            macro = self.macros.get(t)
            if macro is None or t in disabled:
                out.append(t)
                i += 1
                continue
            if macro.params is None:
                out.extend(self.expand(macro.body, disabled | {t}))
                i += 1
                continue
            if i + 1 >= len(tokens) or tokens[i + 1] != "(":
                out.append(t)
                i += 1
                continue
            args, i = _split_args(tokens, i + 1)
            out.extend(self.expand(self._substitute(macro, args, disabled), disabled | {t}))
        return out

    def _substitute(self, macro: Macro, args: list[list[str]],
                    disabled: frozenset[str]) -> list[str]:
        params = macro.params or []
        if params == [] and args == [[]]:
            args = []
        bind: dict[str, list[str]] = {}
        for n, p in enumerate(params):
            bind[p] = args[n] if n < len(args) else []
        if macro.variadic:
            rest = args[len(params) :]
            va: list[str] = []
            for n, a in enumerate(rest):
                if n:
                    va.append(",")
                va.extend(a)
            bind["__VA_ARGS__"] = va
        body = macro.body
        res: list[str] = []
        i = 0
        while i < len(body):
            t = body[i]
            if t == "#" and i + 1 < len(body) and body[i + 1] in bind:
                res.append(_stringify(bind[body[i + 1]]))
                i += 2
                continue
            if t == "##" and res and i + 1 < len(body):
                nxt = body[i + 1]
                right = bind[nxt] if nxt in bind else [nxt]
                left = res.pop()
                pasted = tokenize(left + (right[0] if right else ""))
                res.extend(pasted)
                res.extend(right[1:])
                i += 2
                continue
            if t in bind:
                raw = (i + 1 < len(body) and body[i + 1] == "##") or (i > 0 and body[i - 1] == "##")
                res.extend(bind[t] if raw else self.expand(bind[t], disabled))
                i += 1
                continue
            res.append(t)
            i += 1
        return res

    # -- directives ------------------------------------------------------
    def _define(self, rest: str) -> None:
        m = re.match(r"\s*([A-Za-z_]\w*)(\(([^)]*)\))?", rest)
        if not m:
            return
        name = m.group(1)
        body = tokenize(rest[m.end() :])
        if m.group(2) is None:
            self.macros[name] = Macro(None, body)
            return
        params = [p.strip() for p in (m.group(3) or "").split(",") if p.strip()]
        variadic = False
        if params and params[-1].endswith("..."):
            variadic = True
            named = params.pop()[:-3].strip()
            if named:  # GNU named variadic parameter: "args..."
                body = ["__VA_ARGS__" if t == named else t for t in body]
        self.macros[name] = Macro(params, body, variadic)

    def _eval_if(self, expr: str) -> bool:
        toks = tokenize(expr)
        resolved: list[str] = []
        i = 0
        while i < len(toks):
            if toks[i] == "defined":
                if i + 1 < len(toks) and toks[i + 1] == "(":
                    name, i = toks[i + 2], i + 4
                else:
                    name, i = toks[i + 1], i + 2
                resolved.append("1" if name in self.macros else "0")
                continue
            resolved.append(toks[i])
            i += 1
        value = eval_int(self.expand(resolved), self.enums, undefined_is_zero=True)
        return bool(value)

    def process(self, path: str, text: Optional[str] = None) -> list[str]:
        """Preprocess one file (and its includes); return the output tokens."""
        if text is None:
            text = self.read(path)
            if text is None:
                return []
        self.included.add(path)
        out: list[str] = []
        stack: list[tuple[bool, bool]] = []  # (this branch active, some branch taken)
        pending: list[str] = []

        def active() -> bool:
            return all(s[0] for s in stack)

        def flush() -> None:
            if pending:
                out.extend(self.expand(pending))
                pending.clear()

        for line in strip_comments(text).split("\n"):
            s = line.strip()
            if not s.startswith("#"):
                if active():
                    pending.extend(tokenize(line))
                continue
            m = re.match(r"#\s*(\w*)(.*)", s)
            if not m:
                continue
            d, rest = m.group(1), m.group(2)
            if d in ("if", "ifdef", "ifndef"):
                if not active():
                    stack.append((False, True))
                    continue
                if d == "if":
                    cond = self._eval_if(rest)
                else:
                    defined = rest.split()[0] in self.macros if rest.split() else False
                    cond = defined if d == "ifdef" else not defined
                stack.append((cond, cond))
            elif d == "elif":
                if not stack:
                    continue
                _, taken = stack.pop()
                if taken or not active():
                    stack.append((False, True))
                else:
                    cond = self._eval_if(rest)
                    stack.append((cond, cond))
            elif d == "else":
                if stack:
                    _, taken = stack.pop()
                    stack.append((not taken, True))
            elif d == "endif":
                if stack:
                    stack.pop()
            elif not active():
                continue
            elif d == "define":
                flush()
                self._define(rest)
            elif d == "undef":
                flush()
                self.macros.pop(rest.strip(), None)
            elif d == "include":
                flush()
                target = self._resolve_include(path, rest.strip())
                if target is not None:
                    out.extend(self.process(target))
        flush()
        return out

    def _resolve_include(self, current: str, spec: str) -> Optional[str]:
        m = re.match(r'"([^"]+)"', spec)
        candidates: list[str] = []
        if m:
            base = current.rsplit("/", 1)[0] if "/" in current else ""
            candidates.append(_normpath(base + "/" + m.group(1)))
            candidates.append(_normpath(m.group(1)))
        else:
            m = re.match(r"<(rdma/[^>]+)>", spec)
            if not m:
                return None
            candidates.append("kernel-headers/" + m.group(1))
            # before kernel-headers/ existed: the fallback copies used when the
            # system headers lack them
            candidates.append("buildlib/fixup-include/" + m.group(1).replace("/", "-"))
        for c in candidates:
            if self.read(c) is not None:
                return c
        return None


def _normpath(path: str) -> str:
    parts: list[str] = []
    for p in path.split("/"):
        if p in ("", "."):
            continue
        if p == ".." and parts:
            parts.pop()
        else:
            parts.append(p)
    return "/".join(parts)


# ---------------------------------------------------------------------------
# integer constant expressions

_INT_RE = re.compile(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)[uUlL]*\Z")
_CAST_TYPES = {"int", "unsigned", "long", "short", "char", "signed"} | {
    f"{p}int{n}_t" for p in ("", "u") for n in (8, 16, 32, 64)
}


class ExprError(ValueError):
    pass


def eval_int(tokens: list[str], names: dict[str, int], undefined_is_zero: bool = False) -> int:
    """Evaluate a C integer constant expression (after macro expansion)."""
    toks = list(tokens)
    # sizeof(void *) and friends: an LP64 target, as on the reference machine.
    text = " ".join(toks)
    text = re.sub(r"sizeof\s*\(\s*(void\s*\*|long|unsigned\s+long|size_t)\s*\)", "8", text)
    text = re.sub(r"sizeof\s*\(\s*int\s*\)", "4", text)
    toks = tokenize(text)
    py: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        # drop casts such as (uint16_t) or (unsigned int)
        if t == "(":
            j = i + 1
            while j < len(toks) and toks[j] in _CAST_TYPES:
                j += 1
            if j > i + 1 and j < len(toks) and toks[j] == ")":
                i = j + 1
                continue
        m = _INT_RE.match(t)
        if m:
            lit = m.group(1)
            if len(lit) > 1 and lit[0] == "0" and lit[1] not in "xX":
                py.append(str(int(lit, 8)))
            else:
                py.append(str(int(lit, 0)))
        elif t.startswith("'") and len(t) == 3:
            py.append(str(ord(t[1])))
        elif _IDENT_RE.match(t):
            if t in names:
                py.append(str(names[t]))
            elif undefined_is_zero:
                py.append("0")
            else:
                raise ExprError(f"unknown identifier {t!r} in {' '.join(tokens)!r}")
        elif t == "&&":
            py.append(" and ")
        elif t == "||":
            py.append(" or ")
        elif t == "!":
            py.append(" not ")
        elif t == "/":
            py.append("//")
        elif t in ("?", ":"):
            py.append(t)
        elif t in ("(", ")", "+", "-", "*", "%", "<<", ">>", "&", "|", "^", "~",
                   "<", ">", "<=", ">=", "==", "!="):
            py.append(t)
        else:
            raise ExprError(f"cannot evaluate {' '.join(tokens)!r}")
        i += 1
    src = _ternary_to_python(py)
    try:
        value = eval(src, {"__builtins__": {}}, {})  # noqa: S307 - digits and operators only
    except Exception as exc:  # pragma: no cover - reported to the user
        raise ExprError(f"cannot evaluate {' '.join(tokens)!r}: {exc}") from exc
    return int(value)


def _ternary_to_python(py: list[str]) -> str:
    """Rewrite a flat ``c ? a : b`` (at paren depth 0) into Python; recursive."""
    depth = 0
    for n, t in enumerate(py):
        if t == "(":
            depth += 1
        elif t == ")":
            depth -= 1
        elif t == "?" and depth == 0:
            d2 = 0
            for k in range(n + 1, len(py)):
                if py[k] == "(":
                    d2 += 1
                elif py[k] == ")":
                    d2 -= 1
                elif py[k] == "?" and d2 == 0:
                    d2 += 100  # nested ternary: skip its ':'
                elif py[k] == ":" and d2 >= 100:
                    d2 -= 100
                elif py[k] == ":" and d2 == 0:
                    cond = "".join(py[:n])
                    a = _ternary_to_python(py[n + 1 : k])
                    b = _ternary_to_python(py[k + 1 :])
                    return f"(({a}) if ({cond}) else ({b}))"
    return " ".join(py)


# ---------------------------------------------------------------------------
# extraction of one release


@dataclass(frozen=True)
class Entry:
    kind: str  # pci | driver_id | modalias | name
    key: str  # vendor:device, driver id value, pattern, or name prefix

    def to_json(self, id_names: dict[int, str]) -> dict[str, Any]:
        if self.kind == "pci":
            v, d = self.key.split(":")
            return {"kind": "pci", "vendor": v, "device": d}
        if self.kind == "driver_id":
            value = int(self.key)
            return {"kind": "driver_id", "id": id_names.get(value, f"#{value}"), "value": value}
        if self.kind == "modalias":
            return {"kind": "modalias", "pattern": self.key}
        return {"kind": "name", "prefix": self.key, "pattern": f"rdma_device:*N{self.key}*"}


def entry_from_json(m: dict[str, Any]) -> Entry:
    kind = str(m["kind"])
    if kind == "pci":
        return Entry("pci", f"{int(m['vendor'], 16):#06x}:{int(m['device'], 16):#06x}")
    if kind == "driver_id":
        return Entry("driver_id", str(int(m["value"])))
    if kind == "modalias":
        return Entry("modalias", str(m["pattern"]))
    if kind == "name":
        return Entry("name", str(m["prefix"]))
    raise ValueError(f"unknown match kind {kind!r}")


@dataclass
class ProviderSnap:
    library: str
    name: Optional[str]
    min_abi: Optional[int]
    max_abi: Optional[int]
    entries: list[Entry]
    notes: list[str] = field(default_factory=list)
    id_names: dict[int, str] = field(default_factory=dict)  # spelling used in the source


@dataclass
class ReleaseSnap:
    release: int
    ref: str
    pabi: int
    providers: dict[str, ProviderSnap]  # by library name
    driver_ids: dict[str, int]


_PREDEFINED = {"INT_MAX": "2147483647", "UINT_MAX": "4294967295", "NULL": "0", "true": "1",
               "false": "0", "__x86_64__": "1", "__linux__": "1", "__LP64__": "1"}


def _c_string(tok: str) -> str:
    body = tok[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


def _items(tokens: list[str], start: int) -> tuple[list[list[str]], int]:
    """Split the brace initializer whose '{' is at ``start`` into top-level items."""
    depth = 0
    items: list[list[str]] = [[]]
    i = start
    while i < len(tokens):
        t = tokens[i]
        if t in "({[":
            depth += 1
            if depth > 1:
                items[-1].append(t)
        elif t in ")}]":
            depth -= 1
            if depth == 0:
                return [it for it in items if it], i + 1
            items[-1].append(t)
        elif t == "," and depth == 1:
            items.append([])
        else:
            items[-1].append(t)
        i += 1
    raise ValueError("unterminated initializer")


def _find_array(tokens: list[str], name: str) -> Optional[int]:
    """Index of the '{' opening the definition ``name[] = {`` (last definition wins)."""
    found: Optional[int] = None
    for i in range(len(tokens) - 4):
        if tokens[i] == name and tokens[i + 1] == "[" and tokens[i + 2] == "]" and \
                tokens[i + 3] == "=" and tokens[i + 4] == "{":
            found = i + 4
    return found


def _parse_match_ent(item: list[str], names: dict[str, int],
                     id_names: dict[int, str]) -> Optional[Entry]:
    if not item or item == ["{", "}"]:
        return None
    head = item[0]
    if head in ("VERBS_PCI_MATCH", "VERBS_DRIVER_ID", "VERBS_NAME_MATCH", "VERBS_MODALIAS_MATCH"):
        args, _ = _split_args(item, 1)
        if head == "VERBS_PCI_MATCH":
            v, d = eval_int(args[0], names), eval_int(args[1], names)
            return Entry("pci", f"{v:#06x}:{d:#06x}")
        if head == "VERBS_DRIVER_ID":
            value = eval_int(args[0], names)
            if len(args[0]) == 1 and args[0][0].startswith("RDMA_DRIVER_"):
                id_names[value] = args[0][0]
            return Entry("driver_id", str(value))
        if head == "VERBS_NAME_MATCH":
            return Entry("name", _c_string(args[0][0]))
        return Entry("modalias", _c_string(args[0][0]))
    raise ValueError(f"unrecognised match table entry: {' '.join(item)}")


def _parse_old_pci(item: list[str], names: dict[str, int]) -> Optional[Entry]:
    """A pre-16 ``{vendor, device, ...}`` or ``{.vendor = v, .device = d}`` item."""
    if not item or item[0] != "{":
        return None
    fields, _ = _items(item, 0)
    if not fields:
        return None
    vendor: Optional[list[str]] = None
    device: Optional[list[str]] = None
    positional: list[list[str]] = []
    for f in fields:
        if len(f) >= 3 and f[0] == "." and f[2] == "=":
            if f[1] == "vendor":
                vendor = f[3:]
            elif f[1] == "device":
                device = f[3:]
        else:
            positional.append(f)
    if vendor is None and len(positional) >= 2:
        vendor, device = positional[0], positional[1]
    if vendor is None or device is None:
        return None
    try:
        v, d = eval_int(vendor, names), eval_int(device, names)
    except ExprError:
        return None
    return Entry("pci", f"{v:#06x}:{d:#06x}")


def _parse_enum(text: str, enum_name: str) -> dict[str, int]:
    m = re.search(r"enum\s+" + enum_name + r"\s*\{(.*?)\}", strip_comments(text), re.DOTALL)
    if not m:
        return {}
    values: dict[str, int] = {}
    nxt = 0
    for part in m.group(1).split(","):
        part = part.strip()
        if not part:
            continue
        name, _, expr = part.partition("=")
        name = name.strip()
        if expr.strip():
            nxt = eval_int(tokenize(expr), values)
        values[name] = nxt
        nxt += 1
    return values


def extract_release(git: Git, release: int, ref: str) -> ReleaseSnap:
    files = git.tree(ref)

    def read(path: str) -> Optional[str]:
        sha = files.get(path)
        return None if sha is None else git.blob(sha)

    driver_ids: dict[str, int] = {}
    for path in sorted(files):
        if path.startswith("kernel-headers/rdma/") and path.endswith(".h"):
            text = read(path) or ""
            if "enum rdma_driver_id" in text:
                driver_ids.update(_parse_enum(text, "rdma_driver_id"))

    cmake = read("CMakeLists.txt") or ""
    m = re.search(r'set\(IBVERBS_PABI_VERSION\s+"(\d+)"\)', cmake)
    if m:
        pabi = int(m.group(1))
    else:
        driver_h = read("libibverbs/driver.h") or ""
        m = re.search(r"IBV_DEVICE_LIBRARY_EXTENSION\s+rdmav(\d+)", driver_h)
        if not m:
            raise ValueError(f"{ref}: no PABI version found")
        pabi = int(m.group(1))

    provider_dirs = sorted({p.split("/")[1] for p in files if p.startswith("providers/")
                            and p.count("/") >= 2})
    providers: dict[str, ProviderSnap] = {}
    for pdir in provider_dirs:
        cm = read(f"providers/{pdir}/CMakeLists.txt")
        if cm is None:
            continue
        lm = re.search(r"rdma_(?:shared_)?provider\(\s*([A-Za-z0-9_]+)", cm)
        if not lm:
            continue
        snap = _extract_provider(read, files, pdir, lm.group(1), driver_ids)
        providers[snap.library] = snap
    return ReleaseSnap(release, ref, pabi, providers, driver_ids)


def _extract_provider(read: Reader, files: dict[str, str], pdir: str, library: str,
                      driver_ids: dict[str, int]) -> ProviderSnap:
    prefix = f"providers/{pdir}/"
    sources = sorted(p for p in files if p.startswith(prefix) and p.endswith(".c"))
    snap = ProviderSnap(library, None, None, None, [])
    # Modern tables: the verbs_device_ops initializer naming .match_table.
    for src in sources:
        text = read(src) or ""
        if "match_table" not in text:
            continue
        pp = Preprocessor(read, _PREDEFINED)
        pp.enums = driver_ids
        toks = pp.process(src)
        names = dict(driver_ids)
        for i in range(len(toks) - 3):
            if toks[i] == "verbs_device_ops" and toks[i + 2] == "=" and toks[i + 3] == "{":
                fields, _ = _items(toks, i + 3)
                spec: dict[str, list[str]] = {}
                for f in fields:
                    if len(f) >= 3 and f[0] == "." and f[2] == "=":
                        spec[f[1]] = f[3:]
                if "match_table" not in spec:
                    continue
                if "name" in spec:
                    snap.name = _c_string(spec["name"][0])
                if "match_min_abi_version" in spec:
                    snap.min_abi = eval_int(spec["match_min_abi_version"], names)
                if "match_max_abi_version" in spec:
                    snap.max_abi = eval_int(spec["match_max_abi_version"], names)
                table = spec["match_table"][-1]
                start = _find_array(toks, table)
                if start is None:
                    raise ValueError(f"{src}: match table {table} not found")
                items, _ = _items(toks, start)
                for it in items:
                    e = _parse_match_ent(it, names, snap.id_names)
                    if e is not None:
                        snap.entries.append(e)
                return snap
    # Before rdma-core 16: a static PCI table walked by the provider's driver_init.
    for src in sources:
        text = read(src) or ""
        if not re.search(r"\b\w*table\s*\[\s*\]\s*=", text):
            continue
        pp = Preprocessor(read, _PREDEFINED)
        toks = pp.process(src)
        for i in range(len(toks) - 4):
            if toks[i].endswith("table") and toks[i + 1] == "[" and toks[i + 2] == "]" \
                    and toks[i + 3] == "=" and toks[i + 4] == "{":
                items, _ = _items(toks, i + 4)
                found = [e for e in (_parse_old_pci(it, {}) for it in items) if e is not None]
                if found:
                    snap.entries.extend(found)
                    snap.notes.append(f"pre-16 table {toks[i]} in {src}")
                    return snap
    return snap


# ---------------------------------------------------------------------------
# releases


_TAG_RE = re.compile(r"v(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-rc(\d+))?\Z")


def release_refs(git: Git, head: Optional[str]) -> dict[int, str]:
    """One ref per major release: vN.0 / vN if tagged, else the newest vN-rcM."""
    best: dict[int, tuple[tuple[int, int], str]] = {}
    for tag in git.tags():
        m = _TAG_RE.match(tag)
        if not m:
            continue
        major = int(m.group(1))
        if m.group(3) is not None or (m.group(2) not in (None, "0")):
            continue  # stable point releases (vN.M, M > 0)
        rank = (1, 0) if m.group(4) is None else (0, int(m.group(4)))
        if major not in best or rank > best[major][0]:
            best[major] = (rank, tag)
    refs = {major: tag for major, (_, tag) in best.items()}
    if head is not None:
        cmake = git.run("show", f"{head}:CMakeLists.txt")
        m = re.search(r'set\(PACKAGE_VERSION\s+"(\d+)', cmake)
        if m and int(m.group(1)) not in refs:
            refs[int(m.group(1))] = head
    return dict(sorted(refs.items()))


# ---------------------------------------------------------------------------
# history


@dataclass
class EntryHistory:
    entry: Entry
    present: list[int]  # releases containing it


@dataclass
class ProviderHistory:
    library: str
    name: str
    releases: list[int]
    abi: dict[int, tuple[Optional[int], Optional[int]]]
    entries: list[EntryHistory]
    problems: list[str]


Instance = tuple[Entry, int]  # an entry and its run number (0, 1, ... if re-added)


def _merge_order(merged: list[Instance], table: list[Instance]) -> list[Instance]:
    """Fold one more (newer) table into the running order: the newer table's order wins
    for what it contains, and instances it lacks stay right after the instance that
    preceded them."""
    new = list(table)
    members = set(table)
    for idx, inst in enumerate(merged):
        if inst in members:
            continue
        pos = 0
        for k in range(idx - 1, -1, -1):
            if merged[k] in new:
                pos = new.index(merged[k]) + 1
                break
        new.insert(pos, inst)
    return new


def build_history(snaps: list[ReleaseSnap]) -> dict[str, ProviderHistory]:
    """Per provider library: the releases it shipped in, its ABI ranges, and every entry
    run (an entry that vanished and came back later gets a second run)."""
    libs: dict[str, ProviderHistory] = {}
    for snap in snaps:
        for lib, p in snap.providers.items():
            h = libs.get(lib)
            if h is None:
                h = libs[lib] = ProviderHistory(lib, p.name or lib, [], {}, [], [])
            h.releases.append(snap.release)
            if p.name:
                h.name = p.name
            h.abi[snap.release] = (p.min_abi, p.max_abi)
            if len(set(p.entries)) != len(p.entries):
                h.problems.append(f"{lib}: duplicate entries in release {snap.release}")
    for lib, h in libs.items():
        merged: list[Instance] = []
        alive: dict[Entry, Instance] = {}
        runs: dict[Entry, int] = {}
        present: dict[Instance, list[int]] = {}
        for snap in snaps:
            if lib not in snap.providers:
                continue
            now: dict[Entry, Instance] = {}
            table: list[Instance] = []
            for e in snap.providers[lib].entries:
                if e in now:
                    continue
                inst = alive.get(e)
                if inst is None:
                    inst = (e, runs.get(e, 0))
                    runs[e] = inst[1] + 1
                now[e] = inst
                table.append(inst)
                present.setdefault(inst, []).append(snap.release)
            alive = now
            merged = _merge_order(merged, table)
        for inst in merged:
            h.entries.append(EntryHistory(inst[0], present[inst]))
            if inst[1] > 0:
                h.problems.append(f"{lib}: {inst[0].kind} {inst[0].key} came back in "
                                  f"{present[inst][0]} after a gap; it has {inst[1] + 1} runs")
        if h.releases != [r for r in (s.release for s in snaps) if h.releases[0] <= r
                          <= h.releases[-1]]:
            h.problems.append(f"{lib}: provider not present in a contiguous run of releases")
    return libs


def abi_rows(h: ProviderHistory) -> list[list[int]]:
    """[release, min, max] rows whenever the range changes.

    Releases before rdma-core 16 checked the ABI in each provider's driver_init; they
    get the first range declared in a verbs_device_ops (the conversion kept the checks).
    """
    rows: list[list[int]] = []
    last: Optional[tuple[int, int]] = None
    known = [h.abi[r] for r in h.releases if None not in h.abi[r]]
    for r in h.releases:
        lo, hi = h.abi[r]
        if lo is None or hi is None:
            if not known:
                continue
            lo, hi = known[0]
            assert lo is not None and hi is not None
        if (lo, hi) != last:
            rows.append([r, lo, hi])
            last = (lo, hi)
    return rows


def pabi_rows(snaps: list[ReleaseSnap]) -> list[list[int]]:
    rows: list[list[int]] = []
    for s in snaps:
        if not rows or rows[-1][1] != s.pabi:
            rows.append([s.release, s.pabi])
    return rows


# ---------------------------------------------------------------------------
# data file

DEFAULT_COMMENT = (
    "libibverbs provider match tables with per-entry history: since/until = first rdma-core "
    "major release whose tag (vN.0/vN; v12-rc3 for 12, the first tagged release) has/lacks the "
    "entry; latest = HEAD 691953d8 (65.0). Before v16 only the static PCI tables count. Read "
    "from linux-rdma/rdma-core git by tools/check_provider_history.py; releases 44 and latest "
    "reproduce shared/spec/providers-{v44,latest}.json"
)


def derived_data(snaps: list[ReleaseSnap], order: list[str], comment: str) -> dict[str, Any]:
    """Build a whole data file from the snapshots; ``order`` lists provider names."""
    hist = build_history(snaps)
    latest = snaps[-1]
    # enum spellings: the first enum name for a value, overridden by the spelling the
    # provider's own source used last (aliases: RDMA_DRIVER_IRDMA = RDMA_DRIVER_I40IW)
    enum_names: dict[int, str] = {}
    for snap in snaps:
        for k, v in snap.driver_ids.items():
            enum_names.setdefault(v, k)
    by_name = {h.name: h for h in hist.values() if latest.release in h.releases}
    providers: list[dict[str, Any]] = []
    for name in order:
        h = by_name[name]
        id_names = dict(enum_names)
        for snap in snaps:
            if h.library in snap.providers:
                id_names.update(snap.providers[h.library].id_names)
        rows = abi_rows(h)
        lo, hi = h.abi[latest.release]
        p: dict[str, Any] = {"name": h.name, "library": h.library, "min_abi": lo,
                             "max_abi": hi, "since": h.releases[0]}
        if len(rows) > 1:
            p["abi_history"] = rows
        match: list[dict[str, Any]] = []
        for eh in h.entries:
            m = eh.entry.to_json(id_names)
            m["since"] = eh.present[0]
            if eh.present[-1] != latest.release:
                later = [r for r in h.releases if r > eh.present[-1]]
                m["until"] = later[0]
            match.append(m)
        p["match"] = match
        providers.append(p)
    return {"format": 1, "comment": comment, "latest": latest.release,
            "pabi": pabi_rows(snaps), "providers": providers}


def _instances(match: list[dict[str, Any]]) -> list[tuple[Instance, dict[str, Any]]]:
    """Pair each match entry with its run number, counted in order of ``since``."""
    seen: dict[Entry, int] = {}
    out: list[tuple[Instance, dict[str, Any]]] = []
    for m in sorted(match, key=lambda m: int(m.get("since", 0))):
        e = entry_from_json(m)
        out.append(((e, seen.get(e, 0)), m))
        seen[e] = seen.get(e, 0) + 1
    index = {id(m): inst for inst, m in out}
    return [(index[id(m)], m) for m in match]


def compare(data: dict[str, Any], derived: dict[str, Any]) -> list[str]:
    diffs: list[str] = []
    for key in ("latest", "pabi"):
        if data.get(key) != derived.get(key):
            diffs.append(f"{key}: data {data.get(key)!r} != git {derived.get(key)!r}")
    have = {p["name"]: p for p in data.get("providers", [])}
    want = {p["name"]: p for p in derived["providers"]}
    for name in have.keys() - want.keys():
        diffs.append(f"provider {name}: in data file, not found in git")
    for name in want.keys() - have.keys():
        diffs.append(f"provider {name}: in git, missing from data file")
    for name, w in want.items():
        d = have.get(name)
        if d is None:
            continue
        for key in ("library", "min_abi", "max_abi", "since", "abi_history"):
            if d.get(key) != w.get(key):
                diffs.append(f"{name}.{key}: data {d.get(key)!r} != git {w.get(key)!r}")
        dm = _instances(d["match"])
        wm = _instances(w["match"])
        if [i for i, _ in dm] != [i for i, _ in wm]:
            diffs.append(f"{name}: entry order/set differs:\n"
                         f"  data {[i[0].key for i, _ in dm]}\n"
                         f"  git  {[i[0].key for i, _ in wm]}")
        wmap = dict(wm)
        for inst, m in dm:
            g = wmap.get(inst)
            if g is None:
                diffs.append(f"{name} {inst[0].kind} {inst[0].key}: not found in git")
                continue
            for key in ("since", "until", "id", "value", "pattern", "prefix"):
                if m.get(key) != g.get(key):
                    diffs.append(f"{name} {inst[0].kind} {inst[0].key}: {key} data "
                                 f"{m.get(key)!r} != git {g.get(key)!r}")
        for inst, _ in wm:
            if inst not in dict(dm):
                diffs.append(f"{name} {inst[0].kind} {inst[0].key}: missing from data file")
    return diffs


def stable_backports(git: Git, data: dict[str, Any], verbose: bool) -> list[str]:
    """Entries that a stable point release vN.M (M > 0) carried outside since..until."""
    runs: dict[tuple[str, Entry], list[tuple[int, int]]] = {}
    libs = {str(p["library"]) for p in data["providers"]}
    for p in data["providers"]:
        for m in p["match"]:
            key = (str(p["library"]), entry_from_json(m))
            runs.setdefault(key, []).append((int(m["since"]), int(m.get("until", 1 << 30))))
    found: dict[tuple[str, Entry, int], list[str]] = {}
    for tag in git.tags():
        tm = _TAG_RE.match(tag)
        if not tm or tm.group(2) in (None, "0") or tm.group(4) is not None:
            continue
        major = int(tm.group(1))
        if verbose:
            print(f"reading {tag}", file=sys.stderr)
        snap = extract_release(git, major, tag)
        for lib, prov in snap.providers.items():
            if lib not in libs:
                continue
            for e in prov.entries:
                spans = runs.get((lib, e), [])
                if not any(a <= major < b for a, b in spans):
                    found.setdefault((lib, e, major), []).append(tag)
    out = []
    for (lib, e, _), tags in sorted(found.items(), key=lambda kv: (kv[0][2], kv[0][0])):
        tags.sort(key=lambda t: [int(x) for x in t[1:].split(".")])
        shown = ", ".join(f"{a}.." + ("" if b == 1 << 30 else f"{b - 1}")
                          for a, b in runs.get((lib, e), []))
        out.append(f"{lib} {e.kind} {e.key}: in stable {tags[0]}..{tags[-1]} "
                   f"({len(tags)} tags), outside its releases {shown or 'none'}")
    return out


def collect(git: Git, head: Optional[str], verbose: bool) -> list[ReleaseSnap]:
    snaps: list[ReleaseSnap] = []
    for release, ref in release_refs(git, head).items():
        if verbose:
            print(f"reading {ref} (release {release})", file=sys.stderr)
        snaps.append(extract_release(git, release, ref))
    return snaps


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("repo", help="rdma-core git repository (bare or with work tree)")
    default_data = Path(__file__).resolve().parents[1] / "sysverbs" / "providers" / "providers.json"
    ap.add_argument("--data", type=Path, default=default_data, help="data file to check")
    ap.add_argument("--head", default="HEAD",
                    help="ref for the newest, possibly untagged, release (default HEAD; "
                         "'none' to use tags only)")
    ap.add_argument("--emit", action="store_true", help="print a derived data file instead")
    ap.add_argument("--order", type=Path,
                    help="JSON provider list giving the provider order for --emit")
    ap.add_argument("--stable", action="store_true",
                    help="also report entries that stable point releases (vN.M) carried "
                         "outside since..until (backports; informational, slow)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    git = Git(args.repo)
    try:
        snaps = collect(git, None if args.head == "none" else args.head, args.verbose)
    finally:
        git.close()
    hist = build_history(snaps)
    problems = [p for h in hist.values() for p in h.problems]

    data: Optional[dict[str, Any]] = None
    if args.data.exists():
        data = json.loads(args.data.read_text())
    order_src: Union[list[Any], None] = None
    if args.order is not None:
        order_src = json.loads(args.order.read_text())
    elif data is not None:
        order_src = data["providers"]
    if order_src is None:
        print("no provider order: give --order or an existing --data file", file=sys.stderr)
        return 2
    order = [str(p["name"]) for p in order_src]
    comment = str(data["comment"]) if data is not None else DEFAULT_COMMENT
    derived = derived_data(snaps, order, comment)

    if args.emit:
        for p in problems:
            print(f"warning: {p}", file=sys.stderr)
        print(dump_data(derived))
        return 0
    if data is None:
        print(f"{args.data}: not found", file=sys.stderr)
        return 2
    gone = sorted(h.library for h in hist.values() if snaps[-1].release not in h.releases)
    print(f"releases {snaps[0].release}..{snaps[-1].release} ({len(snaps)} refs); "
          f"providers no longer shipped (not in the data file): {', '.join(gone)}")
    for p in problems:
        print(f"warning: {p}")
    diffs = compare(data, derived)
    for d in diffs:
        print(d)
    if args.stable:
        git = Git(args.repo)
        try:
            for line in stable_backports(git, data, args.verbose):
                print(f"backport: {line}")
        finally:
            git.close()
    print("no differences" if not diffs else f"{len(diffs)} difference(s)")
    return 1 if diffs else 0


def dump_data(data: dict[str, Any]) -> str:
    """The data file layout: one match entry per line."""
    lines = ["{"]
    lines.append(f'  "format": {json.dumps(data["format"])},')
    lines.append(f'  "comment": {json.dumps(data["comment"])},')
    lines.append(f'  "latest": {json.dumps(data["latest"])},')
    lines.append(f'  "pabi": {json.dumps(data["pabi"])},')
    lines.append('  "providers": [')
    for n, p in enumerate(data["providers"]):
        lines.append("    {")
        for key in ("name", "library", "min_abi", "max_abi", "since", "abi_history"):
            if key in p:
                lines.append(f'      {json.dumps(key)}: {json.dumps(p[key])},')
        lines.append('      "match": [')
        for k, m in enumerate(p["match"]):
            sep = "," if k + 1 < len(p["match"]) else ""
            lines.append(f"        {json.dumps(m)}{sep}")
        lines.append("      ]")
        lines.append("    }" + ("," if n + 1 < len(data["providers"]) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

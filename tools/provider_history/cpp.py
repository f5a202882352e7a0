"""A small C preprocessor: enough of cpp to expand rdma-core's provider match tables."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

from .cexpr import eval_int
from .ctokens import strip_comments, tokenize

# ---------------------------------------------------------------------------
# a small C preprocessor

Reader = Callable[[str], Optional[str]]  # repository path -> text, None if absent


@dataclass
class Macro:
    params: Optional[list[str]]  # None for object-like macros
    body: list[str]
    variadic: bool = False


def split_args(tokens: list[str], start: int) -> tuple[list[list[str]], int]:
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
            args, i = split_args(tokens, i + 1)
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

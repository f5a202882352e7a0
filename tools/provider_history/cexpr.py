"""C integer constant expressions (``#if`` conditions, table entries, enum values)."""

from __future__ import annotations

import re

from .ctokens import IDENT_RE, tokenize

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
        elif IDENT_RE.match(t):
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

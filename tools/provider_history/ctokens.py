"""C tokens: the tokenizer and comment stripper the preprocessor and the constant
expressions share."""

from __future__ import annotations

import re

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
IDENT_RE = re.compile(r"[A-Za-z_]\w*\Z")


def tokenize(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def strip_comments(text: str) -> str:
    text = text.replace("\\\r\n", "").replace("\\\n", "")

    def repl(m: re.Match[str]) -> str:
        return m.group(1) if m.group(1) is not None else " "

    return _COMMENT_RE.sub(repl, text)

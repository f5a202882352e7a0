"""Text and numbers as NCCL's C code reads them: ``isspace`` in the C locale, glibc's
``atoi``, ``ncclLoadParam``'s ``strtoll``, narrowing casts, and the bytes of a C string."""

from __future__ import annotations

from ..ground.errors import UsageError, WrongTypeError

TYPE_CHECKING = False  # no typing at run time (rank/environment.py says why)
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["C_SPACE", "atoi", "int_cast", "encoded", "text_arg", "load_param"]

C_SPACE = " \t\n\v\f\r"  # isspace() in the C locale


def _number_start(text: str) -> tuple[int, bool]:
    """Where strtol's digits start in ``text`` (after C whitespace and one sign), and
    whether the sign was ``-``."""
    i, n = 0, len(text)
    while i < n and text[i] in C_SPACE:
        i += 1
    if i < n and text[i] in "+-":
        return i + 1, text[i] == "-"
    return i, False


def atoi(text: str) -> int:
    """glibc ``atoi``: ``(int) strtol(text, NULL, 10)`` (leading C whitespace, a sign,
    decimal digits; out of ``long`` range clamps, then the cast keeps 32 bits)."""
    i, neg = _number_start(text)
    n = len(text)
    j = i
    while j < n and "0" <= text[j] <= "9":
        j += 1
    value = int(text[i:j]) if j > i else 0
    value = -value if neg else value
    value = max(-(1 << 63), min((1 << 63) - 1, value))
    return int_cast(value, 32)


def int_cast(value: int, bits: int) -> int:
    """Two's complement truncation, as a C conversion to a narrower signed type."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def encoded(text: str) -> bytes:
    """The bytes NCCL sees for ``text``: UTF-8, with the undecodable bytes that
    :func:`os.fsdecode` turned into ``\\udcXX`` given back."""
    return text.encode("utf-8", "surrogateescape")


def text_arg(what: str, value: object) -> str:
    """``value`` as the C string NCCL would read: a str without NUL bytes whose
    surrogates, if any, are :func:`os.fsdecode`'s undecodable bytes."""
    if not isinstance(value, str):
        raise WrongTypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise UsageError(f"{what} contains a NUL byte (no environment variable can)")
    try:
        encoded(value)
    except UnicodeEncodeError:
        raise UsageError(f"{what} is not text an environment variable can hold: "
                         f"{value!r}") from None
    return value


def load_param(env: Mapping[str, str], name: str, default: int) -> int:
    """``ncclLoadParam`` (src/misc/param.cc): ``strtoll(value, NULL, 0)`` when set and
    non-empty; a value out of range (ERANGE) gives the default."""
    text = env.get(name)
    if not text:
        return default
    i, neg = _number_start(text)
    n = len(text)
    base, digits = 10, "0123456789"
    if text[i:i + 2].lower() == "0x" and i + 2 < n and text[i + 2] in "0123456789abcdefABCDEF":
        base, digits, i = 16, "0123456789abcdefABCDEF", i + 2
    elif text[i:i + 1] == "0":
        base, digits = 8, "01234567"
    j = i
    while j < n and text[j] in digits:
        j += 1
    value = int(text[i:j], base) if j > i else 0
    value = -value if neg else value
    if not -(1 << 63) <= value < (1 << 63):
        return default
    return value

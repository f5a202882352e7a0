"""The C parsing rules against the real glibc (through ctypes), on generated input."""

from __future__ import annotations

import ctypes
import ctypes.util

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sysverbs import cparse

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.strtoul.restype = ctypes.c_ulong
libc.strtoul.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
libc.strtol.restype = ctypes.c_long
libc.strtol.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]

# Text that exercises the parsers: digits, hex, signs, whitespace, separators, junk.
ALPHABET = b"0123456789abcdefxX+-: \t\n\v\r\x00g"
text = st.binary(max_size=40).map(bytes) | st.lists(
    st.sampled_from([bytes([c]) for c in ALPHABET]), max_size=40
).map(b"".join)


def c_scan_u_u(data: bytes) -> tuple[int, int] | None:
    a, b = ctypes.c_uint(), ctypes.c_uint()
    n = libc.sscanf(ctypes.c_char_p(data), b"%u:%u", ctypes.byref(a), ctypes.byref(b))
    return (a.value, b.value) if n == 2 else None


def c_scan_hx4(data: bytes) -> tuple[int, int, int, int] | None:
    v = [ctypes.c_ushort() for _ in range(4)]
    n = libc.sscanf(ctypes.c_char_p(data), b"%hx:%hx:%hx:%hx", *(ctypes.byref(x) for x in v))
    return (v[0].value, v[1].value, v[2].value, v[3].value) if n == 4 else None


@settings(max_examples=1500)
@given(text)
@example(b"99999999999999999999999")
@example(b"-99999999999999999999999")
@example(b"-1")
@example(b" +18446744073709551615")
def test_strtoul_and_strtol(data: bytes) -> None:
    assert cparse.strtoul(data) == libc.strtoul(data, None, 10)
    assert cparse.strtol(data) == libc.strtol(data, None, 10)


@settings(max_examples=1500)
@given(text)
@example(b"-1:5")
@example(b"231:192junk")
@example(b" 231 :192")
@example(b"0x10:0")
@example(b"99999999999999999999:4294967297")
@example(b"- 1:2")
def test_scan_u_u(data: bytes) -> None:
    assert cparse.scan_u_u(data) == c_scan_u_u(data)


@settings(max_examples=1500)
@given(text)
@example(b"0x:1:2:3")
@example(b"-0x10:0X1f:+3:ffffffff")
@example(b"0002:c903:0000:12340000")
@example(b"1 :2:3:4")
@example(b"0xg:1:2:3")
@example(b"+0x:1:2:3")
@example(b"-:1:2:3")
def test_scan_hx4(data: bytes) -> None:
    assert cparse.scan_hx4(data) == c_scan_hx4(data)


def test_to_int32() -> None:
    assert cparse.to_int32(2**31) == -(2**31)
    assert cparse.to_int32(-6) == -6
    assert cparse.to_int32(2**32 + 6) == 6

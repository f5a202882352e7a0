"""The C parsing rules against the real glibc (through ctypes), on generated input."""

from __future__ import annotations

import ctypes
import ctypes.util
import locale
from collections.abc import Iterator

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sysverbs.ground import sysfs_read as cparse  # the C parsing rules live beside the reader
from tests.fuzz.profiles import fuzz_settings

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.strtoul.restype = ctypes.c_ulong
libc.strtoul.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
libc.strtol.restype = ctypes.c_long
libc.strtol.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]

# Text that exercises the parsers: digits, hex, signs, whitespace, separators, junk.
ALPHABET = b"0123456789abcdefxX+-: \t\n\v\r\x00g"
text = (
    st.binary(max_size=40).map(bytes)
    | st.lists(st.sampled_from([bytes([c]) for c in ALPHABET]), max_size=40).map(b"".join)
    # What sysfs really holds, and what the fast paths take: digits, hex and colons
    # only, long enough to reach the clamps.
    | st.lists(
        st.sampled_from([bytes([c]) for c in b"0123456789aAfF:"]), min_size=1, max_size=72
    ).map(b"".join)
)


def c_scan_u_u(data: bytes) -> tuple[int, int] | None:
    a, b = ctypes.c_uint(), ctypes.c_uint()
    n = libc.sscanf(ctypes.c_char_p(data), b"%u:%u", ctypes.byref(a), ctypes.byref(b))
    return (a.value, b.value) if n == 2 else None


def c_scan_hx4(data: bytes) -> tuple[int, int, int, int] | None:
    v = [ctypes.c_ushort() for _ in range(4)]
    n = libc.sscanf(ctypes.c_char_p(data), b"%hx:%hx:%hx:%hx", *(ctypes.byref(x) for x in v))
    return (v[0].value, v[1].value, v[2].value, v[3].value) if n == 4 else None


@fuzz_settings(ci=500, deep=5000)
@given(text)
@example(b"99999999999999999999999")
@example(b"-99999999999999999999999")
@example(b"-1")
@example(b" +18446744073709551615")
@example(b"18446744073709551615")
@example(b"18446744073709551616")
@example(b"9999999999999999999")
@example(b"9223372036854775807")
@example(b"9223372036854775808")
@example(b"999999999999999999")
@example(b"0")
@example(b"1: CA")  # node_type as sysfs holds it
@example(b"9999999999999999999: x")
@example(b"18446744073709551616:1")
@example(b"12a:3")
def test_strtoul_and_strtol(data: bytes) -> None:
    assert cparse.strtoul(data) == libc.strtoul(data, None, 10)
    assert cparse.strtol(data) == libc.strtol(data, None, 10)


@fuzz_settings(ci=500, deep=5000)
@given(text)
@example(b"-1:5")
@example(b"231:192junk")
@example(b" 231 :192")
@example(b"0x10:0")
@example(b"99999999999999999999:4294967297")
@example(b"- 1:2")
@example(b"4294967296:18446744073709551616")
@example(b"9999999999999999999:1")
@example(b"231:")
@example(b":0")
@example(b"1:2:3")
def test_scan_u_u(data: bytes) -> None:
    assert cparse.scan_u_u(data) == c_scan_u_u(data)


@fuzz_settings(ci=500, deep=5000)
@given(text)
@example(b"0x:1:2:3")
@example(b"-0x10:0X1f:+3:ffffffff")
@example(b"0002:c903:0000:12340000")
@example(b"1 :2:3:4")
@example(b"0xg:1:2:3")
@example(b"+0x:1:2:3")
@example(b"-:1:2:3")
@example(b"0c42:a103:00a5:1c30")
@example(b"10000:0:0:0")
@example(b"ffffffffffffffff:1:2:3")
@example(b"11111111111111111:1:1:1")
@example(b"1:2:3:")
@example(b"1:2:3:4:5")
@example(b"1::3:4")
def test_scan_hx4(data: bytes) -> None:
    assert cparse.scan_hx4(data) == c_scan_hx4(data)


def test_to_int32() -> None:
    assert cparse.to_int32(2**31) == -(2**31)
    assert cparse.to_int32(-6) == -6
    assert cparse.to_int32(2**32 + 6) == 6


libc.fnmatch.restype = ctypes.c_int
libc.fnmatch.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
# Patterns like the match tables' (literals, '*', '?') and texts made of the same bytes.
GLOB_BYTES = b"ab*?.:/N\x00\xff"
glob_text = st.lists(st.sampled_from([bytes([c]) for c in GLOB_BYTES]), max_size=14).map(
    b"".join
)


@pytest.fixture
def c_locale() -> Iterator[None]:
    """libibverbs never calls setlocale(): compare in the "C" locale, as it runs."""
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


@fuzz_settings(ci=1000, deep=10000)  # `make fuzz` runs the deep count
@given(glob_text, glob_text)
@example(b"rdma_device:*Nrxe*", b"rdma_device:Nrxe0")
@example(b"rdma_device:*Nrxe*", b"rdma_device:Nmlx5_0")
@example(b"of:N*T*Chisilicon,hns-roce-v1C*", b"of:NroceTChisilicon,hns-roce-v1Cx")
@example(b"acpi*:HISI00D1:*", b"acpi:HISI00D1:")
@example(b"*a*a*a*b", b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
@example(b"?", b"")
@example(b"*", b"")
@example(b"a\x00b", b"a")
def test_fnmatch(c_locale: None, pattern: bytes, data: bytes) -> None:
    assert cparse.fnmatch(pattern, data) == (libc.fnmatch(pattern, data, 0) == 0)

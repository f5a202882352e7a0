"""The small modules of rank/ (issue 41: the mutants of ``make mutation``; placement/'s
are in tests/test_mut_small2.py): their edges as values.  Pure functions, small trees
in a temporary directory, and glibc, linux-libc-dev's headers and the kernel as the
oracles where the behaviour has one (ctypes, in process); no subprocess.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from sysverbs.ground.errors import BindingError, UsageError, WrongTypeError
from sysverbs.rank import ctext, mempolicy, rtnetlink, versions
from sysverbs.rank.conf import nccl_environment, read_conf_file
from sysverbs.rank.hca import parse_hca
from tests.conftest import require

# ------------------------------------------------------------------ rank/versions.py

# nccl.h: NCCL_VERSION(X,Y,Z) is X*1000+Y*100+Z while X <= 2 and Y <= 8, else
# X*10000+Y*100+Z (NCCL_VERSION_CODE of 2.8.4 is 2804, of 2.9.6 20906).
VERSIONS = [
    ("2.30.7-1", (2, 30, 7)), ("v2.30.7", (2, 30, 7)), (" 2.26.2\n", (2, 26, 2)),
    ("3", (3, 0, 0)), ("2.6", (2, 6, 0)), ((3,), (3, 0, 0)), ([2, 21], (2, 21, 0)),
    ((3, 0, 0), (3, 0, 0)), ((2, 5, 6), (2, 5, 6)), (2804, (2, 8, 4)), (2506, (2, 5, 6)),
    (9999, (9, 9, 99)), (20906, (2, 9, 6)), (23203, (2, 32, 3)), (None, (2, 32, 3)),
    # each field of a code, at the edges of its formula's divisions
    (2800, (2, 8, 0)), (3000, (3, 0, 0)), (30000, (3, 0, 0)), (29999, (2, 99, 99)),
    (22000, (2, 20, 0)), (20999, (2, 9, 99)), (22099, (2, 20, 99)),
]


@pytest.mark.parametrize("given,version", VERSIONS)
def test_parse_version(given: versions.VersionArg, version: versions.Version) -> None:
    assert versions.parse_version(given) == version


@pytest.mark.parametrize("given", [
    "2.5.5", (2, 5, 5), 2505, 10000, (), (2, 30, 7, 1), "2.30.7.1", (3, -1, 0), "2.x",
    "", "-3",
])
def test_not_a_modelled_version(given: versions.VersionArg) -> None:
    with pytest.raises(UsageError):
        versions.parse_version(given)


def test_too_old_a_version_is_named() -> None:
    with pytest.raises(UsageError, match=r"^NCCL 1\.2\.3 is older than 2\.5\.6, the oldest "
                       "release modelled$"):
        versions.parse_version("1.2.3")


@pytest.mark.parametrize("given", [2.3, (2, True, 0), (2, "30", 7), b"2.30.7"])
def test_version_of_a_wrong_type(given: object) -> None:
    with pytest.raises(WrongTypeError):
        versions.parse_version(given)  # type: ignore[arg-type]


def test_device_table_size_by_release() -> None:
    assert versions.MAX_IB_DEVS == 32
    assert versions.max_ib_devs() == 32 and versions.max_ib_devs("2.18.5") == 32
    assert versions.max_ib_devs("2.18.4") == 16 and versions.max_ib_devs(2506) == 16


def test_rule_releases() -> None:
    """The first release of each rule (NVIDIA/nccl's tags), at and just before it."""
    assert versions.LATEST == (2, 32, 3)
    assert (versions.V_OLDEST, versions.V_32_DEVS, versions.V_RO) == (
        (2, 5, 6), (2, 18, 5), (2, 12, 7))
    assert (versions.V_MERGED_IN_INIT, versions.V_LINE_2048, versions.V_NO_DEVICE_USING) == (
        ((2, 20, 0), (2, 24, 0)), (2, 20, 0), (2, 24, 0))
    assert (versions.V_CONF_FILE_ENV, versions.V_CONF_COMMENTS, versions.V_CONF_FGETS) == (
        (2, 23, 0), (2, 26, 2), (2, 30, 3))
    assert (versions.V_MERGE_RETRY, versions.V_PCI_ORDER, versions.V_PLANE_TEXT) == (
        (2, 26, 2), (2, 29, 7), (2, 31, 0))
    assert versions.V_STRTOK_PARSER == (2, 30, 7)
    # the parser: an empty port is "any port" since 2.30.7, port 0 before
    assert parse_hca("mlx5_0:", nccl_version="2.30.7").entries[0].port == -1
    assert parse_hca("mlx5_0:", nccl_version="2.30.6").entries[0].port == 0
    # config files: "#" lines skipped since 2.26.2, "\r" removed since 2.30.3
    assert read_conf_file(b"#A=1\n", nccl_version="2.26.2") == []
    assert read_conf_file(b"#A=1\n", nccl_version="2.26.1") == [("#A", "1")]
    assert read_conf_file(b"A=1\r\n", nccl_version="2.30.3") == [("A", "1")]
    assert read_conf_file(b"A=1\r\n", nccl_version="2.30.2") == [("A", "1\r")]


def test_conf_file_variable_since_2_23(tmp_path: Path) -> None:
    (tmp_path / "my.conf").write_bytes(b"NCCL_A=mine\n")
    env = {"NCCL_CONF_FILE": "/my.conf", "HOME": "/nowhere"}
    new, where = nccl_environment(env, root=str(tmp_path), nccl_version="2.23.0")
    assert (new.get("NCCL_A"), where) == ("mine", {"NCCL_A": "/my.conf"})
    old, where = nccl_environment(env, root=str(tmp_path), nccl_version="2.22.3")
    assert (old.get("NCCL_A"), where) == (None, {})


# ------------------------------------------------------------------ rank/ctext.py

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.atoi.argtypes = [ctypes.c_char_p]
_LIBC.strtoll.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
_LIBC.strtoll.restype = ctypes.c_longlong
_LIBC.isspace.argtypes = [ctypes.c_int]


def _nccl_load_param(text: str, default: int) -> int:
    """ncclLoadParam (src/misc/param.cc) with glibc's strtoll: errno gives the default."""
    ctypes.set_errno(0)
    value = int(_LIBC.strtoll(text.encode(), None, 0))
    return default if ctypes.get_errno() else value


NUMBERS = [
    "0", "7", "+7", "-7", " \t\n\v\f\r12", "\v-3x", "-", "+", "x", "1e3", "08", "0777",
    "-0777", "0x", "0x1g", "0xg", "0X1F", " -0x10", "0xfF", "0x7fffffffffffffff",
    "0x8000000000000000", "-0x8000000000000000", "-0x8000000000000001",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "99999999999999999999999", "2147483647", "2147483648",
    "-2147483649", "4294967296", "+-1", "--1", " +0x10", "00x10", "0x 1", "1 2", "0x1",
    "-0xA", "0xG", "4611686018427387904", "-4611686018427387905",
]


@pytest.mark.parametrize("text", NUMBERS)
def test_numbers_as_glibc_reads_them(text: str) -> None:
    assert ctext.atoi(text) == _LIBC.atoi(text.encode())
    assert ctext.load_param({"P": text}, "P", -42) == _nccl_load_param(text, -42)


def test_load_param_unset_or_empty() -> None:
    assert ctext.load_param({}, "P", 5) == 5
    assert ctext.load_param({"P": ""}, "P", 6) == 6
    assert ctext.load_param({"Q": "1"}, "P", 7) == 7


def test_c_space_is_isspace_of_the_c_locale() -> None:
    assert set(ctext.C_SPACE) == {chr(c) for c in range(256) if _LIBC.isspace(c)}


@pytest.mark.parametrize("value,bits", [
    (0x7FFFFFFF, 32), (0x80000000, 32), (0xFFFFFFFF, 32), (1 << 32, 32), (-1, 32),
    (70000, 16), (32767, 16), (32768, 16), (-32769, 16), (255, 8), (128, 8), (1 << 63, 64),
])
def test_int_cast_is_a_c_conversion(value: int, bits: int) -> None:
    c_type = {8: ctypes.c_int8, 16: ctypes.c_int16, 32: ctypes.c_int32, 64: ctypes.c_int64}
    assert ctext.int_cast(value, bits) == c_type[bits](value).value


def test_text_arguments() -> None:
    assert ctext.encoded("é\udcff") == b"\xc3\xa9\xff"
    assert ctext.text_arg("v", "mlx5_\udcff") == "mlx5_\udcff"
    with pytest.raises(WrongTypeError, match="^v must be a str, not bytes$"):
        ctext.text_arg("v", b"mlx5_0")
    with pytest.raises(UsageError, match="^v contains a NUL byte"):
        ctext.text_arg("v", "mlx5\0")
    with pytest.raises(UsageError, match="^v is not text an environment variable can hold"):
        ctext.text_arg("v", "\ud800")


# ------------------------------------------------------------------ rank/conf.py

CONF = [
    # data, version, pairs
    (b"A=1\0junk\nB=2", None, [("A", "1"), ("B", "2")]),
    (b"no equals\nA==\n=v\n", None, [("A", "="), ("", "v")]),
    (b"A=1\r\r\n#B=2\r\nC=3\n", None, [("A", "1\r"), ("C", "3")]),
    (b"#B=2\nC=3\r\n", "2.26.2", [("C", "3\r")]),
    (b"\n\nA=1\n", "2.26.1", [("A", "1")]),
    (b"N" * 1030 + b"=" + b"v" * 1030 + b"\n", None, [("N" * 1023, "v" * 1023)]),
    # fgets(4096): a longer line is read as two; getline reads it whole
    (b"A=" + b"x" * 4093 + b"B=2\nC=3\n", None, [("A", "x" * 1023), ("B", "2"), ("C", "3")]),
    (b"A=" + b"x" * 4093 + b"B=2\nC=3\n", "2.30.2", [("A", "x" * 1023), ("C", "3")]),
    (b"A=" + b"x" * 4093 + b"#B=2\n", None, [("A", "x" * 1023)]),
    (b"A=\xff\n", None, [("A", "\udcff")]),
]


@pytest.mark.parametrize("data,version,pairs", CONF)
def test_read_conf_file(data: bytes, version: str | None, pairs: list[tuple[str, str]]) -> None:
    assert read_conf_file(data, nccl_version=version) == pairs
    assert read_conf_file(bytearray(data), nccl_version=version) == pairs


def test_conf_file_of_a_wrong_type() -> None:
    with pytest.raises(WrongTypeError, match="^data must be bytes, not str$"):
        read_conf_file("A=1")  # type: ignore[arg-type]


def _conf_root(tmp: Path, uid_line: str = "") -> Path:
    (tmp / "etc").mkdir()
    (tmp / "etc" / "nccl.conf").write_bytes(b"NCCL_A=etc\nNCCL_B=etc\nNCCL_C=etc\n=x\n")
    (tmp / "home" / "u").mkdir(parents=True)
    (tmp / "home" / "u" / ".nccl.conf").write_bytes(b"NCCL_A=passwd\n")
    (tmp / "h").mkdir()
    (tmp / "h" / ".nccl.conf").write_bytes(b"NCCL_A=home\nNCCL_B=home\n")
    (tmp / "etc" / "passwd").write_text(
        f"root:x:{os.getuid() + 1}:0::/root:/bin/sh\r\nshort:{os.getuid()}\r"
        f"five:x:{os.getuid()}:0:gecos\nu:x:{os.getuid()}:0::/home/u\n")
    return tmp


def test_nccl_environment_files_in_order(tmp_path: Path) -> None:
    root = _conf_root(tmp_path)
    env = {"HOME": "/h", "NCCL_C": "env"}
    got, where = nccl_environment(env, root=root, nccl_version="2.30.3")
    assert {k: v for k, v in got.items() if k.startswith("NCCL_") or not k} == {
        "NCCL_A": "home", "NCCL_B": "home", "NCCL_C": "env"}
    assert where == {"NCCL_A": "/h/.nccl.conf", "NCCL_B": "/h/.nccl.conf"}
    # before 2.30.3: the home of the real uid in <root>/etc/passwd, not $HOME
    got, where = nccl_environment(env, root=str(root), nccl_version="2.30.2")
    assert (got["NCCL_A"], got["NCCL_B"]) == ("passwd", "etc")
    assert where == {"NCCL_A": "/home/u/.nccl.conf", "NCCL_B": "/etc/nccl.conf"}
    # NCCL_CONF_FILE (not empty) instead of the home's file; an unreadable one is skipped
    got, where = nccl_environment({"NCCL_CONF_FILE": "/h/.nccl.conf"}, root=root)
    assert where == {"NCCL_A": "/h/.nccl.conf", "NCCL_B": "/h/.nccl.conf",
                     "NCCL_C": "/etc/nccl.conf"}
    got, where = nccl_environment({"NCCL_CONF_FILE": "", "HOME": "/h"}, root=root)
    assert where["NCCL_A"] == "/h/.nccl.conf"
    got, where = nccl_environment({"NCCL_CONF_FILE": "/none", "HOME": "/h"}, root=root)
    assert where == {"NCCL_A": "/etc/nccl.conf", "NCCL_B": "/etc/nccl.conf",
                     "NCCL_C": "/etc/nccl.conf"}
    # a path of more than 1023 bytes is cut there, as NCCL's buffer does
    got, where = nccl_environment({"NCCL_CONF_FILE": "/h/.nccl.conf" + "x" * 2000}, root=root)
    assert where["NCCL_A"] == "/etc/nccl.conf"
    long = "/" + "/".join(["d" * 200] * 4) + "/" + "c" * 218  # 1023 bytes
    assert len(long) == 1023
    (root / long[1:805]).mkdir(parents=True)
    (root / long[1:]).write_bytes(b"NCCL_A=long\n")
    got, _ = nccl_environment({"NCCL_CONF_FILE": long + "X"}, root=root)
    assert got["NCCL_A"] == "long"


def test_nccl_environment_roots(tmp_path: Path) -> None:
    root = _conf_root(tmp_path)
    conf = str(root / "h" / ".nccl.conf")
    got, where = nccl_environment({"NCCL_CONF_FILE": conf}, root="/")
    assert (got["NCCL_A"], where["NCCL_A"]) == ("home", conf)
    got, where = nccl_environment({"NCCL_CONF_FILE": conf}, root="")
    assert where["NCCL_A"] == conf
    # no root: the user database's home (before 2.30.3) and the paths as they are
    got, where = nccl_environment({"NCCL_CONF_FILE": conf}, nccl_version="2.30.2")
    assert (got["NCCL_A"], where["NCCL_A"]) == ("home", conf)
    with pytest.raises(WrongTypeError, match="^root must be a path, not int$"):
        nccl_environment({}, root=1)  # type: ignore[arg-type]
    # no passwd entry of this uid: no home file
    (root / "etc" / "passwd").write_text("u:x:99999:0::/home/u:/bin/sh\n")
    _, where = nccl_environment({}, root=root, nccl_version="2.30.2")
    assert where["NCCL_A"] == "/etc/nccl.conf"
    (root / "etc" / "passwd").unlink()
    _, where = nccl_environment({}, root=root, nccl_version="2.30.2")
    assert where["NCCL_A"] == "/etc/nccl.conf"
    # $HOME's file name cut at 1023 bytes too
    home = "/" + "/".join(["d" * 200] * 4) + "/" + "e" * 208
    (root / home[1:]).mkdir(parents=True)
    (root / home[1:] / ".nccl.con").write_bytes(b"NCCL_A=cut\n")
    got, where = nccl_environment({"HOME": home}, root=root)
    assert (got["NCCL_A"], where["NCCL_A"]) == ("cut", home + "/.nccl.con")


def test_nccl_environment_of_a_uid_without_a_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """A uid the user database does not know (a container's arbitrary uid): no home."""
    monkeypatch.setattr(os, "getuid", lambda: 3999999)
    _, where = nccl_environment({}, nccl_version="2.30.2")
    assert not any(v.endswith("/.nccl.conf") for v in where.values())


# ------------------------------------------------------------------ rank/mempolicy.py


def _syscall_numbers(header: str) -> tuple[int, int]:
    text = Path(header).read_text()
    numbers = [int(re.search(rf"#define __NR_{name} (\d+)", text).group(1))  # type: ignore[union-attr]
               for name in ("set_mempolicy", "get_mempolicy")]
    return numbers[0], numbers[1]


def test_mempolicy_syscall_numbers_are_the_kernels() -> None:
    """linux-libc-dev's headers (the kernel's syscall tables as Debian installs them)."""
    x86 = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
    generic = "/usr/include/asm-generic/unistd.h"
    for header in (x86, generic):
        require(None if os.path.exists(header) else f"no {header} (linux-libc-dev)",
                "the kernel's syscall numbers")
    assert mempolicy.SYSCALLS == {"x86_64": _syscall_numbers(x86),
                                  **dict.fromkeys(["aarch64", "arm64", "riscv64", "loongarch64"],
                                                  _syscall_numbers(generic))}


def test_mempolicy_modes_and_names() -> None:
    # include/uapi/linux/mempolicy.h's enum, and numactl's names of them
    assert (mempolicy.MPOL_DEFAULT, mempolicy.MPOL_PREFERRED, mempolicy.MPOL_BIND,
            mempolicy.MPOL_PREFERRED_MANY) == (0, 1, 2, 5)
    assert mempolicy.MODE_NAMES == {
        0: "default", 1: "preferred", 2: "bind", 3: "interleave", 4: "local",
        5: "preferred-many", 6: "weighted-interleave"}


def _in_a_thread(work: Any) -> Any:
    """``work()``'s answer or exception in a thread of its own (the policy is the
    thread's: the test's own thread keeps its policy)."""
    import threading

    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as e:  # given back to the test
            out.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out[0]


def test_mempolicy_with_the_kernel() -> None:
    def work() -> list[object]:
        seen: list[object] = [mempolicy.get_mempolicy()]
        mempolicy.set_mempolicy(mempolicy.MPOL_PREFERRED, [0, 0])
        seen.append(mempolicy.get_mempolicy())
        mempolicy.set_mempolicy(mempolicy.MPOL_BIND, iter([0]))
        seen.append(mempolicy.get_mempolicy())
        mempolicy.set_mempolicy(mempolicy.MPOL_DEFAULT)
        seen.append(mempolicy.get_mempolicy())
        for nodes in ([1024], [-1], [1023]):
            try:
                mempolicy.set_mempolicy(mempolicy.MPOL_BIND, nodes)
            except BindingError as e:
                seen.append((str(e), e.errno))
        return seen

    assert _in_a_thread(work) == [
        (0, frozenset()), (1, frozenset({0})), (2, frozenset({0})), (0, frozenset()),
        ("node numbers must be 0 to 1023: [1024]", 22),
        ("node numbers must be 0 to 1023: [-1]", 22),
        ("the kernel refused set_mempolicy(bind, nodes [1023]): [Errno 22] Invalid argument", 22),
    ]


def test_mempolicy_masks(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the kernel is given (mm/mempolicy.c reads maxnode - 1 bits of unsigned longs)
    and how the mask it fills is read: nodes past the first word."""
    calls: list[tuple[object, ...]] = []

    def fake(index: int, what: str, *args: Any) -> int:
        if index == 0:
            mask = list(args[1]) if args[1] is not None else None
            calls.append((what, args[0].value, mask, args[2].value))
        else:
            args[0]._obj.value = 2
            args[1][0], args[1][1], args[1][15] = 1 << 63, 5, 1 << 63
            calls.append((what, len(args[1]), args[2].value, args[3], args[4].value))
        return 0

    monkeypatch.setattr(mempolicy, "_call", fake)
    mempolicy.set_mempolicy(mempolicy.MPOL_BIND, [130, 0, 63, 64])
    mempolicy.set_mempolicy(mempolicy.MPOL_PREFERRED, [5])
    mempolicy.set_mempolicy(mempolicy.MPOL_DEFAULT, [])
    mempolicy.set_mempolicy(9, [1])
    assert mempolicy.get_mempolicy() == (2, frozenset({63, 64, 66, 1023}))
    assert calls == [
        ("set_mempolicy(bind, nodes [0, 63, 64, 130])", 2, [1 | 1 << 63, 1, 4], 193),
        ("set_mempolicy(preferred, nodes [5])", 1, [32], 65),
        ("set_mempolicy(default, nodes none)", 0, None, 0),
        ("set_mempolicy(9, nodes [1])", 9, [2], 65),
        ("get_mempolicy", 16, 1024, None, 0),
    ]


class _RefusingLibc:
    """glibc's syscall() as a seccomp filter that refuses it makes it: -1, errno EPERM."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.syscall = self

    def __call__(self, *args: object) -> int:
        ctypes.set_errno(1)
        return -1


def test_mempolicy_refused_or_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes, "CDLL", _RefusingLibc)
    with pytest.raises(BindingError) as e:
        mempolicy.get_mempolicy()
    assert (str(e.value), e.value.errno) == (
        "the kernel refused get_mempolicy: [Errno 1] Operation not permitted (a seccomp "
        "filter refuses it: Docker's default profile does unless the container has "
        "CAP_SYS_NICE)", 1)
    monkeypatch.setattr(platform, "machine", lambda: "sparc64")
    with pytest.raises(BindingError) as e:
        mempolicy.set_mempolicy(mempolicy.MPOL_DEFAULT)
    assert (str(e.value), e.value.errno) == (
        "set_mempolicy(default, nodes none): sysverbs does not know its system call number "
        "on sparc64 (it knows aarch64, arm64, loongarch64, riscv64, x86_64)", 38)


def test_affinity_through_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without os.sched_*affinity (PyPy 3.9): glibc's, with the kernel's answers."""
    getter = getattr(os, "sched_getaffinity", None)  # PyPy 3.9 has none: glibc's then
    real = frozenset(getter(0)) if getter else mempolicy.get_affinity(0)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    assert mempolicy.get_affinity() == mempolicy.get_affinity(0) == real

    def work() -> list[object]:
        seen: list[object] = []
        mempolicy.set_affinity(0, iter([min(real)]))
        seen.append(mempolicy.get_affinity(0))
        for cpus in ([8192], [-1], [8191], []):
            try:
                mempolicy.set_affinity(0, cpus)
            except OSError as e:
                seen.append((e.errno, e.strerror))
        seen.append(mempolicy.get_affinity(0))
        mempolicy.set_affinity(0, real)
        seen.append(mempolicy.get_affinity(0))
        return seen

    assert _in_a_thread(work) == [
        frozenset({min(real)}), (22, "CPU 8192 is out of range"), (22, "CPU -1 is out of range"),
        (22, "Invalid argument"), (22, "Invalid argument"), frozenset({min(real)}), real]


class _AffinityLibc:
    """glibc's sched_{get,set}affinity over a cpu_set_t of the given bytes (CPU c: bit
    c % 8 of byte c // 8, as CPU_SET's unsigned longs lay it out on a little-endian host)."""

    calls: list[tuple[str, int, int, bytes]] = []
    cpu_set = bytes(1024)

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def sched_setaffinity(self, tid: Any, size: Any, mask: Any) -> int:
        self.calls.append(("set", tid.value, size.value, bytes(mask)))
        return 0

    def sched_getaffinity(self, tid: Any, size: Any, mask: Any) -> int:
        self.calls.append(("get", tid.value, size.value, bytes(mask)))
        ctypes.memmove(mask, self.cpu_set, len(self.cpu_set))
        return 0


def test_affinity_masks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    monkeypatch.setattr(ctypes, "CDLL", _AffinityLibc)
    monkeypatch.setattr(_AffinityLibc, "calls", [])
    cpus = [0, 2, 9, 70, 8191]
    monkeypatch.setattr(_AffinityLibc, "cpu_set", bytes([0b101, 0x80]) + bytes(1021) + b"\x80")
    mempolicy.set_affinity(7, cpus)
    assert mempolicy.get_affinity(5) == mempolicy.get_affinity() == {0, 2, 15, 8191}
    want = bytearray(1024)
    want[0], want[1], want[8], want[1023] = 0b101, 0b10, 0b1000000, 0x80
    assert _AffinityLibc.calls == [("set", 7, 1024, bytes(want)), ("get", 5, 1024, bytes(1024)),
                                   ("get", 0, 1024, bytes(1024))]


# ------------------------------------------------------------------ rank/rtnetlink.py


def _msg(mtype: int, body: bytes, length: int = 0) -> bytes:
    size = length or 16 + len(body)
    return (struct.pack("=IHHII", size, mtype, 2, 1, 0) + body).ljust((size + 3) & ~3, b"\0")


def _attr(kind: int, value: bytes) -> bytes:
    return struct.pack("=HH", 4 + len(value), kind) + value.ljust((len(value) + 3) & ~3, b"\0")


def _addr(family: int, index: int, *attrs: bytes) -> bytes:
    return _msg(20, struct.pack("=BBBBI", family, 24, 0, 0, index) + b"".join(attrs))


def _link(index: int, *attrs: bytes) -> bytes:
    return _msg(16, struct.pack("=BBHiII", 0, 0, 1, index, 0, 0) + b"".join(attrs))


V4 = socket.inet_pton(socket.AF_INET, "10.0.0.1")
PEER = socket.inet_pton(socket.AF_INET, "10.0.0.2")
V6 = socket.inet_pton(socket.AF_INET6, "fd00::5")
DONE = _msg(3, b"\0" * 4)


class _FakeRtnetlink:
    """A NETLINK_ROUTE socket whose kernel answers each dump request with ``replies``
    (by request type: the datagrams ``recv`` gives, in order)."""

    replies: dict[int, list[bytes]] = {}
    seen: list[object] = []
    fail: str = ""

    def __init__(self, family: int, kind: int, proto: int) -> None:
        self.seen.append(("socket", family, kind, proto))
        if self.fail == "socket":
            raise OSError(97, "Address family not supported by protocol")
        self.queue: list[bytes] = []

    def settimeout(self, seconds: float) -> None:
        self.seen.append(("timeout", seconds))

    def bind(self, address: object) -> None:
        self.seen.append(("bind", address))
        if self.fail == "bind":
            raise OSError(1, "Operation not permitted")

    def sendto(self, data: bytes, address: object) -> None:
        self.seen.append(("send", data, address))
        self.queue = list(self.replies[struct.unpack_from("=H", data, 4)[0]])

    def recv(self, size: int) -> bytes:
        assert size == 65536
        return self.queue.pop(0)

    def close(self) -> None:
        self.seen.append("close")


def _rtnetlink(monkeypatch: pytest.MonkeyPatch, addrs: list[bytes], links: list[bytes],
               fail: str = "") -> tuple[object, list[object]]:
    import _socket

    monkeypatch.setattr(_FakeRtnetlink, "replies", {22: addrs, 18: links})
    monkeypatch.setattr(_FakeRtnetlink, "seen", [])
    monkeypatch.setattr(_FakeRtnetlink, "fail", fail)
    monkeypatch.setattr(_socket, "socket", _FakeRtnetlink)
    return rtnetlink.interface_addresses(), _FakeRtnetlink.seen


def test_rtnetlink_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    import _socket

    addrs = [
        # IFA_LOCAL before IFA_ADDRESS (a point-to-point peer); a label between them
        _addr(2, 7, _attr(3, b"ppp0\0"), _attr(1, PEER), _attr(2, V4), _attr(2, PEER))
        + _addr(10, 8, _attr(1, V6)) + _addr(17, 8, _attr(1, V6))
        + _msg(21, struct.pack("=BBBBI", 2, 24, 0, 0, 7) + _attr(2, PEER))
        + _msg(20, b"\0" * 7) + _addr(2, 9, _attr(2, V4)) + _addr(2, 7, _attr(5, V4)),
        _addr(2, 8, struct.pack("=HH", 3, 1) + V4, _attr(2, V4)) + _addr(2, 8, _attr(2, PEER))
        + DONE + _addr(2, 7, _attr(2, V4)),
    ]
    links = [_link(7, _attr(3, b"ppp0\0")) + _link(8, _attr(1, b"\0" * 6), _attr(3, b"e\xff\0x"))
             + _link(9, _attr(4, b"\0\0\0\0")) + _msg(16, b"\0" * 15), DONE]
    got, seen = _rtnetlink(monkeypatch, addrs, links)
    assert got == {"ppp0": ("10.0.0.1",), "e\udcff": ("fd00::5", "10.0.0.2")}
    assert seen == [
        ("socket", 16, _socket.SOCK_RAW | _socket.SOCK_CLOEXEC, 0), ("timeout", 2.0),
        ("bind", (0, 0)),
        ("send", struct.pack("=IHHII", 24, 22, 0x301, 1, 0) + bytes(8), (0, 0)),
        ("send", struct.pack("=IHHII", 32, 18, 0x301, 2, 0) + bytes(16), (0, 0)), "close"]


def test_rtnetlink_truncated_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """A message whose length says 8 bytes more than its datagram holds: read to the
    datagram's end, then the next datagram."""
    whole = _addr(2, 7, _attr(2, V4), _attr(1, PEER))
    got, _ = _rtnetlink(monkeypatch, [whole[:-8], DONE], [_link(7, _attr(3, b"a\0")), DONE])
    assert got == {"a": ("10.0.0.1",)}


def _ifindex(name: str) -> int:
    """The kernel's index of interface ``name`` (if_nametoindex's ioctl; PyPy 3.9's socket
    has no if_nametoindex: sysfs's ifindex there)."""
    by_ioctl = getattr(socket, "if_nametoindex", None)
    if by_ioctl is not None:
        return int(by_ioctl(name))
    return int(Path(f"/sys/class/net/{name}/ifindex").read_text())


DONE16 = _msg(3, b"")  # NLMSG_DONE without its int (a header alone)


def test_rtnetlink_message_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attributes of no payload, lengths not a multiple of 4, stray bytes after the last
    attribute or message, a header alone: read as the kernel's NLMSG_*/RTA_* macros do."""
    ifinfo = struct.pack("=BBHiII", 0, 0, 1, 9, 0, 0)
    addrs = [
        # an empty attribute before IFA_LOCAL; then one whose length is 4k + 1
        _addr(2, 7, struct.pack("=HH", 4, 8), _attr(2, V4))
        + _msg(20, struct.pack("=BBBBI", 2, 24, 0, 0, 9) + struct.pack("=HH", 5, 8) + b"x")
        + _addr(2, 9, _attr(2, PEER)) + b"\0" * 15,  # 15 stray bytes: no header
        _addr(2, 8, _attr(2, V4)) + DONE16,
    ]
    links = [
        _link(7, _attr(3, b"a\0")) + _msg(16, ifinfo + struct.pack("=HH", 4, 3))
        + _msg(17, struct.pack("=BBHiII", 0, 0, 1, 8, 0, 0) + _attr(3, b"gone\0"))
        # an RTM_NEWADDR's 7 bytes, and a link's 4, each at the end of its datagram
        + struct.pack("=IHHII", 16 + 4, 16, 2, 1, 0) + b"\0" * 4,
        struct.pack("=IHHII", 16 + 19, 16, 2, 1, 0) + struct.pack("=BBHiII", 0, 0, 1, 5, 0, 0)
        + b"\0" * 3,
        DONE16,
    ]
    got, _ = _rtnetlink(monkeypatch, addrs, links)
    assert got == {"a": ("10.0.0.1",), "": ("10.0.0.2",)}
    tail = [_addr(2, 7, _attr(2, V4)) + struct.pack("=IHHII", 16 + 7, 20, 2, 1, 0) + b"\0" * 7,
            DONE16]
    got, _ = _rtnetlink(monkeypatch, tail, [_link(7, _attr(3, b"a\0")) + DONE16])
    assert got == {"a": ("10.0.0.1",)}


def test_rtnetlink_sysfs_names_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    """The names from /sys/class/net: an entry without ifindex is skipped; no directory,
    no names."""
    listdir = os.listdir
    index = _ifindex("lo")

    def entries(path: Any) -> Any:
        return [b"nosuch", b"lo"] if path == b"/sys/class/net" else listdir(path)

    monkeypatch.setattr(os, "listdir", entries)
    refused = [_msg(2, b"\0" * 20)]
    got, _ = _rtnetlink(monkeypatch, [_addr(2, index, _attr(2, V4)), DONE], refused)
    assert got == {"lo": ("10.0.0.1",)}

    def no_sysfs(path: Any) -> Any:
        if path == b"/sys/class/net":
            raise OSError(2, "No such file or directory")
        return listdir(path)

    monkeypatch.setattr(os, "listdir", no_sysfs)
    got, _ = _rtnetlink(monkeypatch, [_addr(2, index, _attr(2, V4)), DONE], refused)
    assert got == {}


@pytest.mark.parametrize("addrs,links", [
    ([_msg(2, b"\0" * 20)], [DONE]),  # NLMSG_ERROR
    ([_msg(20, b"", length=15) + DONE], [DONE]),  # a length below a header
])
def test_rtnetlink_refused_dump(monkeypatch: pytest.MonkeyPatch, addrs: list[bytes],
                                links: list[bytes]) -> None:
    assert _rtnetlink(monkeypatch, addrs, links)[0] is None


@pytest.mark.parametrize("fail", ["socket", "bind"])
def test_rtnetlink_unusable(monkeypatch: pytest.MonkeyPatch, fail: str) -> None:
    got, seen = _rtnetlink(monkeypatch, [DONE], [DONE], fail)
    assert got is None and seen[-1] == ("close" if fail == "bind" else seen[-1])


def test_rtnetlink_names_from_sysfs_when_the_link_dump_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """/sys/class/net/*/ifindex, what if_indextoname answers, on this host."""
    names = {_ifindex(n): n for n in os.listdir("/sys/class/net")}
    index = min(names)
    got, _ = _rtnetlink(monkeypatch, [_addr(2, index, _attr(2, V4)), DONE],
                        [_msg(2, b"\0" * 20)])
    assert got == {names[index]: ("10.0.0.1",)}

"""sysverbs.rank.nccl against the real NCCL (PyPI's nvidia-nccl-cu12 2.32.3, no GPU).

NCCL's bootstrap picks its socket interface with the same ``parseStringList`` and
``matchIfList`` as NCCL_IB_HCA (port -1), so in a network namespace whose only
interface is named like an RDMA device, ``Bootstrap: Using <name>:...`` or
``Bootstrap : no socket interface found`` says whether a pattern matches that name.
Each namespace holds one interface, so one answer decides one (pattern, name) pair.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sysverbs.rank import nccl
from tests.conftest import require
from tests.fuzz.profiles import fuzz_settings
from tests.oracle import nccl as oracle

pytestmark = pytest.mark.oracle


class _Host:
    """The oracle server and one namespace per interface name (made on first use)."""

    def __init__(self, lib: str) -> None:
        self.nccl = oracle.NcclOracle(lib)
        self.spaces: dict[str, oracle.Netns] = {}

    def netns(self, name: str) -> oracle.Netns:
        if name not in self.spaces:
            self.spaces[name] = oracle.Netns(name)
        return self.spaces[name]

    def picks(self, name: str, value: Optional[str], env: Optional[dict[str, str]] = None,
              files: Optional[dict[str, str]] = None) -> Optional[str]:
        full = dict(env or {})
        if value is not None:
            full["NCCL_SOCKET_IFNAME"] = value
        return self.nccl.bootstrap_interface(self.netns(name), full, files)

    def close(self) -> None:
        self.nccl.close()
        for ns in self.spaces.values():
            ns.close()


@pytest.fixture(scope="module")
def host() -> Iterator[_Host]:
    require(oracle.unavailable_reason(), "NCCL oracle")
    lib = oracle.library()
    assert lib is not None
    h = _Host(lib)
    try:
        yield h
    finally:
        h.close()


@pytest.fixture(scope="module")
def old_host() -> Iterator[_Host]:
    """NCCL 2.21.5: the character-loop parseStringList, getline config files, no
    NCCL_CONF_FILE."""
    require(oracle.unavailable_reason(oracle.NCCL_OLD_VERSION), "NCCL oracle (old release)")
    lib = oracle.library(oracle.NCCL_OLD_VERSION)
    assert lib is not None
    h = _Host(lib)
    try:
        yield h
    finally:
        h.close()


VERSIONS = [oracle.NCCL_VERSION, oracle.NCCL_OLD_VERSION]


@pytest.fixture(params=VERSIONS)
def any_host(request: pytest.FixtureRequest) -> tuple[_Host, str]:
    """(host, release) for the newest and the older NCCL."""
    if request.param == oracle.NCCL_VERSION:
        return request.getfixturevalue("host"), request.param
    return request.getfixturevalue("old_host"), request.param


def _model(name: str, value: Optional[str], version: str = oracle.NCCL_VERSION) -> Optional[str]:
    return nccl.socket_interface([name], value, nccl_version=version)


def test_library_is_the_pinned_release(host: _Host) -> None:
    rc, log = host.nccl.ask(host.netns("mlx5_10"), {})
    assert rc == 0 and "Bootstrap: Using mlx5_10:127.1.0.1<0>" in log, log
    code = ("import ctypes,sys; v=ctypes.c_int(); "
            "ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v)); print(v.value)")
    out = subprocess.run([sys.executable, "-c", code, str(oracle.library())],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "23203"  # NCCL_VERSION_CODE of 2.32.3


# The issue's claims, on an interface named mlx5_10 (all checked true with 2.32.3).
CLAIMS = [
    ("mlx5_1", True), ("^=mlx5_1", True), ("mlx5_1:1", True),
    ("=mlx5_1", False), (" mlx5_1", False), ("mlx5_0,=mlx5_10", False),
    # and around them
    ("=mlx5_10", True), ("mlx5_0,mlx5_10", True), ("^mlx5_1", False), ("^mlx5_0", True),
    ("mlx5_1\nmlx5_10", False),  # one entry "mlx5_1<newline>mlx5_10": a newline-separated
    ("mlx5_10\nmlx5_0", False),  # list matches nothing
    ("mlx5_1 ", False), ("mlx5_1,", True), (",,mlx5_1,,", True), (":1", True),
    ("^", True), ("=", True), ("m", True),  # one character: NCCL ignores the value
    ("^^mlx5_1", True), ("==mlx5_10", False), ("=^mlx5_10", False),
    ("mlx5_10:", True), ("mlx5_10::::", True), ("MLX5_1", False),
    (",".join(f"x{i}" for i in range(15)) + ",mlx5_1", True),   # entry 16 of 16
    (",".join(f"x{i}" for i in range(16)) + ",mlx5_1", False),  # entry 17: not read
    ("^" + ",".join(f"x{i}" for i in range(16)) + ",mlx5_1", True),
]


@pytest.mark.parametrize("value,matches", CLAIMS, ids=[repr(c[0]) for c in CLAIMS])
def test_claims_on_mlx5_10(any_host: tuple[_Host, str], value: str, matches: bool) -> None:
    host, version = any_host
    expected = "mlx5_10" if matches else None
    assert host.picks("mlx5_10", value) == expected
    assert _model("mlx5_10", value, version) == expected
    if len(value) > 1:
        f = nccl.parse_hca(value, max_entries=nccl.MAX_IFS, nccl_version=version)
        assert f.matches("mlx5_10") is matches


# ----------------------------------------------------------------------------- differential

_NAME_CHARS = "mlx5_01=^,.-+ibdockrv"
_names = st.text(_NAME_CHARS, min_size=1, max_size=15).filter(
    lambda n: n not in (".", "..", "lo"))
_POOL = ["mlx5_1", "mlx5_10", "mlx5_11", "mlx5_0", "mlx5_", "ib0", "ibp12s0", "docker0",
         "virbr0", "lo0", "eth0", "=mlx5_1", "^mlx5_1", "mlx5_1,2", "m"]
_JUNK = [",", ",", ":", "^", "=", " ", "\n", "\t", ":1", ":0", ":-1", "::", ",=", ",^"]


@st.composite
def _case(draw: st.DrawFn) -> tuple[list[str], str]:
    names = draw(st.lists(st.one_of(st.sampled_from(_POOL), _names), min_size=1,
                          max_size=3, unique=True))
    pieces = [n[:k] for n in names for k in range(1, len(n) + 1)] + names
    parts = draw(st.lists(st.one_of(st.sampled_from(pieces), st.sampled_from(_JUNK),
                                    st.text(_NAME_CHARS + ":, ", max_size=3)),
                          max_size=8))
    return names, "".join(parts)


@fuzz_settings(ci=100, deep=2000)
@given(_case())
def test_differential_socket_ifname(host: _Host, case: tuple[list[str], str]) -> None:
    names, value = case
    for name in names:
        real = host.picks(name, value)
        assert _model(name, value) == real, (name, value, real)


@fuzz_settings(ci=60, deep=600)
@given(_case())
def test_differential_socket_ifname_old_parser(old_host: _Host,
                                               case: tuple[list[str], str]) -> None:
    """The same against 2.21.5's character loop (names over 63 bytes overflowed its
    buffer before 2.30.7: left out)."""
    names, value = case
    assume(all(len(e.split(":", 1)[0].encode()) <= 63 for e in value.split(",")))
    for name in names:
        real = old_host.picks(name, value)
        assert _model(name, value, oracle.NCCL_OLD_VERSION) == real, (name, value, real)


# ----------------------------------------------------------------------------- config files

_HOME = "/etc/sv-home"  # everything the worker writes lives in its private /etc tmpfs


def _predict(tmp: Path, name: str, env: dict[str, str], files: dict[str, str],
             version: str = oracle.NCCL_VERSION) -> Optional[str]:
    for path, text in files.items():
        target = tmp / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    full, _ = nccl.nccl_environment(env, root=str(tmp), nccl_version=version)
    return _model(name, full.get("NCCL_SOCKET_IFNAME"), version)


PRECEDENCE = [
    # (environment, files, interface NCCL must pick on "mlx5_10")
    ({"NCCL_SOCKET_IFNAME": "mlx5_1"}, {"/etc/nccl.conf": "NCCL_SOCKET_IFNAME=nope\n"},
     "mlx5_10"),  # the environment wins over /etc/nccl.conf
    ({"NCCL_SOCKET_IFNAME": "nope"}, {"/etc/nccl.conf": "NCCL_SOCKET_IFNAME=mlx5_1\n"}, None),
    ({}, {"/etc/nccl.conf": "NCCL_SOCKET_IFNAME=nope\n"}, None),  # the file is read
    ({"NCCL_CONF_FILE": "/etc/u.conf"}, {"/etc/u.conf": "NCCL_SOCKET_IFNAME=mlx5_1\n",
                                         "/etc/nccl.conf": "NCCL_SOCKET_IFNAME=nope\n"},
     "mlx5_10"),  # NCCL_CONF_FILE wins over /etc/nccl.conf
    ({"NCCL_CONF_FILE": "/etc/u.conf", "HOME": _HOME},
     {"/etc/u.conf": "X=1\n", f"{_HOME}/.nccl.conf": "NCCL_SOCKET_IFNAME=nope\n"},
     "mlx5_10"),  # with NCCL_CONF_FILE, ~/.nccl.conf is not read
    ({"HOME": _HOME}, {f"{_HOME}/.nccl.conf": "NCCL_SOCKET_IFNAME=mlx5_1\n",
                       "/etc/nccl.conf": "NCCL_SOCKET_IFNAME=nope\n"}, "mlx5_10"),
    ({"NCCL_CONF_FILE": "", "HOME": _HOME},
     {f"{_HOME}/.nccl.conf": "NCCL_SOCKET_IFNAME=nope\n"}, None),  # "" = unset
    ({}, {"/etc/nccl.conf": "NCCL_SOCKET_IFNAME = nope\n"}, "mlx5_10"),  # "NAME " != NAME
    ({}, {"/etc/nccl.conf": "#NCCL_SOCKET_IFNAME=nope\n"}, "mlx5_10"),
    ({}, {"/etc/nccl.conf": " #x\nNCCL_SOCKET_IFNAME==mlx5_10\r\n"}, "mlx5_10"),
    ({}, {"/etc/nccl.conf": "NCCL_SOCKET_IFNAME=mlx5_10 \n"}, None),  # trailing space kept
    ({}, {"/etc/nccl.conf": "NCCL_SOCKET_IFNAME=nope\nNCCL_SOCKET_IFNAME=mlx5_1\n"},
     None),  # the first line wins (setenv does not overwrite)
    ({}, {"/etc/nccl.conf": "NCCL_SOCKET_IFNAME=" + "x" * 5000 + "\n"}, None),
    # fgets reads 4095 bytes at a time: the end of a long comment line is a new line
    ({}, {"/etc/nccl.conf": "#" + "y" * 4094 + "NCCL_SOCKET_IFNAME=nope\n"}, None),
    ({}, {"/etc/nccl.conf": "#" + "y" * 4093 + "NCCL_SOCKET_IFNAME=nope\n"}, "mlx5_10"),
]


@pytest.mark.parametrize("env,files,picked", PRECEDENCE)
def test_config_file_precedence_old_release(old_host: _Host, tmp_path: Path,
                                            env: dict[str, str], files: dict[str, str],
                                            picked: Optional[str]) -> None:
    """2.21.5 on the same files: no NCCL_CONF_FILE, whole lines, "\\r" kept."""
    real = old_host.nccl.ask(old_host.netns("mlx5_10"), env, files)
    assert _predict(tmp_path, "mlx5_10", env, files, oracle.NCCL_OLD_VERSION) == \
        oracle.parse_bootstrap(*real), real[1]


@pytest.mark.parametrize("env,files,picked", PRECEDENCE)
def test_config_file_precedence(host: _Host, tmp_path: Path, env: dict[str, str],
                                files: dict[str, str], picked: Optional[str]) -> None:
    rc, log = host.nccl.ask(host.netns("mlx5_10"), env, files)
    real = oracle.parse_bootstrap(rc, log)
    assert real == picked, log
    assert _predict(tmp_path, "mlx5_10", env, files) == picked
    full, sources = nccl.nccl_environment(env, root=str(tmp_path))
    value = full.get("NCCL_SOCKET_IFNAME")
    if value is not None and len(value) > 1:
        # NCCL 2.32.3 logs a value from a config file as "set by environment" too
        assert f"NCCL_SOCKET_IFNAME set by environment to {value}" in log


def test_home_directory_by_release(any_host: tuple[_Host, str], tmp_path: Path) -> None:
    """~/.nccl.conf: $HOME since 2.30.3; before, getpwuid(getuid())->pw_dir."""
    host, version = any_host
    env = {"HOME": "/etc/env-home"}
    files = {"/etc/passwd": f"root:x:{os.getuid()}:0:root:/etc/pw-home:/bin/sh\n",
             "/etc/pw-home/.nccl.conf": "NCCL_SOCKET_IFNAME=nope\n",
             "/etc/env-home/.nccl.conf": "NCCL_SOCKET_IFNAME=mlx5_1\n"}
    real = host.picks("mlx5_10", None, env, files)
    assert real == ("mlx5_10" if version == oracle.NCCL_VERSION else None)
    assert _predict(tmp_path, "mlx5_10", env, files, version) == real


_LINE = st.one_of(
    st.sampled_from(["#c", "", "=", "A=B", "NCCL_SOCKET_IFNAME", " NCCL_SOCKET_IFNAME=mlx5"]),
    st.builds(lambda v, cr: f"NCCL_SOCKET_IFNAME={v}" + ("\r" if cr else ""),
              st.sampled_from(["mlx5_1", "=mlx5_1", "nope", "mlx5_1 ", "^mlx5_1", "",
                               "=mlx5_10", "mlx5_0,mlx5_10"]), st.booleans()),
)


@fuzz_settings(ci=60, deep=600)
@given(st.lists(_LINE, max_size=5), st.lists(_LINE, max_size=3), st.booleans())
def test_differential_config_files(any_host: tuple[_Host, str],
                                   tmp_path_factory: pytest.TempPathFactory,
                                   etc: list[str], user: list[str], use_conf_file: bool) -> None:
    host, version = any_host
    files = {"/etc/nccl.conf": "\n".join(etc) + "\n"}
    env = {"HOME": _HOME}
    if use_conf_file:
        env["NCCL_CONF_FILE"] = "/etc/u.conf"
        files["/etc/u.conf"] = "\n".join(user)
    else:
        files[f"{_HOME}/.nccl.conf"] = "\n".join(user)
    real = host.picks("mlx5_10", None, env, files)
    assert _predict(tmp_path_factory.mktemp("conf"), "mlx5_10", env, files, version) == real


# ----------------------------------------------------------------------------- NCCL's docs

_DOCS = json.loads((Path(__file__).parent / "data/nccl/env-rst-examples.json").read_text())


@pytest.mark.parametrize("example", _DOCS["NCCL_SOCKET_IFNAME"]["examples"],
                         ids=lambda e: e["value"])
def test_env_rst_socket_examples(host: _Host, example: dict[str, object]) -> None:
    """env.rst's NCCL_SOCKET_IFNAME examples, on each interface of the list alone."""
    for name in _DOCS["NCCL_SOCKET_IFNAME"]["interfaces"]:
        value = str(example["value"])
        expected = name if name in example["matches"] else None  # type: ignore
        assert host.picks(name, value) == expected, (value, name)
        assert _model(name, value) == expected


@pytest.mark.parametrize("name,picked", [("ens1f0", "ens1f0"), ("ens1f01", None)])
def test_env_rst_config_file_example(host: _Host, name: str, picked: Optional[str]) -> None:
    """env.rst's /etc/nccl.conf example (NCCL_SOCKET_IFNAME==ens1f0: '=' is the value's)."""
    files = {"/etc/nccl.conf": _DOCS["config_file"]["text"]}
    assert host.picks(name, None, files=files) == picked


# ----------------------------------------------------------------------------- the OOB part

_IFS = [("b0", None, "fd00::b0/64"), ("a1", "127.3.0.1/32", None), ("eth2", "127.3.0.2/32", None),
        ("ib7", "127.3.0.7/32", "fd00::7/64"), ("docker0", "127.3.0.9/32", None)]
_LIVE = ("import json; from sysverbs.cli.nccl import live_interfaces; "
         "print(json.dumps(live_interfaces()))")


@pytest.mark.parametrize("value", [None, "^ib", "b", "=b0", "eth", "docker", "^a,ib,eth,doc",
                                   "a1,eth2", "^=a1"])
def test_oob_interface_and_address(host: _Host, value: Optional[str]) -> None:
    """The '<if>:<addr>' NCCL's bootstrap (and the IB transport's OOB) prints, from
    getifaddrs' order (IPv4 addresses before IPv6 ones) and NCCL's default lists."""
    if "multi" not in host.spaces:
        host.spaces["multi"] = oracle.Netns.with_interfaces(_IFS)
    ns = host.spaces["multi"]
    env = {} if value is None else {"NCCL_SOCKET_IFNAME": value}
    rc, log = host.nccl.ask(ns, env)
    line = next((x.split("Bootstrap: Using ", 1)[1] for x in log.splitlines()
                 if "Bootstrap: Using " in x), None)
    res = ns.run([sys.executable, "-c", _LIVE])
    assert res.returncode == 0, res.stderr
    ifs = [tuple(x) for x in json.loads(res.stdout)]
    name = nccl.socket_interface([n for n, _ in ifs], value)
    ours = next((f"{n}:{a}" for n, a in ifs if n == name), None)
    assert ours == line, log

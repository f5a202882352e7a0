"""sysverbs.rank.nccl without NCCL: the rules as NCCL's source states them, NCCL's own
documentation examples, public 'NET/IB : Using' lines, glibc's atoi, the linter and
``sysverbs nccl check``.  (The real-NCCL oracle is tests/test_nccl_oracle.py.)"""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sysverbs.rank import nccl
from sysverbs.rank.ctext import atoi
from sysverbs.rank.nccl import IbPort, lint_hca, parse_hca, select_ib
from sysverbs.testing import HostBuilder
from tests.fuzz.profiles import fuzz_settings

DATA = Path(__file__).parent / "data" / "nccl"
PCI = "/sys/devices/pci0000:00/0000:00:01.0/"


def _entries(f: nccl.HcaFilter) -> list[tuple[str, int, int, int]]:
    return [(e.prefix, e.port, e.rail, e.plane) for e in f.entries]


# ----------------------------------------------------------------------------- parsing

PARSE = [
    # value, version, negate, exact, entries
    ("", None, False, False, []),
    ("^", None, True, False, []),
    ("=", None, False, True, []),
    ("^=", None, True, True, []),
    ("=^mlx5_0", None, False, True, [("^mlx5_0", -1, -1, -1)]),
    ("mlx5_0,,mlx5_1,", None, False, False, [("mlx5_0", -1, -1, -1), ("mlx5_1", -1, -1, -1)]),
    (" mlx5_0", None, False, False, [(" mlx5_0", -1, -1, -1)]),
    ("mlx5_0\nmlx5_1", None, False, False, [("mlx5_0\nmlx5_1", -1, -1, -1)]),
    (":1,mlx5_2", None, False, False, [("mlx5_2", -1, -1, -1)]),
    ("mlx5_0:", None, False, False, [("mlx5_0", -1, -1, -1)]),
    ("mlx5_0:", "2.30.4", False, False, [("mlx5_0", 0, -1, -1)]),
    ("mlx5_0::1", None, False, False, [("mlx5_0", -1, 1, -1)]),
    ("mlx5_0::1", "2.30.4", False, False, [("mlx5_0", 0, -1, -1)]),
    ("mlx5_0:1:2:3:4", None, False, False, [("mlx5_0", 1, 2, 3)]),
    ("mlx5_0:1:2:3", "2.30.4", False, False, [("mlx5_0", 1, -1, -1)]),
    ("mlx5_0: 2x", None, False, False, [("mlx5_0", 2, -1, -1)]),
    ("mlx5_0:x", None, False, False, [("mlx5_0", 0, -1, -1)]),
    ("mlx5_0:1:70000:-1", None, False, False, [("mlx5_0", 1, 70000 - 65536, -1)]),
    ("mlx5_0:99999999999999999999", None, False, False, [("mlx5_0", -1, -1, -1)]),
    ("a" * 70, None, False, False, [("a" * 63, -1, -1, -1)]),
]


@pytest.mark.parametrize("value,version,negate,exact,entries", PARSE)
def test_parse(value: str, version: Optional[str], negate: bool, exact: bool,
               entries: list[tuple[str, int, int, int]]) -> None:
    f = parse_hca(value, nccl_version=version)
    assert (f.negate, f.exact, _entries(f)) == (negate, exact, entries)


def test_entry_limits_by_release() -> None:
    value = ",".join(f"d{i}" for i in range(40))
    assert len(parse_hca(value).entries) == 32
    assert parse_hca(value).dropped == tuple(f"d{i}" for i in range(32, 40))
    assert len(parse_hca(value, nccl_version="2.18.3").entries) == 16
    assert len(parse_hca(value, max_entries=nccl.MAX_IFS).entries) == 16
    with pytest.raises(ValueError):
        parse_hca("mlx5_0", nccl_version="2.4.8")


def test_versions() -> None:
    assert nccl.parse_version("2.30.7-1") == (2, 30, 7)
    assert nccl.parse_version(23203) == (2, 32, 3)
    assert nccl.parse_version((2, 21)) == (2, 21, 0)
    assert nccl.parse_version(None) == nccl.LATEST
    with pytest.raises(ValueError):
        nccl.parse_version("two")


MATCH = [
    # value, device, port, matches
    ("", "anything", 3, True), ("^", "mlx5_0", -1, False), ("^=", "mlx5_0", 1, False),
    ("mlx5_1", "mlx5_10", 1, True), ("=mlx5_1", "mlx5_10", 1, False),
    ("=mlx5_1", "mlx5_1", 1, True), ("mlx5_0:1", "mlx5_0", 2, False),
    ("mlx5_0:1", "mlx5_0", -1, True), ("mlx5_0", "mlx5_0", 7, True),
    ("^mlx5_0:1", "mlx5_0", 2, True), ("^mlx5_0:1", "mlx5_0", 1, False),
    ("^mlx5", "mlx5_3", 1, False), ("^mlx5", "irdma0", 1, True),
    ("mlx5_0:", "mlx5_0", 1, True), ("mlx5_0,mlx5_0:2", "mlx5_0", 1, True),
    (" mlx5_0", "mlx5_0", 1, False), ("mlx5_0 ", "mlx5_0", 1, False),
]


@pytest.mark.parametrize("value,device,port,matches", MATCH)
def test_matches(value: str, device: str, port: int, matches: bool) -> None:
    assert parse_hca(value).matches(device, port) is matches


def test_old_empty_port_matches_no_port() -> None:
    old = parse_hca("mlx5_0:", nccl_version="2.29.7")
    assert not old.matches("mlx5_0", 1) and not old.matches("mlx5_0", 2)
    assert old.matches("mlx5_0", -1)  # port -1 (sockets) matches any entry


_LIBC = ctypes.CDLL(None)
_LIBC.atoi.argtypes = [ctypes.c_char_p]


@fuzz_settings(ci=300, deep=3000)
@given(st.text(st.sampled_from(" \t\n\v\f\r+-0123456789x:"), max_size=24)
       | st.integers(-(1 << 70), 1 << 70).map(str))
def test_atoi_is_glibcs(text: str) -> None:
    assert atoi(text) == _LIBC.atoi(text.encode())


# ----------------------------------------------------------------------------- sockets


def test_socket_defaults() -> None:
    assert nccl.socket_interface(["lo", "docker0", "ib0", "eth0"]) == "ib0"
    assert nccl.socket_interface(["lo", "docker0", "eth0"]) == "eth0"
    assert nccl.socket_interface(["lo", "docker0"]) == "docker0"
    assert nccl.socket_interface(["lo", "virbr0"]) == "lo"
    assert nccl.socket_interface(["virbr0"]) == "virbr0"
    assert nccl.socket_interface([]) is None
    assert nccl.socket_interface(["eth0"], "x") == "eth0"  # one character: ignored
    assert nccl.socket_interface(["eth0"], "xy") is None


# ----------------------------------------------------------------------------- config files


def test_read_conf_file_by_release() -> None:
    text = b"#A=1\nB=2\r\n C = 3\nnovalue\n=x\nD==e\n"
    assert nccl.read_conf_file(text) == [("B", "2"), (" C ", " 3"), ("", "x"), ("D", "=e")]
    assert nccl.read_conf_file(text, nccl_version="2.29.7") == [
        ("B", "2\r"), (" C ", " 3"), ("", "x"), ("D", "=e")]
    assert nccl.read_conf_file(text, nccl_version="2.25.1")[0] == ("#A", "1")
    long = b"#" + b"y" * 4094 + b"E=f\n"
    assert nccl.read_conf_file(long) == [("E", "f")]
    assert nccl.read_conf_file(long, nccl_version="2.29.7") == []


def test_environment_precedence(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nccl.conf").write_text("A=etc\nB=etc\nC=etc\n")
    (tmp_path / "home").mkdir()
    (tmp_path / "home/.nccl.conf").write_text("A=home\nB=home\n")
    (tmp_path / "u.conf").write_text("A=user\n")
    env = {"HOME": "/home", "B": "env"}
    full, src = nccl.nccl_environment(env, root=str(tmp_path))
    assert (full["A"], full["B"], full["C"]) == ("home", "env", "etc")
    assert src == {"A": "/home/.nccl.conf", "C": "/etc/nccl.conf"}
    env["NCCL_CONF_FILE"] = "/u.conf"
    full, src = nccl.nccl_environment(env, root=str(tmp_path))
    assert (full["A"], full["B"], full["C"]) == ("user", "env", "etc")
    full, _ = nccl.nccl_environment(env, root=str(tmp_path), nccl_version="2.22.3")
    assert full["A"] == "etc"  # NCCL_CONF_FILE exists since 2.23; no passwd entry: no home
    (tmp_path / "etc/passwd").write_text(f"u:x:{os.getuid()}:0::/home:/bin/sh\n")
    full, _ = nccl.nccl_environment(env, root=str(tmp_path), nccl_version="2.22.3")
    assert full["A"] == "home"  # before 2.30.3 the passwd home, not $HOME
    full, _ = nccl.nccl_environment({"HOME": "/nowhere"}, root=str(tmp_path),
                                    nccl_version="2.30.2")
    assert full["A"] == "home"
    full, _ = nccl.nccl_environment({}, root=str(tmp_path))  # no HOME: only /etc
    assert full["A"] == "etc"


# ----------------------------------------------------------------------------- selection


def _ports(*specs: tuple[str, int, bool, str, str]) -> list[IbPort]:
    return [IbPort(d, p, a, ll, PCI + bdf if bdf else "") for d, p, a, ll, bdf in specs]


def test_selection_rules() -> None:
    ports = _ports(("mlx5_1", 1, True, "InfiniBand", "0000:12:00.0"),
                   ("mlx5_0", 1, True, "InfiniBand", "0000:0c:00.0"),
                   ("mlx5_0", 2, False, "InfiniBand", "0000:0c:00.0"),
                   ("rxe0", 1, True, "Ethernet", ""),
                   ("iw0", 1, True, "Unknown", "0000:01:00.0"))
    sel = select_ib(ports, {})
    assert [d.label() for d in sel.devices] == ["[0]mlx5_0:1/IB", "[1]mlx5_1:1/IB",
                                                "[2]rxe0:1/RoCE"]
    old = select_ib(ports, {}, nccl_version="2.29.3")  # before the PCI order
    assert [d.device for d in old.devices] == ["mlx5_1", "mlx5_0", "rxe0"]
    off = select_ib(ports, {"NCCL_IB_DEVICE_PCI_ORDER": "0"})
    assert [d.device for d in off.devices] == ["mlx5_1", "mlx5_0", "rxe0"]
    assert select_ib(ports, {"NCCL_IB_DISABLE": "1"}).disabled
    assert select_ib(ports, {"NCCL_IB_HCA": "^"}).lines("eth0:1.2.3.4<0>") == [
        "NET/IB : No device found.", "NET/IB : Using [RO]; OOB eth0:1.2.3.4<0>"]
    assert select_ib(ports, {"NCCL_IB_HCA": "^"}, nccl_version="2.23.4").lines() == [
        "NET/IB : No device found."]
    closed = [p._replace(opens=False) if p.device == "mlx5_1" else p for p in ports]
    assert [d.device for d in select_ib(closed, {}).devices] == ["mlx5_0", "rxe0"]


def test_rail_and_plane_labels() -> None:
    ports = _ports(("mlx5_0", 1, True, "InfiniBand", "0000:0c:00.0"),
                   ("mlx5_1", 1, True, "InfiniBand", "0000:0d:00.0"),
                   ("mlx5_2", 1, True, "InfiniBand", "0000:0e:00.0"))
    sel = select_ib(ports, {"NCCL_IB_HCA": "=mlx5_0:1:3,mlx5_1:1::2,mlx5_2:1:4:5"})
    assert [d.label() for d in sel.devices] == [
        "[0]mlx5_0:1:3/IB", "[1]mlx5_1:1::2/IB", "[2]mlx5_2:1:4:5/IB"]
    old = select_ib(ports, {"NCCL_IB_HCA": "=mlx5_0:1:3"}, nccl_version="2.30.4")
    assert [d.label() for d in old.devices] == ["[0]mlx5_0:1/IB"]
    neg = select_ib(ports, {"NCCL_IB_HCA": "^mlx5_0:1:3"})
    assert [d.label() for d in neg.devices] == ["[0]mlx5_1:1/IB", "[1]mlx5_2:1/IB"]


def test_merging() -> None:
    ports = [IbPort("mlx5_0", 1, True, "InfiniBand", PCI + "0000:0c:00.0", 7),
             IbPort("mlx5_1", 1, True, "InfiniBand", PCI + "0000:0c:00.1", 7),
             IbPort("mlx5_2", 1, True, "Ethernet", PCI + "0000:0d:00.0", 8),
             IbPort("mlx5_3", 1, True, "InfiniBand", PCI + "0000:0d:00.1", 8),
             IbPort("mlx5_4", 1, True, "InfiniBand", PCI + "0000:0d:00.2", 8),
             IbPort("mlx5_5", 1, True, "InfiniBand", PCI + "0000:0e:00.0", 9)]
    sel = select_ib(ports, {})
    # a merge of different link layers fails: its first port stays alone, the rest merge
    assert sel.virtual_names() == ["mlx5_0+mlx5_1", "mlx5_2", "mlx5_3+mlx5_4", "mlx5_5"]
    assert any("incompatible devices: [2]mlx5_2:1/RoCE and [3]mlx5_3:1/IB" in n
               for n in sel.notes)
    assert select_ib(ports, {"NCCL_IB_MERGE_NICS": "0"}).virtual_names() == [
        f"mlx5_{i}" for i in range(6)]
    v223 = select_ib(ports[:3] + ports[5:], {}, nccl_version="2.23.4")
    assert v223.using_line("eth0:10.0.0.1<0>") == (
        "NET/IB : Using [0]={[0] mlx5_0:1/IB, [1] mlx5_1:1/IB} [2]mlx5_2:1/RoCE "
        "[3]mlx5_5:1/IB [RO]; OOB eth0:10.0.0.1<0>")
    v219 = select_ib(ports, {}, nccl_version="2.19.3")
    assert v219.virtual_names() == [f"mlx5_{i}" for i in range(6)]


def test_table_limit() -> None:
    ports = [IbPort(f"d{i:02d}", p, True, "InfiniBand", PCI + f"0000:{i:02x}:00.0")
             for i in range(20) for p in (1, 2)]
    assert len(select_ib(ports, {}).devices) == 32
    assert len(select_ib(ports, {}, nccl_version="2.18.3").devices) == 16


# ----------------------------------------------------------------------------- NCCL's docs


def _doc_host(spec: dict[str, Any]) -> list[IbPort]:
    out = []
    for i, name in enumerate(spec["devices"]):
        for port in spec["ports"]:
            out.append(IbPort(name, port, True, "InfiniBand", PCI + f"0000:{16 + i:02x}:00.0"))
    return out


def test_env_rst_ib_hca_examples() -> None:
    data = json.loads((DATA / "env-rst-examples.json").read_text())
    spec = data["NCCL_IB_HCA"]
    ports = _doc_host(spec["host"])
    names = spec["host"]["devices"]
    for ex in spec["examples"]:
        sel = select_ib(ports, {"NCCL_IB_HCA": ex["value"]})
        got = [(d.device, d.port, d.rail, d.plane) for d in sel.devices]
        if "selected" in ex:
            assert got == [tuple(x) for x in ex["selected"]], ex
        if "selected_devices" in ex:
            assert sorted({d for d, *_ in got}) == sorted(ex["selected_devices"]), ex
        if "excluded_devices" in ex:
            assert {d for d, *_ in got} == set(names) - set(ex["excluded_devices"]), ex
        if ex["value"] == "mlx5":
            assert got == [(p.device, p.port, -1, -1) for p in ports
                           if p.device.startswith("mlx5")]
    assert nccl.max_ib_devs() == spec["limits"]["max"]


def test_env_rst_socket_examples_model() -> None:
    spec = json.loads((DATA / "env-rst-examples.json").read_text())["NCCL_SOCKET_IFNAME"]
    for ex in spec["examples"]:
        f = parse_hca(ex["value"], max_entries=nccl.MAX_IFS)
        assert [n for n in spec["interfaces"] if f.matches(n)] == ex["matches"], ex


def test_env_rst_config_file_example() -> None:
    spec = json.loads((DATA / "env-rst-examples.json").read_text())["config_file"]
    assert dict(nccl.read_conf_file(spec["text"].encode())) == spec["sets"]


# ----------------------------------------------------------------------------- public lines


def _build(tmp: Path, devices: list[dict[str, str]]) -> list[IbPort]:
    b = HostBuilder()
    for d in devices:
        state = None if d["state"] == "ACTIVE" else {"ports/1/state": "1: DOWN\n",
                                                      "ports/1/phys_state": "3: Disabled\n"}
        b.mlx5(name=d["name"], link_layer=d["link_layer"], ib_attrs=state)
    host = b.materialize(tmp)
    return nccl.host_ports(**host.options())


@pytest.mark.parametrize("vector", json.loads(
    (DATA / "public-using-lines.json").read_text())["vectors"], ids=lambda v: v["url"])
def test_public_using_lines(tmp_path: Path, vector: dict[str, Any]) -> None:
    ports = _build(tmp_path, vector["devices"])
    order = [d["name"] for d in vector["devices"]]
    ports.sort(key=lambda p: order.index(p.device))  # that host's ibv_get_device_list order
    env = {} if vector["NCCL_IB_HCA"] is None else {"NCCL_IB_HCA": vector["NCCL_IB_HCA"]}
    sel = select_ib(ports, env, nccl_version=vector["nccl_version"])
    assert sel.using_line(vector["oob"]) == vector["line"]


def test_public_out_of_range() -> None:
    for v in json.loads((DATA / "public-using-lines.json").read_text())["out_of_range"]:
        with pytest.raises(ValueError):
            nccl.parse_version(v["nccl_version"])
        assert v["line_devices"] > 16


def test_predict_on_a_built_host(tmp_path: Path) -> None:
    host = (HostBuilder().mlx5(name="mlx5_1").mlx5(name="mlx5_0", link_layer="Ethernet")
            .mlx5(name="mlx5_10", ib_attrs={"ports/1/state": "1: DOWN\n"})
            .materialize(tmp_path))
    opts = host.options()
    sel = nccl.predict_ib({"NCCL_IB_HCA": "mlx5"}, sysfs_path=opts["sysfs_path"],
                          dev_dir=opts["dev_dir"], source="sysfs", providers="builtin",
                          conf_root=str(tmp_path))
    assert sel.using_line("eth0:10.0.0.1<0>") == (
        "NET/IB : Using [0]mlx5_1:1/IB [1]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>")


# ----------------------------------------------------------------------------- linter


HOST = _ports(*[(f"mlx5_{i}", 1, i != 3, "InfiniBand", f"0000:{16 + i:02x}:00.0")
                for i in (0, 1, 2, 3, 10, 11)])

LINT = [
    ("=mlx5_0,mlx5_1", []),
    ("", []),
    ("mlx5", []),  # a prefix that names no device is a prefix on purpose
    ("mlx5_1", ["collision"]),
    ("mlx5_0\nmlx5_2", ["whitespace", "no-match", "selects-none"]),
    (" mlx5_0", ["whitespace", "no-match", "selects-none"]),
    ("mlx5_0,=mlx5_2", ["misplaced-modifier", "no-match"]),
    ("=^mlx5_2", ["misplaced-modifier", "no-match", "selects-none"]),
    ("=mlx5_0:2", ["no-port", "selects-none"]),
    ("=mlx5_3:1", ["port-inactive", "selects-none"]),
    ("=mlx5_0:a", ["bad-port", "no-port", "selects-none"]),
    ("=mlx5_9", ["no-match", "selects-none"]),
    ("=:1,mlx5_0", ["empty-name"]),
    ("^", ["selects-none"]),
    ("=" + ",".join(["mlx5_0"] * 33), ["too-many"]),
    ("=" + "x" * 64, ["too-long", "no-match", "selects-none"]),
]


@pytest.mark.parametrize("value,codes", LINT)
def test_lint(value: str, codes: list[str]) -> None:
    got = [w.code for w in lint_hca(value, HOST, {}).warnings]
    assert got == codes


def test_lint_fixes_are_clean() -> None:
    for value in ("mlx5_1,mlx5_2", "mlx5_0,=mlx5_2", " mlx5_0, mlx5_2", "=mlx5_0:2,mlx5_1"):
        fixed = value
        for _ in range(5):  # applying the fixes one by one ends in a clean value
            warns = [w for w in lint_hca(fixed, HOST, {}).warnings if w.fix]
            if not warns:
                break
            fixed = warns[0].fix
        assert not lint_hca(fixed, HOST, {}).warnings, (value, fixed)


def test_lint_old_empty_port() -> None:
    codes = [w.code for w in lint_hca("=mlx5_0:", HOST, {}, nccl_version="2.30.4").warnings]
    assert codes == ["bad-port", "no-port", "selects-none"]
    assert not lint_hca("=mlx5_0:", HOST, {}).warnings


# ----------------------------------------------------------------------------- command


class _Run:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path_factory: pytest.TempPathFactory, fast_fixture_tmp: None) -> Any:
    from sysverbs.cli import main

    empty = str(tmp_path_factory.mktemp("no-conf"))  # not this machine's config files

    def run(*args: str, env: Optional[dict[str, str]] = None) -> _Run:
        if "--conf-root" not in args:
            args = (*args, "--conf-root", empty)
        capsys.readouterr()
        with monkeypatch.context() as m:
            if env is not None:
                for k in list(os.environ):
                    m.delenv(k)
                for k, v in env.items():
                    m.setenv(k, v)
            rc = main(["nccl", "check", *args])
        out, err = capsys.readouterr()
        return _Run(rc, out, err)

    return run


def test_cli_fixture(cli: Any) -> None:
    ok = cli("--fixture", "dgx-demo", "=mlx5_0,mlx5_5")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0] == (
        "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_5:1/IB [RO]; OOB ?")
    bad = cli("--fixture", "dgx-demo", "mlx5_1,mlx5_99", "--oob", "eth0:10.0.0.1<0>")
    assert bad.returncode == 1
    assert bad.stdout.splitlines()[0].endswith("; OOB eth0:10.0.0.1<0>")
    assert "warning [collision] 'mlx5_1'" in bad.stdout
    assert "fix: NCCL_IB_HCA=" in bad.stdout
    js = cli("--fixture", "dgx-demo", "mlx5_1", "--json")
    doc = json.loads(js.stdout)
    assert js.returncode == 1 and doc["schema"] == "sysverbs.nccl-check/1"
    assert doc["warnings"][0]["code"] == "collision"
    assert doc["devices"][0] == {"slot": 0, "device": "mlx5_1", "port": 1, "link": "IB",
                                 "rail": -1, "plane": -1}
    assert cli("--fixture", "dgx-demo", "--nccl-version", "2.4.2").returncode == 2
    assert cli("--fixture", "no-such-fixture").returncode == 2


def test_cli_value_from_environment_and_config(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nccl.conf").write_text("NCCL_IB_HCA=mlx5_1\n")
    env = {"PATH": "/usr/bin:/bin"}
    r = cli("--fixture", "dgx-demo", "--conf-root", str(tmp_path), env=env)
    assert "NCCL_IB_HCA='mlx5_1' (/etc/nccl.conf)" in r.stdout and r.returncode == 1
    r = cli("--fixture", "dgx-demo", "--conf-root", str(tmp_path),
             env={**env, "NCCL_IB_HCA": "=mlx5_4"})
    assert "NCCL_IB_HCA='=mlx5_4' (environment)" in r.stdout and r.returncode == 0

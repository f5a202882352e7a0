"""The ``sysverbs`` command on fixture trees: JSON schemas, devinfo from sysfs, netdev,
doctor, watch (polling a temporary tree), snapshot, help, errors and import cost.

Byte-for-byte comparisons with the real tools are in tests/test_oracle_cli.py
(fixtures) and tests/kernel/test_kernel_lab.py (the kernel lab VM, scenario ``cli_tools``)."""

from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sysverbs import testing
from sysverbs.cli.devinfo import inet_ntop6, parse_port
from sysverbs.engine.devlist import source_names
from sysverbs.testing import umockdev
from sysverbs.testing.cache import fixture_tree
from tests.conftest import fast_tmp, lists_by_name, same_lines
from tests.pcitree import PciTree

ROOT = Path(__file__).resolve().parents[1]


def sv(*argv: str, timeout: float = 60, **extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **extra)
    env.pop("SYSFS_PATH", None)
    return subprocess.run([sys.executable, "-m", "sysverbs", *argv], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture
def host(tmp_path: Path) -> testing.FakeHost:
    return testing.materialize(testing.fixture_path("mlx4"), tmp_path)


def test_help_for_every_command() -> None:
    top = sv("--help")
    assert top.returncode == 0
    for cmd in ("devices", "devinfo", "netdev", "doctor", "watch", "snapshot"):
        assert cmd in top.stdout
        h = sv(cmd, "--help")
        assert h.returncode == 0 and "--sysfs-path" in h.stdout, cmd
    assert sv().returncode == 2
    assert sv("bogus").returncode == 2


def _parse(parser: Any, argv: list[str]) -> tuple[object, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = vars(parser.parse_args(argv))
            args.pop("func", None)  # a closure made per parser
            result: object = args
        except SystemExit as e:
            result = e.code
        except Exception as e:  # noqa: BLE001 (devinfo's usage exit, -i <= 0)
            result = type(e).__name__
    return result, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", [
    ["--help"], ["topo", "--help"], ["nccl", "check", "--help"], ["nccl"], ["env", "-h"],
    ["devinfo", "-i", "x"], ["doctor", "--bogus"], ["watch", "--count", "x"],
    ["topo", "--legend", "x"], ["devices", "--json", "--sysfs-path", "/x"],
    ["snapshot", "-o", "f", "extra"], ["netdev", "--help"], ["devinfo", "--help"],
], ids=" ".join)
def test_the_parser_of_one_command_is_the_whole_parsers(argv: list[str]) -> None:
    """``main`` builds only the parser of the command a command line names: its help,
    errors, exit status and parsed arguments are those of the whole parser."""
    from sysverbs import cli

    whole = _parse(cli._parser(), argv)
    assert whole == _parse(cli._parser(argv[0] if argv[0] in cli.COMMANDS else None), argv)
    assert set(cli.COMMANDS) == set(cli._parser()._subparsers._group_actions[0].choices)


@pytest.mark.parametrize("columns", [None, "40", "200", "0", "-3", "wide"])
def test_the_help_width_is_argparses(columns: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser's formatters get argparse's own default width (shutil's terminal size
    less 2), computed without importing shutil; ``sysverbs topo`` imports no shutil."""
    import argparse

    from sysverbs import cli

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert cli.help_width() == argparse.HelpFormatter("sysverbs")._width
    formatter = cli._parser("topo")._subparsers._group_actions[0].choices["topo"]._get_formatter()
    assert formatter._width == cli.help_width()
    code = ("import sys; before = set(sys.modules); import sysverbs.cli as c; "
            "c._parser('topo'); print('shutil' in set(sys.modules) - before)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.stdout.strip() == "False"


def test_source_choices_come_from_the_registry() -> None:
    h = sv("devices", "--help").stdout
    assert "{" + ",".join(source_names()) + "}" in h
    bad = sv("devices", "--source", "nope")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_devices_imports_no_heavy_module() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "sysverbs", "devices",
                        "--sysfs-path", "/nonexistent"], capture_output=True, text=True,
                       env=env)
    mods = {line.split("|")[-1].strip() for line in p.stderr.splitlines() if "|" in line}
    for heavy in ("sysverbs.devices.attributes", "sysverbs.devices.location",
                  "sysverbs.devices.diagnosis", "sysverbs.cli.devinfo", "sysverbs.cli.tools",
                  "sysverbs.testing"):
        assert heavy not in mods


def test_devices_json() -> None:
    p = sv("devices", "--json", "--fixture", "dgx-demo")
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["schema"] == "sysverbs.devices/1"
    text = sv("devices", "--fixture", "dgx-demo").stdout.splitlines()[2:]
    assert [f"    {d['name']:<16}\t{d['node_guid']}" for d in doc["devices"]] == text
    d0 = doc["devices"][0]
    assert set(d0) == {"name", "node_guid", "node_type", "transport", "provider", "uverbs",
                       "dev_path", "ibdev_path"}
    assert d0["node_type"] == "CA" and d0["transport"] == "IB"


def test_devinfo_list_json() -> None:
    doc = json.loads(sv("devinfo", "-l", "--json", "--fixture", "rxe").stdout)
    assert doc["schema"] == "sysverbs.devinfo-list/1" and set(doc) == {"schema", "devices"}
    # In the text's order (libibverbs', which test_oracle_cli checks against ibv_devinfo
    # -l): the readdir order of the fixture's tree, which depends on the filesystem.
    text = sv("devinfo", "-l", "--fixture", "rxe").stdout.splitlines()
    assert text[0] == "2 HCAs found:"
    assert doc["devices"] == [line.strip() for line in text[1:] if line.strip()]
    assert sorted(doc["devices"]) == ["rxe0", "rxe1"]


def test_devinfo_from_sysfs(host: testing.FakeHost) -> None:
    p = sv("devinfo", "--sysfs-path", str(host.sysfs), "--dev-dir", str(host.dev),
           "--providers", "builtin", "-v", "-d", "mlx4_0")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "hca_id:\tmlx4_0"
    assert "\tvendor_id:\t\t\t(unavailable)" in lines
    assert "\tphys_port_cnt:\t\t\t2" in lines
    assert lines.count("\t\t\tstate:\t\t\tPORT_ACTIVE (4)") == 2
    assert any(re.fullmatch(r"\t\t\tGID\[  0\]:\t\t(fe80:0000:0000:0000:[0-9a-f:]{19})", x)
               for x in lines)
    one = sv("devinfo", "--sysfs-path", str(host.sysfs), "--providers", "builtin",
             "--dev-dir", str(host.dev), "-i", "2", "-d", "mlx4_0").stdout
    assert "\t\tport:\t2\n" in one and "\t\tport:\t1\n" not in one
    js = json.loads(sv("devinfo", "--sysfs-path", str(host.sysfs), "--providers", "builtin",
                       "--dev-dir", str(host.dev), "--json", "-d", "mlx4_0").stdout)
    assert js["schema"] == "sysverbs.devinfo/1"
    (dev,) = js["devices"]
    assert dev["hca_id"] == "mlx4_0" and [p["port"] for p in dev["ports"]] == [1, 2]
    assert {"state", "state_code", "link_layer", "gids", "active_speed"} <= set(dev["ports"][0])


def test_devinfo_errors(host: testing.FakeHost) -> None:
    base = ("--sysfs-path", str(host.sysfs), "--dev-dir", str(host.dev), "--providers",
            "builtin", "-d", "mlx4_0")
    p = sv("devinfo", *base, "-d", "nope")
    assert (p.returncode, p.stdout, p.stderr) == (255, "", "IB device 'nope' wasn't found\n")
    p = sv("devinfo", *base, "-i", "3")
    assert (p.returncode, p.stderr) == (4, "Invalid port requested for device\n")
    p = sv("devinfo", *base, "-i", "0")
    assert p.returncode == 1 and p.stdout.startswith("Usage: ibv_devinfo ")
    p = sv("devinfo", *base, "-i", "0x101")  # uint8_t: port 1
    assert p.returncode == 0 and "\t\tport:\t1\n" in p.stdout and "port:\t2" not in p.stdout


def test_inet_ntop6_is_glibcs() -> None:
    rng = random.Random(7)
    samples = ["::", "::1", "::ffff:192.168.77.1", "::1.2.3.4", "fe80::1", "1::", "1:0:0:1::",
               "0:0:1::", "::ffff:0:0", "1:0:1:0:1:0:1:0"]
    for _ in range(3000):
        words = [rng.choice([0, 0, 0, 1, 0xffff, rng.randrange(65536)]) for _ in range(8)]
        samples.append(":".join(f"{w:x}" for w in words))
    for s in samples:
        a = ipaddress.IPv6Address(s)
        assert inet_ntop6(a) == socket.inet_ntop(socket.AF_INET6, a.packed), s


def test_parse_port_is_strtol_into_int() -> None:
    libc = ctypes.CDLL(None)
    libc.strtol.restype = ctypes.c_long
    libc.strtol.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    for s in ["1", "0", "-1", "0x10", "010", "08", "  7", "+3", "x", "", "1abc",
              "4294967297", "99999999999999999999", "-99999999999999999999", "0x"]:
        assert parse_port(s) == ctypes.c_int(libc.strtol(s.encode(), None, 0)).value, s


# ------------------------------------------------------------------------------ netdev


IBDEV2NETDEV = ROOT / "tests/data/nvidia-smi-topo/hgx-h100-1numa-12nic.ibdev2netdev.txt"


def _ibdev2netdev_host(root: Path) -> PciTree:
    """The RDMA side of the host of ``hgx-h100-1numa-12nic.ibdev2netdev.txt`` (a real
    ``ibdev2netdev``; see tests/data/nvidia-smi-topo/PROVENANCE.md): each mlx5_N an
    Ethernet port on the PCI function its udev netdev name encodes (``enp83s0f1np1``:
    bus 83 decimal, function 1), the netdev up or down as printed, the port ACTIVE
    when up.  mlx5_3 and mlx5_9 print ``bond0``: the first ports of the dual-port
    cards whose second ports are mlx5_4 and mlx5_10; their own netdevs (f0np0 on the
    sibling's bus) are slaves of bond0 and their RoCE GID 0 is bond0's.  Each port has
    GID 0 and its netdev in ``gid_attrs/ndevs/0``, as the kernel lays out RoCE ports."""
    t = PciTree(root)
    bond = t.netdev("bond0", None)
    (bond / "bonding").mkdir()
    lines = dict(line.split(" port 1 ==> ") for line in IBDEV2NETDEV.read_text().splitlines())
    for dev, shown in lines.items():
        ifname, state = shown.split()
        if ifname == "bond0":
            sibling = lines[f"mlx5_{int(dev[5:]) + 1}"].split()[0]
            ifname = sibling.replace("f1np1", "f0np0")
        m = re.fullmatch(r"enp(\d+)s0(?:f(\d))?np\d", ifname)
        assert m, ifname
        bus, fn = int(m.group(1)), int(m.group(2) or 0)
        pf = f"pci0000:{bus - 1:02x}/0000:{bus - 1:02x}:01.0/0000:{bus:02x}:00.{fn}"
        port = ("4: ACTIVE" if state == "(Up)" else "1: DOWN", "Ethernet", "100 Gb/sec (4X EDR)")
        ib = t.rdma(dev, pf, ports=(port,), cls=0x020000, netdev=ifname, uverbs=int(dev[5:]))
        net = t.sys / "devices" / pf / "net" / ifname
        (net / "operstate").write_text("up\n" if state == "(Up)" else "down\n")
        # RoCE GID 0 (link-local; the real interface ids are not in the capture)
        (ib / "ports/1/gids").mkdir()
        (ib / "ports/1/gids/0").write_text(f"fe80:0000:0000:0000:0000:0000:0000:{bus:04x}\n")
        if shown.startswith("bond0"):
            os.symlink(os.path.relpath(bond, net), net / "master")
            (ib / "ports/1/gid_attrs/ndevs/0").write_text("bond0\n")
    return t


def test_netdev_prints_what_the_real_ibdev2netdev_printed(tmp_path: Path) -> None:
    """``sysverbs netdev`` on that host prints the real capture byte for byte: the same
    lines in the same order (ibdev2netdev sorts device names as strings: mlx5_10
    before mlx5_2), bond0 for the bonded ports, Down for the down ones."""
    t = _ibdev2netdev_host(tmp_path)
    p = sv("netdev", "--sysfs-path", str(t.sys), "--dev-dir", str(t.dev),
           "--providers", "builtin")
    assert p.returncode == 0, p.stderr
    assert p.stdout == IBDEV2NETDEV.read_text()


@pytest.mark.parametrize("fixture", testing.fixture_names())
def test_netdev_on_every_fixture(fixture: str, tmp_path: Path) -> None:
    """On every (generated) fixture: exit 0, one line per link in ibdev2netdev's
    format, devices in string order, and the JSON says the same (``empty``, without RDMA
    devices: exit 1, the contract's one answer).  What the lines say is checked against
    a real ibdev2netdev above, and against ``rdma link`` in the kernel lab; no real
    ibdev2netdev output exists for these fixtures."""
    fast = {"TMPDIR": fast_tmp()}  # where --fixture materializes the host
    p = sv("netdev", "--fixture", fixture, **fast)
    if fixture == "empty":
        assert (p.returncode, p.stdout) == (1, ""), p
        assert p.stderr.startswith("sysverbs netdev: error: no RDMA device: ")
        return
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert all(re.fullmatch(r"\S+ port \d+ ==> \S+ \((Up|Down)\)", x) for x in lines), lines
    devices = [x.split(" ", 1)[0] for x in lines]
    assert devices == sorted(devices)
    doc = json.loads(sv("netdev", "--fixture", fixture, "--json", **fast).stdout)
    assert doc["schema"] == "sysverbs.netdev/1"
    assert [f"{x['device']} port {x['port']} ==> {x['netdev']} ({x['state']})"
            for x in doc["links"]] == lines


# ------------------------------------------------------------------------------ doctor


def test_doctor_exit_status_and_json(tmp_path: Path) -> None:
    p = sv("doctor", "--fixture", "rxe", "--no-open")
    assert p.returncode == 0  # a fixture's /dev nodes are stand-ins for the recorded ones
    assert [x.split(":")[0] for x in p.stdout.splitlines() if not x.startswith("host")] == \
        ["rxe0", "rxe1"]
    assert "[dev_node_wrong]" not in p.stdout and "[recorded_host]" in p.stdout
    doc = json.loads(sv("doctor", "--fixture", "rxe", "--json", "--no-open").stdout)
    assert doc["schema"] == "sysverbs.doctor/1" and doc["usable"] is True
    assert [d["name"] for d in doc["devices"]] == ["rxe0", "rxe1"]
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    host = testing.materialize(testing.fixture_path("rxe"), tmp_path)
    for node in sorted(p for p in host.dev.iterdir() if p.name.startswith("uverbs")):
        dev = (host.sysfs / "class/infiniband_verbs" / node.name / "dev").read_text().split(":")
        node.unlink()
        os.mknod(node, 0o20666, os.makedev(int(dev[0]), int(dev[1])))
    ok = sv("doctor", "--sysfs-path", str(host.sysfs), "--dev-dir", str(host.dev),
            "--providers", "builtin", "--no-open")
    assert ok.returncode == 0, ok.stdout
    assert ok.stdout.splitlines()[-2:] == [x for x in ok.stdout.splitlines()
                                           if x.startswith("rxe")]
    assert all(": usable" in x for x in ok.stdout.splitlines() if x.startswith("rxe"))


# ------------------------------------------------------------------------------ watch


def test_watch_polls_a_tree(tmp_path: Path) -> None:
    host = testing.materialize(testing.fixture_path("rxe"), tmp_path)
    ib = host.sysfs / "class/infiniband/rxe1"
    verbs = [p for p in (host.sysfs / "class/infiniband_verbs").iterdir()
             if p.is_symlink() and (p / "ibdev").read_text().strip() == "rxe1"]
    saved = [(ib, os.readlink(ib))] + [(p, os.readlink(p)) for p in verbs]
    for link, _ in saved:
        link.unlink()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "sysverbs", "watch", "--json", "--sysfs-path", str(host.sysfs),
         "--backend", "poll", "--interval", "0.05", "--existing", "--count", "4",
         "--timeout", "30"], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    first = [json.loads(proc.stdout.readline()) for _ in range(2)]  # the existing devices
    for link, target in saved:
        os.symlink(target, link)
        time.sleep(0.2)
    rest = [json.loads(proc.stdout.readline()) for _ in range(2)]
    assert proc.wait(timeout=30) == 0
    assert [(e["action"], e["subsystem"], e["name"], e["ibdev"]) for e in first + rest] == [
        ("add", "infiniband", "rxe0", "rxe0"),
        ("add", "infiniband_verbs", verbs[0].name.replace("1", "0"), "rxe0"),
        ("add", "infiniband", "rxe1", "rxe1"),
        ("add", "infiniband_verbs", verbs[0].name, "rxe1"),
    ]
    assert all(e["schema"] == "sysverbs.event/1" and e["backend"] == "poll"
               for e in first + rest)
    text = sv("watch", "--sysfs-path", str(host.sysfs), "--backend", "poll", "--existing",
              "--count", "1", "--timeout", "10")
    assert text.returncode == 0
    assert text.stdout.splitlines()[1:] == ["add infiniband rxe0"]


def test_watch_timeout_without_events(tmp_path: Path) -> None:
    host = testing.materialize(testing.fixture_path("rxe"), tmp_path)
    p = sv("watch", "--json", "--sysfs-path", str(host.sysfs), "--timeout", "0.3")
    assert (p.returncode, p.stdout) == (0, "")
    assert sv("watch", "--timeout", "-1").returncode == 2


# ------------------------------------------------------------------------------ snapshot


def test_snapshot_round_trip(tmp_path: Path) -> None:
    import sysverbs

    host = testing.materialize(testing.fixture_path("dgx-demo"), tmp_path / "a")
    out = tmp_path / "snap.umockdev"
    p = sv("snapshot", "--sysfs-path", str(host.sysfs), "--dev-dir", str(host.dev),
           "-o", str(out))
    assert p.returncode == 0 and "wrote" in p.stderr
    assert sv("snapshot", "--sysfs-path", str(host.sysfs)).stdout == out.read_text()
    again = testing.materialize(umockdev.load(out), tmp_path / "b")

    def listing(h: testing.FakeHost) -> list[Any]:
        devs = sysverbs.get_device_list(sysfs_path=h.sysfs, dev_dir=h.dev, providers="builtin",
                                        rdma_core="44")
        return sorted((d.name, d.dev_name, d.provider, sysverbs.get_device_guid(d))
                      for d in devs)

    assert listing(again) == listing(host) and len(listing(host)) == 19
    assert sv("snapshot", "--sysfs-path", str(tmp_path / "nowhere")).returncode == 1


@pytest.mark.oracle
def test_snapshot_same_list_for_libibverbs(otmp: Path, tmp_path: Path) -> None:
    """libibverbs itself lists the same devices on the snapshot as on the original.

    In the same order, too, where the trees' filesystem lists a directory by its names
    (ext4, like sysfs); where it lists in creation order (tmpfs, btrfs) the snapshot,
    whose records are in another order than the fixture's, lists in another order."""
    from tests.oracle import harness

    by_name = lists_by_name(tmp_path)
    for fixture in ("dgx-demo", "mlx5-sriov", "efa"):
        work = tmp_path / fixture
        orig = testing.materialize(testing.fixture_path(fixture), work / "orig")
        snap = sv("snapshot", "--sysfs-path", str(orig.sysfs), "--dev-dir", str(orig.dev))
        assert snap.returncode == 0, snap.stderr
        runs = []
        for kind, src in (("orig", testing.fixture_path(fixture)), ("snap", None)):
            text = snap.stdout

            def build(root: Path, src: Any = src, text: str = text) -> Any:
                return testing.materialize(src if src else umockdev.parse(text), root)

            real_src, _, dst = harness.materialize_pair(work / kind, build)
            runs.append(harness.run_in_ns(real_src, dst, ["ibv_devices"]))
        assert runs[0].returncode == 0
        if by_name:
            assert runs[0] == runs[1]
        else:
            assert runs[1].returncode == 0 and same_lines(runs[0].stdout, runs[1].stdout)
            assert sorted(runs[0].stderr.splitlines()) == sorted(runs[1].stderr.splitlines())
        assert runs[0].stdout.count("\n") > 3


# ------------------------------------------------------------------------------ docs


def test_docs_shell_examples() -> None:
    """Every ``$ sysverbs ...`` example in docs/cli.md prints what the doc shows."""
    text = (ROOT / "docs/cli.md").read_text()
    blocks = re.findall(r"```console\n(.*?)```", text, re.S)
    ran = 0
    for block in blocks:
        for cmd, shown in re.findall(r"^\$ (sysverbs [^\n]*)\n(.*?)(?=^\$ |\Z)", block,
                                     re.S | re.M):
            argv = cmd.split()[1:]
            p = sv(*argv)
            # --fixture's tree is in the fixture cache (sysverbs.testing.cache)
            got = p.stdout
            if "--fixture" in argv:
                name = argv[argv.index("--fixture") + 1]
                got = got.replace(fixture_tree(name).root,
                                  f"~/.cache/sysverbs/fixtures/{name}-XXXX/tree")
            # A device list is in the fixture tree's readdir order (see same_lines).
            listing = argv[0] == "devices" or argv[:2] == ["devinfo", "-l"]
            assert got == shown or (listing and same_lines(got, shown)), cmd
            ran += 1
    assert ran >= 6


def test_fixture_forces_the_sysfs_source_for_every_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With --fixture, "auto" would list a host's real devices over netlink."""
    from sysverbs.cli import main, tools

    seen: dict[str, Any] = {}

    def fake(args: Any, opts: dict[str, Any]) -> int:
        seen.update(opts)
        return 0

    monkeypatch.setattr(tools, "doctor", fake)
    assert main(["doctor", "--fixture", "rxe"]) == 0
    assert seen["source"] == "sysfs" and seen["providers"] == "builtin"
    assert main(["doctor", "--fixture", "rxe", "--source", "udev"]) == 0
    assert seen["source"] == "udev"

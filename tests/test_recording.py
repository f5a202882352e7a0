"""Tests for sysverbs.recording: umockdev's recording format, materialize, fixtures."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sysverbs import testing
from sysverbs.ground import errors
from sysverbs.testing import umockdev
from sysverbs.testing.umockdev import Attribute, Record, Recording
from tests.umockdev_oracle import umockdev_run_or_skip

ROOT = Path(__file__).resolve().parent.parent

SIMPLE = """\
P: /devices/pci0000:00/0000:00:02.0/0000:04:00.0
E: SUBSYSTEM=pci
E: DRIVER=mlx5_core
E: PCI_SLOT_NAME=0000:04:00.0
A: modalias=pci:v000015B3d0000101Bsv000015B3sd00000012bc02sc07i00\\n
A: vendor=0x15b3\\n
L: driver=../../../../bus/pci/drivers/mlx5_core

P: /devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0
E: SUBSYSTEM=infiniband
E: NAME=mlx5_0
A: node_type=1: CA\\n
A: node_guid=b859:9f03:0052:9348\\n
A: ports/1/gids/0=fe80:0000:0000:0000:b859:9f03:0052:9348\\n
H: blob=00FF0A
L: device=../../../0000:04:00.0

P: /devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband_verbs/uverbs0
N: infiniband/uverbs0
S: infiniband/by-ibdev/uverbs-mlx5_0
E: SUBSYSTEM=infiniband_verbs
E: MAJOR=231
E: MINOR=192
E: DEVNAME=/dev/infiniband/uverbs0
E: DEVMODE=0666
A: abi_version=1\\n
A: dev=231:192\\n
A: ibdev=mlx5_0\\n
A: ../../../../../../class/infiniband_verbs/abi_version=6\\n
L: device=../../../0000:04:00.0
"""


def read(path: Path) -> bytes:
    return path.read_bytes()


# ------------------------------------------------------------------------ parse


def test_parse_simple() -> None:
    r = umockdev.parse(SIMPLE)
    assert len(r) == 3
    pci, ib, uv = r.records
    assert pci.subsystem == "pci" and pci.name == "0000:04:00.0"
    assert pci.property("DRIVER") == "mlx5_core"
    assert pci.value("vendor") == b"0x15b3\n"
    drv = pci.attribute("driver")
    assert drv is not None and drv.link == "../../../../bus/pci/drivers/mlx5_core"
    assert drv.tag == "L"
    assert ib.value("blob") == b"\x00\xff\n"
    blob = ib.attribute("blob")
    assert blob is not None and blob.binary and blob.tag == "H"
    assert uv.node == "infiniband/uverbs0" and uv.node_contents is None
    assert uv.links == ("infiniband/by-ibdev/uverbs-mlx5_0",)
    assert [r.line for r in r.records] == [1, 9, 18]
    assert uv.attribute("ibdev") == Attribute("ibdev", b"mlx5_0\n")
    assert uv.attribute("ibdev").line == 28  # type: ignore[union-attr]


def test_parse_empty_and_trailing_blank_lines() -> None:
    assert umockdev.parse("") == Recording(())
    r = umockdev.parse("P: /devices/x\nE: SUBSYSTEM=foo\n\n\n\nP: /devices/y\nE: SUBSYSTEM=foo")
    assert [x.path for x in r] == ["/devices/x", "/devices/y"]


def test_parse_keys_and_values_as_umockdev() -> None:
    r = umockdev.parse(
        "P: /devices/x\n"
        "E: SUBSYSTEM=foo\n"
        "E: WEIRD=a=b=c\n"  # key stops at the first '='
        "A: empty=\n"
        "A: spaces= a b \n"
        "A: cr=x\r\n"  # \r is kept (umockdev's '.' matches it)
        "S: a=b\n"
        "N: bus/usb/001/002=0102FF\n"
        "E: __DEVCONTEXT=system_u:object_r:usb_device_t:s0\n"
    )
    (x,) = r.records
    assert x.property("WEIRD") == "a=b=c"
    assert x.value("empty") == b""
    assert x.value("spaces") == b" a b "
    assert x.value("cr") == b"x\r"
    assert x.links == ("a=b",)
    assert x.node == "bus/usb/001/002" and x.node_contents == b"\x01\x02\xff"
    assert x.selinux_context == "system_u:object_r:usb_device_t:s0"
    assert x.property("__DEVCONTEXT") is None


@pytest.mark.parametrize(
    ("escaped", "raw"),
    [
        ("plain", b"plain"),
        ("a\\nb", b"a\nb"),
        ("\\t\\r\\b\\f\\v", b"\t\r\b\f\v"),
        ("back\\\\slash", b"back\\slash"),
        ('\\"quoted\\"', b'"quoted"'),
        ("\\101\\102", b"AB"),
        ("\\1\\12x", b"\x01\nx"),
        ("\\1234", b"S4"),  # at most three octal digits
        ("\\377\\303\\251", b"\xff\xc3\xa9"),
        ("\\777", b"\xff"),  # wraps to 8 bits, as gchar does
        ("\\q\\ \\=", b"q ="),  # unknown escapes stand for the character
        ("caf\u00e9", "caf\u00e9".encode()),
    ],
)
def test_unescape(escaped: str, raw: bytes) -> None:
    assert umockdev.unescape(escaped) == raw


@pytest.mark.parametrize("bad", ["trailing\\", "\\0", "a\\000b", "\\400"])
def test_unescape_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        umockdev.unescape(bad)


@pytest.mark.parametrize(
    "raw",
    [b"", b"x\n", b"a\tb\\c\"d\r\x0b\x0c\x08", bytes(range(1, 256)), b"\xc3\xa9\n", b"=="],
)
def test_escape_roundtrip(raw: bytes) -> None:
    text = umockdev.escape(raw)
    assert "\n" not in text
    assert umockdev.unescape(text) == raw


def test_escape_matches_g_strescape() -> None:
    assert umockdev.escape(b'a"b\\\n\x01\x7f\xe9') == 'a\\"b\\\\\\n\\001\\177\\351'
    with pytest.raises(ValueError):
        umockdev.escape(b"a\0b")


BAD_INPUTS = [
    ("\nP: /devices/x\nE: SUBSYSTEM=a\n", 1, "must start"),  # leading empty line
    ("# comment\nP: /devices/x\nE: SUBSYSTEM=a\n", 1, "must start"),
    ("P: /devices/x\n# comment\nE: SUBSYSTEM=a\n", 2, "malformed"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nM: x\n", 3, "malformed"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nL: 0\n", 3, "malformed"),  # udevadm's link priority
    ("P: /devices/x\nE: SUBSYSTEM=a\nA:x=1\n", 3, "malformed"),  # no space after the colon
    ("P: /devices/x\nE: SUBSYSTEM=a\nA: noequals\n", 3, "malformed"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nA: =x\n", 3, "malformed"),
    ("P: /devices/x\nE: SUBSYSTEM=a\n \nP: /devices/y\n", 3, "malformed"),  # blanks line
    ("P: /devices/x\r\nE: SUBSYSTEM=a\r\n\r\n", 3, "malformed"),  # CRLF empty line
    ("P: /sys/devices/x\nE: SUBSYSTEM=a\n", 1, "must start with /devices/"),
    ("P: /devices/x\nA: a=1\n", 1, "SUBSYSTEM"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nE: SUBSYSTEM=b\n", 3, "duplicate SUBSYSTEM"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nP: /devices/y\nE: SUBSYSTEM=a\n", 3, "inside a record"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nH: b=ABC\n", 3, "odd number"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nH: b=ZZ\n", 3, "non-hex"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nN: foo=0a\n", 3, "malformed"),  # lower-case hex
    ("P: /devices/x\nE: SUBSYSTEM=a\nN: foo=\n", 3, "malformed"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nN: foo\nN: bar\n", 4, "second N:"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nA: x=a\\\n", 3, "trailing backslash"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nA: x=a\\0\n", 3, "NUL"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nS: \n", 3, "empty S:"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nE: __DEVCONTEXT=a\nE: __DEVCONTEXT=b\n", 4, "__DEVCONTEXT"),
    ("P: /devices/x\nE: SUBSYSTEM=a\n\nE: SUBSYSTEM=b\n", 4, "must start"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nA: y=\0\n", 3, "NUL"),
]


@pytest.mark.parametrize(("text", "line", "msg"), BAD_INPUTS)
def test_parse_rejects_with_line_number(text: str, line: int, msg: str) -> None:
    with pytest.raises(ValueError) as info:
        umockdev.parse(text)
    assert str(info.value).startswith(f"line {line}: "), str(info.value)
    assert msg in str(info.value)


def test_rejected_inputs_are_rejected_by_umockdev_too(tmp_path: Path) -> None:
    """Whatever parse() refuses for syntax, umockdev-run refuses as well."""
    umockdev_run = umockdev_run_or_skip()
    syntax_errors = [t for t, _, m in BAD_INPUTS
                     if m in ("must start", "malformed", "SUBSYSTEM", "duplicate SUBSYSTEM",
                              "inside a record", "odd number", "must start with /devices/")]
    for n, text in enumerate(syntax_errors):
        f = tmp_path / f"bad{n}.umockdev"
        f.write_text(text)
        proc = subprocess.run(umockdev.umockdev_run_command(f, ["true"], umockdev_run=umockdev_run),
                              capture_output=True, text=True)
        assert proc.returncode != 0, text


def test_a_link_to_nothing_is_refused_as_umockdev_refuses_it(tmp_path: Path) -> None:
    """``L: name=`` (an empty target, which symlink(2) refuses with ENOENT): a
    RecordingError naming the line, not a FileNotFoundError; umockdev-run stops on it
    too.  Found by test_hostile_recording's property test."""
    text = "P: /devices/h/n0\nE: SUBSYSTEM=pci\nL: fw_ver=\n"
    with pytest.raises(errors.RecordingError, match="^line 3: cannot create symlink "
                       ".*/fw_ver: empty target$"):
        testing.materialize(umockdev.parse(text), tmp_path / "root")
    f = tmp_path / "empty-link.umockdev"
    f.write_text(text)
    proc = subprocess.run(umockdev.umockdev_run_command(f, ["true"],
                                                        umockdev_run=umockdev_run_or_skip()),
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "Cannot create symlink" in proc.stderr, proc.stderr


# ----------------------------------------------------------------- dumps / model


def test_dumps_roundtrip() -> None:
    r = umockdev.parse(SIMPLE)
    text = umockdev.dumps(r)
    assert umockdev.parse(text) == r
    assert umockdev.dumps(umockdev.parse(text)) == text


def test_dumps_uses_hex_for_nul_and_keeps_order() -> None:
    r = Recording((Record("/devices/x", (("SUBSYSTEM", "a"),),
                          (Attribute("b", b"1\0"), Attribute("a", b"\xff\n"),
                           Attribute("l", b"", "../y"), Attribute("h", b"\n", binary=True)),
                          node="x0", node_contents=b"\x01"),))
    text = umockdev.dumps(r)
    assert "H: b=3100\n" in text and "A: a=\\377\\n\n" in text and "H: h=0A\n" in text
    assert "N: x0=01\n" in text
    back = umockdev.parse(text)
    assert [a.name for a in back.records[0].attributes] == ["b", "a", "l", "h"]
    assert back.records[0].value("b") == b"1\0"


@pytest.mark.parametrize(
    "record",
    [
        Record("/devices/x", (("SUBSYSTEM", "a\nb"),)),
        Record("/devices/x", (("SUBSYSTEM", "a"), ("K=V", "x"))),
        Record("/devices/x", (("SUBSYSTEM", "a"),), (Attribute("a=b", b""),)),
        Record("/devices/x\n", (("SUBSYSTEM", "a"),)),
    ],
)
def test_dumps_rejects_unrepresentable(record: Record) -> None:
    with pytest.raises(ValueError):
        umockdev.dumps([record])


def test_record_helpers() -> None:
    r = umockdev.parse(SIMPLE)
    uv = r.records[2]
    uv2 = uv.with_attribute("abi_version", "7\n")
    assert uv2.value("abi_version") == b"7\n"
    assert [a.name for a in uv2.attributes] == [a.name for a in uv.attributes]
    uv3 = uv2.with_attribute("new", b"x").with_link("lnk", "../z").without_attribute("ibdev")
    assert uv3.value("new") == b"x" and uv3.attribute("lnk").link == "../z"  # type: ignore
    assert uv3.attribute("ibdev") is None
    r2 = r.with_record(uv3)
    assert r2.find(uv.path) == uv3 and len(r2) == 3
    assert len(r2.without(uv.path)) == 2
    assert r.subsystem("infiniband")[0].name == "mlx5_0"


def test_class_file() -> None:
    a = umockdev.class_file("/devices/virtual/net/lo", "/class/infiniband_verbs/abi_version", "6\n")
    assert a == Attribute("../../../../class/infiniband_verbs/abi_version", b"6\n")
    with pytest.raises(ValueError):
        umockdev.class_file("/devices/x", "/class/../../etc/passwd", "x")


# ------------------------------------------------------------------ materialize


def test_materialize_layout(tmp_path: Path) -> None:
    host = testing.materialize(umockdev.parse(SIMPLE), tmp_path / "root")
    root = tmp_path / "root"
    assert host == testing.FakeHost(root, root / "sys", root / "dev" / "infiniband", ("uverbs0",))
    sysfs = host.sysfs
    pci = sysfs / "devices/pci0000:00/0000:00:02.0/0000:04:00.0"
    # bus and class links, relative as the kernel makes them
    assert os.readlink(sysfs / "bus/pci/devices/0000:04:00.0") == \
        "../../../devices/pci0000:00/0000:00:02.0/0000:04:00.0"
    assert os.readlink(pci / "subsystem") == "../../../../bus/pci"
    assert os.readlink(sysfs / "class/infiniband/mlx5_0") == \
        "../../devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband/mlx5_0"
    assert os.readlink(pci / "infiniband/mlx5_0/subsystem") == "../../../../../../class/infiniband"
    assert os.readlink(sysfs / "dev/char/231:192") == \
        "../../devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband_verbs/uverbs0"
    # attributes, byte-exact, reached through the class links
    verbs = sysfs / "class/infiniband_verbs"
    assert read(verbs / "abi_version") == b"6\n"
    assert read(verbs / "uverbs0/ibdev") == b"mlx5_0\n"
    assert read(verbs / "uverbs0/dev") == b"231:192\n"
    assert read(verbs / "uverbs0/device/modalias").startswith(b"pci:v000015B3d0000101Bsv")
    ib = sysfs / "class/infiniband/mlx5_0"
    assert read(ib / "node_type") == b"1: CA\n"
    assert read(ib / "blob") == b"\x00\xff\n"
    assert read(ib / "ports/1/gids/0") == b"fe80:0000:0000:0000:b859:9f03:0052:9348\n"
    assert os.path.samefile(ib / "device", pci)
    assert os.readlink(pci / "driver") == "../../../../bus/pci/drivers/mlx5_core"
    # uevent as the kernel writes it
    assert read(pci / "uevent") == b"DRIVER=mlx5_core\nPCI_SLOT_NAME=0000:04:00.0\n"
    assert read(verbs / "uverbs0/uevent") == \
        b"MAJOR=231\nMINOR=192\nDEVNAME=infiniband/uverbs0\nDEVMODE=0666\n"
    assert read(ib / "uevent") == b"NAME=mlx5_0\n"
    # device node: an empty regular file; S: link relative to it
    node = host.dev / "uverbs0"
    assert node.is_file() and not node.is_symlink() and read(node) == b""
    assert os.readlink(host.dev / "by-ibdev/uverbs-mlx5_0") == "../uverbs0"


def test_materialize_from_file_and_uevent_override(tmp_path: Path) -> None:
    f = tmp_path / "x.umockdev"
    f.write_text("P: /devices/virtual/misc/foo\nN: foo=4142\nE: SUBSYSTEM=misc\n"
                 "E: ID_VENDOR=x\nE: USEC_INITIALIZED=1\nE: DEVNAME=/dev/foo\n"
                 "A: uevent=MAJOR=10\\n\n")
    host = testing.materialize(f, tmp_path / "r")
    d = host.sysfs / "devices/virtual/misc/foo"
    assert read(d / "uevent") == b"MAJOR=10\n"
    assert read(host.root / "dev/foo") == b"AB"
    assert host.dev_nodes == ()
    assert host.dev.is_dir()


def test_materialize_uevent_drops_udev_only_keys(tmp_path: Path) -> None:
    text = ("P: /devices/virtual/net/eth9\nE: SUBSYSTEM=net\nE: DEVPATH=/devices/virtual/net/eth9\n"
            "E: INTERFACE=eth9\nE: ID_NET_NAME=eth9\nE: TAGS=:systemd:\nE: IFINDEX=9\n"
            "E: SYSTEMD_ALIAS=/sys/x\nE: .HIDDEN=1\n")
    host = testing.materialize(umockdev.parse(text), tmp_path)
    assert read(host.sysfs / "class/net/eth9/uevent") == b"INTERFACE=eth9\nIFINDEX=9\n"


def test_materialize_is_deterministic(tmp_path: Path) -> None:
    path = testing.fixture_path("mlx5-cx6")
    a = testing.materialize(path, tmp_path / "a")
    b = testing.materialize(path, tmp_path / "b")
    assert _snapshot(a.root) == _snapshot(b.root)
    assert a.dev_nodes == b.dev_nodes


def test_materialize_twice_into_one_root_conflicts(tmp_path: Path) -> None:
    testing.materialize(umockdev.parse(SIMPLE), tmp_path)
    with pytest.raises(ValueError, match="line 1: device .* already present"):
        testing.materialize(umockdev.parse(SIMPLE), tmp_path)


def test_materialize_combines_recordings(tmp_path: Path) -> None:
    testing.materialize(testing.fixture_path("empty"), tmp_path / "r")
    extra = "P: /devices/virtual/infiniband/rxe9\nE: SUBSYSTEM=infiniband\nA: node_type=1: CA\\n\n"
    testing.materialize(umockdev.parse(extra), tmp_path / "r")
    assert read(tmp_path / "r/sys/class/infiniband/rxe9/node_type") == b"1: CA\n"
    assert read(tmp_path / "r/sys/class/infiniband_verbs/abi_version") == b"6\n"


# "{out}": a directory of the test's own beside root (not /tmp, where anything may lie).
ESCAPES = [
    ("P: /devices/../../etc\nE: SUBSYSTEM=a\n", "line 1: invalid device path"),
    ("P: /devices/x/../../..\nE: SUBSYSTEM=a\n", "line 1: invalid device path"),
    ("P: /devices/\nE: SUBSYSTEM=a\n", "line 1: invalid device path"),
    ("P: /devices/x\nE: SUBSYSTEM=../../../tmp\n", "line 1: invalid SUBSYSTEM"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nA: /etc/passwd=x\n", "line 3: invalid attribute name"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nA: ../../../escape=x\n", "line 3:"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nA: " + "/".join([".."] * 16) + "{out}/escape=x\n", "line 3:"),
    ("P: /devices/x\nE: SUBSYSTEM=a\nA: ../../../dev/x=x\n", "line 3:"),  # root/dev, not sys
    ("P: /devices/x\nE: SUBSYSTEM=a\nL: ../../../escape={out}\n", "line 3:"),
    ("P: /devices/x\nN: ../../escape\nE: SUBSYSTEM=a\n", "line 1: invalid device node"),
    ("P: /devices/x\nN: /abs\nE: SUBSYSTEM=a\n", "line 1: invalid device node"),
    ("P: /devices/x\nN: ok\nS: /abs\nE: SUBSYSTEM=a\n", "line 1: invalid S: link"),
    ("P: /devices/x\nN: ok\nS: ../../escape\nE: SUBSYSTEM=a\n", "line 1: invalid S: link"),
]


# Links out of the root, which later records would go through: each link is left out
# with a RecordingWarning (line 3), so the later record writes inside the root
# (tests/test_hostile_recording.py has more).
LINK_ESCAPES = [
    "P: /devices/x\nE: SUBSYSTEM=a\nL: out=/\n\nP: /devices/x/out{out}\nE: SUBSYSTEM=a\n",
    "P: /devices/x\nE: SUBSYSTEM=a\nL: out=../../../..\n\n"
    "P: /devices/y\nE: SUBSYSTEM=a\nA: ../x/out/escape=x\n",
    "P: /devices/x\nE: SUBSYSTEM=a\nL: d={out}\n\n"
    "P: /devices/y\nE: SUBSYSTEM=a\nA: ../x/d/sub/escape=x\n",
    "P: /devices/x\nE: SUBSYSTEM=a\nL: d={out}\n\n"
    "P: /devices/y\nE: SUBSYSTEM=a\nA: ../x/d/escape=x\n",
    "P: /devices/x\nE: SUBSYSTEM=a\nL: d={out}\n\n"
    "P: /devices/y\nE: SUBSYSTEM=a\nL: ../x/d/escape=/\n",
]


@pytest.mark.parametrize("text", LINK_ESCAPES)
def test_materialize_leaves_out_links_out_of_root(tmp_path: Path, text: str) -> None:
    root = tmp_path / "a" / "b" / "root"
    out = tmp_path / "out"
    out.mkdir()
    before = _snapshot(tmp_path)
    with pytest.warns(errors.RecordingWarning, match="^line 3: link sys/devices/x/"):
        testing.materialize(umockdev.parse(text.replace("{out}", str(out))), root)
    added = set(_snapshot(tmp_path)) - set(before)
    assert {p for p in added if not p.startswith("a/b/root") and p not in ("a", "a/b")} == set()
    assert not (root / "sys/devices/x/out").is_symlink()
    assert not (root / "sys/devices/x/d").is_symlink()
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(("text", "msg"), ESCAPES)
def test_materialize_never_writes_outside_root(tmp_path: Path, text: str, msg: str) -> None:
    root = tmp_path / "a" / "b" / "root"
    out = tmp_path / "out"
    out.mkdir()
    before = _snapshot(tmp_path)
    with pytest.raises(ValueError) as info:
        testing.materialize(umockdev.parse(text.replace("{out}", str(out))), root)
    assert str(info.value).startswith(msg), str(info.value)
    after = _snapshot(tmp_path)
    outside = {p for p in set(after) - set(before)
               if not p.startswith("a/b/root") and p not in ("a", "a/b")}
    assert outside == set()
    assert list(out.iterdir()) == []


def test_materialize_dotdot_inside_sys_is_allowed(tmp_path: Path) -> None:
    """The way the fixtures carry class files: .. that stays below root/sys."""
    text = ("P: /devices/virtual/net/lo\nE: SUBSYSTEM=net\n"
            "A: ../../../../class/infiniband_mad/abi_version=5\\n\n"
            "A: ../lo/../../net/lo/again=1\n")
    host = testing.materialize(umockdev.parse(text), tmp_path)
    assert read(host.sysfs / "class/infiniband_mad/abi_version") == b"5\n"
    assert read(host.sysfs / "devices/virtual/net/lo/again") == b"1"


# ---------------------------------------------------------------------- helpers


def _snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every path below root: (kind, content or link target)."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("l", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("d", "")
            else:
                out[rel] = ("f", p.read_bytes().hex())
    return out

"""Nothing is trusted from a recording (issue 42): a crafted snapshot cannot make
:func:`sysverbs.testing.materialize` write outside its root, nor the commands run on
the materialized tree read (and print) a file outside it.

A link whose target is absolute, climbs out of the root, goes out through a link made
by an earlier record, or climbs out of a name that a later record could make a link
is left out with a :class:`~sysverbs.ground.errors.RecordingWarning` naming it; a device
path, attribute name or node name that leads out is a
:class:`~sysverbs.ground.errors.RecordingError` (test_recording.py's ESCAPES list the
others).  A secret file is planted beside the root; ``devinfo -v``, ``topo --json``,
``metrics``, ``doctor --json``, ``netdev`` and ``env`` print no byte of it, and an
audit hook ('open', 'os.listdir', 'os.scandir', 'os.readlink') sees no path outside
the root opened.  Before the fix, ``devinfo`` printed the secret as ``fw_ver``.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import given

from sysverbs import testing
from sysverbs.ground import errors
from sysverbs.testing import HostBuilder, umockdev
from tests.fuzz.hostile import OUTSIDE, recordings
from tests.fuzz.profiles import fuzz_settings

SECRET = "SVSECRET4242"
SECRET_GUID = "dead:beef:0bad:f00d"  # what node_guid would show: deadbeef0badf00d

_opened: list[Optional[list[str]]] = [None]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    seen = _opened[0]
    if seen is None or event not in ("open", "os.listdir", "os.scandir", "os.readlink"):
        return
    if args and isinstance(args[0], (str, bytes, os.PathLike)):
        seen.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)  # stays for the process: records only while asked


@contextlib.contextmanager
def opened() -> Iterator[list[str]]:
    seen: list[str] = []
    _opened[0] = seen
    try:
        yield seen
    finally:
        _opened[0] = None


def snapshot(path: Path) -> dict[str, Any]:
    """Every name below ``path`` with its kind, size and link target (not followed)."""
    out: dict[str, Any] = {}
    for dirpath, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            out[os.path.relpath(full, path)] = (
                st.st_mode, st.st_size, os.readlink(full) if os.path.islink(full) else None)
    return out


def assert_inside(root: Path) -> None:
    """Every link below ``root`` resolves inside it (dangling ones included)."""
    real_root = os.path.realpath(root)
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                real = os.path.realpath(full)
                assert real == real_root or real.startswith(real_root + "/"), (
                    full, os.readlink(full), real)


@pytest.fixture()
def planted(tmp_path: Path) -> Path:
    """``tmp_path/outside`` with the secret files; the root is ``tmp_path/root``."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret").write_text(SECRET + "\n")
    (out / "guid").write_text(SECRET_GUID + "\n")
    return out


def hostile_host(outside: Path) -> str:
    """An mlx5 host whose IB device's files are links out of the root, each by
    another way (the text a crafted snapshot file would hold)."""
    text = HostBuilder().mlx5(vfs=1).dumps()
    ib = "/infiniband/mlx5_0\n"
    head, tail = text.split(ib, 1)
    record, rest = tail.split("\n\n", 1)
    lines = [ln for ln in record.split("\n") if not ln.startswith(
        ("A: fw_ver=", "A: node_guid=", "A: board_id=", "A: node_desc=", "A: hca_type="))]
    # mlx5_0 is root/sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0:
    # seven levels below the root, outside/ is beside the root
    lines += [
        f"L: fw_ver={outside}/secret",  # absolute
        f"L: node_guid={'../' * 8}outside/guid",  # climbs out
        "L: node_desc=../../hop/../outside/secret",  # through hop (the PCI function's)
        "L: hca_type=../../later/../outside/secret",  # through a link made later
        f"L: board_id={'../' * 7}../outside/../outside/secret",
    ]
    pci = "P: /devices/pci0000:00/0000:00:01.0/0000:03:00.0\n"
    assert pci in head
    head = head.replace(pci, pci + "L: hop=../../../../..\n", 1)  # the root: inside
    # a later record makes 0000:03:00.0/later -> the root (inside, so allowed)
    uverbs = "A: ibdev=mlx5_0\\n\n"
    assert uverbs in rest
    rest = rest.replace(uverbs, uverbs + "L: ../../later=../../../../..\n", 1)
    return head + ib + "\n".join(lines) + "\n\n" + rest


def run(command: str, root: Path) -> tuple[int, str]:
    from sysverbs.cli import main

    argv = [*command.split(), "--sysfs-path", f"{root}/sys", "--dev-dir",
            f"{root}/dev/infiniband"]
    out, err = io.BytesIO(), io.StringIO()
    wrapper = io.TextIOWrapper(out)
    with contextlib.redirect_stdout(wrapper), contextlib.redirect_stderr(err):
        rc = main(argv)
        wrapper.flush()
    return rc, out.getvalue().decode("utf-8", "replace") + err.getvalue()


COMMANDS = ["devinfo -v", "topo --json", "metrics", "doctor --json", "netdev", "env"]


def test_links_out_of_the_root_are_left_out(tmp_path: Path, planted: Path) -> None:
    text = hostile_host(planted)
    before = snapshot(planted)
    with pytest.warns(errors.RecordingWarning) as caught:
        host = testing.materialize(umockdev.parse(text), tmp_path / "root")
    said = sorted(str(w.message) for w in caught)
    assert len(said) == 5, said
    ib = "sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0"
    for name, why in (("fw_ver", "its target is absolute"),
                      ("node_guid", "leads out of the root"),
                      ("node_desc", "leads out of the root"),
                      ("hca_type", "climbs out of a directory that does not exist"),
                      ("board_id", "leads out of the root")):
        assert any(f"link {ib}/{name} -> " in s and why in s for s in said), (name, said)
        assert not os.path.lexists(host.sysfs / ib.removeprefix("sys/") / name)
    assert os.path.islink(host.sysfs / "devices/pci0000:00/0000:00:01.0/0000:03:00.0/later")
    assert snapshot(planted) == before
    assert sorted(os.listdir(tmp_path)) == ["outside", "root"]
    assert_inside(tmp_path / "root")


@pytest.mark.parametrize("command", COMMANDS)
def test_commands_print_nothing_from_outside(tmp_path: Path, planted: Path,
                                             command: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.RecordingWarning)
        host = testing.materialize(umockdev.parse(hostile_host(planted)),
                                     tmp_path / "root")
    with opened() as seen:
        rc, output = run(command, host.root)
    assert rc in (0, 1), output
    assert "mlx5_0" in output or command == "netdev"
    for secret in (SECRET, SECRET_GUID, "deadbeef0badf00d", str(planted)):
        assert secret not in output, command
    real_root = os.path.realpath(host.root) + "/"
    outside = [p for p in seen if os.path.realpath(p).startswith(os.path.realpath(planted))]
    assert outside == []
    assert [p for p in seen if p.startswith(str(tmp_path)) and
            not os.path.realpath(p).startswith(real_root)] == []


def test_a_huge_attribute_is_read_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """A 4 MiB ``fw_ver`` is written (it is inside the root) but never read whole:
    every read asks for at most a page, and no command prints it."""
    huge = "7" * (4 << 20)
    text = HostBuilder().mlx5().dumps().replace("A: fw_ver=20.39.1002\\n",
                                                f"A: fw_ver={huge}\\n")
    host = testing.materialize(umockdev.parse(text), tmp_path / "root")
    fw = host.sysfs / "class/infiniband/mlx5_0/fw_ver"
    assert fw.stat().st_size == len(huge) + 1
    sizes: list[int] = []
    real_read = os.read

    def read(fd: int, n: int) -> bytes:
        sizes.append(n)
        return real_read(fd, n)

    for command in ("devinfo -v", "metrics", "topo --json"):
        monkeypatch.setattr(os, "read", read)
        try:
            rc, output = run(command, host.root)
        finally:
            monkeypatch.undo()
        assert rc == 0, output
        assert "7" * 4097 not in output
    assert sizes and max(sizes) <= 1 << 16


@fuzz_settings(ci=60, deep=1000)
@given(text=recordings())
def test_no_recording_leads_out_of_the_root(tmp_path_factory: pytest.TempPathFactory,
                                            text: str) -> None:
    """Any hostile recording: materialize writes nothing outside the root, leaves no
    link there that resolves outside (a RecordingWarning for each one it left out, or
    a RecordingError), and reading every file of the tree opens nothing outside."""
    base = tmp_path_factory.mktemp("hostile")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret").write_text(SECRET + "\n")
    root = base / "root"
    before = snapshot(outside)
    text = text.replace(OUTSIDE, str(outside))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.RecordingWarning)
        with contextlib.suppress(errors.RecordingError):
            testing.materialize(umockdev.parse(text), root)
    assert snapshot(outside) == before
    assert sorted(os.listdir(base)) in (["outside"], ["outside", "root"])
    if not root.exists():
        return
    assert_inside(root)
    contents: list[bytes] = []
    with opened() as seen:
        for dirpath, _, files in os.walk(root, followlinks=False):
            for name in files:
                with contextlib.suppress(OSError):
                    with open(os.path.join(dirpath, name), "rb") as fh:
                        contents.append(fh.read(4096))
    assert not any(SECRET.encode() in c for c in contents)
    assert [p for p in seen if os.path.realpath(p).startswith(str(outside))] == []

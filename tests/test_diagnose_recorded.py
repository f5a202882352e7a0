"""sysverbs.diagnose(recorded=True): a recording's device nodes are stand-ins, checked
against what umockdev replays."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import sysverbs
from sysverbs import testing
from sysverbs.devices.diagnosis import diagnose
from sysverbs.testing import umockdev
from tests import listing_hosts, trees
from tests.diagnose_runs import ROOT, diagnose_module, null_node, rxe, seen_of, without_node


def test_recorded_is_a_bool(tmp_path: Path) -> None:
    with pytest.raises(sysverbs.ground.errors.WrongTypeError):
        diagnose(sysfs_path=tmp_path, recorded="yes")  # type: ignore[arg-type]


def test_recorded_trusts_only_plain_file_stand_ins(tmp_path: Path) -> None:
    """``recorded=True`` takes a plain file for a recording's stand-in and nothing
    else: a directory, or a real char device with the wrong numbers, is the error it
    is; without ``recorded`` the stand-in is the error a copied /dev is."""
    host = testing.materialize(testing.fixture_path("rxe"), tmp_path)
    node = host.dev / "uverbs0"
    live = diagnose(**host.options())
    assert [r.code for r in live[0].reasons] == ["dev_node_wrong"]
    assert live[0].node is not None and live[0].node.kind == "file"
    assert not live[0].node.stand_in and live[0].node.path == str(node)
    node.unlink()
    node.mkdir()
    (found,) = [d for d in diagnose(recorded=True, **host.options()) if d.name == "rxe0"]
    assert [r.code for r in found.reasons] == ["dev_node_wrong"] and not found.usable
    assert found.node is not None and found.node.kind == "directory"
    if not ROOT:
        pytest.skip("mknod needs root")
    node.rmdir()
    null_node(node)  # 1:3, sysfs says 231:192
    (found,) = [d for d in diagnose(recorded=True, **host.options()) if d.name == "rxe0"]
    assert "1:3" in found.reasons[0].message and found.reasons[0].code == "dev_node_wrong"
    assert found.node == diagnose_module.DeviceNode(str(node), "char", 1, 3, False)


_STAT_NODES = r"""
import json, os, stat, sys
out = {}
for name in sys.argv[1:]:
    path = "/dev/infiniband/" + name
    try:
        st = os.stat(path)
    except FileNotFoundError:
        out[path] = None
        continue
    kind = "char" if stat.S_ISCHR(st.st_mode) else "block" if stat.S_ISBLK(st.st_mode) else "?"
    out[path] = [kind, os.major(st.st_rdev), os.minor(st.st_rdev)]
print(json.dumps(out))
"""


def _umockdev_nodes(recording_file: Path, names: list[str]) -> dict[str, Any]:
    umockdev_run = shutil.which("umockdev-run")
    if umockdev_run is None:
        if os.environ.get("CI") == "true":
            pytest.fail("umockdev-run is not installed (required when CI=true)")
        pytest.skip("umockdev-run is not installed")
    from tests.conftest import fast_tmp

    cmd = umockdev.umockdev_run_command(
        recording_file, [sys.executable, "-c", _STAT_NODES, *names], umockdev_run=umockdev_run)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, TMPDIR=fast_tmp()))
    assert proc.returncode == 0, proc.stderr
    nodes: dict[str, Any] = json.loads(proc.stdout)
    return nodes


def _recorded_nodes_match_umockdev(host: testing.FakeHost, recording_file: Path) -> int:
    found = diagnose(recorded=True, **host.options(rdma_core="44"))
    names = sorted(os.listdir(host.sysfs / "class/infiniband_verbs"))
    names = [n for n in names if n.startswith("uverbs")]
    theirs = _umockdev_nodes(recording_file, names)
    checked = 0
    for d in found:
        if d.node is not None:
            assert d.node.stand_in and d.usable == (not d.errors), d
            assert theirs[d.node.path] == [d.node.kind, d.node.major, d.node.minor], d
            # the recording's udev properties (the uevent file) say the same numbers
            uevent = (host.sysfs / "class/infiniband_verbs" / str(d.uverbs) / "uevent")
            props = dict(x.split("=", 1) for x in uevent.read_text().splitlines())
            assert (int(props["MAJOR"]), int(props["MINOR"])) == (d.node.major, d.node.minor)
            assert props["DEVNAME"] == d.node.path[len("/dev/"):]
            checked += 1
        elif "no_dev_node" in [r.code for r in d.reasons]:
            path = f"/dev/infiniband/{d.uverbs}"
            if not os.path.lexists(path):  # umockdev shows the real /dev's paths through
                assert theirs[path] is None, d
            checked += 1
        else:
            assert not d.listed, d  # every listed device has its node compared
    return checked


@pytest.mark.oracle
@pytest.mark.parametrize("name", testing.fixture_names())
def test_recorded_nodes_are_what_umockdev_replays(ftmp: Path, name: str) -> None:
    """The node ``recorded=True`` reports for each device (its type and numbers) is the
    node umockdev-run shows a program for the same recording (``stat`` of
    /dev/infiniband/uverbsN): umockdev is the format's own reader."""
    host = listing_hosts.materialize(name, ftmp)
    _recorded_nodes_match_umockdev(host, listing_hosts.listing_file(name))


@pytest.mark.oracle
def test_a_recorded_missing_node_is_missing_under_umockdev(ftmp: Path) -> None:
    """A recording without the N: line of a device: diagnose(recorded=True) says the
    recorded host had no node (no_dev_node), and umockdev-run has none either."""
    rec = without_node(listing_hosts.listing_recording("dgx-demo"), "uverbs18")
    (ftmp / "r.umockdev").write_text(umockdev.dumps(rec), encoding="utf-8",
                                     errors="surrogateescape")
    host = testing.materialize(rec, ftmp / "root")
    assert _recorded_nodes_match_umockdev(host, ftmp / "r.umockdev") == 19
    (rxe0,) = [d for d in diagnose(recorded=True, **host.options()) if d.name == "rxe0"]
    assert [r.code for r in rxe0.reasons] == ["no_dev_node"] and rxe0.node is None


def test_probe_open_false_skips_the_open(tmp_path: Path) -> None:
    if not ROOT:
        pytest.skip("mknod needs root")
    trees.build(tmp_path, trees.host(rxe(dev="511:511\n")))
    null_node(tmp_path / "dev/infiniband/uverbs0", 511, 511)
    s = seen_of(
        diagnose(
            sysfs_path=tmp_path / "sys",
            dev_dir=tmp_path / "dev/infiniband",
            providers="builtin",
            probe_open=False,
        )
    )
    assert s.devices["rxe0"]["usable"]

"""No silent wrong state in the fleet commands (issue 42 items 5 and 8): a sysfs root
that vanishes under a running exporter is a failed snapshot, never a healthy host
without RDMA; a writer killed mid-write leaves no temporary file forever; a full
filesystem keeps the old file and says so.  Each of these failed before."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sysverbs import testing
from sysverbs.fleet.facts import HostFacts, collect_facts
from sysverbs.fleet.files import replace_file, temporary_name
from sysverbs.fleet.metrics import families
from sysverbs.fleet.nfd import NAMESPACE, feature_file
from tests.conftest import fast_tmpdir, require
from tests.test_cli_robust import child_env

# ------------------------------------------------------------- the root vanishing


def _collect(host: Any) -> HostFacts:
    return collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
                         source="sysfs", recorded=True, environ={})


def _series(facts: HostFacts, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for f in families(facts) if f.name == name
            for labels, value in f.samples}


@pytest.mark.parametrize("how", ["removed", "unmounted"])
def test_a_vanished_root_is_a_failed_snapshot(how: str, tmp_path: Path) -> None:
    """Failed before: the second snapshot read as a healthy host without RDMA
    (``sysverbs_collector_success`` 1, ``no_kernel_support`` 1, ``rdma.usable=false``),
    where the same root at start-up is an error.  Every part reads the root: each fails,
    with the start-up check's message, and no host problem is made up."""
    host = testing.materialize("rxe", tmp_path / "host")
    before = _collect(host)
    assert [(c.name, c.success) for c in before.collectors] == [
        ("discovery", True), ("topology", True), ("nccl", True)]
    assert before.device("rxe0") is not None
    shutil.move(os.fsdecode(host.sysfs), tmp_path / "elsewhere")
    if how == "unmounted":  # the mount point stays, empty
        os.mkdir(host.sysfs)
    after = _collect(host)
    assert [(c.name, c.success) for c in after.collectors] == [
        ("discovery", False), ("topology", False), ("nccl", False)]
    assert all("not a sysfs tree (no devices/)" in c.error for c in after.collectors)
    assert (after.devices, after.host_reasons, after.gpus, after.nccl_transport) == (
        (), None, (), "")
    assert _series(after, "sysverbs_collector_success") == {
        (("collector", c),): 0.0 for c in ("discovery", "topology", "nccl")}
    assert _series(after, "sysverbs_rdma_host_problem") == {}
    labels = dict(feature_file(after, expires_in=600).labels())
    assert labels == {f"{NAMESPACE}/{part}.failed": "true"
                      for part in ("discovery", "topology", "nccl")}


def test_a_root_that_vanishes_while_it_is_read(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The tree goes away after the check before a part and before the part's reads
    (here: inside the diagnosis): the part fails and what it read is dropped, not
    reported as the host's (``no_kernel_support``, no device)."""
    from sysverbs.devices import diagnosis

    host = testing.materialize("rxe", tmp_path / "host")
    real = diagnosis.diagnose

    def vanishing(**kw: Any) -> Any:
        shutil.move(os.fsdecode(host.sysfs), tmp_path / "elsewhere")
        return real(**kw)

    monkeypatch.setattr(diagnosis, "diagnose", vanishing)
    facts = _collect(host)
    assert [(c.name, c.success) for c in facts.collectors] == [
        ("discovery", False), ("topology", False), ("nccl", False)]
    assert (facts.devices, facts.host_reasons, facts.rdma_cm_available) == ((), None, False)
    assert _series(facts, "sysverbs_rdma_host_problem") == {}


def test_a_root_that_vanishes_under_the_nfd_loop(tmp_path: Path) -> None:
    """``nfd --features-dir DIR --interval``: the labels of the host, then, once the tree
    is gone, ``discovery.failed=true`` and no ``rdma.usable`` label, a warning, the loop
    going on (SIGTERM: 0)."""
    host = testing.materialize("rxe", tmp_path / "host")
    out = tmp_path / "features.d"
    out.mkdir()
    target = out / "sysverbs"
    p = subprocess.Popen([sys.executable, "-m", "sysverbs", "nfd", "--sysfs-path",
                          os.fsdecode(host.sysfs), "--dev-dir", os.fsdecode(host.dev),
                          "--source", "sysfs", "--providers", "builtin", "--features-dir",
                          str(out), "--interval", "0.1"],
                         stderr=subprocess.PIPE, text=True, env=child_env())

    def wait_for(text: str) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                content = target.read_text()
            except FileNotFoundError:
                content = ""
            if text in content:
                return content
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never written")

    try:
        assert f"{NAMESPACE}/rdma.devices=" in wait_for(f"{NAMESPACE}/rdma.usable=")
        shutil.rmtree(host.sysfs)
        after = wait_for(f"{NAMESPACE}/discovery.failed=true\n")
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    assert "rdma.usable" not in after and "rdma.problem" not in after
    assert p.returncode == 0
    assert (f"sysverbs nfd: warning: the discovery part failed (FileNotFoundError: [Errno 2] "
            f"not a sysfs tree (no devices/): '{os.fsdecode(host.sysfs)}'): its labels are "
            "left out\n") in err


# ------------------------------------------------------- a writer killed mid-write

# A child that writes NAME in DIR and stops after the data, before the rename: its
# temporary file exists and it holds it (a real SIGKILL then ends it there).
_STUCK = """
import os, sys, time
from sysverbs.fleet import files
def stuck(fd):
    print("written", flush=True)
    time.sleep(600)
os.fsync = stuck
files.replace_file(sys.argv[1], "sysverbs.prom", b"from the child\\n")
"""


def test_no_temporary_file_is_left_after_sigkill(tmp_path: Path) -> None:
    """Failed before: ``.sysverbs.prom.*.tmp`` stayed forever after a SIGKILL between the
    write and the rename.  A live writer's file is left alone; once it is killed, the
    next write removes it; files of other names or shapes are never touched."""
    replace_file(str(tmp_path), "sysverbs.prom", b"old\n")
    others = [".sysverbs.prom.mine.tmp", ".other.prom.1.0123456789abcdef.tmp", "notes.tmp"]
    for name in others:
        (tmp_path / name).write_text("not ours\n")
    child = subprocess.Popen([sys.executable, "-c", _STUCK, str(tmp_path)],
                             stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert child.stdout is not None and child.stdout.readline() == "written\n"
        pattern = temporary_name("sysverbs.prom")
        stale = [n for n in os.listdir(tmp_path) if pattern.fullmatch(n)]
        assert len(stale) == 1 and (tmp_path / stale[0]).read_text() == "from the child\n"
        replace_file(str(tmp_path), "sysverbs.prom", b"while it writes\n")
        assert (tmp_path / stale[0]).exists()  # it is still writing: never removed
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        if child.stdout is not None:
            child.stdout.close()
    assert (tmp_path / stale[0]).exists()
    replace_file(str(tmp_path), "sysverbs.prom", b"new\n")
    assert sorted(os.listdir(tmp_path)) == sorted(["sysverbs.prom", *others])
    assert (tmp_path / "sysverbs.prom").read_text() == "new\n"


_WRITER = """
import sys
from sysverbs.fleet.files import replace_file
for _ in range(200):
    replace_file(sys.argv[1], "sysverbs", sys.argv[2].encode() * 1000)
"""


def test_writers_side_by_side_never_remove_each_others_file() -> None:
    """Each write first removes the unlocked temporary files of its name: four processes
    writing the same file 200 times each (on a tmpfs where there is one: fsync is free
    there) never take a file another is writing (its rename would fail, as it did when
    the clean-up ignored the locks), and leave the file alone, one writer's whole data."""
    with fast_tmpdir("replace-") as where:
        writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(where), str(n)],
                                    stderr=subprocess.PIPE, text=True, env=child_env())
                   for n in range(4)]
        errors = [w.communicate(timeout=120)[1] for w in writers]
        assert ([w.returncode for w in writers], errors) == ([0] * 4, [""] * 4)
        assert os.listdir(where) == ["sysverbs"]
        assert (where / "sysverbs").read_text() in {str(n) * 1000 for n in range(4)}


# ------------------------------------------------------------- a full filesystem

# Run as root in a private mount namespace (unshare -m): a 512 KiB tmpfs on DIR, both
# files written, the filesystem filled, then each command once and metrics' loop.
_FULL = """
import json, os, signal, subprocess, sys, time
d = sys.argv[1]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", d], check=True)
def sv(*argv):
    p = subprocess.run([sys.executable, "-m", "sysverbs", *argv, "--fixture", "rxe"],
                       capture_output=True, text=True)
    return [p.returncode, p.stdout, p.stderr]
out = {"first": [sv("metrics", "--textfile", d), sv("nfd", "--features-dir", d)]}
names = ("sysverbs.prom", "sysverbs")
old = {n: open(os.path.join(d, n)).read() for n in names}
fd = os.open(os.path.join(d, "fill"), os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, b"x" * 4096)
except OSError:
    os.close(fd)
out["full"] = [sv("metrics", "--textfile", d), sv("nfd", "--features-dir", d)]
loop = subprocess.Popen([sys.executable, "-m", "sysverbs", "metrics", "--fixture", "rxe",
                         "--textfile", d, "--interval", "0.1"], stderr=subprocess.PIPE,
                        text=True)
# two failed writes seen (not a fixed sleep: a loaded machine may take seconds per write)
seen = []
deadline = time.monotonic() + 90
while len(seen) < 2 and time.monotonic() < deadline:
    line = loop.stderr.readline()
    if not line:
        break
    seen.append(line)
loop.send_signal(signal.SIGTERM)
out["loop"] = [loop.wait(), "".join(seen) + loop.stderr.read()]
out["same"] = all(open(os.path.join(d, n)).read() == old[n] for n in names)
out["files"] = sorted(os.listdir(d))
print(json.dumps(out))
"""


def test_a_full_filesystem_keeps_the_old_file_and_says_so(tmp_path: Path) -> None:
    """ENOSPC on a real (tiny) tmpfs: one-shot writes exit 1 with the file named and
    ``No space left on device``; the loop warns at every failed write and goes on; the
    old files are intact, no temporary file is left."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        require("needs root and unshare(1) for a private tmpfs", "a full filesystem")
    p = subprocess.run(["unshare", "-m", sys.executable, "-c", _FULL, str(tmp_path)],
                       capture_output=True, text=True, env=child_env(), timeout=120)
    if p.returncode != 0 and "mount" in p.stderr:
        require(f"cannot mount a tmpfs: {p.stderr.strip()}", "a full filesystem")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [r[0] for r in out["first"]] == [0, 0], out["first"]
    (m_rc, m_out, m_err), (n_rc, n_out, n_err) = out["full"]
    assert (m_rc, m_out, m_err) == (1, "", f"sysverbs metrics: error: {tmp_path}/sysverbs.prom:"
                                    " No space left on device (the file was not replaced)\n")
    assert (n_rc, n_out, n_err) == (1, "", f"sysverbs nfd: error: {tmp_path}/sysverbs: No "
                                    "space left on device (the file was not replaced)\n")
    rc, err = out["loop"]
    warning = (f"sysverbs metrics: warning: {tmp_path}/sysverbs.prom: No space left on "
               "device (the file was not replaced)\n")
    assert rc == 0 and err.count(warning) >= 2 and err.replace(warning, "") == "", err
    assert out["same"] is True
    assert out["files"] == ["fill", "sysverbs", "sysverbs.prom"]

"""``HostRoot``: which machine is read, and its one defaulting rule (docs/architecture.md,
"Which machine is read: HostRoot"), and the readers that now follow it."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from sysverbs.ground.errors import UsageError, WrongTypeError
from sysverbs.ground.hostroot import HostRoot
from tests.conftest import require

ROOT = Path(__file__).resolve().parent.parent

# Prints the HostRoot of ``resolve(*sys.argv[1:])`` as JSON, in a fresh process (the
# $SYSFS_PATH read is cached per process, as libibverbs caches it); with SETRUID set,
# the real user id is changed first, the effective one stays (a setuid program).
PROBE = f"""
import json, os, sys
sys.path.insert(0, {str(ROOT)!r})
if os.environ.get("SETRUID"):
    os.setresuid(int(os.environ["SETRUID"]), 0, 0)
from sysverbs.ground.hostroot import HostRoot
first = HostRoot.resolve(*sys.argv[1:])
os.environb[b"SYSFS_PATH"] = b"/changed/later"
again = HostRoot.resolve(*sys.argv[1:])
print(json.dumps({{"sysfs": os.fsdecode(first.sysfs), "proc": first.proc_path,
                  "dev": first.dev_path, "config": first.config_path, "live": first.live,
                  "describe": first.describe(), "cached": first == again}}))
"""


def probe(sysfs_env: Optional[bytes], *args: str, setruid: Optional[int] = None
          ) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "SYSFS_PATH"}
    envb = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    if sysfs_env is not None:
        envb[b"SYSFS_PATH"] = sysfs_env
    if setruid is not None:
        envb[b"SETRUID"] = b"%d" % setruid
    out = subprocess.run([sys.executable, "-c", PROBE, *args], env=envb,
                         capture_output=True, check=True).stdout
    doc: dict[str, object] = json.loads(out)
    return doc


def test_the_live_host_by_default() -> None:
    assert probe(None) == {
        "sysfs": "/sys", "proc": "/proc", "dev": "/dev/infiniband",
        "config": "/etc/libibverbs.d", "live": True, "describe": "this host", "cached": True}


def test_sysfs_path_from_the_environment_as_libibverbs_reads_it() -> None:
    """$SYSFS_PATH: trailing '/' stripped, the first 256 bytes, read once per process;
    its tree's proc is the one beside it; dev and config dir stay libibverbs' own."""
    doc = probe(b"/tmp/t/sys///")
    assert doc == {"sysfs": "/tmp/t/sys", "proc": "/tmp/t/proc", "dev": "/dev/infiniband",
                   "config": "/etc/libibverbs.d", "live": False,
                   "describe": "the tree /tmp/t/sys", "cached": True}
    long = b"/" + b"a" * 300
    assert probe(long)["sysfs"] == os.fsdecode(long[:256])
    # an argument wins over the environment
    assert probe(b"/tmp/t/sys", "/tmp/u/sys")["sysfs"] == "/tmp/u/sys"
    assert probe(b"/sys/")["live"] is True


def test_a_setuid_caller_ignores_sysfs_path() -> None:
    """Real and effective user ids differ: $SYSFS_PATH is ignored, /sys is read (as
    libibverbs' ibv_get_sysfs_path does)."""
    require(None if os.geteuid() == 0 else "not root (cannot set the real uid alone)",
            "setresuid")
    doc = probe(b"/tmp/t/sys", setruid=65534)
    assert (doc["sysfs"], doc["proc"], doc["live"]) == ("/sys", "/proc", True)
    assert probe(b"/tmp/t/sys", setruid=0)["sysfs"] == "/tmp/t/sys"


def test_a_tree_reads_the_proc_beside_it_and_libibverbs_dev_and_config() -> None:
    host = HostRoot.resolve("/data/host1/sys/")
    assert host == HostRoot(b"/data/host1/sys", b"/dev/infiniband", b"/data/host1/proc",
                            b"/etc/libibverbs.d", False, False, None)
    assert (host.sysfs_path, host.proc_path, host.beside("dev")) == (
        "/data/host1/sys", "/data/host1/proc", "/data/host1/dev")
    assert host.describe() == "the tree /data/host1/sys"
    given = HostRoot.resolve(b"/r/sys", b"/r/dev/infiniband/", Path("/elsewhere/proc"),
                             "/r/etc/libibverbs.d")
    assert (given.dev, given.proc, given.config_dir) == (
        b"/r/dev/infiniband", b"/elsewhere/proc", b"/r/etc/libibverbs.d")


def test_live_is_sys_after_abspath(monkeypatch: pytest.MonkeyPatch) -> None:
    for spelling in ("/sys", "/sys/", "/sys/../sys", "/./sys", b"/sys"):
        host = HostRoot.resolve(spelling)
        assert host.live and host.proc == b"/proc" and host.describe() == "this host"
        assert host.beside("dev") == "/dev"
    monkeypatch.chdir("/")
    assert HostRoot.resolve("sys").live
    assert HostRoot.resolve("sys").proc == b"/proc"
    assert not HostRoot.resolve("/sysfs").live
    assert not HostRoot.resolve("/").live
    # "/" is kept as libibverbs keeps it ("" + "/class/..."); its proc is /proc
    assert (HostRoot.resolve("/").sysfs, HostRoot.resolve("/").proc) == (b"", b"/proc")


def test_a_fixture_is_recorded_and_named() -> None:
    host = HostRoot.resolve("/cache/dgx/sys", "/cache/dgx/dev/infiniband", recorded=True,
                            name="dgx-demo")
    assert host.recorded and not host.live and host.name == "dgx-demo"
    assert host.describe() == "fixture dgx-demo"
    assert host.proc == b"/cache/dgx/proc"


def test_immutable_comparable_picklable() -> None:
    host = HostRoot.resolve("/t/sys")
    with pytest.raises(AttributeError):
        host.sysfs = b"/sys"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        host.other = 1  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(host)) == host
    assert hash(host) == hash(HostRoot.resolve("/t/sys/"))
    assert host != HostRoot.resolve("/t/sys", recorded=True)


@pytest.mark.parametrize("kwargs, error, text", [
    ({"sysfs_path": 3}, WrongTypeError, "sysfs_path must be a path, not int"),
    ({"dev_dir": ["/dev"]}, WrongTypeError, "dev_dir must be a path, not list"),
    ({"proc_path": "/pr\0c"}, UsageError, "proc_path contains a NUL byte"),
    ({"config_dir": b"/etc\0"}, UsageError, "config_dir contains a NUL byte"),
    ({"sysfs_path": "/sys\udfff"}, UsageError, "sysfs_path is not a file name: '/sys\\udfff'"),
    ({"recorded": "yes"}, WrongTypeError, "recorded must be a bool, not str"),
    ({"name": b"dgx"}, WrongTypeError, "name must be a str, not bytes"),
])
def test_bad_arguments(kwargs: dict[str, object], error: type, text: str) -> None:
    with pytest.raises(error) as e:
        HostRoot.resolve(**kwargs)  # type: ignore[arg-type]
    assert str(e.value) == text


# ------------------------------------------------------- the readers follow the one rule

@pytest.mark.usefixtures("fast_fixture_tmp")
def test_read_host_of_a_tree_reads_the_proc_beside_it(tmp_path: Path) -> None:
    """A materialized recording, ``R/sys`` with ``R/proc`` beside it, and no
    ``proc_path``: the GPUs' UUIDs come from ``R/proc`` (the NVIDIA driver's
    information files recorded with the host), as ``sysverbs topo --sysfs-path R/sys``
    reads them; before the one rule, read_host fell back to this machine's /proc."""
    from sysverbs import testing
    from sysverbs.placement import read_host

    fake = testing.materialize(testing.fixture_path("gpu-pcie-2socket"), tmp_path)
    info = sorted((fake.root / "proc/driver/nvidia/gpus").glob("*/information"))
    wanted = [next(line.split(":", 1)[1].strip() for line in p.read_text().splitlines()
                   if line.startswith("GPU UUID")) for p in info]
    assert len(wanted) == 4 and all(u.startswith("GPU-") for u in wanted)
    host = read_host(fake.sysfs)
    assert host.proc_path == str(fake.root / "proc")
    assert sorted(g.uuid or "" for g in host.gpus) == sorted(wanted)
    assert host.dev_dir == "/dev/infiniband"  # libibverbs' own, whatever the tree
    # an explicit proc_path still wins
    assert all(g.uuid is None for g in read_host(fake.sysfs, tmp_path / "none").gpus)
    # and $SYSFS_PATH's tree is such a tree: read_host() reads its proc too
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "from sysverbs.placement import read_host\n"
            "h = read_host(); print(h.proc_path); print(sorted(g.uuid for g in h.gpus))")
    env = {**os.environ, "SYSFS_PATH": str(fake.sysfs)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out == [str(fake.root / "proc"), str(sorted(wanted))]


# ------------------------------------------------ --fixture: one HostRoot, recorded, named

@pytest.mark.usefixtures("fast_fixture_tmp")
def test_fixture_builds_one_recorded_named_host_root() -> None:
    """``--fixture`` takes the fixture tree's HostRoot (testing/cache.py builds it, once
    per tree): recorded, named, its paths those of the tree, the listing options its
    views; another command line gets a live or a tree's, by the same rule."""
    from sysverbs.cli import _parser
    from sysverbs.cli.contract import listing_options, where
    from sysverbs.testing.cache import fixture_tree

    tree = fixture_tree("dgx-demo")
    assert tree.host_root == HostRoot(
        os.fsencode(tree.root) + b"/sys", os.fsencode(tree.root) + b"/dev/infiniband",
        os.fsencode(tree.root) + b"/proc", b"/etc/libibverbs.d", False, True, "dgx-demo")
    assert (tree.sysfs, tree.dev, tree.proc) == (
        tree.root + "/sys", tree.root + "/dev/infiniband", tree.root + "/proc")
    args = _parser().parse_args(["topo", "--fixture", "dgx-demo"])
    opts = listing_options(args)
    assert args.host_root == tree.host_root
    assert (opts["sysfs_path"], opts["dev_dir"]) == (tree.sysfs, tree.dev)
    assert where(args, opts["sysfs_path"]) == "fixture dgx-demo"
    args = _parser().parse_args(["topo", "--sysfs-path", "/t/sys/", "--proc-path", "/p"])
    listing_options(args)
    assert args.host_root == HostRoot(b"/t/sys", b"/dev/infiniband", b"/p",
                                      b"/etc/libibverbs.d", False, False, None)
    assert where(args, "/t/sys/") == "the tree /t/sys"
    args = _parser().parse_args(["topo", "--sysfs-path", "/sys/"])
    listing_options(args)
    assert args.host_root.live and where(args, "/sys/") == "this host"


@pytest.mark.usefixtures("fast_fixture_tmp")
def test_messages_name_the_host_root(capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    """The commands' messages name the machine by HostRoot.describe()."""
    from sysverbs import cli

    assert cli.main(["run", "--fixture", "dgx-demo", "--", "true"]) == 2
    assert ("sysverbs run: error: fixture dgx-demo is not this host"
            in capsys.readouterr().err)
    (tmp_path / "sys/devices").mkdir(parents=True)
    assert cli.main(["topo", "--sysfs-path", f"{tmp_path}/sys/"]) == 1
    assert (f"no GPU and no RDMA device on the tree {tmp_path}/sys: nothing to show"
            in capsys.readouterr().err)


@pytest.mark.usefixtures("fast_fixture_tmp")
def test_read_host_at_reads_what_the_host_root_names(tmp_path: Path) -> None:
    """read_host_at(HostRoot) is read_host() for callers holding one (topo, run,
    plan): the same host, its recorded flag kept; nothing but a HostRoot."""
    from sysverbs import testing
    from sysverbs.placement import host_json, read_host, read_host_at

    fake = testing.materialize(testing.fixture_path("gpu-pcie-2socket"), tmp_path)
    root = HostRoot.resolve(fake.sysfs, fake.dev, recorded=True, name="gpu-pcie-2socket")
    host = read_host_at(root)
    again = read_host(fake.sysfs, fake.root / "proc", fake.dev, recorded=True)
    assert host_json(host) == host_json(again)
    assert (host.sysfs_path, host.proc_path, host.dev_dir) == (
        str(fake.sysfs), str(fake.root / "proc"), str(fake.dev))
    assert host.recorded and len(host.gpus) == 4 and all(g.uuid for g in host.gpus)
    with pytest.raises(WrongTypeError, match="root must be a HostRoot, not str"):
        read_host_at(str(fake.sysfs))  # type: ignore[arg-type]

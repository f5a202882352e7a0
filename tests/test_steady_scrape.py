"""Issue 45's cost: the exporter's steady-state scrape (sysverbs/fleet/steady.py) and the
read-once scope's inputs it rests on (sysverbs/ground/inputs.py).

The steady scrape gives the last snapshot again only when every input of it answers as
before.  Two kinds of test hold that: the guard counts every file system call (and
socket, rlimit, user database query) the process makes while a snapshot is collected
and fails on any that the scope did not record, so a future reader that bypasses the
recorder fails here; the behaviour tests change the materialized host (a port going
DOWN, a device removed and added again, a GID added, a PCIe link slowed, an rlimit and
the environment changed) and require the very next scrape to be a new collection equal to
a cold ``collect_facts`` of the same tree.
"""

from __future__ import annotations

import builtins
import os
import resource
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional
from unittest import mock

import pytest

from sysverbs.devices import attributes
from sysverbs.fleet.facts import HostFacts, collect_facts
from sysverbs.fleet.steady import Steady
from sysverbs.ground import inputs, sysfs_read
from sysverbs.ground.hostroot import HostRoot
from sysverbs.ground.sysfs_read import ReadOnce, derived, listdir, read_sysfs_file
from sysverbs.model import HostModel
from sysverbs.testing import materialize

FIXTURE = "gpu-dgx-b200"


def _same(a: HostFacts, b: HostFacts) -> bool:
    """Equal but for the per-scrape values (the parts' durations)."""
    def norm(f: HostFacts) -> HostFacts:
        return replace(f, collectors=tuple(replace(c, duration_seconds=0.0)
                                           for c in f.collectors))
    return norm(a) == norm(b)


class _Host:
    """A materialized fixture read as a tree of this machine (not a recording: the
    rlimit and the rdma_cm probe are read), its snapshots steady and cold."""

    def __init__(self, tree: Path, environ: dict[str, str], **options: str) -> None:
        self.options = {"providers": "builtin", "source": "sysfs", **options}
        self.sysfs = tree / "sys"
        self.dev = tree / "dev" / "infiniband"
        #: what puts the module's tree back as it was (run after each test)
        self.undo: list[Callable[[], object]] = []
        self.environ = environ
        self.root = HostRoot.resolve(str(self.sysfs), str(self.dev))
        self.steady = Steady(self.collect, lambda: HostModel(self.root), environ)

    def collect(self, model: Optional[HostModel] = None) -> HostFacts:
        model = model or HostModel(self.root)
        with model.reading():
            return collect_facts(sysfs_path=str(self.sysfs), dev_dir=str(self.dev),
                                 probe_open=False, environ=self.environ, model=model,
                                 **self.options)  # type: ignore[arg-type]

    def port(self, device: str, name: str) -> Path:
        return (self.sysfs / "class" / "infiniband" / device).resolve() / "ports" / "1" / name

    def scrape_after(self, change: Callable[[], None]) -> tuple[HostFacts, HostFacts]:
        """(the scrape before ``change``, the one after), after checking that an
        unchanged host is answered from the last snapshot; the one after is a new
        collection equal to a cold one."""
        self.steady()
        before = self.steady()
        assert self.steady.reused >= 1, self.steady.why
        collected = self.steady.collected
        change()
        after = self.steady()
        assert self.steady.collected == collected + 1, "the change was not seen"
        assert _same(after, self.collect()), "the new collection is not a cold one's"
        assert not _same(before, after), "the change changed nothing: a test of nothing"
        return before, after


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    fake = materialize(FIXTURE, tmp_path_factory.mktemp("fixture") / "host")
    assert Path(fake.sysfs) == Path(fake.root) / "sys"
    assert Path(fake.dev) == Path(fake.root) / "dev" / "infiniband"
    return Path(fake.root)


@pytest.fixture
def host(tree: Path) -> Iterator[_Host]:
    made = _Host(tree, {})
    yield made
    for undo in reversed(made.undo):
        undo()


def _write(host: _Host, path: Path, text: str) -> None:
    """Write ``text`` to ``path``, and put back what it held after the test."""
    old = path.read_bytes() if path.exists() else None
    host.undo.append(lambda: path.write_bytes(old) if old is not None else path.unlink())
    path.write_text(text)


def test_unchanged_host_is_the_last_snapshot(host: _Host) -> None:
    first = host.steady()
    again = host.steady()
    assert (host.steady.collected, host.steady.reused) == (1, 1)
    assert _same(again, first) and _same(again, host.collect())
    assert [c.duration_seconds for c in again.collectors][1:] == [0.0, 0.0]
    assert again.device("mlx5_0") is not None and len(again.gpus) == 8


def test_port_down(host: _Host) -> None:
    _, after = host.scrape_after(lambda: _write(host, host.port("mlx5_0", "state"), "1: DOWN\n"))
    port = after.device("mlx5_0").ports[0]  # type: ignore[union-attr]
    assert port.state == "DOWN"


def test_device_removed_then_added(host: _Host) -> None:
    link = host.sysfs / "class" / "infiniband" / "mlx5_3"
    target = os.readlink(link)
    host.undo.append(lambda: link.exists() or link.symlink_to(target))
    _, after = host.scrape_after(link.unlink)
    assert after.device("mlx5_3") is None or after.device("mlx5_3").ports == ()  # type: ignore[union-attr]
    _, back = host.scrape_after(lambda: link.symlink_to(target))
    assert back.device("mlx5_3") is not None and back.device("mlx5_3").ports  # type: ignore[union-attr]


def test_gid_added(host: _Host) -> None:
    def add() -> None:
        _write(host, host.port("irdma0", "gids/2"), "fe80:0000:0000:0000:6efe:54ff:fe9c:5c4a\n")
        _write(host, host.port("irdma0", "gid_attrs/types/2"), "RoCE v2\n")

    before, after = host.scrape_after(add)
    assert before.device("irdma0").ports[0].gid_count("roce_v2") == 1  # type: ignore[union-attr]
    assert after.device("irdma0").ports[0].gid_count("roce_v2") == 2  # type: ignore[union-attr]


def test_pcie_link_slowed(host: _Host) -> None:
    nic = (host.sysfs / "class" / "infiniband" / "mlx5_0" / "device").resolve()
    for end in (nic, nic.parent):
        for name, text in (("current_link_speed", "32.0 GT/s PCIe"), ("max_link_speed",
                           "32.0 GT/s PCIe"), ("current_link_width", "16"),
                           ("max_link_width", "16")):
            _write(host, end / name, text + "\n")
    before, after = host.scrape_after(
        lambda: (nic / "current_link_speed").write_text("16.0 GT/s PCIe\n"))
    assert before.pcie_links == ()
    assert [(d.device, d.what) for d in after.pcie_links] == [(nic.name, "speed")]


def test_rlimit_changed(host: _Host) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    lower = 64 * 1024 if hard == resource.RLIM_INFINITY or hard > 64 * 1024 else hard // 2
    try:
        _, after = host.scrape_after(
            lambda: resource.setrlimit(resource.RLIMIT_MEMLOCK, (lower, hard)))
        assert after.memlock_limit_bytes == lower
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, hard))


def test_environment_changed(host: _Host) -> None:
    before, after = host.scrape_after(lambda: host.environ.update(NCCL_IB_HCA="=mlx5_1:1"))
    assert after.nccl_devices == (("mlx5_1", 1),) and len(before.nccl_devices) > 1


def test_the_exporter_answers_an_unchanged_host_again_and_sees_a_change(host: _Host,
                                                                       tmp_path: Path) -> None:
    """The real ``sysverbs metrics --textfile DIR --interval`` as the DaemonSet reads
    (``--source sysfs --no-open``): its rewrites of an unchanged host are the last
    snapshot again (topology's duration 0), and a GID added shows on a later one."""
    import signal
    import subprocess
    import time

    from tests import prom

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    for name in ("SYSFS_PATH", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_CONF_FILE"):
        env.pop(name, None)
    page = tmp_path / "sysverbs.prom"
    topology = ("sysverbs_collector_duration_seconds", frozenset({("collector", "topology")}))
    gids = ("sysverbs_rdma_port_gids",
            frozenset({("device", "irdma0"), ("port", "1"), ("gid_type", "roce_v2")}))

    def until(want: Callable[[dict[Any, float]], bool]) -> dict[Any, float]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                found = {(n, labels): v for n, labels, v in prom.samples(page.read_text())}
            except (OSError, ValueError):  # not written yet
                found = {}
            if found and want(found):
                return found
            time.sleep(0.02)
        raise AssertionError(f"not seen in 60 s: {page.read_text()[:200]}")

    p = subprocess.Popen([sys.executable, "-m", "sysverbs", "metrics", "--sysfs-path",
                          str(host.sysfs), "--dev-dir", str(host.dev), "--source", "sysfs",
                          "--no-open", "--textfile", str(tmp_path), "--interval", "0.1"],
                         stderr=subprocess.PIPE, env=env)
    try:
        until(lambda s: s[topology] == 0.0 and s[gids] == 1.0)  # the last snapshot again
        _write(host, host.port("irdma0", "gids/2"), "fe80:0000:0000:0000:6efe:54ff:fe9c:5c4a\n")
        _write(host, host.port("irdma0", "gid_attrs/types/2"), "RoCE v2\n")
        until(lambda s: s[gids] == 2.0)
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    assert p.returncode == 0


@pytest.mark.parametrize("detail", [False, True])
def test_pages_of_an_unchanged_host_are_the_encoders_own(host: _Host, detail: bool) -> None:
    """The exporter's page of a snapshot given again (metrics.Pages: the last page up to
    the durations family, that family written again) is byte for byte what
    prometheus_client writes of it, in both formats a scrape can ask for, before and
    after the host changes; and it is made without the families built again."""
    from sysverbs.fleet import metrics
    from tests.test_fleet_values import pages_built

    pages = metrics.Pages(detail)
    assert pages_built(pages, host.steady(), detail) == 2  # the first: each format once
    # unchanged: the durations differ (asked again), the rest is the last page
    assert pages_built(pages, host.steady(), detail) == 0
    assert host.steady.reused == 1
    _write(host, host.port("mlx5_0", "state"), "1: DOWN\n")
    assert pages_built(pages, host.steady(), detail) == 2
    assert host.steady.collected == 2
    assert pages_built(pages, host.steady(), detail) == 0


# ------------------------------------------------------------------- the guard

_RECORDERS = {inputs._ask.__code__, sysfs_read._read_raw.__code__,  # noqa: SLF001
              ReadOnce._readlink.__code__, ReadOnce.listdir.__code__, ReadOnce.read.__code__}
#: process inputs Steady compares at every scrape (process_inputs, check_sysfs_root)
_PROCESS = {sysfs_read.check_sysfs_root.__code__}
_PROCESS_FILES = ("/proc/self/status", "/proc/self/cgroup")


def _recorded() -> bool:
    frame: Any = sys._getframe(2)
    while frame is not None:
        if frame.f_code in _RECORDERS or frame.f_code in _PROCESS:
            return True
        frame = frame.f_back
    return False


def test_what_is_not_recorded_is_never_reused(tree: Path) -> None:
    """RDMA netlink (``source="auto"``: its answers, or whether it answers) is no
    recorded input: every scrape is a new collection."""
    host = _Host(tree, {}, source="auto")
    host.steady()
    host.steady()
    assert (host.steady.collected, host.steady.reused) == (2, 0)
    assert "RDMA netlink" in host.steady.why


@pytest.mark.parametrize("providers", ["builtin", "installed"])
def test_every_input_of_a_snapshot_is_recorded(tree: Path, providers: str) -> None:
    """Every os.open/listdir/scandir/readlink/stat/lstat/access (os.path's functions
    call them), open() and io.open() (pathlib's), socket, getrlimit and getpwuid of a
    collection is made by the scope's recorder (or is one of the process inputs Steady
    compares itself); the scope is not opaque.  With the installed providers, their
    configuration and libraries are read too."""
    import _socket
    import io
    import pwd
    import socket

    host = _Host(tree, {}, providers=providers)

    bypass: list[str] = []

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kw: Any) -> Any:
            what = args[0] if args else None
            process = name == "open()" and str(what) in _PROCESS_FILES or (
                name == "getrlimit" and what == resource.RLIMIT_MEMLOCK)
            if not process and not _recorded():
                bypass.append(f"{name}({what!r})")
            return real(*args, **kw)
        return call

    model = HostModel(host.root)
    patches = [mock.patch.object(os, n, spy(n, getattr(os, n)))
               for n in ("open", "listdir", "scandir", "readlink", "stat", "lstat", "access")]
    patches += [mock.patch.object(builtins, "open", spy("open()", builtins.open)),
                mock.patch.object(io, "open", spy("open()", io.open)),  # pathlib's
                mock.patch.object(_socket, "socket", spy("socket", _socket.socket)),
                mock.patch.object(socket, "socket", spy("socket", socket.socket)),
                mock.patch.object(resource, "getrlimit", spy("getrlimit", resource.getrlimit)),
                mock.patch.object(pwd, "getpwuid", spy("getpwuid", pwd.getpwuid))]
    host.environ["HOME"] = str(host.sysfs.parent)  # NCCL's ~/.nccl.conf: a read too
    for p in patches:
        p.start()
    try:
        facts = host.collect(model)
    finally:
        for p in reversed(patches):
            p.stop()
    assert [c.success for c in facts.collectors] == [True, True, True]
    assert bypass == [], f"{len(bypass)} calls past the recorder, first: {bypass[:5]}"
    assert model.reads.opaque == ""
    kinds = {kind for kind, _ in model.reads.inputs}
    assert ("installed providers" in kinds) == (providers == "installed")
    assert len(model.reads.files) > 500 and model.reads.inputs and model.reads.listings


# ------------------------------------------------------------------ the scope


def test_scope_lists_once_and_asks_each_input_once(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("1\n")
    scope = ReadOnce()
    with scope:
        assert listdir(tmp_path) == [b"a"]
        assert inputs.exists(tmp_path / "b") is False
        (tmp_path / "b").write_text("2\n")
        assert listdir(tmp_path) == [b"a"] and inputs.exists(tmp_path / "b") is False
        with pytest.raises(FileNotFoundError):
            listdir(tmp_path / "none")
        assert derived("n", tmp_path, lambda: [1]) is derived("n", tmp_path, lambda: [2])
        assert read_sysfs_file(str(tmp_path / "a"), 8) == b"1"
    assert sorted(listdir(tmp_path)) == [b"a", b"b"]  # outside: the plain call
    assert inputs.changed(scope) is not None


@pytest.mark.parametrize("change", ["file", "listing", "link", "stat", "none"])
def test_changed_finds_each_kind(tmp_path: Path, change: str) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x\n")
    (tmp_path / "l").symlink_to("d")
    scope = ReadOnce()
    with scope:
        read_sysfs_file(str(tmp_path / "l" / "f"), 64)
        listdir(tmp_path / "d")
        inputs.stat(tmp_path / "d" / "f")
    assert inputs.changed(scope) is None
    if change == "file":
        (tmp_path / "d" / "f").write_text("y\n")
    elif change == "listing":
        (tmp_path / "d" / "g").write_text("")
    elif change == "link":
        (tmp_path / "e").mkdir()
        (tmp_path / "e" / "f").write_text("x\n")
        (tmp_path / "l").unlink()
        (tmp_path / "l").symlink_to("e")
    elif change == "stat":
        os.chmod(tmp_path / "d" / "f", 0o600)
    assert (inputs.changed(scope) is None) == (change == "none")


def test_device_status_built_once_per_device(host: _Host) -> None:
    """The diagnosis, the device's location and the facts ask each device's status
    (built once per snapshot), never its whole attributes: a snapshot depends on no
    ``fw_ver``, ``board_id``, ``lid``, ``cap_mask``, P_Key...; NCCL's choice reads
    ``sys_image_guid``, placement ``rate``."""
    built: list[bytes] = []
    real = attributes._device_status  # noqa: SLF001
    whole: list[bytes] = []

    def counting(path: bytes, name: bytes) -> Any:
        built.append(name)
        return real(path, name)

    with mock.patch.object(attributes, "_device_status", counting), \
            mock.patch.object(attributes, "_device_attributes",
                              lambda path, name: whole.append(name)):
        facts = host.collect()
    assert len(facts.devices) == 18 and [c.success for c in facts.collectors] == [True] * 3
    assert len(built) == len(set(built)) == 18
    assert whole == []
    model = HostModel(host.root)
    host.collect(model)
    files = {os.path.basename(k) for k in model.reads.files}
    assert {b"state", b"link_layer", b"node_guid", b"sys_image_guid", b"rate",
            b"phys_state"} <= files
    assert not files & {b"fw_ver", b"board_id", b"hca_type", b"node_desc", b"hw_rev", b"lid",
                        b"sm_lid", b"sm_sl", b"lid_mask_count", b"cap_mask"}


# ------------------------------------------------------------- the shortcuts


def _scope_of(tmp_path: Path) -> ReadOnce:
    """A scope that listed ``d`` (holding ``f`` and ``x``, a link to nothing) and asked
    for its missing name ``m`` five ways, and for the dangling ``x``."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x\n")
    (tmp_path / "d" / "x").symlink_to("nowhere")
    scope = ReadOnce()
    with scope:
        listdir(tmp_path / "d")
        missing = str(tmp_path / "d" / "m")
        assert read_sysfs_file(missing, 64) is None
        assert inputs.exists(missing) is False and inputs.lexists(missing) is False
        with pytest.raises(FileNotFoundError):
            inputs.readlink(missing)
        assert inputs.probe_open(missing, os.O_RDONLY) == 2  # ENOENT
        assert read_sysfs_file(str(tmp_path / "d" / "x"), 64) is None
    return scope


def test_a_name_absent_from_its_recorded_listing_is_not_asked_again(tmp_path: Path) -> None:
    """The missing ``d/m`` is implied by ``d``'s listing: no call of its own (the
    recheck asks 5 inputs fewer than the scope recorded); the dangling ``x`` is
    listed, so its ENOENT is asked again."""
    scope = _scope_of(tmp_path)
    recheck = inputs.Recheck(scope)
    missing = [key for key, _ in recheck.missing]
    assert missing == [os.fsencode(tmp_path / "d" / "x")]
    recorded = (len(scope.files) + len(scope.links) + len(scope.listings)
                + len(scope.inputs))
    assert recheck.count == recorded - 5 and recheck.changed() is None


@pytest.mark.parametrize("change", ["appears", "dangling link retargeted", "directory "
                                    "replaced by a link", "none"])
def test_the_shortcuts_see_each_change(tmp_path: Path, change: str) -> None:
    scope = _scope_of(tmp_path)
    d = tmp_path / "d"
    if change == "appears":  # the listing changes
        (d / "m").write_text("new\n")
    elif change == "dangling link retargeted":  # the listing does not
        (d / "x").unlink()
        (d / "x").symlink_to("f")
    elif change == "directory replaced by a link":  # to a directory of the same names
        (tmp_path / "e").mkdir()
        for name in os.listdir(d):
            os.rename(d / name, tmp_path / "e" / name)
        d.rmdir()
        d.symlink_to("e")  # every path answers as before but the link itself
    why = inputs.Recheck(scope).changed()
    assert (why is None) == (change == "none"), why
    if change == "appears":
        assert why == f"directory {d}"
    if change == "directory replaced by a link":
        assert why == f"link {d}"


def _link_files(host: _Host, where: Path, current: str) -> None:
    for name, text in (("current_link_speed", current), ("max_link_speed", "32.0 GT/s PCIe"),
                       ("current_link_width", "16"), ("max_link_width", "16")):
        _write(host, where / name, text + "\n")


def test_files_created_in_a_listed_directory_are_a_new_collection(host: _Host) -> None:
    """mlx5_0's PCI function's directory is listed, and its PCIe link files are missing
    in the fixture (no call of their own at a steady scrape): created, showing a slowed
    link, the next scrape is a new collection that says so."""
    nic = (host.sysfs / "class" / "infiniband" / "mlx5_0" / "device").resolve()
    _link_files(host, nic.parent, "32.0 GT/s PCIe")  # the bridge's: not a listed directory
    host.steady()
    recheck = host.steady.recheck
    assert recheck is not None and not (nic / "current_link_speed").exists()
    key = os.fsencode(nic / "current_link_speed")
    assert key not in [k for k, _ in recheck.missing] + [k for k, _, _ in recheck.files]
    before, after = host.scrape_after(lambda: _link_files(host, nic, "16.0 GT/s PCIe"))
    assert before.pcie_links == ()
    assert [(d.device, d.what) for d in after.pcie_links] == [(nic.name, "speed")]

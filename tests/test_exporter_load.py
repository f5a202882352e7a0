"""``sysverbs metrics --listen`` cannot be starved (issue 42): the real process, on the
gpu-dgx-b200 fixture and 127.0.0.1 only, runs in a memory cgroup limited as the DaemonSet
limits its container (deploy/sysverbs-daemonset.yaml), while this test holds 2,000 idle
and half-sent connections to it, renewed for a few seconds; urllib's scrapes and a real
Prometheus' (tests/prom.py) keep being answered with the whole page, which promtool
accepts; concurrent scrapes get one snapshot; HEAD is GET without its body; the
exporter is never OOM-killed and its peak memory (printed) stays under the limit.

The cgroup is made below this process's own (cgroup v1's memory controller, or v2 where
the memory controller can be given to a child); when it cannot be made the test skips,
and fails under CI=true.
"""

from __future__ import annotations

import http.client
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest
import yaml

from sysverbs.testing.cache import fixture_tree
from tests import prom
from tests.conftest import require

pytestmark = pytest.mark.oracle

ROOT = Path(__file__).resolve().parents[1]
DAEMONSET = ROOT / "deploy" / "sysverbs-daemonset.yaml"
FIXTURE = "gpu-dgx-b200"
#: Connections held against the exporter at once, and how long they are renewed.
HELD = 2000
RENEWED_FOR = 6.0
#: Per scrape, not per host (and this process's limit): left out of the comparisons.
VARYING = ("sysverbs_collector_duration_seconds", "sysverbs_memlock_limit_bytes")
#: Variables the exporter's page depends on, unset for it.
UNSET = ("SYSFS_PATH", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_CONF_FILE")
_UNITS = {"": 1, "k": 1000, "M": 1000 ** 2, "G": 1000 ** 3,
          "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}


def quantity(text: str) -> int:
    """A Kubernetes memory quantity (``128Mi``, ``64M``, ``1Gi``, ``1000``) in bytes."""
    m = re.fullmatch(r"(\d+)([kMG]i?|Ki)?", str(text))
    assert m, f"not a memory quantity this test reads: {text!r}"
    return int(m.group(1)) * _UNITS[m.group(2) or ""]


def manifest_limit() -> int:
    """The memory limit of the DaemonSet's ``metrics`` container, in bytes."""
    for doc in yaml.safe_load_all(DAEMONSET.read_text()):
        if not doc or doc.get("kind") != "DaemonSet":
            continue
        for c in doc["spec"]["template"]["spec"]["containers"]:
            if "metrics" in c.get("command", [])[:2]:
                return quantity(c["resources"]["limits"]["memory"])
    raise AssertionError(f"{DAEMONSET}: no container runs sysverbs metrics")


class MemoryCgroup:
    """A memory cgroup below this process's own, with a limit: ``procs`` to move a
    process in, :meth:`peak` and :meth:`oom_kills` to read it afterwards."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.path, self.v2 = self._make(f"sysverbs-exporter-{os.getpid()}")
        try:
            if self.v2:
                (self.path / "memory.max").write_text(str(limit))
                if (self.path / "memory.swap.max").exists():  # no swap: nothing to limit
                    (self.path / "memory.swap.max").write_text("0")
            else:
                (self.path / "memory.limit_in_bytes").write_text(str(limit))
        except OSError:
            self.path.rmdir()
            raise

    @staticmethod
    def _make(name: str) -> tuple[Path, bool]:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        v1 = [line.split(":", 2)[2] for line in own if "memory" in line.split(":")[1].split(",")]
        if v1 and Path("/sys/fs/cgroup/memory").is_dir():
            path = Path("/sys/fs/cgroup/memory") / v1[0].lstrip("/") / name
            path.mkdir()
            return path, False
        v2 = [line.split(":", 2)[2] for line in own if line.startswith("0::")]
        if not v2 or not Path("/sys/fs/cgroup/cgroup.controllers").exists():
            raise OSError("no cgroup v1 memory controller and no cgroup v2 hierarchy")
        parent = Path("/sys/fs/cgroup") / v2[0].lstrip("/")
        if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            (parent / "cgroup.subtree_control").write_text("+memory")  # EBUSY: has procs
        path = parent / name
        path.mkdir()
        return path, True

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def peak(self) -> Optional[int]:
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):  # memory.peak: Linux 5.19 and later
            return None

    def oom_kills(self) -> int:
        name = "memory.events" if self.v2 else "memory.oom_control"
        for line in (self.path / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


@pytest.fixture(scope="module")
def cgroup() -> Iterator[MemoryCgroup]:
    try:
        group = MemoryCgroup(manifest_limit())
    except OSError as e:
        require(f"{type(e).__name__}: {e}", "a memory cgroup for the exporter")
        raise
    try:
        yield group
    finally:
        group.remove()


@pytest.fixture(scope="module")
def nofile() -> Iterator[None]:
    """Room for the held connections in this process (and in the exporter, which
    inherits it: its connection cap is then its maximum)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = HELD + 1000
    if hard != resource.RLIM_INFINITY and hard < want:
        require(f"RLIMIT_NOFILE's hard limit is {hard}", f"{want} file descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class Attack:
    """``held`` connections to ``port``, one in two sending half a request, held open
    and (``renew``) renewed: the oldest tenth closed and as many opened every 0.2 s,
    until the ``with`` block ends."""

    def __init__(self, port: int, held: int = HELD, renew: bool = True) -> None:
        self.port = port
        self.held = held
        self.renew = renew
        self.socks: list[socket.socket] = []
        self.opened = 0
        self.full = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: Optional[BaseException] = None

    def _open(self, n: int) -> None:
        """``n`` connections.  Renewed ones are not waited for (one a server does not
        accept stays in its backlog, or its SYN is retried: it is held all the same);
        the others one after another, until one is not accepted within a second (the
        server no longer takes any: it is starved)."""
        new = []
        for _ in range(n):
            s = socket.socket()
            if self.renew:
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", self.port))
            else:
                s.settimeout(1.0)
                try:
                    s.connect(("127.0.0.1", self.port))
                except OSError:
                    s.close()
                    break
                s.setblocking(False)
            new.append(s)
        for s in new[1::2]:
            try:
                s.send(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n")
            except OSError:
                pass  # not connected yet (or closed already): an idle one then
        self.socks += new
        self.opened += len(new)

    def _run(self) -> None:
        try:
            self._open(self.held)
            self.full.set()
            renew = max(1, self.held // 10)
            while not self._stop.wait(0.2) and self.renew:
                for s in self.socks[:renew]:
                    s.close()
                del self.socks[:renew]
                self._open(renew)
        except BaseException as e:  # noqa: BLE001 (reported by stop())
            self.error = e
            self.full.set()

    def __enter__(self) -> Attack:
        self._thread.start()
        assert self.full.wait(60), "the connections could not be opened within 60 s"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        for s in self.socks:
            s.close()
        assert self.error is None, f"opening the connections failed: {self.error!r}"


def samples(page: bytes) -> set[prom.Sample]:
    return {s for s in prom.samples(page.decode()) if s[0] not in VARYING}


def durations(page: bytes) -> set[prom.Sample]:
    return {s for s in prom.samples(page.decode()) if s[0] == VARYING[0]}


def scrape(url: str, out: list[bytes]) -> None:
    status, _, body = prom.http_get(url, timeout=10)
    assert status == 200
    out.append(body)


def exporter_env() -> dict[str, str]:
    """This environment for the exporter, without what would change its page."""
    kept = {k: v for k, v in os.environ.items() if k not in UNSET}
    return {**kept, "PYTHONPATH": str(ROOT), "LC_ALL": "C.UTF-8"}


def test_idle_connections_do_not_starve_the_exporter(
        cgroup: MemoryCgroup, nofile: None, capsys: pytest.CaptureFixture[str]) -> None:
    for name in (prom.PROMETHEUS, prom.PROMTOOL):
        require(prom.unavailable(name), f"{name} (Debian's prometheus package)")
    fixture_tree(FIXTURE)  # built outside the cgroup: its files are not the exporter's
    port = prom.free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    command = (f'echo $$ > "{cgroup.procs}" && exec "$0" -m sysverbs metrics --listen '
               f"127.0.0.1:{port} --fixture {FIXTURE}")
    attack: Optional[Attack] = None
    with tempfile.TemporaryFile() as err:
        exporter = subprocess.Popen(["sh", "-c", command, sys.executable], env=exporter_env(),
                                    stdout=subprocess.DEVNULL, stderr=err)
        try:
            with prom.Prometheus([f"127.0.0.1:{port}"], jobs=["sysverbs"]) as p:
                first = prom.wait_http(url, proc=exporter)
                want = samples(first)
                # the whole page: every series `sysverbs metrics` prints for the fixture
                printed = subprocess.run([sys.executable, "-m", "sysverbs", "metrics",
                                          "--fixture", FIXTURE], env=exporter_env(),
                                         capture_output=True, timeout=120)
                assert len(want) == len(samples(printed.stdout)) > 100
                p.wait_for('up{job="sysverbs"} == 1', bool, timeout=60)
                scrapes = 'sum_over_time(up{job="sysverbs"}[10m])'
                before = float(p.query(scrapes)[0]["value"][1])
                attack = Attack(port)
                with attack:
                    # urllib: one scrape after another, each the whole page
                    pages = []
                    for _ in range(10):
                        scrape(url, pages)
                    assert all(samples(page) == want for page in pages)
                    rc, out = prom.promtool_check_metrics(pages[-1])
                    assert (rc, out) == (0, "")
                    # 20 at once: one snapshot for all (the same durations)
                    together: list[bytes] = []
                    threads = [threading.Thread(target=scrape, args=(url, together))
                               for _ in range(20)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join(30)
                    assert len(together) == 20
                    assert len({frozenset(durations(page)) for page in together}) == 1
                    assert all(samples(page) == want for page in together)
                    # HEAD: GET's status and length, no body.  The GET right after
                    # it is of the same snapshot unless --max-age ran out between
                    # the two (a page's durations change its length): a few tries.
                    lengths = []
                    for _ in range(5):
                        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                        conn.request("HEAD", "/metrics")
                        resp = conn.getresponse()
                        assert (resp.status, resp.read()) == (200, b"")
                        conn.close()
                        got: list[bytes] = []
                        scrape(url, got)
                        lengths.append((resp.getheader("Content-Length"), str(len(got[0]))))
                        if lengths[-1][0] == lengths[-1][1]:
                            break
                    assert lengths[-1][0] == lengths[-1][1], lengths
                    # the real Prometheus keeps scraping it successfully
                    p.wait_for(scrapes, lambda r: float(r[0]["value"][1]) >= before + 2,
                               timeout=30)
                    assert attack.opened >= HELD
                assert p.targets_health() == {"sysverbs": "up"}
            assert exporter.poll() is None, "the exporter died under the connections"
        finally:
            rc = prom.stop(exporter)
            peak = cgroup.peak()
            with capsys.disabled():
                print(f"\n{attack.opened if attack else 0} connections (half of them "
                      f"half-sent); the exporter's peak memory: {peak} bytes of the "
                      f"manifest's {cgroup.limit} ({cgroup.path})")
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    assert cgroup.oom_kills() == 0, f"the exporter was OOM-killed: {stderr}"
    assert rc == 0, stderr
    assert "Traceback" not in stderr and "Exception" not in stderr, stderr
    if peak is not None:
        assert peak < cgroup.limit


def test_64_file_descriptors_are_enough() -> None:
    """The issue's case: an exporter with RLIMIT_NOFILE 64, where 59 stalled sockets made
    every scrape time out, holds at most 32 connections (the rest of its descriptors stay
    for the collection's reads) and answers every scrape while 200 are held."""
    require(prom.unavailable(prom.PROMTOOL), "promtool (Debian's prometheus package)")
    port = prom.free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    command = (f'ulimit -n 64 && exec "$0" -m sysverbs metrics --listen 127.0.0.1:{port} '
               f"--fixture {FIXTURE} --max-age 0")
    with tempfile.TemporaryFile() as err:
        exporter = subprocess.Popen(["sh", "-c", command, sys.executable], env=exporter_env(),
                                    stdout=subprocess.DEVNULL, stderr=err)
        try:
            want = samples(prom.wait_http(url, proc=exporter))
            with Attack(port, held=200, renew=False):
                pages: list[bytes] = []
                for _ in range(5):  # --max-age 0: each reads the whole tree again
                    scrape(url, pages)
            assert all(samples(page) == want for page in pages)
            assert prom.promtool_check_metrics(pages[-1]) == (0, "")
            assert len({frozenset(durations(page)) for page in pages}) == 5
        finally:
            rc = prom.stop(exporter)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    assert (rc, stderr) == (0, "")

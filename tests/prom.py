"""A real Prometheus and a real node_exporter for the tests (Debian's ``prometheus`` and
``prometheus-node-exporter`` packages), each started on a free 127.0.0.1 port with a
temporary configuration and storage, waited for, and stopped.

    with Prometheus(["127.0.0.1:9947"], rule_files=[path]) as prom:
        prom.wait_for("count(sysverbs_rdma_device_usable)", lambda r: len(r) == 1)
        rows = prom.query("sysverbs_gpu_nic_link")      # the API's result vector

    with NodeExporter(textfile_dir) as ne:
        text = ne.metrics()                               # its /metrics page

:func:`unavailable` says why a binary cannot be used (None when it can); the tests pass
it to :func:`tests.conftest.require`, so that a missing one skips, and fails under CI.
Nothing here listens on anything but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

PROMETHEUS = "prometheus"
PROMTOOL = "promtool"
NODE_EXPORTER = "prometheus-node-exporter"
#: Debian's paths, when PATH lacks them (the package puts them in /usr/bin).
_FALLBACK = {PROMETHEUS: "/usr/bin/prometheus", PROMTOOL: "/usr/bin/promtool",
             NODE_EXPORTER: "/usr/bin/prometheus-node-exporter"}


def binary(name: str) -> Optional[str]:
    """The path of ``prometheus``, ``promtool`` or ``prometheus-node-exporter``."""
    found = shutil.which(name)
    if found is None and os.access(_FALLBACK.get(name, ""), os.X_OK):
        found = _FALLBACK[name]
    return found


def unavailable(name: str) -> Optional[str]:
    """Why ``name`` cannot be run here (None: it can)."""
    path = binary(name)
    if path is None:
        return f"{name} is not installed (Debian: apt-get install prometheus " \
               "prometheus-node-exporter; make oracle-deps)"
    try:
        subprocess.run([path, "--version"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{path} --version failed: {e}"
    return None


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` different TCP ports nothing listens on at 127.0.0.1 now (bound together,
    so that the kernel cannot hand the same port out twice, as two :func:`free_port`
    calls in a row can)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def http_get(url: str, timeout: float = 5.0, headers: Optional[dict[str, str]] = None
             ) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of a GET (an HTTP error status is returned, not raised)."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers.items()), e.read()


def wait_http(url: str, timeout: float = 30.0, proc: Optional[subprocess.Popen[bytes]] = None
              ) -> bytes:
    """Poll ``url`` until it answers 200; the body.  ``proc``: give up when it exits."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before {url} "
                               f"answered: {_stderr(proc)}")
        try:
            status, _, body = http_get(url, timeout=2.0)
            if status == 200:
                return body
            last = status
        except OSError as e:
            last = e
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer 200 within {timeout} s (last: {last})")


def _stderr(proc: subprocess.Popen[bytes]) -> str:
    if proc.stderr is None:
        return ""
    try:
        return proc.stderr.read().decode(errors="replace")[-2000:]
    except (OSError, ValueError):
        return ""


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    """SIGTERM, then SIGKILL after ``timeout``; the exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return int(proc.returncode)


class _Daemon:
    """A child started by ``__enter__`` and stopped by ``__exit__``, in a temporary
    directory of its own."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._tmp: Optional[tempfile.TemporaryDirectory[str]] = None
        self.proc: Optional[subprocess.Popen[bytes]] = None

    @property
    def dir(self) -> Path:
        assert self._tmp is not None
        return Path(self._tmp.name)

    def _argv(self) -> list[str]:
        raise NotImplementedError

    def _ready_path(self) -> str:
        raise NotImplementedError

    def __enter__(self) -> _Daemon:
        self._tmp = tempfile.TemporaryDirectory(prefix="sv-prom-")
        argv = self._argv()
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     cwd=self.dir)
        try:
            wait_http(self.url + self._ready_path(), proc=self.proc)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


class Prometheus(_Daemon):
    """A Prometheus scraping ``targets`` (``host:port``, one job each: ``job`` names them,
    default ``t0``, ``t1``...) every ``scrape_interval``, evaluating ``rule_files``."""

    def __init__(self, targets: Sequence[str], *, jobs: Optional[Sequence[str]] = None,
                 rule_files: Sequence[os.PathLike[str] | str] = (),
                 scrape_interval: str = "1s", evaluation_interval: str = "1s") -> None:
        super().__init__()
        self.targets = list(targets)
        self.jobs = list(jobs) if jobs is not None else [f"t{i}" for i in range(len(targets))]
        assert len(self.jobs) == len(self.targets)
        self.rule_files = [str(Path(f).resolve()) for f in rule_files]
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval

    def _argv(self) -> list[str]:
        # JSON is YAML: no YAML writer needed
        config = {
            "global": {"scrape_interval": self.scrape_interval,
                       "scrape_timeout": self.scrape_interval,
                       "evaluation_interval": self.evaluation_interval},
            "rule_files": self.rule_files,
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [t]}]}
                               for job, t in zip(self.jobs, self.targets)],
        }
        path = self.dir / "prometheus.yml"
        path.write_text(json.dumps(config, indent=2))
        prom = binary(PROMETHEUS)
        assert prom is not None, unavailable(PROMETHEUS)
        return [prom, f"--config.file={path}", f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]

    def _ready_path(self) -> str:
        return "/-/ready"

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>?params``: the ``data`` of a ``success`` answer."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        status, _, body = http_get(url)
        doc = json.loads(body)
        if status != 200 or doc.get("status") != "success":
            raise RuntimeError(f"{url}: {status} {doc}")
        return doc["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector: ``[{"metric": {labels}, "value": [t, "v"]}]``."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    def wait_for(self, expr: str, done: Callable[[list[dict[str, Any]]], bool],
                 timeout: float = 30.0) -> list[dict[str, Any]]:
        """Query ``expr`` until ``done(result)``; the result."""
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(expr)
            if done(result):
                return result
            time.sleep(0.2)
        raise TimeoutError(f"{expr}: still {result} after {timeout} s")

    def targets_health(self) -> dict[str, str]:
        """job -> ``up``/``down``/``unknown`` of the active targets."""
        data = self.api("targets")
        return {t["labels"]["job"]: t["health"] for t in data["activeTargets"]}

    def __enter__(self) -> Prometheus:
        super().__enter__()
        return self


class NodeExporter(_Daemon):
    """``prometheus-node-exporter`` with only its textfile collector, reading
    ``textfile_dir`` (the others are slow, or read this machine: disabled)."""

    def __init__(self, textfile_dir: os.PathLike[str] | str) -> None:
        super().__init__()
        self.textfile_dir = str(textfile_dir)

    def _argv(self) -> list[str]:
        ne = binary(NODE_EXPORTER)
        assert ne is not None, unavailable(NODE_EXPORTER)
        return [ne, f"--web.listen-address=127.0.0.1:{self.port}",
                "--collector.disable-defaults", "--collector.textfile",
                f"--collector.textfile.directory={self.textfile_dir}", "--log.level=warn"]

    def _ready_path(self) -> str:
        return "/metrics"

    def metrics(self) -> str:
        status, _, body = http_get(self.url + "/metrics")
        assert status == 200, status
        return body.decode()

    def __enter__(self) -> NodeExporter:
        super().__enter__()
        return self


def promtool_check_metrics(text: bytes) -> tuple[int, str]:
    """``promtool check metrics`` on ``text`` (stdin): its exit status and output."""
    tool = binary(PROMTOOL)
    assert tool is not None, unavailable(PROMTOOL)
    p = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True,
                       timeout=60)
    return p.returncode, (p.stdout + p.stderr).decode(errors="replace")


def samples(text: str, prefix: str = "") -> set[tuple[str, frozenset[tuple[str, str]], float]]:
    """The samples of a text exposition (format 0.0.4) whose name starts with ``prefix``:
    ``(name, labels, value)``.  Just enough of the format for the tests' pages: label
    values with ``\\\\``, ``\\"`` and ``\\n`` escapes, no timestamps."""
    out = set()
    for line in text.splitlines():
        if not line or line.startswith("#") or not line.startswith(prefix):
            continue
        name, labels, rest = _split_sample(line)
        out.add((name, frozenset(labels.items()), float(rest)))
    return out


def _split_sample(line: str) -> tuple[str, dict[str, str], str]:
    brace = line.find("{")
    space = line.find(" ")
    if brace == -1 or (space != -1 and space < brace):
        name, _, value = line.partition(" ")
        return name, {}, value.strip()
    name = line[:brace]
    labels: dict[str, str] = {}
    i = brace + 1
    while line[i] != "}":
        eq = line.index("=", i)
        key = line[i:eq].strip().lstrip(",").strip()
        assert line[eq + 1] == '"', line
        j = eq + 2
        chars = []
        while line[j] != '"':
            if line[j] == "\\":
                chars.append({"n": "\n", "\\": "\\", '"': '"'}[line[j + 1]])
                j += 2
            else:
                chars.append(line[j])
                j += 1
        labels[key] = "".join(chars)
        i = j + 1
        if line[i] == ",":
            i += 1
    value = line[i + 1:].strip()
    assert " " not in value, f"a timestamp in {line!r}"
    return name, labels, value

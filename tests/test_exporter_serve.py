"""The HTTP server of ``sysverbs metrics --listen`` (sysverbs/fleet/serve.py) in this
process, on 127.0.0.1, with a counting collection and small timeouts: what each request
is answered, how long a snapshot is reused and shared, that held connections are bounded
and idle or half-sent ones are dropped, and that a client going away mid-answer costs
nothing.  The real process under load, in a memory cgroup and scraped by a real
Prometheus, is tests/test_exporter_load.py."""

from __future__ import annotations

import gzip
import http.client
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Callable

import pytest

from sysverbs.fleet import serve
from sysverbs.fleet.serve import Request, Server, connection_cap, gzip_accepted, parse_request

#: A request head as urllib sends one.
GET = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: identity\r\n\r\n"


class Counter:
    """A collection that counts itself (its value is its number) and can be held at a
    gate, or made to fail."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self.fail = False

    def __call__(self) -> int:
        self.calls += 1
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30)
        if self.fail:
            raise RuntimeError("boom")
        return self.calls


def text_page(accept: str) -> tuple[str, Callable[[int], bytes]]:
    return "text/plain; version=0.0.4; charset=utf-8", \
        lambda n: f"snapshot {n}\n".encode() + b"x" * 1000 + b"\n"


@pytest.fixture
def counter() -> Counter:
    return Counter()


def start(counter: Counter, page: Callable[[str], tuple[str, Callable[[int], bytes]]]
          = text_page, **kw: object) -> Server[int]:
    kw.setdefault("read_timeout", 0.5)
    return Server("127.0.0.1", 0, counter, page, **kw).start()  # type: ignore[arg-type]


@pytest.fixture
def server(counter: Counter) -> Iterator[Server[int]]:
    s = start(counter, max_age=3600)
    yield s
    s.close()


def exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` and read until the server closes: the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def split(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ")[1]), headers, body


def until(done: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``done`` (the server's thread moves on its own) until true or ``timeout``."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def get(port: int, path: str = "/metrics", method: str = "GET",
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


# ------------------------------------------------------------------- pure parts

@pytest.mark.parametrize(("head", "want"), [
    (GET, Request("GET", "/metrics", "", "identity")),
    (b"HEAD /metrics?x=1 HTTP/1.0\n\n", Request("HEAD", "/metrics", "", "")),
    (b"GET http://h:1/metrics HTTP/1.1\r\nAccept: a/b\r\nACCEPT-ENCODING:  gzip \r\n\r\n",
     Request("GET", "/metrics", "a/b", "gzip")),
    (b"OPTIONS * HTTP/1.1\r\n\r\n", Request("OPTIONS", "*", "", "")),
    (b"GET /metrics\r\n\r\n", None),                       # HTTP/0.9
    (b"GET /metrics HTTP/2.0\r\n\r\n", None),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", None),           # an HTTP/2 preface
    (b"GET  /metrics HTTP/1.1\r\n\r\n", None),
    (b"GET metrics HTTP/1.1\r\n\r\n", None),
    (b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n", None),
    (b"GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n", None),
    (b"GET /m\xe9trics HTTP/1.1\r\n\r\n", None),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", None),  # TLS
])
def test_parse_request(head: bytes, want: Request | None) -> None:
    assert parse_request(head) == want


@pytest.mark.parametrize(("request_", "status"), [
    (Request("GET", "/metrics", "", ""), 200), (Request("HEAD", "/metrics", "", ""), 200),
    (Request("GET", "/", "", ""), 404), (Request("GET", "/metrics/", "", ""), 404),
    (Request("HEAD", "/favicon.ico", "", ""), 404), (Request("POST", "/metrics", "", ""), 405),
    (Request("OPTIONS", "*", "", ""), 405), (None, 400),
])
def test_route(request_: Request | None, status: int) -> None:
    assert serve.route(request_) == status


@pytest.mark.parametrize(("header", "want"), [
    ("gzip", True), ("GZIP", True), ("deflate, gzip;q=0.5", True), ("gzip;q=0", False),
    ("gzip; q=0.000", False), ("", False), ("identity", False), ("x-gzip2", False),
])
def test_gzip_accepted(header: str, want: bool) -> None:
    assert gzip_accepted(header) is want


@pytest.mark.parametrize(("nofile", "cap"), [
    (64, 32), (1024, 512), (20000, serve.MAX_CONNECTIONS), (1, 1), (3, 1),
])
def test_connection_cap(nofile: int, cap: int) -> None:
    assert connection_cap(nofile) == cap


# ------------------------------------------------------------------- answers

def test_get_head_and_gzip(server: Server[int]) -> None:
    status, headers, body = get(server.port)
    assert status == 200 and body.startswith(b"snapshot 1\n") and len(body) == 1012
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert headers["Content-Length"] == "1012" and headers["Connection"] == "close"
    # HEAD: GET's status and headers, and not one byte of body (read to the close)
    status, head_headers, body = split(exchange(server.port,
                                                GET.replace(b"GET", b"HEAD", 1)))
    assert (status, body) == (200, b"")
    assert head_headers == headers
    status, headers, body = get(server.port, headers={"Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == get(server.port)[2]
    assert server.collections == 1  # max_age 3600: every answer is the first snapshot


@pytest.mark.parametrize(("data", "status", "extra"), [
    (b"GET / HTTP/1.1\r\n\r\n", 404, {}),
    (b"GET /metricsx HTTP/1.1\r\n\r\n", 404, {}),
    (b"HEAD /nope HTTP/1.1\r\n\r\n", 404, {}),
    (b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", 405, {"Allow": "GET, HEAD"}),
    (b"DELETE /metrics HTTP/1.1\r\n\r\n", 405, {"Allow": "GET, HEAD"}),
    (b"hello\r\n\r\n", 400, {}),
    (b"GET /metrics HTTP/1.1\r\nX: " + b"y" * serve.MAX_REQUEST, 431, {}),
])
def test_other_requests(server: Server[int], data: bytes, status: int,
                        extra: dict[str, str]) -> None:
    got, headers, body = split(exchange(server.port, data))
    assert got == status and headers["Connection"] == "close"
    assert extra.items() <= headers.items()
    if data.startswith(b"HEAD"):  # GET's headers, no body
        assert body == b"" and headers["Content-Length"] == "39"
    else:
        assert headers["Content-Length"] == str(len(body))
        assert body.startswith(b"not found: the metrics are at /metrics" if status == 404
                               else str(status).encode())
    assert server.collections == 0  # nothing but /metrics takes a snapshot
    assert get(server.port)[0] == 200  # and the server goes on


# ------------------------------------------------------------------- snapshots

def test_a_snapshot_is_reused_for_max_age(counter: Counter) -> None:
    s = start(counter, max_age=3600)
    try:
        pages = {get(s.port)[2] for _ in range(5)}
        assert len(pages) == 1 and s.collections == counter.calls == 1
    finally:
        s.close()


def test_max_age_zero_takes_a_snapshot_per_scrape(counter: Counter) -> None:
    s = start(counter, max_age=0)
    try:
        pages = [get(s.port)[2].split(b"\n")[0] for _ in range(3)]
        assert pages == [b"snapshot 1", b"snapshot 2", b"snapshot 3"]
    finally:
        s.close()


def test_scrapes_that_come_together_share_one_snapshot(counter: Counter) -> None:
    """max_age 0: the scrapes that arrive while a snapshot is taken are answered
    together from the next one: 20 scrapes, 2 collections."""
    s = start(counter, max_age=0)
    counter.gate = threading.Event()
    answers: list[bytes] = []

    def scrape(sock: socket.socket) -> None:
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
        answers.append(out)

    socks = [socket.create_connection(("127.0.0.1", s.port), timeout=30) for _ in range(20)]
    threads = [threading.Thread(target=scrape, args=(sock,)) for sock in socks]
    try:
        assert until(lambda: s.held() == 20)  # all accepted: their requests come together
        socks[0].sendall(GET)
        assert counter.entered.wait(30)  # the first scrape's snapshot is being taken
        for sock in socks[1:]:
            sock.sendall(GET)
        for t in threads:
            t.start()
        counter.gate.set()
        for t in threads:
            t.join(30)
        assert len(answers) == 20
        bodies = sorted(split(a)[2].split(b"\n")[0] for a in answers)
        assert bodies == [b"snapshot 1"] + [b"snapshot 2"] * 19
        assert counter.calls == 2
    finally:
        for sock in socks:
            sock.close()
        s.close()


def test_a_failed_snapshot_is_a_500_and_the_server_goes_on(counter: Counter) -> None:
    errors: list[str] = []
    s = start(counter, max_age=0, on_error=errors.append)
    try:
        counter.fail = True
        status, _, body = get(s.port)
        assert (status, body) == (500, b"500 Internal Server Error\n")
        assert errors == ["the metrics page could not be made: RuntimeError: boom"]
        counter.fail = False
        status, _, body = get(s.port)
        assert status == 200 and body.startswith(b"snapshot 2\n")
    finally:
        s.close()


# ------------------------------------------------------------------- bad clients

def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (EOF or a reset) before the client's timeout."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


@pytest.mark.parametrize("sent", [b"", b"GET /metrics HTTP/1.1\r\nHost: x\r\n"])
def test_idle_and_half_sent_requests_are_dropped(counter: Counter, sent: bytes) -> None:
    s = start(counter, read_timeout=0.3)
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=20) as sock:
            sock.sendall(sent)
            assert closed_by_server(sock)
        # one byte at a time does not keep it either: the deadline counts from the accept
        with socket.create_connection(("127.0.0.1", s.port), timeout=20) as sock:
            dripped = False
            for byte in GET[:-2]:
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    dripped = True
                    break
                if closed_by_server_soon(sock):
                    dripped = True
                    break
            assert dripped
        assert s.held() == 0 and counter.calls == 0
    finally:
        s.close()


def closed_by_server_soon(sock: socket.socket) -> bool:
    sock.settimeout(0.1)
    try:
        return closed_by_server(sock)
    finally:
        sock.settimeout(20)


def test_connections_beyond_the_cap_close_the_oldest(counter: Counter) -> None:
    s = start(counter, read_timeout=60, max_connections=4)
    idle = [socket.create_connection(("127.0.0.1", s.port), timeout=20) for _ in range(10)]
    try:
        # a scrape still gets in: it closes the oldest idle connection
        assert get(s.port)[0] == 200
        # the 7 oldest idle ones were closed (6 for the idle, 1 for the scrape), the
        # newest 3 are held
        assert [closed_by_server(sock) for sock in idle[:7]] == [True] * 7
        assert until(lambda: s.held() == 3)  # the scrape's own is closed once answered
        for sock in idle[7:]:
            sock.sendall(GET)
            assert split(sock.recv(65536))[0] == 200
    finally:
        for sock in idle:
            sock.close()
        s.close()


def test_a_client_that_goes_away_mid_answer(counter: Counter,
                                            capfd: pytest.CaptureFixture[str]) -> None:
    """A page of 8 MB, the client reads a little then resets the connection: nothing is
    printed, and the next scrape is answered."""
    def big(accept: str) -> tuple[str, Callable[[int], bytes]]:
        return "text/plain", lambda n: b"y" * (8 << 20)

    errors: list[str] = []
    s = start(counter, big, on_error=errors.append)
    try:
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=20)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(GET)
            assert sock.recv(100).startswith(b"HTTP/1.1 200 OK")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # a reset
        status, _, body = get(s.port)
        assert status == 200 and len(body) == 8 << 20
    finally:
        s.close()
    assert errors == [] and s.held() == 0
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_what_stops_the_server_is_kept(counter: Counter,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the loop ends it: the error is kept for the command (which exits 1 with
    it), wait() returns, and the port is closed rather than left unanswered."""
    s = Server("127.0.0.1", 0, counter, text_page)

    def bug(now: float) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(s, "_expire", bug)
    s.start()
    s.wait()
    assert isinstance(s.error, ZeroDivisionError) and str(s.error) == "a bug"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", s.port), timeout=10)
    s.close()


def test_the_command_exits_1_when_the_server_stops(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from sysverbs.cli import main

    def bug(self: Server[int], now: float) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(Server, "_expire", bug)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["metrics", "--fixture", "rxe", "--listen", f"127.0.0.1:{port}"]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", "sysverbs metrics: error: the server stopped: "
                              "ZeroDivisionError: a bug\n")

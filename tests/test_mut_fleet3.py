"""The ``--listen`` server's limits (issue 41: the mutants of ``make mutation`` in
fleet/serve.py): deadlines under a fake clock, the loop's tick, an accept out of file
descriptors, a batch of requests whose first is refused, the listener's socket options,
an answer written a byte at a time, reads and shutdowns that fail, the clean-up at the
end.  A server never started, its methods driven by hand with socket pairs for the
clients (tests/test_exporter_serve.py has the same server on real connections).
"""

from __future__ import annotations

import os
import selectors
import socket
from collections.abc import Iterator
from errno import (
    EADDRINUSE,
    EAGAIN,
    ECONNABORTED,
    ECONNRESET,
    EINTR,
    EMFILE,
    ENOBUFS,
    ENOTCONN,
)
from typing import Any, Callable, Optional

import pytest

from sysverbs.fleet import serve
from tests.conftest import require
from tests.test_exporter_serve import until

# A server never started, its methods driven by hand: a fake clock, socket pairs for
# the clients, a listener and sockets that fail as the kernel can.


def _page(accept: str) -> tuple[str, Callable[[int], bytes]]:
    return "text/plain", lambda n: b"page %d\n" % n


class _Clock:
    """serve.py's ``time``: ``monotonic()`` is ``now`` (plus ``step`` per call), and
    ``sleep()`` only counts."""

    def __init__(self, now: float, step: float = 0.0) -> None:
        self.now, self.step = now, step
        self.slept: list[float] = []

    def monotonic(self) -> float:
        now = self.now
        self.now += self.step
        return now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


class _Sock:
    """The server's end of a socket pair that sends at most ``chunk`` bytes a call, and
    answers EAGAIN before every other send when ``stall``; its calls are counted."""

    def __init__(self, real: socket.socket, chunk: int = 1 << 20, stall: bool = False,
                 fail: Optional[BaseException] = None) -> None:
        self.real, self.chunk, self.stall, self.fail = real, chunk, stall, fail
        self.flags: list[int] = []
        self.turn = 0

    def fileno(self) -> int:
        return self.real.fileno()

    def send(self, data: memoryview, flags: int) -> int:
        self.flags.append(flags)
        self.turn += 1
        if self.stall and self.turn % 2:
            raise BlockingIOError(EAGAIN, "would block")
        return self.real.send(data[:self.chunk], flags)

    def recv(self, size: int) -> bytes:
        if self.fail is not None:
            raise self.fail
        return self.real.recv(size)

    def shutdown(self, how: int) -> None:
        if self.fail is not None:
            raise self.fail
        self.real.shutdown(how)

    def close(self) -> None:
        self.real.close()


class _Rig:
    """A server never started (read timeout 5 s, write timeout 7 s), the clients' ends
    of the connections it holds, everything closed at the end."""

    def __init__(self, collect: Callable[[], int] = lambda: 1, **kw: Any) -> None:
        self.server = serve.Server("127.0.0.1", 0, collect, _page, read_timeout=5.0,
                                   write_timeout=7.0, **kw)
        self.clients: list[socket.socket] = []

    def hold(self, wrap: Callable[[socket.socket], Any] = lambda s: s,
             deadline: float = 1e9) -> tuple[Any, socket.socket]:
        mine, theirs = socket.socketpair()
        mine.setblocking(False)
        theirs.settimeout(10)
        self.clients.append(theirs)
        sock = wrap(mine)
        conn = serve._Conn(sock, deadline)  # noqa: SLF001
        self.server._conns[mine.fileno()] = conn  # noqa: SLF001
        self.server._sel.register(sock, selectors.EVENT_READ, conn)  # noqa: SLF001
        return conn, theirs

    def close(self) -> None:
        for conn in list(self.server._conns.values()):  # noqa: SLF001
            self.server._drop(conn)  # noqa: SLF001
        self.server.close()
        for sock in self.clients:
            sock.close()


@pytest.fixture
def rig() -> Iterator[_Rig]:
    made = _Rig()
    yield made
    made.close()


def _eof(sock: socket.socket) -> bool:
    """Whether the server closed ``sock``'s other end (and sent nothing more)."""
    sock.settimeout(10)
    return sock.recv(1) == b""


def _all(sock: socket.socket) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def test_each_deadline_counts_from_its_event(rig: _Rig, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    """The read deadline is the accept's time plus the read timeout, the write deadline
    the answer's time plus the write timeout; a connection goes at its deadline, not
    before."""
    s = rig.server
    clock = _Clock(100.0)
    monkeypatch.setattr(serve, "time", clock)
    client = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    rig.clients.append(client)
    s._accept()  # noqa: SLF001
    (conn,) = s._conns.values()  # noqa: SLF001
    assert conn.deadline == 105.0
    s._expire(104.999)  # noqa: SLF001
    assert s.held() == 1
    s._expire(105.0)  # noqa: SLF001
    assert s.held() == 0 and conn.closed and _eof(client)
    clock.now = 200.0
    slow, _ = rig.hold(lambda m: _Sock(m, stall=True, chunk=0))
    s._send(slow, 404, [], b"gone\n", head_only=False)  # noqa: SLF001
    assert slow.deadline == 207.0 and not slow.closed and slow.out


def test_the_loop_ticks_every_quarter_second(rig: _Rig, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    """select() waits until the next tick (0 when it is past: never a negative wait),
    the deadlines are checked when the clock reaches a tick (not only after it), the
    next tick a quarter second after that check."""
    s = rig.server
    times = [0.0,              # the first tick at 0.25
             0.125, 0.25,      # wait 0.125; 0.25: a tick, the next at 0.5
             0.375, 0.4375,    # wait 0.125; 0.4375: none
             0.625, 0.625,     # late: wait 0; 0.625: a tick, the next at 0.875
             0.75, 0.875]      # wait 0.125; 0.875: a tick
    clock = _Clock(0.0)
    monkeypatch.setattr(clock, "monotonic", lambda: times.pop(0))
    monkeypatch.setattr(serve, "time", clock)
    waits: list[float] = []
    ticks: list[float] = []

    def select(timeout: float) -> list[Any]:
        waits.append(timeout)
        return []

    def expire(now: float) -> None:
        ticks.append(now)
        s._stopping = len(ticks) == 3  # noqa: SLF001

    monkeypatch.setattr(s._sel, "select", select)  # noqa: SLF001
    monkeypatch.setattr(s, "_expire", expire)
    s.serve_forever()
    assert s.error is None and times == []
    assert waits == [0.125, 0.125, 0.0, 0.125]
    assert ticks == [0.25, 0.625, 0.875]


class _Listener:
    """A listener whose accept() gives ``answers`` in turn (an exception is raised)."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.calls = 0

    def accept(self) -> tuple[socket.socket, Any]:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer, None


@pytest.mark.parametrize("error", [OSError(EMFILE, "too many"), OSError(ENOBUFS, "nobufs")])
def test_an_accept_out_of_descriptors_drops_the_oldest_or_waits(
        rig: _Rig, monkeypatch: pytest.MonkeyPatch, error: OSError) -> None:
    s = rig.server
    clock = _Clock(50.0)
    monkeypatch.setattr(serve, "time", clock)
    real = s._listener  # noqa: SLF001
    try:
        s._listener = _Listener([error])  # type: ignore[assignment]  # noqa: SLF001
        s._accept()  # noqa: SLF001  nothing held: wait a tick, accept no more
        assert (clock.slept, s._listener.calls, s.held()) == ([0.25], 1, 0)  # noqa: SLF001
        oldest, oldest_client = rig.hold()
        newer, _ = rig.hold()
        mine, theirs = socket.socketpair()
        rig.clients.append(theirs)
        s._listener = _Listener([error, mine, BlockingIOError(EAGAIN, "none")])  # type: ignore[assignment]  # noqa: E501,SLF001
        s._accept()  # noqa: SLF001  the oldest goes, and the accepting goes on
        assert s._listener.calls == 3 and clock.slept == [0.25]  # noqa: SLF001
        assert oldest.closed and not newer.closed and _eof(oldest_client)
        assert list(s._conns.values())[0] is newer and s.held() == 2  # noqa: SLF001
        accepted = list(s._conns.values())[1]  # noqa: SLF001
        assert accepted.sock is mine and accepted.deadline == 55.0
        assert mine.gettimeout() == 0.0  # non-blocking
    finally:
        s._listener = real  # noqa: SLF001


@pytest.mark.parametrize("error", [InterruptedError(EINTR, "signal"),
                                   ConnectionAbortedError(ECONNABORTED, "aborted"),
                                   BlockingIOError(EAGAIN, "none")])
def test_an_accept_that_finds_nothing_drops_nothing(
        rig: _Rig, monkeypatch: pytest.MonkeyPatch, error: OSError) -> None:
    s = rig.server
    clock = _Clock(50.0)
    monkeypatch.setattr(serve, "time", clock)
    held, _ = rig.hold()
    real = s._listener  # noqa: SLF001
    try:
        s._listener = _Listener([error])  # type: ignore[assignment]  # noqa: SLF001
        s._accept()  # noqa: SLF001
    finally:
        s._listener = real  # noqa: SLF001
    assert not held.closed and clock.slept == [] and s.held() == 1


def _request(method: str = "GET", path: str = "/metrics") -> serve.Request:
    return serve.Request(method, path, "", "")


@pytest.mark.parametrize("first", ["bad request", "no snapshot", "no page"])
def test_every_request_of_a_batch_is_answered(first: str) -> None:
    """Requests read together, the first refused (a 400, or a 500: the snapshot or the
    page could not be made): the next ones are answered all the same."""
    def collect() -> int:
        if first == "no snapshot":
            raise RuntimeError("no snapshot")
        return 1

    def page(accept: str) -> tuple[str, Callable[[int], bytes]]:
        if first == "no page" and accept == "":
            raise ValueError("no page")
        return "text/plain", lambda n: b"page %d\n" % n

    made = _Rig(collect)
    made.server._exposition = page  # noqa: SLF001
    try:
        one, one_client = made.hold()
        two, two_client = made.hold()
        three, three_client = made.hold()
        request = None if first == "bad request" else _request()
        later = serve.Request("GET", "/metrics", "text/plain", "")
        made.server._answer([(one, request), (two, later), (three, later)])  # noqa: SLF001
        answers = [_all(c).split(b"\r\n")[0] for c in (one_client, two_client, three_client)]
        want = {"bad request": b"HTTP/1.1 400 Bad Request",
                "no page": b"HTTP/1.1 500 Internal Server Error",
                "no snapshot": b"HTTP/1.1 500 Internal Server Error"}[first]
        ok = want if first == "no snapshot" else b"HTTP/1.1 200 OK"
        assert answers == [want, ok, ok]
        assert made.server.held() == 0
    finally:
        made.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_the_listener_reuses_its_address_and_takes_the_first_address(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """SO_REUSEADDR (a restarted exporter binds its port while the last one's
    connections are in TIME_WAIT); of several addresses of a name, the first; a bind
    that fails closes its socket."""
    s = serve.Server("127.0.0.1", 0, lambda: 1, _page)
    try:
        assert s._listener.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) == 1  # noqa: SLF001
        assert s._listener.gettimeout() == 0.0  # noqa: SLF001  non-blocking
        before = _open_fds()
        with pytest.raises(OSError) as e:
            serve.Server("127.0.0.1", s.port, lambda: 1, _page)  # in use
        assert e.value.errno == EADDRINUSE and _open_fds() == before
    finally:
        s.close()
    real = socket.getaddrinfo

    def two(host: Any, port: Any, *args: Any, **kw: Any) -> list[Any]:
        return real("127.0.0.1", port, *args, **kw) + real("::1", port, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", two)
    s = serve.Server("both", 0, lambda: 1, _page)
    try:
        assert s._listener.family == socket.AF_INET  # noqa: SLF001
        assert s._listener.getsockname()[0] == "127.0.0.1"  # noqa: SLF001
    finally:
        s.close()


def test_an_ipv6_listener_is_ipv6_only() -> None:
    """On an IPv6 address, IPV6_V6ONLY: "::" leaves the IPv4 port to another listener
    (a specific address such as ::1 is IPv6-only anyway: the kernel sets it at bind)."""
    try:
        s = serve.Server("::", 0, lambda: 1, _page)
    except OSError as e:  # no IPv6 on this host
        require(f"no IPv6: {e}", "an IPv6 listener")
        return
    try:
        assert s._listener.family == socket.AF_INET6  # noqa: SLF001
        assert s._listener.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1  # noqa: SLF001
        with socket.socket() as v4:
            v4.bind(("127.0.0.1", s.port))  # EADDRINUSE if "::" took IPv4 too
    finally:
        s.close()


def test_an_answer_written_a_byte_at_a_time(rig: _Rig) -> None:
    """A client that takes one byte per send, and would block before every other one:
    the head and the body arrive whole, in order, every send without SIGPIPE."""
    s = rig.server
    conn, client = rig.hold(lambda m: _Sock(m, chunk=1, stall=True))
    s._send(conn, 200, [("Content-Type", "text/plain")], b"body\n", head_only=False)  # noqa: SLF001
    turns = 1
    while not conn.closed and turns < 1000:
        s._write(conn)  # noqa: SLF001  as when the socket is writable again
        turns += 1
    assert _all(client) == (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                            b"Content-Length: 5\r\nConnection: close\r\n\r\nbody\n")
    head = len(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
               b"Content-Length: 5\r\nConnection: close\r\n\r\n")
    assert len(conn.sock.flags) == 2 * (head + 5)  # each byte: EAGAIN, then the byte
    assert set(conn.sock.flags) == {getattr(socket, "MSG_NOSIGNAL", 0)}  # PyPy 3.9: none


def test_a_request_head_of_exactly_max_request_bytes_waits_for_more(rig: _Rig) -> None:
    """8192 bytes with no end of head yet: no answer, the connection waits; one more
    byte: 431."""
    s = rig.server
    conn, client = rig.hold()
    client.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"y" * (serve.MAX_REQUEST - 26))
    ready: list[Any] = []
    for _ in range(100):  # 4096 bytes a recv
        if len(conn.buf) >= serve.MAX_REQUEST or conn.closed:
            break
        s._read(conn, ready)  # noqa: SLF001
    assert len(conn.buf) == serve.MAX_REQUEST and conn.out == [] and not conn.closed
    client.sendall(b"y")
    s._read(conn, ready)  # noqa: SLF001
    assert ready == [] and _all(client).startswith(
        b"HTTP/1.1 431 Request Header Fields Too Large\r\n")


def test_a_target_urlsplit_refuses_is_a_bad_request() -> None:
    assert serve.parse_request(b"GET http://[::1/metrics HTTP/1.1\r\n\r\n") is None
    assert serve.route(serve.parse_request(b"GET http://[::1]/metrics HTTP/1.1\r\n\r\n")
                       ) == 200


def test_a_snapshot_is_reused_for_less_than_max_age(monkeypatch: pytest.MonkeyPatch) -> None:
    """max_age 5: a scrape 4.999 s after the collection finished gets it again, one 5 s
    after gets a new one."""
    clock = _Clock(100.0)
    monkeypatch.setattr(serve, "time", clock)
    calls: list[float] = []
    made = _Rig(lambda: calls.append(clock.now) or len(calls), max_age=5.0)
    try:
        s = made.server
        first = s._snapshot_now()  # noqa: SLF001
        assert first is not None and (first.value, first.finished) == (1, 100.0)
        clock.now = 104.999
        assert s._snapshot_now() is first  # noqa: SLF001
        clock.now = 105.0
        second = s._snapshot_now()  # noqa: SLF001
        assert second is not None and second.value == 2 and s.collections == 2
    finally:
        made.close()


def test_no_msg_nosignal_sends_with_no_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the socket module lacks MSG_NOSIGNAL (PyPy 3.9), send() gets no flag: not
    1, which is MSG_OOB (the module loaded again, as a copy of its own)."""
    import importlib.util

    assert serve._NOSIGNAL == getattr(socket, "MSG_NOSIGNAL", 0)  # noqa: SLF001
    spec = importlib.util.spec_from_file_location("serve_without_nosignal", serve.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.delattr(socket, "MSG_NOSIGNAL", raising=False)
    spec.loader.exec_module(module)
    assert module._NOSIGNAL == 0  # noqa: SLF001


def test_reads_that_fail_or_find_nothing(rig: _Rig) -> None:
    """recv() would block or was interrupted: the connection waits; it failed (a
    reset): the connection goes; the shutdown of an answered one fails: it goes."""
    s = rig.server
    ready: list[Any] = []
    for error, kept in ((BlockingIOError(EAGAIN, "none"), True),
                        (InterruptedError(EINTR, "signal"), True),
                        (ConnectionResetError(ECONNRESET, "reset"), False)):
        conn, _ = rig.hold(lambda m, e=error: _Sock(m, fail=e))
        s._read(conn, ready)  # noqa: SLF001
        assert (not conn.closed, s.held() == 1) == (kept, kept) and ready == []
        s._drop(conn)  # noqa: SLF001
    conn, client = rig.hold(lambda m: _Sock(m, fail=OSError(ENOTCONN, "not connected")))
    s._finish(conn)  # noqa: SLF001
    assert conn.closed and s.held() == 0 and _eof(client)


def test_a_connection_dropped_twice_or_never_registered(rig: _Rig) -> None:
    s = rig.server
    conn, client = rig.hold()
    s._sel.unregister(conn.sock)  # noqa: SLF001
    s._drop(conn)  # noqa: SLF001  KeyError of the selector: taken
    assert conn.closed and s.held() == 0 and _eof(client)
    s._drop(conn)  # noqa: SLF001  closed already: nothing to do
    mine, theirs = socket.socketpair()
    rig.clients.append(theirs)
    gone = serve._Conn(mine, 0.0)  # noqa: SLF001
    mine.close()
    s._drop(gone)  # noqa: SLF001  a closed socket (fd -1): the selector's ValueError
    assert gone.closed and gone.out == [] and gone.buf == bytearray()


def test_a_started_server_runs_as_a_daemon_and_closes_what_it_holds() -> None:
    s = serve.Server("127.0.0.1", 0, lambda: 1, _page).start()
    assert s._thread is not None and s._thread.daemon  # noqa: SLF001
    assert s._thread.name == "sysverbs-metrics"  # noqa: SLF001
    client = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    try:
        assert until(lambda: s.held() == 1)
        s.close()
        assert _eof(client) and s.held() == 0
        assert not s._thread.is_alive()  # noqa: SLF001
        s.close()  # twice: its wake-up socket is closed, nothing raised
    finally:
        client.close()

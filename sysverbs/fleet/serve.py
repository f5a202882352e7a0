"""The HTTP server of ``sysverbs metrics --listen``: one thread, non-blocking sockets
(:mod:`selectors`), standard library only, made so that idle or slow clients cannot starve
it (docs/fleet.md, "The exporter's limits").

* **Bounded connections.** At most :func:`connection_cap` connections are held (half the
  soft ``RLIMIT_NOFILE``, at most :data:`MAX_CONNECTIONS`, so the collection always has
  file descriptors left); a connection beyond it closes the oldest one held. A held
  connection costs a socket and at most :data:`MAX_REQUEST` bytes, never a thread.
* **Timeouts.** A connection has :data:`READ_TIMEOUT` seconds from its accept to send a
  whole request head (a half-sent request is dropped then, however slowly it trickles
  in) and :data:`WRITE_TIMEOUT` seconds to take its answer.
* **One snapshot for concurrent scrapes.** The requests read together are answered from
  one collection, and a scrape less than ``max_age`` seconds (:data:`MAX_AGE` by default;
  0: a fresh collection for every batch of requests) after the last collection finished
  gets that collection's page again. Each snapshot's pages are rendered (and gzipped)
  once per format.
* **HTTP.** ``GET`` and ``HEAD`` (the same status and headers, no body) of ``/metrics``;
  404 for any other path, 405 for any other method, 400 for what is not an HTTP/1.x
  request, 431 for a head over :data:`MAX_REQUEST` bytes, 500 when the page cannot be
  made. Every answer says ``Connection: close`` and the connection is closed once it is
  written; a client that goes away mid-answer is forgotten without a word.

The page itself comes from the callables given (:func:`sysverbs.fleet.metrics.serve`
gives prometheus_client's exposition); nothing here knows what a page holds.
"""

from __future__ import annotations

import gzip
import resource
import selectors
import socket
import threading
import time
from collections import OrderedDict
from typing import Callable, Generic, NamedTuple, Optional, TypeVar, Union
from urllib.parse import urlsplit

__all__ = ["MAX_AGE", "MAX_CONNECTIONS", "MAX_REQUEST", "READ_TIMEOUT", "WRITE_TIMEOUT",
           "Request", "Server", "connection_cap", "gzip_accepted", "parse_request", "route"]

#: Seconds from a connection's accept to the end of its request head.
READ_TIMEOUT = 5.0
#: Seconds an answer has to be taken by the client once it is ready.
WRITE_TIMEOUT = 10.0
#: Seconds a finished collection answers later scrapes (``--max-age``'s default).
MAX_AGE = 5.0
#: The most connections held at once, whatever RLIMIT_NOFILE allows.
MAX_CONNECTIONS = 1024
#: The longest request head read (request line and headers), in bytes.
MAX_REQUEST = 8192
#: The path served.
PATH = "/metrics"
#: Formats x compressions kept rendered per snapshot (a client's Accept header picks one).
_PAGES = 8
#: Connections accepted per turn of the loop, so that reading keeps up with accepting.
_ACCEPTS = 64
#: Seconds between two checks of the deadlines.
_TICK = 0.25
#: send() flags: no SIGPIPE for a client gone (PyPy 3.9's socket lacks the name; Python
#: ignores SIGPIPE anyway).
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            431: "Request Header Fields Too Large", 500: "Internal Server Error"}

T = TypeVar("T")


class Request(NamedTuple):
    """A request head as the server needs it: the method, the path (no query), and the
    ``Accept`` and ``Accept-Encoding`` headers (empty when absent)."""

    method: str
    path: str
    accept: str
    accept_encoding: str


def connection_cap(nofile: Optional[int] = None) -> int:
    """How many connections to hold with a soft ``RLIMIT_NOFILE`` of ``nofile`` (this
    process's when None): half of it, at least 1, at most :data:`MAX_CONNECTIONS`."""
    if nofile is None:
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if nofile == resource.RLIM_INFINITY or nofile < 0:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, nofile // 2))


def _head_end(buf: Union[bytes, bytearray]) -> int:
    """Where the request head ends (after its blank line), or -1 while it does not."""
    for sep in (b"\r\n\r\n", b"\n\n"):
        at = buf.find(sep)
        if at != -1:
            return at + len(sep)
    return -1


def parse_request(head: bytes) -> Optional[Request]:
    """The request of a complete head, or None when it is not an HTTP/1.x request (a
    request line of three words, headers ``name: value``, ASCII)."""
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        return None
    lines = text.replace("\r\n", "\n").rstrip("\n").split("\n")
    words = lines[0].split(" ")
    if len(words) != 3 or not words[0].isalpha() or not words[2].startswith("HTTP/1."):
        return None
    method, target, _ = words
    if not target.startswith(("/", "http://", "https://")) and target != "*":
        return None
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return None
        fields[name.lower()] = value.strip()
    try:
        path = urlsplit(target).path
    except ValueError:
        return None
    return Request(method, path, fields.get("accept", ""), fields.get("accept-encoding", ""))


def route(request: Optional[Request]) -> int:
    """The status of a request: 200 for ``GET``/``HEAD`` of ``/metrics``."""
    if request is None:
        return 400
    if request.method not in ("GET", "HEAD"):
        return 405
    return 200 if request.path == PATH else 404


def gzip_accepted(accept_encoding: str) -> bool:
    """Whether ``Accept-Encoding`` takes gzip (and does not refuse it with ``q=0``)."""
    for item in accept_encoding.split(","):
        coding, *params = (p.strip() for p in item.split(";"))
        if coding.lower() == "gzip":
            return not any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000")
                           for p in params)
    return False


class _Snapshot(Generic[T]):
    """One collection, when it finished, and its pages rendered so far."""

    def __init__(self, value: T, finished: float) -> None:
        self.value = value
        self.finished = finished
        self.pages: dict[tuple[str, bool], bytes] = {}

    def page(self, content_type: str, compress: bool, encode: Callable[[T], bytes]) -> bytes:
        key = (content_type, compress)
        body = self.pages.get(key)
        if body is None:
            body = encode(self.value)
            if compress:
                body = gzip.compress(body)
            if len(self.pages) < _PAGES:
                self.pages[key] = body
        return body


class _Conn:
    """One client: its request so far, then the parts of its answer left to write."""

    __slots__ = ("sock", "buf", "out", "deadline", "closed")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.out: list[memoryview] = []
        self.deadline = deadline
        self.closed = False


def _listen(addr: str, port: int) -> socket.socket:
    """A non-blocking socket listening on ``addr:port`` (IPv6 only for an IPv6 address);
    the bind's own :class:`OSError` when it cannot."""
    family, _, _, _, sockaddr = socket.getaddrinfo(
        addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(sockaddr)
        sock.listen(socket.SOMAXCONN)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _answer_head(status: int, headers: list[tuple[str, str]], length: int) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS[status]}", *(f"{k}: {v}" for k, v in headers),
             f"Content-Length: {length}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


class Server(Generic[T]):
    """``/metrics`` on ``addr:port`` (bound at once: a port in use raises
    :class:`OSError`), each page ``exposition(accept)`` of a snapshot ``collect()``
    took.  :meth:`start` runs it in a daemon thread, :meth:`close` stops it,
    :meth:`wait` waits for its end.  ``on_error`` hears why a page could not be made
    (the client gets 500); ``collections`` counts the snapshots taken; ``error`` is what
    stopped the server when :meth:`close` did not."""

    def __init__(self, addr: str, port: int, collect: Callable[[], T],
                 exposition: Callable[[str], tuple[str, Callable[[T], bytes]]], *,
                 max_age: float = MAX_AGE, read_timeout: float = READ_TIMEOUT,
                 write_timeout: float = WRITE_TIMEOUT, max_connections: Optional[int] = None,
                 on_error: Optional[Callable[[str], None]] = None) -> None:
        self._listener = _listen(addr, port)
        self.port: int = self._listener.getsockname()[1]
        self.cap = connection_cap() if max_connections is None else max(1, max_connections)
        self.collections = 0
        self.error: Optional[Exception] = None
        self._collect = collect
        self._exposition = exposition
        self._max_age = max_age
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._on_error = on_error
        self._conns: OrderedDict[int, _Conn] = OrderedDict()
        self._snapshot: Optional[_Snapshot[T]] = None
        self._stopping = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread: Optional[threading.Thread] = None

    def start(self) -> Server[T]:
        """Serve from a daemon thread; returns the server."""
        self._thread = threading.Thread(target=self.serve_forever, name="sysverbs-metrics",
                                        daemon=True)
        self._thread.start()
        return self

    def held(self) -> int:
        """How many connections are held now."""
        return len(self._conns)

    def close(self) -> None:
        """Stop serving and close every socket (waits for the thread :meth:`start` ran)."""
        self._stopping = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(10)
        else:  # never started: serve_forever would have closed these
            self._sel.close()
            self._listener.close()
            self._wake_r.close()
        self._wake_w.close()

    def wait(self) -> None:
        """Until the thread :meth:`start` ran ends (:meth:`close`, or :attr:`error`)."""
        if self._thread is not None:
            self._thread.join()

    def serve_forever(self) -> None:
        """Accept, read, answer and time out until :meth:`close`.  What would end it
        otherwise (a bug) is kept in :attr:`error`, and every socket is closed."""
        next_tick = time.monotonic() + _TICK
        try:
            while not self._stopping:
                ready: list[tuple[_Conn, Optional[Request]]] = []
                for key, _ in self._sel.select(max(0.0, next_tick - time.monotonic())):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        self._wake_r.recv(64)
                    elif key.data.out:  # answering (a hang-up also lands here)
                        self._write(key.data)
                    else:
                        self._read(key.data, ready)
                if ready:
                    self._answer(ready)
                now = time.monotonic()
                if now >= next_tick:
                    self._expire(now)
                    next_tick = now + _TICK
        except Exception as e:  # noqa: BLE001 (kept for the caller: see wait())
            self.error = e
        finally:
            for conn in list(self._conns.values()):
                self._drop(conn)
            self._sel.close()
            self._listener.close()
            self._wake_r.close()

    # ---------------------------------------------------------------- connections

    def _accept(self) -> None:
        for _ in range(_ACCEPTS):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError:  # EMFILE, ENOBUFS...: make room, or wait a little
                if not self._conns:
                    time.sleep(_TICK)
                    return
                self._drop(next(iter(self._conns.values())))
                continue
            while len(self._conns) >= self.cap:  # the oldest goes: it is the idlest
                self._drop(next(iter(self._conns.values())))
            sock.setblocking(False)
            conn = _Conn(sock, time.monotonic() + self._read_timeout)
            self._conns[sock.fileno()] = conn
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _drop(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        self._conns.pop(conn.sock.fileno(), None)
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        conn.buf = bytearray()
        conn.out = []

    def _expire(self, now: float) -> None:
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            self._drop(conn)

    def _read(self, conn: _Conn, ready: list[tuple[_Conn, Optional[Request]]]) -> None:
        if conn.closed:
            return
        try:
            data = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        if not data:  # the client went away before its request was whole
            self._drop(conn)
            return
        conn.buf += data
        end = _head_end(conn.buf)
        if end == -1 or end > MAX_REQUEST:
            if len(conn.buf) > MAX_REQUEST:
                self._send(conn, 431, _error_headers(431), _error_body(431), head_only=False)
            return
        ready.append((conn, parse_request(bytes(conn.buf[:end]))))
        conn.buf = bytearray()

    def _write(self, conn: _Conn) -> None:
        while conn.out and not conn.closed:
            part = conn.out[0]
            try:
                sent = conn.sock.send(part, _NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # the client went away: nothing to say about it
                self._drop(conn)
                return
            if sent < len(part):
                conn.out[0] = part[sent:]
                return
            conn.out.pop(0)
        if not conn.closed:
            self._finish(conn)

    def _finish(self, conn: _Conn) -> None:
        """The answer is written: end the connection without resetting it (what the
        client sent beyond its request head is read and dropped first)."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)
            conn.sock.recv(65536)
        except OSError:
            pass
        self._drop(conn)

    def _send(self, conn: _Conn, status: int, headers: list[tuple[str, str]], body: bytes,
              head_only: bool) -> None:
        if conn.closed:
            return
        conn.out = [memoryview(_answer_head(status, headers, len(body)))]
        if body and not head_only:
            conn.out.append(memoryview(body))
        conn.deadline = time.monotonic() + self._write_timeout
        self._sel.modify(conn.sock, selectors.EVENT_WRITE, conn)  # nothing more is read
        self._write(conn)

    # ---------------------------------------------------------------- answers

    def _snapshot_now(self) -> Optional[_Snapshot[T]]:
        """The snapshot for requests read now: the last one while it is younger than
        ``max_age``, else a new collection (None when it failed: said to on_error)."""
        last = self._snapshot
        if last is not None and time.monotonic() - last.finished < self._max_age:
            return last
        self._snapshot = None
        try:
            value = self._collect()
        except Exception as e:  # noqa: BLE001 (a bug must cost a 500, not the server)
            self._report(f"the metrics page could not be made: {type(e).__name__}: {e}")
            return None
        self.collections += 1
        self._snapshot = _Snapshot(value, time.monotonic())
        return self._snapshot

    def _report(self, text: str) -> None:
        if self._on_error is not None:
            self._on_error(text)

    def _answer(self, ready: list[tuple[_Conn, Optional[Request]]]) -> None:
        snapshot = None
        if any(route(request) == 200 for _, request in ready):
            snapshot = self._snapshot_now()
        for conn, request in ready:
            status = route(request)
            head_only = request is not None and request.method == "HEAD"
            if status != 200 or request is None:
                self._send(conn, status, _error_headers(status), _error_body(status),
                           head_only)
                continue
            if snapshot is None:
                self._send(conn, 500, _error_headers(500), _error_body(500), head_only)
                continue
            try:
                content_type, encode = self._exposition(request.accept)
                compress = gzip_accepted(request.accept_encoding)
                body = snapshot.page(content_type, compress, encode)
            except Exception as e:  # noqa: BLE001 (as in _snapshot_now)
                self._report(f"the metrics page could not be made: {type(e).__name__}: {e}")
                self._send(conn, 500, _error_headers(500), _error_body(500), head_only)
                continue
            headers = [("Content-Type", content_type)]
            if compress:
                headers.append(("Content-Encoding", "gzip"))
            self._send(conn, 200, headers, body, head_only)


def _error_headers(status: int) -> list[tuple[str, str]]:
    headers = [("Content-Type", "text/plain; charset=utf-8")]
    if status == 405:
        headers.append(("Allow", "GET, HEAD"))
    return headers


def _error_body(status: int) -> bytes:
    if status == 404:
        return f"not found: the metrics are at {PATH}\n".encode()
    return f"{status} {_REASONS[status]}\n".encode()

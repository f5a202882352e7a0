"""Many exporters from one process, for a simulated fleet (tests/test_fleet_sim.py): one
thread runs one asyncio loop that listens on ``count`` ports of 127.0.0.1 and answers
every HTTP request on a port with that port's page (``pages[port]``, replaced whole
whenever the test wants the node to change), keeping the connection alive as
Prometheus expects.  :meth:`Fleet.die` closes a port's listening socket and its
connections: an exporter that died (connection refused from then on).

    with Fleet(200) as fleet:
        fleet.pages[fleet.ports[0]] = b"sysverbs_build_info 1\\n"
        fleet.die(fleet.ports[1])

Each page is bytes rendered once by the caller; a request costs a dict lookup and a write.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Optional

#: The text exposition format's content type (what sysverbs.fleet.metrics.render writes).
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


class Fleet:
    """``count`` listening sockets on 127.0.0.1 (``ports``), served by one thread."""

    def __init__(self, count: int) -> None:
        self.sockets = []
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            s.listen(16)
            self.sockets.append(s)
        self.ports: list[int] = [int(s.getsockname()[1]) for s in self.sockets]
        self.pages: dict[int, bytes] = {}
        self.requests = 0
        self._loop = asyncio.new_event_loop()
        self._servers: dict[int, asyncio.AbstractServer] = {}
        self._writers: dict[int, set[asyncio.StreamWriter]] = {p: set() for p in self.ports}
        self._thread: Optional[threading.Thread] = None

    async def _answer(self, port: int, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        self._writers[port].add(writer)
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")  # a GET: no body
                page = self.pages.get(port, b"")
                self.requests += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + CONTENT_TYPE +
                             b"\r\nContent-Length: %d\r\n\r\n" % len(page) + page)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        finally:
            self._writers[port].discard(writer)
            writer.close()

    async def _start(self) -> None:
        for port, sock in zip(self.ports, self.sockets):
            def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter,
                       port: int = port) -> object:
                return self._answer(port, r, w)
            self._servers[port] = await asyncio.start_server(answer, sock=sock)

    async def _die(self, port: int) -> None:
        self._servers.pop(port).close()
        for writer in list(self._writers[port]):
            writer.close()

    def start(self) -> Fleet:
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._start())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fleet", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise TimeoutError("the fleet's servers did not start")
        return self

    def die(self, port: int) -> None:
        """The exporter of ``port`` dies: its socket closes, its connections too."""
        asyncio.run_coroutine_threadsafe(self._die(port), self._loop).result(10)

    def close(self) -> None:
        if self._thread is not None:
            for port in list(self._servers):
                asyncio.run_coroutine_threadsafe(self._die(port), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None
        for s in self.sockets:
            s.close()
        self._loop.close()

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

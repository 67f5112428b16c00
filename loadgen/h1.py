"""The hot streaming path: HTTP/1.1 keep-alive connections as asyncio protocols, parsed by httptools.

Why this exists beside aiohttp and httpx: with a library client every streamed chunk wakes a task (socket →
protocol → stream reader → future → task step), 30–120 µs of Python per chunk, and the arrival time is only
taken once that task runs. When a serving engine finishes a step it writes one chunk to every stream at
once; a client that spends 30 µs per chunk stamps the 256th stream of that burst ~8 ms late, which is how
peers read TTFT p99 hundreds of milliseconds too high under load. Here the arrival time is taken in
``buffer_updated`` (the moment the loop hands over the bytes), the body is de-chunked by httptools (llhttp,
the parser uvicorn uses) and handed straight to a sink that classifies SSE events inline, and no task wakes
until the response is complete. A chunk costs a few microseconds.

A burst is stamped before it is parsed: each read is stamped and its bytes kept (``Pool.pending``), and
they are parsed in one callback once the loop has read every socket that was ready (``Pool.parse_reads``,
the next loop turn). In a burst of 1,024 ready sockets the last one's stamp then waits for the reads
before it (a ``recv`` and a stamp each), not for their parsing as well: 3 – 12 µs a read before, when
every read was parsed as it came (``benchmarks/bench_tail.py``: the ``reads`` stage). What is kept is
bounded (``PENDING_BYTES``): past it, a flood is parsed at once.

Reads land in one preallocated buffer per pool (``asyncio.BufferedProtocol``), not in a fresh bytes object
per read: asyncio's plain protocols ``recv`` into a new 256 KiB buffer each time, which glibc serves with
``mmap``/``munmap`` unless its dynamic mmap threshold happens to have been raised earlier in the process.
Measured here (``benchmarks/bench_client.py``, paced streams): 17 µs per chunk or 28 µs, depending only on
that allocation history. The buffer is shared safely: the loop fills it and calls ``buffer_updated``
back to back, and each read's bytes are copied out of it before the next one.

Only what a load generator needs: POST with a JSON body, keep-alive pooling, HTTP and HTTPS, status and body.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import time
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, cast
from urllib.parse import unquote, urlsplit

import httptools

_monotonic_ns = time.monotonic_ns

READ_BUFFER_BYTES = 256 * 1024  # what asyncio reads at most at once from a socket
# Reads kept for one loop turn's parse at most (a burst of 1,024 streams' SSE chunks is well under 1 MiB);
# past it they are parsed at once: the loop may read a socket 32 times a turn, 256 KiB each.
PENDING_BYTES = 4 * 1024 * 1024


class ConnectionClosed(Exception):
    """The server closed the connection before the response was complete."""

    def __init__(self, got_bytes: bool, message: str = "") -> None:
        super().__init__(message or "connection closed by the server")
        self.got_bytes = got_bytes


class HTTPParseError(Exception):
    pass


class Sink(Protocol):
    """What a response's body goes to. ``piece`` runs inside the protocol callback: keep it short."""

    def headers(
        self, status: int, retry_after: str | None = None, ratelimit: list[tuple[str, str]] | None = None
    ) -> None: ...

    def piece(self, data: bytes, t_ns: int) -> None: ...


class Connection(asyncio.BufferedProtocol):
    """One keep-alive connection of a ``Pool``: one request at a time, its body parsed as it arrives."""

    __slots__ = (
        "pool",
        "transport",
        "parser",
        "sink",
        "waiter",
        "status",
        "t_ns",
        "got_bytes",
        "complete",
        "closed",
        "idle_since",
        "error",
        "reused",
        "keep_alive",
        "retry_after",
        "ratelimit",
        "unparsed",
    )

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser: Any = None
        self.sink: Sink | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.status = 0
        self.t_ns = 0
        self.got_bytes = False
        self.complete = False
        self.closed = False
        self.idle_since = 0.0
        self.error: BaseException | None = None
        self.reused = False
        self.keep_alive = False
        self.retry_after: str | None = None
        self.ratelimit: list[tuple[str, str]] | None = None  # x-ratelimit-* headers (managed endpoints)
        self.unparsed = 0  # its reads waiting in the pool's pending ones

    # asyncio.BufferedProtocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio hands an asyncio.Transport; uvloop its own class with the same methods (not a subclass)
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.pool.read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` new bytes of the response: stamped now, parsed once the loop has read every socket
        that was ready (``Pool.parse_reads``)."""
        t_ns = _monotonic_ns()
        pool = self.pool
        pending = pool.pending
        if not pending:
            asyncio.get_running_loop().call_soon(pool.parse_reads)
        pending.append((self, pool.read_buffer[:nbytes].tobytes(), t_ns))
        self.unparsed += 1
        pool.pending_bytes += nbytes
        if pool.pending_bytes > PENDING_BYTES:  # a flood, not a burst: what is kept stays bounded
            pool.parse_reads()

    def data_received(self, data: bytes | memoryview) -> None:
        """Bytes handed over outside the pool's reads: stamped and parsed at once."""
        self.parse(data, _monotonic_ns())

    def parse(self, data: bytes | memoryview, t_ns: int) -> None:
        """Bytes of the response that arrived at ``t_ns``: parsed, their body pieces sunk with that stamp."""
        self.t_ns = t_ns
        self.got_bytes = True
        if self.parser is None:  # bytes outside a request: the connection is unusable
            self._fail(HTTPParseError("unexpected data on an idle connection"))
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(HTTPParseError("unexpected protocol upgrade"))
        except httptools.HttpParserError as exc:
            # httptools wraps what a callback raised (the sink's malformed / error events): unwrap it.
            cause = exc.__context__ if isinstance(exc, httptools.HttpParserCallbackError) else None
            self._fail(cause if cause is not None else HTTPParseError(f"invalid HTTP response: {exc}"))
        except Exception as exc:  # raised by the sink (a malformed event, an error event): end the request
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.unparsed:  # what this connection read before it closed comes first
            self.pool.parse_reads()
        self.closed = True
        self.pool._forget(self)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            if self.complete:
                waiter.set_result(None)
            else:
                # A body without a length ends at EOF: let the parser say whether that is a clean end.
                try:
                    if self.parser is not None:
                        self.parser.feed_data(b"")
                except Exception:
                    pass
                if self.complete and not waiter.done():
                    waiter.set_result(None)
                elif not waiter.done():
                    waiter.set_exception(ConnectionClosed(self.got_bytes, str(exc) if exc else ""))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        # A refusal's Retry-After (429, 503) says when to come back; a few headers per response, not per chunk.
        if len(name) == 11 and name.lower() == b"retry-after":
            self.retry_after = value.decode("latin-1")
        elif name[:1] in b"xX" and len(name) > 12 and name[:12].lower() == b"x-ratelimit-":
            # A managed endpoint's rate limits (loadgen.target.ratelimit): the step line keeps the latest.
            if self.ratelimit is None:
                self.ratelimit = []
            self.ratelimit.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if self.sink is not None:
            self.sink.headers(self.status, self.retry_after, self.ratelimit)

    def on_body(self, body: bytes) -> None:
        if self.sink is not None:
            self.sink.piece(body, self.t_ns)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()  # reset once the parser moves on
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ours
    def _fail(self, exc: BaseException) -> None:
        self.error = exc
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.abort()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def start(self, request: bytes, sink: Sink) -> asyncio.Future[None]:
        self.parser = httptools.HttpResponseParser(self)
        self.sink = sink
        self.status = 0
        self.got_bytes = False
        self.complete = False
        self.keep_alive = False
        self.retry_after = None
        self.ratelimit = None
        self.error = None
        self.waiter = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(request)
        return self.waiter

    def finish(self, reusable: bool) -> None:
        """The request is over (or abandoned): back to the pool or closed."""
        self.sink = None
        self.waiter = None
        parser, self.parser = self.parser, None
        if (
            reusable
            and self.complete
            and not self.closed
            and parser is not None
            and self.keep_alive
            and self.error is None
        ):
            self.pool._release(self)
        else:
            self.abort()
            self.pool._forget(self)
        self.pool.slots.release()


class ProxyError(ConnectionError):
    """The proxy would not open a tunnel to the target (its answer to CONNECT says why)."""


class Proxy:
    """An HTTP proxy: plain-HTTP targets are asked through it in absolute form, https targets through a
    CONNECT tunnel (TLS then runs end to end, inside it)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "") or not parts.hostname:
            raise ValueError(f"unsupported proxy {parts.scheme}://{parts.hostname}: use http://HOST:PORT")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.auth: str | None = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self.auth = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        self.shown = f"http://{self.host}:{self.port}"

    async def tunnel(self, authority: str) -> socket.socket:
        """A connected socket to the proxy with a tunnel open to ``authority`` (host:port)."""
        loop = asyncio.get_running_loop()
        family, kind, proto, _, address = (
            await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
            head = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
            if self.auth is not None:
                head.append(f"Proxy-Authorization: {self.auth}")
            await loop.sock_sendall(sock, ("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            reply = b""
            while b"\r\n\r\n" not in reply:
                piece = await loop.sock_recv(sock, 4096)
                if not piece or len(reply) > 65536:
                    raise ProxyError(
                        f"the proxy {self.shown} closed the tunnel to {authority} before it opened"
                    )
                reply += piece
            status = reply.split(b"\r\n", 1)[0].decode("latin-1", "replace")
            if status.split()[1:2] != ["200"]:
                raise ProxyError(f"the proxy {self.shown} answered CONNECT {authority} with {status!r}")
        except BaseException:
            sock.close()
            raise
        return sock


class Pool:
    """Keep-alive connections to one origin, at most ``limit`` open; waiting for one counts as latency.
    With ``proxy`` (an HTTP proxy's URL) every connection goes through it."""

    # What a new connection is made of: a subclass times every read when a benchmark asks for it
    # (``loadgen.run.readtrace``, set once at a worker's start), at no cost per read when it does not.
    connection_class: type[Connection] = Connection
    # (start, end, CPU) of each parse_reads, when a benchmark asks for them (loadgen.run.readtrace)
    parse_log: ClassVar[array[int] | None] = None

    def __init__(
        self,
        base_url: str,
        limit: int,
        connect_timeout_s: float,
        keepalive_s: float = 4.0,
        ssl_context: ssl.SSLContext | None = None,
        proxy: str | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme in {base_url!r}: use http:// or https://")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        https = parts.scheme == "https"
        self.ssl: ssl.SSLContext | None = (ssl_context or ssl.create_default_context()) if https else None
        default_port = 443 if parts.scheme == "https" else 80
        self.host_header = self.host if self.port == default_port else f"{self.host}:{self.port}"
        if ":" in self.host and not self.host.startswith("["):  # IPv6 literal
            self.host_header = f"[{self.host}]" + ("" if self.port == default_port else f":{self.port}")
        self.prefix = parts.path.rstrip("/")
        self.query = "?" + parts.query if parts.query else ""  # after the API path, where servers read it
        self.proxy = Proxy(proxy) if proxy else None
        self.authority = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        if self.proxy is not None and self.ssl is None:  # plain HTTP through a proxy: absolute-form targets
            self.prefix = f"http://{self.host_header}{self.prefix}"
        self.limit = limit
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.idle: deque[Connection] = deque()
        self.open: set[Connection] = set()
        self.slots = asyncio.Semaphore(limit)
        self.read_buffer = memoryview(bytearray(READ_BUFFER_BYTES))  # every connection's reads, one at a time
        self.pending: list[tuple[Connection, bytes, int]] = []  # reads stamped, not parsed yet
        self.pending_bytes = 0

    def parse_reads(self) -> None:
        """Parse the reads stamped since the last call, in the order they were read."""
        pending, self.pending = self.pending, []
        self.pending_bytes = 0
        log = Pool.parse_log  # one branch a loop turn, none a read
        if log is not None:
            cpu, start = time.thread_time_ns(), _monotonic_ns()
        for conn, data, t_ns in pending:
            conn.unparsed -= 1
            conn.parse(data, t_ns)
        if log is not None:
            log.extend((start, _monotonic_ns(), time.thread_time_ns() - cpu))

    def request_bytes(self, path: str, headers: dict[str, str], body: bytes) -> bytes:
        head = [f"POST {self.prefix}{path}{self.query} HTTP/1.1", f"Host: {self.host_header}"]
        if self.proxy is not None and self.ssl is None and self.proxy.auth is not None:
            head.append(f"Proxy-Authorization: {self.proxy.auth}")
        head += [f"{k}: {v}" for k, v in headers.items()]
        head += [f"Content-Length: {len(body)}", "Connection: keep-alive", "", ""]
        return "\r\n".join(head).encode("latin-1") + body

    async def acquire(self) -> Connection:
        await self.slots.acquire()
        try:
            now = time.monotonic()
            while self.idle:
                conn = self.idle.pop()  # the most recently used: the least likely to be timed out
                if conn.unparsed:  # bytes it read after its last response: parsed as its own (unexpected
                    self.parse_reads()  # data: the connection closes), never as the next request's
                if not conn.closed and now - conn.idle_since < self.keepalive_s:
                    conn.reused = True
                    return conn
                conn.abort()
                self.open.discard(conn)
            conn = await asyncio.wait_for(self._connect(), self.connect_timeout_s)
            conn.reused = False
            self.open.add(conn)
            return conn
        except BaseException:
            self.slots.release()
            raise

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        factory: Callable[[], Connection] = lambda: self.connection_class(self)  # noqa: E731
        proxy = self.proxy
        if proxy is None:
            host, port = self.host, self.port
        elif self.ssl is None:
            host, port = proxy.host, proxy.port
        else:  # TLS to the target, inside a tunnel through the proxy
            sock = await proxy.tunnel(self.authority)
            _, conn = await loop.create_connection(
                factory, sock=sock, ssl=self.ssl, server_hostname=self.host
            )
            return conn
        hostname = self.host if self.ssl else None
        _, conn = await loop.create_connection(factory, host, port, ssl=self.ssl, server_hostname=hostname)
        return conn

    def _release(self, conn: Connection) -> None:
        conn.idle_since = time.monotonic()
        self.idle.append(conn)

    def _forget(self, conn: Connection) -> None:
        self.open.discard(conn)
        try:
            self.idle.remove(conn)
        except ValueError:
            pass

    async def aclose(self) -> None:
        for conn in list(self.open):
            conn.abort()
        self.open.clear()
        self.idle.clear()

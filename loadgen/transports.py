"""The two ways a request reaches the server, behind one interface: ``h1`` (httptools protocol, the hot
path, see ``loadgen.h1``) and ``aiohttp`` (C HTTP parser: a second, independent implementation, for a server
that trips h1 and as the tests' cross-check). httpx was a third until it was dropped: 151 µs of client CPU a
chunk against h1's 18 (docs/numbers.md), a run on it measured the client more than the server; ramp still
uses httpx off the hot path (probe, telemetry, attach).

Owns opening each library's pool (sized, keep-alive shorter than the server's, its proxy and TLS), one
``exchange`` per request (send, status, body into the shared ``loadgen.stream.StreamSink``) and mapping each
library's exceptions to an ``ErrorKind`` with a human reason (``loadgen.target.http.reason``).

Decisions (and why):

* ``sent_ns`` is taken just before the request is handed to the HTTP library, so waiting for a pooled
  connection (``max_connections``) counts in TTFT, like connection setup.
* Idle pooled connections are dropped after 4 s, under the 5 s keep-alive of uvicorn (vLLM, SGLang), so a
  request is never written into a connection the server is closing; h1 retries once, on a new connection,
  a reused one the server had closed before answering.
* Every transport goes through the proxy ``loadgen.target.connect.proxy_for`` chooses (the one rule of every
  call to the target: --proxy, --no-proxy, else the environment's, loopback never), or direct.
* aiohttp reads with a 4 MiB buffer: its 64 KiB default throttled reads of 50K-token contexts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from loadgen.config import Api, Transport
from loadgen.stream import ERROR_BODY_BYTES, LiveCounter, Stream, StreamSink, TransportError, error_text
from loadgen.target.connect import is_https, proxy_for, tls_context
from loadgen.target.http import reason, target_url
from loadgen.target.ratelimit import ratelimit_pairs
from loadgen.types import ErrorKind, Target

if TYPE_CHECKING:
    import aiohttp

    from loadgen.h1 import Pool

__all__ = ["KEEPALIVE_S", "HTTPTransport", "api_path", "map_exception", "open_transport"]

KEEPALIVE_S = 4.0
READ_BUFSIZE = 4 * 1024 * 1024

_monotonic_ns = time.monotonic_ns


def api_path(api: Api) -> str:
    return {"chat": "/v1/chat/completions", "responses": "/v1/responses"}.get(api, "/v1/completions")


class HTTPTransport(Protocol):
    """One pool of connections to the target; ``exchange`` streams one request into its ``Stream``."""

    async def exchange(
        self, st: Stream, api: Api, url: str, body: bytes, keep_text: bool, live: LiveCounter | None
    ) -> None: ...

    async def aclose(self) -> None: ...


def open_transport(name: Transport, target: Target, max_connections: int) -> HTTPTransport:
    """The pool for ``name``; call inside the running loop that will use it (sessions bind to it)."""
    if name == "h1":
        return H1Transport(target, max_connections)
    return AiohttpTransport(target, max_connections)


def connect_text(exc: BaseException, url: str, connect_timeout_s: float) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return f"cannot connect to {url} (no connection within {connect_timeout_s:g} s)"
    return f"cannot connect to {url} ({reason(exc)})"


class H1Transport:
    def __init__(self, target: Target, max_connections: int) -> None:
        from loadgen.h1 import Pool

        self.connect_timeout_s = target.connect_timeout_s
        self.pool: Pool = Pool(
            target_url(target),
            max_connections,
            target.connect_timeout_s,
            KEEPALIVE_S,
            # Only for https: building a context reads the CA store, 30 ms that held a plain-http run's first
            # request (its send 40-50 ms after its intended start, in its TTFT, with --warmup 0).
            tls_context(target) if is_https(target) else None,
            proxy_for(target),
        )

    async def exchange(
        self, st: Stream, api: Api, url: str, body: bytes, keep_text: bool, live: LiveCounter | None
    ) -> None:
        from loadgen.h1 import ConnectionClosed, HTTPParseError

        pool = self.pool
        request = pool.request_bytes(api_path(api), st.headers, body)
        for attempt in (0, 1):
            st.sent_ns = _monotonic_ns()
            try:
                conn = await pool.acquire()
            except (OSError, asyncio.TimeoutError) as exc:
                raise TransportError(
                    ErrorKind.CONNECT, connect_text(exc, url, self.connect_timeout_s)
                ) from None
            sink = StreamSink(st, keep_text, live)
            reusable = False
            try:
                await conn.start(request, sink)
                reusable = True
            except ConnectionClosed as exc:
                if conn.reused and not exc.got_bytes and attempt == 0:
                    continue  # a keep-alive connection the server had closed: retry once, on a new one
                if sink.error_body is not None:
                    raise sink.http_error() from None
                st.end_ns = sink.t
                return  # cut: send() decides between OK (it had finished) and STREAM_CUT
            except HTTPParseError as exc:
                raise TransportError(ErrorKind.MALFORMED, str(exc)) from None
            finally:
                conn.finish(reusable)
            if sink.error_body is not None:
                raise sink.http_error()
            sink.eof()
            return

    async def aclose(self) -> None:
        await self.pool.aclose()


class AiohttpTransport:
    def __init__(self, target: Target, max_connections: int) -> None:
        import aiohttp

        connector = aiohttp.TCPConnector(
            limit=max_connections,
            limit_per_host=0,
            force_close=False,
            keepalive_timeout=KEEPALIVE_S,
            ttl_dns_cache=300,
            ssl=tls_context(target) if is_https(target) else True,
        )
        self.session: aiohttp.ClientSession = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(
                total=None, connect=None, sock_read=None, sock_connect=target.connect_timeout_s
            ),
            read_bufsize=READ_BUFSIZE,
            auto_decompress=False,
            trust_env=False,
        )
        self.proxy = proxy_for(target)

    async def exchange(
        self, st: Stream, api: Api, url: str, body: bytes, keep_text: bool, live: LiveCounter | None
    ) -> None:
        st.sent_ns = _monotonic_ns()
        resp = await self.session.post(url, data=body, headers=st.headers, proxy=self.proxy)
        try:
            st.status = resp.status
            st.ratelimit = ratelimit_pairs(resp.headers.items())
            chunks = resp.content.iter_any()
            if not 200 <= resp.status < 300:
                st.retry_after = resp.headers.get("Retry-After")
                raise await read_error(st, chunks)
            await read_stream(st, chunks, keep_text, live)
        finally:
            if st.clean_eof:
                resp.release()
            else:
                resp.close()

    async def aclose(self) -> None:
        await self.session.close()


async def read_error(st: Stream, chunks: AsyncIterator[bytes]) -> TransportError:
    """A non-2xx answer from a library transport: its body, bounded, into the error text."""
    data = b""
    async for piece in chunks:
        data += piece
        if len(data) >= ERROR_BODY_BYTES:
            break
    else:
        st.clean_eof = True
    st.end_ns = _monotonic_ns()
    return error_text(st.status or 0, data, st.headers)


async def read_stream(
    st: Stream, chunks: AsyncIterator[bytes], keep_text: bool, live: LiveCounter | None
) -> None:
    """Library transports: one timestamp per read, then the same sink as the h1 path."""
    sink = StreamSink(st, keep_text, live)
    piece_in = sink.piece
    async for piece in chunks:
        piece_in(piece, _monotonic_ns())
    sink.eof()


def map_exception(exc: Exception, st: Stream, url: str, connect_timeout_s: float) -> tuple[ErrorKind, str]:
    """Any library failure as (kind, message): connect errors, invalid responses, a cut stream."""
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    before_response = st.status is None
    detail = str(exc).strip() or name
    no_connection = f"cannot connect to {url} (no connection within {connect_timeout_s:g} s)"
    if module.startswith("aiohttp"):
        import aiohttp

        if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.InvalidURL):
            return ErrorKind.CONNECT, f"cannot connect to {url} ({reason(exc)})"
        if isinstance(exc, aiohttp.ServerTimeoutError) and before_response:
            return ErrorKind.CONNECT, no_connection
        if isinstance(exc, aiohttp.ClientResponseError) and not isinstance(exc, aiohttp.ClientPayloadError):
            return ErrorKind.MALFORMED, f"invalid HTTP response from {url}: {detail}"
    elif isinstance(exc, OSError) and before_response:
        return ErrorKind.CONNECT, f"cannot connect to {url} ({reason(exc)})"
    where = "before the response" if before_response else "during the stream"
    return ErrorKind.STREAM_CUT, f"connection lost {where} ({name}: {detail})"[:300]

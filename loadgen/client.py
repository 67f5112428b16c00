"""The streaming HTTP client: one ``RequestSpec`` in, one streamed request, one ``RequestResult`` out.

Owns the hot path of a load test: building the OpenAI-style body, sending it over a pooled connection,
reading the SSE stream piece by piece with a ``time.monotonic_ns()`` stamp per socket read, classifying
events (``loadgen.sse``), enforcing the connect / TTFT / idle / total timeouts, and turning every way a
request can fail into an ``ErrorKind``. ``Client.send`` never raises for a failed request.

Two transports sit behind one interface: aiohttp (default: C HTTP parser, cheapest per chunk) and httpx.

Timeouts cost no timer per chunk: each request arms one ``loop.call_at`` watchdog; a read only stores its
arrival time, and the watchdog, when it fires, either finds the deadline really passed (and cancels the
request's task) or re-arms itself for the new deadline. So a stream of N chunks sets about
``duration / idle_timeout`` timers instead of N.

Decisions (and why):

* The idle timeout applies between reads from the first output token on; before it, the TTFT timeout covers
  everything (a queued request may legitimately wait long after its headers or role chunk).
* A stream is complete when it delivered ``[DONE]``, or ``usage``, or — when the body ended cleanly — a
  ``finish_reason``. A stream cut abruptly (reset, truncated chunked body) or stalled is complete only with
  ``[DONE]`` or both ``finish_reason`` and ``usage``; otherwise it is ``STREAM_CUT`` / a timeout.
* A complete stream without any output-text chunk is ``EMPTY_OUTPUT`` (there is no first token to time),
  even if ``usage`` counted tokens (e.g. only special tokens).
* An ``{"error": ...}`` event inside a 200 stream is ``HTTP_429`` when its code is 429, else
  ``HTTP_STATUS`` with the error's code (or 200) as ``http_status`` and the server's message.
* After ``[DONE]`` the body is read to its end (briefly, at most ``_DRAIN_GRACE_NS``) so the connection
  goes back to the pool instead of being closed: a closed connection per request would add TCP setup to
  every TTFT.
* ``sent_ns`` is taken just before the request is handed to the HTTP library, so waiting for a pooled
  connection (``max_connections``) counts in TTFT, like connection setup.
* Idle pooled connections are dropped after 4 s, under the 5 s keep-alive of uvicorn (vLLM, SGLang), so a
  request is never written into a connection the server is closing.
* Proxies from the environment are ignored (``trust_env=False``) so the path measured is the direct one.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import time
from collections.abc import AsyncIterator
from typing import Any

from loadgen.sse import DONE, TEXT_CHUNK, Event, SSEParser, classify
from loadgen.types import ErrorKind, Outcome, RequestResult, RequestSpec, Target

__all__ = ["TRANSPORTS", "Client", "LiveCounter", "build_body", "endpoint_url"]

TRANSPORTS = ("h1", "aiohttp", "httpx")  # h1: httptools protocol, the hot path (see loadgen.h1)

_READ_BUFSIZE = 4 * 1024 * 1024  # aiohttp's 64 KiB default throttled reads of 50K-token contexts
_KEEPALIVE_S = 4.0
_DRAIN_GRACE_NS = 1_000_000_000
_ERROR_BODY_BYTES = 4096
_ERROR_TEXT_CHARS = 200

_monotonic_ns = time.monotonic_ns


class LiveCounter:
    """Tokens seen so far by every stream that shares it; the engine samples it for a live token rate."""

    __slots__ = ("tokens",)

    def __init__(self) -> None:
        self.tokens = 0


def endpoint_url(target: Target, api: str) -> str:
    return target.base_url + ("/v1/chat/completions" if api == "chat" else "/v1/completions")


def build_body(spec: RequestSpec) -> bytes:
    body: dict[str, Any] = {"model": spec.model}
    if spec.api == "chat":
        body["messages"] = [{"role": role, "content": content} for role, content in spec.messages]
    else:
        body["prompt"] = spec.prompt
    body["max_tokens"] = spec.max_tokens
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    for key, value in spec.extra_body:
        body[key] = value
    return json.dumps(body, ensure_ascii=False).encode()


class _Stream:
    """Mutable state of one request, shared by the read loop and its watchdog timer."""

    __slots__ = (
        "task",
        "loop",
        "sent_ns",
        "ttft_deadline",
        "total_deadline",
        "idle_ns",
        "last_read_ns",
        "chunk_times",
        "handle",
        "fired",
        "status",
        "done_ns",
        "end_ns",
        "finish_reason",
        "usage",
        "ids",
        "ids_extra",
        "text",
        "clean_eof",
        "headers",
        "request_id",
    )

    def __init__(self, task: asyncio.Task[Any], target: Target, sent_ns: int) -> None:
        self.task = task
        self.loop = asyncio.get_running_loop()
        self.sent_ns = sent_ns
        self.ttft_deadline = sent_ns + int(target.ttft_timeout_s * 1e9)
        self.total_deadline = sent_ns + int(target.total_timeout_s * 1e9)
        self.idle_ns = int(target.idle_timeout_s * 1e9)
        self.last_read_ns = sent_ns
        self.chunk_times: list[int] = []
        self.fired: ErrorKind | None = None
        self.status: int | None = None
        self.done_ns: int | None = None
        self.end_ns: int | None = None
        self.finish_reason: str | None = None
        self.usage: Event | None = None
        self.ids: list[tuple[int, int]] | None = None  # (text chunk index or -1, len(token_ids))
        self.ids_extra = 0  # token_ids beyond one per text chunk (multi-token chunks, text-less tokens)
        self.text: list[str] | None = None
        self.clean_eof = False
        self.headers: dict[str, str] = {}
        self.request_id = ""
        self.handle: asyncio.TimerHandle | None = None
        # Never sleep longer than one idle period: the first token may arrive meanwhile, and from then on
        # the idle deadline (possibly far earlier than the TTFT one) applies.
        self._arm(min(self.ttft_deadline, self.total_deadline, sent_ns + self.idle_ns))

    def _arm(self, due_ns: int) -> None:
        # loop.time() is time.monotonic(): the same clock as monotonic_ns(). The 1 ms slack keeps a
        # coarse loop clock (uvloop) from firing just early and re-arming in a spin.
        self.handle = self.loop.call_at(due_ns / 1e9 + 0.001, self._check)

    def _check(self) -> None:
        self.handle = None
        now = _monotonic_ns()
        if self.done_ns is not None:
            due, kind = self.done_ns + _DRAIN_GRACE_NS, ErrorKind.IDLE_TIMEOUT
        elif now >= self.total_deadline:
            due, kind = self.total_deadline, ErrorKind.TOTAL_TIMEOUT
        elif not self.chunk_times:
            due, kind = self.ttft_deadline, ErrorKind.TTFT_TIMEOUT
        else:
            due, kind = self.last_read_ns + self.idle_ns, ErrorKind.IDLE_TIMEOUT
        if now >= due:
            self.fired = kind
            self.task.cancel()
        else:
            self._arm(min(due, self.total_deadline, now + self.idle_ns))

    def on_done(self, t: int) -> None:
        self.done_ns = t
        self.disarm()
        self._arm(t + _DRAIN_GRACE_NS)

    def disarm(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def complete(self) -> bool:
        if self.done_ns is not None or self.usage is not None:
            return True
        return self.clean_eof and self.finish_reason is not None


class _Sink:
    """Receives a response body piece by piece, each with its arrival time: the per-chunk hot path.

    Non-2xx bodies are collected (bounded) for the error message; 2xx bodies are SSE, classified event by
    event with nothing else on the fast path.
    """

    __slots__ = (
        "client",
        "st",
        "feed",
        "parser",
        "add_time",
        "live",
        "keep_text",
        "stopped",
        "t",
        "error_body",
    )

    def __init__(self, client: Client, st: _Stream, keep_text: bool, live: LiveCounter | None) -> None:
        self.client = client
        self.st = st
        self.parser = SSEParser()
        self.feed = self.parser.feed
        self.add_time = st.chunk_times.append
        self.live = live
        self.keep_text = keep_text
        self.stopped = False
        self.t = st.sent_ns
        self.error_body: bytearray | None = None

    def headers(self, status: int) -> None:
        self.st.status = status
        if not 200 <= status < 300:
            self.error_body = bytearray()

    def piece(self, piece: bytes, t: int) -> None:
        st = self.st
        st.last_read_ns = t
        self.t = t
        if self.error_body is not None:
            if len(self.error_body) < _ERROR_BODY_BYTES:
                self.error_body += piece[: _ERROR_BODY_BYTES - len(self.error_body)]
            return
        if self.stopped:
            return  # draining after [DONE] so the connection can be reused
        live = self.live
        for payload in self.feed(piece):
            event = classify(payload, self.keep_text)
            if event is TEXT_CHUNK:
                self.add_time(t)
                if live is not None:
                    live.tokens += 1
            elif self.client._rare_event(st, event, t, live):
                self.stopped = True
                break

    def http_error(self) -> _TransportError:
        st = self.st
        st.end_ns = self.t
        status = st.status or 0
        text = " ".join(bytes(self.error_body or b"").decode("utf-8", "replace").split())[:_ERROR_TEXT_CHARS]
        kind = ErrorKind.HTTP_429 if status == 429 else ErrorKind.HTTP_STATUS
        return _TransportError(kind, f"HTTP {status}: {text}" if text else f"HTTP {status}")

    def eof(self) -> None:
        """The body ended cleanly."""
        st = self.st
        st.clean_eof = True
        if self.stopped:
            return
        t = self.t
        leftover = self.parser.pending
        for payload in self.parser.close():
            if self.client._rare_event(st, classify(payload, self.keep_text), t, self.live):
                break
        if st.end_ns is None:
            st.end_ns = t
        if not st.chunk_times and not st.complete() and leftover.strip():
            # Bytes came but never formed an event: not an SSE stream (e.g. a JSON reply to stream=true).
            raise _TransportError(
                ErrorKind.MALFORMED,
                "response is not an SSE stream: " + leftover[:_ERROR_TEXT_CHARS].decode("utf-8", "replace"),
            )


class _TransportError(Exception):
    """A failure already mapped to its kind (raised inside the client, never out of ``send``)."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Client:
    """Sends streamed requests to one target over a bounded connection pool.

    Create it (anywhere), call ``send`` from coroutines on one event loop, ``await aclose()`` at the end.
    """

    def __init__(self, target: Target, max_connections: int, transport: str = "aiohttp") -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.target = target
        self.max_connections = max_connections
        self.transport = transport
        key = os.environ.get(target.api_key_env, "") if target.api_key_env else ""
        self._secret = key
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",  # a compressed SSE stream would be buffered by the decoder
        }
        headers.update(dict(target.headers))
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._headers = headers
        self._session: Any = None
        self._httpx: Any = None
        self._pool: Any = None
        self._id_prefix = f"ramp-{os.getpid()}-"
        self._sent = 0

    def __repr__(self) -> str:
        return f"Client(url={self.target.base_url!r}, transport={self.transport!r}, max_connections={self.max_connections})"

    # -- lifecycle -------------------------------------------------------------------------------------

    def _ensure(self) -> None:
        # Sessions are made on first use: they must be created inside the running loop that uses them.
        target = self.target
        if self.transport == "h1":
            from loadgen.h1 import Pool

            self._pool = Pool(target.base_url, self.max_connections, target.connect_timeout_s, _KEEPALIVE_S)
        elif self.transport == "aiohttp":
            import aiohttp

            connector = aiohttp.TCPConnector(
                limit=self.max_connections,
                limit_per_host=0,
                force_close=False,
                keepalive_timeout=_KEEPALIVE_S,
                ttl_dns_cache=300,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(
                    total=None, connect=None, sock_read=None, sock_connect=target.connect_timeout_s
                ),
                read_bufsize=_READ_BUFSIZE,
                auto_decompress=False,
                trust_env=False,
            )
        else:
            import httpx

            self._httpx = httpx.AsyncClient(
                limits=httpx.Limits(
                    max_connections=self.max_connections,
                    max_keepalive_connections=self.max_connections,
                    keepalive_expiry=_KEEPALIVE_S,
                ),
                timeout=httpx.Timeout(None, connect=target.connect_timeout_s),
                trust_env=False,
            )

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._httpx is not None:
            await self._httpx.aclose()
            self._httpx = None

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- one request -------------------------------------------------------------------------------------

    async def send(
        self, spec: RequestSpec, intended_ns: int, live: LiveCounter | None = None
    ) -> RequestResult:
        """Stream one request. Returns ERROR results instead of raising; CANCELLED if the task is cancelled."""
        if self._session is None and self._httpx is None and self._pool is None:
            self._ensure()
        url = endpoint_url(self.target, spec.api)
        body = build_body(spec)
        task = asyncio.current_task()
        assert task is not None, "Client.send must run inside an asyncio task"
        st = _Stream(task, self.target, _monotonic_ns())
        self._sent += 1
        st.request_id = self._id_prefix + str(self._sent)
        st.headers = {**self._headers, "X-Request-Id": st.request_id}
        if spec.keep_text:
            st.text = []
        try:
            try:
                if self._pool is not None:
                    await self._exchange_h1(st, spec.api, url, body, spec.keep_text, live)
                elif self._session is not None:
                    await self._exchange_aiohttp(st, url, body, spec.keep_text, live)
                else:
                    await self._exchange_httpx(st, url, body, spec.keep_text, live)
            finally:
                st.disarm()
        except asyncio.CancelledError:
            if st.fired is None:
                return self._result(spec, intended_ns, st, Outcome.CANCELLED)
            uncancel = getattr(task, "uncancel", None)  # 3.11+: keep the task's cancel count balanced
            if uncancel is not None:
                uncancel()
            st.end_ns = _monotonic_ns() if st.end_ns is None else st.end_ns
            return self._finish(spec, intended_ns, st, st.fired, self._timeout_text(st.fired))
        except _TransportError as exc:
            st.end_ns = _monotonic_ns() if st.end_ns is None else st.end_ns
            return self._finish(spec, intended_ns, st, exc.kind, exc.message)
        except Exception as exc:  # any library failure becomes a result: the engine must keep running
            st.end_ns = _monotonic_ns() if st.end_ns is None else st.end_ns
            kind, message = self._map_exception(exc, st, url)
            return self._finish(spec, intended_ns, st, kind, message)
        if st.end_ns is None:
            st.end_ns = _monotonic_ns()
        return self._finish(
            spec, intended_ns, st, ErrorKind.STREAM_CUT, "stream ended before finish_reason/[DONE]"
        )

    async def _exchange_h1(
        self, st: _Stream, api: str, url: str, body: bytes, keep_text: bool, live: LiveCounter | None
    ) -> None:
        from loadgen.h1 import ConnectionClosed, HTTPParseError

        pool = self._pool
        request = pool.request_bytes(
            "/v1/chat/completions" if api == "chat" else "/v1/completions", st.headers, body
        )
        for attempt in (0, 1):
            st.sent_ns = _monotonic_ns()
            try:
                conn = await pool.acquire()
            except (OSError, asyncio.TimeoutError) as exc:
                raise _TransportError(ErrorKind.CONNECT, self._connect_text(exc, url)) from None
            sink = _Sink(self, st, keep_text, live)
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
                raise _TransportError(ErrorKind.MALFORMED, str(exc)) from None
            finally:
                conn.finish(reusable)
            if sink.error_body is not None:
                raise sink.http_error()
            sink.eof()
            return

    def _connect_text(self, exc: BaseException, url: str) -> str:
        if isinstance(exc, asyncio.TimeoutError):
            return f"cannot connect to {url} (no connection within {self.target.connect_timeout_s:g} s)"
        return f"cannot connect to {url} ({_os_reason(exc)})"

    async def _exchange_aiohttp(
        self, st: _Stream, url: str, body: bytes, keep_text: bool, live: LiveCounter | None
    ) -> None:
        st.sent_ns = _monotonic_ns()
        resp = await self._session.post(url, data=body, headers=st.headers)
        try:
            st.status = resp.status
            chunks = resp.content.iter_any()
            if not 200 <= resp.status < 300:
                raise await self._http_error(st, chunks)
            await self._read_stream(st, chunks, keep_text, live)
        finally:
            if st.clean_eof:
                resp.release()
            else:
                resp.close()

    async def _exchange_httpx(
        self, st: _Stream, url: str, body: bytes, keep_text: bool, live: LiveCounter | None
    ) -> None:
        client = self._httpx
        request = client.build_request("POST", url, content=body, headers=st.headers)
        st.sent_ns = _monotonic_ns()
        resp = await client.send(request, stream=True)
        chunks = resp.aiter_raw()
        try:
            st.status = resp.status_code
            if not 200 <= resp.status_code < 300:
                raise await self._http_error(st, chunks)
            await self._read_stream(st, chunks, keep_text, live)
        finally:
            await chunks.aclose()
            await resp.aclose()

    async def _http_error(self, st: _Stream, chunks: AsyncIterator[bytes]) -> _TransportError:
        status = st.status or 0
        data = b""
        async for piece in chunks:
            data += piece
            if len(data) >= _ERROR_BODY_BYTES:
                break
        else:
            st.clean_eof = True
        st.end_ns = _monotonic_ns()
        text = " ".join(data.decode("utf-8", "replace").split())[:_ERROR_TEXT_CHARS]
        kind = ErrorKind.HTTP_429 if status == 429 else ErrorKind.HTTP_STATUS
        return _TransportError(kind, f"HTTP {status}: {text}" if text else f"HTTP {status}")

    async def _read_stream(
        self, st: _Stream, chunks: AsyncIterator[bytes], keep_text: bool, live: LiveCounter | None
    ) -> None:
        """Library transports: one timestamp per read, then the same sink as the h1 path."""
        sink = _Sink(self, st, keep_text, live)
        piece_in = sink.piece
        async for piece in chunks:
            piece_in(piece, _monotonic_ns())
        sink.eof()

    def _rare_event(self, st: _Stream, event: Event, t: int, live: LiveCounter | None) -> bool:
        """Everything but a plain text chunk. Returns True when the stream is over ([DONE])."""
        if event is DONE:
            st.end_ns = t
            st.on_done(t)
            return True
        if event.malformed is not None:
            st.end_ns = t
            raise _TransportError(ErrorKind.MALFORMED, event.malformed)
        if event.error is not None:
            st.end_ns = t
            code = event.error_code
            if code is not None:
                st.status = code
            kind = ErrorKind.HTTP_429 if code == 429 else ErrorKind.HTTP_STATUS
            raise _TransportError(
                kind, f"error event in stream{f' (code {code})' if code else ''}: {event.error}"
            )
        tokens = event.tokens
        if event.has_text:
            st.chunk_times.append(t)
            if tokens is not None:
                if st.ids is None:
                    st.ids = []
                st.ids.append((len(st.chunk_times) - 1, tokens))
                st.ids_extra += tokens - 1
            if live is not None:
                live.tokens += 1 if tokens is None else tokens
            if st.text is not None and event.text:
                st.text.append(event.text)
        elif tokens:
            if st.ids is None:
                st.ids = []
            st.ids.append((-1, tokens))
            st.ids_extra += tokens
            if live is not None:
                live.tokens += tokens
        if event.finish_reason is not None:
            st.finish_reason = event.finish_reason
        if event.has_usage:
            st.usage = event
            st.end_ns = t
        return False

    # -- results -----------------------------------------------------------------------------------------

    def _finish(
        self, spec: RequestSpec, intended_ns: int, st: _Stream, kind: ErrorKind, message: str
    ) -> RequestResult:
        """Decide OK / EMPTY_OUTPUT / the given error from what the stream delivered."""
        if kind in (ErrorKind.HTTP_429, ErrorKind.HTTP_STATUS, ErrorKind.MALFORMED, ErrorKind.CONNECT):
            return self._result(spec, intended_ns, st, Outcome.ERROR, kind, message)
        if st.complete():
            if not st.chunk_times:
                return self._result(
                    spec,
                    intended_ns,
                    st,
                    Outcome.ERROR,
                    ErrorKind.EMPTY_OUTPUT,
                    "stream finished without output text",
                )
            return self._result(spec, intended_ns, st, Outcome.OK)
        return self._result(spec, intended_ns, st, Outcome.ERROR, kind, message)

    def _timeout_text(self, kind: ErrorKind) -> str:
        t = self.target
        if kind is ErrorKind.TTFT_TIMEOUT:
            return f"no first token within {t.ttft_timeout_s:g} s"
        if kind is ErrorKind.IDLE_TIMEOUT:
            return f"no data for {t.idle_timeout_s:g} s"
        return f"request took longer than {t.total_timeout_s:g} s"

    def _result(
        self,
        spec: RequestSpec,
        intended_ns: int,
        st: _Stream,
        outcome: Outcome,
        kind: ErrorKind | None = None,
        message: str = "",
    ) -> RequestResult:
        times = st.chunk_times
        usage = st.usage
        counted = len(times) + st.ids_extra
        if usage is not None and usage.completion_tokens is not None:
            output_tokens, exact = usage.completion_tokens, True
        else:
            output_tokens, exact = counted, False
        chunk_tokens: tuple[int, ...] | None = None
        if st.ids is not None:
            per_chunk = [1] * len(times)
            for index, n in st.ids:
                if index >= 0:
                    per_chunk[index] = n
            chunk_tokens = tuple(per_chunk)
        if self._secret and message:
            message = message.replace(self._secret, "***")
        end_ns = st.end_ns if st.end_ns is not None else _monotonic_ns()
        return RequestResult(
            outcome=outcome,
            intended_ns=intended_ns,
            sent_ns=st.sent_ns,
            end_ns=end_ns,
            first_token_ns=times[0] if times else None,
            last_token_ns=times[-1] if times else None,
            chunk_times_ns=tuple(times),
            chunk_tokens=chunk_tokens,
            output_tokens=output_tokens,
            input_tokens=usage.prompt_tokens if usage is not None else None,
            cached_tokens=usage.cached_tokens if usage is not None else None,
            tokens_exact=exact,
            error_kind=kind,
            error_message=message,
            http_status=st.status,
            finish_reason=st.finish_reason,
            bucket=spec.bucket,
            cache_class=spec.cache_class,
            session_id=spec.session_id,
            turn=spec.turn,
            input_tokens_target=spec.input_tokens_target,
            max_tokens=spec.max_tokens,
            output_text="".join(st.text) if st.text is not None else None,
            request_id=st.request_id,
        )

    def _map_exception(self, exc: Exception, st: _Stream, url: str) -> tuple[ErrorKind, str]:
        name = type(exc).__name__
        module = type(exc).__module__ or ""
        before_response = st.status is None
        detail = str(exc).strip() or name
        if module.startswith("aiohttp"):
            import aiohttp

            if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.InvalidURL):
                return ErrorKind.CONNECT, f"cannot connect to {url} ({_os_reason(exc)})"
            if isinstance(exc, aiohttp.ServerTimeoutError) and before_response:
                return (
                    ErrorKind.CONNECT,
                    f"cannot connect to {url} (no connection within {self.target.connect_timeout_s:g} s)",
                )
            if isinstance(exc, aiohttp.ClientResponseError) and not isinstance(
                exc, aiohttp.ClientPayloadError
            ):
                return ErrorKind.MALFORMED, f"invalid HTTP response from {url}: {detail}"
        elif module.startswith(("httpx", "httpcore")):
            import httpx

            if isinstance(exc, httpx.ConnectTimeout):
                return (
                    ErrorKind.CONNECT,
                    f"cannot connect to {url} (no connection within {self.target.connect_timeout_s:g} s)",
                )
            if isinstance(exc, httpx.ConnectError | httpx.UnsupportedProtocol | httpx.InvalidURL):
                return ErrorKind.CONNECT, f"cannot connect to {url} ({_os_reason(exc)})"
            if isinstance(exc, httpx.DecodingError):
                return ErrorKind.MALFORMED, f"undecodable response from {url}: {detail}"
        elif isinstance(exc, OSError) and before_response:
            return ErrorKind.CONNECT, f"cannot connect to {url} ({_os_reason(exc)})"
        where = "before the response" if before_response else "during the stream"
        return ErrorKind.STREAM_CUT, f"connection lost {where} ({name}: {detail})"[:300]


def _os_reason(exc: BaseException) -> str:
    """A short human reason ('connection refused', 'name resolution failed') from an exception chain."""
    seen: BaseException | None = exc
    for _ in range(6):
        if seen is None:
            break
        code = getattr(seen, "errno", None)
        if code is None:
            os_error = getattr(seen, "os_error", None)
            code = getattr(os_error, "errno", None)
        if isinstance(code, int) and code in errno.errorcode:
            return os.strerror(code).lower()
        if type(seen).__name__ in ("gaierror", "ClientConnectorDNSError"):
            return "name resolution failed"
        seen = seen.__cause__ or seen.__context__
    text = str(exc).strip()
    return text if text else type(exc).__name__

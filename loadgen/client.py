"""The streaming HTTP client: one ``RequestSpec`` in, one streamed request, one ``RequestResult`` out.

Owns the hot path of a load test: building the OpenAI-style body, sending it over a pooled connection,
reading the SSE stream piece by piece with a ``time.monotonic_ns()`` stamp per socket read, classifying
events (``loadgen.sse``), enforcing the connect / TTFT / idle / total timeouts, and turning every way a
request can fail into an ``ErrorKind``. ``Client.send`` never raises for a failed request.

The transports (h1, aiohttp) live in ``loadgen.transports``; one request's state, its watchdog
timer and the per-chunk sink in ``loadgen.stream``. This module owns the request (body, headers, id) and
the decision of what the stream it got amounts to.

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
* After ``[DONE]`` the body is read to its end (briefly, at most ``stream.DRAIN_GRACE_NS``) so the connection
  goes back to the pool instead of being closed: a closed connection per request would add TCP setup to
  every TTFT.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

from loadgen.config import APIS, TRANSPORTS, Api, Transport
from loadgen.stream import LiveCounter, Stream, TransportError
from loadgen.target.http import api_key, scrub, target_headers, target_url, url_secrets
from loadgen.target.refusals import retry_after_s
from loadgen.tool_messages import response_items
from loadgen.transports import HTTPTransport, api_path, map_exception, open_transport
from loadgen.types import ErrorKind, Outcome, RequestResult, RequestSpec, Target, ToolCall

__all__ = ["TRANSPORTS", "Client", "LiveCounter", "build_body", "endpoint_url"]

_monotonic_ns = time.monotonic_ns


def endpoint_url(target: Target, api: Api) -> str:
    """Where ``api`` is sent: its path on the target, the query string after it, no ``user:password@``."""
    return target_url(target, api_path(api))


def build_body(spec: RequestSpec) -> bytes:
    body: dict[str, object] = {"model": spec.model}
    if spec.api == "responses":
        # The Responses API: messages as input items, usage always in response.completed (no stream_options)
        body["input"] = (
            response_items(spec)
            if spec.message_extras
            else [{"role": role, "content": content} for role, content in spec.messages]
        )
        body["max_output_tokens"] = spec.max_tokens
        body["stream"] = True
    else:
        if spec.api == "chat":
            messages: list[dict[str, object]] = [
                {"role": role, "content": content} for role, content in spec.messages
            ]
            for index, extra in spec.message_extras:
                messages[index].update(extra)
            body["messages"] = messages
        else:
            body["prompt"] = spec.prompt
        body["max_tokens"] = spec.max_tokens
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    for key, value in spec.extra_body:
        body[key] = value
    return json.dumps(body, ensure_ascii=False).encode()


class Client:
    """Sends streamed requests to one target over a bounded connection pool.

    Create it (anywhere), call ``send`` from coroutines on one event loop, ``await aclose()`` at the end.
    """

    def __init__(self, target: Target, max_connections: int, transport: Transport = "aiohttp") -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.target = target
        self.max_connections = max_connections
        self.transport = transport
        self._secrets = (api_key(target.api_key_env), *url_secrets(target.url))
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",  # a compressed SSE stream would be buffered by the decoder
        }
        headers.update(target_headers(target))  # extra headers, then the URL's Basic or the key's Bearer
        self._headers = headers
        self._urls = {api: endpoint_url(target, api) for api in APIS}
        self._http: HTTPTransport | None = None
        self._id_prefix = f"ramp-{os.getpid()}-"
        self._sent = 0
        self.open_streams: set[Stream] = set()  # requests in flight: the ones with no token yet are read

    def __repr__(self) -> str:
        return f"Client(url={self.target.base_url!r}, transport={self.transport!r}, max_connections={self.max_connections})"

    async def aclose(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def send(
        self,
        spec: RequestSpec,
        intended_ns: int,
        live: LiveCounter | None = None,
        traceparent: str | None = None,
    ) -> RequestResult:
        """Stream one request. Returns ERROR results instead of raising; CANCELLED if the task is cancelled.
        ``traceparent``: the W3C trace context header to send (``--otel``), else none."""
        http = self._http
        if http is None:  # made on first use: a session must be created inside the loop that uses it
            http = self._http = open_transport(self.transport, self.target, self.max_connections)
        url = self._urls[spec.api]
        body = build_body(spec)
        task = asyncio.current_task()
        assert task is not None, "Client.send must run inside an asyncio task"
        self._sent += 1
        request_id = self._id_prefix + str(self._sent)
        headers = {**self._headers, "X-Request-Id": request_id}
        if traceparent is not None:
            headers["traceparent"] = traceparent
        st = Stream(task, self.target, _monotonic_ns(), request_id, headers)
        if spec.keep_text:
            st.text = []
        self.open_streams.add(st)
        try:
            try:
                await http.exchange(st, spec.api, url, body, spec.keep_text, live)
            finally:
                st.disarm()
                self.open_streams.discard(st)
        except asyncio.CancelledError:
            if st.fired is None:
                return self._result(spec, intended_ns, st, Outcome.CANCELLED)
            uncancel = getattr(task, "uncancel", None)  # 3.11+: keep the task's cancel count balanced
            if uncancel is not None:
                uncancel()
            st.end_ns = _monotonic_ns() if st.end_ns is None else st.end_ns
            return self._finish(spec, intended_ns, st, st.fired, self._timeout_text(st.fired))
        except TransportError as exc:
            st.end_ns = _monotonic_ns() if st.end_ns is None else st.end_ns
            return self._finish(spec, intended_ns, st, exc.kind, exc.message)
        except Exception as exc:  # any library failure becomes a result: the engine must keep running
            st.end_ns = _monotonic_ns() if st.end_ns is None else st.end_ns
            kind, message = map_exception(exc, st, url, self.target.connect_timeout_s)
            return self._finish(spec, intended_ns, st, kind, message)
        if st.end_ns is None:
            st.end_ns = _monotonic_ns()
        return self._finish(
            spec, intended_ns, st, ErrorKind.STREAM_CUT, "stream ended before finish_reason/[DONE]"
        )

    def first_token_waits(self, now_ns: int) -> tuple[int, int]:
        """(requests in flight with no token yet, the longest such wait in ns): read a few times a second
        by the worker, never per token (a stream stuck before its first token says so on the faces)."""
        waits = [now_ns - st.sent_ns for st in self.open_streams if not st.chunk_times]
        return len(waits), max(waits, default=0)

    # -- results -----------------------------------------------------------------------------------------

    def _finish(
        self, spec: RequestSpec, intended_ns: int, st: Stream, kind: ErrorKind, message: str
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
        st: Stream,
        outcome: Outcome,
        kind: ErrorKind | None = None,
        message: str = "",
    ) -> RequestResult:
        times = st.chunk_times
        usage = st.usage
        counted = len(times) + st.ids_extra
        completion = usage.completion_tokens if usage is not None else None
        exact = completion is not None
        output_tokens = completion if completion is not None else counted
        chunk_tokens = _chunk_tokens(st)
        first_answer = st.first_answer()
        reasoning_tokens, reasoning_exact = _reasoning_tokens(st, chunk_tokens)
        message = scrub(message, self._secrets) if message else message
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
            user=spec.user,
            turn=spec.turn,
            input_tokens_target=spec.input_tokens_target,
            max_tokens=spec.max_tokens,
            output_text="".join(st.text) if st.text is not None else None,
            probe=spec.probe,
            request_id=st.request_id,
            retry_after_s=retry_after_s(st.retry_after) if st.retry_after is not None else None,
            ratelimit=tuple(st.ratelimit) if st.ratelimit else (),
            first_answer_ns=times[first_answer] if first_answer is not None else None,
            reasoning_tokens=reasoning_tokens,
            reasoning_exact=reasoning_exact,
            reasoning_chunks=len(st.reasoning) if st.reasoning else 0,
            first_tool_ns=times[st.first_tool] if st.first_tool is not None else None,
            tool_chunks=st.tool_chunks,
            tool_tokens=_tool_tokens(st, chunk_tokens, output_tokens - reasoning_tokens if exact else None),
            first_tool_args_ns=times[st.tool_args[0]] if st.tool_args else None,
            last_tool_args_ns=times[st.tool_args[-1]] if st.tool_args else None,
            tool_calls=tuple(ToolCall(*call) for call in st.tool_calls.values()) if st.tool_calls else (),
        )


def _tool_tokens(st: Stream, chunk_tokens: tuple[int, ...] | None, answer_tokens: int | None) -> int:
    """The tool-call arguments' tokens: usage's answer tokens (output less reasoning) when every answer
    chunk was a tool-call delta, else the argument chunks' tokens (``token_ids``, else one a chunk)."""
    args = st.tool_args
    if not args:
        return 0
    text_chunks = len(st.chunk_times) - st.tool_chunks - (len(st.reasoning) if st.reasoning else 0)
    if answer_tokens is not None and text_chunks == 0:
        return answer_tokens
    if chunk_tokens is not None:
        return sum(chunk_tokens[i] for i in args)
    return len(args)


def _chunk_tokens(st: Stream) -> tuple[int, ...] | None:
    """Tokens per text chunk when the server sent ``token_ids`` (1 for a chunk without), else None."""
    if st.ids is None:
        return None
    per_chunk = [1] * len(st.chunk_times)
    for index, n in st.ids:
        if index >= 0:
            per_chunk[index] = n
    return tuple(per_chunk)


def _reasoning_tokens(st: Stream, chunk_tokens: tuple[int, ...] | None) -> tuple[int, bool]:
    """(reasoning tokens, exact): usage's ``reasoning_tokens`` when the server gave it, else the reasoning
    chunks' tokens (``token_ids`` when sent, one per chunk otherwise)."""
    usage = st.usage
    if usage is not None and usage.reasoning_tokens is not None:
        return usage.reasoning_tokens, True
    if not st.reasoning:
        return 0, False
    if chunk_tokens is not None:
        return sum(chunk_tokens[i] for i in st.reasoning), False
    return len(st.reasoning), False

"""One streamed request in flight: its state, its watchdog timer and the sink its body goes to.

Owns ``Stream`` (what a request has delivered so far, and the single ``loop.call_at`` watchdog that enforces
the TTFT / idle / total timeouts), ``StreamSink`` (the per-chunk hot path: one arrival stamp per read, SSE
events classified inline), ``TransportError`` (a failure already mapped to its ``ErrorKind``) and
``LiveCounter``. Every transport in ``loadgen.transports`` feeds the same sink; ``loadgen.client`` turns a
finished ``Stream`` into a ``RequestResult``.

Timeouts cost no timer per chunk: a read only stores its arrival time, and the watchdog, when it fires,
either finds the deadline really passed (and cancels the request's task) or re-arms itself for the new
deadline. So a stream of N chunks sets about ``duration / idle_timeout`` timers instead of N.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loadgen.sse import DONE, REASONING_CHUNK, TEXT_CHUNK, Event, EventTooLarge, SSEParser, classify
from loadgen.target.http import header_secrets
from loadgen.target.secrets import scrub_cut
from loadgen.types import ErrorKind, Target

__all__ = ["DRAIN_GRACE_NS", "LiveCounter", "Stream", "StreamSink", "TransportError", "error_text"]

DRAIN_GRACE_NS = 1_000_000_000  # after [DONE], how long the rest of the body may take (keeps keep-alive)
ERROR_BODY_BYTES = 4096
ERROR_TEXT_CHARS = 200

_monotonic_ns = time.monotonic_ns


class LiveCounter:
    """Tokens seen so far by every stream that shares it; the engine samples it for a live token rate."""

    __slots__ = ("tokens",)

    def __init__(self) -> None:
        self.tokens = 0


class TransportError(Exception):
    """A failure already mapped to its kind (raised inside the client, never out of ``Client.send``)."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def error_text(status: int, body: bytes, headers: dict[str, str] | None = None) -> TransportError:
    """A non-2xx answer: ``HTTP 503: <the start of its body>``; 429 is told apart. The body is scrubbed of
    every credential the request's ``headers`` sent before it is cut (a cut secret would escape its mask:
    a server may echo the Authorization header)."""
    text = " ".join(body[:ERROR_BODY_BYTES].decode("utf-8", "replace").split())
    # scrubbed before it is cut, and a secret split by the body's own cut (ERROR_BODY_BYTES) masked too
    was_cut = len(body) >= ERROR_BODY_BYTES
    text = scrub_cut(text, header_secrets(headers or {}), ERROR_TEXT_CHARS, was_cut=was_cut)
    kind = ErrorKind.HTTP_429 if status == 429 else ErrorKind.HTTP_STATUS
    return TransportError(kind, f"HTTP {status}: {text}" if text else f"HTTP {status}")


class Stream:
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
        "retry_after",
        "ratelimit",
        "max_event_bytes",
        "reasoning",
        "first_tool",
        "tool_chunks",
        "tool_args",
        "tool_calls",
    )

    def __init__(
        self, task: asyncio.Task[Any], target: Target, sent_ns: int, request_id: str, headers: dict[str, str]
    ) -> None:
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
        self.headers = headers
        self.request_id = request_id
        self.retry_after: str | None = None  # the Retry-After header of a non-2xx answer
        self.ratelimit: list[tuple[str, str]] | None = None  # the answer's x-ratelimit-* headers, if any
        self.handle: asyncio.TimerHandle | None = None
        self.max_event_bytes = target.max_event_bytes
        # Indices (in chunk_times) of the chunks that carried reasoning text and no answer text; None until
        # the first one (a non-reasoning stream never allocates it).
        self.reasoning: list[int] | None = None
        self.first_tool: int | None = None  # index in chunk_times of the first tool-call delta
        self.tool_chunks = 0
        self.tool_args: list[int] | None = None  # indices of the chunks with tool-call arguments text
        self.tool_calls: dict[int, list[str]] | None = None  # call index -> [id, name, arguments] (keep_text)
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
            due, kind = self.done_ns + DRAIN_GRACE_NS, ErrorKind.IDLE_TIMEOUT
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
        self._arm(t + DRAIN_GRACE_NS)

    def disarm(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def complete(self) -> bool:
        if self.done_ns is not None or self.usage is not None:
            return True
        return self.clean_eof and self.finish_reason is not None

    def rare_event(self, event: Event, t: int, live: LiveCounter | None) -> bool:
        """Everything but a plain text chunk. Returns True when the stream is over ([DONE])."""
        if event is DONE:
            self.end_ns = t
            self.on_done(t)
            return True
        if event.malformed is not None:
            self.end_ns = t
            raise TransportError(ErrorKind.MALFORMED, event.malformed)
        if event.error is not None:
            self.end_ns = t
            code = event.error_code
            if code is not None:
                self.status = code
            kind = ErrorKind.HTTP_429 if code == 429 else ErrorKind.HTTP_STATUS
            raise TransportError(
                kind, f"error event in stream{f' (code {code})' if code else ''}: {event.error}"
            )
        self._count(event, t, live)
        if event.finish_reason is not None:
            self.finish_reason = event.finish_reason
        if event.has_usage:
            self.usage = event
            self.end_ns = t
        return False

    def _count(self, event: Event, t: int, live: LiveCounter | None) -> None:
        """A chunk with token ids, reasoning or kept text: its time, tokens and text."""
        tokens = event.tokens
        if event.has_text:
            if event.reasoning:
                self.reasoning_chunk()
            elif event.tool:
                tokens = self._tool_chunk(event, tokens)
            self.chunk_times.append(t)
            if tokens is not None:
                if self.ids is None:
                    self.ids = []
                self.ids.append((len(self.chunk_times) - 1, tokens))
                self.ids_extra += tokens - 1
            if live is not None:
                live.tokens += 1 if tokens is None else tokens
            if self.text is not None and event.text:
                self.text.append(event.text)
        elif tokens:
            if self.ids is None:
                self.ids = []
            self.ids.append((-1, tokens))
            self.ids_extra += tokens
            if live is not None:
                live.tokens += tokens

    def _tool_chunk(self, event: Event, tokens: int | None) -> int | None:
        """The chunk about to be appended is a tool-call delta: note where (its arguments', or a name-only
        opening delta that carries no token: 0 tokens), and keep the calls' parts when the text is kept."""
        at = len(self.chunk_times)
        self.tool_chunks += 1
        if self.first_tool is None:
            self.first_tool = at
        if event.tool_args:
            if self.tool_args is None:
                self.tool_args = []
            self.tool_args.append(at)
        elif tokens is None:
            tokens = 0  # counted as a chunk of token_ids: 0 (chunk_tokens, the live count, ITL see it)
        if self.text is not None:
            calls = self.tool_calls if self.tool_calls is not None else {}
            self.tool_calls = calls
            for index, call_id, name, arguments in event.tool_parts:
                call = calls.setdefault(index, ["", "", ""])
                call[0] = call_id or call[0]
                call[1] = name or call[1]
                call[2] += arguments
        return tokens

    def reasoning_chunk(self) -> None:
        """The chunk about to be appended to ``chunk_times`` is reasoning, not answer."""
        if self.reasoning is None:
            self.reasoning = []
        self.reasoning.append(len(self.chunk_times))

    def first_answer(self) -> int | None:
        """Index in ``chunk_times`` of the first chunk with answer text; None when every chunk was reasoning."""
        reasoning = self.reasoning
        n = len(self.chunk_times)
        if not reasoning:
            return 0 if n else None
        at = 0
        for index in reasoning:  # reasoning comes first in practice: this stops at the first answer chunk
            if index != at:
                break
            at += 1
        return at if at < n else None


class StreamSink:
    """Receives a response body piece by piece, each with its arrival time: the per-chunk hot path.

    Non-2xx bodies are collected (bounded) for the error message; 2xx bodies are SSE, classified event by
    event with nothing else on the fast path.
    """

    __slots__ = ("st", "feed", "parser", "add_time", "live", "keep_text", "stopped", "t", "error_body")

    def __init__(self, st: Stream, keep_text: bool, live: LiveCounter | None) -> None:
        self.st = st
        self.parser = SSEParser(st.max_event_bytes)
        self.feed = self.parser.feed
        self.add_time = st.chunk_times.append
        self.live = live
        self.keep_text = keep_text
        self.stopped = False
        self.t = st.sent_ns
        self.error_body: bytearray | None = None

    def headers(
        self, status: int, retry_after: str | None = None, ratelimit: list[tuple[str, str]] | None = None
    ) -> None:
        self.st.status = status
        self.st.ratelimit = ratelimit
        if not 200 <= status < 300:
            self.error_body = bytearray()
            self.st.retry_after = retry_after

    def piece(self, piece: bytes, t: int) -> None:
        st = self.st
        st.last_read_ns = t
        self.t = t
        if self.error_body is not None:
            if len(self.error_body) < ERROR_BODY_BYTES:
                self.error_body += piece[: ERROR_BODY_BYTES - len(self.error_body)]
            return
        if self.stopped:
            return  # draining after [DONE] so the connection can be reused
        live = self.live
        try:
            payloads = self.feed(piece)
        except EventTooLarge as exc:  # an endless line: malformed now, not a core until the TTFT timeout
            # Its traceback's frames hold the unfinished event (a MiB): the error the connection keeps (a
            # cycle, freed only by the worker's rare gen-2 collections) must not keep that alive.
            exc.__traceback__ = None
            st.end_ns = t
            raise TransportError(ErrorKind.MALFORMED, str(exc)) from None
        for payload in payloads:
            event = classify(payload, self.keep_text)
            if event is TEXT_CHUNK:
                self.add_time(t)
                if live is not None:
                    live.tokens += 1
            elif event is REASONING_CHUNK:
                st.reasoning_chunk()
                self.add_time(t)
                if live is not None:
                    live.tokens += 1
            elif st.rare_event(event, t, live):
                self.stopped = True
                break

    def http_error(self) -> TransportError:
        st = self.st
        st.end_ns = self.t
        return error_text(st.status or 0, bytes(self.error_body or b""), st.headers)

    def eof(self) -> None:
        """The body ended cleanly."""
        st = self.st
        st.clean_eof = True
        if self.stopped:
            return
        t = self.t
        leftover = self.parser.pending
        for payload in self.parser.close():
            if st.rare_event(classify(payload, self.keep_text), t, self.live):
                break
        if st.end_ns is None:
            st.end_ns = t
        if not st.chunk_times and not st.complete() and leftover.strip():
            # Bytes came but never formed an event: not an SSE stream (e.g. a JSON reply to stream=true).
            raise TransportError(
                ErrorKind.MALFORMED,
                "response is not an SSE stream: " + leftover[:ERROR_TEXT_CHARS].decode("utf-8", "replace"),
            )

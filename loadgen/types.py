"""Hot-path value types shared by every part of the engine: one request to send and what came back.

These are the contract between the workload (which builds ``RequestSpec``), the client (which turns one
spec into one ``RequestResult``) and the metrics (which fold results into histograms). All timestamps are
``time.monotonic_ns()`` values (CLOCK_MONOTONIC is shared by every process on the host, so a worker's and
the controller's clocks agree), never wall-clock time.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from loadgen.config import Api


class ErrorKind(str, enum.Enum):
    """Why a request failed. A cancelled request is not an error (see ``Outcome.CANCELLED``)."""

    CONNECT = "connect"  # could not connect / connection refused / DNS
    TTFT_TIMEOUT = "ttft_timeout"  # no first token within the TTFT timeout
    IDLE_TIMEOUT = "idle_timeout"  # a gap between two chunks longer than the idle timeout
    TOTAL_TIMEOUT = "total_timeout"  # the whole request took longer than the total timeout
    HTTP_429 = "http_429"  # rate limited: reported apart from other HTTP statuses
    HTTP_STATUS = "http_status"  # any other non-2xx status
    STREAM_CUT = "stream_cut"  # the connection closed before a finish_reason / [DONE]
    MALFORMED = "malformed"  # an SSE event or JSON body that cannot be parsed
    EMPTY_OUTPUT = "empty_output"  # the stream finished without any output token


class Outcome(str, enum.Enum):
    OK = "ok"
    ERROR = "error"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call a reply streamed, kept when the spec asked for the reply's text (a session answers
    it next turn): the call's id, its function's name and its arguments' text as streamed."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request to send. Built by the workload, never mutated.

    ``messages`` is used for ``api == "chat"`` and ``prompt`` for ``api == "completions"``.
    ``extra_body`` carries sampling parameters (temperature, ignore_eos, stop, ...) merged into the JSON body.
    """

    api: Api
    model: str
    max_tokens: int
    messages: tuple[tuple[str, str], ...] = ()  # (role, content) pairs
    prompt: str = ""
    input_tokens_target: int = 0  # what the profile asked for; the record keeps usage's real count
    bucket: str = "default"
    prefix_group: str | None = None
    cache_class: str | None = None  # "hit" | "miss" | None: reported apart, never averaged together
    session_id: int = 0
    turn: int = 0
    keep_text: bool = False  # multi-turn sessions need the reply text to grow the history
    extra_body: tuple[tuple[str, object], ...] = ()  # sampling params, as pairs so the spec stays hashable
    # Extra keys of some messages, by their index in ``messages``: an assistant turn's ``tool_calls``, a
    # ``tool`` message's ``tool_call_id`` (a session answering tool calls, loadgen.workload.tools).
    message_extras: tuple[tuple[int, tuple[tuple[str, object], ...]], ...] = ()
    probe: int = -1  # an answer probe's index in the probe set (loadgen.workload.probes); -1: not a probe
    # the closed loop's virtual user (stream) that sent it, unique within its worker; -1: open loop. A
    # closed loop's rates are read per stream too (loadgen.metrics.slices: the streams are its clusters).
    user: int = -1


@dataclass(frozen=True, slots=True)
class RequestResult:
    """What one request produced, with every timestamp the metrics need.

    Latencies are measured from ``intended_ns`` (the schedule's start time in open loop, the moment the
    virtual user decided to send in closed loop) so that client-side queueing is never hidden
    (no coordinated omission). ``sent_ns - intended_ns`` is the schedule lag.
    """

    outcome: Outcome
    intended_ns: int
    sent_ns: int
    end_ns: int
    first_token_ns: int | None = None  # first chunk with non-empty content or reasoning text
    last_token_ns: int | None = None
    chunk_times_ns: tuple[int, ...] = ()  # arrival of every chunk that carried output text
    chunk_tokens: tuple[int, ...] | None = None  # tokens per chunk when the server said (token_ids)
    output_tokens: int = 0  # from usage when tokens_exact, else tokenizer / chunk count
    input_tokens: int | None = None  # usage.prompt_tokens
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens
    tokens_exact: bool = False  # True when output_tokens came from the server's usage
    error_kind: ErrorKind | None = None
    error_message: str = ""
    http_status: int | None = None
    finish_reason: str | None = None
    bucket: str = "default"
    cache_class: str | None = None
    session_id: int = 0
    turn: int = 0
    input_tokens_target: int = 0
    max_tokens: int = 0
    user: int = -1  # the spec's: the closed loop's stream that sent it
    output_text: str | None = None  # only when the spec asked for it (keep_text)
    request_id: str = ""  # sent as X-Request-Id, so a server's logs and our traces can be joined
    retry_after_s: float | None = None  # a refusal's Retry-After, in seconds (loadgen.target.refusals)
    # A managed endpoint's x-ratelimit-* headers on this answer, as (name, value) pairs (loadgen.target.ratelimit)
    ratelimit: tuple[tuple[str, str], ...] = ()
    # Reasoning models: the first chunk with answer text (reasoning excluded; == first_token_ns when the
    # model did not reason), the reasoning tokens (usage.completion_tokens_details.reasoning_tokens when
    # reasoning_exact, else the reasoning chunks' tokens) and how many chunks carried reasoning only.
    first_answer_ns: int | None = None
    reasoning_tokens: int = 0
    reasoning_exact: bool = False
    reasoning_chunks: int = 0
    # Tool calls: the first chunk carrying a tool-call delta (its function's name or arguments; answer
    # output, so TTFT and TTFAT count it), and how many chunks carried one; the arguments' tokens (usage's
    # output less reasoning when the reply was tool calls only, else the argument chunks' tokens), the first
    # and last chunk with argument text; the calls themselves when ``keep_text``.
    first_tool_ns: int | None = None
    tool_chunks: int = 0
    tool_tokens: int = 0
    first_tool_args_ns: int | None = None
    last_tool_args_ns: int | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    probe: int = -1  # the spec's ``probe``: its answer is compared with its reference (-1: not a probe)

    @property
    def ttft_ns(self) -> int | None:
        return None if self.first_token_ns is None else self.first_token_ns - self.intended_ns

    @property
    def ttfat_ns(self) -> int | None:
        """Time to first answer token (TTFAT), from the intended start: reasoning text does not count."""
        return None if self.first_answer_ns is None else self.first_answer_ns - self.intended_ns

    @property
    def ttftc_ns(self) -> int | None:
        """Time to the first tool-call delta, from the intended start (None: no tool call streamed)."""
        return None if self.first_tool_ns is None else self.first_tool_ns - self.intended_ns

    @property
    def called_tool(self) -> bool:
        return self.first_tool_ns is not None

    @property
    def tool_decode_tok_s(self) -> float | None:
        """The tool-call arguments' token rate: (argument tokens - 1) / (last - first argument chunk)."""
        first, last = self.first_tool_args_ns, self.last_tool_args_ns
        if first is None or last is None or self.tool_tokens < 2 or last <= first:
            return None
        return (self.tool_tokens - 1) * 1e9 / (last - first)

    @property
    def reasoned(self) -> bool:
        return self.reasoning_chunks > 0 or self.reasoning_tokens > 0

    @property
    def reasoning_ns(self) -> int | None:
        """How long the reasoning phase lasted: first token to first answer token (0 without reasoning;
        None when no answer came: the whole output was reasoning)."""
        if self.first_token_ns is None or self.first_answer_ns is None:
            return None
        return self.first_answer_ns - self.first_token_ns

    @property
    def answer_decode_tok_s(self) -> float | None:
        """Decode speed of the answer alone: (answer tokens - 1) / (last token - first answer token);
        the same as ``decode_tok_s`` when the model did not reason."""
        if self.first_answer_ns is None or self.last_token_ns is None:
            return None
        answer = self.output_tokens - self.reasoning_tokens
        span = self.last_token_ns - self.first_answer_ns
        if answer < 2 or span <= 0:
            return None
        return (answer - 1) * 1e9 / span

    @property
    def decode_tok_s(self) -> float | None:
        """Per-request decode speed: (output_tokens - 1) / (last token time - first token time)."""
        if self.first_token_ns is None or self.last_token_ns is None or self.output_tokens < 2:
            return None
        span = self.last_token_ns - self.first_token_ns
        if span <= 0:
            return None
        return (self.output_tokens - 1) * 1e9 / span


@dataclass(frozen=True, slots=True)
class Target:
    """Where the load goes. The API key is never stored here: only the name of the environment variable."""

    url: str  # base URL, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted and stripped)
    api: Api = "chat"
    model: str = ""  # "" = discover from /v1/models
    api_key_env: str = "OPENAI_API_KEY"
    connect_timeout_s: float = 10.0
    ttft_timeout_s: float = 300.0
    idle_timeout_s: float = 120.0
    total_timeout_s: float = 1800.0
    max_event_bytes: int = 1 << 20  # --max-event-bytes: a longer SSE event is a malformed error (sse.py)
    headers: tuple[tuple[str, str], ...] = field(default=())
    ca_cert: str | None = None  # --ca-cert: the CA bundle to verify an https server with (else the system's)
    insecure: bool = False  # --insecure: no TLS verification at all (warned of on screen and in the record)
    proxy: str | None = None  # None: the environment's (loopback never); "": none (--no-proxy); URL: --proxy
    # Several replicas as one target (``--url A --url B``): every replica's URL, ``url`` the first; () for one.
    replicas: tuple[str, ...] = ()

    @property
    def base_url(self) -> str:
        return server_root(self.url)

    def endpoint(self, path: str) -> str:
        """The URL of ``path`` (``/v1/models``) on this target, its query string (``?api_key=...``) kept
        after the path, where a server reads it."""
        query = self.url.partition("?")[2].partition("#")[0]
        return self.base_url + path + ("?" + query if query else "")

    def replica_targets(self) -> tuple[Target, ...]:
        """One target per replica (``url`` set to each, in order); just this one when there is one server."""
        if len(self.replicas) < 2:
            return (self,)
        return tuple(replace(self, url=url, replicas=()) for url in self.replicas)


REPLICA_POLICY = "round robin by session"  # how the streams are spread over replicas (see loadgen.run.worker)


def replica_name(index: int) -> str:
    """The replica's short name on screen and in the record: A, B, ... Z, then R27, R28, ..."""
    return chr(ord("A") + index) if index < 26 else f"R{index + 1}"


def server_root(url: str) -> str:
    """``http://h:8000/v1/?k=v`` -> ``http://h:8000``: the API paths, /metrics, /version and /tokenize hang
    from it (the query string is left out: ``Target.endpoint`` puts it back after the path).

    Defined here, with ``Target``, so the hot path and ``loadgen.target.http`` share one definition."""
    url = url.strip().partition("#")[0].partition("?")[0].rstrip("/")
    return url[:-3] if url.endswith("/v1") else url

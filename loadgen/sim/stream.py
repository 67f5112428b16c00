"""One request's output as it leaves the simulator (``Stream``): the state the engine loop and the request's
handler share, and the bytes of its replies. A chunk is a cached byte prefix + token text + a cached suffix,
so per chunk only the text is built; the final chunk carries the finish reason, the usage and ``[DONE]``.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from . import responses
from .config import FaultConfig
from .sequences import Seq
from .tools import ToolCall

DONE = b"data: [DONE]\n\n"


class Stream:
    """Per-request output state. Written by the engine loop; the handler task only drains the backlog."""

    __slots__ = (
        "api", "streaming", "include_usage", "rid", "created", "model_json", "prefix", "suffix", "head",
        "resp", "transport", "pos", "unsent", "sent", "chunks", "backlog", "wake", "hold_until", "complete",
        "closed", "cut", "faults", "stall_s", "stall_at", "disconnect_at", "malformed_at", "first_ns",
        "last_ns", "seq", "prompt_tokens", "role_sent", "reasoning_left", "reasoning_total", "rprefix",
        "answering", "first_answer_ns", "switch", "tool",
    )  # fmt: skip

    def __init__(
        self,
        *,
        api: str,
        streaming: bool,
        include_usage: bool,
        rid: str,
        created: int,
        model_json: str,
        prompt_tokens: int,
        pos: int,
        faults: dict[str, float],
        reasoning_field: str = "reasoning_content",
    ) -> None:
        self.api = api
        self.streaming = streaming
        self.include_usage = include_usage
        self.rid = rid
        self.created = created
        self.model_json = model_json
        self.prompt_tokens = prompt_tokens
        self.seq: Seq | None = None
        self.pos = pos
        self.unsent = 0
        self.sent = 0
        self.chunks = 0
        self.backlog: list[bytes] | None = None
        self.wake = asyncio.Event()
        self.hold_until = 0
        self.complete = False
        self.closed = False
        self.cut = False
        self.faults = faults
        self.stall_s = 0.0
        self.stall_at = -1
        self.disconnect_at = -1
        self.malformed_at = -1
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.resp: web.StreamResponse | None = None
        self.transport: asyncio.Transport | None = None
        self.role_sent = False
        self.head, self.prefix, self.suffix = self._templates()
        # A reasoning model's reply: its first ``reasoning_total`` tokens are reasoning (``think``).
        self.reasoning_left = 0
        self.reasoning_total = 0
        self.answering = False  # an answer token was sent (the reasoning phase is over)
        self.first_answer_ns: int | None = None  # ground truth: the write that carried the first answer token
        # between the last reasoning text and the first answer text of one chunk
        self.switch = b'","content":"'
        self.tool: ToolCall | None = None  # the function call this reply answers with (sim/tools.py)
        if self.api == "responses":
            self.head, self.prefix, self.suffix, self.rprefix = responses.templates(
                self.rid, self.created, self.model_json
            )
            self.switch = self.suffix + self.prefix
            return
        self.rprefix = self.prefix.replace(
            b'"delta":{"content":"', f'"delta":{{"{reasoning_field}":"'.encode()
        )

    def think(self, tokens: int) -> None:
        """Make the reply's first ``tokens`` tokens reasoning (chat, responses: completions have no such field)."""
        if self.api != "completions" and tokens > 0:
            self.reasoning_left = self.reasoning_total = tokens

    def call(self, tool: ToolCall) -> None:
        """Answer with a function call: every answer token is a fragment of its arguments."""
        if self.api != "completions":
            self.tool = tool

    def arm(self, fc: FaultConfig) -> None:
        """Place the mid-stream faults (stall, disconnect, malformed) at their token counts."""
        faults = self.faults
        if "stall" in faults:
            self.stall_s = faults["stall"] or fc.stall_s
            self.stall_at = fc.stall_after_tokens
        if "disconnect" in faults:
            self.disconnect_at = int(faults["disconnect"] or fc.disconnect_after_tokens)
        if "malformed" in faults:
            self.malformed_at = int(faults["malformed"] or fc.malformed_after_tokens)

    def _templates(self) -> tuple[bytes, bytes, bytes]:
        """The bytes around each chunk's text (head: the chat role chunk), cached for the whole reply."""
        obj = "chat.completion.chunk" if self.api == "chat" else "text_completion"
        base = f'data: {{"id":"{self.rid}","object":"{obj}","created":{self.created},"model":{self.model_json},"choices":[{{"index":0,'
        if self.api == "chat":
            head = (
                base + '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
                '"prompt_token_ids":null,"prompt_text":null}\n\n'
            ).encode()
            prefix = (base + '"delta":{"content":"').encode()
            suffix = b'"},"logprobs":null,"finish_reason":null,"token_ids":null}]}\n\n'
            return head, prefix, suffix
        prefix = (base + '"text":"').encode()
        suffix = b'","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}\n\n'
        return b"", prefix, suffix

    def chunk(self, tokens: tuple[bytes, ...], n: int, finished: Seq | None) -> bytes:
        """The SSE bytes for the next ``n`` tokens; ``finished``: the request, when this chunk ends it."""
        if self.tool is not None:
            return self._tool_chunk(self.tool, tokens, n, finished)
        pos = self.pos
        prefix = self.prefix
        if self.reasoning_left:
            prefix, text = self._thought(tokens, n)
        else:
            text = _text(tokens, pos, n)
            self.answering = self.answering or n > 0
        self.pos = (pos + n) % len(tokens)
        self.sent += n
        self.unsent = 0
        if finished is not None:
            data = prefix + text + self.final_suffix(finished)
        else:
            data = prefix + text + self.suffix
        if not self.role_sent:
            self.role_sent = True
            if self.head:
                data = self.head + data
        if self.malformed_at >= 0 and self.sent >= self.malformed_at:
            self.malformed_at = -1
            data = self.prefix + b' oops"}, "finish_reason":\n\n' + data
        return data

    def _tool_chunk(self, call: ToolCall, tokens: tuple[bytes, ...], n: int, finished: Seq | None) -> bytes:
        """A chunk of a reply that calls a function: its reasoning tokens (if any are left), then its
        arguments' fragments, the first of them after the event that opens the call."""
        ntoks = len(tokens)
        parts: list[bytes] = []
        if not self.role_sent:
            self.role_sent = True
            if self.head:
                parts.append(self.head)
        r = min(n, self.reasoning_left)
        if r:
            self.reasoning_left -= r
            parts += (self.rprefix, _text(tokens, self.pos, r), self.suffix)
        if n > r:
            text = _text(tokens, (self.pos + r) % ntoks, n - r)
            if not self.answering:
                self.answering = True
                parts.append(call.head)
                text = ARGS_OPEN + text
            if finished is not None and finished.finish_reason == "stop":
                text += ARGS_CLOSE  # the call ended of itself: its arguments are one JSON object
            parts += (call.prefix, text, call.suffix)
        self.pos = (self.pos + n) % ntoks
        self.sent += n
        self.unsent = 0
        if finished is not None:
            parts.append(self._tool_final(call, finished))
        return b"".join(parts)

    def _tool_final(self, call: ToolCall, seq: Seq) -> bytes:
        """How a reply that called a function ends: "tool_calls" when the model stopped after its arguments
        (cut by max_tokens: "length"), with the usage and [DONE] (responses: the terminal event)."""
        reason = seq.finish_reason or "length"
        called = self.answering and reason == "stop"
        if self.api == "responses":
            usage = self._responses_usage(seq)
            output = call.item if self.answering else ""
            return responses.terminal(self.rid, self.created, self.model_json, reason, usage, output)
        out = call.finish if called else call.finish.replace(b'"tool_calls"', f'"{reason}"'.encode())
        if self.include_usage:
            out += self.usage_event(self.prompt_tokens, self.sent, seq.cached_tokens or 0)
        return out + DONE

    @property
    def called(self) -> ToolCall | None:
        """The function call the reply made: some of its arguments were sent (streamed or not)."""
        return self.tool if self.tool is not None and self.sent > self.reasoning_total else None

    @property
    def tool_tokens(self) -> int:
        """Ground truth: the tokens sent as the call's arguments (0 when the reply called nothing)."""
        return self.sent - self.reasoning_total if self.called is not None else 0

    def _thought(self, tokens: tuple[bytes, ...], n: int) -> tuple[bytes, bytes]:
        """(prefix, text) of a chunk in the reasoning phase: reasoning only, or the last reasoning tokens
        and the first answer tokens in one delta (as a reasoning parser sends the transition)."""
        r = min(n, self.reasoning_left)
        self.reasoning_left -= r
        text = _text(tokens, self.pos, r)
        if r == n:
            return self.rprefix, text
        self.answering = True
        return self.rprefix, text + self.switch + _text(tokens, (self.pos + r) % len(tokens), n - r)

    def _responses_usage(self, seq: Seq) -> tuple[int, int, int, int | None]:
        """The Responses terminal event's usage: prompt, output and cached tokens, and the reasoning tokens
        of a reply that reasons."""
        return (
            self.prompt_tokens,
            self.sent,
            seq.cached_tokens or 0,
            self.reasoning_sent if self.reasoning_total else None,
        )

    def final_suffix(self, seq: Seq) -> bytes:
        reason = seq.finish_reason or "length"
        if self.api == "responses":
            usage = self._responses_usage(seq)
            return self.suffix + responses.terminal(self.rid, self.created, self.model_json, reason, usage)
        if self.api == "chat":
            tail = (
                f'"}},"logprobs":null,"finish_reason":"{reason}","stop_reason":null,"token_ids":null}}]}}\n\n'
            )
        else:
            tail = (
                f'","logprobs":null,"finish_reason":"{reason}","stop_reason":null,'
                f'"prompt_token_ids":null,"token_ids":null}}]}}\n\n'
            )
        out = tail.encode()
        if self.include_usage:
            out += self.usage_event(self.prompt_tokens, self.sent, seq.cached_tokens or 0)
        return out + DONE

    def usage_event(self, prompt: int, completion: int, cached: int) -> bytes:
        obj = "chat.completion.chunk" if self.api == "chat" else "text_completion"
        return (
            f'data: {{"id":"{self.rid}","object":"{obj}","created":{self.created},"model":{self.model_json},'
            f'"choices":[],"usage":{{"prompt_tokens":{prompt},"total_tokens":{prompt + completion},'
            f'"completion_tokens":{completion},"prompt_tokens_details":{{"cached_tokens":{cached}}}'
            f"{self.reasoning_details()}}}}}\n\n"
        ).encode()

    @property
    def reasoning_sent(self) -> int:
        return self.reasoning_total - self.reasoning_left

    def reasoning_details(self) -> str:
        """``,"completion_tokens_details":{"reasoning_tokens":N}`` for a reasoning model's usage, else ""."""
        if not self.reasoning_total:
            return ""
        return f',"completion_tokens_details":{{"reasoning_tokens":{self.reasoning_sent}}}'

    def text(self, tokens: tuple[bytes, ...]) -> str:
        """The whole reply's text, for a non-streaming answer."""
        start = self.pos
        self.pos = (start + self.sent) % len(tokens)
        return b"".join(tokens[(start + i) % len(tokens)] for i in range(self.sent)).decode()


# A streamed call's arguments are a JSON object, {"text": "<its tokens>"}, as a model's are: the first
# fragment opens it and the last closes it when the call ends of itself (cut by max_tokens it stays open, as
# a real server's does). Escaped: the fragments are inside the chunk's JSON string.
ARGS_OPEN = b'{\\"text\\":\\"'
ARGS_CLOSE = b'\\"}'


def _text(tokens: tuple[bytes, ...], pos: int, n: int) -> bytes:
    """The text of ``n`` tokens from ``pos`` (the token list wraps around)."""
    ntoks = len(tokens)
    if n == 1:
        return tokens[pos]
    if pos + n <= ntoks:
        return b"".join(tokens[pos : pos + n])
    return b"".join(tokens[(pos + i) % ntoks] for i in range(n))

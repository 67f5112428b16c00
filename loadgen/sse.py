"""Incremental Server-Sent Events parsing and per-event classification for OpenAI-style token streams.

Owns two things the streaming client runs for every socket read:

* ``SSEParser`` turns arbitrary byte pieces into the ``data`` payloads of complete events. It works on
  bytes, so an event may be split anywhere (inside a multi-byte UTF-8 character, between ``\\r`` and
  ``\\n``); payloads are only decoded once whole.
* ``classify`` reads one payload and says what it carries: output text or not, ``token_ids`` count,
  ``finish_reason``, ``usage``, a server ``error`` object, ``[DONE]``. Compact JSON chunks that merely carry
  one piece of text (nearly every chunk of a vLLM/SGLang stream) are recognised by byte tests without
  ``json.loads``; anything else goes through ``json.loads``. Both paths give the same answer.

A chunk counts as output when its text is non-empty: the role-only first chat chunk (``"content":""``)
is not the first token. Reasoning text (``reasoning_content`` / ``reasoning``) counts as output (the first
token, TTFT) but not as answer: a chunk with reasoning text and no answer text is ``REASONING_CHUNK``
(``Event.reasoning``), so the client can time the first *answer* token (TTFAT) apart. A chunk with both
(a reasoning parser's last reasoning piece and first answer piece in one delta) is an answer chunk that
also ends the reasoning. ``usage.completion_tokens_details.reasoning_tokens`` is read when given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from loadgen import strict_json
from loadgen.sse_tools import (
    RESPONSE_TOOL_EVENTS,
    ToolPart,
    called_a_function,
    chat_tool_delta,
    response_tool_part,
)

__all__ = [
    "DONE",
    "MAX_EVENT_BYTES",
    "REASONING_CHUNK",
    "TEXT_CHUNK",
    "TOOL_ARGS_CHUNK",
    "Event",
    "EventTooLarge",
    "SSEParser",
    "classify",
    "response_event",
]

# The largest SSE event a stream may send (``--max-event-bytes``). A token chunk is ~200 bytes, a final
# chunk with logprobs a few KB; an event that never ends (a line without a newline) would otherwise grow
# the buffer, and the time spent copying it, until the first-token timeout.
MAX_EVENT_BYTES = 1 << 20


class EventTooLarge(ValueError):
    """An SSE event grew past the parser's ``max_event_bytes`` before it ended."""


@dataclass(frozen=True, slots=True)
class Event:
    """What one SSE ``data`` payload carries. ``tokens`` is ``len(token_ids)`` when the server sent them."""

    has_text: bool = False  # non-empty content / reasoning / completions text in some choice
    tokens: int | None = None
    finish_reason: str | None = None
    has_usage: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    error: str | None = None  # message of an ``{"error": ...}`` (or ``"object": "error"``) payload
    error_code: int | None = None  # the error's numeric code when it has one (e.g. 429, 500)
    done: bool = False  # the ``[DONE]`` sentinel
    malformed: str | None = None  # why the payload could not be read
    text: str | None = None  # the output text, only when asked for (``want_text``)
    reasoning: bool = False  # carries reasoning text and no answer text (has_text is True too)
    reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens
    tool: bool = False  # carries a tool-call delta (a function's name or arguments): answer output
    tool_args: bool = False  # ... with some of its arguments' text (a name-only delta opens a call)
    # (call index, id, name, arguments text) of each call in the delta, only when asked for (``want_text``)
    tool_parts: tuple[ToolPart, ...] = ()


# Shared immutable answers for the common cases, so the hot path allocates nothing for them.
TEXT_CHUNK = Event(has_text=True)
REASONING_CHUNK = Event(has_text=True, reasoning=True)
TOOL_ARGS_CHUNK = Event(has_text=True, tool=True, tool_args=True)
TOOL_HEAD_CHUNK = Event(has_text=True, tool=True)  # a call's first delta: its name, no arguments yet
DONE = Event(done=True)
_NOTHING = Event()

_BOM = b"\xef\xbb\xbf"


class SSEParser:
    """Feed byte pieces, get the ``data`` payloads of every event completed so far.

    Follows the SSE rules that matter for token streams: lines end in ``\\r\\n``, ``\\n`` or ``\\r``; a blank
    line ends an event; ``data:`` with or without one following space; several ``data`` lines are joined
    with ``\\n``; comment lines (``:``) and other fields (``event``, ``id``, ``retry``) are skipped; an event
    without data is not dispatched.
    """

    __slots__ = ("_buf", "_cr", "_max", "_started")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = b""  # bytes after the last complete event, line endings already normalised to \n
        self._cr = False  # the previous piece ended in \r: its meaning depends on the next byte
        self._started = False
        self._max = max_event_bytes  # past this, an unfinished event raises EventTooLarge

    def feed(self, piece: bytes) -> list[bytes]:
        # The hot case under light load: a read that is exactly one ``data: ...\n\n`` event.
        if (
            self._started
            and not self._buf
            and not self._cr
            and piece.find(b"\n") == len(piece) - 2
            and piece.endswith(b"\n\n")
            and piece.startswith(b"data: ")
            and b"\r" not in piece
        ):
            return [piece[6:-2]]
        if not self._started:
            if not piece:
                return []
            self._started = True
            if piece.startswith(_BOM):
                piece = piece[3:]
        if self._cr:
            piece = b"\r" + piece
            self._cr = False
        if b"\r" in piece:
            if piece.endswith(b"\r"):
                # Hold it back: a \n in the next piece makes \r\n one line end, not two.
                piece = piece[:-1]
                self._cr = True
            piece = piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf + piece if self._buf else piece
        if b"\n\n" not in buf:
            if len(buf) > self._max:  # O(1): only the unfinished event is measured, once per read
                self._too_large(buf)
            self._buf = buf
            return []
        blocks = buf.split(b"\n\n")
        self._buf = blocks.pop()
        if len(self._buf) > self._max:
            self._too_large(self._buf)
        out: list[bytes] = []
        for block in blocks:
            # The hot case: one ``data: {...}`` line making the whole event.
            if block.startswith(b"data: ") and b"\n" not in block:
                out.append(block[6:])
            elif (
                block.startswith(b"event: ")
                and (at := block.find(b"\ndata: ")) > 0
                and b"\n" not in block[at + 1 :]
            ):
                out.append(block[at + 7 :])  # the Responses API's ``event: <type>`` + one data line
            elif block:
                payload = _parse_block(block)
                if payload is not None:
                    out.append(payload)
        return out

    def close(self) -> list[bytes]:
        """The stream ended: return a last event that lacked its closing blank line, if any.

        Strict SSE would drop it; a server that ends with ``data: [DONE]\\n`` (one newline) is common enough
        that the lenient reading is the useful one. A final line without any line end is still dropped.
        """
        buf = self._buf
        if self._cr:
            buf += b"\n"
            self._cr = False
        self._buf = b""
        if not buf.endswith(b"\n"):
            cut = buf.rfind(b"\n")
            buf = buf[: cut + 1] if cut >= 0 else b""
        payload = _parse_block(buf.rstrip(b"\n")) if buf else None
        return [] if payload is None else [payload]

    def _too_large(self, buf: bytes) -> None:
        self._buf = b""
        raise EventTooLarge(
            f"SSE event larger than {self._max:,} bytes without an end (--max-event-bytes): "
            + _preview(buf, 80)
        )

    @property
    def pending(self) -> bytes:
        """Bytes received after the last complete event (for error messages)."""
        return self._buf


def _parse_block(block: bytes) -> bytes | None:
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        name, colon, value = line.partition(b":")
        if name != b"data":
            continue
        if colon and value.startswith(b" "):
            value = value[1:]
        data.append(value)
    if not data:
        return None
    return b"\n".join(data)


# --- classification -------------------------------------------------------------------------------------

# Byte patterns of compact JSON as vLLM, SGLang and OpenAI write it. A quote inside a JSON string is always
# escaped, so no token text can forge ``"finish_reason":null`` or ``"usage"``.
_FINISH_NULL = b'"finish_reason":null'
_FINISH = b'"finish_reason"'
_USAGE = b'"usage"'
_USAGE_NULL = b'"usage":null'
_TOKEN_IDS_LIST = b'"token_ids":['
_TEXT_KEYS = (b'"content":"', b'"text":"', b'"reasoning_content":"', b'"reasoning":"')
_REASONING = b'"reasoning'
_REASONING_TEXT, _REASONING_TEXT_2 = _TEXT_KEYS[2:]
_QUOTE = 0x22
_BRACE = 0x7B


# Each text key with the answer its fast path gives (answer keys first: a reasoning key is only reached
# when no answer key matched anywhere in the payload).
_KEYED = tuple(zip(_TEXT_KEYS, (TEXT_CHUNK, TEXT_CHUNK, REASONING_CHUNK, REASONING_CHUNK), strict=True))


def classify(payload: bytes, want_text: bool = False) -> Event:
    """Classify one ``data`` payload (bytes, as ``SSEParser`` gives them).

    The byte tests answer ``TEXT_CHUNK`` only for a compact chunk with exactly one ``finish_reason`` (null),
    a non-empty text field, no ``usage`` object and no ``token_ids`` list (and ``REASONING_CHUNK`` for the
    same shape with reasoning text and no answer key); every other payload, including any the tests are
    unsure of (an answer chunk that names a reasoning key too), is parsed with ``json.loads``.
    """
    if not want_text:
        for key, hit in _KEYED:
            at = payload.find(key)
            if at >= 0:
                after = at + len(key)
                if after < len(payload) and payload[after] != _QUOTE:
                    end = payload.find(_FINISH_NULL, after)
                    if (
                        end >= 0
                        and payload.find(_FINISH, end + 20) < 0
                        and payload.find(_FINISH, 0, at) < 0
                        and (_USAGE not in payload or _USAGE_NULL in payload)
                        and _TOKEN_IDS_LIST not in payload
                    ):
                        if hit is REASONING_CHUNK:
                            return hit
                        # An answer chunk naming no reasoning key. When the text key opens the delta (vLLM,
                        # OpenAI), a reasoning key could only follow it, before the finish_reason: a short
                        # search; else the whole payload's.
                        if payload[at - 1] == _BRACE:
                            if payload.find(_REASONING, after, end) < 0:
                                return hit
                        elif _REASONING not in payload:
                            return hit
                        # SGLang names "reasoning_content":null in every chunk: only reasoning text counts
                        if _REASONING_TEXT not in payload and _REASONING_TEXT_2 not in payload:
                            return hit
                break  # empty text or an unusual shape: let the full parse decide
        else:  # no chat or completions text key at all: a Responses API delta?
            delta = _response_delta(payload)
            if delta is not None:
                return delta
    return classify_slow(payload, want_text)


# The Responses API's text events: a quote inside a JSON string is escaped, so no text can forge the type.
_OUTPUT_DELTA = b'"type":"response.output_text.delta"'
_REASONING_DELTAS = (
    b'"type":"response.reasoning_text.delta"',
    b'"type":"response.reasoning_summary_text.delta"',
)
_DELTA = b'"delta":"'
_ARGUMENTS_DELTA = b'"type":"response.function_call_arguments.delta"'


def _response_delta(payload: bytes) -> Event | None:
    """A compact Responses API text delta (answer or reasoning) with non-empty text, else None."""
    at = payload.find(_DELTA)
    if at < 0 or at + 9 >= len(payload) or payload[at + 9] == _QUOTE:
        return None
    if _OUTPUT_DELTA in payload:
        return TEXT_CHUNK
    if _REASONING_DELTAS[0] in payload or _REASONING_DELTAS[1] in payload:
        return REASONING_CHUNK
    if _ARGUMENTS_DELTA in payload:
        return TOOL_ARGS_CHUNK
    return None


def classify_slow(payload: bytes, want_text: bool = False) -> Event:
    """The ``json.loads`` path: exact for any payload shape. ``classify`` falls back to it."""
    if payload.strip() == b"[DONE]":
        return DONE
    try:
        obj = strict_json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:  # strict_json: nested too deeply, an integer too long
        return Event(malformed=f"invalid JSON in SSE event ({exc}): {_preview(payload)}")
    if not isinstance(obj, dict):
        return Event(malformed=f"SSE event is not a JSON object: {_preview(payload)}")

    error, error_code = _error_of(obj)
    if error is not None:
        return Event(error=error, error_code=error_code)
    kind = obj.get("type")
    if isinstance(kind, str) and kind.startswith("response."):
        return response_event(kind, obj, want_text)

    pieces: list[str] | None = [] if want_text else None
    tools: list[ToolPart] | None = [] if want_text else None
    choices = obj.get("choices")
    has_text, has_reasoning, has_tool, tokens, finish = (
        _walk_choices(choices, pieces, tools) if isinstance(choices, list) else (False, False, 0, None, None)
    )

    usage = obj.get("usage")
    has_usage = isinstance(usage, dict)
    prompt, completion, cached = _usage_of(usage) if isinstance(usage, dict) else (None, None, None)
    reasoning_tokens = _reasoning_tokens(usage) if isinstance(usage, dict) else None

    reasoning_only = has_reasoning and not (has_text or has_tool)
    if reasoning_only and not (tokens is not None or finish or has_usage or want_text):
        return REASONING_CHUNK
    has_text = has_text or has_reasoning or has_tool > 0
    if not (has_text or tokens is not None or finish or has_usage or want_text):
        return _NOTHING
    return Event(
        reasoning=reasoning_only,
        reasoning_tokens=reasoning_tokens,
        tool=has_tool > 0,
        tool_args=has_tool > 1,
        tool_parts=tuple(tools) if tools else (),
        has_text=has_text,
        tokens=tokens,
        finish_reason=finish,
        has_usage=has_usage,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        text="".join(pieces) if pieces else None,
    )


def _walk_choices(
    choices: list[object], pieces: list[str] | None, tools: list[ToolPart] | None
) -> tuple[bool, bool, int, int | None, str | None]:
    """(answer text, reasoning text, tool-call delta (0 none, 1 a name only, 2 arguments text),
    token_ids count, finish_reason) over every choice; the texts appended to ``pieces`` and the tool-call
    deltas to ``tools`` when kept."""
    has_text = has_reasoning = False
    has_tool = 0
    tokens: int | None = None
    finish: str | None = None
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        source = delta if isinstance(delta, dict) else choice
        for key in ("reasoning_content", "reasoning", "content", "text"):
            value = source.get(key)
            if isinstance(value, str) and value:
                if key.startswith("reasoning"):
                    has_reasoning = True
                else:
                    has_text = True
                if pieces is not None:
                    pieces.append(value)
        calls = source.get("tool_calls")
        if calls:
            has_tool = max(has_tool, chat_tool_delta(calls, tools))
        ids = choice.get("token_ids")
        if ids is None and isinstance(delta, dict):
            ids = delta.get("token_ids")
        if isinstance(ids, list):
            tokens = len(ids) if tokens is None else tokens + len(ids)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            finish = reason
    return has_text, has_reasoning, has_tool, tokens, finish


# Responses API terminal events -> the finish_reason a chat stream would give
_RESPONSE_END = {"response.completed": "stop", "response.incomplete": "length"}
_RESPONSE_TEXT = (
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.reasoning_summary_text.delta",
)


def response_event(kind: str, obj: dict[str, object], want_text: bool = False) -> Event:
    """One Responses API event (``obj["type"] == kind``): a text delta (answer or reasoning), the terminal
    ``response.completed`` / ``response.incomplete`` with its usage, ``response.failed`` as an error;
    every other event (created, in_progress, output_item.added, *.done ...) carries nothing ramp counts."""
    if kind in RESPONSE_TOOL_EVENTS:
        part = response_tool_part(kind, obj)
        if part is None:
            return Event(text="") if want_text else _NOTHING
        if not want_text:
            return TOOL_ARGS_CHUNK if part[3] else TOOL_HEAD_CHUNK
        return Event(has_text=True, tool=True, tool_args=bool(part[3]), tool_parts=(part,))
    if kind in _RESPONSE_TEXT:
        delta = obj.get("delta")
        if not isinstance(delta, str) or not delta:
            return Event(text="") if want_text else _NOTHING
        reasoning = kind != "response.output_text.delta"
        if not want_text:
            return REASONING_CHUNK if reasoning else TEXT_CHUNK
        return Event(has_text=True, reasoning=reasoning, text=None if reasoning else delta)
    response = obj.get("response")
    response = response if isinstance(response, dict) else {}
    if kind == "response.failed":
        err = response.get("error")
        message = err.get("message") if isinstance(err, dict) else None
        return Event(error=str(message or "response.failed"))
    finish = _RESPONSE_END.get(kind)
    if finish is None:
        return Event(text="") if want_text else _NOTHING
    if finish == "stop" and called_a_function(response):
        finish = "tool_calls"  # as a chat stream ends a reply that called a tool
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return Event(finish_reason=finish)
    details = usage.get("input_tokens_details")
    return Event(
        finish_reason=finish,
        has_usage=True,
        prompt_tokens=_int_or_none(usage.get("input_tokens")),
        completion_tokens=_int_or_none(usage.get("output_tokens")),
        cached_tokens=_int_or_none(details.get("cached_tokens")) if isinstance(details, dict) else None,
        reasoning_tokens=_reasoning_tokens(usage),
    )


def _usage_of(usage: dict[str, object]) -> tuple[int | None, int | None, int | None]:
    """(prompt, completion, cached) tokens of a ``usage`` object."""
    details = usage.get("prompt_tokens_details")
    cached = _int_or_none(details.get("cached_tokens")) if isinstance(details, dict) else None
    return _int_or_none(usage.get("prompt_tokens")), _int_or_none(usage.get("completion_tokens")), cached


def _reasoning_tokens(usage: dict[str, object]) -> int | None:
    """``usage.completion_tokens_details.reasoning_tokens`` (OpenAI, vLLM) or, in the Responses API,
    ``usage.output_tokens_details.reasoning_tokens``; None when the server did not say."""
    details = usage.get("completion_tokens_details") or usage.get("output_tokens_details")
    return _int_or_none(details.get("reasoning_tokens")) if isinstance(details, dict) else None


def _error_of(obj: dict[str, object]) -> tuple[str | None, int | None]:
    err = obj.get("error")
    if err is None and (obj.get("object") == "error" or obj.get("type") == "error"):
        err = obj  # vLLM's older ErrorResponse shape: {"object": "error", "message": ..., "code": ...}
    if err is None:
        return None, None
    if isinstance(err, dict):
        message = err.get("message") or err.get("msg") or json.dumps(err)[:200]
        code = err.get("code")
        return str(message), code if isinstance(code, int) else _int_or_none(err.get("status"))
    return str(err), None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _preview(payload: bytes, limit: int = 200) -> str:
    return payload[:limit].decode("utf-8", "replace")

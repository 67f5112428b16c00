"""A conversation that answered tool calls, in each API's shape: chat keeps an assistant message with its
``tool_calls`` and a ``role: "tool"`` message per call (``tool_call_id``); the Responses API has no such
messages and takes ``function_call`` and ``function_call_output`` input items instead.

``RequestSpec.message_extras`` holds the chat shape (the extra keys of some messages); ``response_items``
turns it into Responses input items, so a session builds one history for both APIs.

An answer probe's reply that called tools travels as text (``calls_text``: a mark, then the calls as JSON),
so that a verifiable tool-call task (``loadgen.analysis.tasks``) can read the calls back (``calls_of``).
"""

from __future__ import annotations

import json

from loadgen.types import Outcome, RequestResult, RequestSpec, ToolCall

__all__ = ["CALLS_MARK", "assistant_tool_calls", "calls_of", "calls_text", "probe_text", "response_items"]

# starts a probe's answer that is tool calls, not text: a record separator no server's text begins with
CALLS_MARK = "\x1etool_calls "


def assistant_tool_calls(calls: tuple[ToolCall, ...]) -> list[dict[str, object]]:
    """An assistant message's ``tool_calls`` (chat's shape) for the calls a reply streamed."""
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in calls
    ]


def response_items(spec: RequestSpec) -> list[dict[str, object]]:
    """The Responses API input of ``spec``'s messages: each assistant message's tool calls as
    ``function_call`` items after its text (if any), each tool message as a ``function_call_output``."""
    extras = dict(spec.message_extras)
    items: list[dict[str, object]] = []
    for index, (role, content) in enumerate(spec.messages):
        extra = dict(extras.get(index, ()))
        if role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": extra.get("tool_call_id"), "output": content}
            )
            continue
        if content or "tool_calls" not in extra:
            items.append({"role": role, "content": content})
        calls = extra.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id"),
                        "name": function.get("name"),
                        "arguments": function.get("arguments"),
                    }
                )
    return items


def calls_text(calls: tuple[ToolCall, ...]) -> str:
    """A reply's tool calls as a probe's answer text: ``CALLS_MARK`` then ``[{"name", "arguments"}, ...]``."""
    return CALLS_MARK + json.dumps([{"name": c.name, "arguments": c.arguments} for c in calls])


def calls_of(text: str | None) -> list[tuple[str, str]] | None:
    """The (name, arguments text) of each call in a probe's answer made by ``calls_text``; None for an
    answer in text (or a mark followed by something else)."""
    if not text or not text.startswith(CALLS_MARK):
        return None
    try:
        found = json.loads(text[len(CALLS_MARK) :])
    except (ValueError, RecursionError):  # not JSON, or nested past the parser (a hostile reply)
        return None
    if not isinstance(found, list):
        return None
    return [(str(c.get("name", "")), str(c.get("arguments", ""))) for c in found if isinstance(c, dict)]


def probe_text(result: RequestResult, limit: int) -> str | None:
    """What an answer probe answered, ``limit`` characters at most: its tool calls (``calls_text``) when it
    called any, else its text; None when it failed (no answer)."""
    if result.outcome is not Outcome.OK:
        return None
    text = calls_text(result.tool_calls) if result.tool_calls else result.output_text
    return None if text is None else text[:limit]

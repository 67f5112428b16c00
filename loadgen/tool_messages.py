"""A conversation that answered tool calls, in each API's shape: chat keeps an assistant message with its
``tool_calls`` and a ``role: "tool"`` message per call (``tool_call_id``); the Responses API has no such
messages and takes ``function_call`` and ``function_call_output`` input items instead.

``RequestSpec.message_extras`` holds the chat shape (the extra keys of some messages); ``response_items``
turns it into Responses input items, so a session builds one history for both APIs.
"""

from __future__ import annotations

from loadgen.types import RequestSpec, ToolCall

__all__ = ["assistant_tool_calls", "response_items"]


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

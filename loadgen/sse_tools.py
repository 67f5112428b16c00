"""Tool calls in a token stream: what a chat ``delta.tool_calls`` list or a Responses API function-call
event streams of a call (its function's name, its arguments' text), for ``loadgen.sse``'s classifier.

Pure functions over parsed JSON, reached only from the classifier's ``json.loads`` path: a stream with no
tool calls never calls them. A call's first delta (id and name, arguments ``""`` in OpenAI's and vLLM's
shape) opens it; the deltas after it carry argument text, one token or a few each.
"""

from __future__ import annotations

__all__ = ["RESPONSE_TOOL_EVENTS", "ToolPart", "called_a_function", "chat_tool_delta", "response_tool_part"]

# One tool-call delta: (call index, call id or None, function name or None, arguments text, maybe "")
ToolPart = tuple[int, str | None, str | None, str]

RESPONSE_TOOL_EVENTS = ("response.output_item.added", "response.function_call_arguments.delta")


def chat_tool_delta(calls: object, tools: list[ToolPart] | None) -> int:
    """What a chat ``tool_calls`` delta streams of its calls: 2 some arguments text, 1 only a function's
    name, 0 nothing (an empty delta). Each call's part is appended to ``tools`` when kept."""
    if not isinstance(calls, list):
        return 0
    seen = 0
    for position, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        if not isinstance(function, dict):
            continue
        name, arguments = _text(function.get("name")), function.get("arguments")
        arguments = arguments if isinstance(arguments, str) else ""
        if arguments:
            seen = 2
        elif name is not None:
            seen = max(seen, 1)
        else:
            continue
        if tools is not None:
            index = call.get("index")
            at = index if isinstance(index, int) and not isinstance(index, bool) else position
            tools.append((at, _text(call.get("id")), name, arguments))
    return seen


def response_tool_part(kind: str, obj: dict[str, object]) -> ToolPart | None:
    """A Responses API function call's event (``kind`` in ``RESPONSE_TOOL_EVENTS``) as a part: the
    ``function_call`` item added (its call id and name: the first tool-call delta), or an arguments delta.
    None for an empty delta or another item added (a message, a reasoning item)."""
    index = obj.get("output_index")
    at = index if isinstance(index, int) and not isinstance(index, bool) else 0
    if kind == "response.function_call_arguments.delta":
        delta = obj.get("delta")
        return (at, None, None, delta) if isinstance(delta, str) and delta else None
    item = obj.get("item")
    if not isinstance(item, dict) or item.get("type") != "function_call":
        return None
    arguments = item.get("arguments")
    return (
        at,
        _text(item.get("call_id")),
        _text(item.get("name")),
        arguments if isinstance(arguments, str) else "",
    )


def called_a_function(response: dict[str, object]) -> bool:
    """Whether a Responses API reply's ``output`` holds a function call (it ends as chat's "tool_calls")."""
    output = response.get("output")
    return isinstance(output, list) and any(
        isinstance(item, dict) and item.get("type") == "function_call" for item in output
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None

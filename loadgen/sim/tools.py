"""The simulator answering with a tool call: when a request offers ``tools`` (and its ``tool_choice`` allows
one), a draw (``SimConfig.tool_call_rate``; a forced choice always) makes the reply's answer one function
call. Its first answer write opens the call (id, the function's name, ``arguments: ""``), every answer token
after that is a fragment of its arguments (streamed, a JSON object ``{"text": "..."}``: the first fragment
opens it and a call that ends of itself closes it; one cut by max_tokens stays open, as a model's does), and the reply ends with ``finish_reason: "tool_calls"`` (the
Responses API: ``response.output_item.added`` of a ``function_call``, ``response.function_call_arguments.delta``
per fragment, a ``function_call`` in ``response.completed``'s output). Usage counts the arguments' tokens as
completion tokens, as a real server does. Reasoning, when the model reasons, still comes first.

``ToolCall`` holds the byte templates of one reply's call; ``Stream`` (stream.py) writes them.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

__all__ = ["ToolCall", "offered_call", "tool_call"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One reply's function call: its name and id, and the bytes around each arguments fragment."""

    name: str
    call_id: str
    head: bytes  # opens the call: id and name (chat), the function_call item added (responses)
    prefix: bytes  # before an arguments fragment's text
    suffix: bytes  # after it
    finish: bytes  # chat: the empty delta with finish_reason "tool_calls" (responses: b"")
    item: str  # responses: the function_call item in response.completed's output (chat: "")


def offered_call(tools: tuple[str, ...], choice: str | None, rate: float, draws: random.Random) -> str | None:
    """The function a reply calls, or None: ``tool_choice`` "none" never calls, "required" or a function's
    name always does, "auto" (the default) with probability ``rate``; the named one or the first offered."""
    if not tools or choice == "none":
        return None
    if choice in tools:
        return choice
    if choice != "required" and draws.random() >= rate:
        return None
    return tools[0]


def tool_call(api: str, name: str, rid: str, created: int, model_json: str) -> ToolCall:
    call_id = "call_" + rid.rsplit("-", 1)[-1].rsplit("_", 1)[-1]
    name_json = json.dumps(name)
    if api == "responses":
        item = (
            f'{{"type":"function_call","id":"fc_{rid}","call_id":"{call_id}","name":{name_json},'
            '"arguments":"","status":"completed"}'
        )
        added = item.replace('"status":"completed"', '"status":"in_progress"')
        head = (
            "event: response.output_item.added\ndata: "
            f'{{"type":"response.output_item.added","output_index":0,"item":{added}}}\n\n'
        ).encode()
        prefix = (
            "event: response.function_call_arguments.delta\ndata: "
            f'{{"type":"response.function_call_arguments.delta","item_id":"fc_{rid}","output_index":0,"delta":"'
        ).encode()
        return ToolCall(name, call_id, head, prefix, b'"}\n\n', b"", item)
    base = (
        f'data: {{"id":"{rid}","object":"chat.completion.chunk","created":{created},"model":{model_json},'
        '"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
    )
    head = (
        base + f'"id":"{call_id}","type":"function","function":{{"name":{name_json},"arguments":""}}}}]}},'
        '"logprobs":null,"finish_reason":null}]}\n\n'
    ).encode()
    prefix = (base + '"function":{"arguments":"').encode()
    suffix = b'"}}]},"logprobs":null,"finish_reason":null,"token_ids":null}]}\n\n'
    finish = (
        f'data: {{"id":"{rid}","object":"chat.completion.chunk","created":{created},"model":{model_json},'
        '"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}]}\n\n'
    ).encode()
    return ToolCall(name, call_id, head, prefix, suffix, finish, "")

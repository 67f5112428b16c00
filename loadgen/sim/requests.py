"""What a request to the simulator asks for: the body of ``/v1/chat/completions``, ``/v1/completions`` and
``/tokenize`` parsed into token ids and limits, refused with vLLM's status and wording when it is invalid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from loadgen import strict_json

from . import tokenizer
from .params import EngineParams


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def error_response(message: str, status: int, kind: str) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status)


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    """A valid generation request: its prompt's token ids and what it asks of the reply."""

    ids: list[int]
    max_tokens: int
    streaming: bool
    include_usage: bool
    ignore_eos: bool
    # A request's own ``seed`` makes its reply depend on (seed, prompt) only: the same request gets the
    # same reply, streamed or not (as a seeded or greedy request does on a real server).
    seed: int | None = None
    # ``temperature`` 0 is greedy: the reply then depends on the prompt alone (as if seeded with 0)
    temperature: float | None = None
    stop: tuple[str, ...] = ()  # stop sequences: the reply ends before the first one it would contain
    tools: tuple[str, ...] = ()  # the function tools offered, by name (sim/tools.py)
    tool_choice: str | None = None  # "auto" | "none" | "required" | a function's name; None: not given
    tool_messages: int = 0  # tool results in the prompt: chat's role "tool" messages, Responses' outputs

    @property
    def prompt_len(self) -> int:
        return len(self.ids)


def parse_generate(raw: bytes, api: str, model: str, params: EngineParams) -> GenerateRequest:
    """The request in ``raw``, or ``BadRequest`` with the status and words vLLM would answer."""
    try:
        body = strict_json.loads(raw)
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        ids = prompt_ids(body, api)
        asked = body.get("model")
        if asked not in (None, "", model):
            raise BadRequest(f"The model `{asked}` does not exist.", 404, "NotFoundError")
        max_tokens = _max_tokens(body, len(ids), params.max_model_len)
        tools = _tools(body.get("tools"), api)
        tool_choice = _tool_choice(body.get("tool_choice"))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise BadRequest(f"invalid request body: {exc}") from None
    opts = body.get("stream_options") or {}
    return GenerateRequest(
        ids=ids,
        max_tokens=max_tokens,
        streaming=bool(body.get("stream", False)),
        # the Responses API always ends with its usage (response.completed)
        include_usage=api == "responses"
        or (bool(opts.get("include_usage")) if isinstance(opts, dict) else False),
        ignore_eos=bool(body.get("ignore_eos")),
        seed=_seed(body.get("seed")),
        temperature=_temperature(body.get("temperature")),
        stop=_stop(body.get("stop")),
        tools=tools,
        tool_choice=tool_choice,
        tool_messages=_tool_messages(body, api),
    )


def _tools(value: object, api: str) -> tuple[str, ...]:
    """The names of the function tools offered: chat nests each under ``function``, the Responses API
    names it at the top; anything else is refused as vLLM refuses it."""
    if value is None:
        return ()
    if not isinstance(value, list) or api == "completions":
        raise BadRequest("'tools' must be a list of function tools (chat and responses only)")
    names: list[str] = []
    for i, tool in enumerate(value):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise BadRequest(f"tools[{i}]: expected an object with type 'function'")
        function = tool if api == "responses" else tool.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise BadRequest(f"tools[{i}]: the function needs a name")
        names.append(name)
    return tuple(names)


def _tool_choice(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):  # {"type": "function", "function": {"name": ...}} or Responses' flat shape
        function = value.get("function")
        name = function.get("name") if isinstance(function, dict) else value.get("name")
        if isinstance(name, str):
            return name
    raise BadRequest("'tool_choice' must be a string or a named function")


def _tool_messages(body: dict[str, Any], api: str) -> int:
    items = body.get("messages") if api == "chat" else body.get("input")
    if not isinstance(items, list):
        return 0
    return sum(
        1
        for m in items
        if isinstance(m, dict) and (m.get("role") == "tool" or m.get("type") == "function_call_output")
    )


def _seed(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _temperature(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _stop(value: object) -> tuple[str, ...]:
    """``stop``: a string or a list of strings (vLLM's and OpenAI's shape); empty strings never match."""
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise BadRequest("'stop' must be a string or a list of strings")
        return tuple(v for v in value if v)
    if value is not None:
        raise BadRequest("'stop' must be a string or a list of strings")
    return ()


def _max_tokens(body: dict[str, Any], prompt_len: int, max_model_len: int) -> int:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", body.get("max_output_tokens")))
    if max_tokens is None:
        max_tokens = max_model_len - prompt_len
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        if prompt_len >= max_model_len:
            raise BadRequest(
                f"This model's maximum context length is {max_model_len} tokens. However, your "
                f"request has {prompt_len} input tokens. Please reduce the length of the input messages."
            )
        raise BadRequest(f"max_tokens must be at least 1, got {max_tokens}.")
    if prompt_len + max_tokens > max_model_len:
        raise BadRequest(
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{prompt_len + max_tokens} tokens ({prompt_len} in the messages, {max_tokens} in the completion). "
            "Please reduce the length of the messages or completion."
        )
    return max_tokens


def tokenize_ids(body: object) -> list[int]:
    """The token ids ``/tokenize`` answers for ``body`` (chat when it has ``messages``)."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    api = "chat" if "messages" in body else "completions"
    if api == "chat" and body.get("add_generation_prompt") is False:
        return tokenizer.encode_chat(messages(body), add_generation_prompt=False)
    return prompt_ids(body, api)


def messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    items = body.get("messages")
    if not isinstance(items, list) or not items:
        raise BadRequest("'messages' must be a non-empty list")
    out: list[tuple[str, str]] = []
    for m in items:
        if not isinstance(m, dict):
            raise BadRequest("each message must be an object with 'role' and 'content'")
        content = m.get("content") or ""
        if isinstance(content, list):  # OpenAI content parts: keep the text ones
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        out.append((str(m.get("role", "user")), str(content)))
    return out


def prompt_ids(body: dict[str, Any], api: str) -> list[int]:
    if api == "chat":
        return tokenizer.encode_chat(messages(body))
    if api == "responses":  # input: a string, or message items as chat's (the same template, the same ids)
        given = body.get("input")
        items = [{"role": "user", "content": given}] if isinstance(given, str) else given
        return tokenizer.encode_chat(messages({"messages": items}))
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return list(tokenizer.encode(prompt))
    if isinstance(prompt, list) and prompt:
        first = prompt[0]
        if isinstance(first, int):
            return [int(t) for t in prompt]
        if isinstance(first, list):
            return [int(t) for t in first]
        if isinstance(first, str):
            return list(tokenizer.encode(first))
    raise BadRequest("'prompt' must be a string, a list of strings or a list of token ids")

"""What a request to the simulator asks for: the body of ``/v1/chat/completions``, ``/v1/completions`` and
``/tokenize`` parsed into token ids and limits, refused with vLLM's status and wording when it is invalid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

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
    stop: tuple[str, ...] = ()  # stop sequences: the reply ends before the first one it would contain

    @property
    def prompt_len(self) -> int:
        return len(self.ids)


def parse_generate(raw: bytes, api: str, model: str, params: EngineParams) -> GenerateRequest:
    """The request in ``raw``, or ``BadRequest`` with the status and words vLLM would answer."""
    try:
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        ids = prompt_ids(body, api)
        asked = body.get("model")
        if asked not in (None, "", model):
            raise BadRequest(f"The model `{asked}` does not exist.", 404, "NotFoundError")
        max_tokens = _max_tokens(body, len(ids), params.max_model_len)
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
        stop=_stop(body.get("stop")),
    )


def _seed(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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

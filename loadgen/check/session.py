"""The official OpenAI SDK pointed at the target, the way an application would use it: ``Session`` owns the
``AsyncOpenAI`` client (its ``http_client`` the SDK's own httpx client with the target's TLS settings and
proxy, by ``loadgen.target.connect``'s one rule; no retries, so every answer is the server's own), the
project's httpx client for the calls beside the SDK (``/metrics``, ``/tokenize``), the latest
``x-ratelimit-*`` headers any answer carried, scrubbing secrets out of what is shown, and one generation
call (``generate``: chat or completions, streamed or not) read into a ``Reply``.

The API key comes from the environment variable the target names (``--api-key-env``); it is given to the
SDK and never shown. Every generation asks temperature 0 and a fixed seed, so the same request twice gets
the same reply on a server that honours them (the usage and stop checks rely on it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar
from urllib.parse import parse_qsl

from loadgen.check.capped import SDK_BYTES, LastAnswer, cap_answers
from loadgen.target.connect import proxy_for, tls_context
from loadgen.target.http import api_key, scrub, target_headers, target_root, url_secrets
from loadgen.target.ratelimit import read_ratelimit
from loadgen.target.tokenize import tokenize_client
from loadgen.types import Target

if TYPE_CHECKING:
    import httpx
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletionMessageParam

__all__ = [
    "SEED",
    "NotOneObject",
    "Reply",
    "Session",
    "WrongType",
    "open_session",
    "typed",
    "usage_counts",
    "whole",
]

T = TypeVar("T")

SEED = 1234  # every generation's seed, with temperature 0: the same request, the same reply
Api = Literal["chat", "completions"]
REASONING_FIELDS = ("reasoning_content", "reasoning")  # vLLM/SGLang/DeepSeek, and OpenRouter/Ollama


@dataclass
class Reply:
    """One generation as the SDK delivered it; stream-only fields stay at their defaults otherwise."""

    text: str = ""
    finish_reason: str | None = None
    usage: CompletionUsage | None = None
    reasoning_field: str | None = None  # the reasoning field the reply carried, if any
    chunks: int = 0  # stream: chunks received
    first_role: str | None = None  # stream: the first chunk's delta role
    first_content: str | None = None  # stream: the first chunk's delta content
    usage_in_stream: bool = False  # stream: a chunk carried usage
    started_s: float = 0.0  # perf_counter when the call was made
    first_token_s: float | None = None  # perf_counter at the first chunk with text (content or reasoning)
    last_token_s: float | None = None

    parts: list[str] = field(default_factory=list)  # stream: the text of each chunk that carried some

    def chunk(self, usage: CompletionUsage | None) -> float:
        """A streamed chunk arrived (with ``usage``, if it carries it); returns its arrival time."""
        self.chunks += 1
        if usage is not None:
            self.usage, self.usage_in_stream = usage, True
        return time.perf_counter()

    def token(self, text: str, at: float) -> None:
        """A chunk with output (content, or reasoning) at ``at``."""
        self.first_token_s = self.first_token_s or at
        self.last_token_s = at
        self.parts.append(text)

    @property
    def ttft_ms(self) -> float | None:
        return None if self.first_token_s is None else (self.first_token_s - self.started_s) * 1e3

    def decode_tok_s(self) -> float | None:
        tokens = self.usage.completion_tokens if self.usage is not None else None
        if tokens is None or tokens < 2 or self.first_token_s is None or self.last_token_s is None:
            return None
        span = self.last_token_s - self.first_token_s
        return (tokens - 1) / span if span > 0 else None


@dataclass
class Session:
    """The SDK client, the model asked for, and what the answers said about rate limits."""

    target: Target
    sdk: AsyncOpenAI
    http: DefaultAsyncHttpxClient  # the SDK's
    edge: httpx.AsyncClient  # the project's (``loadgen.target.connect``): /metrics and /tokenize
    model: str
    max_model_len: int | None = None
    ratelimit: dict[str, str] = field(default_factory=dict)
    last: LastAnswer = field(default_factory=LastAnswer)  # the SDK's latest answer (``capped``)

    def note(self, headers: Mapping[str, str]) -> None:
        """Keep the latest rate-limit headers (a later answer's replace an earlier one's, key by key)."""
        self.ratelimit.update(read_ratelimit(headers.items()))

    def secrets(self) -> tuple[str, ...]:
        """The key, the URL's password and the Basic token it is sent as."""
        sent = target_headers(self.target).get("Authorization", "")  # a URL's user:password, as Basic
        return (api_key(self.target.api_key_env), *url_secrets(self.target.url), sent.partition(" ")[2])

    def scrub(self, text: str) -> str:
        """``text`` (an error, a reply) made safe to print: no key, no URL credentials, one line. Whole:
        a caller cuts what this returns, never what it is given."""
        return " ".join(scrub(text, self.secrets()).split())

    async def aclose(self) -> None:
        await self.sdk.close()
        await self.http.aclose()
        await self.edge.aclose()

    async def generate(
        self, api: Api, prompt: str, max_tokens: int, *, stream: bool, stop: list[str] | None = None
    ) -> Reply:
        """One request through the SDK; raises the SDK's errors (``openai.APIError``) for the caller."""
        if api == "chat":
            return await self._chat(prompt, max_tokens, stream, stop)
        return await self._complete(prompt, max_tokens, stream, stop)

    async def _chat(self, prompt: str, max_tokens: int, stream: bool, stop: list[str] | None) -> Reply:
        from openai import omit

        reply = Reply(started_s=time.perf_counter())
        create = self.sdk.chat.completions.with_raw_response.create
        messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": prompt}]
        if not stream:
            raw = await create(
                model=self.model,
                messages=messages,
                max_tokens=max_tokens,
                temperature=0,
                seed=SEED,
                stop=stop or omit,
            )
            self.note(raw.headers)
            done = whole(raw.parse(), raw.headers)
            choice = done.choices[0] if done.choices else None
            reply.usage = done.usage
            if choice is not None:
                reply.text = choice.message.content or ""
                reply.finish_reason = choice.finish_reason
                reply.reasoning_field = _reasoning(choice.message.model_extra)
            return typed(reply, "message.content")
        raw_stream = await create(
            model=self.model,
            messages=messages,
            max_tokens=max_tokens,
            stream=True,
            stream_options={"include_usage": True},
            temperature=0,
            seed=SEED,
            stop=stop or omit,
        )
        self.note(raw_stream.headers)
        async for chunk in raw_stream.parse():
            now = reply.chunk(chunk.usage)
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if reply.chunks == 1:
                reply.first_role, reply.first_content = delta.role, delta.content
            found = _reasoning(delta.model_extra)
            reply.reasoning_field = reply.reasoning_field or found
            if delta.content or found:
                reply.token(delta.content or "", now)
            reply.finish_reason = chunk.choices[0].finish_reason or reply.finish_reason
        return typed(reply, "delta.content")

    async def _complete(self, prompt: str, max_tokens: int, stream: bool, stop: list[str] | None) -> Reply:
        from openai import omit

        reply = Reply(started_s=time.perf_counter())
        create = self.sdk.completions.with_raw_response.create
        if not stream:
            raw = await create(
                model=self.model,
                prompt=prompt,
                max_tokens=max_tokens,
                temperature=0,
                seed=SEED,
                stop=stop or omit,
            )
            self.note(raw.headers)
            done = whole(raw.parse(), raw.headers)
            reply.usage = done.usage
            if done.choices:
                reply.text, reply.finish_reason = done.choices[0].text, done.choices[0].finish_reason
            return typed(reply, "text")
        raw_stream = await create(
            model=self.model,
            prompt=prompt,
            max_tokens=max_tokens,
            stream=True,
            stream_options={"include_usage": True},
            temperature=0,
            seed=SEED,
            stop=stop or omit,
        )
        self.note(raw_stream.headers)
        async for chunk in raw_stream.parse():
            now = reply.chunk(chunk.usage)
            if not chunk.choices:
                continue
            if chunk.choices[0].text:
                reply.token(chunk.choices[0].text, now)
            reply.finish_reason = chunk.choices[0].finish_reason or reply.finish_reason
        return typed(reply, "text")


class NotOneObject(Exception):
    """A non-streamed request answered with something the SDK cannot read as one JSON object."""


def whole(parsed: T | str, headers: Mapping[str, str]) -> T:
    """The SDK's parse of a non-streamed reply, or a clear error when the server sent text instead (the SDK
    hands back a ``str`` for an answer that is not JSON: an SSE stream, an HTML page)."""
    if isinstance(parsed, str):
        kind = headers.get("content-type", "no content type")
        what = "an SSE stream" if "event-stream" in kind or parsed.startswith("data:") else f"{kind!r} text"
        raise NotOneObject(
            f"the server answered a non-streamed request (stream false) with {what}, not one JSON object: "
            "an application using the SDK without streaming would break"
        )
    return parsed


class WrongType(NotOneObject):
    """A reply whose fields are not of the types the API gives them (the SDK does not check them)."""


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def usage_counts(usage: object) -> tuple[object, object] | None:
    """(prompt_tokens, completion_tokens) as the server sent them (the SDK does not check their types), or
    None where ``usage`` is not the SDK's usage object: absent, or a string or a number in its place."""
    from openai.types import CompletionUsage

    if not isinstance(usage, CompletionUsage):
        return None
    return usage.prompt_tokens, usage.completion_tokens


def _usage_fields(usage: object) -> list[tuple[str, object, bool]]:
    """Each usage field for ``typed``: (name, value, of the API's type)."""
    if usage is None:
        return []
    counts = usage_counts(usage)
    if counts is None:
        return [("usage", usage, False)]
    names = ("usage.prompt_tokens", "usage.completion_tokens")
    return [(name, value, isinstance(value, int)) for name, value in zip(names, counts, strict=True)]


def typed(reply: Reply, text_field: str) -> Reply:
    """``reply`` with its streamed parts joined, once its fields are of the API's types; ``WrongType`` names
    the first that is not (a check would otherwise pass a dict as text, or compare a list with a count)."""
    wrong = [
        f"{name} is {_kind(value)}"
        for name, value, ok in (
            (text_field, reply.text, isinstance(reply.text, str)),
            *((text_field, part, isinstance(part, str)) for part in reply.parts),
            (
                "finish_reason",
                reply.finish_reason,
                reply.finish_reason is None or isinstance(reply.finish_reason, str),
            ),
            ("delta.role", reply.first_role, reply.first_role is None or isinstance(reply.first_role, str)),
            *_usage_fields(reply.usage),
        )
        if not ok
    ]
    if wrong:
        raise WrongType(f"a reply of the wrong shape: {wrong[0]}, not what the OpenAI API sends")
    if reply.parts:
        reply.text = "".join(reply.parts)
    return reply


def _reasoning(extra: dict[str, object] | None) -> str | None:
    """The reasoning field a message or delta carries with text in it (fields the SDK does not type)."""
    for name in REASONING_FIELDS:
        if extra and isinstance(extra.get(name), str) and extra[name]:
            return name
    return None


def open_session(target: Target, model: str, timeout_s: float) -> Session:
    """The SDK client for ``target``: base URL ``<root>/v1``, the URL's query kept on every call, the
    target's auth (``Bearer`` from the key's variable, or the URL's ``user:password``), TLS and proxy."""
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient

    # The SDK's own httpx flavour (httpx, or httpx2 in recent SDKs), with the SDK's defaults kept; every
    # answer bounded in bytes and time (``capped``).
    last = LastAnswer()
    http = DefaultAsyncHttpxClient(
        verify=tls_context(target),
        proxy=proxy_for(target),
        trust_env=False,  # the proxy is chosen by the one rule; SSL_CERT_FILE is read by tls_context
        event_hooks={"response": [cap_answers(SDK_BYTES, timeout_s * 2, last)]},
    )
    query = dict(parse_qsl(target.url.partition("?")[2].partition("#")[0]))
    sdk = AsyncOpenAI(
        base_url=target_root(target) + "/v1",  # credentials in the URL go as a header, never in the URL
        api_key=api_key(target.api_key_env) or "EMPTY",  # the SDK wants one; a server without auth ignores it
        default_headers=target_headers(target),  # a URL's user:password becomes the Authorization here
        default_query=query or None,
        http_client=http,
        max_retries=0,
        timeout=timeout_s,
    )
    edge = tokenize_client(target, timeout_s, connect_timeout_s=target.connect_timeout_s)
    return Session(target=target, sdk=sdk, http=http, edge=edge, model=model, last=last)

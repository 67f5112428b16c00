"""The server's own token count: ``POST /tokenize`` (the vLLM and SGLang shape), off the hot path.

Owns the request body (a prompt, or chat messages rendered through the model's template), the client
those calls share (the target's headers, proxies from the environment ignored) and reading the count
(``count``, else ``len(tokens)`` / ``len(input_ids)``). ``count_tokens`` raises ``TokenizeError`` with one
line naming the URL, for callers that report why (the prompt sizer's note); ``tokenize_count`` returns
``None`` instead. httpx is imported on first use (it pulls in ``rich`` when that is installed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from loadgen import strict_json
from loadgen.target.bounded import TOKENIZE_BYTES, ReplyTooLarge, ReplyTooSlow, read_capped
from loadgen.target.connect import httpx_client
from loadgen.target.http import scrub, target_url
from loadgen.types import Target

if TYPE_CHECKING:
    import httpx

__all__ = [
    "TokenizeError",
    "count_tokens",
    "tokenize_body",
    "tokenize_client",
    "tokenize_count",
    "tokenize_url",
]

Message = tuple[str, str] | Mapping[str, str]


class TokenizeError(Exception):
    """``/tokenize`` gave no count: absent (HTTP 404/405), unreachable, or an answer without a count."""


def tokenize_url(target: Target) -> str:
    return target_url(target, "/tokenize")


def tokenize_body(
    model: str,
    text: str | None = None,
    messages: Iterable[Message] | None = None,
    add_generation_prompt: bool = False,
) -> dict[str, object]:
    """The JSON body: ``messages`` (each a (role, content) pair or a mapping) when given, else ``prompt``."""
    body: dict[str, object] = {"model": model}
    if messages is not None:
        body["messages"] = [
            {"role": m[0], "content": m[1]} if isinstance(m, tuple) else dict(m) for m in messages
        ]
        if add_generation_prompt:
            body["add_generation_prompt"] = True
    else:
        body["prompt"] = text or ""
    return body


def tokenize_client(
    target: Target, timeout_s: float = 10.0, connect_timeout_s: float | None = None
) -> httpx.AsyncClient:
    """A client for a few ``/tokenize`` calls in a row (one connection, reused); close it when done."""
    import httpx

    return httpx_client(
        target, httpx.Timeout(timeout_s, connect=connect_timeout_s if connect_timeout_s else timeout_s)
    )


def read_count(reply: object) -> int | None:
    """The token count in a ``/tokenize`` reply, ``None`` when it holds none."""
    if not isinstance(reply, dict):
        return None
    count = reply.get("count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    for key in ("tokens", "input_ids"):
        tokens = reply.get(key)
        if isinstance(tokens, list):
            return len(tokens)
    return None


async def count_tokens(client: httpx.AsyncClient, url: str, body: Mapping[str, object]) -> int:
    """POST ``body`` to ``url`` (a ``/tokenize`` URL) and return the count; ``TokenizeError`` says why not."""
    import httpx

    shown = scrub(url)  # the reason is kept (the record's sizer note): never with the URL's credentials
    timeout = client.timeout.read or 30.0  # the client's is per read: the whole answer gets one too
    try:
        response = await read_capped(
            client, "POST", url, max_bytes=TOKENIZE_BYTES, total_s=timeout, shown=shown, json=dict(body)
        )
    except (ReplyTooLarge, ReplyTooSlow) as exc:
        raise TokenizeError(str(exc)) from None
    except httpx.HTTPError as exc:
        raise TokenizeError(scrub(f"{shown}: {type(exc).__name__}: {exc}".rstrip(": "))) from None
    if response.status_code != 200:
        raise TokenizeError(f"{shown} returned HTTP {response.status_code}")
    try:
        reply = strict_json.loads(response.content)
    except ValueError:  # not JSON, nested too deeply, an integer too long (strict_json)
        raise TokenizeError(f"{shown} returned a body that is not JSON") from None
    count = read_count(reply)
    if count is None:
        raise TokenizeError(f"{shown} returned no token count")
    return count


async def tokenize_count(
    target: Target,
    model: str,
    text: str | None,
    messages: Iterable[Message] | None = None,
    timeout_s: float = 10.0,
    client: httpx.AsyncClient | None = None,
) -> int | None:
    """Token count of a prompt (``text``) or chat (``messages``) by the server's own tokenizer.

    ``None`` when the server has no ``/tokenize`` or the call fails for any reason. Pass ``client`` to
    reuse a connection.
    """
    owned = client is None
    http = client if client is not None else tokenize_client(target, timeout_s)
    try:
        return await count_tokens(http, tokenize_url(target), tokenize_body(model, text, messages))
    except TokenizeError:
        return None
    finally:
        if owned:
            await http.aclose()

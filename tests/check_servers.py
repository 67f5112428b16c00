"""Servers for ``ramp check``'s run-request check (beside ``fault_servers``, which owns the others): an
OpenAI-like server that refuses a body field ramp run sends — ``ignore_eos``, as OpenAI does, with OpenAI's
own message, or with a message that names no field — and otherwise answers like ``fault_servers.openai_like``
(streamed replies with usage, non-streamed JSON)."""

from __future__ import annotations

import socket

from aiohttp import web
from fault_servers import MODELS, REPLY, FaultServer, Handler, models_ok

OPENAI_400 = "Unrecognized request argument supplied: {field}"  # what api.openai.com says (HTTP 400)


def refusing_field(field: str = "ignore_eos", names_it: bool = True, message: str = "") -> FaultServer:
    """HTTP 400 to any completion whose body holds ``field``; ``names_it``: the message says which
    (``message``: this one instead)."""

    async def generate(req: web.Request) -> web.StreamResponse:
        body = await req.json()
        if field in body:
            message_ = message or (OPENAI_400.format(field=field) if names_it else "Invalid request.")
            error = {"message": message_, "type": "invalid_request_error", "param": None, "code": None}
            return web.json_response({"error": error}, status=400)
        if body.get("stream"):
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(req)
            await resp.write(REPLY)
            await resp.write_eof()
            return resp
        chat = req.path.endswith("/chat/completions")
        choice = {"message": {"role": "assistant", "content": "hi there"}} if chat else {"text": "hi there"}
        doc = {
            "id": "x",
            "object": "chat.completion" if chat else "text_completion",
            "model": "tiny",
            "choices": [{"index": 0, **choice, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
        return web.json_response(doc)

    routes: dict[tuple[str, str], Handler] = {
        ("GET", "/v1/models"): models_ok,
        ("POST", "/v1/chat/completions"): generate,
        ("POST", "/v1/completions"): generate,
    }
    return FaultServer(routes).start()


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound by the system, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Hostile answers to every request ``ramp check`` makes (issue 30.1): each handler answers chat, completions,
# responses, /metrics and /tokenize alike, where an OpenAI-compatible server would answer with something else.
WRONG_TYPES_JSON = {
    "id": 7,
    "object": ["chat.completion"],
    "model": {"name": "tiny"},
    "choices": [{"index": "0", "message": {"role": 5, "content": {"text": "hi"}}, "finish_reason": 3}],
    "usage": {"prompt_tokens": "five", "completion_tokens": [2], "total_tokens": None},
    "count": "many",
    "tokens": 12,
}
WRONG_TYPES_SSE = (
    b'data: {"choices":[{"index":0,"delta":{"role":7,"content":["hi"]},"finish_reason":4}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":"get_weather"},"finish_reason":null}]}\n\n'
    b'data: {"type":"response.output_text.delta","delta":{"x":1}}\n\n'
    b'data: {"type":"response.completed","response":5}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":"five","completion_tokens":[2]}}\n\n'
    b"data: [DONE]\n\n"
)


async def _sse(req: web.Request, body: bytes) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(req)
    await resp.write(body)
    await resp.write_eof()
    return resp


async def sse_always(req: web.Request) -> web.StreamResponse:
    """A short SSE reply whatever was asked (stream or not, /metrics and /tokenize too)."""
    return await _sse(req, REPLY)


async def wrong_types(req: web.Request) -> web.StreamResponse:
    """JSON, or SSE when a stream was asked, with every field of the wrong type."""
    try:
        streamed = bool((await req.json()).get("stream"))
    except ValueError:
        streamed = False
    if streamed:
        return await _sse(req, WRONG_TYPES_SSE)
    return web.json_response(WRONG_TYPES_JSON)


async def html_page(req: web.Request) -> web.StreamResponse:
    """A 200 HTML page (a captive portal, a proxy's login page) to everything."""
    return web.Response(text="<html><body>Please <b>log in</b></body></html>", content_type="text/html")


async def json_null(req: web.Request) -> web.StreamResponse:
    """A 200 whose body is the JSON ``null`` to everything."""
    return web.Response(text="null", content_type="application/json")


HOSTILE: dict[str, Handler] = {
    "sse to everything": sse_always,
    "fields of the wrong type": wrong_types,
    "an HTML page": html_page,
    "JSON null": json_null,
}


def hostile(answer: Handler, max_model_len: int = 64) -> FaultServer:
    """/v1/models states ``max_model_len`` (so the context-overflow check runs); every other path that
    ``ramp check`` reads is answered by ``answer``."""
    doc = {**MODELS, "data": [{**MODELS["data"][0], "max_model_len": max_model_len}]}  # type: ignore[dict-item]

    async def models(req: web.Request) -> web.StreamResponse:
        return web.json_response(doc)

    routes: dict[tuple[str, str], Handler] = {("GET", "/v1/models"): models, ("GET", "/metrics"): answer}
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/tokenize"):
        routes[("POST", path)] = answer
    return FaultServer(routes).start()

"""Servers for ``ramp check``'s run-request check (beside ``fault_servers``, which owns the others): an
OpenAI-like server that refuses a body field ramp run sends — ``ignore_eos``, as OpenAI does, with OpenAI's
own message, or with a message that names no field — and otherwise answers like ``fault_servers.openai_like``
(streamed replies with usage, non-streamed JSON)."""

from __future__ import annotations

import socket

from aiohttp import web
from fault_servers import REPLY, FaultServer, Handler, models_ok

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

"""The request handler's side of a generation: submit the request to the engine loop, then answer it as an
SSE stream (draining what the loop queued for a slow or stalled client) or as one JSON body at the end.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

from .loop import EngineLoop
from .sequences import Seq
from .stream import Stream

SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}


async def stream_reply(request: web.Request, st: Stream, seq: Seq, loop: EngineLoop) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await resp.prepare(request)
    st.resp = resp
    st.transport = request.transport
    loop.submit(seq)
    try:
        while True:
            await st.wake.wait()
            st.wake.clear()
            await _drain(st, resp)
            if st.backlog is not None and not st.hold_until:
                st.backlog = None
            if st.complete or st.closed:
                break
    except (ConnectionError, RuntimeError):
        st.closed = True
    if st.cut and request.transport is not None:
        request.transport.close()  # mid-stream disconnect: no terminating chunk, no [DONE]
    return resp


async def _drain(st: Stream, resp: web.StreamResponse) -> None:
    """Write what the engine loop queued, after any stall it asked for."""
    mono = time.monotonic_ns
    while True:
        if st.hold_until:
            delay = st.hold_until - mono()
            if delay > 0:
                await asyncio.sleep(delay / 1e9)
            st.hold_until = 0
        if not st.backlog:
            break
        data = b"".join(st.backlog)
        st.backlog.clear()
        now = mono()  # as the write starts (see EngineLoop._send)
        await resp.write(data)
        if st.first_ns is None and st.sent:
            st.first_ns = now
        if st.first_answer_ns is None and st.answering:
            st.first_answer_ns = now
        st.last_ns = now


async def json_reply(
    request: web.Request, st: Stream, seq: Seq, loop: EngineLoop, model: str
) -> web.StreamResponse:
    loop.submit(seq)
    while not (st.complete or st.closed):
        await st.wake.wait()
        st.wake.clear()
    if st.faults.get("stall") is not None:
        await asyncio.sleep(st.stall_s)
    now = time.monotonic_ns()
    st.first_ns = st.last_ns = now if st.sent else None
    st.first_answer_ns = now if st.sent > st.reasoning_total else None
    if "disconnect" in st.faults and request.transport is not None:
        request.transport.close()  # the connection drops before any reply
        return web.Response(status=200)
    body = json_body(st, seq, st.text(loop.tokens), model)
    if "malformed" in st.faults:
        return web.Response(body=json.dumps(body)[:-7].encode(), content_type="application/json")
    return web.json_response(body)


def json_body(st: Stream, seq: Seq, text: str, model: str) -> dict[str, Any]:
    """A non-streaming chat or completions reply, shaped like vLLM's."""
    usage = {
        "prompt_tokens": st.prompt_tokens,
        "total_tokens": st.prompt_tokens + st.sent,
        "completion_tokens": st.sent,
        "prompt_tokens_details": {"cached_tokens": seq.cached_tokens or 0},
    }
    if st.reasoning_total:
        usage["completion_tokens_details"] = {"reasoning_tokens": min(st.sent, st.reasoning_total)}
    reason = seq.finish_reason or "length"
    call = st.called
    if call is not None and reason == "stop":
        reason = "tool_calls"
    if st.api == "responses":
        return responses_body(st, text, model, reason, usage)
    if st.api == "chat":
        calls = [] if call is None else [
            {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": text}}
        ]  # fmt: skip
        choice: dict[str, Any] = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None if call is not None else text,
                "refusal": None,
                "tool_calls": calls,
            },
            "logprobs": None,
            "finish_reason": reason,
            "stop_reason": None,
        }
        obj = "chat.completion"
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": reason,
            "stop_reason": None,
        }
        obj = "text_completion"
    return {
        "id": st.rid, "object": obj, "created": st.created, "model": model,
        "choices": [choice], "usage": usage,
    }  # fmt: skip


def responses_body(st: Stream, text: str, model: str, reason: str, usage: dict[str, Any]) -> dict[str, Any]:
    """A non-streaming Responses API reply: one output message, the usage under the Responses names."""
    details = usage.get("completion_tokens_details")
    out_usage: dict[str, Any] = {
        "input_tokens": usage["prompt_tokens"],
        "input_tokens_details": usage["prompt_tokens_details"],
        "output_tokens": usage["completion_tokens"],
        "total_tokens": usage["total_tokens"],
    }
    if details is not None:
        out_usage["output_tokens_details"] = details
    message: dict[str, Any] = {
        "type": "message", "id": "msg_" + st.rid, "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }  # fmt: skip
    call = st.called
    if call is not None:  # the reply is one function call, its arguments the text
        message = {
            "type": "function_call", "id": "fc_" + st.rid, "call_id": call.call_id, "name": call.name,
            "arguments": text, "status": "completed",
        }  # fmt: skip
    status = "incomplete" if reason == "length" else "completed"
    return {
        "id": st.rid, "object": "response", "created_at": st.created, "model": model, "status": status,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "output": [message], "usage": out_usage,
    }  # fmt: skip

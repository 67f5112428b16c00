"""The streaming client against small in-process aiohttp servers: success paths, real read boundaries and
timing, the API key, on every transport (error kinds: ``test_client_errors.py``)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from client_scenarios import (
    CHAT_IDLE,
    READS,
    SECRET,
    Server,
    chat_spec,
    events_of,
    send_once,
    serve_scenarios,
    write_all,
)

from loadgen.client import Client, LiveCounter, build_body
from loadgen.types import ErrorKind, Outcome, RequestResult, RequestSpec, Target


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with serve_scenarios() as srv:
        yield srv


@pytest.fixture(params=["h1", "aiohttp"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


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
        await write_all(resp, events_of(CHAT_IDLE))
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

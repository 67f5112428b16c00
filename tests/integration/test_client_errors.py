"""The streaming client's failures, on every transport: each ``ErrorKind`` and cancellation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from client_scenarios import Server, chat_spec, free_port, hanging_connect, send_once, serve_scenarios

from loadgen.client import Client
from loadgen.types import ErrorKind, Outcome, Target


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with serve_scenarios() as srv:
        yield srv


@pytest.fixture(params=["h1", "aiohttp"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# --- every ErrorKind ------------------------------------------------------------------------------------------


async def test_connect_refused(transport: str) -> None:
    port = free_port()
    result = await send_once(Target(url=f"http://127.0.0.1:{port}"), transport)
    assert result.outcome is Outcome.ERROR and result.error_kind is ErrorKind.CONNECT
    assert f"127.0.0.1:{port}" in result.error_message and "refused" in result.error_message
    assert result.http_status is None and result.first_token_ns is None


async def test_connect_timeout(transport: str) -> None:
    with hanging_connect() as url:
        start = time.monotonic()
        result = await send_once(Target(url=url, connect_timeout_s=0.3), transport)
        elapsed = time.monotonic() - start
    assert result.error_kind is ErrorKind.CONNECT, result.error_message
    assert "0.3 s" in result.error_message and elapsed >= 0.25


async def test_ttft_timeout(server: Server, transport: str) -> None:
    result = await send_once(server.target("ttft", ttft_timeout_s=0.3, idle_timeout_s=0.1), transport)
    assert result.outcome is Outcome.ERROR and result.error_kind is ErrorKind.TTFT_TIMEOUT
    # the TTFT timeout counts from the intended start, like TTFT itself (a late send does not extend it)
    assert result.first_token_ns is None and result.end_ns - result.intended_ns >= 0.3e9
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
    with hanging_connect() as url:
        client = Client(Target(url=url), 2, transport)
        task = asyncio.create_task(client.send(chat_spec(), time.monotonic_ns()))
        await asyncio.sleep(0)  # let it start; the connect can only hang here
        task.cancel()
        result = await asyncio.wait_for(task, 5)
        await client.aclose()
    assert result.outcome is Outcome.CANCELLED

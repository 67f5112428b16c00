"""Issue 20, case 4: an SSE event that never ends (a data line without a newline, forever) is a
``malformed`` error as soon as it passes ``max_event_bytes`` (1 MiB, ``--max-event-bytes``), not a core
spinning on a growing buffer until the 300 s first-token timeout; an event under the bound still reads."""

from __future__ import annotations

import time

import pytest
from hostile_servers import endless_line, line_then_reply, serving

from loadgen.client import Client
from loadgen.config import Transport
from loadgen.types import ErrorKind, Outcome, RequestResult, RequestSpec, Target

SPEC = RequestSpec(api="chat", model="tiny", max_tokens=4, messages=(("user", "hi"),))


async def send_once(target: Target, transport: Transport) -> tuple[float, float, RequestResult]:
    client = Client(target, 1, transport)
    wall, cpu = time.monotonic(), time.process_time()
    try:
        result = await client.send(SPEC, time.monotonic_ns())
    finally:
        await client.aclose()
    return time.monotonic() - wall, time.process_time() - cpu, result


@pytest.mark.parametrize("transport", ["h1", "aiohttp", "httpx"])
async def test_an_endless_line_is_malformed_at_once(transport: Transport) -> None:
    server = serving(completions=endless_line)
    try:
        target = Target(url=server.url, ttft_timeout_s=300, idle_timeout_s=300)
        wall, cpu, result = await send_once(target, transport)
    finally:
        server.stop()
    assert result.outcome is Outcome.ERROR and result.error_kind is ErrorKind.MALFORMED, result
    assert "larger than 1,048,576 bytes" in result.error_message
    assert wall < 10 and cpu < 5, (wall, cpu)


async def test_the_bound_is_configurable_and_an_event_under_it_reads() -> None:
    server = serving(completions=line_then_reply(200_000))
    try:
        ok = (await send_once(Target(url=server.url), "h1"))[2]
        small = Target(url=server.url, max_event_bytes=100_000)
        refused = (await send_once(small, "h1"))[2]
    finally:
        server.stop()
    assert ok.outcome is Outcome.OK, ok
    assert refused.error_kind is ErrorKind.MALFORMED and "100,000 bytes" in refused.error_message

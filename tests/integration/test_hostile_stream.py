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


@pytest.mark.parametrize("transport", ["h1", "aiohttp"])
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


async def test_the_errors_of_endless_lines_do_not_keep_their_megabytes() -> None:
    """A worker collects cycles rarely (gc tuned and frozen): an error must not hold its unfinished event
    (it did, through the exception's traceback: ~1.2 MB per error, 474 MB after 377)."""
    import gc
    import tracemalloc

    server = serving(completions=endless_line)
    client = Client(Target(url=server.url), 1, "h1")
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        for _ in range(20):
            result = await client.send(SPEC, time.monotonic_ns())
            assert result.error_kind is ErrorKind.MALFORMED
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        gc.enable()
        await client.aclose()
        server.stop()
    assert held < 8 << 20, held  # 20 errors would hold 20+ MiB

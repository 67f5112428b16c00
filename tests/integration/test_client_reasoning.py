"""Reasoning streams through every transport: TTFT is the first token of any kind, TTFAT the first answer
token; the reasoning tokens come from usage when the server says, else from the reasoning chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from client_scenarios import Server, send_once, serve_scenarios

from loadgen.types import Outcome


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with serve_scenarios() as srv:
        yield srv


@pytest.fixture(params=["h1", "aiohttp"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_reasoning_then_answer_with_usage(server: Server, transport: str) -> None:
    result = await send_once(server.target("reason"), transport)
    assert result.outcome is Outcome.OK, result.error_message
    times = result.chunk_times_ns
    assert len(times) == 7 and result.reasoning_chunks == 4
    assert result.first_token_ns == times[0] and result.first_answer_ns == times[4]
    assert (result.reasoning_tokens, result.reasoning_exact, result.output_tokens) == (4, True, 7)
    assert result.reasoning_ns == times[4] - times[0] > 0
    assert result.ttfat_ns is not None and result.ttft_ns is not None
    assert result.ttfat_ns - result.ttft_ns == result.reasoning_ns
    # the answer's 3 tokens over its own span; the whole output's 7 over the whole span
    assert result.answer_decode_tok_s == pytest.approx(2 * 1e9 / (times[-1] - times[4]))
    assert result.decode_tok_s == pytest.approx(6 * 1e9 / (times[-1] - times[0]))


async def test_reasoning_field_and_mixed_chunk_without_usage(server: Server, transport: str) -> None:
    result = await send_once(server.target("reason_nousage"), transport)
    assert result.outcome is Outcome.OK, result.error_message
    times = result.chunk_times_ns
    # the mixed chunk (reasoning's last piece and the answer's first) is the first answer chunk
    assert len(times) == 6 and result.reasoning_chunks == 3
    assert result.first_answer_ns == times[3]
    assert (result.reasoning_tokens, result.reasoning_exact, result.tokens_exact) == (3, False, False)


async def test_plain_stream_has_ttfat_equal_to_ttft(server: Server, transport: str) -> None:
    result = await send_once(server.target("ok"), transport)
    assert result.outcome is Outcome.OK
    assert result.first_answer_ns == result.first_token_ns is not None
    assert (result.reasoning_tokens, result.reasoning_chunks, result.reasoning_ns) == (0, 0, 0)
    assert not result.reasoned and result.answer_decode_tok_s == result.decode_tok_s


async def test_a_stream_of_tool_calls_only_is_output(server: Server, transport: str) -> None:
    """Tool-call deltas are answer output: the first one ends the reasoning and is timed on its own (time
    to first tool call)."""
    result = await send_once(server.target("tools"), transport)
    assert result.outcome is Outcome.OK, result.error_message
    times = result.chunk_times_ns
    assert len(times) == 5 and result.tool_chunks == 3 and result.reasoning_chunks == 2
    assert result.first_tool_ns == result.first_answer_ns == times[2] and result.first_token_ns == times[0]
    assert result.ttftc_ns == result.ttfat_ns and result.finish_reason == "tool_calls"
    assert (result.output_tokens, result.reasoning_tokens) == (9, 2)


async def test_a_reply_that_only_calls_a_tool_is_ok(server: Server, transport: str) -> None:
    """No text at all, only a tool call: OK with its first tool-call delta as the first token (it was an
    EMPTY_OUTPUT error: no chunk counted as output)."""
    result = await send_once(server.target("tools_only"), transport)
    assert result.outcome is Outcome.OK, result.error_message
    assert result.tool_chunks == 2 and result.first_tool_ns == result.first_token_ns == result.first_answer_ns
    assert result.output_tokens == 2 and result.finish_reason == "tool_calls"

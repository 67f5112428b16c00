"""The OpenAI Responses API (``--api responses``) against the simulator: the same requests sent through
/v1/responses and /v1/chat/completions of two simulators alike (same preset, same seed, same order) agree on
every token exactly and on the latencies within noise; and a whole run of a profile with api = "responses"
records its steps like a chat run."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import aiohttp
import pytest
from snapshot_watch import simulated_step

from loadgen.client import Client
from loadgen.profile import parse_profile
from loadgen.sim import build_config
from loadgen.sim.server import SimServer
from loadgen.types import Api, Outcome, RequestResult, RequestSpec, Target

N = 12


def spec(api: Api, i: int) -> RequestSpec:
    words = " ".join(f"w{i}x{k}" for k in range(8 + i))
    return RequestSpec(
        api=api,
        model="",
        max_tokens=120 + 4 * i,
        messages=(("user", words),),
        extra_body=(("ignore_eos", True),),
    )


async def _alternating() -> tuple[list[RequestResult], list[RequestResult]]:
    """The same N requests over chat and over the Responses API, one of each in turn (two simulators of one
    seed, so their draws match): both series see the same moments of the machine's load."""
    servers = [SimServer(build_config("tiny-reasoning", seed=11)) for _ in range(2)]
    clients = [Client(Target(url=await server.start("127.0.0.1", 0)), 1, "h1") for server in servers]
    runs: tuple[list[RequestResult], list[RequestResult]] = ([], [])
    try:
        for i in range(N):
            apis: tuple[Api, Api] = ("chat", "responses")
            for client, api, results in zip(clients, apis, runs, strict=True):
                results.append(await asyncio.wait_for(client.send(spec(api, i), time.monotonic_ns()), 30))
        return runs
    finally:
        for client, server in zip(clients, servers, strict=True):
            await client.aclose()
            await server.stop()


def _median_ms(results: list[RequestResult], get: str) -> float:
    return statistics.median(getattr(r, get) / 1e6 for r in results)


def test_responses_and_chat_agree_on_tokens_and_latencies() -> None:
    chat, responses = asyncio.run(_alternating())
    for c, r in zip(chat, responses, strict=True):
        assert c.outcome is r.outcome is Outcome.OK, (c.error_message, r.error_message)
        assert r.tokens_exact and r.reasoning_exact
        assert (r.input_tokens, r.output_tokens, r.reasoning_tokens) == (
            c.input_tokens,
            c.output_tokens,
            c.reasoning_tokens,
        )
        assert r.output_tokens == len(r.chunk_times_ns) and r.reasoning_chunks == r.reasoning_tokens > 0
        assert r.finish_reason == c.finish_reason == "length"
    for figure in ("ttft_ns", "ttfat_ns", "reasoning_ns"):
        a, b = _median_ms(chat, figure), _median_ms(responses, figure)
        assert abs(a - b) <= max(2.0, 0.05 * a), (figure, a, b)
    decode = [statistics.median(x.decode_tok_s or 0 for x in run) for run in (chat, responses)]
    assert decode[1] == pytest.approx(decode[0], rel=0.05)


def test_a_responses_run_records_its_step(tmp_path: Path) -> None:
    text = 'name = "r"\n[target]\napi = "responses"\n[[bucket]]\ninput = 16\noutput = 120\n[sampling]\nignore_eos = true\n'
    _, step, truth = simulated_step(
        build_config("tiny-reasoning", seed=5),
        parse_profile(text),
        tmp_path,
        level=2,
        ok=4,
        api="responses",  # what runargs makes of the profile's api
        requests_detail=False,
    )
    assert {g["api"] for g in truth} == {"responses"}
    assert step.stats.approx_tokens == 0
    assert step.stats.output_tokens == sum(g["output_tokens"] for g in truth)
    assert step.stats.reasoning_tokens == sum(g["reasoning_tokens"] for g in truth)


def test_a_non_streamed_response_has_the_responses_shape() -> None:
    async def ask() -> dict[str, object]:
        server = SimServer(build_config("tiny-reasoning", seed=2))
        url = await server.start("127.0.0.1", 0)
        try:
            async with aiohttp.ClientSession() as http:
                body = {"model": "", "input": "hello", "max_output_tokens": 300, "ignore_eos": True}
                async with http.post(url + "/v1/responses", json=body) as resp:
                    assert resp.status == 200
                    return dict(await resp.json())
        finally:
            await server.stop()

    reply = asyncio.run(ask())
    assert reply["object"] == "response" and reply["status"] == "incomplete"
    usage = reply["usage"]
    assert isinstance(usage, dict) and usage["output_tokens"] == 300
    assert 0 < usage["output_tokens_details"]["reasoning_tokens"] < 300
    (message,) = reply["output"]  # type: ignore[misc]
    assert message["content"][0]["type"] == "output_text" and message["content"][0]["text"]

"""Rate-limit headers of managed endpoints (``x-ratelimit-*``): read by every transport of the load, kept
per step (the latest values) in the record's step lines, shown in one line."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from fault_servers import RATELIMIT, Flaws, openai_like

from loadgen.client import Client
from loadgen.config import RampPlan, Transport
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.target.ratelimit import ratelimit_line, ratelimit_pairs, read_ratelimit
from loadgen.types import RequestResult, RequestSpec, Target

EXPECTED = {name.removeprefix("x-ratelimit-"): value for name, value in RATELIMIT.items()}


def test_reading_and_showing_them() -> None:
    headers = [("Content-Type", "text/event-stream"), ("X-RateLimit-Remaining-Tokens", " 9990 ")]
    assert read_ratelimit(headers) == {"remaining-tokens": "9990"}
    assert ratelimit_pairs(headers) == [("X-RateLimit-Remaining-Tokens", " 9990 ")]
    assert ratelimit_pairs([("content-length", "3")]) is None
    assert ratelimit_line({}) == ""
    assert ratelimit_line({"remaining-requests": "7"}) == "remaining 7 requests"
    assert ratelimit_line({"x-custom": "1"}) == "x-ratelimit-x-custom: 1"


@pytest.mark.parametrize("transport", ["h1", "aiohttp"])
def test_every_transport_keeps_them(transport: Transport) -> None:
    spec = RequestSpec(api="chat", model="tiny", max_tokens=4, messages=(("user", "hi"),))

    async def send(url: str) -> tuple[RequestResult, RequestResult]:
        async with Client(Target(url), 1, transport) as client:
            return await client.send(spec, time.monotonic_ns()), await client.send(spec, time.monotonic_ns())

    with_limits, without = openai_like(Flaws(ratelimit=True)), openai_like()
    try:
        limited, _ = asyncio.run(send(with_limits.url))
        plain, _ = asyncio.run(send(without.url))
    finally:
        with_limits.stop()
        without.stop()
    assert limited.error_kind is None and read_ratelimit(limited.ratelimit) == EXPECTED
    assert plain.error_kind is None and plain.ratelimit == ()


def test_the_step_line_keeps_the_latest_values(tmp_path: Path) -> None:
    server = openai_like(Flaws(ratelimit=True))
    out = tmp_path / "run.jsonl"
    profile = parse_profile(
        'name = "rl"\ndescription = "d"\n[[bucket]]\ninput = 8\noutput = 4\n', source="<rl>"
    )
    try:
        config = RunConfig(
            Target(server.url),
            profile,
            plan=RampPlan((2,), step_s=0.4, warmup_s=0.0),
            out=str(out),
            telemetry=False,
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(60)
    finally:
        server.stop()
    assert outcome is not None and outcome.state == "finished", outcome
    assert outcome.steps[0].ratelimit == EXPECTED
    (line,) = read_record(out).steps
    assert line["ratelimit"] == EXPECTED

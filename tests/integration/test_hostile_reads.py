"""Issue 20, case 2: every read from the server off the hot path is bounded in bytes and time. An endless
``/metrics`` and a 50 MB one are dropped with a notice (stderr and the record's events), the load starts and
ramp stays small; a huge ``/v1/models`` is a one-line refusal; a body that trickles forever times out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from fault_servers import FaultServer
from hostile_servers import endless_metrics, huge_metrics, ramp_measured, serving

from loadgen.target.bounded import ReplyTooLarge, ReplyTooSlow, read_capped
from loadgen.target.probe import probe
from loadgen.types import Target

PROFILE = "[[bucket]]\ninput = 8\noutput = 2\n"
RSS_BOUND_MB = 300


@pytest.mark.parametrize("page", ["endless", "50MB"])
def test_a_hostile_metrics_page_is_dropped_with_a_notice(page: str, tmp_path: Path) -> None:
    server = serving(metrics=endless_metrics() if page == "endless" else huge_metrics(50))
    profile = tmp_path / "tiny.toml"
    profile.write_text(PROFILE)
    out = tmp_path / "r.jsonl"
    args = [
        "--profile",
        str(profile),
        "--steps",
        "1",
        "--step-seconds",
        "2",
        "--warmup",
        "0",
        "--out",
        str(out),
    ]
    try:
        ran = ramp_measured(["run", server.url, "--headless", *args], tmp_path, timeout_s=60)
    finally:
        server.stop()
    assert ran.returncode == 0, ran.stderr
    assert "more than 8 MiB (telemetry dropped)" in ran.stderr, ran.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    notes = [str(x.get("note")) for x in lines if x.get("kind") == "warning"]
    assert any("(telemetry dropped)" in n for n in notes), notes
    steps = [x for x in lines if x.get("type") == "step"]
    assert steps and int(steps[0]["ok"]) > 0, lines[-2:]  # the load started and ran
    assert ran.peak_rss_mb < RSS_BOUND_MB, ran.peak_rss_mb


def models_of(megabytes: int) -> web.Response:
    doc = {"object": "list", "data": [{"id": "m" * 100, "object": "model"}] * (megabytes * 10_000)}
    return web.Response(text=json.dumps(doc), content_type="application/json")


async def test_a_huge_model_list_is_refused_in_one_line() -> None:
    body = models_of(8)

    async def models(req: web.Request) -> web.StreamResponse:
        return body

    server = FaultServer({("GET", "/v1/models"): models}).start()
    try:
        info = await probe(Target(url=server.url))
    finally:
        server.stop()
    assert not info.reachable and "/v1/models sent" in info.error and "more than 4 MiB" in info.error, info


async def test_a_trickling_body_times_out_and_an_endless_one_is_cut() -> None:
    async def trickle(req: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(req)
        for _ in range(600):
            await resp.write(b"x")
            await asyncio.sleep(0.1)
        return resp

    server = FaultServer({("GET", "/slow"): trickle, ("GET", "/metrics"): endless_metrics()}).start()
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            with pytest.raises(ReplyTooSlow, match="timeout after 0.5 s"):
                await read_capped(client, "GET", server.url + "/slow", max_bytes=1 << 20, total_s=0.5)
            with pytest.raises(ReplyTooLarge, match="more than 65,536 bytes"):
                await read_capped(client, "GET", server.url + "/metrics", max_bytes=65536, total_s=30)
    finally:
        server.stop()

"""Issue 30: streams stuck waiting for a first token say so, on headless stderr and in the snapshot, where
the figures only had "not enough data". A server that takes each request and then sends nothing: the real
``ramp run --headless`` prints "2 streams waiting for a first token for N s" (N >= 5), and a finished reply
leaves nothing waiting (the count goes back to 0 once the first token is in)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from aiohttp import web
from fault_servers import FaultServer, models_ok
from hostile_servers import ramp_measured

from loadgen.format import fmt_first_wait

PROFILE = "[[bucket]]\ninput = 8\noutput = 2\n"


async def silent(req: web.Request) -> web.StreamResponse:
    """Headers, then nothing: a server whose queue never reaches this request."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(req)
    while req.transport is not None and not req.transport.is_closing():  # until ramp's TTFT timeout
        await asyncio.sleep(0.1)  # the silence itself, not a synchronisation
    return resp


def test_streams_stuck_before_a_first_token_are_said_on_headless_stderr(tmp_path: Path) -> None:
    server = FaultServer(
        {
            ("GET", "/v1/models"): models_ok,
            ("POST", "/v1/chat/completions"): silent,
            ("POST", "/v1/completions"): silent,
        }
    ).start()
    profile = tmp_path / "tiny.toml"
    profile.write_text(PROFILE)
    args = ["--profile", str(profile), "--steps", "2", "--step-seconds", "7", "--warmup", "0"]
    try:
        ran = ramp_measured(
            ["run", server.url, "--headless", *args, "--ttft-timeout", "9", "--no-metrics"], tmp_path, 90
        )
    finally:
        server.stop()
    said = re.findall(r"2 streams waiting for a first token for (\d+) s", ran.stderr)
    assert said and all(int(s) >= 5 for s in said), ran.stderr
    assert "Traceback" not in ran.stderr


def test_the_wait_is_said_only_past_a_normal_prefill() -> None:
    assert fmt_first_wait(2, 4.9) is None and fmt_first_wait(0, 30.0) is None
    assert fmt_first_wait(1, 5.0) == "1 stream waiting for a first token for 5 s"
    assert fmt_first_wait(1200, 125.0) == "1,200 streams waiting for a first token for 2:05"

"""``ramp check``'s SDK calls are bounded in bytes and time like every other read from a server (issue 20.2,
the part left for the SDK): an answer that never ends, or that trickles in under the per-read timeout,
fails its check with the limit named, and the check ends. Before the cap the SDK read such an answer for as
long as the server sent it (the endless one into memory)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiohttp import web
from fault_servers import FaultServer, Handler, models_ok
from hostile_servers import endless_body, endless_line

from loadgen.check import session
from loadgen.check.main import run_checks
from loadgen.types import Target


def answering(body_writer: Handler) -> Iterator[FaultServer]:
    server = FaultServer(
        {
            ("GET", "/v1/models"): models_ok,
            ("POST", "/v1/chat/completions"): body_writer,
            ("POST", "/v1/completions"): body_writer,
            ("POST", "/v1/responses"): body_writer,
        }
    ).start()
    try:
        yield server
    finally:
        server.stop()


endless_json = endless_body(b'{"id": "', "application/json")


async def endless(req: web.Request) -> web.StreamResponse:
    """A 200 that never ends: a JSON object's first string forever, or an SSE event's data (streamed)."""
    if (await req.json()).get("stream"):
        return await endless_line(req)
    return await endless_json(req)


async def trickle(req: web.Request) -> web.StreamResponse:
    """A 200 whose body comes a byte every 50 ms: never idle for a per-read timeout, never done."""
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    await resp.prepare(req)
    try:
        await resp.write(b'{"id": "')
        while True:
            await resp.write(b"x")
            await asyncio.sleep(0.05)  # the server's pace, not the test's synchronisation
    except (ConnectionError, RuntimeError):
        pass
    return resp


@pytest.fixture
def endless_server() -> Iterator[FaultServer]:
    yield from answering(endless)


@pytest.fixture
def trickling_server() -> Iterator[FaultServer]:
    yield from answering(trickle)


def check(url: str, timeout_s: float) -> dict[str, tuple[str, str]]:
    target = Target(url, ttft_timeout_s=timeout_s, idle_timeout_s=timeout_s, total_timeout_s=2 * timeout_s)
    report = run_checks(target, ramp_seconds=0, streams=1, timeout_s=timeout_s)
    assert not report.ok
    return {c.name: (c.status, c.reason) for c in report.checks}


def test_an_endless_answer_fails_its_check_at_the_byte_cap(
    endless_server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "SDK_BYTES", 1 << 20)  # 16 MiB in use: the same, sixteen times longer
    checks = check(endless_server.url, 20.0)
    assert checks["chat"][0] == "fail" and "sent more than 1 MiB" in checks["chat"][1], checks["chat"]
    assert checks["chat stream"][0] == "fail" and "more than 1 MiB" in checks["chat stream"][1], checks
    assert checks["responses stream"][0] == "fail" and "more than 1 MiB" in checks["responses stream"][1]
    assert checks["tool calls"][0] == "fail" and "more than 1 MiB" in checks["tool calls"][1], checks


def test_a_trickling_answer_fails_its_check_at_the_time_cap(trickling_server: FaultServer) -> None:
    checks = check(trickling_server.url, 0.3)
    assert checks["chat"][0] == "fail" and "timeout after 0.6 s" in checks["chat"][1], checks["chat"]
    assert checks["max_tokens"][0] == "fail" and "timeout after 0.6 s" in checks["max_tokens"][1]

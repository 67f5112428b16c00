"""A server that refuses (429, 5xx, 401) is backed off per stream, with its Retry-After honoured, capped and
jittered: every refused request is still counted, the pause shows live (``Snapshot.backing_off``, the
headless progress line) and the step says the server was refusing. Used to be: 500 on every request at 4
streams made ~10k errors a second."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_servers import refusing
from snapshot_watch import Watch

from loadgen.cli.headless import progress_line
from loadgen.client import Client
from loadgen.profile import parse_profile
from loadgen.record import read_record, step_from_line
from loadgen.report import format_step_table
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.run.loops import RETRY_AFTER_MAX_S, Backoff, ClosedLoop, Gate
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.target.refusals import is_refusal, refusal_text, retry_after_s
from loadgen.types import ErrorKind, Outcome, RequestResult, RequestSpec, Target
from loadgen.workload import PromptSizer, Workload

PROFILE = parse_profile(
    "[[bucket]]\ninput = 16\noutput = 16\n[sampling]\nignore_eos = true\n", source="<backoff>"
)
EXACT = PromptSizer(words_per_token=1.0, exact=True)


def refused(status: int = 500, retry_after: float | None = None) -> RequestResult:
    kind = ErrorKind.HTTP_429 if status == 429 else ErrorKind.HTTP_STATUS
    now = time.monotonic_ns()
    return RequestResult(
        Outcome.ERROR, now, now, now, error_kind=kind, http_status=status, retry_after_s=retry_after
    )


def ok() -> RequestResult:
    now = time.monotonic_ns()
    return RequestResult(Outcome.OK, now, now, now, output_tokens=1)


class FakeServer:
    """``send`` for a ClosedLoop: answers at once with whatever ``answer`` says, noting when."""

    def __init__(self, answer: RequestResult) -> None:
        self.answer = answer
        self.times: list[float] = []

    async def __call__(
        self, spec: RequestSpec, intended_ns: int, reserved: int | None = None
    ) -> RequestResult:
        self.times.append(time.monotonic())
        await asyncio.sleep(0)
        return self.answer


async def run_users(server: FakeServer, level: int, seconds: float) -> tuple[ClosedLoop, Gate, int]:
    gate = Gate()
    ids = iter(range(1, 1_000_000))
    loop = ClosedLoop(Workload(PROFILE, EXACT, "m", seed=1), server, gate, lambda: next(ids), 1, 0)
    loop.set_level(level, cancel=False)
    peak = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(0.02)
        peak = max(peak, len(loop.backing_off))
    return loop, gate, peak


async def stop(loop: ClosedLoop, gate: Gate) -> float:
    started = time.monotonic()
    gate.stopping = True
    await asyncio.wait(loop.tasks(), timeout=5)
    return time.monotonic() - started


def test_refusals_are_backed_off_per_stream() -> None:
    async def main() -> None:
        server = FakeServer(refused(500))
        loop, gate, peak = await run_users(server, 4, 1.5)
        # 100 ms doubling, jittered down to half: at most 1 + 5 tries per stream in 1.5 s (not thousands)
        assert len(server.times) <= 4 * 6, len(server.times)
        assert len(server.times) >= 4 * 2
        assert peak == 4, "every refused stream shows as backing off"
        assert await stop(loop, gate) < 0.5, "a stop ends a backoff pause at once"

    asyncio.run(main())


def test_retry_after_is_honoured_and_never_undercut() -> None:
    async def main() -> None:
        server = FakeServer(refused(429, retry_after=0.4))
        loop, gate, _ = await run_users(server, 1, 1.3)
        gaps = [b - a for a, b in zip(server.times, server.times[1:], strict=False)]
        assert 2 <= len(server.times) <= 4, server.times
        assert all(0.4 <= g <= 0.4 * 1.2 + 0.1 for g in gaps), gaps
        await stop(loop, gate)

    asyncio.run(main())


def test_lowering_the_level_lets_a_pausing_stream_leave_at_once() -> None:
    async def main() -> None:
        server = FakeServer(refused(429, retry_after=20))
        loop, gate, _ = await run_users(server, 2, 0.2)
        assert len(loop.backing_off) == 2
        loop.set_level(1, cancel=False)
        await asyncio.sleep(0.05)
        assert len(loop.users) == 1
        assert await stop(loop, gate) < 0.5

    asyncio.run(main())


def test_backoff_rules() -> None:
    backoff = Backoff(random.Random(1))
    pauses = [backoff.after(refused(503)) for _ in range(8)]
    assert 0.05 <= pauses[0] <= 0.1 and max(pauses) <= 5.0 and pauses[-1] >= 2.5
    assert backoff.after(ok()) == 0.0 and backoff.base_s == 0.0
    assert backoff.after(refused(401)) > 0 and backoff.after(refused(403)) > 0
    assert backoff.after(refused(400)) == 0.0  # about the request, not the server
    assert RETRY_AFTER_MAX_S <= backoff.after(refused(429, retry_after=3600)) <= RETRY_AFTER_MAX_S * 1.2
    assert [is_refusal(s) for s in (429, 500, 599, 401, 403, 400, 404, None)] == [True] * 5 + [False] * 3


def test_retry_after_values() -> None:
    assert retry_after_s("2") == 2.0 and retry_after_s(" 0.5 ") == 0.5 and retry_after_s("-3") == 0.0
    assert retry_after_s(None) is None and retry_after_s("soon") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now_s=1445412470.0) == 10.0
    assert refusal_text({"http_429": "HTTP 429: slow down"}) == 'refusing: "HTTP 429: slow down"'
    assert refusal_text({"http_status": "HTTP 503: busy"}) == 'refusing: "HTTP 503: busy"'
    assert refusal_text({"http_status": "HTTP 400: bad request"}) is None


@pytest.fixture(scope="module")
def server_429() -> Iterator[str]:
    srv = refusing(429, retry_after="7")
    yield srv.url
    srv.stop()


@pytest.mark.parametrize("transport", ["h1", "aiohttp"])
def test_every_transport_reads_retry_after(server_429: str, transport: str) -> None:
    async def main() -> RequestResult:
        client = Client(Target(url=server_429), max_connections=2, transport=transport)  # type: ignore[arg-type]
        spec = RequestSpec(api="chat", model="tiny", max_tokens=4, messages=(("user", "hi"),))
        try:
            return await client.send(spec, time.monotonic_ns())
        finally:
            await client.aclose()

    result = asyncio.run(main())
    assert result.error_kind is ErrorKind.HTTP_429 and result.http_status == 429
    assert result.retry_after_s == 7.0


def test_a_refusing_server_is_backed_off_counted_and_named(tmp_path: Path) -> None:
    sim = run_sim_in_thread(build_config("h200-llama8b", seed=3, error_rate=1.0))
    out = tmp_path / "run.jsonl"
    watch = Watch()
    engine = Engine(
        RunConfig(target=Target(url=sim.url), profile=PROFILE, level=4, out=str(out), warmup_s=0.0), watch
    )
    try:
        engine.start()
        snap = watch.until(
            lambda s: s.backing_off >= 2 and s.step_elapsed_s >= 2.5, 30, "streams backing off"
        )
        line = progress_line(snap)
        assert "backing off" in line and 'refusing: "HTTP 500' in line, line
        assert "err " in line and "http_status" in line, line
    finally:
        engine.stop(cancel=True)
        outcome = engine.wait(30)
        sim.stop()
    assert outcome is not None
    (line_,) = read_record(out).steps
    step = step_from_line(line_)
    errors = step.stats.errors["http_status"]
    # every refused request counted, but a handful a second per stream, not ~2,500
    assert 4 <= errors <= 4 * 8 * max(1.0, step.duration_s), (errors, step.duration_s)
    assert step.stats.ok == 0
    table = format_step_table([step], None)
    assert 'refusing: "HTTP 500' in table and "http_status" in table, table

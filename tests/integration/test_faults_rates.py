"""Tokens of failed requests never make a rate negative or claim throughput. Used to be: every stream cut
mid-stream read +1.71 out tok/s (h1) or -1.71 (aiohttp), -3.43 on malformed SSE.

How they are counted: a streamed token counts toward the live rate when it arrives; when its request then
fails, the tokens it streamed are taken back — from the tokens shipped later, never below zero (a worker
ships no negative count; what is left to take back waits for the next tokens). A window in which requests
only failed (no success, some error) claims no throughput at all: its out tok/s is 0."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from snapshot_watch import Watch

from loadgen.metrics import Accumulator, IntervalDelta
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.run.protocol import WorkerDelta, WorkerMessage
from loadgen.run.shipping import WindowBook
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.snapshot import Snapshot
from loadgen.types import ErrorKind, Outcome, RequestResult, Target

PROFILE = parse_profile(
    "[[bucket]]\ninput = 16\noutput = 64\n[sampling]\nignore_eos = true\n", source="<rates>"
)


def cut(tokens: int) -> RequestResult:
    now = time.monotonic_ns()
    times = tuple(now + i for i in range(tokens))
    return RequestResult(
        Outcome.ERROR, now, now, now + tokens, chunk_times_ns=times, output_tokens=tokens,
        error_kind=ErrorKind.STREAM_CUT,
    )  # fmt: skip


def test_a_worker_ships_no_negative_token_count() -> None:
    shipped: list[IntervalDelta] = []

    def put(msg: WorkerMessage) -> None:
        if isinstance(msg, WorkerDelta):
            shipped.append(msg.delta)

    book = WindowBook(0, put)
    book.open(0)
    for _ in range(20):  # each tick: 4 streams stream 3 tokens, then fail in the next tick
        book.live.tokens += 12
        book.ship(0, dict)
        for _ in range(4):
            window = book.sending()
            book.landed(window)
            book.record(window, cut(3))
        book.ship(0, dict)
    live = [d.live_tokens for d in shipped]
    assert min(live) >= 0, live
    assert sum(live) <= 12, f"only the tokens in flight at the worst moment, once: {live}"


def test_a_window_of_failures_only_claims_no_throughput() -> None:
    acc = Accumulator()
    delta = IntervalDelta(0, 10**9, 0, counters={"err:stream_cut": 4}, hists={}, live_tokens=12)
    acc.add(delta)
    assert acc.stats("step", 1.0).out_tok_s == 0.0
    acc.add(
        IntervalDelta(10**9, 2 * 10**9, 0, counters={"ok": 1, "output_tokens": 5}, hists={}, live_tokens=5)
    )
    assert acc.stats("step", 2.0).out_tok_s == pytest.approx(17 / 2)


CASES = [
    ("h1", {"disconnect_rate": 1.0, "disconnect_after_tokens": 3}, "stream_cut"),
    ("aiohttp", {"disconnect_rate": 1.0, "disconnect_after_tokens": 3}, "stream_cut"),
    ("h1", {"malformed_rate": 1.0, "malformed_after_tokens": 2}, "malformed"),
    ("aiohttp", {"malformed_rate": 1.0, "malformed_after_tokens": 2}, "malformed"),
]


@pytest.mark.parametrize(("transport", "faults", "kind"), CASES, ids=[f"{t}-{k}" for t, _, k in CASES])
def test_total_failure_reads_no_throughput(
    transport: str, faults: dict[str, float], kind: str, tmp_path: Path
) -> None:
    sim = run_sim_in_thread(build_config("h200-llama8b", seed=5, **faults))
    out = tmp_path / "run.jsonl"
    seen: list[Snapshot] = []
    watch = Watch()

    def sink(snap: Snapshot) -> None:
        seen.append(snap)
        watch(snap)

    # 16 streams: each backs off after a repeated error (100 ms doubling to 5 s), so 40 failures took 4
    # streams some 15 s (ten pauses each); 16 streams reach them within their first few pauses
    config = RunConfig(
        target=Target(url=sim.url), profile=PROFILE, level=16, out=str(out), transport=transport,  # type: ignore[arg-type]
        snapshot_hz=10.0, rolling_s=2.0, warmup_s=0.0,
    )  # fmt: skip
    engine = Engine(config, sink)
    try:
        engine.start()
        watch.until(lambda s: s.windows["step"].errors.get(kind, 0) >= 40 and s.step_elapsed_s > 3, 40, kind)
    finally:
        engine.stop(cancel=True)
        engine.wait(30)
        sim.stop()
    rates = [
        (s.seq, name, w.out_tok_s)
        for s in seen
        for name, w in s.windows.items()
        if w.out_tok_s is not None and (w.error_count or w.ok)
    ]
    assert rates, "no window had any result"
    assert all(r >= 0 for _, _, r in rates), [r for r in rates if r[2] < 0][:5]
    assert all(r == 0 for _, _, r in rates), [r for r in rates if r[2] != 0][:5]
    assert all(p.out_tok_s >= 0 for s in seen for p in s.series)
    (step,) = read_record(out).steps
    assert step["ok"] == 0 and step["errors"].get(kind, 0) >= 40
    assert step["out_tok_s"] == 0

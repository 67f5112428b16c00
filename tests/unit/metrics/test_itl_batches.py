"""A Recorder folds chunk times into ITL counts every ``ITL_BATCH`` results (inside a request's task step,
not all at once in the shipment): what it ships is what one pass over the interval gives."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.metrics import Accumulator, IntervalDelta, Recorder, recorder
from loadgen.types import Outcome, RequestResult

MS = 1_000_000


def result(i: int, gaps_ms: list[float], tokens: tuple[int, ...] | None = None) -> RequestResult:
    start = 10**12 + i * 7 * MS
    times = [start + 40 * MS]
    for gap in gaps_ms:
        times.append(times[-1] + int(gap * MS))
    return RequestResult(
        outcome=Outcome.OK,
        intended_ns=start,
        sent_ns=start + MS // 10,
        end_ns=times[-1] + MS,
        first_token_ns=times[0],
        last_token_ns=times[-1],
        chunk_times_ns=tuple(times),
        chunk_tokens=tokens,
        output_tokens=sum(tokens) if tokens else len(times) + i % 3,  # spread over the chunks
        tokens_exact=True,
    )


def results() -> list[RequestResult]:
    rng = np.random.default_rng(11)
    out = [result(i, list(rng.uniform(1, 40, int(rng.integers(0, 30))))) for i in range(150)]
    out.append(result(150, [2.0, 3.0], tokens=(1, 3, 2)))  # token_ids per chunk
    out.append(result(151, [2.0, 4_000_000_000.0, 3.0]))  # a gap beyond the layout's hour: out of range
    return out


def delta(batch: int, monkeypatch: pytest.MonkeyPatch) -> IntervalDelta:
    monkeypatch.setattr(recorder, "ITL_BATCH", batch)
    rec = Recorder()
    for r in results():
        rec.record(r)
    return rec.take(0, 10**9)


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_itl_folded_in_batches_equals_one_pass(monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    whole = delta(10**9, monkeypatch)
    batched = delta(batch, monkeypatch)
    assert whole.counters["oor:itl_ms"] == 1 and batched.counters == whole.counters
    for got, want in zip(batched.hists["itl_ms"], whole.hists["itl_ms"], strict=True):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    stats = []
    for d in (whole, batched):
        acc = Accumulator()
        acc.add(d)
        stats.append(acc.stats("step", 1.0))
    assert stats[0].pct("itl_ms").count > 1000 and stats[1] == stats[0]


def test_an_interval_without_streams_ships_no_itl() -> None:
    rec = Recorder()
    rec.record(result(0, []))  # one chunk: no gap
    assert "itl_ms" not in rec.take(0, 1).hists
    rec.record(result(1, [5.0]))
    assert "itl_ms" in rec.take(1, 2).hists
    assert "itl_ms" not in rec.take(2, 3).hists  # the counts start empty each interval

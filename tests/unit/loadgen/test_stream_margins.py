"""A closed loop's rates read per stream (issue 31): each request carries the stream that sent it, a worker's
delta adds up what each stream finished, and a step's out tok/s and req/s intervals are widened to the
spread of its streams' totals where that is wider than its time slices show (``loadgen.stats.clustered``)."""

from __future__ import annotations

from loadgen.metrics import IntervalDelta, Recorder
from loadgen.metrics.slices import SliceBook
from loadgen.types import Outcome, RequestResult

T0 = 1_000_000_000


def result(user: int, tokens: int, outcome: Outcome = Outcome.OK) -> RequestResult:
    return RequestResult(
        outcome=outcome, intended_ns=T0, sent_ns=T0, end_ns=T0 + 500_000_000, output_tokens=tokens, user=user
    )


def test_a_delta_carries_each_streams_tokens_and_requests_done_ok() -> None:
    rec = Recorder(worker_id=3)
    for user, tokens in ((0, 32), (0, 16), (5, 32), (-1, 99)):  # -1: open loop, no stream
        rec.record(result(user, tokens))
    rec.record(result(5, 40, Outcome.ERROR))  # a failure adds nothing to a stream's rate
    delta = rec.take(T0, T0 + 250_000_000)
    assert dict(delta.users) == {0: (48, 2), 5: (32, 1)}
    assert dict(rec.take(T0, T0 + 250_000_000).users) == {}  # the next interval starts empty


def flat_deltas(streams: dict[int, tuple[int, int]]) -> list[IntervalDelta]:
    """Two workers shipping an even 100 tokens and 3 requests every 250 ms for 5 s (slices that show no
    spread), the streams' totals in the first delta of each."""
    out = []
    for tick in range(20):
        for worker in (0, 1):
            out.append(
                IntervalDelta(
                    t0_ns=T0 + tick * 250_000_000,
                    t1_ns=T0 + (tick + 1) * 250_000_000,
                    worker_id=worker,
                    counters={"ok": 3, "output_tokens": 100},
                    hists={},
                    live_tokens=100,
                    users=streams if tick == 0 else {},
                )
            )
    return out


def margins_of(streams: dict[int, tuple[int, int]]) -> dict[str, tuple[float, float, float]]:
    book = SliceBook(T0)
    for delta in flat_deltas(streams):
        book.add(delta)
    out = {}
    for name, iv in book.margins(T0 + 5_000_000_000, []).items():
        assert iv.lo is not None and iv.hi is not None
        out[name] = (iv.value, iv.lo, iv.hi)
    return out


def test_the_streams_spread_widens_a_rate_the_slices_read_as_exact() -> None:
    even = margins_of({})  # open loop: no streams, the slices' interval alone
    value, lo, hi = even["out_tok_s"]
    assert value == 40 * 100 / 5 and (hi - lo) / value < 0.01
    # 16 streams on each worker: 250 tokens and 7.5 requests each on average, ±20 %
    spread = {u: (200 if u % 2 else 300, 6 if u % 2 else 9) for u in range(16)}
    wide = margins_of(spread)
    for name in ("out_tok_s", "req_s"):
        value, lo, hi = wide[name]
        assert value == even[name][0] and lo < 0.95 * value and hi > 1.05 * value, (name, wide[name])
    # the same streams, all alike: nothing to widen
    alike = margins_of({u: (250, 7) for u in range(16)})
    assert alike["out_tok_s"] == even["out_tok_s"] and alike["req_s"] == even["req_s"]

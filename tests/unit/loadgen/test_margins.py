"""A step's margins of error from its time slices (``loadgen.metrics.slices``): each percentile and rate of the
step line with an interval around the step's own value, clauses whose interval straddles their limit are
undecided (and such a step is never the best), and the step line keeps the intervals (issue 31)."""

from __future__ import annotations

import json

import numpy as np

from loadgen.config import SLO
from loadgen.metrics import Accumulator, IntervalDelta
from loadgen.metrics.hdr import spec_for
from loadgen.metrics.slices import SliceBook, judge
from loadgen.record import step_from_line, step_line
from loadgen.slo import best_step, evaluate
from loadgen.snapshot import StepSummary

T0 = 1_000_000_000
WINDOW_S = 8.0


def deltas(seed: int = 3) -> list[IntervalDelta]:
    """Two workers shipping every 250 ms for 8 s: 12 requests a delta, TTFT lognormal around 80 ms."""
    rng = np.random.default_rng(seed)
    layout = spec_for("ttft_ms").layout
    out = []
    for tick in range(int(WINDOW_S * 4)):
        for worker in (0, 1):
            ttft_us = np.rint(80_000 * np.exp(0.4 * rng.standard_normal(12))).astype(np.int64)
            index, _ = layout.index_of(ttft_us)
            keys, counts = np.unique(index, return_counts=True)
            out.append(
                IntervalDelta(
                    t0_ns=T0 + tick * 250_000_000,
                    t1_ns=T0 + (tick + 1) * 250_000_000,
                    worker_id=worker,
                    counters={"ok": 12, "output_tokens": 12 * 32},
                    hists={"ttft_ms": (keys.astype(np.uint16), counts.astype(np.uint32))},
                    live_tokens=12 * 32,
                )
            )
    return out


def measured() -> tuple[Accumulator, SliceBook]:
    acc, book = Accumulator(), SliceBook(T0)
    for delta in deltas():
        acc.add(delta)
        book.add(delta)
    return acc, book


def summary(slo: SLO) -> StepSummary:
    acc, book = measured()
    stats = acc.stats("step", WINDOW_S)
    margins = book.margins(T0 + int(WINDOW_S * 1e9), [("ttft_ms", ("p50", "p95", "p99"))])
    verdict = judge(slo, evaluate(slo, stats), margins, WINDOW_S)
    return StepSummary(
        index=0,
        mode="closed",
        level=16,
        rate_rps=None,
        arrival="closed",
        warmup_s=0.0,
        window_s=WINDOW_S,
        duration_s=WINDOW_S,
        stats=stats,
        verdict=verdict,
        client_bound=False,
        margins=margins,
    )


def test_every_figure_has_an_interval_around_the_steps_own_value() -> None:
    acc, book = measured()
    stats = acc.stats("step", WINDOW_S)
    margins = book.margins(T0 + int(WINDOW_S * 1e9), [("ttft_ms", ("p50", "p95", "p99"))])
    ttft = stats.pct("ttft_ms")
    for name, value in (("ttft_p50_ms", ttft.p50), ("ttft_p95_ms", ttft.p95), ("ttft_p99_ms", ttft.p99)):
        iv = margins[name]
        assert iv.value == value
        assert iv.lo is not None and iv.hi is not None and iv.lo < iv.value < iv.hi
        assert iv.batches == 16
        # 768 values hold fewer than MIN_TAIL beyond a p99: flagged, not hidden
        assert iv.trusted if name != "ttft_p99_ms" else iv.why == "768 values"
    out = margins["out_tok_s"]
    assert stats.out_tok_s is not None and abs(out.value - stats.out_tok_s) < 1e-9
    assert margins["req_s"].value == stats.req_s
    assert "goodput_req_s" not in margins  # no SLO judged the requests


def test_a_clause_whose_interval_straddles_its_limit_is_undecided_and_never_best() -> None:
    p95 = measured()[0].pct("ttft_ms").p95
    assert p95 is not None
    on_the_line = summary(SLO(ttft_p95_ms=p95 * 1.02))
    assert on_the_line.verdict.met is True  # by its point value, as before
    assert on_the_line.verdict.three_valued == "undecided"
    assert on_the_line.verdict.undecided[0].startswith("TTFT p95 ")
    assert "more" in on_the_line.verdict.undecided[0]
    assert best_step([on_the_line]) is None
    far = summary(SLO(ttft_p95_ms=p95 * 3))
    assert far.verdict.three_valued == "met" and best_step([far]) == 0
    missed = summary(SLO(ttft_p95_ms=p95 / 3))
    assert missed.verdict.three_valued == "missed"


def test_the_step_line_keeps_the_intervals_and_the_three_valued_verdict() -> None:
    acc, _ = measured()
    p95 = acc.pct("ttft_ms").p95
    assert p95 is not None
    step = summary(SLO(ttft_p95_ms=p95))
    line = json.loads(json.dumps(step_line(step, acc.encoded())))
    assert line["slo_verdict"] == "undecided" and line["slo_undecided"]
    assert line["margins"]["ttft_p95_ms"]["lo"] == step.margins["ttft_p95_ms"].lo
    back = step_from_line(line)
    assert back.verdict.three_valued == "undecided"
    for name, iv in step.margins.items():
        assert (back.margins[name].lo, back.margins[name].hi, back.margins[name].trusted) == (
            iv.lo,
            iv.hi,
            iv.trusted,
        )


def test_a_steady_rate_reads_steady_whatever_the_deltas_cadence() -> None:
    """A worker shipping every 300 ms puts one delta in some 0.5-s slices and two in others: read against the
    slices' nominal length, a perfectly steady 1,000 tok/s would look ±40 % noisy; against the time the
    deltas covered it is steady."""
    book = SliceBook(T0)
    for tick in range(30):
        t0 = T0 + tick * 300_000_000
        book.add(IntervalDelta(t0, t0 + 300_000_000, 0, {"ok": 3}, {}, live_tokens=300))
    out = book.margins(T0 + 9_000_000_000, [])["out_tok_s"]
    assert out.value == 1000.0
    assert out.rel_half_width is not None and out.rel_half_width < 0.01


def test_a_time_s_interval_holds_the_instruments_own_millisecond() -> None:
    """Every request alike (TTFT 50.0 ms exactly): the histogram alone gives an interval of its bucket, ±0.1 %,
    which the step-to-step jitter of the client's read (about a millisecond) does not fit in: two steps of
    the same server read 51.7 and 52.9 ms. The interval holds INSTRUMENT_MS more either way; a rate's does
    not."""
    from loadgen.metrics.slices import INSTRUMENT_MS

    layout = spec_for("ttft_ms").layout
    index, _ = layout.index_of(np.full(12, 50_000, dtype=np.int64))
    keys, counts = np.unique(index, return_counts=True)
    book = SliceBook(T0)
    for tick in range(int(WINDOW_S * 4)):
        book.add(
            IntervalDelta(
                t0_ns=T0 + tick * 250_000_000,
                t1_ns=T0 + (tick + 1) * 250_000_000,
                worker_id=0,
                counters={"ok": 12},
                hists={"ttft_ms": (keys.astype(np.uint16), counts.astype(np.uint32))},
                live_tokens=12 * 32,
            )
        )
    margins = book.margins(T0 + int(WINDOW_S * 1e9), [("ttft_ms", ("p50",))])
    p50 = margins["ttft_p50_ms"]
    assert p50.lo is not None and p50.hi is not None and INSTRUMENT_MS == 1.0
    assert p50.lo <= 49.0 and p50.hi >= 51.0 and p50.hi - p50.lo < 2 * INSTRUMENT_MS + 0.2
    rate = margins["out_tok_s"]
    assert rate.lo is not None and rate.hi is not None and rate.hi - rate.lo < 1.0  # a steady rate: no slack


def test_a_held_steps_closing_tail_is_not_one_outlying_slice() -> None:
    """A steady 1,000 tok/s for 5 s, then its requests' closing tail (0.4 s of tokens shipped after the
    window's end, one delta straddling it): the figure counts the tail, the spread does not see it as a
    burst in the last slice. Read twice, the book reads the same (the tail is counted once)."""
    book = SliceBook(T0)
    for tick in range(20):
        t0 = T0 + tick * 250_000_000
        book.add(IntervalDelta(t0, t0 + 250_000_000, 0, {"ok": 2}, {}, live_tokens=250))
    end = T0 + 5_000_000_000
    book.add(IntervalDelta(end - 100_000_000, end + 150_000_000, 0, {"ok": 2}, {}, live_tokens=250))
    book.add(IntervalDelta(end + 150_000_000, end + 400_000_000, 0, {"ok": 8}, {}, live_tokens=250))
    first = book.margins(end, [])["out_tok_s"]
    again = book.margins(end, [])["out_tok_s"]
    assert first == again
    assert first.value == (20 * 250 + 500) / 5.0  # the figure: every token of the window's requests
    assert first.rel_half_width is not None and first.rel_half_width < 0.02

"""Recorder -> IntervalDelta -> Accumulator against hand-built results with known timings."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from loadgen import metrics
from loadgen.metrics import (
    Accumulator,
    IntervalDelta,
    Recorder,
    RollingWindow,
    decode_histogram,
    layout_for,
    recorder,
    view_from_hdr,
)
from loadgen.metrics.recorder import MAX_ERROR_TEXT
from loadgen.snapshot import WindowStats
from loadgen.types import ErrorKind, Outcome, RequestResult

MS = 1_000_000
S = 1_000_000_000
BASE = 10_000 * S  # an arbitrary monotonic origin


def ok(
    ttft_ms: float = 50.0,
    gaps_ms: tuple[float, ...] = (10.0,),
    *,
    chunk_tokens: tuple[int, ...] | None = None,
    output_tokens: int | None = None,
    intended: int = BASE,
    lag_ms: float = 0.5,
    tail_ms: float = 1.0,
    input_tokens: int | None = 100,
    cached_tokens: int | None = None,
    exact: bool = True,
    cache_class: str | None = None,
    bucket: str = "default",
) -> RequestResult:
    first = intended + int(ttft_ms * MS)
    times = [first]
    for gap in gaps_ms:
        times.append(times[-1] + int(gap * MS))
    if output_tokens is None:
        output_tokens = sum(chunk_tokens) if chunk_tokens else len(times)
    return RequestResult(
        outcome=Outcome.OK,
        intended_ns=intended,
        sent_ns=intended + int(lag_ms * MS),
        end_ns=times[-1] + int(tail_ms * MS),
        first_token_ns=first,
        last_token_ns=times[-1],
        chunk_times_ns=tuple(times),
        chunk_tokens=chunk_tokens,
        output_tokens=output_tokens,
        input_tokens=input_tokens,
        cached_tokens=cached_tokens,
        tokens_exact=exact,
        cache_class=cache_class,
        bucket=bucket,
    )


def failed(
    kind: ErrorKind | None, message: str = "boom", chunks: int = 0, outcome: Outcome = Outcome.ERROR
) -> RequestResult:
    times = tuple(BASE + (i + 1) * 10 * MS for i in range(chunks))
    return RequestResult(
        outcome=outcome,
        intended_ns=BASE,
        sent_ns=BASE + MS,
        end_ns=BASE + 500 * MS,
        first_token_ns=times[0] if times else None,
        last_token_ns=times[-1] if times else None,
        chunk_times_ns=times,
        error_kind=kind if outcome is Outcome.ERROR else None,
        error_message=message,
    )


def stats_of(
    results: list[RequestResult], duration_s: float = 10.0, live_tokens: int = 0
) -> tuple[WindowStats, Accumulator]:
    rec = Recorder()
    for r in results:
        rec.record(r)
    acc = Accumulator()
    acc.add(rec.take(0, int(duration_s * S), live_tokens=live_tokens))
    return acc.stats("step", duration_s), acc


def rel_close(value: float | None, expected: float, rel: float = 1e-3) -> bool:
    return value is not None and abs(value - expected) <= rel * expected + 1e-9


# ---- the vectorized HDR arithmetic equals hdrh's own ----------------------------------------------------


@pytest.mark.parametrize("key", ["ttft_ms", "decode_tok_s"])
def test_index_and_range_match_hdrh(key: str) -> None:
    layout = layout_for(key)
    hdr = layout.new_hdr()
    rng = np.random.default_rng(7)
    edges = [0, 1, 2, 1023, 1024, 2047, 2048, 2049, 4095, 4096, layout.highest, layout.highest + 1]
    edges += [(1 << k) + d for k in range(11, 40) for d in (-1, 0, 1)]
    values = np.array(edges + list(rng.integers(0, layout.highest * 2, 5000)) + [-1, -5], dtype=np.int64)
    index, bad = layout.index_of(values)
    for v, i, b in zip(values.tolist(), index.tolist(), bad.tolist(), strict=True):
        fits = v >= 0 and hdr.get_counts_array_index(v) < hdr.counts_len
        assert b == (not fits), v
        if fits:
            assert i == hdr.get_counts_array_index(v), v


def hdrh_median_equivalent(hdr: HdrHistogram, value: int) -> int:
    """hdrh's ``_hdr_median_equiv_value``, from its public methods: the middle of the value's bucket."""
    low = hdr.get_lowest_equivalent_value(value)
    return low + ((hdr.get_highest_equivalent_value(value) - low + 1) >> 1)


def test_value_tables_match_hdrh() -> None:
    layout = layout_for("ttft_ms")
    hdr = layout.new_hdr()
    for i in list(range(0, 3000, 7)) + list(range(3000, layout.counts_len, 997)) + [layout.counts_len - 1]:
        low = hdr.get_value_from_index(i)
        assert layout.lowest_eq[i] == hdr.get_lowest_equivalent_value(low) == low
        assert layout.highest_eq[i] == hdr.get_highest_equivalent_value(low)
        assert layout.median_eq[i] == hdrh_median_equivalent(hdr, low)


# ---- counters ------------------------------------------------------------------------------------------


def test_counters_exact() -> None:
    results = [
        ok(output_tokens=10, input_tokens=100, cached_tokens=40),
        ok(output_tokens=20, input_tokens=200, exact=False),
        ok(output_tokens=30, input_tokens=None),
        failed(ErrorKind.CONNECT),
        failed(ErrorKind.HTTP_429),
        failed(ErrorKind.HTTP_429),
        failed(None, outcome=Outcome.CANCELLED),
    ]
    stats, _ = stats_of(results, duration_s=2.0)
    assert stats.ok == 3
    assert dict(stats.errors) == {"connect": 1, "http_429": 2}
    assert stats.error_count == 3
    assert stats.cancelled == 1
    assert stats.output_tokens == 60
    assert stats.input_tokens == 300
    assert stats.cached_tokens == 40
    assert stats.approx_tokens == 1
    assert stats.req_s == pytest.approx(1.5)
    assert stats.prefill_tok_s == pytest.approx(150.0)
    assert stats.success_rate == pytest.approx(0.5)
    # latencies from successes only; the schedule lag from every request sent
    assert stats.pct("ttft_ms").count == 3
    assert stats.pct("e2e_ms").count == 3
    assert stats.pct("lag_ms").count == 7


def test_empty_window_has_no_fake_zeros() -> None:
    stats = Accumulator().stats("run", 0.0)
    assert stats.out_tok_s is None and stats.req_s is None and stats.prefill_tok_s is None
    assert set(stats.hist) == {
        "ttft_ms",
        "ttfat_ms",
        "reasoning_ms",
        "ttftc_ms",
        "tool_decode_tok_s",
        "itl_ms",
        "decode_tok_s",
        "answer_decode_tok_s",
        "e2e_ms",
        "lag_ms",
    }
    assert stats.pct("ttft_ms").count == 0 and stats.pct("ttft_ms").p50 is None
    assert stats.hist["ttft_ms"].bins == ()


# ---- percentiles ---------------------------------------------------------------------------------------


def test_percentiles_within_hdr_precision_and_equal_to_hdrh() -> None:
    ttfts = [float(i) for i in range(1, 1001)]  # 1 .. 1000 ms
    stats, _ = stats_of([ok(ttft_ms=t, lag_ms=0.0) for t in ttfts])
    pct = stats.pct("ttft_ms")
    assert pct.count == 1000
    for got, q in ((pct.p50, 50), (pct.p90, 90), (pct.p95, 95), (pct.p99, 99), (pct.p999, 99.9)):
        assert rel_close(got, float(np.percentile(ttfts, q, method="inverted_cdf")), rel=1.5e-3), q
    assert rel_close(pct.max, 1000.0) and rel_close(pct.min, 1.0)
    assert rel_close(pct.mean, float(np.mean(ttfts)))
    # and exactly what hdrh itself answers for the same microsecond values
    hdr = HdrHistogram(1, metrics.US_PER_HOUR, 3)
    for t in ttfts:
        hdr.record_value(int(t * 1000))
    want = hdr.get_percentile_to_value_dict([50.0, 90.0, 95.0, 99.0, 99.9])
    assert [pct.p50, pct.p90, pct.p95, pct.p99, pct.p999] == [
        want[q] / 1000 for q in (50.0, 90.0, 95.0, 99.0, 99.9)
    ]
    assert pct.max == hdr.get_max_value() / 1000


def test_bins_span_the_data_and_hold_every_count() -> None:
    stats, _ = stats_of([ok(ttft_ms=float(t)) for t in np.geomspace(5, 5000, 300)])
    bins = stats.hist["ttft_ms"].bins
    assert 10 <= len(bins) <= 40
    assert sum(c for _, _, c in bins) == 300
    assert bins[0][0] <= 5.0 and bins[-1][1] >= 5000.0
    assert all(lo < hi for lo, hi, _ in bins)
    assert all(a[1] == pytest.approx(b[0]) for a, b in zip(bins, bins[1:], strict=False))
    ratios = [hi / lo for lo, hi, _ in bins]
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-6)  # log-spaced


def test_one_value_gives_one_bin() -> None:
    stats, _ = stats_of([ok(ttft_ms=100.0)] * 5)
    bins = stats.hist["ttft_ms"].bins
    assert sum(c for _, _, c in bins) == 5 and len(bins) == 1


# ---- ITL -----------------------------------------------------------------------------------------------


def itl_values(results: list[RequestResult]) -> list[float]:
    """Every ITL sample (ms) the accumulator holds, expanded by count, at HDR resolution."""
    _, acc = stats_of(results)
    counts = acc.counts("itl_ms")
    assert counts is not None
    layout = layout_for("itl_ms")
    out: list[float] = []
    for i in np.flatnonzero(counts):
        out += [float(layout.lowest_eq[i]) / 1000] * int(counts[i])
    return out


def test_itl_spreads_a_multi_token_chunk_over_its_tokens() -> None:
    # chunks of 2, 2, 3, 1 tokens after gaps of 10, 20, 30 ms
    r = ok(gaps_ms=(10.0, 20.0, 30.0), chunk_tokens=(2, 2, 3, 1))
    values = itl_values([r])
    # the first chunk's 2nd token has no gap of its own: 8 tokens -> 6 samples
    assert len(values) == 6
    expected = [5.0, 5.0, 20 / 3, 20 / 3, 20 / 3, 30.0]
    assert all(rel_close(v, e, rel=2e-3) for v, e in zip(sorted(values), expected, strict=True))


def test_itl_distributes_output_tokens_evenly_without_chunk_tokens() -> None:
    # 4 chunks, 10 tokens, no token ids: 2, 2, 3, 3 tokens per chunk
    r = ok(gaps_ms=(10.0, 30.0, 60.0), output_tokens=10)
    values = sorted(itl_values([r]))
    assert len(values) == 8  # 10 tokens - 2 in the first chunk
    expected = sorted([5.0, 5.0, 10.0, 10.0, 10.0, 20.0, 20.0, 20.0])
    assert all(rel_close(v, e, rel=2e-3) for v, e in zip(values, expected, strict=True))


def test_itl_gap_of_an_empty_chunk_goes_to_the_next() -> None:
    r = ok(gaps_ms=(10.0, 10.0), chunk_tokens=(1, 0, 2))
    values = sorted(itl_values([r]))
    assert len(values) == 2 and all(rel_close(v, 10.0, rel=2e-3) for v in values)


def test_itl_one_token_chunks_and_many_requests() -> None:
    results = [ok(gaps_ms=(float(i + 1),) * 5) for i in range(20)]
    values = itl_values(results)
    assert len(values) == 100
    for i in range(20):
        assert sum(1 for v in values if rel_close(v, float(i + 1), rel=2e-3)) == 5


# ---- decode speed and classes --------------------------------------------------------------------------


def test_decode_tok_s() -> None:
    # 101 tokens, 1 s from first to last: 100 tok/s; 51 tokens over 1 s: 50 tok/s
    fast = ok(gaps_ms=(1000.0,), output_tokens=101)
    slow = ok(gaps_ms=(1000.0,), output_tokens=51)
    one = ok(gaps_ms=(), output_tokens=1)  # no decode speed for a single token
    stats, _ = stats_of([fast, fast, fast, slow, one])
    pct = stats.pct("decode_tok_s")
    assert pct.count == 4
    assert rel_close(pct.p50, 100.0) and rel_close(pct.min, 50.0)
    assert stats.hist["decode_tok_s"].unit == "tok/s"


def test_cache_class_and_bucket_split() -> None:
    results = [ok(ttft_ms=10.0, cache_class="hit") for _ in range(10)]
    results += [ok(ttft_ms=100.0, cache_class="miss", bucket="long") for _ in range(5)]
    results += [ok(ttft_ms=40.0)]
    stats, _ = stats_of(results)
    assert rel_close(stats.by_class["cache:hit"]["ttft_ms"].p50, 10.0)
    assert stats.by_class["cache:hit"]["ttft_ms"].count == 10
    assert rel_close(stats.by_class["cache:miss"]["ttft_ms"].p50, 100.0)
    assert stats.by_class["cache:miss"]["e2e_ms"].count == 5
    assert stats.by_class["bucket:long"]["ttft_ms"].count == 5
    assert "bucket:default" not in stats.by_class
    assert stats.pct("ttft_ms").count == 16


# ---- live tokens ---------------------------------------------------------------------------------------


def test_live_correction_sums_to_successful_usage_tokens() -> None:
    results = [
        ok(gaps_ms=(5.0,) * 9, output_tokens=12),  # 10 chunks counted live, usage says 12
        ok(gaps_ms=(5.0,) * 3, chunk_tokens=(3, 3, 3, 3), output_tokens=12),
        ok(gaps_ms=(5.0,) * 3, chunk_tokens=(1, 1, 1, 1), output_tokens=4),
        failed(ErrorKind.STREAM_CUT, chunks=7),
        failed(None, chunks=3, outcome=Outcome.CANCELLED),
    ]
    live = 0
    rec = Recorder()
    for r in results:
        live += sum(r.chunk_tokens) if r.chunk_tokens else len(r.chunk_times_ns)  # the client, per chunk
        live += rec.live_correction(r)  # at completion
        rec.record(r)
    assert live == 12 + 12 + 4
    acc = Accumulator()
    acc.add(rec.take(0, 2 * S, live_tokens=live))
    stats = acc.stats("step", 2.0)
    assert stats.output_tokens == 28
    assert stats.out_tok_s == pytest.approx(14.0)


# ---- deltas, merging, windows --------------------------------------------------------------------------


def mixed_results(n: int, seed: int) -> list[RequestResult]:
    rng = np.random.default_rng(seed)
    out: list[RequestResult] = []
    for i in range(n):
        if i % 17 == 3:
            out.append(failed(ErrorKind.IDLE_TIMEOUT, f"stalled {i}"))
            continue
        gaps = tuple(float(g) for g in rng.uniform(1, 40, int(rng.integers(0, 30))))
        out.append(
            ok(
                ttft_ms=float(rng.lognormal(4, 0.5)),
                gaps_ms=gaps,
                cache_class=("hit", "miss", None)[i % 3],
                bucket=("short", "long")[i % 2],
                lag_ms=float(rng.uniform(0, 3)),
            )
        )
    return out


def test_interval_delta_pickles() -> None:
    rec = Recorder(worker_id=3)
    for r in mixed_results(50, 1):
        rec.record(r)
    delta = rec.take(5, 250 * MS, live_tokens=77, in_flight=4, queued=2, sent=9, health={"cpu_pct": 12.5})
    back = pickle.loads(pickle.dumps(delta))
    assert isinstance(back, IntervalDelta)
    assert (back.worker_id, back.live_tokens, back.in_flight, back.queued, back.sent) == (3, 77, 4, 2, 9)
    assert back.ok == 47 and back.error_count == 3 and back.input_tokens == 4700
    assert (
        back.health == {"cpu_pct": 12.5}
        and back.counters == delta.counters
        and back.recent_errors == delta.recent_errors
    )
    assert set(back.hists) == set(delta.hists)
    a, b = Accumulator(), Accumulator()
    a.add(delta)
    b.add(back)
    assert a.stats("run", 1.0) == b.stats("run", 1.0)
    # the recorder starts over after a take
    assert rec.take(250 * MS, 500 * MS).hists == {}


def test_two_workers_merged_equal_one_recorder_fed_both() -> None:
    results = mixed_results(200, 2)
    w1, w2, both = Recorder(1), Recorder(2), Recorder(0)
    for i, r in enumerate(results):
        (w1 if i % 2 else w2).record(r)
        both.record(r)
    d1, d2 = w1.take(0, S, live_tokens=10), w2.take(0, S, live_tokens=5)
    merged = Accumulator()
    merged.add(d1)
    merged.add(d2)
    single = Accumulator()
    single.add(both.take(0, S, live_tokens=15))
    assert merged.stats("step", 1.0) == single.stats("step", 1.0)
    assert merged.encoded() == single.encoded()
    # Accumulator.merge gives the same again
    a1, a2 = Accumulator(), Accumulator()
    a1.add(d1)
    a2.add(d2)
    a1.merge(a2)
    assert a1.stats("step", 1.0) == single.stats("step", 1.0)


def test_many_intervals_equal_one() -> None:
    results = mixed_results(120, 3)
    rec, acc = Recorder(), Accumulator()
    for i, r in enumerate(results):
        rec.record(r)
        if i % 10 == 9:
            acc.add(rec.take(i, i + 1))
    _, whole = stats_of(results)
    assert acc.stats("run", 10.0) == whole.stats("run", 10.0)


def test_spilled_buffers_equal_unspilled(monkeypatch: pytest.MonkeyPatch) -> None:
    results = mixed_results(150, 4)
    _, plain = stats_of(results)
    monkeypatch.setattr(recorder, "SPILL_AT", 50)
    _, spilled = stats_of(results)
    assert spilled.stats("step", 1.0) == plain.stats("step", 1.0)


def test_rolling_window_drops_old_intervals() -> None:
    window = RollingWindow(5.0)
    rec = Recorder()
    for second in range(20):
        rec.record(ok(ttft_ms=float(second + 1) * 10))
        window.add(rec.take(second * S, (second + 1) * S, live_tokens=100))
    stats = window.stats(20 * S)
    # intervals ending after 15 s: those of seconds 15..19
    assert stats.ok == 5 and stats.pct("ttft_ms").count == 5
    assert rel_close(stats.pct("ttft_ms").min, 160.0) and rel_close(stats.pct("ttft_ms").max, 200.0)
    assert stats.duration_s == pytest.approx(5.0)
    assert stats.out_tok_s == pytest.approx(100.0)
    assert window.stats(20 * S, 10.0).out_tok_s == pytest.approx(50.0)  # the caller's duration wins
    empty = window.stats(100 * S)
    assert empty.ok == 0 and empty.pct("ttft_ms").count == 0 and empty.out_tok_s is None


def test_out_of_range_values_are_counted() -> None:
    too_long = ok(ttft_ms=2 * 3600 * 1000.0)  # 2 h: past the 1 h top
    backwards = RequestResult(
        outcome=Outcome.OK, intended_ns=BASE, sent_ns=BASE - MS, end_ns=BASE + 10 * MS, output_tokens=1
    )
    stats, acc = stats_of([too_long, backwards, ok()])
    assert acc.out_of_range == {"ttft_ms": 1, "e2e_ms": 1, "lag_ms": 1}
    assert stats.pct("ttft_ms").count == 1
    assert stats.pct("lag_ms").count == 2


def test_recent_errors_are_few_and_whole_up_to_a_cap() -> None:
    # Few per interval; each whole enough to read what the server said (the console shows it all), capped.
    rec = Recorder()
    for i in range(20):
        rec.record(failed(ErrorKind.HTTP_STATUS, f"500 Internal Server Error #{i}\n" + "x" * 500))
    rec.record(failed(ErrorKind.HTTP_STATUS, "y" * 5000))
    delta = rec.take(0, 1)
    assert len(delta.recent_errors) == 5
    assert delta.recent_errors[-2].startswith("http_status: 500 Internal Server Error #19")
    assert delta.recent_errors[-2].endswith("x" * 500)  # not cut at 200 characters any more
    assert all("\n" not in e for e in delta.recent_errors)
    assert len(delta.recent_errors[-1]) == len("http_status: ") + MAX_ERROR_TEXT
    assert delta.error_count == 21 and delta.ok == 0


def test_encoded_histograms_decode_to_the_same_view() -> None:
    _, acc = stats_of(mixed_results(300, 5))
    encoded = acc.encoded()
    assert {
        "ttft_ms",
        "itl_ms",
        "e2e_ms",
        "lag_ms",
        "input_tokens",
        "output_tokens",
        "ttft_ms|cache:hit",
    } <= set(encoded)
    for key, b64 in encoded.items():
        assert isinstance(b64, str)
        assert view_from_hdr(decode_histogram(b64), key) == acc.view(key)


def test_out_of_range_counts_reach_the_window_stats() -> None:
    top_ms = layout_for("ttft_ms").highest / 1000  # the 1 h top of every latency histogram
    too_long = ok(ttft_ms=top_ms * 2)
    stats, _ = stats_of([too_long, ok(), ok()])
    assert dict(stats.out_of_range) == {"ttft_ms": 1, "e2e_ms": 1}
    clean, _ = stats_of([ok(), ok()])
    assert dict(clean.out_of_range) == {}
    # a rolling window forgets them with the interval that brought them
    window = RollingWindow(1.0)
    rec = Recorder()
    rec.record(too_long)
    window.add(rec.take(0, S))
    assert dict(window.stats(S).out_of_range) == {"ttft_ms": 1, "e2e_ms": 1}
    assert dict(window.stats(3 * S).out_of_range) == {}

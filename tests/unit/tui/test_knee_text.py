"""The knee search's words (``tui.knee``) and its range prompt (``tui.steering``): the SLO figure with the
least room and where its interval stands by the rule that ends a probe; the knee followed; the range typed
and offered."""

from __future__ import annotations

import pytest
from tui_fakes import make_snapshot

from loadgen.config import SLO
from loadgen.snapshot import SearchView
from loadgen.stats import Interval
from tui.knee import live_figure, search_text
from tui.steering import default_range, parse_range


def interval(value: float, lo: float | None, hi: float | None, trusted: bool = True) -> Interval:
    return Interval(value, lo, hi, 16, 400, 15.0, trusted)


def test_the_figure_with_the_least_room_and_where_its_interval_stands() -> None:
    slo = SLO(ttft_p95_ms=100.0, decode_p50_tok_s=40.0)
    live = {"ttft_p95_ms": interval(96.0, 90.0, 102.0), "decode_p50_tok_s": interval(80.0, 78.0, 82.0)}
    snap = make_snapshot(slo=slo, live_margins=live)
    assert live_figure(snap) == "TTFT p95 96 ± 6 ms, undecided"  # 4 % room against decode's 100 %
    missed = {"ttft_p95_ms": interval(212.0, 190.0, 234.0)}
    assert live_figure(make_snapshot(slo=slo, live_margins=missed)) == "TTFT p95 212 ± 22 ms, missed"
    # not trusted: decides only twice past the limit (loadgen.metrics.slices.decided), one side known
    near = {"ttft_p95_ms": interval(171.0, 150.0, None, trusted=False)}
    assert live_figure(make_snapshot(slo=slo, live_margins=near)) == "TTFT p95 171 ms (95 %: ≥150), undecided"
    far = {"ttft_p95_ms": interval(271.0, 239.0, None, trusted=False)}
    assert live_figure(make_snapshot(slo=slo, live_margins=far)) == "TTFT p95 271 ms (95 %: ≥239), missed"
    fast = {"ttft_p95_ms": interval(21.7, 20.0, 23.4)}
    assert live_figure(make_snapshot(slo=slo, live_margins=fast)) == "TTFT p95 21.7 ± 1.7 ms, met so far"
    assert live_figure(make_snapshot(slo=slo)) == "" and search_text(make_snapshot()) == ""


def test_the_range_typed_and_the_range_offered() -> None:
    assert parse_range("1:64") == (1.0, 64.0)
    assert parse_range(" 64 ") == (1.0, 64.0)
    assert parse_range("0.5:12.5") == (0.5, 12.5)
    for bad in ("64:1", "0:8", "a:b", ""):
        with pytest.raises(ValueError):
            parse_range(bad)
    assert default_range((2.0, 32.0), (1.0, 8.0)) == (2.0, 32.0)  # --find-max's
    assert default_range(None, (4.0, 8.0, 16.0)) == (4.0, 16.0)  # the plan's lowest to highest
    assert default_range(None, (4.0,)) == (1.0, 512.0)  # --find-max's own default


def test_the_header_says_the_knee_is_followed_and_how_its_held_step_stands() -> None:
    slo = SLO(ttft_p95_ms=100.0)
    live = {"ttft_p95_ms": interval(21.7, 20.0, 23.4)}
    view = SearchView(1.0, 16.0, "following", 4.0, summary="max 4 streams")
    snap = make_snapshot(slo=slo, live_margins=live, search=view, step_remaining_s=20.0)
    assert (
        search_text(snap)
        == "following the knee at 4: TTFT p95 21.7 ± 1.7 ms, met so far, ≈20 s (f stops following)"
    )


def test_the_header_says_when_the_followed_knee_is_checked_for_room_above() -> None:
    slo = SLO(ttft_p95_ms=100.0)
    live = {"ttft_p95_ms": interval(212.0, 190.0, 234.0)}
    view = SearchView(1.0, 16.0, "following", 5.0, "room above", summary="max 4 streams")
    snap = make_snapshot(slo=slo, live_margins=live, search=view, step_remaining_s=4.0)
    assert (
        search_text(snap)
        == "room above the knee? probing 5: TTFT p95 212 ± 22 ms, missed, ≈4 s (f stops following)"
    )

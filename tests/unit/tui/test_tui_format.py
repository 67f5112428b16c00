"""Unit tests of the console's pure helpers: labels, steering arithmetic, view cycling (numbers: test_format)."""

from __future__ import annotations

import pytest

from loadgen.snapshot import SLO, SLOVerdict
from tui import format as f
from tui.steering import level_delta, next_level, next_rate, parse_level, parse_rate, round_sig
from tui.view import ViewState


def test_missing_values_say_why() -> None:
    sources = {"vllm /metrics": "ok", "nvml": "library not found", "dcgm": "connection refused"}
    assert f.source_reasons(sources, gpu=True) == "nvml: library not found; dcgm: connection refused"
    assert f.source_reasons(sources, gpu=False) == ""


def test_mode_and_step_labels() -> None:
    assert f.mode_label("closed", 32, None) == "closed loop 32"
    assert f.mode_label("open", 64, 12.0, "poisson") == "open loop λ 12.0 req/s (poisson, cap 64)"
    assert f.mode_label("open", 0, 2.5, "constant") == "open loop λ 2.50 req/s (constant)"
    assert f.step_label(2, 8, 12) == "step 3/8 · 0:12 left"
    assert f.step_label(0, None, None) == "step 1 (manual)"
    assert f.step_label(0, None, None, auto=True) == "step 1 (auto)"  # the auto-ramp's step is not manual
    assert f.window_label("rolling", 10) == "last 10 s"


def test_slo_threshold_per_metric() -> None:
    slo = SLO(ttft_p95_ms=500, decode_p50_tok_s=40, e2e_p95_s=8)
    assert f.slo_threshold(slo, "ttft_ms") == (500, "SLO p95 ≤ 500 ms")
    assert f.slo_threshold(slo, "decode_tok_s") == (40, "SLO p50 ≥ 40.0")
    assert f.slo_threshold(slo, "e2e_ms") == (8000, "SLO p95 ≤ 8.00 s")
    assert f.slo_threshold(slo, "itl_ms") is None
    assert f.slo_threshold(SLO(ttft_p99_ms=900), "ttft_ms") == (900, "SLO p99 ≤ 900 ms")
    assert f.verdict_label(SLOVerdict(True)) == "met"
    assert f.verdict_label(SLOVerdict(False, ("x",))) == "miss"
    assert f.verdict_label(SLOVerdict(None)) == "–"


def test_ellipsize() -> None:
    assert f.ellipsize("abcdef", 4) == "abc…"
    assert f.ellipsize("abc", 4) == "abc"
    assert f.ellipsize("abc", 0) == ""


def test_closed_loop_steps() -> None:
    assert level_delta("up") == 1
    assert level_delta("down_coarse") == -10
    assert level_delta("double") is None
    assert next_level(32, "double") == 64
    assert next_level(0, "double") == 1
    assert next_level(33, "half") == 16
    assert next_level(3, "down_coarse") == 0


def test_open_loop_rate_steps() -> None:
    assert next_rate(12.0, "up") == 13.0
    assert next_rate(13.0, "down") == 12.0
    assert next_rate(1.0, "up") == 1.1
    assert next_rate(5.0, "down_coarse") == 0.1  # never below the floor
    assert next_rate(3.0, "double") == 6.0
    assert next_rate(0.1, "down") == 0.1
    # every step moves: rounding never leaves the rate where it was
    rate = 1.0
    for _ in range(30):
        new = next_rate(rate, "up")
        assert new > rate
        rate = new
    assert round_sig(1234, 2) == 1200


def test_parse_typed_values() -> None:
    assert parse_level(" 48 ") == 48
    assert parse_rate("12.5 req/s") == 12.5
    with pytest.raises(ValueError, match="not a whole number"):
        parse_level("abc")
    with pytest.raises(ValueError, match="between"):
        parse_level("-1")
    with pytest.raises(ValueError, match="positive"):
        parse_rate("0")
    with pytest.raises(ValueError, match="not a rate"):
        parse_rate("fast")


def test_view_cycles() -> None:
    view = ViewState()
    assert view.cycle_left().left_metric == "ttfat_ms"  # TTFT's twin: the first answer token
    assert view.cycle_left().cycle_left().left_metric == "ttftc_ms"  # the first tool-call delta
    assert view.cycle_left().cycle_left().cycle_left().left_metric == "itl_ms"
    assert view.cycle_right().right_metric == "answer_decode_tok_s"
    assert view.cycle_right().cycle_right().right_metric == "tool_decode_tok_s"
    assert view.cycle_right().cycle_right().cycle_right().right_metric == "itl_ms"
    assert view.cycle_window().window == "rolling"
    assert view.cycle_window().cycle_window().cycle_window().window == "step"
    assert view.cycle_curve_x().curve_x == "level"

"""The control panel's lines (issue 21): "this step" req/s reads "warming" until the window is a couple of
typical requests long (it under-reads before: the requests it started have not finished), and a run whose
streams back off after refusals says BACKING OFF N on the steering line."""

from __future__ import annotations

from dataclasses import replace

from tui_fakes import make_snapshot, window

from loadgen.format import fmt_rate
from tui.control import rate_warming, steering_line, window_line


def test_step_req_s_reads_warming_until_the_window_is_two_typical_requests_long() -> None:
    stats = window("step", 0.4)  # e2e p50 3.9 s
    early = replace(stats, duration_s=5.0, req_s=13.1)
    settled = replace(stats, duration_s=8.0, req_s=18.8)
    assert rate_warming(early) and not rate_warming(settled)
    assert "req/s warming" in window_line(early, "this step", 120, {}).plain
    assert fmt_rate(13.1) not in window_line(early, "this step", 120, {}).plain
    assert fmt_rate(18.8) in window_line(settled, "this step", 120, {}).plain
    nothing_done = replace(stats, duration_s=20.0, hist={})
    assert rate_warming(nothing_done)
    # the rolling and whole-run windows are never "warming": their span is already long
    assert not rate_warming(replace(early, window="rolling"))


def test_backing_off_is_on_the_steering_line() -> None:
    assert "BACKING OFF" not in steering_line(make_snapshot(), 160, {}).plain
    line = steering_line(make_snapshot(backing_off=12), 160, {}).plain
    assert "BACKING OFF 12" in line
    assert "BACKING OFF 12" in steering_line(make_snapshot(backing_off=12), 60, {}).plain  # kept when narrow

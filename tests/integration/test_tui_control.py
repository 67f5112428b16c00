"""The control panel's lines (issue 21): "this step" req/s reads "warming" until the window is a couple of
typical requests long (it under-reads before: the requests it started have not finished), and a run whose
streams back off after refusals says BACKING OFF N on the steering line."""

from __future__ import annotations

from dataclasses import replace

from tui_fakes import make_snapshot, window

from loadgen.format import fmt_rate
from loadgen.snapshot import ClientHealth
from tui.control import health_line, rate_warming, split_reason, steering_line, window_line
from tui.status import progress_line


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


LONG_REASON = (
    "load worker waited for a CPU 35% of the time (loop lag over 5 ms in 3% of samples, max 21 ms): other "
    "processes hold this machine's cores; run ramp on another host"
)


def test_streams_stuck_before_a_first_token_are_on_the_steering_line() -> None:
    """Issue 30: a server that answers nothing read only "not enough data" and n/a figures."""
    assert "first token" not in steering_line(make_snapshot(waiting_first=2, first_wait_s=4.0), 160, {}).plain
    line = steering_line(make_snapshot(waiting_first=2, first_wait_s=5.4), 160, {}).plain
    assert "2 streams waiting for a first token for 5 s" in line


def test_the_client_bound_advice_is_kept_at_120_columns() -> None:
    """The advice came last and was cut at 120 columns: the figures in parentheses give way first."""
    health = ClientHealth(loop_lag_ms_p99=48.0, cpu_pct=(41.0,), client_bound=True, reason=LONG_REASON)
    line = health_line(make_snapshot(health=health), 118, {}).plain
    assert "CLIENT-BOUND" in line and line.rstrip().endswith("run ramp on another host"), line
    assert len(line) <= 118
    wide = health_line(make_snapshot(health=health), 220, {}).plain
    assert LONG_REASON in wide  # whole where it fits
    assert split_reason("load worker at 99% CPU: add --workers") == (
        "load worker at 99% CPU",
        "",
        "add --workers",
    )


def test_the_header_says_where_n_goes() -> None:
    """Issue 21, item 3: the plan's next level above the current one, 'none' at the plan's end or the
    auto-ramp's ceiling; never shown in a replay."""
    assert "n → 32" in progress_line(make_snapshot(next_load=32.0), 160, {}).plain
    assert "n → none" in progress_line(make_snapshot(next_load=None), 160, {}).plain
    opened = make_snapshot(mode="open", rate_rps=12.0, next_load=24.0)
    assert "n → 24 req/s" in progress_line(opened, 160, {}).plain
    assert "n →" not in progress_line(make_snapshot(selected=1), 160, {}).plain

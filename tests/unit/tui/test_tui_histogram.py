"""Unit tests of the pure renderers: histogram bins → bars and markers, plots, and the panel texts."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from rich.text import Text
from tui_fakes import make_snapshot

from loadgen.format import fmt_ms
from loadgen.snapshot import GPUSample, HistogramView, Percentiles, ServerTelemetry
from tui.control import health_line, steering_line, window_line
from tui.curve import render_curve
from tui.errors import render_errors
from tui.histogram import HistogramStyle, axis_range, data_range, percentile_markers, rebin, render_histogram
from tui.plot import LogScale, bar_heights, bar_rows, nice_log_ticks, place_labels, resample, sparkline
from tui.server import render_server
from tui.status import identity_line, progress_line
from tui.steps import render_steps_table
from tui.throughput import render_throughput

BINS = ((10.0, 20.0, 5), (20.0, 40.0, 30), (40.0, 80.0, 10), (80.0, 160.0, 0), (160.0, 320.0, 1))
VIEW = HistogramView("ttft_ms", "ms", Percentiles(count=46, p50=30.0, p95=70.0, p99=200.0, max=300.0), BINS)


def test_rebin_conserves_counts() -> None:
    for width in (3, 7, 40, 200):
        scale = LogScale(10.0, 320.0, width)
        columns = rebin(BINS, scale)
        assert len(columns) == width
        assert sum(columns) == pytest.approx(46)


def test_rebin_one_bin_per_column_when_aligned() -> None:
    # 5 log-equal bins over 5 columns: each column gets exactly its bin.
    assert rebin(BINS, LogScale(10.0, 320.0, 5)) == pytest.approx([5, 30, 10, 0, 1])


def test_ranges_trim_empty_tails_and_stretch_to_the_slo() -> None:
    bins = ((1.0, 10.0, 0), *BINS, (320.0, 640.0, 0))
    assert data_range(bins) == (10.0, 320.0)
    assert data_range(((1.0, 2.0, 0),)) is None
    stretched = axis_range(bins, 1000.0)  # within 10x: shown
    assert stretched is not None and stretched[1] > 1000.0
    assert axis_range(bins, 1e6) == (10.0, 320.0)  # far away: not stretched


def test_render_histogram_draws_markers_slo_and_ticks() -> None:
    text = render_histogram(VIEW, 40, 12, threshold=(100.0, "SLO p95 ≤ 100 ms"))
    lines = text.plain.split("\n")
    assert len(lines) == 12
    assert all(len(line) <= 40 for line in lines)
    assert lines[0].startswith("p50 30.0 ms  p95 70.0 ms")
    axis = lines[-3]
    assert axis.count("▲") == 3 and "┃" in axis
    assert "50" in lines[-2] and "95" in lines[-2] and "99" in lines[-2]
    assert "100ms" in lines[-1]
    # the SLO line runs through the empty part of the bar area
    assert any("┊" in line for line in lines[1:-3])


def test_p50_colliding_with_p95_keeps_p95_and_p99() -> None:
    """Issue 30: captures that drew "50" and "99" had no "95". With p50 a column from p95 (their labels
    overlap) and p99 apart, the label row keeps the SLO's percentile and p99; p50 gives way, unless the SLO
    is on p50."""
    view = replace(VIEW, pct=replace(VIEW.pct, p50=60.0, p95=63.0, p99=200.0))
    scale = LogScale(10.0, 320.0, 40)
    assert abs(scale.column(60.0) - scale.column(63.0)) <= 2  # closer than two labels and their gap
    markers = percentile_markers(view, scale, HistogramStyle())
    assert [name for _, name, _ in markers] == ["95", "99", "50"]
    labels = render_histogram(view, 40, 12).plain.split("\n")[-2]
    assert re.findall(r"\d+", labels) == ["95", "99"], labels
    on_p50 = render_histogram(view, 40, 12, threshold=(250.0, "SLO p50 ≤ 250 ms")).plain.split("\n")[-2]
    assert re.findall(r"\d+", on_p50) == ["50", "99"], on_p50


def test_render_histogram_colours_the_bad_side_of_the_slo() -> None:
    text = render_histogram(VIEW, 40, 8, threshold=(100.0, "x"))
    bad = [span for span in text.spans if str(span.style) == "red"]
    assert bad, "bars past the SLO threshold use the bar_bad style"


def test_render_histogram_small_and_empty() -> None:
    assert render_histogram(None, 40, 10).plain == "no samples yet"
    assert render_histogram(HistogramView("ttft_ms", "ms", Percentiles()), 40, 10).plain == "no samples yet"
    tiny = render_histogram(VIEW, 20, 3)
    assert len(tiny.plain.split("\n")) == 3
    assert render_histogram(VIEW, 4, 10).plain == ""


def test_far_slo_is_pointed_at() -> None:
    text = render_histogram(VIEW, 40, 10, threshold=(1e6, "x"))
    assert "SLO→" in text.plain


def test_bar_rows_and_heights() -> None:
    assert bar_heights([0, 1, 2, 4], 1) == [0, 2, 4, 8]
    assert bar_heights([1000, 1], 2) == [16, 1]  # a tail sample stays visible
    assert bar_rows([0, 4, 8], 1) == [" ▄█"]
    assert bar_rows([0, 4, 8], 1, basic=True) == [" ▄█"]
    assert bar_rows([8, 4], 2) == ["█ ", "██"]
    assert sparkline([0, 5, 10, None]) == "▁▅█ "


def test_resample_and_ticks() -> None:
    cols = resample([0, 1, 2, 3], [1, 2, 3, 4], 0, 3, 2)
    assert cols == [1.5, 3.5]
    assert resample([0, 10], [1, 5], 0, 10, 5) == [1.0, 1.0, 1.0, 1.0, 5.0]  # gaps keep the last value
    assert nice_log_ticks(10, 1000)[:3] == [10, 100, 1000]
    assert nice_log_ticks(0, 10) == []


def test_place_labels_drops_overlaps() -> None:
    row = place_labels(12, [(0, "abc", ""), (2, "zzz", ""), (8, "end", "")])
    assert row.plain == "abc     end "
    assert place_labels(5, [(10, "xy", "")]).plain == "   xy"


def test_status_and_control_lines() -> None:
    snap = make_snapshot()
    assert "meta-llama/Llama-3.1-8B-Instruct" in identity_line(snap, 200, {}).plain
    narrow = identity_line(snap, 80, {}).plain
    assert len(narrow) <= 80 and "Llama-3.1-8B-Instruct" in narrow
    progress = progress_line(snap, 200, {}).plain
    assert "RUNNING" in progress and "closed loop 64" in progress and "step 5/8 · 0:12 left" in progress
    assert "level 64" in steering_line(snap, 200, {}).plain
    open_snap = make_snapshot(mode="open", rate_rps=12.0, achieved_rps=11.8, queued=3, level=0)
    line = steering_line(open_snap, 200, {}).plain
    assert (
        "λ asked 12.0 req/s" in line
        and "sent 11.8/s" in line  # issue 30: started per second, beside the window's "done"
        and "cap none" in line
        and "queued 3" in line
    )
    assert "out 4.81k tok/s" in window_line(snap.windows["step"], "this step", 200, {}).plain
    assert "no data yet" in window_line(None, "this step", 80, {}).plain


def test_client_bound_is_loud() -> None:
    from loadgen.snapshot import ClientHealth

    snap = make_snapshot(
        health=ClientHealth(loop_lag_ms_p99=40.0, cpu_pct=(99.0,), client_bound=True, reason="worker CPU 99%")
    )
    line = health_line(snap, 200, {}).plain
    assert "CLIENT-BOUND" in line and "worker CPU 99%" in line
    assert "healthy" in health_line(make_snapshot(), 200, {}).plain


def test_server_panel_never_fakes_a_zero() -> None:
    assert render_server(None, 60).plain == "no telemetry source"
    missing = ServerTelemetry(sources={"vllm /metrics": "connection refused", "nvml": "library not found"})
    text = render_server(missing, 120).plain
    assert "KV cache      n/a (vllm /metrics: connection refused)" in text
    assert "GPU           n/a (nvml: library not found)" in text
    assert " 0" not in text
    full = render_server(make_snapshot().server, 100).plain
    assert "GPU0 H200" in full and "125.0/140.4 GiB" in full and "62.4%" in full and "running 61" in full


def test_a_long_gpu_name_is_cut_visibly() -> None:
    gpu = GPUSample(0, "NVIDIA H200 (simulated)", mem_used_mib=1.0, mem_total_mib=2.0)
    text = render_server(ServerTelemetry(gpus=(gpu,)), 40).plain
    assert text.startswith("GPU0 H200 (s… ")
    assert render_server(ServerTelemetry(gpus=(gpu,)), 100).plain.startswith("GPU0 H200 (simulated) ")


def test_server_ttft_sits_beside_the_clients_only_for_a_finished_steps_window() -> None:
    # Issue 9: live, the server's histogram window and the client's step cover different requests, so the
    # server's figure stands alone, labelled as its own window; the pair is a finished step's, from its
    # record (StepSummary.server), over that step's window.
    snap = make_snapshot()
    lines = render_server(snap.server, 100, client=snap).plain.splitlines()
    server_row = next(line for line in lines if line.startswith("server TTFT"))
    assert "p50 380 ms" in server_row and "p95 610 ms" in server_row and "server's window" in server_row
    assert not any("client" in line for line in lines)
    step = replace(snap.steps[2], server={"server_ttft_p50_ms": 402.0, "server_ttft_p95_ms": 655.0})
    paired = replace(snap, steps=(*snap.steps[:2], step, snap.steps[3]))
    lines = render_server(snap.server, 100, client=paired).plain.splitlines()
    server_row = next(line for line in lines if line.startswith("step 3 server"))
    client_row = next(line for line in lines if line.startswith("step 3 client"))
    client = step.stats.pct("ttft_ms")
    assert "TTFT p95 655 ms" in server_row and "p50 402 ms" in server_row
    assert f"TTFT p95 {fmt_ms(client.p95)}" in client_row and f"p50 {fmt_ms(client.p50)}" in client_row


def test_steps_table_and_curve() -> None:
    from rich.console import Console

    snap = make_snapshot()
    console = Console(width=100, record=True)
    console.print(render_steps_table(snap.steps, snap.best_step, 20))
    table = console.export_text()
    assert "★3" in table and "miss" in table and "met" in table
    empty = render_steps_table((), None, 10)
    assert isinstance(empty, Text) and empty.plain == "no finished steps yet"
    curve = render_curve(snap.steps, snap.best_step, "out_tok_s", 40, 10).plain
    assert all(digit in curve for digit in "1234")
    assert "out tok/s" in curve
    assert "level" in render_curve(snap.steps, snap.best_step, "level", 40, 10).plain
    with_slo = render_curve(snap.steps, snap.best_step, "out_tok_s", 40, 12, slo_ttft_p95_ms=500.0).plain
    assert "SLO 500 ms" in with_slo and "┄┄┄" in with_slo
    # An SLO far above every step (10 s here) would flatten the curve onto its bottom row: the axis keeps
    # to the data, the title's arrow says the SLO is above it, and no SLO line is drawn.
    top = max(s.stats.pct("ttft_ms").p95 or 0.0 for s in snap.steps)
    far = render_curve(snap.steps, snap.best_step, "out_tok_s", 40, 12, slo_ttft_p95_ms=10_000.0).plain
    assert "SLO 10.0 s ↑" in far and "┄┄┄" not in far
    assert fmt_ms(top * 1.05) in far  # the y axis tops out just above the highest point


def test_throughput_and_errors() -> None:
    snap = make_snapshot()
    text = render_throughput(snap.series, snap.step_starts_s, 60, 12).plain.split("\n")
    assert len(text) == 12
    assert text[0].startswith("out tok/s")
    assert "prefill" in text[-2] and "req/s" in text[-1]
    assert render_throughput((), (), 60, 12).plain == "no throughput yet"
    errors = render_errors(snap, 60, 10).plain
    assert "HTTP 429" in errors and "stream cut" in errors and "latest" in errors
    clean = make_snapshot(windows={}, recent_errors=())
    assert render_errors(clean, 60, 10).plain == "no errors"

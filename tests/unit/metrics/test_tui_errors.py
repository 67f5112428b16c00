"""The errors panel: counts by kind, latest messages, and a launched server's log lines under them."""

from __future__ import annotations

import dataclasses

from tui_fakes import make_snapshot

from loadgen.metrics import Accumulator, Recorder, layout_for
from loadgen.types import Outcome, RequestResult
from tui.errors import render_errors


def test_server_log_tail_is_shown_under_the_errors() -> None:
    snap = dataclasses.replace(
        make_snapshot(),
        server_log=tuple(f"INFO line {i}" for i in range(30)) + ("ERROR engine died",),
    )
    text = render_errors(snap, width=60, height=12).plain
    lines = text.splitlines()
    assert len(lines) <= 12
    assert "server log" in text
    assert lines[-1].strip() == "ERROR engine died"  # the newest line last
    assert "INFO line 0" not in text  # only the tail that fits


def test_no_server_log_without_a_launched_server() -> None:
    text = render_errors(make_snapshot(), width=60, height=12).plain
    assert "server log" not in text


def test_a_warning_found_before_the_load_stays_on_top() -> None:
    warning = "profile 'chat': about 2.4% of requests ask for more than the server's max_model_len 2,048"
    clean = make_snapshot(windows={}, recent_errors=(), warnings=(warning,))
    assert render_errors(clean, 200, 10).plain.splitlines()[0] == "⚠ " + warning
    busy = make_snapshot(warnings=(warning,))
    lines = render_errors(busy, 200, 20).plain.splitlines()
    assert lines[0] == "⚠ " + warning and lines[1].startswith("run ")


def test_out_of_range_counts_are_shown_when_there_are_some() -> None:
    # A value above a histogram's highest trackable value, recorded: the run window counts it.
    rec, acc = Recorder(), Accumulator()
    top_ns = layout_for("ttft_ms").highest * 1000
    rec.record(
        RequestResult(outcome=Outcome.OK, intended_ns=0, sent_ns=1, end_ns=2 * top_ns, output_tokens=1)
    )
    acc.add(rec.take(0, 10**9))
    run = acc.stats("run", 1.0)
    snap = make_snapshot()
    busy = dataclasses.replace(snap, windows={**snap.windows, "run": run})
    text = render_errors(busy, 200, 20).plain
    assert "out of histogram range" in text and "e2e latency 1" in text
    quiet = make_snapshot(windows={"run": run}, recent_errors=())
    lines = render_errors(quiet, 200, 20).plain.splitlines()
    assert any("out of histogram range" in line and "e2e latency 1" in line for line in lines)
    # none: not a word about it
    assert "out of histogram range" not in render_errors(make_snapshot(), 200, 20).plain


def test_a_narrow_panel_cuts_its_lines_and_never_tears_them() -> None:
    """At 120x36 the errors panel is 22 cells wide: 'HTTP 429    3  step 1' was 23, its '1' torn onto the
    next line. Every line fits the width; the step's count gives way first."""
    lines = render_errors(make_snapshot(), width=22, height=12).plain.splitlines()
    assert all(len(line) <= 22 for line in lines), lines
    assert any(line.strip().startswith("HTTP 429") and line.rstrip().endswith("3") for line in lines), lines
    wide = render_errors(make_snapshot(), width=60, height=12).plain
    assert "HTTP 429    3  step 1" in wide

"""The errors panel: counts by kind, latest messages, and a launched server's log lines under them."""

from __future__ import annotations

import dataclasses

from tui_fakes import make_snapshot

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

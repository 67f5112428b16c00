"""The headless face without a server: the progress line, the wait loop's output and the exit codes."""

from __future__ import annotations

import pytest
from tui_fakes import STEPS, ScriptedEngine, make_snapshot

from loadgen.cli.headless import finish, progress_line, wait_with_progress
from loadgen.exits import EXIT_OK, EXIT_SLO, EXIT_UNREACHABLE
from loadgen.run.config import RunOutcome


def test_progress_line_closed_and_open() -> None:
    line = progress_line(make_snapshot())
    assert line.startswith("step 5/8 · 64 streams · measuring")
    assert "12s left" in line and "tok/s" in line and "TTFT p95 " in line and "in flight 61" in line
    assert "CLIENT-BOUND" not in line
    line = progress_line(make_snapshot(mode="open", rate_rps=2.5, step_count=None, warming_up=True))
    assert line.startswith("step 5 · 2.5 req/s · warm-up")


def test_wait_prints_warnings_once_and_a_line_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = RunOutcome(state="finished", steps=(), best_step=None, record_path=None)
    warn = ("the profile asks for more context than the server serves",)
    snaps = [
        make_snapshot(state="starting"),
        make_snapshot(step_index=0, warnings=warn),
        make_snapshot(step_index=0, warnings=warn),
        make_snapshot(step_index=1, warnings=warn),
    ]
    engine = ScriptedEngine(snaps, outcome)
    assert wait_with_progress(engine) is outcome
    err = capsys.readouterr().err.splitlines()
    assert err.count(f"ramp: warning: {warn[0]}") == 1
    steps = [line for line in err if line.startswith("step ")]
    assert [line.split(" ·")[0] for line in steps] == ["step 1/8", "step 2/8"]
    assert not engine.stopped


def test_finish_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert finish(None) == EXIT_UNREACHABLE
    met = RunOutcome(state="finished", steps=STEPS, best_step=1, record_path="runs/x.jsonl")
    assert finish(met) == EXIT_OK
    out = capsys.readouterr().out
    assert "record: runs/x.jsonl" in out and "TTFT" in out.upper()
    assert finish(RunOutcome(state="finished", steps=STEPS, best_step=None, record_path=None)) == EXIT_SLO
    down = RunOutcome(
        state="failed", steps=(), best_step=None, record_path=None, message="no", unreachable=True
    )
    assert finish(down) == EXIT_UNREACHABLE
    assert "ramp: no" in capsys.readouterr().err
    died = RunOutcome(state="failed", steps=STEPS, best_step=1, record_path=None, unreachable=True)
    assert finish(died) == EXIT_UNREACHABLE


def test_finish_prices_the_steps_and_shows_repeats(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Headless ends with the same priced table and repeats as `ramp report` (issue 11: cost live)."""
    monkeypatch.setenv("COLUMNS", "120")  # the table's width: the same in a terminal, a pipe or a test worker
    from dataclasses import replace

    from tui_fakes import step

    from loadgen.cli.commands import build_parser
    from loadgen.cli.resolve import build_config

    url = "http://127.0.0.1:9"
    config = build_config(build_parser().parse_args(["run", url, "--gpu-usd-per-hour", "3.6"]), url)
    repeats = (
        replace(step(0, 16, 2700.0, 100.0, True), repeat=0),
        replace(step(1, 16, 2800.0, 100.0, True), repeat=1),
        replace(step(2, 16, 2710.0, 100.0, True), repeat=2),
    )
    outcome = RunOutcome(state="finished", steps=repeats, best_step=1, record_path=None)
    assert finish(outcome, config) == EXIT_OK
    out = capsys.readouterr().out
    # $3.60 per GPU hour is $0.001 per second; at 2,700 tok/s: 0.001 / 2700 * 1e6 = $0.370 per 1M output
    # (shown "$0.37"), at 2,800: $0.357; per request: 30 s x $0.001 / 2,000 requests = $0.000015.
    assert "$0.37 " in out and "$0.357" in out and "$0.000015" in out
    assert "median (min–max)" in out and "2,710 (2,700–2,800)" in out
    finish(outcome)
    assert "$0.357" not in capsys.readouterr().out  # no config, no price

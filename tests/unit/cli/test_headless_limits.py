"""Headless: each finished step's diagnosis is one line on stderr, said once, in order, including the steps
that finished after the last snapshot shown (from the outcome); a step without a diagnosis says nothing.
The console's steps panel shows the measuring step's provisional line in place of the last finished one's."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tui_fakes import ScriptedEngine, judged_steps, make_snapshot

from loadgen.cli.headless import wait_with_progress
from loadgen.run.config import RunOutcome
from tui.steps import StepsPanel

QUEUEING = {
    "kind": "queueing",
    "confidence": "high",
    "evidence": ["12 waiting", "decode flat"],
    "first_checks": ["max-num-seqs (the batch limit)", "KV capacity"],
}
NONE = {"kind": "none", "confidence": "medium", "evidence": ["tok/s grows with the streams, latency flat"]}


def test_each_finished_steps_limit_is_said_once_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    steps = judged_steps()[:3]
    first = replace(steps[0], diagnosis=NONE)
    second = steps[1]  # a record from before diagnoses: nothing to say
    third = replace(steps[2], diagnosis=QUEUEING)
    snaps = [
        make_snapshot(step_index=1, steps=(first,)),
        make_snapshot(step_index=1, steps=(first,)),
        make_snapshot(step_index=2, steps=(first, second)),
    ]
    outcome = RunOutcome(state="finished", steps=(first, second, third), best_step=0, record_path=None)
    assert wait_with_progress(ScriptedEngine(snaps, outcome)) is outcome
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ramp: step ")]
    assert said == [
        f"ramp: step 1 ({first.level}): Limit: none yet — tok/s grows with the streams, latency flat",
        f"ramp: step 3 ({third.level}): Limit: queueing — 12 waiting, decode flat · check max-num-seqs "
        "(the batch limit), KV capacity",
    ]


def test_the_steps_panel_shows_the_measuring_steps_provisional_limit_over_the_last_finished() -> None:
    steps = (*judged_steps()[:-1], replace(judged_steps()[-1], diagnosis=NONE))
    panel = StepsPanel()
    panel.update_titles(make_snapshot(steps=steps, best_step=0), view=None)  # type: ignore[arg-type]
    assert str(panel.border_title).startswith("Ramp steps · Limit: none yet")
    live = {**QUEUEING, "provisional": True}
    snap = make_snapshot(steps=steps, best_step=0, live_diagnosis=live)
    panel.update_titles(snap, view=None)  # type: ignore[arg-type]
    assert str(panel.border_title).startswith(
        "Ramp steps · Limit so far (provisional): queueing — 12 waiting"
    )
    first = make_snapshot(steps=(), best_step=None, live_diagnosis=live)  # the first step: none finished yet
    panel.update_titles(first, view=None)  # type: ignore[arg-type]
    assert "Limit so far (provisional): queueing" in str(panel.border_title)
    # the drawing's inputs change with the line, so the title is redrawn as it changes (once a second at most)
    assert panel.inputs(snap, None) != panel.inputs(replace(snap, live_diagnosis={}), None)  # type: ignore[arg-type]

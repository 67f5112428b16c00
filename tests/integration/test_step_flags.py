"""A step whose load was not held is never silent and never clean (issue 19, defects 3 and 4):

- a load worker killed mid-step, or while the step closes, flags the step ``worker_lost`` with the
  requests in flight on it that vanished (``lost_requests``); the step is never the best, headless says so
  and exits 4; the next step spreads the level over the workers left and is clean again;
- a stop (SIGTERM, SIGHUP, SIGINT reach the engine as ``interrupt``) while a step closes flags it
  ``closing_cut``: its requests still in flight were cancelled, so it is never the best.

Against the simulator in its own process (2 ms + 1 ms per running sequence a decode step, 200 tokens: a
request takes about 2 s at 8 streams, so a step closes for long enough to act in)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from snapshot_watch import Watch

from loadgen.cli.headless import finish
from loadgen.config import RampPlan
from loadgen.exits import EXIT_WORKER_LOST
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.engine import Engine
from loadgen.sim.handle import ProcessSimHandle
from loadgen.sim.params import StepCost
from loadgen.types import Target
from tui.format import step_notes

PROFILE = """
name = "long"
[[bucket]]
input = 24
output = 200
[sampling]
ignore_eos = true
"""
STEEP = StepCost(2.0, 1.0, 0.0, ((0, 2.0), (128, 4.0)), spec_draft_ms=0.5)


# the conftest's module-scoped simulator
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.sim(
        "tiny-cpu", seed=8, max_num_seqs=64, cost=STEEP, kv_capacity_tokens=1 << 20, process=True
    ),
]


def start(sim: ProcessSimHandle, out: Path, plan: RampPlan, workers: int = 1) -> tuple[Engine, Watch]:
    config = RunConfig(
        Target(sim.url),
        parse_profile(PROFILE, source="<long>"),
        plan=plan,
        workers=workers,
        out=str(out),
        telemetry=False,
        seed=9,
    )
    watch = Watch()
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    return engine, watch


def ended(engine: Engine) -> RunOutcome:
    outcome = engine.wait(90)
    if outcome is None:
        engine.stop()
        outcome = engine.wait(30)
    assert outcome is not None
    return outcome


def step_lines(out: Path) -> list[Any]:
    return read_record(str(out)).steps


def test_a_worker_killed_mid_step_flags_the_step(
    sim: ProcessSimHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mid.jsonl"
    engine, watch = start(sim, out, RampPlan((8.0,), step_s=6.0, warmup_s=0.5), workers=2)
    try:
        watch.until(lambda s: s.phase == "measure" and s.windows["step"].ok >= 4, 60, "measuring")
        os.kill(engine.worker_pids()[1], signal.SIGKILL)
    finally:
        outcome = ended(engine)
    assert outcome.state == "finished", outcome
    (step,) = step_lines(out)
    assert step.get("flags") == ["worker_lost"] and step.get("lost_requests", 0) >= 1, step
    assert outcome.best_step is None and not outcome.steps[0].clean
    assert finish(outcome) == EXIT_WORKER_LOST
    said = capsys.readouterr().out
    assert "step 1 not clean: a load worker died during it" in said, said
    assert any(w.startswith("worker 1 lost: worker 1 (pid") for w in watch.snap.warnings)  # said at once
    assert step_notes(False, 0.0, outcome.steps[0].flags) == "worker lost"  # the console's notes column


def test_a_worker_killed_while_the_step_closes_flags_what_vanished(
    sim: ProcessSimHandle, tmp_path: Path
) -> None:
    out = tmp_path / "closing.jsonl"
    engine, watch = start(sim, out, RampPlan((8.0, 4.0), step_s=2.5, warmup_s=0.5), workers=2)
    try:
        watch.until(lambda s: s.phase == "closing" and s.closing_left >= 6, 60, "closing with 6 in flight")
        os.kill(engine.worker_pids()[1], signal.SIGKILL)
    finally:
        outcome = ended(engine)
    assert outcome.state == "finished", outcome
    first, second = step_lines(out)
    # Each worker held 4 of the 8 streams: what the killed one had in flight never came back.
    assert first.get("flags") == ["worker_lost"] and 1 <= first.get("lost_requests", 0) <= 4, first
    assert first["ok"] + first["error_count"] + first["cancelled"] + first.get("lost_requests", 0) >= 8
    # The next step spreads its 4 streams over the worker left: measured under its own load, clean.
    assert second["level"] == 4 and second.get("flags", []) == [] and second["ok"] >= 2, second
    assert outcome.best_step == 1


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
def test_a_stop_while_the_step_closes_marks_it_cut(sim: ProcessSimHandle, tmp_path: Path, sig: int) -> None:
    out = tmp_path / "cut.jsonl"
    engine, watch = start(sim, out, RampPlan((8.0, 4.0), step_s=2.5, warmup_s=0.5))
    try:
        watch.until(lambda s: s.phase == "closing" and s.closing_left >= 4, 60, "closing with 4 in flight")
        engine.interrupt(sig)  # what the signal handler calls (loadgen.run.signals)
    finally:
        outcome = ended(engine)
    assert outcome.state == "stopped" and outcome.signum == sig, outcome
    (step,) = step_lines(out)
    assert step["ended_by"] == "plan" and step["cancelled"] >= 1, step
    assert step.get("flags") == ["closing_cut"], step
    assert outcome.best_step is None and not outcome.steps[0].clean

"""Issue 30: a step set by hand from Python (``engine.set_level``) gets the plan's warm-up by default, so its
figures are the level's own. ``RunConfig.warmup_s`` defaulted to 0: the streams the raise added all began at
once inside the measured window, and their queued prefills read as the level's TTFT (a 16-stream step after
64 read TTFT p95 108.6 ms against 52.7-67.0 alone). Here a raise from 2 to 8 streams on the CPU-like
simulator is warmed up as a plan's step is, and its medians and throughput are those of 8 streams run alone
under a plan (within 15 %; before, its record said warmup_s 0 and its window began with the raise)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from snapshot_watch import Watch

from loadgen.config import DEFAULT_WARMUP_S, RampPlan
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.types import Target

pytestmark = pytest.mark.sim("tiny-cpu", seed=3, process=True)

PROFILE = parse_profile(
    "name = 'warm'\n[[bucket]]\ninput = { min = 64, max = 512 }\noutput = { min = 8, max = 64 }\n"
    "[sampling]\nignore_eos = true\n",
    source="<warm>",
)
MEASURE_S = 4.0
TOLERANCE = 0.15  # the same level alone twice: medians and throughput within a few % on this simulator


def step_at(out: Path, level: int) -> dict[str, Any]:
    (step,) = [s for s in read_record(str(out)).steps if s["level"] == level]
    return step


def test_a_level_set_by_hand_measures_as_that_level_run_alone(sim: Any, tmp_path: Path) -> None:
    manual_out, alone_out = tmp_path / "manual.jsonl", tmp_path / "alone.jsonl"
    watch = Watch()
    # No plan and no warmup_s given: what a script steering the engine by hand writes.
    engine = Engine(
        RunConfig(Target(sim.url), PROFILE, level=2, out=str(manual_out), telemetry=False, seed=5),
        on_snapshot=watch,
    )
    engine.start()
    try:
        watch.until(lambda s: s.in_flight == 2 and s.step_elapsed_s >= 1.0, 60, "two streams for a second")
        engine.set_level(8)
        watch.until(
            lambda s: s.level == 8 and s.step_elapsed_s >= DEFAULT_WARMUP_S + MEASURE_S, 60, "the step at 8"
        )
    finally:
        engine.stop()
        assert engine.wait(60) is not None
    alone = Engine(
        RunConfig(
            Target(sim.url),
            PROFILE,
            plan=RampPlan((8.0,), step_s=DEFAULT_WARMUP_S + MEASURE_S),  # the plan's own warm-up
            out=str(alone_out),
            telemetry=False,
            seed=5,
        )
    )
    alone.start()
    outcome = alone.wait(60)
    assert outcome is not None and outcome.state == "finished", outcome
    manual, planned = step_at(manual_out, 8), step_at(alone_out, 8)
    assert manual["warmup_s"] == pytest.approx(planned["warmup_s"], abs=0.2) == DEFAULT_WARMUP_S
    # The medians and the throughput: a tail point of ~90 requests moves by 30 % between two runs alone.
    for figure, point in (("ttft_ms", "p50"), ("e2e_ms", "p50")):
        got, want = manual[figure][point], planned[figure][point]
        assert got == pytest.approx(want, rel=TOLERANCE), (figure, point, got, want)
    assert manual["out_tok_s"] == pytest.approx(planned["out_tok_s"], rel=TOLERANCE)

"""Every step measured under its own load (issue: step truth), end to end through the engine against the
simulator in its own process, with a cost model whose decode step grows steeply with the batch (2 ms + 1 ms
per running sequence), so a request that finishes under the next level's load reads visibly slower.

- A level measured inside a ramp reads the same as that level run alone, going up (4 → 32) and down
  (32 → 4, which must settle before its warm-up).
- A planned step closes under its own load before the next level starts (its closing time is recorded).
- A key that changes the load cuts the step at once and the step says which share of its requests ran into
  the next load; such a step may be the best one only when its requests done before the key read the same
  verdict (``before_key``, issue 32).
- A manual change turns auto-ramp off; the ending step of a mode switch keeps its own mode and level, and the
  new mode never starts at 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from snapshot_watch import Watch

from loadgen.config import RampPlan
from loadgen.profile import Profile, parse_profile
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.engine import Engine
from loadgen.run.protocol import ChangeLevel, NextStep, SetMode
from loadgen.sim import build_config, spawn_sim_process
from loadgen.sim.handle import ProcessSimHandle
from loadgen.sim.params import StepCost
from loadgen.snapshot import StepSummary
from loadgen.types import Target

PROFILE = """
name = "steep"
description = "200 output tokens: 1.2 s at 4 streams, 6.8 s at 32 on the steep simulator"
[[bucket]]
input = 24
output = 200
[sampling]
ignore_eos = true
[slo]
e2e_p95_s = 60
"""
STEEP = StepCost(2.0, 1.0, 0.0, ((0, 2.0), (128, 4.0)), spec_draft_ms=0.5)


def profile(text: str = PROFILE) -> Profile:
    return parse_profile(text, source="<steep>")


pytestmark = pytest.mark.sim(
    "tiny-cpu",
    seed=3,
    max_num_seqs=256,
    cost=STEEP,
    kv_capacity_tokens=1 << 22,
    max_model_len=4096,
    process=True,
)


def ramp(sim: ProcessSimHandle, tmp_path: Path, levels: tuple[float, ...], step_s: float = 4.0) -> RunOutcome:
    out = tmp_path / f"run-{'-'.join(f'{v:g}' for v in levels)}.jsonl"
    config = RunConfig(
        Target(sim.url),
        profile(),
        plan=RampPlan(levels, step_s=step_s, warmup_s=1.0),
        out=str(out),
        telemetry=False,
        seed=11,
    )
    engine = Engine(config)
    engine.start()
    outcome = engine.wait(120)
    assert outcome is not None and outcome.state == "finished", outcome
    return outcome


def figures(step: StepSummary) -> dict[str, float]:
    stats = step.stats
    return {
        "out_tok_s": stats.out_tok_s or 0.0,
        "decode_p50": stats.pct("decode_tok_s").p50 or 0.0,
        "e2e_p95": stats.pct("e2e_ms").p95 or 0.0,
        "itl_p99": stats.pct("itl_ms").p99 or 0.0,
    }


def assert_same(alone: StepSummary, inside: StepSummary) -> None:
    a, b = figures(alone), figures(inside)
    assert alone.stats.ok >= 6 and inside.stats.ok >= 6, (alone.stats.ok, inside.stats.ok)
    for key in ("out_tok_s", "decode_p50", "e2e_p95"):
        assert abs(b[key] - a[key]) <= 0.10 * a[key], (key, a, b)
    # ITL p99 is the noisiest figure on a shared 2-core machine (a clean-clone run beside other load read
    # 18.6 ms alone, 42.3 inside); a leak of the next level's load multiplies it by 4–5 here.
    assert b["itl_p99"] <= 2.5 * a["itl_p99"], (a, b)


def test_a_level_inside_a_ramp_reads_as_it_does_alone(sim: ProcessSimHandle, tmp_path: Path) -> None:
    alone = ramp(sim, tmp_path, (4.0,)).steps[0]
    up = ramp(sim, tmp_path, (4.0, 32.0))
    assert [s.level for s in up.steps] == [4, 32]
    assert_same(alone, up.steps[0])
    # It closed under its own load: its last request landed before 32 streams began, and that took time.
    first, second = up.steps
    assert 0.0 < first.closing_s < 5.0 and first.carried_share == 0.0
    assert first.window_t1_ns + int(first.closing_s * 1e9) <= second.window_t0_ns
    down = ramp(sim, tmp_path, (32.0, 4.0))
    assert [s.level for s in down.steps] == [32, 4]
    assert_same(alone, down.steps[1])


def test_the_record_carries_closing_time_and_carried_share(sim: ProcessSimHandle, tmp_path: Path) -> None:
    outcome = ramp(sim, tmp_path, (4.0, 8.0), step_s=3.0)
    assert outcome.record_path is not None
    lines = [json.loads(line) for line in Path(outcome.record_path).read_text().splitlines()]
    steps = [line for line in lines if line.get("type") == "step"]
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["carried_share"] == 0.0 and s["closing_s"] > 0 for s in steps)


def run_live(
    sim: ProcessSimHandle,
    tmp_path: Path,
    plan: RampPlan | None,
    level: int = 4,
    snapshot_hz: float = 4.0,
    text: str = PROFILE,
) -> tuple[Engine, Watch]:
    config = RunConfig(
        Target(sim.url),
        profile(text),
        plan=plan,
        level=level,
        out=str(tmp_path / "live.jsonl"),
        telemetry=False,
        seed=12,
        after_plan="idle",
        snapshot_hz=snapshot_hz,
        warmup_s=0.0,
    )
    watch = Watch()
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    return engine, watch


def finish(engine: Engine) -> RunOutcome:
    engine.stop(cancel=True)
    outcome = engine.wait(30)
    assert outcome is not None
    return outcome


def test_a_key_cuts_the_step_at_once_and_says_what_it_carried(sim: ProcessSimHandle, tmp_path: Path) -> None:
    engine, watch = run_live(sim, tmp_path, RampPlan((4.0, 8.0), step_s=60.0, warmup_s=0.5))
    try:
        snap = watch.until(lambda s: s.phase == "measure" and s.windows["step"].ok >= 4, 30)
        assert snap.auto_ramp
        engine.set_level(16)
        snap = watch.until(lambda s: s.level == 16 and s.phase == "measure", 30)
        # The operator took the wheel: auto-ramp is off and said so, and it never moves the level again.
        assert not snap.auto_ramp
        assert any("auto-ramp off" in text for _, text in snap.notices)
        snap = watch.until(lambda s: len(s.steps) >= 1, 30)
        cut = snap.steps[0]
        assert cut.level == 4 and cut.ended_by == "level" and 0.0 < cut.carried_share <= 1.0
        # Read again on its requests done before the key (issue 32): clean, so eligible, only if that reading
        # keeps the verdict (e2e p95 of 60 s: it does); the best then, unless its intervals leave it undecided
        assert cut.before_key["carried"] and cut.before_key["agrees"] is True and cut.clean
        assert snap.best_step == (0 if cut.verdict.three_valued == "met" else None)
        assert snap.step_index == 1  # the header's step is the one the record will number 1
    finally:
        outcome = finish(engine)
    assert all(s.level in (4, 16) for s in outcome.steps)


def test_next_at_the_plans_end_says_so_and_does_nothing(sim: ProcessSimHandle, tmp_path: Path) -> None:
    engine, watch = run_live(sim, tmp_path, RampPlan((4.0,), step_s=60.0, warmup_s=0.5))
    try:
        watch.until(lambda s: s.phase == "measure", 30)
        engine.send(NextStep())
        snap = watch.until(lambda s: any("no next step" in text for _, text in s.notices), 10)
        assert snap.level == 4 and snap.state == "running" and snap.phase == "measure"
    finally:
        finish(engine)


def test_a_finished_plan_in_the_console_waits_and_a_key_starts_a_step(
    sim: ProcessSimHandle, tmp_path: Path
) -> None:
    engine, watch = run_live(sim, tmp_path, RampPlan((4.0,), step_s=2.5, warmup_s=0.5))
    try:
        snap = watch.until(lambda s: s.state == "finished" and s.phase == "idle", 60)
        assert len(snap.steps) == 1 and snap.level == 0
        engine.send(ChangeLevel(+1))
        snap = watch.until(lambda s: s.state == "running" and s.phase == "measure", 30)
        assert snap.level == 1 and snap.step_index == 1
    finally:
        outcome = finish(engine)
    assert [s.level for s in outcome.steps][:1] == [4]


def test_a_mode_switch_keeps_the_ending_step_and_starts_sanely(sim: ProcessSimHandle, tmp_path: Path) -> None:
    engine, watch = run_live(sim, tmp_path, None, level=4)
    try:
        watch.until(lambda s: s.phase == "measure" and s.windows["step"].ok >= 4, 30)
        engine.send(SetMode("open"))
        snap = watch.until(lambda s: s.mode == "open" and s.phase == "measure", 30)
        assert snap.rate_rps is not None and snap.rate_rps > 0.5  # what 4 streams achieved, about 3 req/s
        assert snap.level == 0  # no cap was set, so none is imposed
        # The open step must have measured something before it is cut: a key within a second makes no step.
        watch.until(lambda s: len(s.steps) >= 1 and s.windows["step"].ok >= 2 and s.step_elapsed_s > 1.5, 30)
        engine.send(SetMode("closed"))
        snap = watch.until(lambda s: s.mode == "closed" and s.phase in ("measure", "settling"), 30)
        assert snap.level >= 1
        snap = watch.until(lambda s: len(s.steps) >= 2, 60)
    finally:
        outcome = finish(engine)
    first, second = outcome.steps[:2]
    assert (first.mode, first.level, first.rate_rps) == ("closed", 4, None)
    assert second.mode == "open" and second.rate_rps is not None and second.rate_rps > 0.5


TOO_LONG = """
name = "too-long"
description = "every request asks more context than the 1,024-token simulator serves"
[[bucket]]
input = 900
output = 400
"""


def test_the_latest_error_of_each_kind_is_kept_whole_and_scrubbed(tmp_path: Path) -> None:
    handle = spawn_sim_process(build_config("tiny-cpu", seed=4, max_model_len=1024, kv_capacity_tokens=4096))
    try:
        out = tmp_path / "errors.jsonl"
        config = RunConfig(
            Target(handle.url),
            parse_profile(TOO_LONG, source="<too-long>"),
            plan=RampPlan((2.0,), step_s=1.5, warmup_s=0.0),
            out=str(out),
            telemetry=False,
        )
        watch = Watch()
        engine = Engine(config, on_snapshot=watch)
        engine.start()
        outcome = engine.wait(60)
    finally:
        handle.stop()
    assert outcome is not None and outcome.steps
    snap = watch.until(lambda s: bool(s.latest_errors), 5)
    text = snap.latest_errors["http_status"]
    assert "maximum context length is 1024 tokens" in text and len(text) > 120, text  # not cut at 40 cells
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    (step,) = [line for line in lines if line.get("type") == "step"]
    assert step["errors"]["http_status"] > 0
    assert "maximum context length is 1024 tokens" in step["latest_errors"]["http_status"]


def test_a_closing_step_shows_its_own_figures_and_number(sim: ProcessSimHandle, tmp_path: Path) -> None:
    # A step holds until its streams' last requests land: 0 to ~1.2 s at level 4, where in a request the
    # window ends moving with the machine's load; 4 s steps count requests before the window ends (the step
    # has figures to keep). At 20 snapshots a second several show a closing, ``seen`` looks at each of them
    # however late this thread is scheduled, and three steps give three closings to look at. Output lengths
    # spread out: the streams run out of step, so some request of the step is still in flight when its
    # window ends (streams in step may all finish right at it: a closing held exactly as needed lasts 0 s).
    spread = PROFILE.replace("output = 200", "output = { min = 100, max = 300 }")
    levels = (4, 8, 12)
    plan = RampPlan(tuple(float(v) for v in levels), step_s=4.0, warmup_s=0.5)
    engine, watch = run_live(sim, tmp_path, plan, snapshot_hz=20.0, text=spread)
    try:
        # "this step" keeps the holding step's figures while its last requests land (it read empty before)
        snap = watch.seen(lambda s: s.phase == "closing" and s.windows["step"].ok > 0, 30, "a closing step")
        # the step that holds is still the header's step: its own number and level, not the next one's
        assert snap.step_index < len(levels) and snap.level == levels[snap.step_index], snap
    finally:
        finish(engine)


def test_reset_prefix_cache_before_each_step_is_recorded_per_step(tmp_path: Path) -> None:
    handle = spawn_sim_process(build_config("tiny-cpu", seed=6))
    try:
        out = tmp_path / "reset.jsonl"
        config = RunConfig(
            Target(handle.url),
            profile(),
            plan=RampPlan((2.0, 2.0), step_s=1.5, warmup_s=0.2),
            out=str(out),
            telemetry=False,
            reset_prefix_cache="step",
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(60)
        info = handle.info()
    finally:
        handle.stop()
    assert outcome is not None and outcome.state == "finished"
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["reset_prefix_cache"] == "step"
    steps = [line for line in lines if line.get("type") == "step"]
    assert [s["cache"] for s in steps] == ["reset", "reset"]
    assert all("/reset_prefix_cache" in s["cache_how"] and "200" in s["cache_how"] for s in steps)
    assert info["prefix_cache_resets"] == 2

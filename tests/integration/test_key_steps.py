"""A step started from the keyboard is measured like a planned one (issue 19, defect 1): it warms up for
the run's one warm-up setting (resolved from the flags and the profile as the CLI does) and then reads what
the same level reads inside the plan, against the simulator in its own process."""

from __future__ import annotations

from pathlib import Path

import pytest
from snapshot_watch import Watch

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.record import read_record, step_from_line
from loadgen.run.engine import Engine
from loadgen.sim.handle import ProcessSimHandle
from loadgen.sim.params import StepCost
from loadgen.snapshot import StepSummary

# 2 ms + 1 ms per running sequence a decode step, 50 ms to prefill a 128-token prompt: TTFT is the
# server's (tens of ms), not the noise of a shared machine, and a burst of 8 prompts at once reads slower.
STEEP = StepCost(2.0, 1.0, 0.0, ((0, 2.0), (128, 50.0), (1024, 400.0)), spec_draft_ms=0.5)
PROFILE = """
name = "keys"
[[bucket]]
input = 128
output = { min = 24, max = 72 }
[sampling]
ignore_eos = true
[ramp]
levels = [8]
step_seconds = 5
warmup_seconds = 1.5
"""


pytestmark = pytest.mark.sim(
    "tiny-cpu", seed=5, max_num_seqs=64, cost=STEEP, kv_capacity_tokens=1 << 20, process=True
)  # the conftest's module-scoped simulator


def test_a_key_driven_step_warms_up_and_reads_as_the_planned_step(
    sim: ProcessSimHandle, tmp_path: Path
) -> None:
    profile = tmp_path / "keys.toml"
    profile.write_text(PROFILE)
    out = tmp_path / "keys.jsonl"
    argv = ["run", sim.url, "--profile", str(profile), "--out", str(out), "--no-metrics", "--seed", "3"]
    config = build_config(build_parser().parse_args(argv), sim.url)  # no --warmup: the profile's 1.5 s
    assert config.after_plan == "idle"  # the console's run: a finished plan waits for a key
    watch = Watch()
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    try:
        watch.until(lambda s: s.state == "finished" and s.phase == "idle" and len(s.steps) == 1, 60, "plan")
        engine.set_level(8)  # what `l 8` sends
        snap = watch.until(lambda s: s.state == "running" and s.level == 8, 20, "the key's step")
        assert snap.warming_up, "a key-driven step goes straight to measuring"
        # As long as the planned step measured (its step_seconds less its warm-up), then a stop that lets
        # the requests it sent finish in it.
        watch.until(lambda s: s.phase == "measure" and s.step_elapsed_s >= 5.0, 30, "the key's window")
        engine.stop(cancel=False)
        outcome = engine.wait(60)
    finally:
        engine.stop()
        engine.wait(30)
    assert outcome is not None
    steps = [step_from_line(line) for line in read_record(str(out)).steps]
    planned, keyed = steps[0], steps[1]
    assert (planned.ended_by, keyed.ended_by) == ("plan", "stop")
    assert planned.warmup_s == pytest.approx(1.5, abs=0.05)
    assert keyed.warmup_s == pytest.approx(1.5, abs=0.05)  # the configured warm-up, not 0
    assert_reads_alike(planned, keyed)


def assert_reads_alike(planned: StepSummary, keyed: StepSummary) -> None:
    assert planned.stats.ok >= 20 and keyed.stats.ok >= 20, (planned.stats.ok, keyed.stats.ok)
    for name, a, b in (
        ("out tok/s", planned.stats.out_tok_s, keyed.stats.out_tok_s),
        ("TTFT p50", planned.stats.pct("ttft_ms").p50, keyed.stats.pct("ttft_ms").p50),
    ):
        assert a is not None and b is not None and abs(b - a) <= 0.10 * a, (name, a, b)

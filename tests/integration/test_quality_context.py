"""Probe prompts that cannot fit the server's context are refused before the run, like other prompts (issue 34,
bad input): one line naming the probe's size and the server's max_model_len, no request sent, no step."""

from __future__ import annotations

from pathlib import Path

from loadgen.config import RampPlan
from loadgen.profile import Quality, parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.types import Target
from loadgen.workload.probes import probe_overflow
from loadgen.workload.sizing import PromptSizer

PROFILE = """
name = "quality-context"
[[bucket]]
input = 16
output = 8
[sampling]
ignore_eos = true
[quality]
share = 0.5
probes = 2
max_tokens = {max_tokens}
"""


def test_the_probe_set_against_a_context() -> None:
    sizer = PromptSizer.estimate("chat")
    quality = Quality(probes=8, max_tokens=32)
    assert probe_overflow(quality, sizer, 4096) is None
    said = probe_overflow(quality, sizer, 40)
    assert said is not None and "max_model_len 40" in said and "max_tokens 32" in said
    # verifiable tasks answer at more length: a context the plain probes fit may not fit them
    tasks = Quality(probes=8, max_tokens=8, tasks=True)
    assert probe_overflow(Quality(probes=8, max_tokens=8), sizer, 64) is None
    said = probe_overflow(tasks, sizer, 64)
    assert said is not None and "--quality-tasks" in said


def run(tmp_path: Path, max_tokens: int) -> tuple[object, Path]:
    handle = run_sim_in_thread(build_config("tiny-cpu", seed=3, speed=4.0, max_model_len=48))
    try:
        out = tmp_path / "run.jsonl"
        config = RunConfig(
            target=Target(url=handle.url),
            profile=parse_profile(PROFILE.format(max_tokens=max_tokens), source="<quality-context>"),
            plan=RampPlan((1,), step_s=1.0, warmup_s=0.2),
            out=str(out),
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(60)
    finally:
        handle.stop()
    return outcome, out


def test_probes_too_long_for_the_server_are_refused_before_the_run(tmp_path: Path) -> None:
    outcome, out = run(tmp_path, max_tokens=64)
    assert outcome is not None and getattr(outcome, "state", "") == "failed"
    message = getattr(outcome, "message", "")
    assert "--quality" in message and "max_model_len 48" in message and "\n" not in message
    assert not getattr(outcome, "steps", ())
    assert not out.exists() or '"type": "step"' not in out.read_text()
    # the same run whose probes fit starts and measures its step
    outcome, out = run(tmp_path, max_tokens=8)
    assert (
        outcome is not None and getattr(outcome, "state", "") == "finished" and getattr(outcome, "steps", ())
    )

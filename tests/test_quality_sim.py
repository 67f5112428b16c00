"""Answers still right under load, end to end: a ramp with answer probes against the simulator whose answers
change above N open generations reads agreement 1.00 at the levels up to N and the change above them, in the
record's step lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadgen.config import RampPlan
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.types import Target

PROFILE = """
name = "quality"
[[bucket]]
input = 64
output = 16
[sampling]
ignore_eos = true
[quality]
share = {share}
probes = 2
max_tokens = 12
"""


def ramp(tmp_path: Path, levels: tuple[int, ...], share: float, **sim: Any) -> list[dict[str, Any]]:
    handle = run_sim_in_thread(build_config("tiny-cpu", seed=3, speed=4.0, **sim))
    try:
        out = tmp_path / "run.jsonl"
        config = RunConfig(
            target=Target(url=handle.url),
            profile=parse_profile(PROFILE.format(share=share), source="<quality>"),
            plan=RampPlan(levels, step_s=1.5, warmup_s=0.3),
            out=str(out),
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(60)
        assert outcome is not None and outcome.state == "finished", outcome
    finally:
        handle.stop()
    return read_record(out).steps


def test_agreement_holds_up_to_the_change_and_reads_it_above(tmp_path: Path) -> None:
    steps = ramp(tmp_path, (1, 2, 6), share=0.25, answer_change_above=2)
    q = [s["quality"] for s in steps]
    assert all(x["n"] >= 3 and x["errors"] == 0 for x in q), q
    assert "reference" in q[0] and sorted(q[0]["reference"]) == ["0", "1"]  # level 1 set the reference
    assert [x["agree"] for x in q[:2]] == [1.0, 1.0], q
    assert q[2]["agree"] < 0.5 and q[2]["agree_hi"] < 1.0, q[2]  # 6 streams > 2: the answers changed
    assert q[0]["prefix_chars_p50"] > 0 and q[2]["prefix_chars_p50"] < q[0]["prefix_chars_p50"]

"""--precision PCT (issue 31): a planned step's window ends as soon as out tok/s and every figure the SLO
judges have a trusted 95 % interval within PCT % of their value (``ended_by: "precision"``), or at its
length at the latest; the record keeps why it ended and the intervals it ended on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.config import SLO, RampPlan
from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import SimHandle
from loadgen.types import Target

PROFILE = 'name = "precise"\n[[bucket]]\ninput = 32\noutput = 24\n[sampling]\nignore_eos = true\n'

pytestmark = [
    pytest.mark.timeout(120),
    # latencies that vary per request (lognormal) and not with the load: intervals that narrow with time
    pytest.mark.sim(
        "fast", seed=3, fixed_ttft_ms=40.0, fixed_ttft_sigma=0.3, fixed_tpot_ms=10.0, fixed_tpot_sigma=0.2
    ),
]


def run(sim: SimHandle, out: Path, plan: RampPlan, slo: SLO | None = None) -> list[dict[str, object]]:
    config = RunConfig(
        Target(sim.url),
        parse_profile(PROFILE, source="<precise>"),
        plan=plan,
        out=str(out),
        telemetry=False,
        seed=4,
        slo=slo,
    )
    engine = Engine(config)
    engine.start()
    outcome = engine.wait(90)
    if outcome is None:
        engine.stop()
        engine.wait(30)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    return [line for line in lines if line.get("type") == "step"]


def test_a_step_ends_once_its_figures_are_precise(sim: SimHandle, tmp_path: Path) -> None:
    """30-s steps at --precision 10 (the SLO judging decode p50): each ends within seconds, by precision,
    with out tok/s and decode p50 trusted and within ±10 %."""
    plan = RampPlan((8, 8), step_s=30.0, warmup_s=1.0, precision_pct=10.0)
    steps = run(sim, tmp_path / "run.jsonl", plan, SLO(decode_p50_tok_s=10.0))
    assert [s["ended_by"] for s in steps] == ["precision", "precision"]
    for step in steps:
        assert isinstance(step["window_s"], float) and step["window_s"] < 15.0
        margins = step["margins"]
        assert isinstance(margins, dict)
        for name in ("out_tok_s", "decode_p50_tok_s"):
            figure = margins[name]
            assert figure["trusted"] and (figure["hi"] - figure["lo"]) / 2 <= 0.10 * figure["value"], name


def test_without_precision_the_step_runs_its_length(sim: SimHandle, tmp_path: Path) -> None:
    steps = run(sim, tmp_path / "run.jsonl", RampPlan((8,), step_s=5.0, warmup_s=1.0))
    assert [s["ended_by"] for s in steps] == ["plan"]
    assert isinstance(steps[0]["window_s"], float) and steps[0]["window_s"] >= 3.9

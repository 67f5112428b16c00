"""The live margin (issue 31): while a step measures, the snapshot carries the margins of error of out tok/s
and of each figure the SLO judges so far (``Snapshot.live_margins``, read once a second) and, under
``--precision``, the target and about how long until it is reached; the console's step window line says it
('decode p50 68 tok/s ±4 % · out ±2 % · ±10 % in ≈3 s'). Against the simulator with lognormal latencies."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.config import SLO, RampPlan
from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import SimHandle
from loadgen.snapshot import Snapshot
from loadgen.types import Target
from tui.margins import live_text

PROFILE = 'name = "precise"\n[[bucket]]\ninput = 32\noutput = 24\n[sampling]\nignore_eos = true\n'

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.sim(
        "fast", seed=3, fixed_ttft_ms=40.0, fixed_ttft_sigma=0.3, fixed_tpot_ms=10.0, fixed_tpot_sigma=0.2
    ),
]


def snapshots_of(sim: SimHandle, out: Path, plan: RampPlan) -> list[Snapshot]:
    seen: list[Snapshot] = []
    config = RunConfig(
        Target(sim.url),
        parse_profile(PROFILE, source="<precise>"),
        plan=plan,
        out=str(out),
        telemetry=False,
        seed=4,
        slo=SLO(decode_p50_tok_s=10.0),
    )
    engine = Engine(config, on_snapshot=seen.append)
    engine.start()
    if engine.wait(90) is None:
        engine.stop()
        engine.wait(30)
    return seen


def test_a_measuring_step_shows_its_margins_and_the_time_to_its_precision(
    sim: SimHandle, tmp_path: Path
) -> None:
    plan = RampPlan((8,), step_s=30.0, warmup_s=1.0, precision_pct=10.0)
    seen = snapshots_of(sim, tmp_path / "run.jsonl", plan)
    measuring = [s for s in seen if s.live_margins]
    assert measuring, "no snapshot carried the measuring step's margins"
    assert all(
        s.phase == "measure" and s.precision is not None and s.precision.pct == 10.0 for s in measuring
    )
    assert {"out_tok_s", "decode_p50_tok_s"} <= set(measuring[-1].live_margins)
    for s in measuring:  # the first readings may come before an interval can be formed (one batch)
        for iv in s.live_margins.values():
            assert iv.lo is None or iv.hi is None or iv.lo <= iv.value <= iv.hi
    last = measuring[-1].live_margins["decode_p50_tok_s"]
    assert last.lo is not None and last.hi is not None and last.hi - last.lo > 0
    # the estimate exists once there are intervals, and the step ended by precision once it read 0
    estimates = [
        s.precision.eta_s for s in measuring if s.precision is not None and s.precision.eta_s is not None
    ]
    assert estimates, "no estimate of the time left to the target"
    text = live_text(measuring[-1])
    assert text.startswith("decode p50 ") and " tok/s ±" in text and "out ±" in text
    assert "±10 % in ≈" in text or "±10 % reached" in text
    after = seen[-1]
    assert after.steps and after.steps[-1].ended_by == "precision" and not after.live_margins


def test_without_precision_the_margins_show_and_no_target(sim: SimHandle, tmp_path: Path) -> None:
    seen = snapshots_of(sim, tmp_path / "run.jsonl", RampPlan((8,), step_s=4.0, warmup_s=1.0))
    measuring = [s for s in seen if s.live_margins]
    assert measuring and all(s.precision is None for s in measuring)
    assert "±" in live_text(measuring[-1]) and " in ≈" not in live_text(measuring[-1])

"""The step table's verdict line never claims "no step met the SLO" when one did but was not clean."""

from __future__ import annotations

from dataclasses import replace

from test_record import make_step

from loadgen.config import SLO
from loadgen.report import format_step_table
from loadgen.slo import best_step


def test_a_met_step_stopped_part_way_is_named_not_hidden() -> None:
    slo = SLO(ttft_p95_ms=1000.0)
    step, _ = make_step(0, 4, 100.0, slo)
    stopped = replace(step, ended_by="stop")
    assert stopped.verdict.met and best_step([stopped]) is None
    text = format_step_table([stopped], None)
    assert "none among clean steps (step 1 met it, but was cut by a key or stopped part-way" in text
    cut = replace(step, ended_by="level", carried_share=0.3)
    assert "step 1 met it" in format_step_table([cut], best_step([cut]))


def test_no_step_met_says_so() -> None:
    slo = SLO(ttft_p95_ms=10.0)
    step, _ = make_step(0, 4, 100.0, slo)
    assert step.verdict.met is False
    assert "none (no step met the SLO)" in format_step_table([step], None)

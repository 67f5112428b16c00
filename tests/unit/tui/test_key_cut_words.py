"""A step a key cut says whether it may be the best (issue 32): the console's step details and the text
report's verdict lines, for a cut whose requests done before the key read the same verdict and for one that
does not (``before_key``: loadgen.run.censor)."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console
from tui_fakes import judged_steps

from loadgen.config import SLO
from loadgen.report.text import verdict_lines
from loadgen.slo import best_step
from tui.step_report import step_report
from tui.steps import starred


def text(renderable: object) -> str:
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return " ".join(console.export_text().split())


def test_a_cut_that_keeps_its_verdict_may_be_the_best_and_says_so() -> None:
    steps = list(judged_steps())
    at = best_step(steps)  # the fakes' best: met the SLO, the highest out tok/s among those that did
    assert at is not None and steps[at].verdict.met
    reading = {"ok": 120, "carried": 16, "slo_met": True, "agrees": True}
    kept = replace(steps[at], ended_by="level", carried_share=0.12, before_key=reading)
    lost = replace(kept, before_key={**reading, "slo_met": False, "agrees": False})
    for cut, best, words in (
        (kept, at, "the same verdict: it may be the best step"),
        (lost, None, "another verdict (or none): never a best step"),
    ):
        run = [*steps[:at], cut, *steps[at + 1 :]]
        chosen = best_step(run)
        assert (chosen == at) is (best == at) and (starred(run, chosen) == at) is (best == at), chosen
        lines = verdict_lines(run, chosen)
        assert any(f"cut by a key: step {at + 1} (12%)" in line and words in line for line in lines), lines
        shown = text(step_report(cut, SLO(), {}, best=best == at))
        detail = "it may be the best step" if best == at else "never a best step"
        assert "cut: 12% of its counted requests were carried into the next load (a manual change); " in shown
        assert detail in shown.split("cut: 12%")[1][:200]

"""The steps table's TTFAT p95 column: there when a step's requests reasoned (TTFAT then differs from TTFT),
left out otherwise (it would repeat TTFT), and the first optional column to give way on a narrow panel."""

from __future__ import annotations

from dataclasses import replace

from tui_fakes import STEPS

from loadgen.format import fmt_ms
from loadgen.snapshot import SLO, HistogramView, Percentiles, StepSummary
from tui.step_report import slo_clauses
from tui.steps import TTFAT, fitting_columns


def reasoning(step: StepSummary, ttfat_p95: float) -> StepSummary:
    view = HistogramView("ttfat_ms", "ms", Percentiles(count=10, p50=ttfat_p95 / 2, p95=ttfat_p95))
    stats = replace(step.stats, hist={**step.stats.hist, "ttfat_ms": view}, reasoned=10, reasoning_tokens=900)
    return replace(step, stats=stats)


def test_ttfat_column_only_for_reasoning_steps() -> None:
    plain = [c.header for c in fitting_columns(STEPS, None)]
    assert TTFAT not in plain
    steps = tuple(reasoning(s, 1234.0) for s in STEPS)
    columns = fitting_columns(steps, None)
    ttfat = next(c for c in columns if c.header == TTFAT)
    assert ttfat.cell(steps[0]) == fmt_ms(1234.0) and ttfat.cell(steps[0]) != fmt_ms(
        steps[0].stats.pct("ttft_ms").p95
    )
    assert [c.header for c in columns].index(TTFAT) == [c.header for c in columns].index("TTFT p95") + 1


def test_ttfat_column_gives_way_first() -> None:
    steps = tuple(reasoning(s, 1234.0) for s in STEPS)
    wide = fitting_columns(steps, None)
    width = sum(max(len(c.header), *(len(c.cell(s)) for s in steps)) for c in wide) + 2 * (len(wide) - 1)
    narrower = [c.header for c in fitting_columns(steps, width - 1)]
    assert TTFAT not in narrower and "TTFT p95" in narrower


def test_the_step_report_lists_the_ttfat_clause() -> None:
    step = reasoning(STEPS[0], 1234.0)
    clauses = slo_clauses(SLO(ttft_p95_ms=500.0, ttfat_p95_ms=1000.0), step)
    ttfat = next(c for c in clauses if c.name == "TTFAT p95")
    assert ttfat.value == fmt_ms(1234.0) and fmt_ms(1000.0) in ttfat.limit

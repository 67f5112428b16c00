"""The headless step table and the text report say an undecided step (issue 31): its SLO cell is '?', not
'✓', a line names the clause whose interval straddles its limit with about how much longer would decide it,
and an undecided step is never the best ('none (step 2 undecided ...)')."""

from __future__ import annotations

import dataclasses

from analysis_fakes import summary_of

from loadgen import measures
from loadgen.config import SLO
from loadgen.metrics.slices import figure_name, judge
from loadgen.report import format_step_table
from loadgen.slo import best_step
from loadgen.snapshot import HistogramView, Percentiles, SLOVerdict, StepSummary, WindowStats
from loadgen.stats import Interval

P95 = figure_name(measures.TTFT_MS, "p95")
SLO_500 = SLO(ttft_p95_ms=500.0)


def judged(index: int, p95: float, share: float) -> StepSummary:
    """A step with TTFT p95 ``p95`` ±``share``, judged against 500 ms by the product's own ``judge``."""
    view = HistogramView(measures.TTFT_MS, "ms", Percentiles(count=400, p50=p95 / 2, p95=p95))
    stats = WindowStats("step", 10.0, ok=400, out_tok_s=1000.0, hist={measures.TTFT_MS: view})
    margins = {P95: Interval(p95, p95 * (1 - share), p95 * (1 + share), 16, 400, 15.0, True)}
    verdict = judge(SLO_500, SLOVerdict(p95 <= 500.0), margins, 10.0)
    return summary_of(stats, verdict, index=index, margins=margins)


def test_an_undecided_step_reads_undecided_with_its_clause_and_is_never_best() -> None:
    met, undecided = judged(0, 300.0, 0.05), judged(1, 480.0, 0.10)
    steps = [met, undecided]
    assert undecided.verdict.three_valued == "undecided" and undecided.verdict.met is True
    table = format_step_table(steps, best_step(steps))
    rows = {line.split()[0].rstrip("*"): line for line in table.splitlines() if line[:1].isdigit()}
    assert rows["1"].rstrip().endswith("✓") and rows["2"].rstrip().endswith("?"), table
    assert "  step 2 ? undecided: TTFT p95 480 (432-528) ms vs 500 ms, ≈" in table, table
    alone = format_step_table([dataclasses.replace(undecided, index=0)], None)
    assert (
        "best under SLO: none (step 1 undecided: its interval cannot tell a limit met from missed)" in alone
    ), alone

"""The SLO's TTFTC clauses (``ttftc_p50_ms``, ``ttftc_p95_ms``): judged over the requests that called a tool,
missed with their figure, met within it, and n/a (neither met nor missed, listed in ``not_judged``) in a step
where no request called one; through goodput, the margin, the best step, the step line and back, the CSV
column, the text report's verdict lines, the console's step report and a profile's ``[slo]``."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_fakes import plain_reply, stats_of, summary_of, tool_call
from rich.console import Console

from loadgen.analysis.steprows import STEP_COLUMNS, StepInput
from loadgen.config import SLO
from loadgen.profile import parse_profile
from loadgen.record import RecordWriter, read_record, step_from_line
from loadgen.report.text import verdict_lines
from loadgen.slo import best_step, eligible, evaluate, margin
from loadgen.snapshot import SLOVerdict
from tui.step_report import PLAIN, slo_clauses, verdict_block

pytestmark = pytest.mark.unit


def test_ttftc_is_judged_over_the_calls_missed_with_its_figure_and_met_within_it() -> None:
    stats, _ = stats_of([tool_call(i) for i in range(20)] + [plain_reply(i) for i in range(20)])
    tight = SLO(ttftc_p95_ms=90.0)
    verdict = evaluate(tight, stats)
    assert verdict.met is False and not verdict.not_judged
    assert verdict.failures == ("TTFTC p95 98 ms > 90 ms",)
    assert stats.pct("ttftc_ms").p95 == pytest.approx(98, rel=2e-3)  # the calls' own, not TTFT's ~50 ms
    assert evaluate(SLO(ttftc_p50_ms=85.0), stats).failures[0].startswith("TTFTC p50 8")
    loose = SLO(ttftc_p50_ms=100.0, ttftc_p95_ms=100.0)
    assert evaluate(loose, stats) == SLOVerdict(met=True)
    assert margin(tight, stats) == pytest.approx((90 - stats.pct("ttftc_ms").p95) / 90)  # type: ignore[operator]
    # goodput: the 9 calls past 90 ms (91..99) are not good; the replies without a call are not held to it
    judged, _ = stats_of([tool_call(i) for i in range(20)] + [plain_reply(i) for i in range(20)], tight)
    assert judged.goodput_req_s == pytest.approx(31 / 10.0)


def test_a_step_without_a_tool_call_is_not_judged_on_ttftc() -> None:
    stats, _ = stats_of([plain_reply(i) for i in range(20)])
    line = "TTFTC p95 n/a (no tool call in the step; limit 500 ms)"
    # with another clause: that one decides, the TTFTC clause is listed apart, not as a failure
    both = SLO(ttft_p95_ms=1000.0, ttftc_p95_ms=500.0)
    verdict = evaluate(both, stats)
    assert verdict == SLOVerdict(met=True, failures=(), not_judged=(line,))
    assert margin(both, stats) == pytest.approx(margin(SLO(ttft_p95_ms=1000.0), stats))
    assert evaluate(SLO(ttft_p95_ms=10.0, ttftc_p95_ms=500.0), stats).met is False
    # alone: nothing judged, no verdict, and the step cannot be the best (nor pass as "no SLO")
    alone = SLO(ttftc_p95_ms=500.0)
    verdict = evaluate(alone, stats)
    assert verdict == SLOVerdict(met=None, failures=(), not_judged=(line,))
    assert margin(alone, stats) is None
    step = summary_of(stats, verdict)
    assert not eligible(step) and best_step([step]) is None
    lines = verdict_lines([step], None)
    assert lines[0] == "best under SLO: none (no step met the SLO)" and f"  step 1 – {line}" in lines


def test_the_step_line_csv_and_step_report_carry_the_not_judged_clause(tmp_path: Path) -> None:
    stats, hists = stats_of([plain_reply(i) for i in range(20)])
    slo = SLO(ttft_p95_ms=1000.0, ttftc_p95_ms=500.0)
    step = summary_of(stats, evaluate(slo, stats))
    path = tmp_path / "run.jsonl"
    with RecordWriter(path) as writer:
        writer.write_header({"model": "m"})
        line = writer.write_step(step, hists)
        judged = writer.write_step(summary_of(stats, evaluate(SLO(ttft_p95_ms=1000.0), stats), 1), hists)
    assert line["slo_met"] is True and line["slo_failures"] == []
    assert line["slo_not_judged"] == ["TTFTC p95 n/a (no tool call in the step; limit 500 ms)"]
    assert "slo_not_judged" not in judged  # written only when a clause was n/a: older lines unchanged
    back = step_from_line(read_record(path).steps[0])
    assert back.verdict == step.verdict
    column = next(c for c in STEP_COLUMNS if c.name == "slo_not_judged")
    assert column.value(StepInput(back, line, None, False, "")) == line["slo_not_judged"][0]
    clauses = slo_clauses(slo, back)
    assert [(c.name, c.value) for c in clauses][1] == ("TTFTC p95", "n/a")
    console = Console(width=100, record=True, color_system=None)
    console.print(verdict_block(slo, back, PLAIN))
    shown = console.export_text()
    rows = {row.split("≤")[0].strip(): row.split() for row in shown.splitlines() if "≤" in row}
    assert shown.startswith("SLO  met") and rows["TTFT p95"][-1] == "✓"
    assert rows["TTFTC p95"][-2:] == ["n/a", "–"]  # neither met nor missed
    assert "  TTFTC p95 n/a (no tool call in the step; limit 500 ms)" in shown.splitlines()


def test_a_profile_slo_takes_the_ttftc_clauses() -> None:
    profile = parse_profile(
        "[[bucket]]\ninput = 8\noutput = 8\n[slo]\nttftc_p50_ms = 200\nttftc_p95_ms = 500\n"
    )
    assert (profile.slo.ttftc_p50_ms, profile.slo.ttftc_p95_ms) == (200.0, 500.0)

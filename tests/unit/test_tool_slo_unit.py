"""The SLO's TTFTC clauses (``ttftc_p50_ms``, ``ttftc_p95_ms``): judged over the requests that called a tool,
missed with their figure, met within it, and n/a (neither met nor missed, listed in ``not_judged``) in a step
where no request called one; through goodput, the margin, the best step, the step line and back, the CSV
column, the text report's verdict lines, the console's step report and a profile's ``[slo]``."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from loadgen.analysis.steprows import STEP_COLUMNS, StepInput
from loadgen.config import SLO
from loadgen.metrics import Accumulator, Recorder
from loadgen.profile import parse_profile
from loadgen.record import RecordWriter, read_record, step_from_line
from loadgen.report.text import verdict_lines
from loadgen.slo import best_step, eligible, evaluate, margin
from loadgen.snapshot import SLOVerdict, StepSummary, WindowStats
from loadgen.types import Outcome, RequestResult
from tui.step_report import PLAIN, slo_clauses, verdict_block

pytestmark = pytest.mark.unit

MS = 1_000_000
S = 1_000_000_000


def called(i: int) -> RequestResult:
    """A reply that is one call, its opening delta (the name) at 80 + i ms: TTFTC 80..99 ms over 20."""
    t0 = i * 10 * MS
    head = t0 + (80 + i) * MS
    chunks = (head, *(head + (k + 1) * 10 * MS for k in range(5)))
    return RequestResult(
        outcome=Outcome.OK, intended_ns=t0, sent_ns=t0, end_ns=chunks[-1] + MS, first_token_ns=head,
        last_token_ns=chunks[-1], chunk_times_ns=chunks, chunk_tokens=(0, *(1,) * 5), output_tokens=5,
        tokens_exact=True, first_answer_ns=head, first_tool_ns=head, tool_chunks=6, tool_tokens=5,
        first_tool_args_ns=chunks[1], last_tool_args_ns=chunks[-1],
    )  # fmt: skip


def plain(i: int) -> RequestResult:
    t0 = i * 10 * MS
    chunks = tuple(t0 + (50 + k * 10) * MS for k in range(5))
    return RequestResult(
        outcome=Outcome.OK, intended_ns=t0, sent_ns=t0, end_ns=chunks[-1], first_token_ns=chunks[0],
        last_token_ns=chunks[-1], chunk_times_ns=chunks, output_tokens=5, tokens_exact=True,
        first_answer_ns=chunks[0],
    )  # fmt: skip


def stats_of(items: list[RequestResult], slo: SLO | None = None) -> tuple[WindowStats, dict[str, str]]:
    rec, acc = Recorder(slo=slo), Accumulator()
    for r in items:
        rec.record(r)
    acc.add(rec.take(0, 10 * S, live_tokens=sum(r.output_tokens for r in items)))
    return acc.stats("step", 10.0), acc.encoded()


def step_of(stats: WindowStats, verdict: SLOVerdict, index: int = 0) -> StepSummary:
    return StepSummary(
        index=index, mode="closed", level=4, rate_rps=None, arrival="closed", warmup_s=1.0, window_s=10.0,
        duration_s=11.0, stats=stats, verdict=verdict, client_bound=False,
    )  # fmt: skip


def test_ttftc_is_judged_over_the_calls_missed_with_its_figure_and_met_within_it() -> None:
    stats, _ = stats_of([called(i) for i in range(20)] + [plain(i) for i in range(20)])
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
    judged, _ = stats_of([called(i) for i in range(20)] + [plain(i) for i in range(20)], tight)
    assert judged.goodput_req_s == pytest.approx(31 / 10.0)


def test_a_step_without_a_tool_call_is_not_judged_on_ttftc() -> None:
    stats, _ = stats_of([plain(i) for i in range(20)])
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
    step = step_of(stats, verdict)
    assert not eligible(step) and best_step([step]) is None
    lines = verdict_lines([step], None)
    assert lines[0] == "best under SLO: none (no step met the SLO)" and f"  step 1 – {line}" in lines


def test_the_step_line_csv_and_step_report_carry_the_not_judged_clause(tmp_path: Path) -> None:
    stats, hists = stats_of([plain(i) for i in range(20)])
    slo = SLO(ttft_p95_ms=1000.0, ttftc_p95_ms=500.0)
    step = step_of(stats, evaluate(slo, stats))
    path = tmp_path / "run.jsonl"
    with RecordWriter(path) as writer:
        writer.write_header({"model": "m"})
        line = writer.write_step(step, hists)
        judged = writer.write_step(step_of(stats, evaluate(SLO(ttft_p95_ms=1000.0), stats), 1), hists)
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

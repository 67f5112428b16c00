"""Tool-call figures through the metrics pipeline: RequestResults that called a tool into the worker's
Recorder, the controller's Accumulator, the step line and back, the CSV columns, ramp compare's figures,
the text report and the console's steps table."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.analysis.figures import FIGURES
from loadgen.metrics import Accumulator, Recorder
from loadgen.record import RecordWriter, read_record, step_from_line
from loadgen.report import format_step_table
from loadgen.snapshot import SLOVerdict, StepSummary, WindowStats
from loadgen.types import Outcome, RequestResult
from tui.steps import TTFTC, fitting_columns

pytestmark = pytest.mark.unit

MS = 1_000_000
S = 1_000_000_000
ARGS = 21  # argument chunks, one token each, 10 ms apart: 20 gaps over 200 ms = 100 tok/s


def called(i: int) -> RequestResult:
    """A reply that is one call: its opening delta (the name, no token) at 80 + i ms, then its arguments."""
    t0 = i * 10 * MS
    head = t0 + (80 + i) * MS
    chunks = (head, *(head + (k + 1) * 10 * MS for k in range(ARGS)))
    return RequestResult(
        outcome=Outcome.OK, intended_ns=t0, sent_ns=t0, end_ns=chunks[-1] + MS, first_token_ns=head,
        last_token_ns=chunks[-1], chunk_times_ns=chunks, chunk_tokens=(0, *(1,) * ARGS), output_tokens=ARGS,
        tokens_exact=True, first_answer_ns=head, first_tool_ns=head, tool_chunks=ARGS + 1, tool_tokens=ARGS,
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


def stats_of(items: list[RequestResult]) -> tuple[WindowStats, dict[str, str]]:
    rec, acc = Recorder(), Accumulator()
    for r in items:
        rec.record(r)
    acc.add(rec.take(0, 10 * S, live_tokens=sum(r.output_tokens for r in items)))
    return acc.stats("step", 10.0), acc.encoded()


def step_of(stats: WindowStats) -> StepSummary:
    return StepSummary(
        index=0, mode="closed", level=4, rate_rps=None, arrival="closed", warmup_s=1.0, window_s=10.0,
        duration_s=11.0, stats=stats, verdict=SLOVerdict(met=None), client_bound=False,
    )  # fmt: skip


def test_ttftc_and_the_arguments_rate_per_step() -> None:
    stats, _ = stats_of([called(i) for i in range(20)] + [plain(i) for i in range(10)])
    assert (stats.ok, stats.tool_calls, stats.tool_tokens) == (30, 20, 20 * ARGS)
    ttftc = stats.pct("ttftc_ms")
    assert ttftc.count == 20 and ttftc.min == pytest.approx(80, rel=2e-3)
    assert ttftc.max == pytest.approx(99, rel=2e-3)
    assert stats.pct("tool_decode_tok_s").p50 == pytest.approx(100, rel=2e-3)
    # the opening delta carries no token: ITL is the arguments' 10 ms, no 0 ms sample beside it
    assert stats.pct("itl_ms").min == pytest.approx(10, rel=2e-3)


def test_step_line_round_trip_csv_and_compare(tmp_path: Path) -> None:
    stats, hists = stats_of([called(i) for i in range(20)] + [plain(i) for i in range(20)])
    path = tmp_path / "run.jsonl"
    with RecordWriter(path) as writer:
        writer.write_header({"model": "m"})
        line = writer.write_step(step_of(stats), hists)
    assert (line["tool_calls"], line["tool_tokens"]) == (20, 20 * ARGS)
    assert set(line["ttftc_ms"]) == {"p50", "p95", "p99"} and "ttftc_ms" in line["hists"]
    back = step_from_line(read_record(path).steps[0])
    assert (back.stats.tool_calls, back.stats.tool_tokens) == (20, 20 * ARGS)
    assert back.stats.pct("ttftc_ms") == stats.pct("ttftc_ms")
    assert back.stats.pct("tool_decode_tok_s") == stats.pct("tool_decode_tok_s")
    figures = {f.key: f.value(back, line, None) for f in FIGURES}
    assert figures["ttftc_p95_ms"] == stats.pct("ttftc_ms").p95 and figures["tool_call_share"] == 0.5
    assert figures["tool_decode_p50_tok_s"] == pytest.approx(100, rel=2e-3)
    none, _ = stats_of([plain(i) for i in range(5)])
    quiet = {f.key: f.value(step_of(none), {}, None) for f in FIGURES}
    assert quiet["ttftc_p95_ms"] is None and quiet["tool_call_share"] is None


def test_the_tables_show_ttftc_only_for_steps_that_called() -> None:
    stats, _ = stats_of([called(i) for i in range(20)])
    table = format_step_table([step_of(stats)], None, width=220)
    assert "TTFTC p95" in table.splitlines()[0] and "calls" in table.splitlines()[0]
    none, _ = stats_of([plain(i) for i in range(5)])
    assert "TTFTC" not in format_step_table([step_of(none)], None, width=220)
    assert TTFTC in [c.header for c in fitting_columns([step_of(stats)], None)]
    assert TTFTC not in [c.header for c in fitting_columns([step_of(none)], None)]

"""Tool-call figures through the metrics pipeline: RequestResults that called a tool into the worker's
Recorder, the controller's Accumulator, the step line and back, the CSV columns, ramp compare's figures,
the text report and the console's steps table."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_fakes import plain_reply, stats_of, summary_of, tool_call

from loadgen.analysis.figures import FIGURES
from loadgen.record import RecordWriter, read_record, step_from_line
from loadgen.report import format_step_table
from tui.steps import TTFTC, fitting_columns

pytestmark = pytest.mark.unit

ARGS = 21  # argument chunks, one token each, 10 ms apart: 20 gaps over 200 ms = 100 tok/s


def test_ttftc_and_the_arguments_rate_per_step() -> None:
    stats, _ = stats_of([tool_call(i, ARGS) for i in range(20)] + [plain_reply(i) for i in range(10)])
    assert (stats.ok, stats.tool_calls, stats.tool_tokens) == (30, 20, 20 * ARGS)
    ttftc = stats.pct("ttftc_ms")
    assert ttftc.count == 20 and ttftc.min == pytest.approx(80, rel=2e-3)
    assert ttftc.max == pytest.approx(99, rel=2e-3)
    assert stats.pct("tool_decode_tok_s").p50 == pytest.approx(100, rel=2e-3)
    # the opening delta carries no token: ITL is the arguments' 10 ms, no 0 ms sample beside it
    assert stats.pct("itl_ms").min == pytest.approx(10, rel=2e-3)


def test_step_line_round_trip_csv_and_compare(tmp_path: Path) -> None:
    stats, hists = stats_of([tool_call(i, ARGS) for i in range(20)] + [plain_reply(i) for i in range(20)])
    path = tmp_path / "run.jsonl"
    with RecordWriter(path) as writer:
        writer.write_header({"model": "m"})
        line = writer.write_step(summary_of(stats), hists)
    assert (line["tool_calls"], line["tool_tokens"]) == (20, 20 * ARGS)
    assert set(line["ttftc_ms"]) == {"p50", "p95", "p99"} and "ttftc_ms" in line["hists"]
    back = step_from_line(read_record(path).steps[0])
    assert (back.stats.tool_calls, back.stats.tool_tokens) == (20, 20 * ARGS)
    assert back.stats.pct("ttftc_ms") == stats.pct("ttftc_ms")
    assert back.stats.pct("tool_decode_tok_s") == stats.pct("tool_decode_tok_s")
    figures = {f.key: f.value(back, line, None) for f in FIGURES}
    assert figures["ttftc_p95_ms"] == stats.pct("ttftc_ms").p95 and figures["tool_call_share"] == 0.5
    assert figures["tool_decode_p50_tok_s"] == pytest.approx(100, rel=2e-3)
    none, _ = stats_of([plain_reply(i) for i in range(5)])
    quiet = {f.key: f.value(summary_of(none), {}, None) for f in FIGURES}
    assert quiet["ttftc_p95_ms"] is None and quiet["tool_call_share"] is None


def test_the_tables_show_ttftc_only_for_steps_that_called() -> None:
    stats, _ = stats_of([tool_call(i, ARGS) for i in range(20)])
    table = format_step_table([summary_of(stats)], None, width=220)
    assert "TTFTC p95" in table.splitlines()[0] and "calls" in table.splitlines()[0]
    none, _ = stats_of([plain_reply(i) for i in range(5)])
    assert "TTFTC" not in format_step_table([summary_of(none)], None, width=220)
    assert TTFTC in [c.header for c in fitting_columns([summary_of(stats)], None)]
    assert TTFTC not in [c.header for c in fitting_columns([summary_of(none)], None)]

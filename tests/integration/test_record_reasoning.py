"""Reasoning figures through the metrics pipeline: a RequestResult's TTFAT, reasoning phase and reasoning
tokens into the worker's Recorder, the controller's Accumulator, the step line and back, the SLO, the CSV
columns and ramp compare's figures."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from analysis_fakes import stats_of, summary_of

from loadgen.analysis.figures import FIGURES
from loadgen.config import SLO
from loadgen.format import fmt_num_wide
from loadgen.record import RecordWriter, read_record, step_from_line
from loadgen.report import format_step_table
from loadgen.slo import evaluate
from loadgen.types import Outcome, RequestResult

MS = 1_000_000
REASON_CHUNKS = 30  # 20 ms apart: the reasoning phase lasts 600 ms after the first token
ANSWER_CHUNKS = 11


def reasoned(i: int, reasoning_chunks: int = REASON_CHUNKS) -> RequestResult:
    t0 = i * 10 * MS
    first = t0 + (100 + i) * MS
    chunks = tuple(first + k * 20 * MS for k in range(reasoning_chunks + ANSWER_CHUNKS))
    return RequestResult(
        outcome=Outcome.OK,
        intended_ns=t0,
        sent_ns=t0,
        end_ns=chunks[-1] + MS,
        first_token_ns=first,
        last_token_ns=chunks[-1],
        chunk_times_ns=chunks,
        output_tokens=len(chunks),
        tokens_exact=True,
        first_answer_ns=chunks[reasoning_chunks],
        reasoning_tokens=reasoning_chunks,
        reasoning_exact=True,
        reasoning_chunks=reasoning_chunks,
    )


def test_ttfat_and_reasoning_phase_per_step() -> None:
    stats, _ = stats_of([reasoned(i) for i in range(20)])
    ttft, ttfat = stats.pct("ttft_ms"), stats.pct("ttfat_ms")
    assert ttft.count == ttfat.count == 20
    assert ttfat.p50 - ttft.p50 == pytest.approx(REASON_CHUNKS * 20, rel=2e-3)  # type: ignore[operator]
    assert stats.pct("reasoning_ms").p50 == pytest.approx(600, rel=2e-3)
    assert (stats.reasoned, stats.reasoning_tokens) == (20, 20 * REASON_CHUNKS)
    # the answer: 11 tokens, 10 gaps of 20 ms = 50 tok/s; the whole output decodes at the same pace
    assert stats.pct("answer_decode_tok_s").p50 == pytest.approx(50, rel=2e-3)
    assert stats.pct("decode_tok_s").p50 == pytest.approx(50, rel=2e-3)


def test_ttfat_slo_is_judged_and_named() -> None:
    slo = SLO(ttfat_p95_ms=500.0)
    stats, _ = stats_of([reasoned(i) for i in range(20)], slo)
    verdict = evaluate(slo, stats)
    assert verdict.met is False and verdict.failures[0].startswith("TTFAT p95 7")
    # TTFT alone (~120 ms) meets the same limit: only TTFAT sees the reasoning
    assert evaluate(SLO(ttft_p95_ms=500.0), stats).met is True
    assert stats.goodput_req_s == 0.0  # no request's answer came within 500 ms
    short, _ = stats_of([reasoned(i, reasoning_chunks=5) for i in range(20)], slo)
    assert evaluate(slo, short).met is True and short.goodput_req_s == pytest.approx(2.0)


def test_step_line_round_trip_and_compare_figures(tmp_path: Path) -> None:
    stats, hists = stats_of([reasoned(i) for i in range(20)])
    step = summary_of(stats)
    path = tmp_path / "run.jsonl"
    with RecordWriter(path) as writer:
        writer.write_header({"model": "m"})
        line = writer.write_step(step, hists)
    assert line["reasoned"] == 20 and line["reasoning_tokens"] == 20 * REASON_CHUNKS
    assert set(line["ttfat_ms"]) == {"p50", "p95", "p99"} and "ttfat_ms" in line["hists"]
    assert line["reasoning_tokens_per_req"]["p50"] == REASON_CHUNKS
    back = step_from_line(read_record(path).steps[0])
    assert back.stats.reasoned == 20 and back.stats.pct("ttfat_ms") == stats.pct("ttfat_ms")
    assert back.stats.pct("reasoning_ms") == stats.pct("reasoning_ms")
    figures = {f.key: f.value(back, line, None) for f in FIGURES}
    assert figures["ttfat_p95_ms"] == stats.pct("ttfat_ms").p95
    assert figures["reasoning_tokens_per_req"] == REASON_CHUNKS
    assert figures["answer_decode_p50_tok_s"] == pytest.approx(50, rel=2e-3)


def test_a_model_that_does_not_reason_has_ttfat_but_no_reasoning_rows() -> None:
    plain = [
        RequestResult(
            outcome=Outcome.OK, intended_ns=0, sent_ns=0, end_ns=300 * MS, first_token_ns=100 * MS,
            last_token_ns=300 * MS, chunk_times_ns=(100 * MS, 200 * MS, 300 * MS), output_tokens=3,
            tokens_exact=True, first_answer_ns=100 * MS,
        )
    ]  # fmt: skip
    stats, _ = stats_of(plain)
    assert stats.pct("ttfat_ms") == stats.pct("ttft_ms") and stats.pct("reasoning_ms").count == 0
    assert stats.reasoned == 0


def test_text_report_shows_ttfat_only_for_reasoning_steps() -> None:
    reasoning, _ = stats_of([reasoned(i) for i in range(20)])
    table = format_step_table([summary_of(reasoning)], None, width=200)
    header = table.splitlines()[0]
    assert "TTFAT p95" in header and "reason p50" in header
    assert fmt_num_wide(reasoning.pct("ttfat_ms").p95) in table.splitlines()[2]
    plain = reasoned(0, reasoning_chunks=0)
    stats, _ = stats_of([dataclasses.replace(plain, reasoning_tokens=0, reasoning_exact=False)])
    assert "TTFAT" not in format_step_table([summary_of(stats)], None, width=200)

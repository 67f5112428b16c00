"""The JSONL run record (write, fsync, read back, damage) and the plain-text report built from it."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from analysis_fakes import stats_of, summary_of

from loadgen import record as record_mod
from loadgen.metrics import Accumulator, Recorder, decode_histogram, layout_for, view_from_hdr
from loadgen.record import RecordError, RecordWriter, read_record, step_from_line, strip_url_credentials
from loadgen.report import format_step_table, report_main
from loadgen.slo import best_step, evaluate
from loadgen.snapshot import SLO, SLOVerdict, StepSummary
from loadgen.types import ErrorKind, Outcome, RequestResult

MS = 1_000_000
S = 1_000_000_000


def results(n: int, ttft_ms: float, tokens: int) -> list[RequestResult]:
    out = []
    for i in range(n):
        t0 = i * 10 * MS
        first = t0 + int((ttft_ms + i % 7) * MS)
        chunks = tuple(first + k * 20 * MS for k in range(tokens))
        out.append(
            RequestResult(
                outcome=Outcome.OK,
                intended_ns=t0,
                sent_ns=t0 + 100_000,
                end_ns=chunks[-1] + MS,
                first_token_ns=first,
                last_token_ns=chunks[-1],
                chunk_times_ns=chunks,
                output_tokens=tokens,
                input_tokens=500 + i,
                tokens_exact=True,
                cache_class="hit" if i % 2 else "miss",
            )
        )
    out.append(
        RequestResult(
            outcome=Outcome.ERROR,
            intended_ns=0,
            sent_ns=1,
            end_ns=5 * MS,
            error_kind=ErrorKind.HTTP_429,
            error_message="rate limited",
        )
    )
    return out


def make_step(index: int, level: int, ttft_ms: float, slo: SLO) -> tuple[StepSummary, dict[str, str]]:
    stats, hists = stats_of(results(40, ttft_ms, 16))
    summary = summary_of(
        stats,
        evaluate(slo, stats),
        index,
        level=level,
        warmup_s=2.0,
        duration_s=12.0,
        client_bound=index == 1,
        bound_reason="load worker at 97% CPU: add --workers" if index == 1 else "",
        server={"kv_cache_usage_max": 0.8, "waiting_max": None},
        marks=("swapped config",) if index == 0 else (),
    )
    return summary, hists


HEADER = {
    "model": "llama-8b",
    "model_revision": "abc123",
    "runtime": "vllm",
    "runtime_version": "0.8.5",
    "tags": {"gpu": "h200"},
    "profile": "chat-short",
    "profile_hash": "0123456789abcdef",
    "target_url": "http://alice:s3cret@10.0.0.5:8000/v1?api_key=zzz",
    "mode": "closed",
    "arrival": "closed",
    "workers": 2,
    "plan": {"levels": [1, 2], "step_s": 12.0, "warmup_s": 2.0, "early_stop": False},
    "slo": {"ttft_p95_ms": 500.0, "ttft_p99_ms": None},
}


def write_run(path: Path) -> tuple[list[StepSummary], list[dict], dict]:
    slo = SLO(ttft_p95_ms=500.0)
    steps, lines = [], []
    with RecordWriter(path) as writer:
        header = writer.write_header(HEADER)
        for index, (level, ttft) in enumerate(((1, 100.0), (2, 900.0))):
            summary, hists = make_step(index, level, ttft, slo)
            steps.append(summary)
            lines.append(writer.write_step(summary, hists))
        writer.write_event("mark", {"elapsed_s": 3.5, "note": "swapped config"})
        writer.write_event("end", {"state": "finished", "message": "", "best_step": 0})
    return steps, lines, header


def test_write_fsyncs_every_line_and_reads_back_equal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(record_mod.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    path = tmp_path / "run.jsonl"
    steps, lines, header = write_run(path)
    assert len(synced) == 5  # header, 2 steps, 2 events
    rec = read_record(path)
    assert not rec.truncated
    assert rec.header == header
    assert rec.header["type"] == "header" and rec.header["schema"] == record_mod.SCHEMA_VERSION
    assert rec.header["ramp_version"] and rec.header["started_at"] and rec.header["host"]
    assert rec.steps == lines
    assert [e["kind"] for e in rec.events] == ["mark", "end"]
    assert rec.events[0]["note"] == "swapped config"
    # the step summary rebuilt from its line is the one written (drawing bins from the histograms)
    assert [step_from_line(line) for line in rec.steps] == steps


def test_step_line_carries_the_summary_figures(tmp_path: Path) -> None:
    _, lines, _ = write_run(tmp_path / "run.jsonl")
    line = lines[1]
    for key in (
        "level",
        "arrival",
        "warmup_s",
        "window_s",
        "duration_s",
        "ok",
        "errors",
        "cancelled",
        "success_rate",
    ):
        assert key in line
    assert line["ok"] == 40 and line["errors"] == {"http_429": 1}
    assert line["input_tokens_per_req"]["p50"] == pytest.approx(520, rel=2e-3)
    assert line["output_tokens_per_req"] == {"p50": 16.0, "p95": 16.0, "mean": 16.0}
    assert line["out_tok_s"] == pytest.approx(64.0)
    assert set(line["ttft_ms"]) == {"p50", "p95", "p99"} and set(line["itl_ms"]) == {"p50", "p99"}
    assert set(line["e2e_ms"]) == {"p50", "p95"} and set(line["lag_ms"]) == {"p50", "p99"}
    assert set(line["decode_tok_s"]) == {"p50", "p95"}
    assert line["slo_met"] is False and line["slo_failures"][0].startswith("TTFT p95 9")
    assert line["client_bound"] is True
    assert line["client_bound_reason"] == "load worker at 97% CPU: add --workers"
    assert line["server"] == {"kv_cache_usage_max": 0.8, "waiting_max": None}
    assert "ttft_ms|cache:hit" in line["hists"]


def test_out_of_range_counts_are_written_and_read_back(tmp_path: Path) -> None:
    rec, acc = Recorder(), Accumulator()
    for r in results(10, 100.0, 4):
        rec.record(r)
    top_ns = layout_for("ttft_ms").highest * 1000  # a value above the histogram's highest trackable value
    rec.record(
        RequestResult(outcome=Outcome.OK, intended_ns=0, sent_ns=1, end_ns=2 * top_ns, output_tokens=1)
    )
    acc.add(rec.take(0, 10 * S))
    summary, _ = make_step(0, 1, 100.0, SLO())
    summary = dataclasses.replace(summary, stats=acc.stats("step", 10.0))
    path = tmp_path / "run.jsonl"
    with RecordWriter(path) as writer:
        writer.write_header(HEADER)
        line = writer.write_step(summary, acc.encoded())
    assert line["out_of_range"] == {"e2e_ms": 1}
    back = step_from_line(read_record(path).steps[0])
    assert dict(back.stats.out_of_range) == {"e2e_ms": 1}
    assert back == summary
    # a step without any keeps an empty mapping, and a record written before the field existed reads the same
    _, clean, _ = write_run(tmp_path / "clean.jsonl")
    assert clean[0]["out_of_range"] == {}
    old = {k: v for k, v in clean[0].items() if k != "out_of_range"}
    assert dict(step_from_line(old).stats.out_of_range) == {}


def test_histograms_decode_back_to_the_same_percentiles(tmp_path: Path) -> None:
    steps, _, _ = write_run(tmp_path / "run.jsonl")
    line = read_record(tmp_path / "run.jsonl").steps[0]
    for metric in ("ttft_ms", "itl_ms", "e2e_ms", "lag_ms", "decode_tok_s"):
        decoded = view_from_hdr(decode_histogram(line["hists"][metric]), metric)
        assert decoded.pct == steps[0].stats.pct(metric)
        assert decoded.pct.count > 0


def test_truncated_last_line_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_run(path)
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"type":"step","index":2,"ok":4')  # killed mid-write
    rec = read_record(path)
    assert rec.truncated and len(rec.steps) == 2


def test_garbage_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    write_run(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[2] = "this is not json"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(RecordError) as err:
        read_record(path)
    assert str(err.value).startswith(f"{path} line 3: not JSON — ")


def test_other_bad_records(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="no such file"):
        read_record(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(RecordError, match="empty"):
        read_record(empty)
    headless = tmp_path / "headless.jsonl"
    headless.write_text('{"type":"step"}\n', encoding="utf-8")
    with pytest.raises(RecordError, match="line 1: expected the header"):
        read_record(headless)


def test_existing_record_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_run(path)
    with pytest.raises(RecordError, match="already exists"):
        RecordWriter(path)


def test_no_credentials_or_secrets_in_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVER_API_KEY", "sk-live-0123456789")
    path = tmp_path / "run.jsonl"
    with RecordWriter(path) as writer:
        header = writer.write_header(
            {**HEADER, "notes": "key sk-live-0123456789 leaked", "api_key_env": "MY_SERVER_API_KEY"}
        )
        writer.write_event("error", {"message": "GET https://bob:hunter2@example.com/v1/models failed"})
    text = path.read_text(encoding="utf-8")
    assert "s3cret" not in text and "alice" not in text and "api_key=zzz" not in text
    assert "hunter2" not in text and "sk-live-0123456789" not in text
    assert header["target_url"] == "http://10.0.0.5:8000/v1"
    assert header["notes"] == "key *** leaked"
    assert header["api_key_env"] == "MY_SERVER_API_KEY"  # the variable's name is not a secret
    assert json.loads(text.splitlines()[1])["message"] == "GET https://example.com/v1/models failed"


def test_strip_url_credentials() -> None:
    assert strip_url_credentials("https://u:p@h.example:443/a/b?x=1#f") == "https://h.example:443/a/b"
    assert strip_url_credentials("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
    assert strip_url_credentials("http://h/x?y=1", drop_query=False) == "http://h/x?y=1"


# ---- report --------------------------------------------------------------------------------------------


def table_steps() -> list[StepSummary]:
    slo = SLO(ttft_p95_ms=500.0)
    return [
        make_step(i, level, ttft, slo)[0]
        for i, (level, ttft) in enumerate(((1, 100.0), (2, 200.0), (4, 900.0)))
    ]


def test_step_table_marks_the_best_step() -> None:
    steps = table_steps()
    best = best_step(steps)
    assert best in (0, 1)
    text = format_step_table(steps, best, width=160)
    lines = text.splitlines()
    header = lines[0]
    for name in (
        "step",
        "level",
        "ok",
        "err",
        "out",
        "prefill",
        "decode p50",
        "TTFT p50",
        "TTFT p95",
        "TTFT p99",
        "e2e p95",
        "SLO",
    ):
        assert name in header
    rows = [ln for ln in lines if ln.lstrip()[:1].isdigit()]
    assert len(rows) == 3
    assert rows[best].lstrip().startswith(f"{best + 1}*")
    assert "✓" in rows[0] and "✗" in rows[2] and "!" in rows[1]
    assert f"best under SLO: step {best + 1}, " in text and "out tok/s" in text
    assert "step 3 ✗ TTFT p95" in text
    # which symptom made a step client-bound, from the record (a table reader can act on it)
    assert "    step 2: load worker at 97% CPU: add --workers" in text
    assert "step 1:" not in text and "step 3:" not in text


def test_step_table_fits_80_columns() -> None:
    text = format_step_table(table_steps(), 1, width=80)
    assert all(len(line) <= 80 for line in text.splitlines() if not line.startswith(("best", "  ")))
    header = text.splitlines()[0]
    assert "TTFT p95" in header and "out" in header and "SLO" in header
    assert "prefill" not in header


def test_step_table_without_slo_and_without_best() -> None:
    steps = table_steps()
    no_slo = [
        StepSummary(**{**{f: getattr(s, f) for f in s.__slots__}, "verdict": SLOVerdict(None)}) for s in steps
    ]
    assert "best (no SLO set): step" in format_step_table(no_slo, best_step(no_slo))
    assert "none (no step met the SLO)" in format_step_table(steps, None)
    assert format_step_table([], None) == "no finished step"


def test_report_main(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.jsonl"
    write_run(path)
    assert report_main(str(path)) == 0
    out = capsys.readouterr().out
    assert "llama-8b (revision abc123)" in out and "vllm 0.8.5" in out and "http://10.0.0.5:8000/v1" in out
    assert "best under SLO: step 1, 1 stream, " in out
    assert "mark     3.5 s: swapped config" in out and "end      finished" in out


def test_report_main_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type":"header","schema":1}\n{not json}\n{"type":"event"}\n', encoding="utf-8")
    assert report_main(str(path)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ramp report: {path} line 2: not JSON — ")
    assert "Traceback" not in err


def test_report_main_damaged_histogram(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.jsonl"
    write_run(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    step = json.loads(lines[1])
    step["hists"]["ttft_ms"] = "SGVsbG8gd29ybGQ="
    lines[1] = json.dumps(step)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert report_main(str(path)) == 2
    err = capsys.readouterr().err
    assert "step line 1 is damaged: histogram 'ttft_ms' cannot be decoded" in err

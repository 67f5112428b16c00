"""The smaller faults: a server that sends no usage (prefill reads n/a, not 0; approximate counts marked), a
``/v1/models`` that is missing (with ``--model`` the run goes on) or empty (exit 3), and a stalled stream
that holds a closing step (shown, with what bounds it, instead of a silent drain)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
from aiohttp import web
from fault_servers import FaultServer, answering, json_models
from ramp_cli import ramp as run_ramp
from tui_fakes import ScriptedEngine, make_snapshot

from loadgen.cli.headless import progress_line, wait_with_progress
from loadgen.metrics import Accumulator, IntervalDelta
from loadgen.record import read_record, step_from_line
from loadgen.report import format_step_table
from loadgen.run.config import RunOutcome

NO_USAGE = (
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


async def stream_without_usage(req: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(req)
    await resp.write(NO_USAGE)
    await resp.write_eof()
    return resp


ramp = partial(run_ramp, timeout=90)


def headless(url: str, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    steps = ["--steps", "1", "--step-seconds", "1.5", "--warmup", "0", "--no-metrics"]
    return ramp("run", url, "--headless", *steps, "--out", str(out), *flags)


@pytest.fixture(scope="module")
def no_usage() -> Iterator[FaultServer]:
    server = FaultServer(
        {
            ("GET", "/v1/models"): json_models({"data": [{"id": "tiny"}]}),
            ("POST", "/v1/chat/completions"): stream_without_usage,
        }
    ).start()
    yield server
    server.stop()


def test_prefill_is_unknown_without_usage() -> None:
    acc = Accumulator()
    acc.add(IntervalDelta(0, 10**9, 0, counters={"ok": 3, "approx_tokens": 3}, hists={}, live_tokens=6))
    stats = acc.stats("step", 1.0)
    assert stats.prefill_tok_s is None and stats.out_tok_s == 6.0
    acc.add(IntervalDelta(0, 10**9, 0, counters={"ok": 1, "input_tokens": 5, "input_reported": 1}, hists={}))
    assert acc.stats("step", 1.0).prefill_tok_s == 5.0


def test_a_server_without_usage_reads_na_and_marks_the_estimate(
    no_usage: FaultServer, tmp_path: Path
) -> None:
    out = tmp_path / "run.jsonl"
    proc = headless(no_usage.url, out)
    assert proc.returncode in (0, 1), proc.stderr
    (line,) = read_record(out).steps
    assert line["ok"] > 0 and line["prefill_tok_s"] is None and line["approx_tokens"] == line["ok"]
    table = format_step_table([step_from_line(line)], None)
    row = table.splitlines()[2]
    assert "~" in row and "n/a" in row, table
    assert "estimated" in table, table
    assert "~" in proc.stdout


def test_a_missing_model_list_does_not_block_a_named_model(tmp_path: Path) -> None:
    server = answering(models=json_models({"detail": "Not Found"}, status=404))
    try:
        named = headless(server.url, tmp_path / "named.jsonl", "--model", "tiny")
        unnamed = headless(server.url, tmp_path / "unnamed.jsonl")
    finally:
        server.stop()
    assert named.returncode in (0, 1), named.stderr
    assert "warning" in named.stderr and "404" in named.stderr and "--model" in named.stderr, named.stderr
    assert read_record(tmp_path / "named.jsonl").steps[0]["ok"] > 0
    assert unnamed.returncode == 3 and "404" in unnamed.stderr, unnamed.stderr


def test_an_empty_model_list_is_unusable(tmp_path: Path) -> None:
    server = answering(models=json_models({"object": "list", "data": []}))
    try:
        proc = headless(server.url, tmp_path / "r.jsonl")
    finally:
        server.stop()
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert "serves no model" in proc.stderr and "Traceback" not in proc.stderr


def test_a_closing_step_says_how_long_and_what_bounds_it() -> None:
    snap = make_snapshot(phase="closing", closing_left=2, warming_up=False)
    line = progress_line(snap, closing_s=42.0, idle_timeout_s=120.0)
    assert "closing (2 left, 42 s" in line and "idle timeout 120 s" in line, line
    assert "42 s" not in progress_line(snap, closing_s=1.0, idle_timeout_s=120.0)


def test_entering_the_closing_phase_is_printed_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    measuring = make_snapshot(step_index=0, phase="measure", warming_up=False)
    closing = replace(measuring, phase="closing", closing_left=1)
    outcome = RunOutcome(state="finished", steps=(), best_step=None, record_path=None)
    wait_with_progress(ScriptedEngine([measuring, closing, closing], outcome), idle_timeout_s=120.0)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("step ")]
    assert len(lines) == 2 and "closing (1 left" in lines[1], lines

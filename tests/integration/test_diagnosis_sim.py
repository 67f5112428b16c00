"""The limit's diagnosis end to end: a short ramp against the simulator made to stop for one reason (a small
batch, a small KV cache, a steep batch cost, a slow prefill, a delay before the server) names that reason in
the record's step line, and the TTFT split adds up against the simulator's own histograms.

On a loaded machine ramp may flag a step client-bound: the line then says ``client`` (a cause read from the
client's clock is not trusted), and the same step's figures, read again as a free client's, name the
scenario's cause; a queue or a full KV cache, shown by the server's own figures, is named either way.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from loadgen.analysis.diagnosis import StepFigures, diagnose
from loadgen.analysis.reports import load_report_run
from loadgen.config import RampPlan
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.report.tables import csv_report, json_report, markdown_report
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.sim.scenarios import BASE_PRESET, scenario_overrides, scenarios
from loadgen.snapshot import StepSummary
from loadgen.types import Target

PROFILE = """
name = "diagnosis"
[[bucket]]
input = {input}
output = {output}
[sampling]
ignore_eos = true
"""


def ramp(tmp_path: Path, name: str, levels: tuple[int, ...], step_s: float = 1.5) -> list[dict[str, Any]]:
    """A ramp over ``levels`` against the simulator in scenario ``name``: each step's line with its summary."""
    scenario = scenarios()[name]
    handle = run_sim_in_thread(build_config(BASE_PRESET, seed=3, **scenario_overrides(name)))
    try:
        out = tmp_path / "run.jsonl"
        text = PROFILE.format(input=scenario.input_tokens, output=scenario.output_tokens)
        config = RunConfig(
            target=Target(url=handle.url),
            profile=parse_profile(text, source="<diagnosis>"),
            plan=RampPlan(levels, step_s=step_s, warmup_s=0.3),
            out=str(out),
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(60)
        assert outcome is not None and outcome.state == "finished", outcome
        steps = outcome.steps
    finally:
        handle.stop()
    lines = read_record(out).steps
    return [{**line, "summary": summary} for line, summary in zip(lines, steps, strict=True)]


def named(steps: list[dict[str, Any]], at: int) -> str:
    """The kind the step's line says; for a client-bound step, the kind its figures name for a free client."""
    kind = steps[at]["diagnosis"]["kind"]
    summary: StepSummary = steps[at]["summary"]
    if kind == "client" and summary.client_bound:
        before = [StepFigures.of(s["summary"]) for s in steps[:at]]
        return str(diagnose(replace(StepFigures.of(summary), client_bound=False), before)["kind"])
    return str(kind)


def assert_named(steps: list[dict[str, Any]], want: str, limiting: tuple[int, ...]) -> None:
    kinds = [named(steps, i) for i in range(len(steps))]
    for i in limiting:
        assert kinds[i] == want, (i, kinds, [s["diagnosis"] for s in steps])
    wrong = [k for k in kinds if k not in (want, "none", "unknown")]
    assert not wrong, (kinds, [s["diagnosis"] for s in steps])


def test_a_small_batch_is_queueing_and_the_split_adds_up(tmp_path: Path) -> None:
    steps = ramp(tmp_path, "queue", (2, 8, 16))
    last = steps[-1]
    assert last["diagnosis"]["kind"] == "queueing"  # the server's own figures: named even when client-bound
    assert any(e.endswith("waiting") for e in last["diagnosis"]["evidence"])
    assert_named(steps, "queueing", (1, 2))
    split = last["ttft_split"]
    # the simulator's queue + prefill is its TTFT, request by request: the means add up
    total = split["queue"]["mean_ms"] + split["prefill"]["mean_ms"]
    assert total == pytest.approx(split["server"]["mean_ms"], abs=0.01)
    assert split["queue"]["mean_ms"] > 5 * split["prefill"]["mean_ms"]  # 12 of 16 streams wait
    assert split["client"]["mean_ms"] == pytest.approx(last["summary"].stats.pct("ttft_ms").mean, rel=1e-6)
    assert 0 <= split["outside"]["mean_ms"] < 0.2 * split["client"]["mean_ms"]  # 127.0.0.1: little outside
    # the reports carry both: CSV and JSON columns, a Markdown line per step
    report = load_report_run(str(tmp_path / "run.jsonl"), "queue")
    rows = list(csv.DictReader(io.StringIO(csv_report([report]))))
    assert rows[-1]["diagnosis"] == "queueing" and "waiting" in rows[-1]["diagnosis_evidence"]
    assert float(rows[-1]["ttft_queue_mean_ms"]) == pytest.approx(split["queue"]["mean_ms"], abs=1e-3)
    assert json.loads(json_report([report]))["records"][0]["steps"][-1]["diagnosis"] == "queueing"
    assert "step 3 (16): Limit: queueing — " in markdown_report([report])


def test_a_small_kv_cache_is_kv_cache(tmp_path: Path) -> None:
    steps = ramp(tmp_path, "kv", (4, 16))
    last = steps[-1]
    assert last["diagnosis"]["kind"] == "kv_cache", last["diagnosis"]
    # preempted, or waiting beside a cache at least 85 % full
    assert last["server"]["preemptions"] > 0 or last["server"]["kv_usage_max"] >= 0.85
    assert_named(steps, "kv_cache", (1,))


def test_a_steep_batch_cost_is_decode_bound(tmp_path: Path) -> None:
    steps = ramp(tmp_path, "decode", (1, 4, 8))
    assert_named(steps, "decode_bound", (1, 2))


def test_a_slow_prefill_is_prefill_bound(tmp_path: Path) -> None:
    steps = ramp(tmp_path, "prefill", (1, 4, 8), step_s=2.5)
    assert_named(steps, "prefill_bound", (1, 2))


def test_a_delay_before_the_server_is_network(tmp_path: Path) -> None:
    steps = ramp(tmp_path, "network", (2, 4))
    assert_named(steps, "network", (0, 1))
    outside = steps[-1]["ttft_split"]["outside"]["mean_ms"]
    assert 95.0 <= outside <= 140.0  # the 100 ms the simulator sleeps before its engine sees the request


def test_nothing_limiting_is_none(tmp_path: Path) -> None:
    steps = ramp(tmp_path, "none", (1, 2, 4))
    assert_named(steps, "none", (1, 2))

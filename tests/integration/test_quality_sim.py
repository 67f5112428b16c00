"""Answers still right under load, end to end: a ramp with answer probes against the simulator whose answers
change above N open generations reads agreement 1.00 at the levels up to N and the change above them, in the
record's step lines."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from loadgen.analysis.reports import load_report_run
from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import resolve
from loadgen.config import RampPlan
from loadgen.exits import UsageError
from loadgen.profile import Quality, parse_profile
from loadgen.profile.quality import load_reference
from loadgen.record import read_record, step_from_line
from loadgen.report.tables import csv_report, json_report, markdown_report
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.slo import best_step
from loadgen.types import Target

PROFILE = """
name = "quality"
[[bucket]]
input = 64
output = 16
[sampling]
ignore_eos = true
[quality]
share = {share}
probes = 2
max_tokens = 12
"""


def ramp(
    tmp_path: Path, levels: tuple[int, ...], share: float, reference: str = "", slo: str = "", **sim: Any
) -> list[dict[str, Any]]:
    handle = run_sim_in_thread(build_config("tiny-cpu", seed=3, speed=4.0, **sim))
    try:
        out = tmp_path / "run.jsonl"
        profile = parse_profile(PROFILE.format(share=share) + slo, source="<quality>")
        if reference:
            assert profile.quality is not None
            profile = replace(profile, quality=load_reference(reference, profile.quality))
        config = RunConfig(
            target=Target(url=handle.url),
            profile=profile,
            plan=RampPlan(levels, step_s=1.5, warmup_s=0.3),
            out=str(out),
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(60)
        assert outcome is not None and outcome.state == "finished", outcome
    finally:
        handle.stop()
    return read_record(out).steps


def test_agreement_holds_up_to_the_change_and_reads_it_above(tmp_path: Path) -> None:
    steps = ramp(tmp_path, (1, 2, 6), share=0.25, answer_change_above=2)
    q = [s["quality"] for s in steps]
    assert all(x["n"] >= 3 and x["errors"] == 0 for x in q), q
    assert "reference" in q[0] and sorted(q[0]["reference"]) == ["0", "1"]  # level 1 set the reference
    assert [x["agree"] for x in q[:2]] == [1.0, 1.0], q
    assert q[2]["agree"] < 0.5 and q[2]["agree_hi"] < 1.0, q[2]  # 6 streams > 2: the answers changed
    assert q[0]["prefix_chars_p50"] > 0 and q[2]["prefix_chars_p50"] < q[0]["prefix_chars_p50"]
    report = load_report_run(str(tmp_path / "run.jsonl"), "q")
    rows = list(csv.DictReader(io.StringIO(csv_report([report]))))
    assert [float(r["quality_agree"]) for r in rows] == [x["agree"] for x in q]
    md = markdown_report([report])
    assert "Answers under load (agreement with the reference):" in md
    assert f"step 3 (6): agreement {q[2]['agree']:.2f} (" in md
    flat = json.loads(json_report([report]))["records"][0]["steps"]
    assert [(s["quality_n"], s["quality_agree_hi"]) for s in flat] == [(x["n"], x["agree_hi"]) for x in q]


def test_a_step_whose_answers_changed_misses_the_slo_and_is_not_best(tmp_path: Path) -> None:
    steps = ramp(
        tmp_path, (1, 2, 6), share=0.25, slo="[slo]\nquality_agree_min = 0.95\n", answer_change_above=2
    )
    assert [s["slo_met"] for s in steps] == [True, True, False], [s["slo_failures"] for s in steps]
    assert steps[2]["slo_failures"][0].startswith("answer agreement 0.")
    assert steps[2]["out_tok_s"] > steps[1]["out_tok_s"]  # faster, but not the best
    summaries = [step_from_line(s) for s in steps]
    assert steps[2]["quality"]["agree"] < 0.95 and best_step(summaries) == 1  # the best answers right


def test_another_runs_answers_as_the_reference(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ramp(tmp_path / "a", (1,), share=0.25)  # the baseline server's answers, in its record
    record = str(tmp_path / "a" / "run.jsonl")
    # another server (the same model, its answers changed from the start): no step reads 1.00
    steps = ramp(tmp_path / "b", (1, 2), share=0.25, reference=record, answer_change_after_s=0.001)
    q = [s["quality"] for s in steps]
    assert all(x["n"] >= 3 and x["agree"] < 0.2 and "reference" not in x for x in q), q
    header = json.loads((tmp_path / "b" / "run.jsonl").read_text().splitlines()[0])
    assert sorted(header["profile_content"]["quality"]["reference"]) == ["0", "1"]  # recorded in the header


def test_a_reference_asked_differently_is_refused(tmp_path: Path) -> None:
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"model": "m1", "max_tokens": 12, "seed": 1234, "reference": {"0": "a"}}))
    assert load_reference(str(ref), Quality(max_tokens=12)).reference == ((0, "a"),)
    with pytest.raises(
        ValueError, match=r"ref.json: its probes were asked with max_tokens 12, this run's with 32"
    ):
        load_reference(str(ref), Quality())
    with pytest.raises(ValueError, match=r"ref.json: its answers are 'm1''s, this run's model is 'm2'"):
        load_reference(str(ref), Quality(max_tokens=12), "m2")
    ref.write_text("[1, 2]")
    with pytest.raises(ValueError, match="no reference answers"):
        load_reference(str(ref), Quality())
    config = resolve(RunFlags(quality=True), "http://127.0.0.1:9")
    assert config.profile.quality == Quality()
    with pytest.raises(UsageError, match="nothing.json: cannot read"):
        resolve(RunFlags(quality_reference=str(tmp_path / "nothing.json")), "http://127.0.0.1:9")


def test_probes_that_fail_or_come_back_empty_are_counted_not_fatal(tmp_path: Path) -> None:
    steps = ramp(tmp_path, (1, 3), share=0.5, fault_error_rate=0.2, fault_empty_rate=0.15)
    q = [s["quality"] for s in steps]
    assert sum(x["errors"] for x in q) >= 4, q  # failed or empty probes, apart from the compared ones
    assert all(x["n"] >= 3 for x in q), q
    assert all(x["agree"] == 1.0 for x in q), q  # an empty reply is an error (empty_output), not an answer
    assert all(sum(s["errors"].values()) > 0 for s in steps)  # every request still counts as load

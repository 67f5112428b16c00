"""One step number (issue 19, defect 9): the record counts steps from 1 as the screen and steps.csv do, and
a record written before (schema 1: ``index`` from 0, a mark's ``step`` and the end's ``best_step`` from 0)
reads with the same numbers as a new one."""

from __future__ import annotations

from pathlib import Path

from loadgen.analysis.replay import load_replay
from loadgen.record import SCHEMA_VERSION, read_record, step_from_line, step_line

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
OLD_REPLAY = FIXTURES / "replay" / "run.jsonl"  # schema 1: three steps, a mark in the first, best index 2
OLD_DEMO = FIXTURES / "report" / "demo-h200-10-steps.jsonl"  # schema 1: best index 7 (the report's step 8)


def test_an_old_record_reads_renumbered_from_one() -> None:
    record = read_record(OLD_REPLAY)
    assert record.header["schema"] == 1
    assert [s["step"] for s in record.steps] == [1, 2, 3]
    assert [s["index"] for s in record.steps] == [0, 1, 2]  # the file's own keys are left as written
    (mark,) = [e for e in record.events if e["kind"] == "mark"]
    assert (
        mark["step"] == 1 and mark["elapsed_s"] < record.steps[0]["started_s"] + record.steps[0]["duration_s"]
    )
    assert record.events[-1]["best_step"] == 3
    assert read_record(OLD_DEMO).events[-1]["best_step"] == 8
    # typed, the old step lines keep their positions: StepSummary.index is 0-based, its number index + 1
    assert [step_from_line(s).index for s in record.steps] == [0, 1, 2]


def test_replay_of_an_old_record_names_the_same_steps() -> None:
    run = load_replay(str(OLD_REPLAY))
    assert [s.index + 1 for s in run.steps] == [1, 2, 3]
    assert run.best_step is not None and run.steps[run.best_step].index + 1 == 3


def test_a_new_step_line_says_its_number_from_one_and_reads_back() -> None:
    old = read_record(OLD_REPLAY).steps[1]
    summary = step_from_line(old)
    line = step_line(summary, old["hists"])
    assert SCHEMA_VERSION == 2 and line["step"] == 2 and "index" not in line
    assert step_from_line(line).index == summary.index == 1

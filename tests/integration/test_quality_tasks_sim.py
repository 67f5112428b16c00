"""Verifiable tasks end to end (issue 34): a ramp with ``[quality] tasks = true`` against the simulator sends
every other probe as a task (arithmetic, copy, JSON, a tool call with its tool offered) and each step line's
``quality`` counts them (``tasks_n``) with the share passed and its interval — the simulator's filler does
none of them right — beside the agreement of the other probes, which the tasks leave as it was. Against a
simulator failing 20 % of requests and emptying 15 %, the failed probes and tasks are counted in ``errors``
(apart from the load's errors, which count them too) and the run finishes. Where the answers change above 2
streams, the diagnosis of the step at 6 names it beside its limit."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from test_quality_sim import ramp as quality_ramp

from loadgen.analysis.reports import load_report_run
from loadgen.report.tables import csv_report


def ramp(
    tmp_path: Path, levels: tuple[int, ...], extra: str = "tasks = true\n", **sim: Any
) -> list[dict[str, Any]]:
    """``test_quality_sim``'s ramp with half the requests probes and ``extra`` after its [quality] table."""
    return quality_ramp(tmp_path, levels, 0.5, slo=extra, **sim)


def test_tasks_are_counted_beside_the_agreement(tmp_path: Path) -> None:
    steps = ramp(tmp_path, (1, 3))
    q = [s["quality"] for s in steps]
    for x in q:
        assert x["tasks_n"] >= 3 and x["n"] >= 3 and x["errors"] == 0, x
        assert abs(x["tasks_n"] - x["n"] - x.get("unreferenced", 0)) <= 4, x  # every other probe a task
        assert x["tasks_ok"] < 0.5, x  # deterministic filler: no integer, no copy, no JSON asked for
        assert x["tasks_ok_lo"] <= x["tasks_ok"] <= x["tasks_ok_hi"] < 1.0, x
        assert x["agree"] == 1.0, x  # the tasks leave the other probes' agreement as it was
    assert sorted(q[0]["reference"]) == ["0", "1"]  # only the probes compared with a reference set one
    rows = list(csv.DictReader(io.StringIO(csv_report([load_report_run(str(tmp_path / "run.jsonl"), "t")]))))
    assert [(int(r["quality_tasks_n"]), float(r["quality_tasks_ok_hi"])) for r in rows] == [
        (x["tasks_n"], x["tasks_ok_hi"]) for x in q
    ]
    assert [int(r["quality_errors"]) for r in rows] == [0, 0]


def test_failed_tasks_are_counted_not_fatal(tmp_path: Path) -> None:
    steps = ramp(tmp_path, (1, 3), fault_error_rate=0.2, fault_empty_rate=0.15)
    q = [s["quality"] for s in steps]
    assert sum(x["errors"] for x in q) >= 4, q
    assert sum(x["tasks_n"] for x in q) >= 4 and all(
        x["tasks_ok"] is None or x["tasks_ok"] < 0.5 for x in q
    ), q
    assert all(sum(s["errors"].values()) >= x["errors"] for s, x in zip(steps, q, strict=True))


def test_the_diagnosis_names_the_answer_change(tmp_path: Path) -> None:
    slo = "[slo]\nquality_agree_min = 0.95\n"
    steps = ramp(tmp_path, (1, 2, 6), extra=slo, answer_change_above=2)
    q = [s["quality"] for s in steps]
    assert [x["agree"] for x in q[:2]] == [1.0, 1.0] and q[2]["agree_hi"] < 0.95, q
    named = [
        any(e.startswith("answers changed under load") for e in s["diagnosis"]["evidence"]) for s in steps
    ]
    assert named == [False, False, True], [s["diagnosis"] for s in steps]
    line = steps[2]["diagnosis"]["evidence"][-1]
    assert line == (
        f"answers changed under load: agreement {q[2]['agree']:.2f} ({q[2]['agree_lo']:.2f}–"
        f"{q[2]['agree_hi']:.2f}) of {q[2]['n']} probes, below the SLO's 0.95"
    )
    assert "tasks_n" not in q[2] and q[2]["tasks_ok"] is None  # tasks off: null, not counted

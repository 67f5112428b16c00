"""``ramp compare`` on intervals (issue 31): where both runs' steps carry margins of error, a difference is
called only when the interval of the difference excludes 0, else "within noise (±x)"; a level's repeats
combine into one interval, their disagreement included. Records without margins keep the older rules
(``tests/integration/test_compare.py``)."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import jsonschema
import pytest
from analysis_fakes import Fig, base_header, run_compare, step_of
from test_compare import metric_row
from test_report_formats import run_report

from loadgen.record import RecordWriter
from loadgen.report.tables import SCHEMA_PATH
from loadgen.stats import Interval

Bounds = Mapping[str, tuple[float, float, float]]  # figure -> (value, lo, hi)


def record(path: Path, steps: Sequence[tuple[Fig, Bounds]]) -> str:
    with RecordWriter(path) as writer:
        writer.write_header(copy.deepcopy(base_header()))
        for index, (fig, bounds) in enumerate(steps):
            margins = {k: Interval(v, lo, hi, 16, 400, 15, True) for k, (v, lo, hi) in bounds.items()}
            step = dataclasses.replace(step_of(index, fig, repeat=index), margins=margins)
            writer.write_step(step, {})
        writer.write_event("end", {"state": "finished"})
    return str(path)


def test_a_difference_inside_the_interval_of_the_difference_is_within_noise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TTFT p95 +5 % with intervals of ±10 %: the older floor (2 %) called it "worse"; the intervals do not."""
    a = record(tmp_path / "a.jsonl", [(Fig(level=8, ttft_p95=200.0), {"ttft_p95_ms": (200.0, 180.0, 220.0)})])
    b = record(
        tmp_path / "b.jsonl",
        [(Fig(level=8, ttft_p95=210.0, ttft_p50=105.0), {"ttft_p95_ms": (210.0, 190.0, 230.0)})],
    )
    code, out, _ = run_compare(capsys, a, b)
    assert code == 0
    row = metric_row(out, "8 streams", "TTFT p95")
    assert "within noise (±27.1)" in row and "worse" not in row
    assert "worse" in metric_row(out, "8 streams", "TTFT p50")  # no margins there: the floor still rules
    code, out, _ = run_compare(capsys, a, b, "--format", "json")
    rows = json.loads(out)["levels"][0]["metrics"]
    delta = next(r for r in rows if r["metric"] == "ttft_p95_ms")["deltas"][1]
    assert delta["mark"] == "within noise" and delta["noise"] == "interval"
    assert delta["lo"] < 0 < delta["hi"]


def test_a_real_shift_is_called(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TTFT p50 50 vs 53 ms (+6 %) with ±1 % intervals: worse."""
    a = record(tmp_path / "a.jsonl", [(Fig(level=8, ttft_p50=50.0), {"ttft_p50_ms": (50.0, 49.5, 50.5)})])
    b = record(tmp_path / "b.jsonl", [(Fig(level=8, ttft_p50=53.0), {"ttft_p50_ms": (53.0, 52.5, 53.5)})])
    code, out, _ = run_compare(capsys, a, b)
    assert code == 0
    row = metric_row(out, "8 streams", "TTFT p50")
    assert row.rstrip().endswith("worse")


def test_repeats_that_disagree_are_noise_not_a_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """B's repeats read 50 and 56 ms, each ±1 %: their ranges do not overlap A's (the older rule called it
    worse); combined, the between-repeat variance makes the interval of the difference hold 0."""
    a = record(
        tmp_path / "a.jsonl",
        [
            (Fig(level=8, ttft_p50=49.0), {"ttft_p50_ms": (49.0, 48.5, 49.5)}),
            (Fig(level=8, ttft_p50=49.2), {"ttft_p50_ms": (49.2, 48.7, 49.7)}),
        ],
    )
    b = record(
        tmp_path / "b.jsonl",
        [
            (Fig(level=8, ttft_p50=50.0), {"ttft_p50_ms": (50.0, 49.5, 50.5)}),
            (Fig(level=8, ttft_p50=56.0), {"ttft_p50_ms": (56.0, 55.5, 56.5)}),
        ],
    )
    code, out, _ = run_compare(capsys, a, b)
    assert code == 0
    assert "within noise (±" in metric_row(out, "8 streams", "TTFT p50")


def test_the_report_carries_each_interval_beside_its_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ramp report --format json``: ``<figure>_lo`` / ``_hi`` from the step's margins, valid against the
    report's schema."""
    path = record(
        tmp_path / "a.jsonl",
        [
            (
                Fig(level=8, ttft_p95=200.0),
                {"ttft_p95_ms": (200.0, 180.0, 220.0), "out_tok_s": (1000.0, 960.0, 1040.0)},
            )
        ],
    )
    code, out, err = run_report(capsys, path, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    step = report["records"][0]["steps"][0]
    assert (step["ttft_p95_ms_lo"], step["ttft_p95_ms"], step["ttft_p95_ms_hi"]) == (180.0, 200.0, 220.0)
    assert (step["out_tok_s_lo"], step["out_tok_s_hi"]) == (960.0, 1040.0)
    assert step["itl_p99_ms_lo"] is None  # no interval stored for it

"""The catalogue of measures (``loadgen/measures.py``) is the one declaration of each metric and SLO clause.

A throwaway fixture metric put in the catalogue by the test alone (no product file touched) shows in every
table derived from it: live as a histogram (a worker's delta, the window's view), in a record's step line, in
the CSV and JSON reports (valid against the schema generated with it), in compare's figures and among the
console's histogram choices. The SLO's fields are the catalogue's clauses; the committed report schema is the
generator's current output. (The house rule that a metric's name is written out as a string only in the
catalogue, the simulator and tests is tests/house's "metric" rule.)
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import fields, replace
from pathlib import Path

import jsonschema
import pytest
from run_fakes import S, controller, tick

from loadgen import measures
from loadgen.analysis.figures import FIGURES, REPEAT_FIGURES
from loadgen.cli.commands import main as cli_main
from loadgen.config import SLO, SLO_KEYS, RampPlan
from loadgen.metrics import Accumulator, Recorder, spec_for
from loadgen.record import read_record, step_from_line
from loadgen.report.schema import report_schema, schema_text
from loadgen.report.tables import SCHEMA_PATH
from loadgen.snapshot import METRICS
from loadgen.types import Outcome, RequestResult
from tui.format import METRIC_TITLES, metric_title
from tui.view import LEFT_METRICS, RIGHT_METRICS, ViewState

PROBE = "probe_ms"  # the fixture metric: time from the request's send to its end


def probe_metric() -> measures.Metric:
    return measures.Metric(
        PROBE,
        "latency",
        "send to end",
        "probe",
        "time from the send to the end of the reply (a test's fixture metric)",
        lambda r: r.end_ns - r.sent_ns,
        step_points=("p50", "p99"),
        console=frozenset({"left", "right"}),
        compared=(measures.Compared("p50"),),
    )


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> measures.Metric:
    metric = probe_metric()
    monkeypatch.setattr(measures, "METRICS", (*measures.METRICS, metric))
    return metric


def result(start_ns: int, send_ms: float, total_ms: float) -> RequestResult:
    sent = start_ns + int(send_ms * 1e6)
    end = start_ns + int(total_ms * 1e6)
    return RequestResult(
        Outcome.OK,
        intended_ns=start_ns,
        sent_ns=sent,
        end_ns=end,
        first_token_ns=sent + 1_000_000,
        last_token_ns=end,
        output_tokens=50,
        input_tokens=20,
        tokens_exact=True,
    )


def test_a_fixture_metric_is_measured_live_as_a_histogram(probe: measures.Metric) -> None:
    recorder = Recorder(0)
    for total in (100.0, 200.0, 300.0, 400.0):
        recorder.record(result(10 * S, 0.0, total))
    delta = recorder.take(10 * S, 11 * S)
    assert PROBE in delta.hists and spec_for(PROBE).unit == "ms"
    acc = Accumulator()
    acc.add(delta)
    view = acc.stats("step", 1.0).hist[PROBE]
    assert view.pct.count == 4 and view.unit == "ms"
    assert view.pct.p50 == pytest.approx(200.0, rel=1e-3) and view.pct.max == pytest.approx(400.0, rel=1e-3)
    assert list(METRICS) == [m.name for m in measures.histogram_metrics()] and METRICS[PROBE] == "ms"


def run_to_a_record(path: Path) -> None:
    """One planned step on the fake controller and clock, its requests 100..600 ms from send to end."""
    ctl, fleet, clock, _ = controller(plan=RampPlan((4.0,), step_s=3.0, warmup_s=0.0), record=path)
    ctl.start_load()
    for _ in range(3):
        clock.advance(1.0)
        now = clock()
        for total in (100.0, 200.0, 300.0, 400.0, 500.0, 600.0):
            fleet.recorders[0].record(result(now - int(total * 1e6), 0.0, total))
        fleet.ship(ok=0, in_flight=4)
        tick(ctl)
    measured = ctl.steps.closing.seg_id if ctl.steps.closing is not None else None
    assert measured is not None
    clock.advance(0.2)
    fleet.ship(ok=0, window=measured, closed=True)
    tick(ctl)
    assert len(ctl.steps.summaries) == 1


def test_a_fixture_metric_reaches_the_record_reports_compare_and_console(
    probe: measures.Metric, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tmp_path / "run.jsonl"
    run_to_a_record(record)
    (line,) = read_record(record).steps
    # the step line: its at-a-glance percentiles, every percentile and its histogram
    assert set(line[PROBE]) == {"p50", "p99"} and line[PROBE]["p50"] == pytest.approx(300.0, rel=1e-3)
    assert line["pct"][PROBE]["count"] == 18 and PROBE in line["hists"]
    step = step_from_line(line)
    assert step.stats.pct(PROBE).p99 == pytest.approx(600.0, rel=1e-3)

    # CSV and JSON reports, the JSON valid against the schema generated with the fixture in the catalogue
    assert cli_main(["report", "--format", "csv", str(record)]) == 0
    (row,) = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row["probe_count"] == "18" and float(row["probe_p50_ms"]) == pytest.approx(300.0, rel=1e-3)
    assert cli_main(["report", "--format", "json", str(record)]) == 0
    summary = json.loads(capsys.readouterr().out)
    schema = report_schema()
    assert "probe_p99_ms" in schema["$defs"]["step"]["properties"]  # type: ignore[index]
    jsonschema.Draft202012Validator(schema).validate(summary)
    assert summary["records"][0]["steps"][0]["probe_max_ms"] == pytest.approx(600.0, rel=1e-3)

    # compare's figures: the declared one, on the step read back
    figure = next(f for f in FIGURES if f.key == "probe_p50_ms")
    assert (figure.label, figure.unit, figure.higher_is_better) == ("probe p50 ms", "ms", False)
    assert figure.value(step, line, None) == pytest.approx(300.0, rel=1e-3)
    assert cli_main(["compare", "--force", str(record), str(record)]) == 0
    assert "probe p50 ms" in capsys.readouterr().out
    assert [f.key for f in REPEAT_FIGURES][-1] == "error_rate"  # ranked after the headline figures

    # the console: both panels may show it, a key cycles to it, its title
    assert PROBE in LEFT_METRICS and PROBE in RIGHT_METRICS
    view = ViewState()
    for _ in range(len(LEFT_METRICS) - 1):
        view = view.cycle_left()
    assert view.left_metric == PROBE
    assert METRIC_TITLES[PROBE] == "send to end" and metric_title(PROBE) == "send to end"


def test_without_the_fixture_nothing_of_it_remains() -> None:
    """The derived tables follow the catalogue back (the fixture was the monkeypatch's alone)."""
    assert PROBE not in METRICS and PROBE not in LEFT_METRICS
    assert all(not f.key.startswith("probe") for f in FIGURES)
    assert "probe_p50_ms" not in report_schema()["$defs"]["step"]["properties"]  # type: ignore[index]


def test_slo_keys_are_the_catalogues_clauses() -> None:
    keys = tuple(c.key for c in measures.CLAUSES)
    assert SLO_KEYS == keys == tuple(f.name for f in fields(SLO))
    names = {m.name for m in measures.METRICS}
    for clause in measures.CLAUSES:
        assert clause.metric == "" or clause.metric in names, clause.key
        assert clause.yields_to == "" or clause.yields_to in keys, clause.key
        assert clause.subset == "" or clause.subset in measures.SUBSET_NONE, clause.key


def test_a_clause_judged_per_request_reads_the_catalogue() -> None:
    """goodput's test follows the clauses: a request lacking TTFT misses its ceiling, one lacking a tool call
    is not held to TTFTC, p99's limit applies only without p95's."""
    slo = SLO(ttft_p95_ms=500, ttft_p99_ms=50, ttftc_p95_ms=100, e2e_p95_s=2.0)
    assert slo.good(ttft_ms=400, e2e_ms=1900)  # p99's 50 ms yields to p95's 500 ms; no tool call
    assert not slo.good(ttft_ms=None, e2e_ms=1900)
    assert not slo.good(ttft_ms=400, e2e_ms=1900, ttftc_ms=150)
    assert not slo.good(ttft_ms=400, e2e_ms=2001)
    assert SLO(ttft_p99_ms=50).good(ttft_ms=40) and not SLO(ttft_p99_ms=50).good(ttft_ms=60)


def test_the_committed_report_schema_is_current() -> None:
    """``python scripts/gen_report_schema.py`` rewrites it; run it after adding a metric or a column."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text()


def test_a_step_line_puts_each_metrics_summary_where_it_did() -> None:
    """The latencies' summaries, then the rates', in catalogue order: the record's key order is unchanged."""
    names = [m.name for m in measures.line_metrics()]
    kinds = [measures.metric(n).kind for n in names]
    assert kinds == sorted(kinds, key=("latency", "rate").index)
    assert replace(probe_metric(), name="x_ms").stem == "x"

"""``ramp report --format csv|json|md|png|svg``: each format from a real record, several records, bad input.

The real record (tests/fixtures/report/demo-h200-10-steps.jsonl) was made by
``ramp demo --headless --steps 1,2,4,8,16,32,64,128,256,384 --step-seconds 5 --warmup 1
--gpu-usd-per-hour 3.5 --tag gpu=H200 --out ...``: ten steps with stored HDR histograms, server telemetry,
GPU-hour pricing, a knee at 128 streams and a last step that broke the SLO. Synthetic records
(``analysis_fakes``) give the cases a demo does not: errors, repeats, no step at all.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import sys
from pathlib import Path

import jsonschema
import pytest
from analysis_fakes import Fig, header_with, write_record

from loadgen.analysis.curves import CurvePoint, curve_of, knee_of, percentile_series
from loadgen.analysis.reports import load_report_run
from loadgen.analysis.runs import LevelKey
from loadgen.analysis.steprows import RUN_COLUMNS, STEP_COLUMNS
from loadgen.cli.commands import main as cli_main
from loadgen.report import report_main
from loadgen.report.tables import SCHEMA_PATH

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "tests" / "fixtures" / "report" / "demo-h200-10-steps.jsonl"
DEMO_STEPS = 10


def run_report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_main(["report", *args])
    out, err = capsys.readouterr()
    return code, out, err


# ---- CSV ------------------------------------------------------------------------------------------------


def test_csv_round_trips_one_row_per_step_with_every_column(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_report(capsys, str(DEMO), "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == DEMO_STEPS
    names = set(rows[0])
    assert {c.name for c in STEP_COLUMNS} <= names and {name for name, _d, _r in RUN_COLUMNS} <= names
    lines = [json.loads(x) for x in DEMO.read_text(encoding="utf-8").splitlines()]
    steps = [x for x in lines if x["type"] == "step"]
    for row, line in zip(rows, steps, strict=True):
        assert int(row["step"]) == line["index"] + 1 and int(row["level"]) == line["level"]
        assert float(row["out_tok_s"]) == line["out_tok_s"]  # the record's value, unrounded
        assert float(row["ttft_p95_ms"]) == line["pct"]["ttft_ms"]["p95"]
        assert float(row["server_kv_usage_max"]) == line["server"]["kv_usage_max"]
        assert row["record"] == str(DEMO) and row["model"] == "sim-llama-8b" and row["tag_gpu"] == "H200"
    best = [row["step"] for row in rows if row["best"] == "true"]
    assert best == ["8"]
    assert rows[-1]["slo_met"] == "false" and "TTFT p95" in rows[-1]["slo_failures"]
    assert float(rows[0]["cost_gpu_usd_per_1m_out"]) > 0 and rows[0]["cost_api_usd"] == ""  # unknown: empty


def test_csv_of_several_records_names_the_record_on_each_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_record(tmp_path / "a.jsonl", [Fig(level=1), Fig(level=8, errors=3)])
    b = write_record(tmp_path / "b.jsonl", [Fig(level=4)], header_with(tags={"dtype": "fp8"}))
    code, out, _err = run_report(capsys, str(a), str(b), "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["record"], r["step"]) for r in rows] == [(str(a), "1"), (str(a), "2"), (str(b), "1")]
    assert (
        rows[1]["errors"] == "3" and rows[1]["errors_http_status"] == "3" and rows[1]["errors_connect"] == "0"
    )
    # a tag one record has: its column, empty on the other's rows
    assert [r["tag_dtype"] for r in rows] == ["", "", "fp8"]


# ---- JSON -------------------------------------------------------------------------------------------------


def validate(document: object) -> None:
    """Against report_schema.json, by a real JSON Schema validator (draft 2020-12); the schema first."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)


def test_json_validates_against_its_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = write_record(tmp_path / "empty.jsonl", [], end=False)
    repeats = write_record(
        tmp_path / "rep.jsonl", [Fig(level=8, out_tok_s=v) for v in (990.0, 1000.0, 1030.0)]
    )
    code, out, err = run_report(capsys, str(DEMO), str(empty), str(repeats), "--format", "json")
    assert code == 0, err
    summary = json.loads(out)
    validate(summary)
    demo, nothing, repeated = summary["records"]
    assert demo["best_step"] == 8 and demo["best"]["level"] == 128 and demo["end"]["state"] == "finished"
    assert demo["knee"]["level"] == "128 streams" and demo["knee"]["steps"] == [8]
    assert len(demo["steps"]) == DEMO_STEPS and demo["conditions"]["tag_gpu"] == "H200"
    assert nothing["steps"] == [] and nothing["best_step"] is None and nothing["end"] is None
    assert repeated["repeats"][0]["figures"]["out_tok_s"] == {
        "median": 1000.0,
        "min": 990.0,
        "max": 1030.0,
        "n": 3,
    }


def test_the_schema_names_every_step_column_with_its_type() -> None:
    """A column added, renamed or retyped without the schema fails here: the schema is the contract."""
    step = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["$defs"]["step"]
    assert list(step["properties"]) == [c.name for c in STEP_COLUMNS]
    for column in STEP_COLUMNS:
        declared = step["properties"][column.name]["type"]
        assert declared == ([column.kind, "null"] if column.nullable else column.kind), column.name


def test_validator_rejects_what_the_schema_forbids() -> None:
    summary = {"report_schema": 1, "generator": "x", "records": [], "extra": 1}
    with pytest.raises(jsonschema.ValidationError, match="'extra' was unexpected"):
        validate(summary)
    summary = {"report_schema": 1, "generator": "x", "records": [{"record": "a.jsonl"}]}
    with pytest.raises(jsonschema.ValidationError, match="'label' is a required property"):
        validate(summary)


# ---- Markdown --------------------------------------------------------------------------------------------


def test_markdown_is_a_github_table_one_row_per_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = run_report(capsys, str(DEMO), "--format", "md")
    assert code == 0
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert table[0].startswith("| step | level | ok | err | out (tok/s) |")
    assert set(table[1].replace("|", "").split()) == {":---", "---:"}
    assert len(table) == 2 + DEMO_STEPS
    assert table[2 + 7].startswith("| 8\\* | 128 |")  # the best step starred (escaped for Markdown)
    assert "- best under SLO: step 8, 128 streams, 8,241 out tok/s" in out
    assert "\n  - step 10: load worker waited for a CPU" in out  # a client-bound step's reason, nested
    cells = {len(row.replace("\\|", "").split("|")) for row in table}
    assert len(cells) == 1  # every row has the header's columns


def test_markdown_escapes_a_pipe_in_a_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_record(tmp_path / "a.jsonl", [Fig(level=1)], header_with(tags={"note": "a|b"}))
    code, out, _err = run_report(capsys, str(path), "--format", "md")
    assert code == 0 and "note=a\\|b" in out


def test_plotted_formats_without_matplotlib_say_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    for fmt in ("html", "png", "svg"):
        code, out, err = run_report(capsys, str(DEMO), "--format", fmt, "-o", str(tmp_path / f"x.{fmt}"))
        assert code == 2 and out == ""
        assert (
            err
            == f"ramp report: --format {fmt} draws with matplotlib, which is not installed: pip install 'llm-ramp[report]'\n"
        )
    assert run_report(capsys, str(DEMO), "--format", "csv")[0] == 0  # the rest need no plotting


# ---- bad input and output ------------------------------------------------------------------------------


def test_bad_records_get_one_line_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.jsonl"
    assert run_report(capsys, str(DEMO), str(missing), "--format", "csv") == (
        2,
        "",
        f"ramp report: {missing}: no such file\n",
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        DEMO.read_text(encoding="utf-8").splitlines()[0] + "\n{oops\n" + '{"type":"event"}\n',
        encoding="utf-8",
    )
    code, out, err = run_report(capsys, str(bad), "--format", "json")
    assert code == 2 and out == "" and err.startswith(f"ramp report: {bad} line 2: not JSON")
    damaged = tmp_path / "damaged.jsonl"
    lines = DEMO.read_text(encoding="utf-8").splitlines()
    step = json.loads(lines[3])
    step["hists"]["ttft_ms"] = "bm90IGEgaGlzdG9ncmFt"
    damaged.write_text("\n".join([*lines[:3], json.dumps(step), *lines[4:]]) + "\n", encoding="utf-8")
    code, out, err = run_report(capsys, str(damaged), "--format", "html")
    assert code == 2 and out == ""
    assert err.startswith(
        f"ramp report: {damaged} line 4: step line 3 is damaged: histogram 'ttft_ms' cannot be decoded"
    )
    for text in (err,):
        assert text.count("\n") == 1 and "Traceback" not in text


def test_unwritable_output_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    target = blocker / "report.csv"  # a directory that is a file
    code, out, err = run_report(capsys, str(DEMO), "-o", str(target))
    assert code == 2 and out == "" and err == f"ramp report: cannot write {target}: Not a directory\n"
    code, _out, err = run_report(capsys, str(DEMO), "-o", str(tmp_path / "no-such-dir" / "r.json"))
    assert code == 2 and "No such file or directory" in err


def test_text_is_still_the_default_and_report_main_takes_one_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert report_main(str(DEMO)) == 0
    out = capsys.readouterr().out
    assert out.startswith("run      ") and "best under SLO: step 8, 128 streams, 8,241 out tok/s" in out
    assert "end      finished" in out
    assert cli_main(["report", str(DEMO), str(DEMO)]) == 0
    both = capsys.readouterr().out
    assert both.startswith(f"== A: {DEMO}\nrun      ") and f"\n== B: {DEMO}\nrun      " in both


# ---- the numbers behind the plots ---------------------------------------------------------------------------


def _point(load: float, out: float, ttft: float) -> CurvePoint:
    return CurvePoint(LevelKey("closed", load), (int(load),), out, None, {"ttft_p95_ms": ttft}, True, False)


def test_knee_is_where_latency_outgrows_throughput() -> None:
    bent = [
        _point(1, 100, 20),
        _point(2, 200, 21),
        _point(4, 390, 23),
        _point(8, 600, 40),
        _point(16, 640, 900),
    ]
    assert knee_of(bent) == 3
    flat = [_point(1, 100, 20), _point(2, 200, 22), _point(4, 400, 21), _point(8, 800, 23)]
    assert knee_of(flat) is None  # latency never rises 1.5x past any point
    assert knee_of(bent[:2]) is None  # too few points


def test_percentiles_come_from_the_stored_histograms() -> None:
    report = load_report_run(str(DEMO), "A")
    line = report.run.lines[7]
    series = dict(percentile_series(line, "ttft_ms"))
    assert series[95.0] == line["pct"]["ttft_ms"]["p95"] and series[50.0] == line["pct"]["ttft_ms"]["p50"]
    values = list(series.values())
    assert values == sorted(values) and values[-1] == pytest.approx(line["pct"]["ttft_ms"]["max"], rel=1e-3)
    assert max(series) == 100.0 and 99.9 not in series  # 114 samples do not resolve p99.9
    assert [p.level.load for p in curve_of(report)] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 384]


def test_the_docs_document_every_csv_column() -> None:
    page = (ROOT / "docs" / "records.md").read_text(encoding="utf-8")
    section = page.split("## Reports", 1)[1].split("\n## ", 1)[0]
    names = [c.name for c in STEP_COLUMNS] + [name for name, _d, _r in RUN_COLUMNS]
    missing = [n for n in names if f"`{n}`" not in section and not _grouped(n, section)]
    assert not missing, f"docs/records.md's Reports section lacks columns: {missing}"


def _grouped(name: str, section: str) -> bool:
    """Columns documented as a group: ``errors_<kind>``, ``server_<key>``, ``<stem>_<point>_<unit>``."""
    prefixes = (
        "errors_",
        "server_",
        "ttft_",
        "ttfat_",
        "reasoning_",
        "ttftc_",
        "tool_decode_",
        "itl_",
        "decode_",
        "answer_decode_",
        "e2e_",
        "lag_",
    )
    return any(name.startswith(p) and f"`{p}" in section for p in prefixes)


def test_a_record_without_steps_is_reported_but_has_no_curve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = write_record(tmp_path / "empty.jsonl", [], end=False)
    code, out, err = run_report(capsys, str(empty), "--format", "png", "-o", str(tmp_path / "c.png"))
    assert (code, out) == (
        2,
        "",
    ) and err == "ramp report: no finished step in any record: no curve to draw as png\n"
    code, out, _err = run_report(capsys, str(empty))
    assert code == 0 and "no finished step" in out and "end      no end line" in out
    if importlib.util.find_spec("matplotlib") is not None:
        code, out, _err = run_report(capsys, str(empty), "--format", "html")
        assert code == 0 and "<svg" not in out and "no finished step" in out

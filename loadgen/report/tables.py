"""The report as tables for other programs and for reviews: CSV (one row per step, every figure and
condition), JSON (the summary a CI job reads, its schema in ``report_schema.json``) and Markdown (the step
table for a pull request).

CSV and JSON carry the record's own values, unrounded (``loadgen.analysis.steprows`` names the columns);
Markdown shows the console's step table, numbers written by ``loadgen.format``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from loadgen.analysis.curves import LATENCIES, curve_of, knee_of
from loadgen.analysis.diagnosis import diagnosis_line
from loadgen.analysis.figures import REPEAT_FIGURES
from loadgen.analysis.quality import quality_line
from loadgen.analysis.reports import ReportRun
from loadgen.analysis.runs import levels_of, spread
from loadgen.analysis.steprows import condition_values, step_rows, table_rows
from loadgen.analysis.ttft_split import SPLIT_HEADING, split_line
from loadgen.format import csv_text
from loadgen.record import ramp_version
from loadgen.report.schema import BEST_KEYS
from loadgen.report.text import header_lines, repeat_rows, table_cells, verdict_lines

__all__ = ["REPORT_SCHEMA", "SCHEMA_PATH", "csv_report", "json_report", "json_summary", "markdown_report"]

REPORT_SCHEMA = 1  # bump when a key changes meaning or goes away; new keys keep the number
SCHEMA_PATH = Path(__file__).with_name("report_schema.json")


def _cell(value: object) -> object:
    """A CSV cell: empty for unknown, true/false for booleans, numbers at full precision, text that a
    spreadsheet would run as a formula (a tag, a mark, a server's finish_reason) neutralised."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return csv_text(value)


def csv_report(reports: Sequence[ReportRun]) -> str:
    """One row per step of every record, the run's conditions on each; columns in docs/records.md."""
    fields, rows = table_rows(reports)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, restval="", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _cell(value) for key, value in row.items()})
    return buffer.getvalue()


# ---- JSON ---------------------------------------------------------------------------------------------


def _knee(report: ReportRun) -> dict[str, object] | None:
    points = curve_of(report)
    at = knee_of(points)
    if at is None:
        return None
    point = points[at]
    return {
        "level": point.level.label,
        "steps": list(point.steps),
        "out_tok_s": point.out_tok_s,
        **{lat.key: point.latency_ms.get(lat.key) for lat in LATENCIES},
    }


def _repeats(report: ReportRun) -> list[dict[str, object]]:
    steps, lines = report.run.steps, report.run.lines
    out = []
    for level in levels_of(steps).values():
        if level.repeats <= 1:
            continue
        figures = {}
        for figure in REPEAT_FIGURES:
            found = spread(figure.value(steps[at], lines[at], None) for at in level.at)
            figures[figure.key] = None if found is None else found.as_dict()
        out.append(
            {"level": level.key.label, "n": level.repeats, "left_out": level.left_out, "figures": figures}
        )
    return out


def _end(report: ReportRun) -> dict[str, object] | None:
    end = report.end
    if end is None:
        return None
    return {"state": str(end.get("state", "")), "message": str(end.get("message") or "")}


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _record_summary(report: ReportRun) -> dict[str, object]:
    rows = step_rows(report)
    best = rows[report.best] if report.best is not None else None
    header = report.run.header
    conditions = condition_values(report)
    conditions.pop("record")
    marks = [
        {"elapsed_s": _seconds(m.get("elapsed_s")), "note": str(m.get("note", ""))} for m in report.marks
    ]
    return {
        "record": report.run.path,
        "label": report.run.label,
        "conditions": conditions,
        "slo": header.get("slo") if isinstance(header.get("slo"), Mapping) else None,
        "pricing": header.get("pricing") if isinstance(header.get("pricing"), Mapping) else None,
        "best_step": None if best is None else best["step"],
        "best": None if best is None else {key: best[key] for key in BEST_KEYS},
        "knee": _knee(report),
        "end": _end(report),
        "truncated": report.truncated,
        "marks": marks,
        "steps": rows,
        "repeats": _repeats(report),
    }


def json_summary(reports: Sequence[ReportRun]) -> dict[str, object]:
    """The summary object (``report_schema.json`` describes it)."""
    return {
        "report_schema": REPORT_SCHEMA,
        "generator": f"llm-ramp {ramp_version()}",
        "records": [_record_summary(report) for report in reports],
    }


def json_report(reports: Sequence[ReportRun]) -> str:
    return json.dumps(json_summary(reports), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# ---- Markdown -----------------------------------------------------------------------------------------


def _md_escape(text: str) -> str:
    """Markdown's table and emphasis characters escaped, and HTML (which Markdown passes through raw: a
    ``<script>`` in a tag or a server's text) written as entities."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    """A GitHub table: the first ``left`` columns left-aligned, numbers right-aligned."""
    align = [":---" if at < left else "---:" for at in range(len(header))]
    lines = ["| " + " | ".join(_md_escape(h) for h in header) + " |", "| " + " | ".join(align) + " |"]
    lines.extend("| " + " | ".join(_md_escape(cell) for cell in row) + " |" for row in rows)
    return lines


def _md_item(line: str) -> str:
    """A verdict line as a list item; one indented under another (a client-bound step's reason) nested."""
    return ("  - " if line.startswith("    ") else "- ") + _md_escape(line.strip())


def _md_record(report: ReportRun, heading: bool) -> list[str]:
    steps = report.run.steps
    out = [f"### `{report.run.path}`", ""] if heading else []
    out += [f"- {_md_escape(line.split(None, 1)[0])}: {_md_escape(line.split(None, 1)[1])}"
            for line in header_lines(report.run.header) if len(line.split(None, 1)) == 2]  # fmt: skip
    out.append("")
    if not steps:
        return [*out, "no finished step", ""]
    columns, rows = table_cells(steps, report.best, report.costs, report.task)
    names = [f"{name} ({unit})" if unit else name for name, unit in columns]
    out += _md_table(names, rows)
    out += ["", *(_md_item(line) for line in verdict_lines(steps, report.best))]
    limits = [f"step {s.index + 1} ({s.level}): {diagnosis_line(s.diagnosis)}" for s in steps if s.diagnosis]
    if limits:
        out += ["", "Why each step stops there (the diagnosis):", "", *(_md_item(line) for line in limits)]
    splits = [f"step {s.index + 1} ({s.level}): {split_line(s.ttft_split)}" for s in steps if s.ttft_split]
    if splits:
        out += ["", f"{SPLIT_HEADING}:", "", *(_md_item(line) for line in splits)]
    answers = [f"step {s.index + 1} ({s.level}): {quality_line(s.quality)}" for s in steps if s.quality]
    if answers:
        out += ["", "Answers under load (agreement with the reference):", "", *(_md_item(a) for a in answers)]
    names_r, rows_r = repeat_rows(steps)
    if rows_r:
        out += [
            "",
            "Repeats, median (min–max) over each level's clean steps:",
            "",
            *_md_table(names_r, rows_r, 2),
        ]
    return [*out, ""]


def markdown_report(reports: Sequence[ReportRun]) -> str:
    """The step table of each record, its conditions above it and the verdict below, for a PR."""
    lines = ["## llm-ramp report", ""]
    for report in reports:
        lines += _md_record(report, heading=True)
    return "\n".join(lines)

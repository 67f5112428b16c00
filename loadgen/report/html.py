"""``ramp report --format html``: one self-contained page, nothing fetched when it is viewed.

The page: the throughput–latency curve (every record overlaid), throughput and decode speed by level, then
for each record its conditions, the step table (the console's columns, best starred), the verdict, the
repeats, each step's limit (the diagnosis) and TTFT split, the answer probes' agreement per step
(``--quality``), each step's TTFT and decode percentiles from the stored histograms, errors by kind and the
server's figures per step. Figures are matplotlib SVG inline; the style is one ``<style>`` element; there
is no script. Every text from a record is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from loadgen.analysis.conditions import show
from loadgen.analysis.diagnosis import diagnosis_line
from loadgen.analysis.quality import quality_line
from loadgen.analysis.reports import ReportRun
from loadgen.analysis.steprows import condition_values
from loadgen.analysis.ttft_split import SPLIT_HEADING, split_line
from loadgen.format import fmt_count, fmt_num_wide
from loadgen.record import ramp_version
from loadgen.report import plots
from loadgen.report.text import error_kinds, header_lines, repeat_rows, table_cells, verdict_lines
from loadgen.snapshot import StepSummary

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["html_report"]

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: #1d1d1f;
       margin: 24px auto; max-width: 1480px; padding: 0 16px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin: 18px 0 6px; } .sub { color: #666; margin: 0 0 12px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 6px 0 10px; }
table.steps { font-size: 12.5px; }
th, td { padding: 3px 7px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f5f5f7; font-weight: 600; vertical-align: bottom; } th small { font-weight: 400; color: #666; }
td:first-child, th:first-child, .text { text-align: left; } tr.best td { background: #fff6d5; font-weight: 600; }
table.kv td { text-align: left; } table.kv td:first-child { color: #666; }
.scroll { overflow-x: auto; } .figure svg { width: 100%; height: auto; display: block; }
ul.verdict { margin: 4px 0 10px; padding-left: 20px; } .note { color: #666; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _svg(fig: Figure | None) -> str:
    if fig is None:
        return ""
    return f'<div class="figure">{plots.to_svg(fig)}</div>'


def _table(
    head: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[str]],
    best: int | None = None,
    css: str = "",
    text: frozenset[int] = frozenset(),
) -> str:
    """A table; ``text`` names the columns of words (left-aligned; numbers are right-aligned)."""

    def align(at: int) -> str:
        return ' class="text"' if at in text else ""

    cells = "".join(
        f"<th{align(at)}>{_e(name)}" + (f"<br><small>{_e(unit)}</small>" if unit else "") + "</th>"
        for at, (name, unit) in enumerate(head)
    )
    body = []
    for at, row in enumerate(rows):
        mark = ' class="best"' if at == best else ""
        body.append(
            f"<tr{mark}>" + "".join(f"<td{align(n)}>{_e(cell)}</td>" for n, cell in enumerate(row)) + "</tr>"
        )
    return (
        f'<div class="scroll"><table class="{css}"><thead><tr>{cells}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _conditions(report: ReportRun) -> str:
    """The header's summary lines, then every condition the record has a value for."""
    rows = [line.split(None, 1) for line in header_lines(report.run.header)]
    summary = "".join(
        f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in (r for r in rows if len(r) == 2)
    )
    known = {k: v for k, v in condition_values(report).items() if v not in (None, "") and k != "record"}
    detail = "".join(f"<tr><td>{_e(k)}</td><td>{_e(show(v))}</td></tr>" for k, v in known.items())
    return (
        f'<table class="kv">{summary}</table>'
        f'<details><summary>every condition ({len(known)})</summary><table class="kv">{detail}</table></details>'
    )


def _steps(report: ReportRun) -> str:
    steps = report.run.steps
    if not steps:
        return '<p class="note">no finished step</p>'
    head, rows = table_cells(steps, report.best, report.costs, report.task)
    verdict = _verdict(verdict_lines(steps, report.best))
    out = _table(head, rows, report.best, "steps") + f'<ul class="verdict">{verdict}</ul>'
    names, repeat = repeat_rows(steps)
    if repeat:
        out += "<h3>Repeats: median (min–max) over each level's clean steps</h3>"
        out += _table([(name, "") for name in names], repeat)
    return out


def _verdict(lines: Sequence[str]) -> str:
    """The verdict lines as a list; a line indented under another (a client-bound step's reason) nested."""
    items: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("    ") and items:
            items[-1][1].append(line.strip())
        else:
            items.append((line.strip(), []))
    html_items = []
    for text, nested in items:
        inner = "".join(f"<li>{_e(n)}</li>" for n in nested)
        html_items.append(f"<li>{_e(text)}" + (f"<ul>{inner}</ul>" if inner else "") + "</li>")
    return "".join(html_items)


def _errors(report: ReportRun) -> str:
    steps = report.run.steps
    with_errors = [s for s in steps if s.stats.error_count]
    if not with_errors:
        return '<p class="note">no errors in any step</p>'
    rows = [
        [
            str(s.index + 1),
            fmt_count(s.stats.error_count),
            error_kinds(s.stats.errors, 9),
            _latest(s),
        ]
        for s in with_errors
    ]
    head = [("step", ""), ("errors", ""), ("by kind", ""), ("latest message", "")]
    table = _table(head, rows, text=frozenset({2, 3}))
    return _svg(plots.errors_figure(report)) + table


def _latest(step: StepSummary) -> str:
    """What the server last said for the step's most frequent error kind (scrubbed in the record)."""
    most = max(step.stats.errors, key=lambda kind: step.stats.errors[kind])
    text = step.latest_errors.get(most, "")
    return f"{most}: {text[:160]}" if text else ""


def _server(report: ReportRun) -> str:
    steps = report.run.steps
    panels = [
        p for p in plots.SERVER_PANELS if any(s.server and s.server.get(p[0]) is not None for s in steps)
    ]
    if not panels:
        return '<p class="note">no server or GPU telemetry in this record (a missing source is never shown as 0)</p>'
    head = [("step", ""), ("level", ""), *((title, "") for _key, title, _scale in panels)]
    rows = []
    for step in steps:
        cells = [str(step.index + 1), plots.step_load(step)]
        for key, _title, scale in panels:
            value = step.server.get(key) if step.server else None
            cells.append(fmt_num_wide(None if value is None else float(value) * scale))
        rows.append(cells)
    return _svg(plots.server_figure(report)) + _table(head, rows)


def _step_list(report: ReportRun, head: str, css: str, said: Callable[[StepSummary], str]) -> str:
    """A list of one line per step that has one (``said`` gives '' for a step without), under ``head``;
    '' when no step has a line."""
    items = [
        f"<li>step {s.index + 1} ({_e(plots.step_load(s))}): {_e(line)}</li>"
        for s in report.run.steps
        if (line := said(s))
    ]
    if not items:
        return ""
    return f'<h3>{_e(head)}</h3><ul class="{css}">{"".join(items)}</ul>'


def _answers(report: ReportRun) -> str:
    """Each probed step's answers (--quality): agreement, probes, prefix, tasks, failed probes; '' without."""
    head = "Answers under load (agreement with the reference)"
    return _step_list(report, head, "answers", lambda s: quality_line(s.quality) if s.quality else "")


def _limits(report: ReportRun) -> str:
    """Each diagnosed step's limit and the TTFT split, as the Markdown report says them; '' without."""
    limits = _step_list(
        report,
        "Why each step stops there (the diagnosis)",
        "limits",
        lambda s: diagnosis_line(s.diagnosis) if s.diagnosis else "",
    )
    splits = _step_list(
        report, SPLIT_HEADING, "splits", lambda s: split_line(s.ttft_split) if s.ttft_split else ""
    )
    return limits + splits


def _record(report: ReportRun, many: bool) -> str:
    title = f"{report.run.label} · {report.run.path}" if many else report.run.path
    parts = [
        f'<section class="record"><h2>{_e(title)}</h2>',
        "<h3>Conditions</h3>",
        _conditions(report),
        "<h3>Steps</h3>",
        _steps(report),
        _limits(report),
        _answers(report),
    ]
    if report.run.steps:
        figure = plots.percentile_figure(report)
        parts += ["<h3>TTFT and decode speed by percentile, per step</h3>"]
        parts.append(_svg(figure) if figure is not None else '<p class="note">no stored histograms</p>')
        parts += [
            "<h3>Errors by kind</h3>",
            _errors(report),
            "<h3>Server and GPU, per step</h3>",
            _server(report),
        ]
    parts.append(_end(report))
    return "\n".join(parts) + "</section>"


def _end(report: ReportRun) -> str:
    notes = [f"mark at {_e(m.get('elapsed_s', ''))} s: {_e(m.get('note', ''))}" for m in report.marks]
    end = report.end
    if end is None:
        notes.append("no end line: the run was interrupted (finished steps are above)")
    else:
        notes.append(
            f"ended: {_e(end.get('state', ''))}" + (f" — {_e(end['message'])}" if end.get("message") else "")
        )
    if report.truncated:
        notes.append("the last line was cut short (run killed mid-write) and was skipped")
    return '<p class="note">' + "<br>".join(notes) + "</p>"


def html_report(reports: Sequence[ReportRun]) -> str:
    """The whole page."""
    many = len(reports) > 1
    names = ", ".join(r.run.path for r in reports)
    body = [f'<h1>llm-ramp report</h1><p class="sub">{_e(names)} · llm-ramp {_e(ramp_version())}</p>']
    if any(r.run.steps for r in reports):
        overlaid = " (records overlaid)" if many else ""
        body += [f"<h2>Throughput–latency{overlaid}</h2>", _svg(plots.curve_figure(reports))]
        body += [
            "<h3>Throughput and per-request decode speed by level</h3>",
            _svg(plots.level_figure(reports)),
        ]
    body += [_record(report, many) for report in reports]
    title = f"llm-ramp report · {names}"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>\n'
        f"<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )

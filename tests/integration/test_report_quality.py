"""The reports' answer probes (issue 34): a record whose steps carry ``quality`` gets an "agree" column
(agreement with its 95 % interval) in the Markdown, HTML and text step tables, a "tasks ok" column where a
step checked verifiable tasks, and each probed step's answers line (probes, prefix, tasks, failed probes)
in the HTML page as in the Markdown; a record without probes has none of them."""

from __future__ import annotations

import json
from pathlib import Path

from loadgen.analysis.quality import QualityBook
from loadgen.analysis.reports import load_report_run
from loadgen.report.html import html_report
from loadgen.report.tables import markdown_report
from loadgen.report.text import format_step_table, table_cells

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "fixtures" / "report" / "demo-h200-10-steps.jsonl"


def probed_record(tmp_path: Path) -> tuple[Path, list[dict[str, object]]]:
    """The demo record with answer probes in its first three steps: 1.00, 0.50 with tasks, 0.00."""
    book = QualityBook()
    qualities = [
        book.step([(0, "alpha"), (1, "beta"), (0, "alpha")]),
        book.step([(0, "alpha"), (1, "bXta"), (0, "gamma"), (1, "beta"), (1, None)]),
        book.step([(0, "x"), (1, "y")]),
    ]
    assert all(q is not None for q in qualities)
    qs: list[dict[str, object]] = [dict(q or {}) for q in qualities]
    qs[1].update(tasks_ok=0.75, tasks_ok_lo=0.3, tasks_ok_hi=0.95, tasks_n=4)
    lines = [json.loads(x) for x in DEMO.read_text(encoding="utf-8").splitlines()]
    steps = [x for x in lines if x["type"] == "step"]
    for line, q in zip(steps, qs, strict=False):
        line["quality"] = q
    out = tmp_path / "probed.jsonl"
    out.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return out, qs


def test_markdown_and_html_carry_the_agreement_column_and_the_answers(tmp_path: Path) -> None:
    path, qs = probed_record(tmp_path)
    report = load_report_run(str(path), "p")
    head, rows = table_cells(report.run.steps, report.best, report.costs, report.task)
    names = [name for name, _unit in head]
    agree, tasks = names.index("agree"), names.index("tasks ok")
    assert names.index("SLO") == tasks + 1 == agree + 2  # before the verdict
    assert rows[0][agree] == f"1.00 ({qs[0]['agree_lo']:.2f}–1.00)"
    assert rows[1][agree] == f"0.50 ({qs[1]['agree_lo']:.2f}–{qs[1]['agree_hi']:.2f})"
    assert rows[2][agree].startswith("0.00 (0.00–") and rows[3][agree] == ""  # step 4: no probes
    assert [r[tasks] for r in rows[:3]] == ["", "0.75 (0.30–0.95)", ""]
    md = markdown_report([report])
    assert "| agree | tasks ok | SLO |" in md.replace("\\", "")
    assert f"| 0.50 ({qs[1]['agree_lo']:.2f}–{qs[1]['agree_hi']:.2f}) | 0.75 (0.30–0.95) |" in md
    assert "· tasks ok 0.75 (0.30–0.95) of 4 · 1 failed" in md
    page = html_report([report])
    assert "<h3>Answers under load (agreement with the reference)</h3>" in page
    assert "step 2 (2): agreement 0.50 (" in page and "4 probes · prefix 2.5 chars (median)" in page
    assert f"<td>0.50 ({qs[1]['agree_lo']:.2f}–{qs[1]['agree_hi']:.2f})</td>" in page.replace(
        '<td class="num">', "<td>"
    )
    text = format_step_table(report.run.steps, report.best, width=400)
    assert "agree" in text.splitlines()[0] and "0.50 (" in text


def test_no_quality_columns_without_probes() -> None:
    report = load_report_run(str(DEMO), "d")
    head, _rows = table_cells(report.run.steps, report.best, report.costs, report.task)
    assert "agree" not in [name for name, _unit in head] and "tasks ok" not in [n for n, _u in head]
    assert "Answers under load" not in html_report([report]) + markdown_report([report])

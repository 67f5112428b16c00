"""The reports say each step's TTFT split (issue 33) as the console's step detail does: one line per step in
the Markdown and HTML reports ("client 299 ms = server 296 ms (queue 288 ms + prefill 7.06 ms) + outside
3.00 ms · means, exact; server TTFT p95 in its bucket 250 ms–500 ms", from ``split_line``), the HTML page
also each step's limit, the text report (``ramp report FILE``) both under its table, and CSV/JSON the
bounds of the server's buckets its TTFT p50 and p95 lie in; a record without a split has none of them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from loadgen.analysis.reports import load_report_run
from loadgen.analysis.ttft_split import SPLIT_HEADING, split_line
from loadgen.report.html import html_report
from loadgen.report.tables import csv_report, json_summary, markdown_report
from loadgen.report.text import text_report

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "fixtures" / "report" / "demo-h200-10-steps.jsonl"

QUEUEING = {
    "kind": "queueing",
    "confidence": "high",
    "evidence": ["12 waiting", "TTFT p95 ×4 since 32 streams", "decode flat"],
    "first_checks": ["max-num-seqs (the batch limit)", "KV capacity"],
}
SPLIT = {
    "client": {"n": 40, "mean_ms": 298.6, "p50_ms": 290.0, "p95_ms": 400.0},
    "server": {
        "n": 40,
        "mean_ms": 295.6,
        "p50_ms": 280.0,
        "p50_bucket_ms": [250.0, 500.0],
        "p95_ms": 380.0,
        "p95_bucket_ms": [250.0, 500.0],
    },
    "queue": {"n": 40, "mean_ms": 288.5},
    "prefill": {"n": 40, "mean_ms": 7.06},
    "outside": {"mean_ms": 3.0},
    "method": "...",
}
# SGLang's: no prefill part, and its p95 past the last finite bound (the +Inf bucket)
OPEN = {
    "client": {"n": 9, "mean_ms": 5100.0},
    "server": {
        "n": 9,
        "mean_ms": 5000.0,
        "p50_bucket_ms": [1000.0, 10000.0],
        "p95_bucket_ms": [10000.0, None],
    },
    "queue": {"n": 9, "mean_ms": 4000.0},
    "outside": {"mean_ms": 100.0},
}
SAID = (
    "client 299 ms = server 296 ms (queue 288 ms + prefill 7.06 ms) + outside 3.00 ms"
    " · means, exact; server TTFT p95 in its bucket 250 ms–500 ms"
)


def split_record(tmp_path: Path) -> Path:
    """The demo record with a split and a diagnosis on step 2 and an open-ended split on step 3."""
    lines = [json.loads(x) for x in DEMO.read_text(encoding="utf-8").splitlines()]
    steps = [x for x in lines if x["type"] == "step"]
    steps[1].update(ttft_split=SPLIT, diagnosis=QUEUEING)
    steps[2].update(ttft_split=OPEN)
    out = tmp_path / "split.jsonl"
    out.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return out


def test_the_split_line_is_the_consoles_sentence() -> None:
    assert split_line(SPLIT) == SAID
    assert split_line(OPEN) == (
        "client 5.10 s = server 5.00 s (queue 4.00 s) + outside 100 ms"
        " · means, exact; server TTFT p95 in its bucket 10.0 s–∞"
    )


def test_markdown_and_html_say_each_steps_split_and_html_its_limit(tmp_path: Path) -> None:
    report = load_report_run(str(split_record(tmp_path)), "s")
    md = markdown_report([report]).replace("\\", "")
    assert f"{SPLIT_HEADING}:\n\n- step 2 (2): {SAID}\n- step 3 (4): client 5.10 s = server 5.00 s" in md
    assert "- step 2 (2): Limit: queueing — 12 waiting" in md  # the diagnosis, as before
    page = html_report([report])
    assert f"<h3>{SPLIT_HEADING.replace(chr(39), '&#x27;')}</h3>" in page
    assert "<li>step 2 (2): client 299 ms = server 296 ms (queue 288 ms + prefill 7.06 ms)" in page
    assert "server TTFT p95 in its bucket 10.0 s–∞</li>" in page
    assert "<h3>Why each step stops there (the diagnosis)</h3>" in page
    assert "<li>step 2 (2): Limit: queueing — 12 waiting, TTFT p95 ×4 since 32 streams" in page


def test_the_text_report_says_each_steps_limit_and_split_below_its_table(tmp_path: Path) -> None:
    text = text_report(load_report_run(str(split_record(tmp_path)), "s"), width=200).splitlines()
    assert (
        "limit    step 2 (2): Limit: queueing — 12 waiting, TTFT p95 ×4 since 32 streams, decode flat"
        in "\n".join(text)
    )
    assert f"split    step 2 (2): {SAID}" in text
    assert text.index(f"split    step 2 (2): {SAID}") + 1 == next(
        i for i, x in enumerate(text) if x.startswith("split    step 3 (4): ")
    )
    bare = text_report(load_report_run(str(DEMO), "d"), width=200)
    assert "limit    step" not in bare and "split    step" not in bare


def test_csv_and_json_carry_the_server_buckets_of_its_ttft_percentiles(tmp_path: Path) -> None:
    report = load_report_run(str(split_record(tmp_path)), "s")
    rows = list(csv.DictReader(io.StringIO(csv_report([report]))))
    assert (
        rows[1]["ttft_server_p50_bucket_lo_ms"] == "250.0"
        and rows[1]["ttft_server_p95_bucket_hi_ms"] == "500.0"
    )
    assert rows[1]["ttft_server_mean_ms"] == "295.6"
    # the +Inf bucket: its low bound, no high one
    assert (
        rows[2]["ttft_server_p95_bucket_lo_ms"] == "10000.0" and rows[2]["ttft_server_p95_bucket_hi_ms"] == ""
    )
    assert all(rows[0][f"ttft_server_{p}_bucket_{e}_ms"] == "" for p in ("p50", "p95") for e in ("lo", "hi"))
    (record,) = json_summary([report])["records"]  # type: ignore[misc]
    steps = record["steps"]
    assert (
        steps[2]["ttft_server_p50_bucket_hi_ms"] == 10000.0
        and steps[2]["ttft_server_p95_bucket_hi_ms"] is None
    )
    assert steps[0]["ttft_server_p95_bucket_lo_ms"] is None


def test_no_split_lines_without_a_split() -> None:
    report = load_report_run(str(DEMO), "d")
    assert SPLIT_HEADING not in markdown_report([report]) + html_report([report]).replace("&#x27;", "'")
    assert "Why each step stops there" not in html_report([report])

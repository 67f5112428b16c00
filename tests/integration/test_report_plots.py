"""``ramp report``'s curve alone, drawn: PNG and SVG. Integration tier, not unit as the other formats'
tests (tests/unit/analysis/test_report_formats.py): matplotlib's first import in a process with no font cache yet runs
``fc-list``, a process, which the unit tier refuses (CI met it once, when this test ran first on a worker)."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_fakes import Fig, write_record

from loadgen.cli.commands import main as cli_main

pytest.importorskip("matplotlib")

DEMO = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "report" / "demo-h200-10-steps.jsonl"


def report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_main(["report", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_png_and_svg_are_the_curve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from matplotlib.image import imread

    png, svg = tmp_path / "curve.png", tmp_path / "curve.svg"
    assert report(capsys, str(DEMO), "-o", str(png))[0] == 0  # the format from the extension
    pixels = imread(str(png))
    assert pixels.shape[1] > 1500 and (pixels[..., :3] < 0.9).any(axis=-1).mean() > 0.02  # not blank
    other = write_record(tmp_path / "other.jsonl", [Fig(level=1, out_tok_s=100), Fig(level=8, out_tok_s=600)])
    assert report(capsys, str(DEMO), str(other), "--format", "svg", "-o", str(svg))[0] == 0
    text = svg.read_text(encoding="utf-8")
    assert text.startswith("<svg") and "knee: 128 streams" in text and "SLO 1s" in text
    assert (
        "A: demo-h200-10-steps.jsonl" in text and "B: other.jsonl" in text
    )  # overlaid, one legend entry each

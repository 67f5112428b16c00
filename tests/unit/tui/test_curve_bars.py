"""The curve's interval bars (issue 31: "an interval band on ... the curve"): each step's TTFT p95 marker sits
on a dim bar spanning its 95 % interval, rows from the interval's lower end to its upper end in the marker's
column; an interval open above (too few values to bound it) runs dotted to the top; no margins, no bar."""

from __future__ import annotations

from dataclasses import replace

from tui_fakes import make_snapshot

from loadgen.stats import Interval
from tui.curve import BAR, OPEN_BAR, render_curve

WIDTH, HEIGHT = 40, 15


def column_of(lines: list[str], glyph: str) -> set[int]:
    return {line.index(glyph) for line in lines if glyph in line}


def rows_at(lines: list[str], col: int, glyphs: str) -> list[int]:
    return [row for row, line in enumerate(lines) if col < len(line) and line[col] in glyphs]


def test_a_step_sits_on_a_bar_as_tall_as_its_interval() -> None:
    snap = make_snapshot()
    first = snap.steps[0]
    p95 = first.stats.pct("ttft_ms").p95
    assert p95 is not None
    top_p95 = max(s.stats.pct("ttft_ms").p95 or 0.0 for s in snap.steps)
    wide = Interval(p95, p95 * 0.5, min(p95 * 1.5, top_p95), 16, 400, 15, True)
    steps = (replace(first, margins={"ttft_p95_ms": wide}), *snap.steps[1:])
    lines = render_curve(steps, None, "level", WIDTH, HEIGHT).plain.split("\n")
    bare = render_curve(snap.steps, None, "level", WIDTH, HEIGHT).plain.split("\n")
    assert BAR not in "".join(line.split("│", 1)[1] for line in bare[1:-2])  # no margins: no bar
    plot = [line.split("│", 1)[1] if "│" in line else "" for line in lines[1:-2]]  # right of the y axis
    (col,) = column_of(plot, BAR)
    rows = rows_at(plot, col, BAR + "●✕○★")
    assert rows == list(range(rows[0], rows[-1] + 1)) and len(rows) >= 3  # one unbroken span
    # its ends are where the interval's ends are drawn: y_hi spans the plot's rows
    plot_h = HEIGHT - 3
    y_hi = top_p95 * 1.05
    expect_top = plot_h - 1 - round(wide.hi / y_hi * (plot_h - 1))
    expect_low = plot_h - 1 - round(wide.lo / y_hi * (plot_h - 1))
    assert (rows[0], rows[-1]) == (expect_top, expect_low)


def test_an_interval_open_above_runs_dotted_to_the_top() -> None:
    snap = make_snapshot()
    first = snap.steps[0]
    p95 = first.stats.pct("ttft_ms").p95
    assert p95 is not None
    opened = Interval(p95, p95 * 0.8, None, 10, 60, 9, False, "open above", need=400)
    steps = (replace(first, margins={"ttft_p95_ms": opened}), *snap.steps[1:])
    plot = [
        line.split("│", 1)[1] if "│" in line else ""
        for line in render_curve(steps, None, "level", WIDTH, HEIGHT).plain.split("\n")[1:-2]
    ]
    (col,) = column_of(plot, OPEN_BAR)
    rows = rows_at(plot, col, OPEN_BAR)
    assert rows[0] == 0 and BAR not in "".join(plot)

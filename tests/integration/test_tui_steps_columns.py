"""The steps table holds its core columns (issue 21, item 4): level, tok/s, decode p50, TTFT p95, e2e p95
and SLO stay at every width a panel has, whatever the notes say; the notes are cut to the room left, the
optional columns (cost, goodput, TTFT p50, err) give way first."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console
from tui_fakes import judged_steps

from loadgen.report import format_step_table
from tui.steps import render_steps_table

CORE = ("level", "tok/s", "dec p50", "TTFT p95", "e2e p95", "SLO")


def drawn(width: int, steps: tuple[object, ...] | None = None) -> list[str]:
    rows = judged_steps() if steps is None else steps
    table = render_steps_table(rows, 2, 20, width=width)  # type: ignore[arg-type]
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(table)
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [66, 78, 96])
def test_core_columns_stay_and_the_notes_are_cut_to_fit(width: int) -> None:
    # a step both client-bound and cut: the longest notes a step has
    both = tuple(
        replace(s, client_bound=True, carried_share=0.23) if s.index == 3 else s for s in judged_steps()
    )
    lines = drawn(width, both)
    header = lines[0]
    assert all(name in header for name in CORE), header
    assert all(len(line) <= width for line in lines), lines
    row = next(line for line in lines if line.lstrip().startswith("4 "))
    assert "cut 23%" in row  # the cut note first, whole (issue 30), never wrapped onto another line
    assert len([line for line in lines if line.strip()]) == 2 + len(both)  # one line per step


def test_a_wide_panel_keeps_every_column_and_the_notes_whole() -> None:
    lines = drawn(140)
    assert all(name in lines[0] for name in (*CORE, "TTFT p50", "err", "notes"))
    assert any("cut 23%" in line for line in lines)


def test_the_exit_table_and_the_report_mark_a_cut_step() -> None:
    """The console says "cut 23%"; the table printed at exit and by `ramp report` (format_step_table) said
    nothing of it."""
    steps = judged_steps()  # step 4 was cut with 23 % of its requests in flight
    text = format_step_table(list(steps), 2, width=160)
    header, *_ = text.splitlines()
    assert "cut" in header.split()
    row = next(line for line in text.splitlines() if line.lstrip().startswith("4 "))
    assert row.rstrip().endswith("23%"), row
    assert "cut by a key: step 4 (23%)" in text
    clean = format_step_table([s for s in steps if s.carried_share == 0], 2, width=160)
    assert "cut" not in clean.splitlines()[0].split() and "cut by a key" not in clean

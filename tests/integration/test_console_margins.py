"""The console's margins of error (issue 31): a finished step's figure with its 95 % interval as '±6 %' in
the step detail (d: the SLO clause, the rates, a margins block with why an interval is not trusted), the
steps table's '±' column beside TTFT p95, and 'undecided' where an interval straddles a limit; a step
recorded without margins shows none. Pilot on the console fed steps, and an SVG snapshot of the detail."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from textual.pilot import Pilot
from tui_fakes import judged_steps, make_snapshot, text_of
from tui_fakes import make_app as console_on

from loadgen import measures
from loadgen.format import fmt_ms
from loadgen.metrics.slices import figure_name, judge
from loadgen.snapshot import Precision, SLOVerdict, StepSummary
from loadgen.stats import Interval
from tui.app import RampApp
from tui.detail import StepDetail
from tui.format import slo_threshold
from tui.histogram import axis_range
from tui.histogram_panel import pick_view
from tui.margins import margin_pct, margin_text
from tui.panel import SnapshotPanel
from tui.plot import LogScale

TTFT_P95 = figure_name(measures.TTFT_MS, "p95")
TTFT_P99 = figure_name(measures.TTFT_MS, "p99")


def around(value: float, share: float, trusted: bool = True, why: str = "") -> Interval:
    return Interval(value, value * (1 - share), value * (1 + share), 16, 400, 15.0, trusted, why)


def with_margins(step: StepSummary, share: float) -> StepSummary:
    """``step`` with intervals of ``share`` around its own TTFT p95 and out tok/s, and an untrusted p99."""
    ttft = step.stats.pct(measures.TTFT_MS)
    assert ttft.p95 is not None and ttft.p99 is not None and step.stats.out_tok_s is not None
    margins = {
        TTFT_P95: around(ttft.p95, share),
        TTFT_P99: around(ttft.p99, 0.2, trusted=False, why="3 values beyond p99 (8 needed)"),
        "out_tok_s": around(step.stats.out_tok_s, 0.03),
    }
    return replace(step, margins=margins)


def margined_steps() -> tuple[StepSummary, ...]:
    """The judged steps: the first recorded without margins, the others with ±6 %, and the last one's TTFT
    p95 (440 ms) ±15 % against the 500-ms limit, judged undecided by the product's own ``judge``."""
    steps = judged_steps()
    wide = with_margins(replace(steps[-1], stats=steps[2].stats), 0.15)
    verdict = judge(make_snapshot().slo, SLOVerdict(True), wide.margins, wide.window_s)
    return (steps[0], *(with_margins(s, 0.06) for s in steps[1:-1]), replace(wide, verdict=verdict))


def margined_app() -> RampApp:
    return console_on(steps=margined_steps(), best_step=2)[0]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_margin_text_is_the_half_width_as_a_share_of_the_figure() -> None:
    assert margin_text(around(412.0, 0.06)) == "±6 %"
    assert margin_text(around(412.0, 0.004)) == "±0.4 %"
    assert margin_text(around(412.0, 0.2, trusted=False)) == "±20 %?"
    assert margin_text(Interval(412.0, None, None)) == ""
    assert margin_text(None) == ""
    assert margin_pct(0.0004) == "<0.1 %"


async def test_the_step_detail_and_the_steps_table_show_each_figure_with_its_margin() -> None:
    steps = margined_steps()
    app = margined_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        await pilot.press("d")  # the latest step: undecided on its interval
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, StepDetail)
        latest = flat(detail.plain())
        p95 = steps[-1].stats.pct(measures.TTFT_MS).p95
        assert f"TTFT p95 ≤ 500 ms {fmt_ms(p95)} ±15 % ?" in latest  # the clause, its margin, undecided mark
        assert "SLO undecided" in latest
        assert "undecided: TTFT p95 440 (374-506) ms vs 500 ms, ≈" in latest
        assert "tok/s ±3 % · prefill" in latest
        assert "margins of error (95 % intervals, batch means)" in latest
        assert (
            "TTFT p50" not in latest.split("margins of error")[1].split("errors")[0]
        )  # no interval, not shown
        assert "? ttft_p99_ms: 3 values beyond p99 (8 needed)" in latest
        await pilot.press("left", "left")  # step 3: met, its interval under the limit
        await pilot.pause()
        third = flat(detail.plain())
        assert "SLO met" in third and f"{fmt_ms(steps[2].stats.pct(measures.TTFT_MS).p95)} ±6 % ✓" in third
        await pilot.press("left", "left")  # step 1: recorded without margins
        await pilot.pause()
        first = flat(detail.plain())
        assert "step 1" in first and "±" not in first and "margins of error" not in first


async def test_the_steps_table_has_ttft_p95s_margin_where_it_fits_and_the_undecided_verdict() -> None:
    app = margined_app()
    async with app.run_test(size=(200, 50)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        rows = step_rows(text_of(app.screen.query_one("#steps-panel", SnapshotPanel)))
        assert "±" not in rows["1"]  # no margins in its record
        assert "252 ms ±6 %" in rows["2"] and "440 ms ±6 %" in rows["3"]
        assert "undecided" in rows["5"] and "440 ms ±15 %" in rows["5"]
        assert "undecided" not in rows["3"]
        await pilot.resize_terminal(120, 36)  # the margin is the first column to give way
        app.redraw(force=True)
        await pilot.pause()
        narrow = text_of(app.screen.query_one("#steps-panel", SnapshotPanel))
        assert "±" not in narrow and "TTFT p95" in narrow and "undecided" in step_rows(narrow)["5"]


def step_rows(table: str) -> dict[str, str]:
    return {
        line.split()[0].lstrip("★"): flat(line)
        for line in table.splitlines()
        if line.strip().lstrip("★")[:1].isdigit()
    }


def test_step_detail_with_margins_80x24(snap_compare: Any) -> None:
    async def open_view(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, RampApp)
        app.redraw(force=True)
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()

    assert snap_compare(margined_app(), terminal_size=(80, 24), run_before=open_view)


async def test_the_step_window_line_shows_the_live_margin_and_the_time_to_the_precision_target() -> None:
    live = {TTFT_P95: around(412.0, 0.06), "out_tok_s": around(4390.0, 0.03, trusted=False)}
    app = console_on(live_margins=live, precision=Precision(2.0, 38.6))[0]
    async with app.run_test(size=(200, 50)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        control = flat(text_of(app.screen.query_one("#control", SnapshotPanel)))
        assert "TTFT p95 412 ms ±6 % · out ±3 %? · ±2 % in ≈39 s" in control
        await pilot.press("w")  # the rolling window: the step's margins are not its
        app.redraw(force=True)
        await pilot.pause()
        assert "±" not in text_of(app.screen.query_one("#control", SnapshotPanel))
    steady = console_on()[0]  # between windows, or a record without margins: nothing
    async with steady.run_test(size=(200, 50)) as pilot:
        steady.redraw(force=True)
        await pilot.pause()
        assert "±" not in text_of(steady.screen.query_one("#control", SnapshotPanel))


async def test_the_histogram_draws_the_measuring_steps_p95_interval_as_a_band_under_its_marker() -> None:
    """Issue 31: over the step window the TTFT histogram draws the live TTFT p95 interval as ├─┤ on its
    marker row, its caps in the columns of the interval's ends on the panel's own axis; the rolling window
    (not the step's margins) and a step without margins draw none."""
    snapshot = make_snapshot()
    view = pick_view(snapshot, "step", measures.TTFT_MS)
    threshold = slo_threshold(snapshot.slo, measures.TTFT_MS)
    assert view is not None and view.pct.p95 is not None and threshold is not None
    lo, hi = view.pct.p95 * 0.9, view.pct.p95 * 1.12
    live = {TTFT_P95: Interval(view.pct.p95, lo, hi, 16, 400, 15.0, True)}
    app = console_on(live_margins=live)[0]
    async with app.run_test(size=(160, 48)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        panel = app.screen.query_one("#hist-left", SnapshotPanel)
        row = next(line for line in text_of(panel).splitlines() if "▲" in line)
        span = axis_range(view.bins, threshold[0])
        assert span is not None
        scale = LogScale(*span, panel.content_region.width)
        assert row.index("├") == scale.column(lo) and row.index("┤") == scale.column(hi), row
        assert row[scale.column(view.pct.p95)] == "▲"
        await pilot.press("w")  # the rolling window
        app.redraw(force=True)
        await pilot.pause()
        row = next(line for line in text_of(panel).splitlines() if "▲" in line)
        assert "├" not in row and "┤" not in row, row
    steady = console_on()[0]  # between windows, or a record without margins: no band
    async with steady.run_test(size=(160, 48)) as pilot:
        steady.redraw(force=True)
        await pilot.pause()
        panel = steady.screen.query_one("#hist-left", SnapshotPanel)
        row = next(line for line in text_of(panel).splitlines() if "▲" in line)
        assert "├" not in row and "┤" not in row, row

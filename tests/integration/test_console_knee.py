"""The knee search in the console, on a fed snapshot (issue 32): ``f`` asks the range and starts the search,
stops it while it drives and resumes it once the operator took over; the header says what it probes and
why; the curve panel draws the probes, the fit, the SLO line and the bracket (an SVG snapshot). The search
against a real engine and simulator: ``test_console_search.py``."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from textual.pilot import Pilot
from tui_fakes import FakeEngine, make_app, make_snapshot, text_of

from loadgen.config import SLO
from loadgen.observe.snapshot_json import plain, snapshot_from_plain
from loadgen.run.knee import knee
from loadgen.run.protocol import ResumeSearch, StartSearch, StopSearch
from loadgen.snapshot import SearchProbe, SearchView
from loadgen.stats import Interval
from tui.app import RampApp
from tui.panel import SnapshotPanel

# A search over 1:16 against 4 slots: 8 missed by 110 %, 4 met with 78 % room, the operator's 6 missed by
# 40 %, 5 probed now.
PROBES = (
    SearchProbe(8.0, -1.1, False, "missed", 1),
    SearchProbe(4.0, 0.78, True, "met", 2),
    SearchProbe(6.0, -0.4, False, "missed", 3, by_operator=True),
)


def probing(**changes: Any) -> SearchView:
    fit = knee([p.level for p in PROBES], [p.margin for p in PROBES])
    view = SearchView(
        1.0,
        16.0,
        "probing",
        5.0,
        "",
        PROBES,
        tuple((p.level, p.fitted) for p in fit.points),
        fit.met,
        fit.missed,
        fit.confidence,
        fit.shape or "",
    )
    return replace(view, **changes)


def knee_app(view: SearchView, **changes: Any) -> RampApp:
    live = {"ttft_p95_ms": Interval(96.0, 90.0, 102.0, 16, 400, 15.0, True)}
    values: dict[str, Any] = dict(
        search=view, level=5, slo=SLO(ttft_p95_ms=100.0), live_margins=live, step_remaining_s=7.6
    )
    return make_app(**(values | changes))[0]


async def drawn(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, RampApp)
    app.redraw(force=True)
    await pilot.pause()


def serve(engine: FakeEngine, view: SearchView) -> None:
    """The engine publishes a snapshot with the search as ``view``."""
    engine.snapshot = replace(engine.snapshot, seq=engine.snapshot.seq + 1, search=view)
    engine.publish()


def header(app: RampApp) -> str:
    return " ".join(text_of(app.screen.query_one("#status", SnapshotPanel)).split())


async def test_the_header_says_what_the_search_probes_and_why() -> None:
    app = knee_app(probing())
    async with app.run_test(size=(200, 50)) as pilot:
        await drawn(pilot)
        assert "probing 5: TTFT p95 96 ± 6 ms, undecided, ≈8 s" in header(app)
    again = knee_app(probing(level=4.0, why="undecided at its maximum length"), level=4)
    async with again.run_test(size=(200, 50)) as pilot:
        await drawn(pilot)
        assert "probing 4 again (undecided at its maximum length): TTFT p95 96 ± 6 ms" in header(again)
    held = knee_app(probing(state="held", why="operator took over"), auto_ramp=False, step_remaining_s=None)
    async with held.run_test(size=(200, 50)) as pilot:
        await drawn(pilot)
        assert "search paused: operator took over (f resumes)" in header(held)


async def test_the_curve_panel_draws_the_probes_the_fit_and_the_bracket() -> None:
    view = probing()
    assert (view.met, view.missed) == (4.0, 6.0)  # the fit's bracket
    app = knee_app(view)
    async with app.run_test(size=(160, 48)) as pilot:
        await drawn(pilot)
        curve = app.screen.query_one("#curve-panel", SnapshotPanel)
        plot = text_of(curve)
        assert "SLO use vs level" in plot
        assert all(mark in plot for mark in ("●", "✕", "◆", "·", "┄", "▲", "100%"))
        assert curve.border_title == "Knee search"
        assert str(curve.border_subtitle) == "● met  ✕ missed  ◆ operator  · fit  │ 4–6 cliff medium"


async def test_f_asks_the_range_then_stops_and_resumes_the_search() -> None:
    app, engine = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await drawn(pilot)
        await pilot.press("f", *"1:64", "enter")  # no search: f asks the range
        assert engine.commands[-1] == StartSearch(1.0, 64.0)
        serve(engine, probing())
        await drawn(pilot)
        await pilot.press("f")  # the search drives: f stops it
        assert engine.commands[-1] == StopSearch()
        serve(engine, probing(state="held"))
        await drawn(pilot)
        await pilot.press("f")  # the operator took over: f gives it the wheel back
        assert engine.commands[-1] == ResumeSearch()


def test_knee_search_curve_80x24(snap_compare: Any) -> None:
    async def curve_tab(pilot: Pilot[None]) -> None:
        await drawn(pilot)
        await pilot.press("5")
        await pilot.pause()

    assert snap_compare(knee_app(probing()), terminal_size=(80, 24), run_before=curve_tab)


def test_an_attached_console_gets_the_search_as_the_run_shows_it() -> None:
    """``ramp attach``: the shared snapshot's wire form carries the search, probes, fit and bracket."""
    shared = make_snapshot(search=probing())
    back = snapshot_from_plain(json.loads(json.dumps(plain(shared))))
    assert back.search == shared.search and back.search is not None and back.search.probes[2].by_operator

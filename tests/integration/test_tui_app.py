"""Behaviour of the console against a FakeEngine: keys become engine commands, snapshots delivered from
another thread reach the panels, the layout follows the terminal size, quitting asks and stops."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import TabbedContent
from tui_fakes import make_app

from loadgen.run.protocol import ChangeLevel, Mark, NextStep, Pause, Resume, SetAuto, SetLevel, SetMode
from loadgen.snapshot import Snapshot
from tui.app import RampApp
from tui.console import ConsoleScreen
from tui.control import ControlPanel
from tui.dialogs import ConfirmQuit, HelpScreen
from tui.histogram_panel import HistogramPanel
from tui.panel import SnapshotPanel
from tui.prompt import LinePrompt
from tui.view import ViewState

SIZE = (100, 30)


def panel_text(app: RampApp, selector: str) -> str:
    panel = app.screen_stack[0].query_one(selector, SnapshotPanel)
    return str(panel.render())


async def test_start_and_first_draw() -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert engine.names()[0] == "start"
        app.redraw()
        assert "level 64" in panel_text(app, "#control")


async def test_level_keys_call_the_engine() -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("up", "plus", "down", "minus", "shift+up", "shift+down")
        assert [c for c in engine.calls if c[0] == "change_level"] == [
            ("change_level", (1,)),
            ("change_level", (1,)),
            ("change_level", (-1,)),
            ("change_level", (-1,)),
            ("change_level", (10,)),
            ("change_level", (-10,)),
        ]
        await pilot.press("pageup")
        assert engine.calls[-1] == ("set_level", (128,))
        await pilot.press("pagedown")
        assert engine.calls[-1] == ("set_level", (64,))
        app.redraw()
        assert "level 64" in panel_text(app, "#control")


async def test_open_loop_keys_change_the_rate() -> None:
    app, engine = make_app(mode="open", rate_rps=12.0, achieved_rps=11.9, level=0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("up")
        assert engine.calls[-1] == ("set_rate", (13.0,))
        await pilot.press("pageup")
        assert engine.calls[-1] == ("set_rate", (26.0,))


async def test_typed_level_and_rejected_input() -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("l")
        prompt = app.screen.query_one(LinePrompt)
        assert isinstance(app.screen, ConsoleScreen) and prompt.is_open and prompt.value == "64"
        await pilot.press(*"abc", "enter")  # not a number: stays open, no command
        assert prompt.is_open and "is not a whole number" in str(prompt.render())
        assert "set_level" not in engine.names()
        await pilot.press("backspace", "backspace", "backspace", *"48", "enter")
        assert not prompt.is_open
        assert engine.calls[-1] == ("set_level", (48,))


async def test_arrow_keys_do_nothing_behind_a_modal() -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("l", "up", "down", "escape")
        assert "change_level" not in engine.names()


async def test_pause_resume_next_auto_mode_mark() -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("space")
        assert engine.calls[-1] == ("pause", ())
        await pilot.press("p")  # the snapshot now says paused
        assert engine.calls[-1] == ("resume", ())
        await pilot.press("n")
        assert engine.calls[-1] == ("next_step", ())
        await pilot.press("a")
        assert engine.calls[-1] == ("set_auto", (False,))
        await pilot.press("o")
        assert engine.calls[-1] == ("set_mode", ("open",))
        await pilot.press("k", *"kv full", "enter")
        assert engine.calls[-1] == ("mark", ("kv full",))


async def test_keys_send_typed_command_values() -> None:
    """Each steering key reaches the engine as one command value of ``loadgen.run.protocol``."""
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("up", "pageup", "space", "p", "n", "a", "o")
        await pilot.press("k", *"kv full", "enter")
    assert engine.commands == [
        ChangeLevel(1),
        SetLevel(130),  # x2 of the level the first key's snapshot shows (65)
        Pause(),
        Resume(),
        NextStep(),
        SetAuto(False),
        SetMode("open"),
        Mark("kv full"),
    ]


async def test_view_keys_switch_metric_and_window() -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.redraw()
        left = app.screen.query_one("#hist-left", HistogramPanel)
        assert left.border_title == "TTFT · this step"
        await pilot.press("m")
        assert left.border_title == "TTFAT · this step"  # the first answer token, reasoning excluded
        await pilot.press("m")
        assert left.border_title == "TTFTC · this step"  # the first tool-call delta
        await pilot.press("m")
        assert left.border_title == "ITL · this step"
        right = app.screen.query_one("#hist-right", HistogramPanel)
        await pilot.press("M")
        assert right.border_title == "answer decode tok/s · this step"
        await pilot.press("M")
        assert right.border_title == "tool args tok/s · this step"
        await pilot.press("M")
        assert right.border_title == "ITL · this step"
        await pilot.press("w")
        assert left.border_title == "ITL · last 10 s"
        assert "last 10 s:" in panel_text(app, "#control")


async def test_snapshot_from_another_thread_updates_widgets() -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        engine.publish_from_thread(replace(engine.snapshot, seq=99, level=7, in_flight=5))
        control = app.screen.query_one("#control", ControlPanel)
        # The timer draws it; wait for that (bounded), never a fixed sleep.
        for _ in range(200):
            if control.snapshot is not None and control.snapshot.seq == 99:
                break
            await pilot.pause(0.02)
        assert control.snapshot is not None and control.snapshot.seq == 99
        assert "level 7" in str(control.render())


async def test_redraw_skipped_when_nothing_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown: list[int] = []
        original = ConsoleScreen.show

        def counting_show(self: ConsoleScreen, snap: Snapshot, view: ViewState) -> None:
            shown.append(snap.seq)
            original(self, snap, view)

        monkeypatch.setattr(ConsoleScreen, "show", counting_show)
        app.redraw()
        app.redraw()
        assert shown == []  # already drawn by on_ready
        engine.publish_from_thread(replace(engine.snapshot, seq=engine.snapshot.seq + 1))
        app.redraw()
        app.redraw()
        assert len(shown) == 1


async def test_layout_is_tabs_when_small_and_a_grid_when_large() -> None:
    app, engine = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert not app.screen.query("TabbedContent")
        assert app.screen.query_one("#server-panel").region.width > 0
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.screen.query("TabbedContent")
        await pilot.press("3")
        assert app.screen.query_one(TabbedContent).active == "server"
        # the recomposed panels drew the snapshot at once
        assert app.screen.query_one("#server-panel", SnapshotPanel).snapshot is not None


async def test_screenshot_goes_next_to_the_record(tmp_path: Path) -> None:
    app, engine = make_app(record_path=str(tmp_path / "run.jsonl"))
    async with app.run_test(size=SIZE) as pilot:
        app.redraw()
        await pilot.press("s")
        assert list(tmp_path.glob("*.svg"))


async def test_help_opens_and_closes() -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, ConsoleScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)


async def test_quit_asks_then_stops_the_engine() -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmQuit)
        await pilot.press("n")
        assert isinstance(app.screen, ConsoleScreen)
        assert "stop" not in engine.names()
        await pilot.press("q")
        await pilot.press("y")
        assert engine.stopped.wait(5)
        await app.workers.wait_for_complete()
    assert "stop" in engine.names() and "wait" in engine.names()
    assert app.return_code == 0


async def test_ctrl_c_quits_without_asking_when_the_run_is_over() -> None:
    app, engine = make_app(state="finished")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+c")
        assert not isinstance(app.screen, ConfirmQuit)
        assert engine.stopped.wait(5)
        await app.workers.wait_for_complete()
    assert "stop" in engine.names()


async def test_quit_does_not_hang_on_a_stuck_engine() -> None:
    app, engine = make_app(state="finished")
    release = threading.Event()

    def stuck_wait(timeout: float | None = None) -> None:
        release.wait(timeout)

    engine.wait = stuck_wait  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        # the fallback timer exits the app although engine.wait() has not returned
        for _ in range(300):
            if app.return_code is not None:  # set by App.exit()
                break
            await pilot.pause(0.02)
        assert app.return_code is not None
        release.set()


async def test_palette_command_runs_an_action() -> None:
    app, engine = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.press(*"Next step")
        for _ in range(100):  # the palette searches asynchronously
            await pilot.pause(0.02)
            if app.screen.query("CommandList Option") or app.screen.query(".option-list--option"):
                break
        await pilot.press("enter")
        for _ in range(100):
            if "next_step" in engine.names():
                break
            await pilot.pause(0.02)
        assert "next_step" in engine.names()


async def test_every_panel_fits_the_screen_in_every_tab() -> None:
    app, engine = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.redraw()
        for tab in "123456":
            await pilot.press(tab)
            await pilot.pause()
            for panel in app.screen.query(SnapshotPanel):
                if panel.display and panel.region.width:
                    assert panel.region.right <= 80 and panel.region.bottom <= 24, (
                        tab,
                        panel.id,
                        panel.region,
                    )


async def test_help_explains_every_mark_on_screen() -> None:
    """Issue 21, item 6: SLO '+N', vs base '?' and '–', the curve's grey markers, 'step N' in the errors
    panel, BACKING OFF, and where n and a go."""
    app, _ = make_app()
    async with app.run_test(size=(120, 48)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        legend = " ".join(HelpScreen.LEGEND.split())
        for mark in ("+N", "'?'", "'–'", "grey (dim) marker", "'step N'", "BACKING OFF", "first level above"):
            assert mark in legend, mark

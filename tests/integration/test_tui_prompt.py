"""The console's one-line prompt (``tui.prompt``), which replaced the modal dialog for a level, a rate, a cap
and a mark (issue 21 item 10: the dialog's screen push, tint and repaint made ``l N⏎`` 0.5-2.8 s): the
value typed reaches the engine as the same command, nothing typed into it reaches a binding behind it,
and what is typed is data, never markup."""

from __future__ import annotations

from test_tui_typeahead import burst
from tui_fakes import FakeEngine, make_app

from tui.app import RampApp
from tui.console import ConsoleScreen
from tui.prompt import LinePrompt


def typed(text: str) -> list[tuple[str, str | None]]:
    return [("space" if c == " " else c, c) for c in text]


def console(level: int = 64) -> tuple[RampApp, FakeEngine]:
    return make_app(level=level)


async def test_keys_typed_into_the_prompt_steer_nothing_and_reach_the_record_as_typed() -> None:
    app, engine = console(level=17)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        started = len(engine.calls)
        # k opens the mark prompt; then l and k (priority bindings), n, space, a digit (a tab), q, ↑, ?
        burst(pilot, [("k", "k"), *typed("lk n 3q"), ("up", None), ("question_mark", "?"), ("enter", "\r")])
        await pilot.pause()
        await pilot.pause()
        assert engine.calls[started:] == [("mark", ("lk n 3q?",))]
        assert isinstance(app.screen, ConsoleScreen) and len(app.screen_stack) == 1
        assert not app.screen.query_one(LinePrompt).is_open
        assert engine.snapshot.level == 17 and not engine.snapshot.paused


async def test_the_level_typed_is_the_level_sent_and_escape_sends_nothing() -> None:
    app, engine = console(level=17)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        burst(pilot, [("l", "l"), *typed("40"), ("escape", None)])
        await pilot.pause()
        assert "set_level" not in engine.names() and engine.snapshot.level == 17
        burst(pilot, [("l", "l"), *typed("409"), ("backspace", None), ("enter", "\r")])
        await pilot.pause()
        await pilot.pause()
        assert [c for c in engine.calls if c[0] == "set_level"] == [("set_level", (40,))]
        assert engine.snapshot.level == 40
        app.redraw()
        await pilot.pause()
        assert "level 40" in str(app.screen.query_one("#control").render())


async def test_hostile_text_in_the_prompt_is_shown_as_typed() -> None:
    app, engine = console()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        burst(pilot, [("k", "k"), *typed("[/INST] [/] [bold]x")])
        await pilot.pause()
        prompt = app.screen.query_one(LinePrompt)
        assert "[/INST] [/] [bold]x" in str(prompt.render())
        burst(pilot, [("enter", "\r")])
        await pilot.pause()
        assert ("mark", ("[/INST] [/] [bold]x",)) in engine.calls

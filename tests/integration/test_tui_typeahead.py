"""Type-ahead (issue 21): keys that arrive in one burst (``l32⏎`` over a laggy SSH link, or pasted) reach
the dialog the first of them opens, even though it is not drawn yet when the others arrive."""

from __future__ import annotations

from textual import events
from textual.pilot import Pilot
from tui_fakes import make_app

from tui.dialogs import ValueInput


def burst(pilot: Pilot, keys: list[tuple[str, str | None]]) -> None:
    """Post every key to the app at once, as the terminal driver does with the bytes of one read."""
    for key, character in keys:
        pilot.app.post_message(events.Key(key, character))


KEYS_L32_ENTER = [("l", "l"), ("3", "3"), ("2", "2"), ("enter", "\r")]


async def test_a_burst_of_keys_reaches_the_level_dialog() -> None:
    app, engine = make_app(level=17)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        burst(pilot, KEYS_L32_ENTER)
        await pilot.pause()
        await pilot.pause()
        assert not isinstance(app.screen, ValueInput)  # enter applied it
        assert [call for call in engine.calls if call[0] == "set_level"] == [("set_level", (32,))]
        assert engine.snapshot.level == 32


async def test_a_burst_into_the_mark_dialog_keeps_every_character() -> None:
    app, engine = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        burst(pilot, [("k", "k"), *((c, c) for c in "hi 2"), ("enter", "\r")])
        await pilot.pause()
        await pilot.pause()
        assert ("mark", ("hi 2",)) in engine.calls

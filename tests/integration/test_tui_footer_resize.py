"""The footer's "^p palette" key leaves when the terminal shrinks under 80 columns, not only when the console
is composed that small (issue 21 item 5: a stray "palettei" at 60x20 in the regenerated screenshots)."""

from __future__ import annotations

from textual.widgets import Footer
from tui_fakes import make_app


async def test_shrinking_to_60_columns_drops_the_palette_key_and_growing_brings_it_back() -> None:
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        footer = app.screen.query_one(Footer)
        assert len(footer.query(".-command-palette")) == 1
        await pilot.resize_terminal(60, 20)
        await pilot.pause()
        await pilot.pause()
        assert len(footer.query(".-command-palette")) == 0
        assert "palette" not in app.export_screenshot()
        await pilot.resize_terminal(120, 36)
        await pilot.pause()
        await pilot.pause()
        assert len(footer.query(".-command-palette")) == 1

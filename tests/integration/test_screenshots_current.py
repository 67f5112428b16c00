"""The committed screenshots hold today's code (issue 30): the replay screens (``tui.replay.REPLAY_SCREENS``)
are drawn from ``tests/fixtures/replay/run.jsonl`` alone, so the same code gives the same text; a change
that draws them differently fails here until ``python scripts/screenshots.py`` (or ``--replay-only``)
regenerates ``screenshots/``. The replay PNG in docs/console.md once showed a bug fixed since."""

from __future__ import annotations

import difflib
from pathlib import Path

from tui.replay import REPLAY_SCREENS, replay_screens
from tui.screenshot import fix_svg_spaces, svg_text

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "tests" / "fixtures" / "replay" / "run.jsonl"
SCREENSHOTS = ROOT / "screenshots"


async def test_the_committed_replay_screenshots_are_what_the_code_draws() -> None:
    shots = dict(await replay_screens(str(RECORD)))
    assert set(shots) == {name for name, _, _ in REPLAY_SCREENS}
    stale = []
    for name, svg in shots.items():
        committed = (SCREENSHOTS / f"{name}.txt").read_text(encoding="utf-8")
        drawn = svg_text(fix_svg_spaces(svg))
        if drawn != committed:
            diff = difflib.unified_diff(
                committed.splitlines(), drawn.splitlines(), f"screenshots/{name}.txt", "today's code", n=0
            )
            stale.append("\n".join(list(diff)[:12]))
        assert (SCREENSHOTS / f"{name}.png").exists(), f"screenshots/{name}.png is missing"
    assert not stale, "regenerate with python scripts/screenshots.py --replay-only:\n" + "\n".join(stale)


def test_the_docs_show_a_replay_screenshot_that_is_held() -> None:
    console_md = (ROOT / "docs" / "console.md").read_text(encoding="utf-8")
    shown = {name for name, _, _ in REPLAY_SCREENS if f"screenshots/{name}.png" in console_md}
    assert "replay-120x36" in shown

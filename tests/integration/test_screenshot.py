"""Screenshots that read the same everywhere (``tui.screenshot``): Textual's SVG has its ``&#160;`` spaces
replaced by plain ones that ``xml:space="preserve"`` keeps, a text capture is rebuilt from the SVG's cells,
and the PNG rendered by rsvg-convert keeps every space: each cell of a known screen is inked exactly where
the screen has a character ("1 queued", "ms max" stay apart). The console's ``s`` key writes all three.

rsvg-convert comes from Debian's librsvg2-bin (.ci/run installs it): in CI its absence fails the PNG tests,
elsewhere it skips them, saying how to install it.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Static
from tui_fakes import FakeEngine, make_snapshot

from tui.app import RampApp
from tui.screenshot import fix_svg_spaces, save_all, svg_text, to_png

SCREEN = ["1 queued   ms max", "p50 / p99  x  y", "  indented  a b c"]
RSVG = shutil.which("rsvg-convert")


def needs_rsvg() -> None:
    if RSVG is not None:
        return
    why = "rsvg-convert is not installed (apt-get install librsvg2-bin)"
    if os.environ.get("CI"):
        pytest.fail(f"CI without {why}: .ci/run installs it", pytrace=False)
    pytest.skip(why)


class Known(App[None]):
    """A screen whose every cell is known: SCREEN, top left, on the default background."""

    CSS = "Screen { background: black; } Static { color: white; background: black; }"

    def compose(self) -> ComposeResult:
        yield Static("\n".join(SCREEN))


async def known_svg() -> str:
    app = Known()
    async with app.run_test(size=(24, 4)) as pilot:
        await pilot.pause()
        return app.export_screenshot()


async def test_the_fixed_svg_keeps_plain_spaces_and_its_text_is_the_screen() -> None:
    raw = await known_svg()
    assert "1&#160;queued&#160;&#160;&#160;ms&#160;max" in raw  # what Textual writes
    fixed = fix_svg_spaces(raw)
    assert "&#160;" not in fixed and "\u00a0" not in fixed
    texts = re.findall(r"<text[^>]*>", fixed)
    assert texts and all('xml:space="preserve"' in tag for tag in texts)
    assert re.search(r'<svg xml:space="preserve"', fixed)
    assert fix_svg_spaces(fixed) == fixed  # idempotent: a fixed SVG stays as it is
    assert svg_text(fixed).splitlines()[: len(SCREEN)] == SCREEN
    assert svg_text(raw).splitlines()[: len(SCREEN)] == SCREEN  # the capture reads either form


def found(pattern: str, text: str) -> tuple[str, ...]:
    match = re.search(pattern, text)
    assert match is not None, pattern
    return match.groups()


def cell_geometry(svg: str) -> tuple[float, float, float, float, float]:
    """(left, top, cell width, line height, view width) of a Rich SVG's terminal cells."""
    left, top = map(float, found(r'translate\(([\d.]+), ([\d.]+)\)" clip-path', svg))
    length, text = found(r'textLength="([\d.]+)"[^>]*>([^<]+)</text>', svg)
    rows = [float(y) for y in re.findall(r'<clipPath id="[^"]+-line-\d+">\s*<rect x="0" y="([\d.]+)"', svg)]
    (view_w,) = found(r'viewBox="0 0 ([\d.]+) ', svg)
    return left, top, float(length) / len(text), rows[1] - rows[0], float(view_w)


def inked_cells(png: Path, svg: str, row: int, columns: int) -> str:
    """'#' for each cell of ``row`` with glyph pixels in the PNG, '.' for a blank one."""
    from PIL import Image

    image = Image.open(png).convert("L")
    left, top, cell_w, line_h, view_w = cell_geometry(svg)
    scale = image.width / view_w
    out = []
    for col in range(columns):
        x0, x1 = (left + (col + 0.15) * cell_w) * scale, (left + (col + 0.85) * cell_w) * scale
        y0, y1 = (top + row * line_h + 4) * scale, (top + (row + 1) * line_h - 2) * scale
        box = image.crop((int(x0), int(y0), int(x1), int(y1)))
        out.append("#" if box.getextrema()[1] > 110 else ".")  # white text on black
    return "".join(out)


async def test_the_png_keeps_every_space_of_a_known_screen(tmp_path: Path) -> None:
    needs_rsvg()
    svg = await known_svg()
    saved = save_all(svg, tmp_path / "known.svg")
    assert saved.png is not None and saved.note == "", saved.note
    fixed = saved.svg.read_text()
    assert saved.text.read_text().splitlines()[: len(SCREEN)] == SCREEN
    for row, line in enumerate(SCREEN):
        expected = "".join("." if char == " " else "#" for char in line)
        assert inked_cells(saved.png, fixed, row, len(line)) == expected, line
    # The check sees a collapse: plain spaces without xml:space="preserve" run together in rsvg.
    collapsed = tmp_path / "collapsed.svg"
    collapsed.write_text(svg.replace("&#160;", " "))
    assert to_png(collapsed, tmp_path / "collapsed.png") is None
    line = SCREEN[0]
    drawn = inked_cells(tmp_path / "collapsed.png", fixed, 0, len(line))
    assert drawn != "".join("." if char == " " else "#" for char in line)


def test_to_png_says_why_when_rsvg_convert_fails(tmp_path: Path) -> None:
    needs_rsvg()
    bad = tmp_path / "bad.svg"
    bad.write_text("<svg")
    why = to_png(bad, tmp_path / "bad.png")
    assert why is not None and why.startswith("no PNG: rsvg-convert failed")


async def test_the_s_key_writes_the_fixed_svg_the_text_and_the_png(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = RampApp(refresh_hz=4.0)
    snap = make_snapshot(record_path=str(tmp_path / "run.jsonl"))
    app.attach(FakeEngine(snap, on_snapshot=app.snapshot_callback))
    notes: list[Any] = []
    async with app.run_test(size=(80, 24)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        monkeypatch.setattr(app, "notify", lambda message, **kw: notes.append(message))
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
    svgs = list(tmp_path.glob("*.svg"))
    assert len(svgs) == 1, list(tmp_path.iterdir())
    svg = svgs[0]
    assert "&#160;" not in svg.read_text()
    text = svg.with_suffix(".txt").read_text()
    assert "closed loop 64" in text and "step 5/8" in text
    assert any(str(note).startswith(f"screenshot saved in {tmp_path}") for note in notes), notes
    if RSVG is not None:
        assert svg.with_suffix(".png").stat().st_size > 10_000

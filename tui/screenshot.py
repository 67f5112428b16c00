"""Screenshots that read the same everywhere: the console's SVG with its spaces fixed, a plain-text capture of
the same cells, and a PNG rendered from the fixed SVG.

Textual (Rich's ``export_svg``) writes every space as ``&#160;`` (a no-break space) in ``<text>`` nodes
without ``xml:space``: a renderer whose font has no glyph for U+00A0, or that collapses it, draws
"1 queued" as "1queued" and "ms max" as "msmax" (rsvg, some viewers). ``fix_svg_spaces`` writes plain
spaces and marks the document and every text node ``xml:space="preserve"``, which every SVG renderer
honours. ``svg_text`` rebuilds the screen's characters from the text nodes' cell positions: the text
capture, and a check that the SVG still holds every space. ``to_png`` renders with ``rsvg-convert``
(Debian ``librsvg2-bin``); without it the PNG is left out and the caller says so.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rich.cells import get_character_cell_size

__all__ = [
    "PNG_WIDTH_PX",
    "Saved",
    "fix_svg_spaces",
    "save_all",
    "save_note",
    "screenshot_name",
    "svg_text",
    "to_png",
]

PNG_WIDTH_PX = 1600
RSVG_TIMEOUT_S = 30.0
_SVG_NS = "{http://www.w3.org/2000/svg}"
_LINE = re.compile(r"-line-(\d+)\)$")
_SVG_OPEN = re.compile(r"<svg(?![^>]*xml:space)")
_TEXT_OPEN = re.compile(r"<text(?=[\s>])(?![^>]*xml:space)")


def fix_svg_spaces(svg: str) -> str:
    """``svg`` with plain spaces kept by ``xml:space="preserve"`` instead of ``&#160;`` (idempotent)."""
    fixed = svg.replace("&#160;", " ").replace("\u00a0", " ")
    fixed = _SVG_OPEN.sub('<svg xml:space="preserve"', fixed, count=1)
    return _TEXT_OPEN.sub('<text xml:space="preserve"', fixed)


def svg_text(svg: str) -> str:
    """The screen's characters, one line per terminal row, from a Rich/Textual SVG's text nodes (each node
    placed at its cell: ``x`` / the cell width, its row from its ``-line-N`` clip path)."""
    root = ET.fromstring(svg)
    cells: dict[int, dict[int, str]] = {}
    for node in root.iter(f"{_SVG_NS}text"):
        found = _LINE.search(node.get("clip-path", ""))
        text = node.text or ""
        length = node.get("textLength")
        if found is None or not text or length is None:
            continue  # the window title, or a node that is not a terminal cell run
        cell_w = float(length) / len(text)
        column = round(float(node.get("x", "0")) / cell_w) if cell_w > 0 else 0
        row = cells.setdefault(int(found.group(1)), {})
        for char in text.replace("\u00a0", " "):
            row[column] = char
            width = get_character_cell_size(char)
            for extra in range(1, width):
                row[column + extra] = ""  # the second cell of a wide character
            column += max(1, width)
    if not cells:
        return ""
    lines = []
    for y in range(max(cells) + 1):
        row = cells.get(y, {})
        last = max(row, default=-1)
        lines.append("".join(row.get(x, " ") for x in range(last + 1)).rstrip())
    return "\n".join(lines).rstrip("\n") + "\n"


def to_png(svg: Path, png: Path, width_px: int = PNG_WIDTH_PX) -> str | None:
    """Render ``svg`` to ``png`` with rsvg-convert; None when done, else why not (one line)."""
    converter = shutil.which("rsvg-convert")
    if converter is None:
        return "no PNG: rsvg-convert is not installed (apt-get install librsvg2-bin)"
    try:
        subprocess.run(
            [converter, "-w", str(width_px), str(svg), "-o", str(png)],
            check=True,
            capture_output=True,
            timeout=RSVG_TIMEOUT_S,
        )
    except subprocess.CalledProcessError as exc:
        reason = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
        return f"no PNG: rsvg-convert failed ({reason[-1] if reason else f'exit {exc.returncode}'})"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no PNG: rsvg-convert failed ({type(exc).__name__})"
    return None


@dataclass(frozen=True, slots=True)
class Saved:
    """What one screenshot wrote: the fixed SVG, its text capture, the PNG (None, and why, without one)."""

    svg: Path
    text: Path
    png: Path | None
    note: str = ""

    def describe(self) -> str:
        made = [self.svg.name, self.text.name] + ([self.png.name] if self.png is not None else [])
        return f"screenshot saved in {self.svg.parent}: {', '.join(made)}" + (
            f" ({self.note})" if self.note else ""
        )


def save_all(svg: str, svg_path: Path, *, png: bool = True) -> Saved:
    """Write the fixed ``svg`` at ``svg_path``, its text capture beside it (``.txt``) and, with ``png``,
    the PNG rendered from the fixed SVG (``.png``)."""
    fixed = fix_svg_spaces(svg)
    svg_path.write_text(fixed, encoding="utf-8")
    text_path = svg_path.with_suffix(".txt")
    text_path.write_text(svg_text(fixed), encoding="utf-8")
    if not png:
        return Saved(svg_path, text_path, None)
    png_path = svg_path.with_suffix(".png")
    why = to_png(svg_path, png_path)
    return Saved(svg_path, text_path, None if why else png_path, why or "")


def screenshot_name(title: str, now: datetime | None = None) -> str:
    """``ramp_2026-12-01T11_20_05.svg``: the title and the local time, safe in every file system."""
    stamp = (now or datetime.now()).strftime("%Y-%m-%dT%H_%M_%S")
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', title) or 'screenshot'}_{stamp}.svg"


def save_note(svg: str, svg_path: Path) -> str:
    """``save_all`` for the console's ``s`` key: one line for its notification, a failure included."""
    try:
        return save_all(svg, svg_path).describe()
    except OSError as exc:
        return f"screenshot not saved: {svg_path}: {exc.strerror or type(exc).__name__}"

"""Pure character-cell plotting: vertical bar columns, sparklines, time series and label rows.

Shared by the histogram renderer and the throughput / step-curve panels (the curve's own cells: tui.curve). Everything takes plain numbers
and a size in cells and returns strings or Rich ``Text`` lines, so it is unit-tested without a terminal.
Only block elements are used (no braille): they exist in the Linux console font too; ``basic=True``
restricts bars to half blocks for fonts that lack the eighths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

EIGHTHS = " ▁▂▃▄▅▆▇█"
HALVES = " ▄█"
# A sparkline in the Linux console font (no eighth blocks): a zero is a baseline, not half a bar, so that
# an empty queue never reads as a full one
BASIC_SPARK = "_▄█"


def blocks(basic: bool = False) -> str:
    return HALVES if basic else EIGHTHS


def spark_glyphs(basic: bool = False) -> str:
    """A sparkline's cells, lowest first: its lowest is a baseline, never a part of a bar."""
    return BASIC_SPARK if basic else EIGHTHS[1:]


def bar_heights(
    values: Sequence[float], rows: int, *, vmax: float | None = None, levels: int = 8
) -> list[int]:
    """Each value's bar height in sub-cells (``rows * levels`` = full); a non-zero value shows at least one."""
    top = vmax if vmax is not None else max(values, default=0.0)
    full = rows * levels
    heights = []
    for value in values:
        if value <= 0 or top <= 0:
            heights.append(0)
            continue
        # A tail sample must stay visible: it is exactly what p99 is made of.
        heights.append(max(1, min(full, round(value / top * full))))
    return heights


def bar_rows(
    values: Sequence[float], rows: int, *, vmax: float | None = None, basic: bool = False
) -> list[str]:
    """Vertical bars, one column per value, as ``rows`` strings from top to bottom."""
    glyphs = blocks(basic)
    levels = len(glyphs) - 1
    heights = bar_heights(values, rows, vmax=vmax, levels=levels)
    lines = []
    for row in range(rows):
        floor = (rows - 1 - row) * levels  # sub-cells below this row
        cells = []
        for height in heights:
            filled = min(levels, max(0, height - floor))
            cells.append(glyphs[filled])
        lines.append("".join(cells))
    return lines


def sparkline(values: Sequence[float | None], *, basic: bool = False) -> str:
    """One-row sparkline; gaps (None) are blanks."""
    glyphs = spark_glyphs(basic)
    present = [v for v in values if v is not None]
    top = max(present, default=0.0)
    cells = []
    for value in values:
        if value is None:
            cells.append(" ")
        elif top <= 0:
            cells.append(glyphs[0])
        else:
            cells.append(glyphs[min(len(glyphs) - 1, int(value / top * (len(glyphs) - 1) + 0.5))])
    return "".join(cells)


def resample(
    times: Sequence[float], values: Sequence[float], t0: float, t1: float, width: int
) -> list[float | None]:
    """Mean of the values falling in each of ``width`` equal time columns; an empty column inside the
    data range keeps the previous column's value (points are sparser than columns early in a run)."""
    if width <= 0:
        return []
    sums = [0.0] * width
    counts = [0] * width
    span = t1 - t0
    for t, value in zip(times, values, strict=True):
        col = 0 if span <= 0 else min(width - 1, max(0, int((t - t0) / span * width)))
        sums[col] += value
        counts[col] += 1
    out: list[float | None] = []
    last: float | None = None
    last_col = max((c for c in range(width) if counts[c]), default=-1)
    for col in range(width):
        if counts[col]:
            last = sums[col] / counts[col]
            out.append(last)
        else:
            out.append(last if col < last_col else None)
    return out


def time_column(t: float, t0: float, t1: float, width: int) -> int:
    if t1 <= t0:
        return 0
    return min(width - 1, max(0, int((t - t0) / (t1 - t0) * width)))


@dataclass(frozen=True, slots=True)
class LogScale:
    """Maps values to columns on a log axis spanning [lo, hi]."""

    lo: float
    hi: float
    width: int

    def column(self, value: float) -> int:
        if value <= self.lo:
            return 0
        if value >= self.hi:
            return self.width - 1
        frac = (math.log(value) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))
        return min(self.width - 1, max(0, int(frac * self.width)))

    def edges(self) -> list[float]:
        """The ``width + 1`` column boundaries."""
        log_lo, log_hi = math.log(self.lo), math.log(self.hi)
        return [math.exp(log_lo + (log_hi - log_lo) * i / self.width) for i in range(self.width + 1)]


def nice_log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks inside [lo, hi], coarsest first so a caller that drops crowded labels keeps decades."""
    if lo <= 0 or hi <= lo:
        return []
    decades: list[float] = []
    twos_fives: list[float] = []
    exponent = math.floor(math.log10(lo))
    while 10**exponent <= hi:
        for mantissa in (1, 2, 5):
            tick = mantissa * 10.0**exponent
            if lo <= tick <= hi:
                (decades if mantissa == 1 else twos_fives).append(tick)
        exponent += 1
    return decades + twos_fives


def nice_linear_ticks(lo: float, hi: float) -> list[float]:
    """Evenly spaced 1-2-5 ticks inside [lo, hi], the coarsest step that gives at least two: the ticks a
    narrow span (52-62 ms, where no decade tick falls) still gets; the two ends where even that fails."""
    if lo <= 0 or hi <= lo:
        return []
    exponent = math.floor(math.log10(hi - lo))
    for _ in range(4):
        for mantissa in (5, 2, 1):
            step = mantissa * 10.0**exponent
            first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
            if last - first >= 1:
                return [round(k * step, 12) for k in range(first, last + 1)]
        exponent -= 1
    return [lo, hi]


def place_labels(width: int, labels: Sequence[tuple[int, str, Style | str]], *, gap: int = 1) -> Text:
    """A row with each label starting at its column (clamped to fit); a label that would overlap one
    already placed is dropped, so pass the most important labels first."""
    placed: list[tuple[int, str, Style | str]] = []
    for col, label, style in labels:
        if not label or len(label) > width:
            continue
        start = min(max(0, col), width - len(label))
        end = start + len(label)
        if any(start < s + len(lab) + gap and s < end + gap for s, lab, _ in placed):
            continue
        placed.append((start, label, style))
    text = Text(no_wrap=True, overflow="crop")
    cursor = 0
    for start, label, style in sorted(placed, key=lambda item: item[0]):
        text.append(" " * (start - cursor))
        text.append(label, style=style)
        cursor = start + len(label)
    text.append(" " * (width - cursor))
    return text

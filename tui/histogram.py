"""Pure rendering of a ``HistogramView`` (log-spaced bins + percentiles) into Rich text lines.

The engine already computed the bins and the percentiles from its HDR histograms; this module only
redistributes the bins over the columns available (in log space), draws them as vertical bars, and
marks p50/p95/p99 and the SLO threshold. It never computes a percentile.

Layout, top to bottom: percentile line, bars, axis with markers, marker labels, value ticks. Rows are
dropped from the bottom of that list of extras when the panel is short.

Under ``SPARSE_N`` samples the bars would be full-height blocks made of one or two requests: the samples are
drawn instead as a dot strip (one dot per sample, stacked in its column). The value ticks fall back to
evenly spaced ones where no 1-2-5 decade tick lies in a narrow span, so at least two numbers are on the
axis; a crowded label row keeps the SLO's percentile (p95 by default) first.

A baseline's percentiles at the same level (``ghosts``) are hollow △ on the axis in a dim style; the run's
own ▲ wins a column they share, and the axis stretches to them when they lie within 10x of the data.
A marked percentile's 95 % interval, where known, is a ├─┤ band under its ▲ (``tui.histogram_bands``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from loadgen.format import fmt_si, fmt_value, fmt_value_short
from loadgen.snapshot import HistogramView
from loadgen.stats import Interval
from tui.histogram_bands import Band, draw_bands, percentile_bands
from tui.plot import LogScale, bar_rows, nice_linear_ticks, nice_log_ticks, place_labels

Bin = tuple[float, float, int]


@dataclass(frozen=True, slots=True)
class HistogramStyle:
    """Styles for each part; the widget fills these from its component classes (theme colours)."""

    bar: Style = Style(color="cyan")
    bar_bad: Style = Style(color="red")  # bins on the wrong side of the SLO threshold
    axis: Style = Style(dim=True)
    label: Style = Style(dim=True)
    value: Style = Style(bold=True)
    p50: Style = Style(color="green", bold=True)
    p95: Style = Style(color="yellow", bold=True)
    p99: Style = Style(color="magenta", bold=True)
    slo: Style = Style(color="red", bold=True)
    ghost: Style = Style(dim=True)  # the baseline's percentiles


DEFAULT_STYLE = HistogramStyle()

# Markers differ by glyph as well as colour so that they survive NO_COLOR.
MARKER_GLYPH = "▲"
GHOST_GLYPH = "△"
GHOST_POINTS = ("p50", "p95", "p99")
SLO_GLYPH = "┃"
SLO_LINE = "┊"
# Below this many samples a bar's height says nothing (one request is a full column): draw dots instead.
SPARSE_N = 30
DOT_GLYPH = "•"
BASIC_DOT = "o"


def data_range(bins: Sequence[Bin]) -> tuple[float, float] | None:
    """Low edge of the first and high edge of the last non-empty bin (positive, for a log axis)."""
    filled = [(lo, hi) for lo, hi, count in bins if count > 0 and hi > 0]
    if not filled:
        return None
    lo = filled[0][0]
    hi = filled[-1][1]
    if lo <= 0:
        lo = filled[0][1] / 2
    if hi <= lo:
        hi = lo * 2
    return lo, hi


def axis_range(
    bins: Sequence[Bin], threshold: float | None, also: Sequence[float] = ()
) -> tuple[float, float] | None:
    """The data range, stretched to show the SLO threshold (and each of ``also``) when it lies within 10x
    of the data."""
    span = data_range(bins)
    if span is None:
        return None
    lo, hi = span
    for value in (threshold, *also):
        if value is not None and value > 0 and span[0] / 10 <= value <= span[1] * 10:
            lo = min(lo, value / 1.15)
            hi = max(hi, value * 1.15)
    return lo, hi


def rebin(bins: Sequence[Bin], scale: LogScale) -> list[float]:
    """Spread each bin's count over the columns it overlaps, in proportion to the overlap in log space."""
    edges = [math.log(e) for e in scale.edges()]
    columns = [0.0] * scale.width
    for lo, hi, count in bins:
        if count <= 0 or hi <= 0:
            continue
        lo = lo if lo > 0 else hi / 2
        log_lo, log_hi = math.log(lo), math.log(hi)
        if log_hi <= log_lo or log_hi <= edges[0] or log_lo >= edges[-1]:
            columns[scale.column(math.sqrt(lo * hi))] += count
            continue
        span = log_hi - log_lo
        first = scale.column(lo)
        last = scale.column(hi)
        for col in range(first, last + 1):
            overlap = min(log_hi, edges[col + 1]) - max(log_lo, edges[col])
            if overlap > 0:
                columns[col] += count * overlap / span
    return columns


def percentile_line(view: HistogramView, width: int, style: HistogramStyle) -> Text:
    pct = view.pct
    line = Text(no_wrap=True, overflow="ellipsis")
    parts: list[tuple[str, float | None, Style]] = [
        ("p50", pct.p50, style.p50),
        ("p95", pct.p95, style.p95),
        ("p99", pct.p99, style.p99),
        ("max", pct.max, style.label),
    ]
    for name, value, label_style in parts:
        # The unit of a rate is in the panel title; repeating it would push p99 off a narrow panel.
        shown = fmt_value(value, view.unit) if view.unit == "ms" else fmt_si(value)
        piece = Text.assemble((name, label_style), " ", (shown, style.value))
        if line.cell_len and line.cell_len + 2 + piece.cell_len > width:
            break
        if line.cell_len:
            line.append("  ")
        line.append_text(piece)
    return line


def bar_lines(
    bars: Sequence[str], slo_col: int | None, higher_is_better: bool, style: HistogramStyle
) -> list[Text]:
    """The bar rows, bins past the SLO column in the bad colour and the SLO line through the gaps."""
    lines: list[Text] = []
    for row_text in bars:
        line = Text(no_wrap=True, overflow="crop")
        for col, glyph in enumerate(row_text):
            if slo_col is not None and col == slo_col and glyph == " ":
                line.append(SLO_LINE, style=style.slo)
                continue
            bad = False
            if slo_col is not None:
                bad = col < slo_col if higher_is_better else col > slo_col
            line.append(glyph, style=style.bar_bad if bad else style.bar)
        lines.append(line)
    return lines


def slo_point(threshold: tuple[float, str] | None) -> str:
    """The percentile the SLO holds ("95" in "SLO p95 ≤ 100 ms"); p95 where the label names none."""
    if threshold is not None:
        for name in ("50", "95", "99"):
            if f"p{name}" in threshold[1]:
                return name
    return "95"


def percentile_markers(
    view: HistogramView, scale: LogScale, style: HistogramStyle, first: str = "95"
) -> list[tuple[int, str, Style]]:
    """(column, name, style) of each positive percentile, most important first: a crowded label row keeps
    the SLO's percentile (``first``), then p99, then p50."""
    pct = view.pct
    markers = [
        (scale.column(value), name, marker_style)
        for name, value, marker_style in (
            ("99", pct.p99, style.p99),
            ("50", pct.p50, style.p50),
            ("95", pct.p95, style.p95),
        )
        if value is not None and value > 0
    ]
    return sorted(markers, key=lambda marker: marker[1] != first)


def axis_ticks(lo: float, hi: float, width: int, unit: str, style: HistogramStyle) -> Text:
    """The value ticks: 1-2-5 decade ticks, evenly spaced ones where fewer than two of those fit (a narrow
    span), and the two ends where still fewer than two could be placed."""
    scale = LogScale(lo, hi, width)
    for ticks in (nice_log_ticks(lo, hi), nice_linear_ticks(lo, hi)):
        labels = [(scale.column(t) - 1, fmt_value_short(t, unit), style.label) for t in ticks]
        row = place_labels(width, labels, gap=2)
        if len(row.plain.split()) >= 2:
            return row
    ends = [(0, fmt_value_short(lo, unit), style.label), (width, fmt_value_short(hi, unit), style.label)]
    return place_labels(width, ends, gap=1)


def dot_rows(bins: Sequence[Bin], scale: LogScale, rows: int, basic: bool) -> list[str]:
    """One dot per sample, stacked from the bottom in the column of its bin's middle; a column with more
    samples than rows shows its count on top."""
    counts = [0] * scale.width
    for lo, hi, count in bins:
        if count > 0 and hi > 0:
            counts[scale.column(math.sqrt(max(lo, hi / 2) * hi))] += count
    dot = BASIC_DOT if basic else DOT_GLYPH
    lines = []
    for row in range(rows):
        level = rows - row  # 1 at the bottom row
        cells = []
        for count in counts:
            if count > rows and level == rows:
                cells.append(str(count) if count < 10 else "+")
            else:
                cells.append(dot if count >= level else " ")
        lines.append("".join(cells))
    return lines


def axis_line(
    width: int,
    markers: Sequence[tuple[int, str, Style]],
    slo_col: int | None,
    slo_value: float | None,
    span: tuple[float, float],
    style: HistogramStyle,
    ghost_cols: Sequence[int] = (),
    bands: Sequence[Band] = (),
) -> Text:
    axis = ["─"] * width
    axis_styles: list[Style] = [style.axis] * width
    draw_bands(axis, axis_styles, bands)  # under the SLO's line, the ghosts and the markers
    if slo_col is not None:
        axis[slo_col], axis_styles[slo_col] = SLO_GLYPH, style.slo
    for col in ghost_cols:
        axis[col], axis_styles[col] = GHOST_GLYPH, style.ghost
    for col, _name, marker_style in reversed(markers):
        axis[col], axis_styles[col] = MARKER_GLYPH, marker_style
    line = Text(no_wrap=True, overflow="crop")
    for glyph, glyph_style in zip(axis, axis_styles, strict=True):
        line.append(glyph, style=glyph_style)
    if slo_value is not None and slo_col is None:
        # Threshold far off the data: say on which side it lies instead of drawing it.
        edge = "SLO→" if slo_value > span[1] else "←SLO"
        start = width - len(edge) if edge.startswith("SLO") else 0
        line = line[:start] + Text(edge, style=style.slo) + line[start + len(edge) :]
    return line


def render_histogram(
    view: HistogramView | None,
    width: int,
    height: int,
    *,
    threshold: tuple[float, str] | None = None,
    higher_is_better: bool = False,
    style: HistogramStyle = DEFAULT_STYLE,
    basic: bool = False,
    ghosts: Mapping[str, float] | None = None,
    empty: str = "no samples yet",
    intervals: Mapping[str, Interval] | None = None,
) -> Text:
    """The whole histogram block as one multi-line ``Text`` of at most ``height`` lines; ``ghosts``: a
    baseline's percentiles ("p50", "p95", "p99") at the same level; ``empty``: what a view without samples
    says; ``intervals``: the marked percentiles' 95 % intervals ("p95"), drawn as bands on the axis."""
    if width < 8 or height < 2:
        return Text("")
    if view is None or view.pct.count == 0 or data_range(view.bins) is None:
        return Text(empty, style=style.label)

    slo_value = threshold[0] if threshold else None
    ghost_values = [v for name, v in (ghosts or {}).items() if name in GHOST_POINTS and v > 0]
    span = axis_range(view.bins, slo_value, ghost_values)
    assert span is not None
    scale = LogScale(span[0], span[1], width)

    # Numbers on the axis come before naming its markers (the header already gives their values).
    show_ticks = height >= 5
    show_header = height >= 6
    show_marker_labels = height >= 7
    extras = 1 + show_ticks + show_header + show_marker_labels  # the axis row is always drawn
    rows = max(1, height - extras)

    if view.pct.count < SPARSE_N:
        bars = dot_rows(view.bins, scale, rows, basic)
    else:
        bars = bar_rows(rebin(view.bins, scale), rows, basic=basic)
    slo_col = scale.column(slo_value) if slo_value is not None and span[0] <= slo_value <= span[1] else None

    lines: list[Text] = [percentile_line(view, width, style)] if show_header else []
    lines += bar_lines(bars, slo_col, higher_is_better, style)
    markers = percentile_markers(view, scale, style, slo_point(threshold))
    ghost_cols = [scale.column(v) for v in ghost_values if span[0] <= v <= span[1]]  # off the axis: left out
    bands = percentile_bands(intervals or {}, scale, markers)
    lines.append(axis_line(width, markers, slo_col, slo_value, span, style, ghost_cols, bands))

    if show_marker_labels:
        labels: list[tuple[int, str, Style | str]] = [
            (col - len(name) // 2, name, marker_style) for col, name, marker_style in markers
        ]
        if slo_col is not None and threshold is not None:
            labels.append((slo_col - 1, "SLO", style.slo))
        lines.append(place_labels(width, labels))

    if show_ticks:
        lines.append(axis_ticks(span[0], span[1], width, view.unit, style))

    return Text("\n").join(lines[:height])

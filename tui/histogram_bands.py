"""The 95 % interval of each percentile a histogram marks, drawn as a band on its marker row: ``├──▲───┤``.

A step's figures carry their intervals (``StepSummary.margins`` of a finished step, ``Snapshot.live_margins``
of the step measuring now, named as the step line names them: ``ttft_p95_ms``). Over the step window the
histogram of a metric draws, under each of its ▲ markers whose interval is known, the interval's span in
the marker's colour: ├ at the bin of its low end, ┤ at the bin of its high end (an end past the axis runs
to the edge without its cap), ┄ instead of ─ when the interval is not trusted. Nothing where no interval
is known: the rolling and run windows, a step between windows, a record from before margins, an interval
narrower than a column. Pure: no widget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.style import Style

from loadgen.metrics.slices import figure_name
from loadgen.snapshot import Snapshot
from loadgen.stats import Interval
from tui.plot import LogScale

__all__ = ["Band", "draw_bands", "marked_intervals", "percentile_bands"]

MARKED = ("p50", "p95", "p99")  # the percentiles the histogram marks (``tui.histogram.percentile_markers``)
FILL, FILL_UNTRUSTED, LOW_CAP, HIGH_CAP = "─", "┄", "├", "┤"


@dataclass(frozen=True, slots=True)
class Band:
    """One interval on the marker row: its first and last column, and whether each end is on the axis."""

    first: int
    last: int
    style: Style
    trusted: bool = True
    low_cap: bool = True  # False: the interval starts left of the axis (no ├)
    high_cap: bool = True  # False: it ends right of the axis (no ┤)


def marked_intervals(snapshot: Snapshot, window: str, metric: str) -> dict[str, Interval]:
    """The intervals of ``metric``'s p50, p95 and p99 over ``window`` ("p95" -> Interval), those known only:
    the step window's (the step a replay looks at, or the one measuring now); none over the others."""
    if window != "step":
        return {}
    selected = snapshot.selected
    if selected is not None and 0 <= selected < len(snapshot.steps):
        margins: Mapping[str, Interval] = snapshot.steps[selected].margins
    else:
        margins = snapshot.live_margins
    out = {}
    for point in MARKED:
        interval = margins.get(figure_name(metric, point))
        if interval is not None and interval.lo is not None and interval.hi is not None:
            out[point] = interval
    return out


def percentile_bands(
    intervals: Mapping[str, Interval], scale: LogScale, markers: Sequence[tuple[int, str, Style]]
) -> list[Band]:
    """A band for each marker ((column, "95", style), most important first) with an interval, drawn in the
    reverse order so that the most important one lies on top; none narrower than two columns."""
    bands = []
    for _col, name, marker_style in reversed(markers):
        interval = intervals.get(f"p{name}")
        if interval is None or interval.lo is None or interval.hi is None or interval.hi <= 0:
            continue
        first, last = scale.column(max(interval.lo, scale.lo)), scale.column(interval.hi)
        if last > first:
            band_style = marker_style + Style(bold=False)  # lighter than the marker itself
            low, high = interval.lo >= scale.lo, interval.hi <= scale.hi
            bands.append(Band(first, last, band_style, interval.trusted, low, high))
    return bands


def draw_bands(glyphs: list[str], styles: list[Style], bands: Sequence[Band]) -> None:
    """Each band over the marker row's ``glyphs`` and their ``styles``, in place."""
    for band in bands:
        fill = FILL if band.trusted else FILL_UNTRUSTED
        for col in range(band.first, band.last + 1):
            glyphs[col], styles[col] = fill, band.style
        if band.low_cap:
            glyphs[band.first] = LOW_CAP
        if band.high_cap:
            glyphs[band.last] = HIGH_CAP

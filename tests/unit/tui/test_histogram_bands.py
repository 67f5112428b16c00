"""The 95 % interval of each marked percentile as a band on the histogram's marker row (issue 31): its caps
in the columns of the interval's ends on the histogram's own axis, ┄ where the interval is not trusted, no
cap where an end lies past the axis, nothing where no interval is known."""

from __future__ import annotations

from dataclasses import replace

from rich.style import Style
from tui_fakes import hist, make_snapshot

from loadgen import measures
from loadgen.metrics.slices import figure_name
from loadgen.stats import Interval
from tui.histogram import axis_range, render_histogram
from tui.histogram_bands import marked_intervals
from tui.plot import LogScale

VIEW = hist(measures.TTFT_MS, "ms", 400.0, 0.5, 2000, 50.0, 5000.0)
WIDTH, HEIGHT = 76, 12


def marker_row(text: str) -> str:
    """The axis row: the one line with the ▲ markers."""
    rows = [row for row in text.splitlines() if "▲" in row]
    assert len(rows) == 1, text
    return rows[0]


def interval(value: float, lo: float, hi: float, trusted: bool = True) -> Interval:
    return Interval(value, lo, hi, 16, 2000, 15.0, trusted, "" if trusted else "3 values beyond p99")


def test_a_band_spans_the_columns_of_its_intervals_ends() -> None:
    p95, p99 = VIEW.pct.p95, VIEW.pct.p99
    assert p95 is not None and p99 is not None
    scale = LogScale(*axis_range(VIEW.bins, None) or (1.0, 2.0), WIDTH)
    lo, hi = p95 * 0.85, p95 * 1.1
    row = marker_row(render_histogram(VIEW, WIDTH, HEIGHT, intervals={"p95": interval(p95, lo, hi)}).plain)
    assert row.index("├") == scale.column(lo) and row.rindex("┤") == scale.column(hi), row
    assert scale.column(lo) < scale.column(p95) < scale.column(hi)
    assert row[scale.column(p95)] == "▲" and row.count("├") == 1 and row.count("┤") == 1
    band = row[scale.column(lo) + 1 : scale.column(hi)]
    assert set(band) == {"─", "▲"}  # trusted: a plain line in the marker's colour
    styled = render_histogram(VIEW, WIDTH, HEIGHT, intervals={"p95": interval(p95, lo, hi)})
    axis_line = next(line for line in styled.split("\n") if "▲" in line.plain)
    styles = [span.style for span in axis_line.spans if span.start <= scale.column(lo) < span.end]
    assert len(styles) == 1 and isinstance(styles[0], Style)
    cap_style = styles[0]
    assert cap_style.color is not None and cap_style.color.name == "yellow"  # p95's colour, not the axis's

    untrusted = {"p99": interval(p99, p99 * 0.9, p99 * 1.2, trusted=False)}
    row = marker_row(render_histogram(VIEW, WIDTH, HEIGHT, intervals=untrusted).plain)
    first, last = scale.column(p99 * 0.9), scale.column(p99 * 1.2)
    assert row[first] == "├" and row[last] == "┤" and "┄" in row[first:last], row


def test_no_band_without_an_interval_or_past_the_axis_no_cap() -> None:
    plain = marker_row(render_histogram(VIEW, WIDTH, HEIGHT).plain)
    assert not set("├┤┄") & set(plain), plain
    p99 = VIEW.pct.p99
    assert p99 is not None
    span = axis_range(VIEW.bins, None)
    assert span is not None
    past = {"p99": interval(p99, p99 * 0.9, span[1] * 3)}  # the high end beyond the axis: runs to the edge
    row = marker_row(render_histogram(VIEW, WIDTH, HEIGHT, intervals=past).plain)
    assert "├" in row and "┤" not in row and row.endswith("─"), row
    unknown = {"p95": Interval(VIEW.pct.p95 or 0.0, None, None)}  # no interval could be formed
    assert marker_row(render_histogram(VIEW, WIDTH, HEIGHT, intervals=unknown).plain) == plain


def test_the_step_windows_intervals_are_the_measuring_steps_or_the_replayed_steps() -> None:
    p95 = figure_name(measures.TTFT_MS, "p95")
    live = {p95: interval(412.0, 380.0, 450.0), "out_tok_s": interval(4390.0, 4300.0, 4480.0)}
    snapshot = make_snapshot(live_margins=live)
    assert marked_intervals(snapshot, "step", measures.TTFT_MS) == {"p95": live[p95]}
    assert marked_intervals(snapshot, "rolling", measures.TTFT_MS) == {}  # the step's margins are not its
    assert marked_intervals(snapshot, "step", measures.ITL_MS) == {}
    steps = snapshot.steps
    kept = {figure_name(measures.TTFT_MS, "p99"): interval(900.0, 800.0, 1100.0)}
    replayed = replace(
        snapshot, steps=(*steps[:-1], replace(steps[-1], margins=kept)), selected=len(steps) - 1
    )
    assert marked_intervals(replayed, "step", measures.TTFT_MS) == {"p99": next(iter(kept.values()))}

"""Throughput over time: aggregate output tok/s as bars, prefill tok/s and req/s as sparklines, with
the step boundaries (``Snapshot.step_starts_s``) marked under the time axis and the operator's marks
(``Snapshot.marks``, the ``k`` key) as flags with their notes on a row of their own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.style import Style
from rich.text import Text

from loadgen.format import fmt_duration, fmt_si
from loadgen.snapshot import SeriesPoint, Snapshot
from tui.format import ellipsize
from tui.panel import SnapshotPanel
from tui.plot import bar_rows, place_labels, resample, sparkline, time_column
from tui.view import ViewState

BOUNDARY = "┊"
FLAG = "⚑"
NOT_RECORDED = "timeline not recorded (this record predates the 1 Hz series)"
NOTE_CELLS = 24  # a mark's note is cut to this many cells on the timeline (the record keeps all of it)


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


def throughput_header(
    out_now: float, peak: float, width: int, styles: Mapping[str, Style], marks: bool = False
) -> Text:
    dim = _s(styles, "dim")
    header = Text.assemble(
        ("out tok/s ", dim),
        (fmt_si(out_now), _s(styles, "strong")),
        ("  peak ", dim),
        (fmt_si(peak), ""),
        ("  ·  step boundaries ", dim),
        (BOUNDARY, _s(styles, "boundary")),
        *((("  marks ", dim), (FLAG, _s(styles, "mark"))) if marks else ()),
        no_wrap=True,
        overflow="ellipsis",
    )
    header.truncate(width, overflow="ellipsis")
    return header


def chart_lines(rows: Sequence[str], boundary_cols: set[int], styles: Mapping[str, Style]) -> list[Text]:
    """The bar rows, with the step boundaries drawn through the gaps between bars."""
    lines = []
    for row in rows:
        line = Text(no_wrap=True, overflow="crop")
        for col, glyph in enumerate(row):
            if glyph == " " and col in boundary_cols:
                line.append(BOUNDARY, style=_s(styles, "boundary"))
            else:
                line.append(glyph, style=_s(styles, "bar"))
        lines.append(line)
    return lines


def step_number_line(
    step_starts_s: Sequence[float], t0: float, t1: float, width: int, styles: Mapping[str, Style]
) -> Text:
    # Step numbers under their boundaries; the latest steps matter most, so they are placed first.
    starts = [(i, t) for i, t in enumerate(step_starts_s) if t0 <= t <= t1]
    labels = [
        (time_column(t, t0, t1, width), str(i + 1), _s(styles, "boundary")) for i, t in reversed(starts)
    ]
    return place_labels(width, labels)


def mark_line(
    marks: Sequence[tuple[float, str]], t0: float, t1: float, width: int, styles: Mapping[str, Style]
) -> Text:
    """A flag at each mark's time, then its note beside it (after it, else before it) where there is
    room, the latest marks first; a note never touches a flag or another note."""
    cells: list[tuple[str, Style | str]] = [(" ", "")] * width
    flags = [(time_column(t, t0, t1, width), note) for t, note in reversed(marks) if t0 <= t <= t1]
    for col, _ in flags:
        cells[col] = (FLAG, _s(styles, "mark"))

    def blank(lo: int, hi: int) -> bool:  # cells lo..hi-1, and one either side, hold nothing
        return (
            0 <= lo and hi <= width and all(c == " " for c, _ in cells[max(0, lo - 1) : min(width, hi + 1)])
        )

    for col, note in flags:
        text = ellipsize(note, NOTE_CELLS)
        for start in (col + 2, col - 1 - len(text)):
            if blank(start, start + len(text)):
                for offset, char in enumerate(text):
                    cells[start + offset] = (char, _s(styles, "dim"))
                break
    line = Text(no_wrap=True, overflow="crop")
    for char, style in cells:
        line.append(char, style=style)
    return line


def time_axis_line(t0: float, t1: float, width: int, dim: Style) -> Text:
    mid = (t0 + t1) / 2
    return place_labels(
        width,
        [
            (0, fmt_duration(t0), dim),
            (width, fmt_duration(t1), dim),
            (width // 2 - 2, fmt_duration(mid), dim),
        ],
        gap=2,
    )


def spark_lines(
    series: Sequence[SeriesPoint], width: int, styles: Mapping[str, Style], basic: bool
) -> list[Text]:
    """Prefill tok/s and req/s as sparklines over the same time span, each with its latest value."""
    times = [p.t_s for p in series]
    t0, t1 = times[0], times[-1]
    label_w, value_w = 8, 12
    spark_w = max(1, width - label_w - value_w)
    lines = []
    for name, values, unit in (
        ("prefill", [p.prefill_tok_s for p in series], " tok/s"),
        ("req/s", [p.req_s for p in series], ""),
    ):
        cols = resample(times, values, t0, t1, spark_w)
        line = Text(no_wrap=True, overflow="crop")
        line.append(f"{name:<{label_w}}", style=_s(styles, "dim"))
        line.append(sparkline(cols, basic=basic), style=_s(styles, "spark"))
        line.append(f" {fmt_si(values[-1])}{unit}".rjust(value_w), style=_s(styles, "strong"))
        lines.append(line)
    return lines


def render_throughput(
    series: Sequence[SeriesPoint],
    step_starts_s: Sequence[float],
    width: int,
    height: int,
    *,
    marks: Sequence[tuple[float, str]] = (),
    styles: Mapping[str, Style] | None = None,
    basic: bool = False,
    empty: str = "no throughput yet",
) -> Text:
    styles = styles or {}
    dim = _s(styles, "dim")
    if width < 10 or height < 1:
        return Text("")
    if not series:
        return Text(empty, style=dim)
    times = [p.t_s for p in series]
    t0, t1 = times[0], times[-1]
    out = [p.out_tok_s for p in series]
    peak = max(out)

    show_sparks = height >= 8
    show_time = height >= 5
    shown_marks = [m for m in marks if t0 <= m[0] <= t1] if height >= 5 else []
    extras = 1 + (2 if show_sparks else 0) + (1 if show_time else 0) + (1 if height >= 4 else 0)
    chart_rows = max(1, height - extras - (1 if shown_marks else 0))

    columns = resample(times, out, t0, t1, width)
    boundary_cols = {time_column(t, t0, t1, width) for t in step_starts_s if t0 < t <= t1}
    rows = bar_rows([v or 0.0 for v in columns], chart_rows, vmax=peak, basic=basic)
    header = throughput_header(out[-1], peak, width, styles, marks=bool(shown_marks))
    lines = [header, *chart_lines(rows, boundary_cols, styles)]
    if height >= 4:
        lines.append(step_number_line(step_starts_s, t0, t1, width, styles))
    if shown_marks:
        lines.append(mark_line(shown_marks, t0, t1, width, styles))
    if show_time:
        lines.append(time_axis_line(t0, t1, width, dim))
    if show_sparks:
        lines += spark_lines(series, width, styles, basic)
    return Text("\n").join(lines[:height])


class ThroughputPanel(SnapshotPanel):
    COMPONENT_CLASSES = {
        "throughput--dim",
        "throughput--strong",
        "throughput--bar",
        "throughput--spark",
        "throughput--boundary",
        "throughput--mark",
    }

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        return (snapshot.series, snapshot.step_starts_s, snapshot.marks)

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        self.border_title = "Throughput"

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("throughput--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return render_throughput(
            snapshot.series,
            snapshot.step_starts_s,
            width,
            height,
            marks=snapshot.marks,
            styles=styles,
            basic=self.basic_glyphs,
            # ramp replay of a record written before ramp kept the 1 Hz series
            empty=NOT_RECORDED if snapshot.selected is not None else "no throughput yet",
        )

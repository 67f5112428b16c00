"""The throughput-latency curve: each finished step's TTFT p95 against its output tok/s (or its level).

A step is a marker that says its verdict (● met, ✕ missed, ○ no SLO, ★ best), with its number beside
it when there is room, on a dim bar that spans its TTFT p95's 95 % interval (dotted up to the top where the
interval is open above: too few values to bound it); a label never touches another label or marker, so "9" and "12" cannot read as
"912". Two steps on one cell are nudged apart, so no point is hidden. The y axis keeps to the ordinary
points: a step far above the rest (over ``OUTLIER_GAP`` times the next one) is drawn on the top edge with
an arrow instead of squashing every other point onto the floor. The TTFT p95 SLO is a dashed line.

With a baseline (``--baseline``, ``tui.baseline``) each of its levels is a ghost ◇ (dim, unlabelled, drawn
after the run's own markers and labels, so it never displaces one); the axes span both runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from loadgen import measures
from loadgen.format import fmt_ms, fmt_si
from loadgen.snapshot import Snapshot, StepSummary
from tui.baseline import LiveBaseline
from tui.knee import knee_legend, render_knee
from tui.line import fit_line, piece
from tui.panel import SnapshotPanel
from tui.plot import place_labels
from tui.steps import starred
from tui.view import CurveX, ViewState

MARKERS = {"met": "●", "miss": "✕", "none": "○", "best": "★"}
LEGEND = {"met": "met", "miss": "miss", "none": "no SLO", "best": "best"}
GHOST = "◇"  # a baseline level (kind "ghost")
GHOST_LEGEND = "baseline"
# the baseline was measured under other conditions (the errors panel says which)
NOT_MATCHED = "⚠ not matched"
CLIPPED = "↑"
SLO_SPAN = 4.0  # the y axis stretches to an SLO up to this many times the highest point
OUTLIER_GAP = 3.0  # a point over this many times the next highest is drawn on the top edge
P95_FIGURE = "ttft_p95_ms"  # the y axis' figure as the step's margins name it
BAR, OPEN_BAR = "│", "┆"  # a step's interval; the part of one open above (bounded below only)

Cell = tuple[str, Style | str]


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


@dataclass(frozen=True, slots=True)
class CurvePoint:
    x: float
    y: float
    kind: str  # a key of MARKERS, or "ghost"
    label: str  # the step's number, as everywhere on screen
    cut: bool  # a manual change cut the step: drawn dim, never best
    selected: bool = False  # ramp replay: the step looked at, drawn in the selection's style
    # the 95 % interval of its TTFT p95 (issue 31): a bar through the marker; y_top None: open above (too
    # few values to bound it), the bar runs dotted to the top
    y_low: float | None = None
    y_top: float | None = None


def point_kind(step: StepSummary, best: bool) -> str:
    if best:
        return "best"
    if step.verdict.met is None:
        return "none"
    return "met" if step.verdict.met else "miss"


def curve_points(
    steps: Sequence[StepSummary], best_step: int | None, x_axis: CurveX, selected: int | None = None
) -> list[CurvePoint]:
    """Every step that has both numbers, in step order (``selected``: the position looked at in replay)."""
    star = starred(steps, best_step)
    points = []
    for position, step in enumerate(steps):
        y = step.stats.pct(measures.TTFT_MS).p95
        x = (
            step.stats.out_tok_s
            if x_axis == "out_tok_s"
            else float(step.rate_rps or 0 if step.mode == "open" else step.level)
        )
        if x is None or y is None:
            continue
        iv = step.margins.get(P95_FIGURE)
        points.append(
            CurvePoint(
                x,
                y,
                point_kind(step, position == star),
                str(step.index + 1),
                not step.clean,
                selected=position == selected,
                y_low=None if iv is None else iv.lo,
                y_top=None if iv is None else iv.hi,
            )
        )
    return points


def ghost_points(ghosts: Sequence[tuple[float, float]]) -> list[CurvePoint]:
    """The baseline's levels as (x, TTFT p95) pairs, as curve points of kind "ghost"."""
    return [CurvePoint(x, y, "ghost", "", False) for x, y in ghosts]


def glyph(kind: str) -> str:
    return GHOST if kind == "ghost" else MARKERS[kind]


def y_limit(ys: Sequence[float]) -> float | None:
    """The height above which points are outliers (drawn on the edge), or None when none is.

    From the top down, a point is an outlier while it is over ``OUTLIER_GAP`` times the next highest and
    at least two ordinary points stay below it: one stray step cannot squash the curve's shape.
    """
    ordered = sorted(ys)
    limit = None
    while len(ordered) >= 3 and ordered[-1] > OUTLIER_GAP * max(ordered[-2], 1e-9):
        limit = ordered[-2]
        ordered.pop()
    return limit


def y_scale(points: Sequence[CurvePoint], slo_ttft_p95_ms: float | None) -> tuple[float, bool]:
    """The y axis' top and whether the SLO line is drawn on it.

    An SLO far above the data (past ``SLO_SPAN`` times its highest ordinary point) would flatten every
    point onto the bottom row: then the curve keeps its shape and the title's arrow says where the SLO is.
    """
    limit = y_limit([p.y for p in points])
    data_hi = max((p.y for p in points if limit is None or p.y <= limit), default=0.0)
    slo_drawn = slo_ttft_p95_ms is not None and (not points or slo_ttft_p95_ms <= SLO_SPAN * data_hi)
    top = max(data_hi, slo_ttft_p95_ms if slo_drawn and slo_ttft_p95_ms is not None else 0.0)
    return top * 1.05, slo_drawn


def curve_legend(
    points: Sequence[CurvePoint], slo_ttft_p95_ms: float | None = None, *, matched: bool = True
) -> str:
    """'◇ baseline  ● met  ✕ miss  ★ best  ↑ off scale': the markers this curve draws (``matched``: False
    when the baseline's conditions differ)."""
    kinds = {p.kind for p in points}
    # the baseline first: a narrow panel's border cuts the legend's end
    words = [f"{GHOST} {GHOST_LEGEND}" + ("" if matched else f" {NOT_MATCHED}")] if "ghost" in kinds else []
    words += [f"{MARKERS[k]} {LEGEND[k]}" for k in MARKERS if k in kinds]
    y_hi, _ = y_scale(points, slo_ttft_p95_ms)
    if any(p.y > y_hi for p in points):
        words.append(f"{CLIPPED} off scale")
    return "  ".join(words)


@dataclass(slots=True)
class Grid:
    """The plot's cells; ``taken`` marks markers and labels (a fill such as the SLO line is free)."""

    width: int
    height: int
    cells: list[list[Cell]]
    taken: list[list[bool]]

    @classmethod
    def empty(cls, width: int, height: int, fill: Mapping[int, Cell]) -> Grid:
        cells = [[fill.get(row, (" ", ""))] * width for row in range(height)]
        return cls(width, height, cells, [[False] * width for _ in range(height)])

    def free(self, col: int, row: int) -> bool:
        return 0 <= col < self.width and 0 <= row < self.height and not self.taken[row][col]

    def put(self, col: int, row: int, glyph: str, style: Style | str) -> None:
        self.cells[row][col] = (glyph, style)
        self.taken[row][col] = True

    def nearest_free(self, col: int, row: int) -> tuple[int, int]:
        """The free cell nearest (col, row), sideways first (a nudge keeps the height right)."""
        for reach in range(0, 4):
            for dc, dr in (
                (reach, 0),
                (-reach, 0),
                (0, reach),
                (0, -reach),
                (reach, reach),
                (-reach, -reach),
            ):
                if self.free(col + dc, row + dr):
                    return col + dc, row + dr
        return col, row

    def place_label(self, col: int, row: int, label: str, style: Style | str) -> bool:
        """``label`` right of the marker at (col, row), else left of it, with a free cell (or the edge) on
        its far side so that it never runs into another label or marker."""
        n = len(label)
        for start in (col + 1, col - n):
            span = range(start, start + n)
            beyond = start + n if start > col else start - 1
            if all(self.free(c, row) for c in span) and (
                beyond in (-1, self.width) or self.free(beyond, row)
            ):
                for offset, char in enumerate(label):
                    self.put(start + offset, row, char, style)
                return True
        return False

    def lines(self) -> list[Text]:
        out = []
        for cells in self.cells:
            line = Text(no_wrap=True, overflow="crop")
            for glyph, style in cells:
                line.append(glyph, style=style)
            out.append(line)
        return out


def draw_points(
    grid: Grid, points: Sequence[CurvePoint], x_hi: float, y_hi: float, styles: Mapping[str, Style]
) -> None:
    """Markers first (the best step, then the latest, get their own cell), then labels where they fit, then
    the baseline's ghosts in the cells left."""
    steps = [i for i, p in enumerate(points) if p.kind != "ghost"]
    order = sorted(steps, key=lambda i: (points[i].kind != "best", -i))
    for i in steps:
        draw_bar(grid, points[i], x_hi, y_hi, _s(styles, "dim"))
    at: dict[int, tuple[int, int]] = {}
    for i in order:
        at[i] = place_marker(grid, points[i], x_hi, y_hi, styles)
    for i in order:
        p = points[i]
        label_style = _s(styles, "selected" if p.selected else "label")
        if p.y > y_hi:
            if not grid.place_label(*at[i], CLIPPED + p.label, label_style):
                grid.place_label(*at[i], CLIPPED, label_style)
        else:
            grid.place_label(*at[i], p.label, label_style)
    for p in points:
        if p.kind == "ghost":
            place_marker(grid, p, x_hi, y_hi, styles)


def _row(grid: Grid, y: float, y_hi: float) -> int:
    """The row (from the top) of the height ``y``; past the top: the top row."""
    height = grid.height - 1 if y > y_hi else round(y / y_hi * (grid.height - 1)) if y_hi > 0 else 0
    return grid.height - 1 - min(grid.height - 1, max(0, height))


def draw_bar(grid: Grid, p: CurvePoint, x_hi: float, y_hi: float, style: Style) -> None:
    """``p``'s interval as a bar in its column, from its lower end to its upper end (dotted to the top when
    open above); a fill, as the SLO line: markers and labels draw over it."""
    if p.y_low is None or p.y > y_hi:
        return
    col = min(grid.width - 1, max(0, round(p.x / x_hi * (grid.width - 1)) if x_hi > 0 else 0))
    top = 0 if p.y_top is None else _row(grid, p.y_top, y_hi)
    for row in range(top, _row(grid, p.y_low, y_hi) + 1):
        if not grid.taken[row][col]:
            grid.cells[row][col] = (OPEN_BAR if p.y_top is None else BAR, style)


def place_marker(
    grid: Grid, p: CurvePoint, x_hi: float, y_hi: float, styles: Mapping[str, Style]
) -> tuple[int, int]:
    """``p``'s marker in its cell, or the free one nearest it; where it went."""
    col = round(p.x / x_hi * (grid.width - 1)) if x_hi > 0 else 0
    row = _row(grid, p.y, y_hi)  # counted from the top
    cell = grid.nearest_free(min(grid.width - 1, max(0, col)), row)
    style = _s(styles, "selected") if p.selected else _s(styles, "cut") if p.cut else _s(styles, p.kind)
    grid.put(*cell, glyph(p.kind), style)
    return cell


def curve_title(
    x_name: str, slo_ttft_p95_ms: float | None, slo_drawn: bool, width: int, styles: Mapping[str, Style]
) -> Text:
    dim = _s(styles, "dim")
    pieces = [
        piece(("TTFT p95", _s(styles, "strong"))),
        piece((" vs ", dim), (x_name, _s(styles, "strong")), keep=1),
    ]
    if slo_ttft_p95_ms is not None:
        where = "" if slo_drawn else " ↑"  # above the plot
        pieces.append(piece(("  ┄ SLO ", _s(styles, "slo")), (fmt_ms(slo_ttft_p95_ms) + where, dim)))
    return fit_line(pieces, width)


def render_curve(
    steps: Sequence[StepSummary],
    best_step: int | None,
    x_axis: CurveX,
    width: int,
    height: int,
    *,
    slo_ttft_p95_ms: float | None = None,
    styles: Mapping[str, Style] | None = None,
    ghosts: Sequence[tuple[float, float]] = (),
    selected: int | None = None,
) -> Text:
    """TTFT p95 (y) against out tok/s or level (x); the TTFT p95 SLO, when set, as a dashed line; the
    baseline's levels (``ghosts``: x, TTFT p95) as ghosts; ``selected``: the step replay looks at."""
    styles = styles or {}
    dim = _s(styles, "dim")
    points = curve_points(steps, best_step, x_axis, selected) + ghost_points(ghosts)
    x_name = "out tok/s" if x_axis == "out_tok_s" else "level"
    y_hi, slo_drawn = y_scale(points, slo_ttft_p95_ms)
    title = curve_title(x_name, slo_ttft_p95_ms, slo_drawn, width, styles)
    if not points or width < 16 or height < 5:
        why = "needs a finished step" if not points else "too small to draw: a wider terminal or tab 5"
        return Text.assemble(title, ("\n", ""), (why, dim))
    plot_h = height - 3  # title, x axis, x labels
    y_labels = {0: fmt_ms(y_hi)}
    if plot_h >= 6:
        y_labels[plot_h // 2] = fmt_ms(y_hi / 2)
    label_w = max(len(text) for text in y_labels.values())  # "71.2 ms" is wider than "1.01 s"
    gutter = label_w + 2  # the label, a space, the axis
    plot_w = width - gutter
    x_hi = max(p.x for p in points) * 1.05 or 1.0
    fill: dict[int, Cell] = {}
    if slo_drawn and slo_ttft_p95_ms is not None and y_hi > 0:
        slo_row = plot_h - 1 - min(plot_h - 1, round(slo_ttft_p95_ms / y_hi * (plot_h - 1)))
        fill[slo_row] = ("┄", _s(styles, "slo"))
    grid = Grid.empty(plot_w, plot_h, fill)
    draw_points(grid, points, x_hi, y_hi, styles)
    lines = [title]
    for row, cells in enumerate(grid.lines()):
        label = y_labels.get(row, "")
        lines.append(
            Text.assemble((f"{label:>{label_w}} ", dim), ("│", dim), cells, no_wrap=True, overflow="crop")
        )
    axis = Text.assemble(
        (f"{'0':>{label_w}} ", dim), ("└" + "─" * plot_w, dim), no_wrap=True, overflow="crop"
    )
    lines.append(axis)
    x_labels = place_labels(plot_w, [(plot_w, f"{fmt_si(x_hi)} {x_name}", dim), (0, "0", dim)])
    lines.append(Text.assemble(" " * gutter, x_labels, no_wrap=True, overflow="crop"))
    # Crop, never wrap: a wrapped title would push the x axis out of the panel.
    return Text("\n", no_wrap=True, overflow="crop").join(lines[:height])


class CurvePanel(SnapshotPanel):
    COMPONENT_CLASSES = {
        "curve--dim",
        "curve--strong",
        "curve--met",
        "curve--miss",
        "curve--none",
        "curve--best",
        "curve--cut",
        "curve--label",
        "curve--slo",
        "curve--ghost",
        "curve--selected",
        "curve--fit",
    }
    DEFAULT_CSS = """
    CurvePanel > .curve--ghost { color: $text-muted; }
    CurvePanel > .curve--selected { background: $accent-muted; text-style: bold; }
    CurvePanel > .curve--fit { color: $accent; }
    """

    def __init__(
        self, *, id: str | None = None, classes: str | None = None, baseline: LiveBaseline | None = None
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.baseline = baseline

    def ghosts(self, view: ViewState) -> list[tuple[float, float]]:
        return [] if self.baseline is None else self.baseline.curve_points(view.curve_x)

    def matched(self, snapshot: Snapshot) -> bool:
        return self.baseline is None or not self.baseline.warnings(snapshot)

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        return (
            snapshot.search,
            snapshot.steps,
            snapshot.best_step,
            view.curve_x,
            snapshot.slo,
            self.matched(snapshot),
            snapshot.selected,
        )

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        if snapshot.search is not None:  # the SLA search as it forms (tui.knee)
            self.border_title, self.border_subtitle = "Knee search", knee_legend(snapshot.search)
            return
        self.border_title = "Throughput–latency"
        points = curve_points(snapshot.steps, snapshot.best_step, view.curve_x)
        points += ghost_points(self.ghosts(view))
        self.border_subtitle = curve_legend(points, snapshot.slo.ttft_p95_ms, matched=self.matched(snapshot))

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("curve--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        if snapshot.search is not None:
            return render_knee(snapshot.search, width, height, styles)
        return render_curve(
            snapshot.steps,
            snapshot.best_step,
            view.curve_x,
            width,
            height,
            slo_ttft_p95_ms=snapshot.slo.ttft_p95_ms,
            styles=styles,
            ghosts=self.ghosts(view),
            selected=snapshot.selected,
        )

"""The ramp table (one row per finished step, the best step under the SLO highlighted) and the
throughput-latency curve (TTFT p95 against output tok/s or against the level), both from
``Snapshot.steps`` / ``Snapshot.best_step``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich import box
from rich.style import Style
from rich.table import Table
from rich.text import Text

from loadgen.format import fmt_count, fmt_ms, fmt_rate, fmt_si
from loadgen.snapshot import Snapshot, StepSummary
from tui.format import verdict_label
from tui.panel import SnapshotPanel
from tui.plot import place_labels, scatter
from tui.view import CurveX, ViewState


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


def level_text(step: StepSummary) -> str:
    if step.mode == "open":
        return fmt_rate(step.rate_rps).replace(" req/s", "/s")
    return str(step.level)


def render_steps_table(
    steps: Sequence[StepSummary],
    best_step: int | None,
    height: int,
    *,
    styles: Mapping[str, Style] | None = None,
) -> Table | Text:
    """The last rows that fit in ``height`` (header included)."""
    styles = styles or {}
    if not steps:
        return Text("no finished steps yet", style=_s(styles, "dim"))
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), expand=False, show_edge=False, pad_edge=False)
    headers = ("#", "level", "tok/s", "dec p50", "TTFT p50", "TTFT p95", "e2e p95", "err", "SLO")
    for name in headers:
        table.add_column(
            name, justify="left" if name in ("#", "SLO") else "right", no_wrap=True, min_width=len(name)
        )
    visible = max(1, height - 2)
    first = max(0, len(steps) - visible)
    for position in range(first, len(steps)):
        step = steps[position]
        stats = step.stats
        verdict = verdict_label(step.verdict)
        verdict_style = {"met": "good", "miss": "bad"}.get(verdict, "dim")
        row_style = _s(styles, "best") if position == best_step else None
        marker = "★" if position == best_step else " "
        table.add_row(
            f"{marker}{step.index + 1}",
            level_text(step),
            fmt_si(stats.out_tok_s),
            fmt_si(stats.pct("decode_tok_s").p50),
            fmt_ms(stats.pct("ttft_ms").p50),
            fmt_ms(stats.pct("ttft_ms").p95),
            fmt_ms(stats.pct("e2e_ms").p95),
            Text(fmt_count(stats.error_count), style=_s(styles, "bad") if stats.error_count else ""),
            Text(verdict, style=_s(styles, verdict_style)),
            style=row_style,
        )
    return table


SLO_SPAN = 4.0  # the curve's y axis stretches to an SLO up to this many times the highest point


def curve_points(
    steps: Sequence[StepSummary], best_step: int | None, x_axis: CurveX, styles: Mapping[str, Style]
) -> list[tuple[float, float, str, Style]]:
    """(x, TTFT p95, the step's last digit, style) of each step that has both numbers."""
    points = []
    for position, step in enumerate(steps):
        y = step.stats.pct("ttft_ms").p95
        x = (
            step.stats.out_tok_s
            if x_axis == "out_tok_s"
            else float(step.rate_rps or 0 if step.mode == "open" else step.level)
        )
        if x is None or y is None:
            continue
        style = _s(styles, "best") if position == best_step else _s(styles, "point")
        points.append((x, y, str((step.index + 1) % 10), style))
    return points


def render_curve(
    steps: Sequence[StepSummary],
    best_step: int | None,
    x_axis: CurveX,
    width: int,
    height: int,
    *,
    slo_ttft_p95_ms: float | None = None,
    styles: Mapping[str, Style] | None = None,
) -> Text:
    """TTFT p95 (y) against out tok/s or level (x); each step is drawn as its number (last digit) and the
    TTFT p95 SLO, when set, as a dashed horizontal line."""
    styles = styles or {}
    dim = _s(styles, "dim")
    points = curve_points(steps, best_step, x_axis, styles)
    x_name = "out tok/s" if x_axis == "out_tok_s" else "level"
    title = Text.assemble(("TTFT p95 ", _s(styles, "strong")), ("vs ", dim), (x_name, _s(styles, "strong")))
    data_hi = max((p[1] for p in points), default=0.0)
    # The SLO line is drawn when it lies within SLO_SPAN of the data; far above it would flatten every
    # point onto the bottom row, so the curve keeps its shape and the title says where the SLO is.
    slo_drawn = slo_ttft_p95_ms is not None and (not points or slo_ttft_p95_ms <= SLO_SPAN * data_hi)
    if slo_ttft_p95_ms is not None:
        where = "" if slo_drawn else " ↑"  # above the plot
        title.append_text(
            Text.assemble((" ┄ SLO ", _s(styles, "slo")), (fmt_ms(slo_ttft_p95_ms) + where, dim))
        )
    if not points or width < 16 or height < 5:
        return Text.assemble(title, ("\n", ""), ("needs a finished step", dim))
    gutter = 8
    plot_w = width - gutter
    plot_h = height - 3  # title, x axis, x labels
    ys = [p[1] for p in points] + ([slo_ttft_p95_ms] if slo_drawn and slo_ttft_p95_ms is not None else [])
    y_hi = max(ys) * 1.05
    x_hi = max(p[0] for p in points) * 1.05 or 1.0
    fill: dict[int, tuple[str, Style | str]] = {}
    if slo_drawn and slo_ttft_p95_ms is not None and y_hi > 0:
        slo_row = plot_h - 1 - min(plot_h - 1, max(0, round(slo_ttft_p95_ms / y_hi * (plot_h - 1))))
        fill[slo_row] = ("┄", _s(styles, "slo"))
    grid = scatter(points, plot_w, plot_h, x_range=(0.0, x_hi), y_range=(0.0, y_hi), row_fill=fill)
    lines = [title]
    for row, cells in enumerate(grid):
        label = fmt_ms(y_hi) if row == 0 else ""
        lines.append(
            Text.assemble((f"{label:>{gutter - 2}} ", dim), ("│", dim), cells, no_wrap=True, overflow="crop")
        )
    lines.append(
        Text.assemble(
            (f"{'0':>{gutter - 2}} ", dim), ("└" + "─" * plot_w, dim), no_wrap=True, overflow="crop"
        )
    )
    x_labels = place_labels(plot_w, [(plot_w, f"{fmt_si(x_hi)} {x_name}", dim), (0, "0", dim)])
    lines.append(Text.assemble(" " * gutter, x_labels, no_wrap=True, overflow="crop"))
    # Crop, never wrap: a wrapped title would push the x axis out of the panel.
    return Text("\n", no_wrap=True, overflow="crop").join(lines[:height])


class StepsPanel(SnapshotPanel):
    COMPONENT_CLASSES = {"steps--dim", "steps--best", "steps--good", "steps--bad"}

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        return (len(snapshot.steps), snapshot.best_step)

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        best = snapshot.best_step
        self.border_title = "Ramp steps"
        if best is not None and best < len(snapshot.steps):
            step = snapshot.steps[best]
            self.border_subtitle = (
                f"best under SLO: step {step.index + 1} · {fmt_si(step.stats.out_tok_s)} tok/s"
            )
        else:
            self.border_subtitle = "no step under the SLO yet" if snapshot.steps else ""

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Table | Text:
        styles = {name.removeprefix("steps--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return render_steps_table(snapshot.steps, snapshot.best_step, height, styles=styles)


class CurvePanel(SnapshotPanel):
    COMPONENT_CLASSES = {"curve--dim", "curve--strong", "curve--point", "curve--best", "curve--slo"}

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        return (len(snapshot.steps), snapshot.best_step, view.curve_x, snapshot.slo)

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        self.border_title = "Throughput–latency"

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        styles = {name.removeprefix("curve--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return render_curve(
            snapshot.steps,
            snapshot.best_step,
            view.curve_x,
            width,
            height,
            slo_ttft_p95_ms=snapshot.slo.ttft_p95_ms,
            styles=styles,
        )

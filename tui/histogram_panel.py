"""The two HDR histogram panels (left: TTFT by default, right: per-request decode tok/s).

Each reads one ``HistogramView`` from the window the view state picks and hands it to the pure
renderer in ``tui.histogram``; the SLO threshold for the metric is drawn on it, and with a baseline
(``--baseline``) the baseline's p50/p95/p99 of the metric at the load the run is under now, as ghosts; over
the step window, the 95 % intervals of the marked percentiles that the step knows, as bands.
"""

from __future__ import annotations

from rich.text import Text

from loadgen import measures
from loadgen.config import Window
from loadgen.format import fmt_count
from loadgen.snapshot import HistogramView, Snapshot
from tui.baseline import LiveBaseline, current_level
from tui.format import metric_title, slo_threshold, snapshot_phase, window_label
from tui.histogram import GHOST_GLYPH, HistogramStyle, render_histogram
from tui.histogram_bands import marked_intervals
from tui.panel import SnapshotPanel
from tui.view import ViewState


def pick_view(snapshot: Snapshot, window: Window, metric: str) -> HistogramView | None:
    stats = snapshot.windows.get(window)
    return None if stats is None else stats.hist.get(metric)


def why_empty(snapshot: Snapshot | None, window: Window, metric: str) -> str | None:
    """Why ``metric`` has no samples in ``window`` when the reason is not "yet": no request of the window
    called a tool (TTFTC) or reasoned (TTFAT) though requests finished."""
    stats = None if snapshot is None else snapshot.windows.get(window)
    if stats is None or stats.ok == 0:
        return None
    if metric == measures.TTFTC_MS and stats.tool_calls == 0:
        return f"no tool calls were made ({fmt_count(stats.ok)} requests): TTFTC times the first tool call"
    if metric == measures.TTFAT_MS and stats.reasoned == 0:
        return f"no request reasoned ({fmt_count(stats.ok)} requests): TTFAT times the answer after reasoning"
    return None


class HistogramPanel(SnapshotPanel):
    """``side`` is "left" or "right": which of the view state's two metrics this panel shows."""

    COMPONENT_CLASSES = {
        "histogram--bar",
        "histogram--bar-bad",
        "histogram--axis",
        "histogram--label",
        "histogram--value",
        "histogram--p50",
        "histogram--p95",
        "histogram--p99",
        "histogram--slo",
        "histogram--ghost",
    }
    DEFAULT_CSS = """
    HistogramPanel > .histogram--ghost { color: $text-muted; }
    """

    def __init__(
        self,
        side: str,
        *,
        id: str | None = None,
        classes: str | None = None,
        baseline: LiveBaseline | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.side = side
        self.baseline = baseline

    def ghosts(self, snapshot: Snapshot, view: ViewState) -> dict[str, float]:
        return {} if self.baseline is None else self.baseline.percentiles(snapshot, self.metric(view))

    def metric(self, view: ViewState) -> str:
        return view.left_metric if self.side == "left" else view.right_metric

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        metric = self.metric(view)
        return (
            pick_view(snapshot, view.window, metric),
            metric,
            view.window,
            snapshot.slo,
            snapshot.rolling_s,
            snapshot_phase(snapshot.phase, snapshot.warming_up),
            current_level(snapshot) if self.baseline is not None else None,
            marked_intervals(snapshot, view.window, metric),
        )

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        metric = self.metric(view)
        hist = pick_view(snapshot, view.window, metric)
        phase = snapshot_phase(snapshot.phase, snapshot.warming_up)
        self.border_title = f"{metric_title(metric)} · {window_label(view.window, snapshot.rolling_s, phase)}"
        count = f"n={fmt_count(hist.pct.count)}" if hist is not None else "n=0"
        threshold = slo_threshold(snapshot.slo, metric)
        ghost = f"{GHOST_GLYPH} baseline · " if self.ghosts(snapshot, view) else ""
        self.border_subtitle = f"{ghost}{threshold[1]} · {count}" if threshold else ghost + count

    def histogram_style(self) -> HistogramStyle:
        get = self.style_of
        return HistogramStyle(
            bar=get("histogram--bar"),
            bar_bad=get("histogram--bar-bad"),
            axis=get("histogram--axis"),
            label=get("histogram--label"),
            value=get("histogram--value"),
            p50=get("histogram--p50"),
            p95=get("histogram--p95"),
            p99=get("histogram--p99"),
            slo=get("histogram--slo"),
            ghost=get("histogram--ghost"),
        )

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Text:
        metric = self.metric(view)
        return render_histogram(
            pick_view(snapshot, view.window, metric),
            width,
            height,
            threshold=slo_threshold(snapshot.slo, metric),
            higher_is_better=metric.endswith(measures.DECODE_TOK_S),
            style=self.histogram_style(),
            basic=self.basic_glyphs,
            ghosts=self.ghosts(snapshot, view),
            empty=why_empty(snapshot, view.window, metric) or "no samples yet",
            intervals=marked_intervals(snapshot, view.window, metric),
        )

"""Every figure of a report, drawn with matplotlib: the throughput–latency curve, throughput and decode speed
by level, each step's percentile distributions, errors by kind, the server's figures by level.

matplotlib is the ``report`` extra and is imported only inside the functions that draw (``ramp`` starts
without it). Figures are ``matplotlib.figure.Figure`` objects rendered by the Agg (PNG) and SVG backends
directly, never through pyplot's global state. SVG text stays text (``svg.fonttype = none``): small, and
searchable in the page. Numbers on axes and labels are ``loadgen.format``'s.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from loadgen import measures
from loadgen.analysis.curves import LATENCIES, CurvePoint, curve_of, knee_of, percentile_series, slo_limit_ms
from loadgen.analysis.reports import ReportRun
from loadgen.analysis.runs import level_key
from loadgen.format import fmt_ms_short, fmt_num_trimmed, fmt_value_short
from loadgen.snapshot import StepSummary

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "SERVER_PANELS",
    "curve_figure",
    "curve_image",
    "errors_figure",
    "level_figure",
    "percentile_figure",
    "point_label",
    "step_load",
    "server_figure",
    "to_png",
    "to_svg",
]

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
SLO_COLOR = "#d62728"
# (telemetry key, title, scale to the shown unit)
SERVER_PANELS = (
    ("kv_usage_max", "KV cache max, %", 100.0),
    ("running_max", "running max", 1.0),
    ("waiting_max", "waiting max", 1.0),
    ("preemptions", "preemptions", 1.0),
    ("prefix_cache_hit_rate", "prefix cache hits, %", 100.0),
    ("gpu_mem_used_max_mib", "GPU memory max, GiB", 1 / 1024),
    ("gpu_util_mean", "GPU utilisation, %", 1.0),
    ("power_mean_w", "GPU power, W", 1.0),
)


@contextmanager
def _style() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(
        {
            "font.size": 9,
            "axes.titlesize": 10,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "svg.fonttype": "none",
            "font.family": "DejaVu Sans",
        }
    ):
        yield


def _figure(
    width: float, height: float, bottom: float = 0.55, top: float = 0.35, right: float = 0.2
) -> Figure:
    """A figure with fixed margins in inches (a layout engine measures every text: seconds per page)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(
        left=0.75 / width,
        right=1 - right / width,
        bottom=bottom / height,
        top=1 - top / height,
        wspace=0.22,
        hspace=0.55,
    )
    return fig


def to_svg(fig: Figure) -> str:
    """The figure as an ``<svg>`` element, without the XML prolog (to sit inline in HTML)."""
    buffer = io.StringIO()
    with _style():
        fig.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def to_png(fig: Figure, dpi: int = 150) -> bytes:
    buffer = io.BytesIO()
    with _style():
        fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def _axis_numbers(ax: Axes, which: str = "y") -> None:
    """Numbers in the report's look, at most six ticks."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axis = ax.yaxis if which == "y" else ax.xaxis
    axis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: fmt_num_trimmed(value)))


def _label(report: ReportRun, many: bool) -> str:
    return (
        f"{report.run.label}: {report.run.path.rsplit('/', 1)[-1]}"
        if many
        else report.run.path.rsplit("/", 1)[-1]
    )


def _slo_band(ax: Axes, limit: float | None, top: float) -> None:
    """Shade where the SLO is missed; a note instead when the limit is far above every point."""
    if limit is None:
        return
    if limit > 2.5 * top:
        ax.text(0.98, 0.96, f"SLO {fmt_ms_short(limit)}: above the chart", transform=ax.transAxes,
                ha="right", va="top", color=SLO_COLOR, fontsize=8)  # fmt: skip
        return
    high = max(top, limit) * 1.12
    ax.axhspan(limit, high, color=SLO_COLOR, alpha=0.08, lw=0)
    ax.axhline(limit, color=SLO_COLOR, lw=1, ls="--")
    ax.text(0.02, limit, f" SLO {fmt_ms_short(limit)}", transform=ax.get_yaxis_transform(),
            va="bottom", color=SLO_COLOR, fontsize=8)  # fmt: skip
    ax.set_ylim(0, high)


def _curve_panel(ax: Axes, reports: Sequence[ReportRun], latency_at: int) -> None:
    latency = LATENCIES[latency_at]
    top = 0.0
    knees: list[tuple[float, float, str]] = []
    for n, report in enumerate(reports):
        color = COLORS[n % len(COLORS)]
        curve = curve_of(report)
        knee = knee_of(curve)
        points = [p for p in curve if p.out_tok_s is not None and p.latency_ms[latency.key] is not None]
        xs = [p.out_tok_s or 0.0 for p in points]
        ys = [p.latency_ms[latency.key] or 0.0 for p in points]
        top = max([top, *ys])
        ax.plot(xs, ys, "-", color=color, lw=1.5, label=_label(report, len(reports) > 1))
        for x, y, p in zip(xs, ys, points, strict=True):
            ax.plot([x], [y], "o", ms=5, color=color, mfc=color if p.slo_met is not False else "white")
            if len(reports) == 1:
                ax.annotate(point_label(p), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
            if knee is not None and p.level == curve[knee].level:
                ax.plot([x], [y], "o", ms=13, mfc="none", mec="black", mew=1.2)
                knees.append((x, y, f"knee: {p.level.label}"))
            if p.best:
                ax.plot([x], [y], "*", ms=12, color=color, mec="black", mew=0.6)
    _slo_band(ax, slo_limit_ms(reports[0].run.header, latency), top)
    ax.set_title(f"{latency.label} vs output throughput")
    ax.set_xlabel("output tok/s (all streams)")
    ax.set_ylabel(f"{latency.label}, ms")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    _axis_numbers(ax, "x")
    _axis_numbers(ax, "y")
    _knee_labels(ax, knees)


def _knee_labels(ax: Axes, knees: Sequence[tuple[float, float, str]]) -> None:
    """Each knee's label above its ring, on the side with room (the axes are final by now)."""
    right = ax.get_xlim()[1]
    for x, y, text in knees:
        left_half = x < right / 2
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(12 if left_half else -12, 20),
                    ha="left" if left_half else "right", fontsize=8, fontweight="bold")  # fmt: skip


def step_load(step: StepSummary) -> str:
    """A step's load as a short label: '64' streams, '2.5/s' in open loop."""
    if step.mode == "open" and step.rate_rps is not None:
        return f"{fmt_num_trimmed(step.rate_rps)}/s"
    return fmt_num_trimmed(step.level)


def point_label(point: CurvePoint) -> str:
    """A point's level as a short label: '64' streams, '2.5/s' in open loop."""
    load = fmt_num_trimmed(point.level.load)
    return f"{load}/s" if point.level.mode == "open" else load


def curve_figure(reports: Sequence[ReportRun]) -> Figure:
    """Output tok/s against TTFT p95, ITL p99 and e2e p95, each record one line; SLO band, knee, best."""
    with _style():
        many = len(reports) > 1
        fig = _figure(13.0, 4.3 if many else 4.0, bottom=0.95 if many else 0.55, top=0.55)
        axes = fig.subplots(1, len(LATENCIES))
        for at, ax in enumerate(axes):
            _curve_panel(ax, reports, at)
        handles, labels = axes[0].get_legend_handles_labels()
        if len(reports) > 1:
            fig.legend(handles, labels, loc="lower center", ncols=min(4, len(reports)), frameon=False)
        fig.suptitle(
            "Throughput–latency: filled = met the SLO, hollow = missed · ★ best · ◯ knee", fontsize=9
        )
    return fig


def curve_image(reports: Sequence[ReportRun], fmt: str) -> str | bytes:
    """``--format png|svg``: the throughput–latency curve alone."""
    fig = curve_figure(reports)
    return to_png(fig) if fmt == "png" else to_svg(fig)


def _level_x(ax: Axes, points: Sequence[CurvePoint], most: int = 12) -> None:
    """Levels on x (log 2 when they span 8x or more), a tick at each, at most ``most`` of them labelled."""
    loads = sorted({p.level.load for p in points})
    if loads and min(loads) > 0 and max(loads) / min(loads) >= 8:
        ax.set_xscale("log", base=2)
    every = math.ceil(len(loads) / most) if loads else 1
    # label from the top level down, so the heaviest load is always named
    labels = [fmt_num_trimmed(v) if (len(loads) - 1 - at) % every == 0 else "" for at, v in enumerate(loads)]
    ax.set_xticks(loads, labels)
    ax.minorticks_off()
    modes = {p.level.mode == "open" for p in points}
    names = {frozenset({True}): "arrival rate, req/s", frozenset({False}): "concurrency (streams)"}
    ax.set_xlabel(names.get(frozenset(modes), "concurrency (streams) or arrival rate (req/s)"))


def level_figure(reports: Sequence[ReportRun]) -> Figure:
    """Aggregate out tok/s and per-request decode p50 against the level, each record one line."""
    with _style():
        fig = _figure(13.0, 3.6)
        ax_out, ax_dec = fig.subplots(1, 2)
        every: list[CurvePoint] = []
        for n, report in enumerate(reports):
            color = COLORS[n % len(COLORS)]
            points = curve_of(report)
            every.extend(points)
            label = _label(report, len(reports) > 1)
            for ax, value in ((ax_out, "out_tok_s"), (ax_dec, "decode_p50_tok_s")):
                shown = [
                    (p.level.load, p.out_tok_s if value == "out_tok_s" else p.decode_p50_tok_s)
                    for p in points
                ]
                xs = [x for x, y in shown if y is not None]
                ys = [y for _, y in shown if y is not None]
                ax.plot(xs, ys, "o-", color=color, ms=4, lw=1.5, label=label)
        for ax, title in ((ax_out, "output tok/s, all streams"), (ax_dec, "decode tok/s per request, p50")):
            ax.set_title(title)
            ax.set_ylim(bottom=0)
            _level_x(ax, every)
            _axis_numbers(ax)
        if len(reports) > 1:
            ax_out.legend(frameon=False)
    return fig


def _nines(percentile: float, count: int) -> float:
    """Where a percentile sits on a 'nines' axis: 90 -> 1, 99 -> 2; the maximum just past the last."""
    if percentile >= 100:
        return math.log10(max(count, 10)) + 0.15
    return -math.log10(1 - percentile / 100)


def _percentile_panel(ax: Axes, report: ReportRun, metric: str, title: str, unit: str) -> bool:
    from matplotlib import colormaps
    from matplotlib.ticker import FuncFormatter

    steps = report.run.steps
    cmap = colormaps["viridis"]
    right = 0.0
    for at, line in enumerate(report.run.lines):
        series = percentile_series(line, metric)
        if not series:
            continue
        count = steps[at].stats.pct(metric).count
        xs = [_nines(p, count) for p, _ in series]
        right = max(right, xs[-1])
        label = f"{steps[at].index + 1}: {step_load(steps[at])}"
        color = cmap(at / max(1, len(steps) - 1) * 0.9)
        ax.plot(xs, [v for _, v in series], "-", color=color, lw=1.4, label=label)
    ticks = [
        (0.0, "0"),
        (0.301, "50"),
        (1.0, "90"),
        (2.0, "99"),
        (3.0, "99.9"),
        (4.0, "99.99"),
        (5.0, "99.999"),
    ]
    shown = [(x, text) for x, text in ticks if x <= right + 0.05]
    ax.set_xticks([x for x, _ in shown], [text for _, text in shown])
    ax.set_xlim(0, max(right, 1.0) + 0.05)
    ax.set_xlabel("percentile (each line ends at its max)")
    ax.set_title(title)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: fmt_value_short(value, unit)))
    return right > 0


def _ttft_scale(ax: Axes) -> None:
    """Log when the steps' TTFTs span more than 20x (a saturated step would flatten the others)."""
    from matplotlib.ticker import FuncFormatter

    low, high = ax.dataLim.y0, ax.dataLim.y1
    if math.isfinite(low) and math.isfinite(high) and low > 0 and high / low > 20:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: fmt_value_short(value, "ms")))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda _value, _pos: ""))
    else:
        ax.set_ylim(bottom=0)


def percentile_figure(report: ReportRun) -> Figure | None:
    """TTFT and per-request decode speed by percentile, one line per step, from the stored histograms."""
    with _style():
        fig = _figure(13.0, 3.8, right=1.3)
        ax_ttft, ax_dec = fig.subplots(1, 2)
        drew_ttft = _percentile_panel(ax_ttft, report, measures.TTFT_MS, "TTFT by percentile, per step", "ms")
        title = "decode tok/s per request by percentile"
        drew_decode = _percentile_panel(ax_dec, report, measures.DECODE_TOK_S, title, "tok/s")
        _ttft_scale(ax_ttft)
        ax_dec.set_ylim(bottom=0)
        if not (drew_ttft or drew_decode):
            return None
        ax_dec.legend(title="step: level", fontsize=7, title_fontsize=7, frameon=False, loc="center left",
                      bbox_to_anchor=(1.0, 0.5), ncols=1 + len(report.run.steps) // 14)  # fmt: skip
    return fig


def errors_figure(report: ReportRun) -> Figure | None:
    """Errors by kind per step, stacked; None when no step had an error."""
    steps = report.run.steps
    kinds = sorted({k for s in steps for k, n in s.stats.errors.items() if n})
    if not kinds:
        return None
    with _style():
        fig = _figure(13.0, 3.0)
        ax = fig.subplots()
        xs = list(range(len(steps)))
        bottom = [0.0] * len(steps)
        for n, kind in enumerate(kinds):
            counts = [float(s.stats.errors.get(kind, 0)) for s in steps]
            ax.bar(xs, counts, bottom=bottom, color=COLORS[n % len(COLORS)], label=kind, width=0.7)
            bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
        ax.set_xticks(xs, [f"{s.index + 1}\n{step_load(s)}" for s in steps])
        ax.set_xlabel("step / level")
        ax.set_title("errors by kind, per step")
        _axis_numbers(ax)
        ax.legend(frameon=False, fontsize=8)
    return fig


def server_figure(report: ReportRun) -> Figure | None:
    """The server's and GPU's figures per level (those the telemetry had); None without any."""
    points = curve_of(report)
    steps = report.run.steps
    shown = [p for p in SERVER_PANELS if any(s.server and s.server.get(p[0]) is not None for s in steps)]
    if not shown or not points:
        return None
    with _style():
        cols = min(4, len(shown))
        rows = math.ceil(len(shown) / cols)
        fig = _figure(13.0, 2.3 * rows, bottom=0.4, top=0.3)
        axes = fig.subplots(rows, cols, squeeze=False).flatten()
        for ax, (key, title, scale) in zip(axes, shown, strict=False):
            found = [
                (level_key(s).load, float(v) * scale)
                for s in steps
                if s.server and (v := s.server.get(key)) is not None
            ]
            ax.plot([x for x, _ in found], [y for _, y in found], "o-", ms=4, lw=1.4, color=COLORS[0])
            ax.set_title(title)
            ax.set_ylim(bottom=0)
            _level_x(ax, points, most=6)
            ax.set_xlabel("")
            _axis_numbers(ax)
        for ax in axes[len(shown) :]:
            ax.set_visible(False)
    return fig

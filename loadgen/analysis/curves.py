"""What a report plots, as numbers: the throughput–latency curve, its knee, the SLO limits, and each step's
percentile distribution read back from the stored HDR histograms.

Engine-free (a record is all it needs) and plot-free (``loadgen.report.plots`` draws these).

* The curve has one point per level, over its clean steps (a level run several times: the median of its
  repeats): aggregate out tok/s against TTFT p95, ITL p99 and e2e p95, plus per-request decode p50.
* The knee is where latency starts to grow faster than throughput (Kneedle, Satopää et al. 2011): on the
  curve in level order, with both axes scaled to 0..1, the point furthest above the chord from the first
  point to the last (the largest ``throughput - latency``), kept only when that gap is at least
  ``KNEE_MIN_GAP`` and latency beyond it rises to at least ``KNEE_MIN_RISE`` × its value there. A curve
  whose latency stays flat has no knee.
* A percentile series is (percentile, value) pairs from 0 to the highest percentile the step's sample count
  resolves (``1 - p/100 >= 1/count``), then the maximum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loadgen import measures
from loadgen.analysis.reports import ReportRun
from loadgen.analysis.runs import LevelKey, levels_of, spread
from loadgen.metrics import decode_histogram, spec_for
from loadgen.snapshot import StepSummary

__all__ = [
    "KNEE_MIN_GAP",
    "KNEE_MIN_RISE",
    "LATENCIES",
    "CurvePoint",
    "Latency",
    "curve_of",
    "knee_of",
    "percentile_series",
    "slo_limit_ms",
]

KNEE_MIN_GAP = 0.2
KNEE_MIN_RISE = 1.5
PERCENTILES = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 97.5, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999)


@dataclass(frozen=True, slots=True)
class Latency:
    key: str  # as in CurvePoint.latency_ms
    label: str
    metric: str
    point: str
    slo_key: str  # the SLO clause that limits it ("": none)
    slo_scale: float  # SLO value -> ms


def _latencies(
    metrics: tuple[measures.Metric, ...], clauses: tuple[measures.Clause, ...]
) -> tuple[Latency, ...]:
    """Each latency a curve plots (``Metric.curve``), in ms, with the SLO clause on that very figure."""
    out = []
    for m in metrics:
        if not m.curve:
            continue
        limit = next((c for c in clauses if c.metric == m.name and c.point == m.curve), None)
        key, label = f"{m.stem}_{m.curve}_ms", f"{m.short} {m.curve}"
        out.append(
            Latency(
                key, label, m.name, m.curve, "" if limit is None else limit.key, limit.per if limit else 1.0
            )
        )
    return tuple(out)


# The latencies a report's curves plot, from the catalogue: TTFT p95, ITL p99, e2e p95 today.
LATENCIES: measures.Live[Latency] = measures.Live(_latencies)


@dataclass(frozen=True, slots=True)
class CurvePoint:
    level: LevelKey
    steps: tuple[int, ...]  # step numbers (1-based) it stands for
    out_tok_s: float | None
    decode_p50_tok_s: float | None
    latency_ms: Mapping[str, float | None]  # LATENCIES keys
    slo_met: bool | None  # None: no SLO; False when any repeat missed it
    best: bool  # holds the run's best step


def _pct(step: StepSummary, metric: str, point: str) -> float | None:
    return step.stats.pct(metric).as_dict()[point]


def _median(values: Sequence[float | None]) -> float | None:
    found = spread(values)
    return None if found is None else found.median


def curve_of(report: ReportRun) -> list[CurvePoint]:
    """One point per level with clean steps, by load (concurrency or rate)."""
    steps = report.run.steps
    points = []
    for key, level in sorted(levels_of(steps).items()):
        if not level.at:
            continue
        chosen = [steps[at] for at in level.at]
        verdicts = [s.verdict.met for s in chosen]
        met = None if all(v is None for v in verdicts) else all(v is True for v in verdicts)
        points.append(
            CurvePoint(
                level=key,
                steps=tuple(s.index + 1 for s in chosen),
                out_tok_s=_median([s.stats.out_tok_s for s in chosen]),
                decode_p50_tok_s=_median([_pct(s, measures.DECODE_TOK_S, "p50") for s in chosen]),
                latency_ms={
                    lat.key: _median([_pct(s, lat.metric, lat.point) for s in chosen]) for lat in LATENCIES
                },
                slo_met=met,
                best=report.best is not None and report.best in level.at,
            )
        )
    return points


def knee_of(points: Sequence[CurvePoint], latency: str = "ttft_p95_ms") -> int | None:
    """Position in ``points`` of the knee on the ``latency`` curve (see the module's docstring), or None."""
    known = [
        (at, p.out_tok_s, p.latency_ms.get(latency))
        for at, p in enumerate(points)
        if p.out_tok_s is not None and p.latency_ms.get(latency) is not None
    ]
    if len(known) < 3:
        return None
    xs = [float(x) for _, x, _ in known if x is not None]
    ys = [float(y) for _, _, y in known if y is not None]
    x_span, y_span = max(xs) - min(xs), max(ys) - min(ys)
    if x_span <= 0 or y_span <= 0:
        return None
    gaps = [(x - min(xs)) / x_span - (y - min(ys)) / y_span for x, y in zip(xs, ys, strict=True)]
    best = max(range(len(gaps)), key=lambda i: gaps[i])
    later = ys[best + 1 :]
    if gaps[best] < KNEE_MIN_GAP or not later or max(later) < KNEE_MIN_RISE * ys[best]:
        return None
    return known[best][0]


def slo_limit_ms(header: Mapping[str, object], latency: Latency) -> float | None:
    """The run's SLO limit on ``latency``, in ms; None when the SLO does not limit it."""
    slo = header.get("slo")
    value = slo.get(latency.slo_key) if isinstance(slo, Mapping) and latency.slo_key else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return float(value) * latency.slo_scale


def percentile_series(line: Mapping[str, object], metric: str) -> list[tuple[float, float]]:
    """(percentile, value in display units) of ``metric``'s stored histogram in a step line; [] without one."""
    hists = line.get("hists")
    b64 = hists.get(metric) if isinstance(hists, Mapping) else None
    if not isinstance(b64, str) or not b64:
        return []
    hist = decode_histogram(b64)
    count = hist.get_total_count()
    if count <= 0:
        return []
    wanted = [p for p in PERCENTILES if (1 - p / 100) * count >= 1]
    values = hist.get_percentile_to_value_dict(wanted)
    div = spec_for(metric).display_div
    series = [(p, values[p] / div) for p in wanted]
    series.append((100.0, hist.get_max_value() / div))
    return series

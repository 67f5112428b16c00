"""The console's margins of error: a step figure's 95 % interval as text beside the figure (``±6 %``).

A finished step's ``StepSummary.margins`` (``loadgen.metrics.slices``) holds an interval for each step-line
percentile and rate, named as the step line names them (``ttft_p95_ms``, ``out_tok_s``). Here they become
the short text the console shows after a figure: ``±6 %`` (the half-width as a share of the figure),
``±6 %?`` when the interval is not trusted (too few batches or values beyond the percentile: the step
detail says why), nothing when the step has no interval for the figure (a record from before margins).
``live_text`` says the same of the step measuring now (``Snapshot.live_margins``), with ``--precision``'s
target and about how long until it is reached ('±5 % in ≈12 s'). Pure: no widget, no app.
"""

from __future__ import annotations

from collections.abc import Mapping

from loadgen import measures
from loadgen.format import fmt_ms, fmt_si
from loadgen.metrics.slices import figure_name
from loadgen.snapshot import METRICS, Snapshot
from loadgen.stats import Interval

__all__ = [
    "UNTRUSTED_MARK",
    "about",
    "live_text",
    "margin_of",
    "margin_pct",
    "margin_text",
    "untrusted_lines",
]

UNTRUSTED_MARK = "?"


def margin_pct(share: float) -> str:
    """0.062 -> '6 %', 0.004 -> '0.4 %', 0.0004 -> '<0.1 %'."""
    pct = share * 100
    if pct < 0.1:
        return "<0.1 %"
    return f"{pct:.1f} %" if pct < 0.95 else f"{pct:.0f} %"


def margin_text(interval: Interval | None) -> str:
    """'±6 %' for a trusted interval, '±6 %?' for one not trusted, '−6 %/+?' for one open above (too few
    values to bound a tail), '' without one."""
    if interval is not None and interval.open_above and interval.lo is not None and interval.value:
        return (
            f"−{margin_pct(max(0.0, interval.value - interval.lo) / abs(interval.value))}/+{UNTRUSTED_MARK}"
        )
    share = None if interval is None else interval.rel_half_width
    if interval is None or share is None:
        return ""
    return f"±{margin_pct(share)}{'' if interval.trusted else UNTRUSTED_MARK}"


def margin_of(margins: Mapping[str, Interval], figure: str) -> str:
    """The text of ``figure``'s margin (``ttft_p95_ms``), with a leading space; '' without one."""
    text = margin_text(margins.get(figure))
    return f" {text}" if text else ""


def untrusted_lines(margins: Mapping[str, Interval]) -> list[str]:
    """'ttft_p99_ms: 3 values beyond p99 (8 needed)' for each interval not trusted, in the step line's order."""
    return [
        f"{name}: {iv.why or 'not trusted'}"
        for name, iv in margins.items()
        if not iv.trusted and iv.lo is not None
    ]


def about(seconds: float) -> str:
    """An estimate's time, rounded as one: '40 s', '3 min', '2 h'."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3600)} h"


def _labels() -> dict[str, tuple[str, str]]:
    """Each SLO figure's step-line name -> (its clause's label, its metric): 'ttft_p95_ms' -> ('TTFT p95', ...)."""
    return {figure_name(c.metric, c.point): (c.label, c.metric) for c in measures.CLAUSES if c.metric}


def live_text(snapshot: Snapshot) -> str:
    """The measuring step's margins so far: 'TTFT p95 412 ms ±6 % · out ±3 %', and under --precision how
    far it is from its target: '· ±5 % in ≈12 s' ('±5 % reached'; '→ ±5 %' while no estimate can be made);
    '' between windows."""
    margins = snapshot.live_margins
    if not margins:
        return ""
    labels = _labels()
    parts = []
    for name, iv in margins.items():
        text = margin_text(iv)
        if not text:
            continue
        if name in labels:
            label, metric = labels[name]
            unit = METRICS.get(metric, "")
            value = fmt_ms(iv.value) if unit == "ms" else f"{fmt_si(iv.value)} {unit}"
            parts.append(f"{label} {value} {text}")
        else:
            parts.append(f"{name.removesuffix('_tok_s').replace('_', ' ')} {text}")
    if snapshot.precision is not None:
        pct, eta = snapshot.precision.pct, snapshot.precision.eta_s
        target = f"±{margin_pct(pct / 100)}"
        if eta is None:
            parts.append(f"→ {target}")
        elif eta <= 0:
            parts.append(f"{target} reached")
        else:
            parts.append(f"{target} in ≈{about(eta)}")
    return " · ".join(parts)

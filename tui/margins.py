"""The console's margins of error: a step figure's 95 % interval as text beside the figure (``±6 %``).

A finished step's ``StepSummary.margins`` (``loadgen.metrics.slices``) holds an interval for each step-line
percentile and rate, named as the step line names them (``ttft_p95_ms``, ``out_tok_s``). Here they become
the short text the console shows after a figure: ``±6 %`` (the half-width as a share of the figure),
``±6 %?`` when the interval is not trusted (too few batches or values beyond the percentile: the step
detail says why), nothing when the step has no interval for the figure (a record from before margins).
Pure: no widget, no app.
"""

from __future__ import annotations

from collections.abc import Mapping

from loadgen.stats import Interval

__all__ = ["UNTRUSTED_MARK", "margin_of", "margin_pct", "margin_text", "untrusted_lines"]

UNTRUSTED_MARK = "?"


def margin_pct(share: float) -> str:
    """0.062 -> '6 %', 0.004 -> '0.4 %', 0.0004 -> '<0.1 %'."""
    pct = share * 100
    if pct < 0.1:
        return "<0.1 %"
    return f"{pct:.1f} %" if pct < 0.95 else f"{pct:.0f} %"


def margin_text(interval: Interval | None) -> str:
    """'±6 %' for a trusted interval, '±6 %?' for one not trusted, '' without one."""
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

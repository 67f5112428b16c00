"""The margins of error in ramp's Prometheus exposition (``loadgen.observe.exporter``): each figure of a step
with its 95 % interval, for every finished step (its step line's ``margins``) and for the step measuring now
(``Snapshot.live_margins``), and ``--precision``'s target with the time left to it.

A figure is named as the step line names it (label ``figure``: ``ttft_p95_ms``, ``decode_p50_tok_s``,
``out_tok_s``), its value in the unit its name ends with, as in the record: one family per end of the
interval rather than one per figure keeps the exposition's names fixed whatever figures a run measures. The
finished steps' series stay for the run, as ``ramp_step_start_timestamp_seconds`` does, so a scrape that
missed a step still reads its figures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric

from loadgen.snapshot import Snapshot
from loadgen.stats import Interval

__all__ = ["margin_families"]

ENDS: tuple[tuple[str, str, Callable[[Interval], float | None]], ...] = (
    ("", "value", lambda iv: iv.value),
    ("_lower", "lower end of its 95 % interval", lambda iv: iv.lo),
    ("_upper", "upper end of its 95 % interval", lambda iv: iv.hi),
)
UNIT = "in the unit its name ends with (ms, tok_s)"


def _families(
    base: str, doc: str, labels: list[str], rows: Iterable[tuple[list[str], Mapping[str, Interval]]]
) -> Iterator[Metric]:
    rows = list(rows)
    for suffix, what, read in ENDS:
        family = GaugeMetricFamily(f"{base}{suffix}", f"{doc}: {what}, {UNIT}", labels=[*labels, "figure"])
        for values, margins in rows:
            for figure, iv in margins.items():
                value = read(iv)
                if value is not None:
                    family.add_metric([*values, figure], float(value))
        yield family
    trusted = GaugeMetricFamily(
        f"{base}_trusted",
        f"{doc}: 1 when its interval can be trusted (enough batches and tail values)",
        labels=[*labels, "figure"],
    )
    for values, margins in rows:
        for figure, iv in margins.items():
            if iv.lo is not None and iv.hi is not None:
                trusted.add_metric([*values, figure], 1.0 if iv.trusted else 0.0)
    yield trusted


def margin_families(snap: Snapshot) -> Iterator[Metric]:
    """Every finished step's figures with their intervals (label ``step``: the record's step number), the
    measuring step's so far, and --precision's target and estimated time left."""
    finished = [([str(step.index + 1)], step.margins) for step in snap.steps if step.margins]
    yield from _families("ramp_step_figure", "a finished step's figure", ["step"], finished)
    yield from _families(
        "ramp_live_figure", "the measuring step's figure so far", [], [([], snap.live_margins)]
    )
    if snap.precision is not None:
        target = GaugeMetricFamily(
            "ramp_precision_target_ratio", "--precision: the half-width aimed at, 0..1"
        )
        target.add_metric([], snap.precision.pct / 100)
        yield target
        if snap.precision.eta_s is not None:
            eta = GaugeMetricFamily(
                "ramp_precision_eta_seconds",
                "--precision: about how long until every live figure is within it",
            )
            eta.add_metric([], snap.precision.eta_s)
            yield eta

"""The margins of error in ramp's Prometheus exposition (``loadgen.observe.exporter``): each figure of a step
with its 95 % interval, for every finished step (its step line's ``margins``) and for the step measuring now
(``Snapshot.live_margins``), and ``--precision``'s target with the time left to it.

A figure is named as the step line names it (label ``figure``: ``ttft_p95_ms``, ``decode_p50_tok_s``,
``out_tok_s``), its value in the unit its name ends with, as in the record: one family per end of the
interval rather than one per figure keeps the exposition's names fixed whatever figures a run measures. The
finished steps' series stay for the run, as ``ramp_step_start_timestamp_seconds`` does, so a scrape that
missed a step still reads its figures.

A step with answer probes (``--quality``) adds its answer agreement as figure ``quality_agree`` (and, with
verifiable tasks, ``quality_tasks_ok``), a share 0..1 with its Wilson 95 % interval, and
``ramp_step_quality_probes`` counts its probes compared and failed (apart from the load's errors).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric

from loadgen import measures
from loadgen.snapshot import Snapshot, StepSummary
from loadgen.stats import Interval

__all__ = ["margin_families"]

ENDS: tuple[tuple[str, str, Callable[[Interval], float | None]], ...] = (
    ("", "value", lambda iv: iv.value),
    ("_lower", "lower end of its 95 % interval", lambda iv: iv.lo),
    ("_upper", "upper end of its 95 % interval", lambda iv: iv.hi),
)
UNIT = "in the unit its name ends with (ms, tok_s; quality_*: a share 0..1)"
QUALITY_TASKS_OK = "quality_tasks_ok"  # the share of verifiable tasks passed (--quality-tasks)


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
            if iv.lo is not None:  # an interval open above (too few values) is there, and not trusted
                trusted.add_metric([*values, figure], 1.0 if iv.trusted else 0.0)
    yield trusted


def _share(q: Mapping[str, object], key: str) -> Interval | None:
    """``q[key]`` (a share) with its Wilson interval ``key_lo``/``key_hi`` (always trusted: exact counts)."""
    value, lo, hi = (q.get(k) for k in (key, f"{key}_lo", f"{key}_hi"))
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    ends = [float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None for v in (lo, hi)]
    return Interval(float(value), ends[0], ends[1], trusted=None not in ends)


def step_figures(step: StepSummary) -> dict[str, Interval]:
    """A finished step's figures with their intervals: its margins, and its answer probes' shares."""
    figures = dict(step.margins)
    for figure, key in ((measures.QUALITY_AGREE, "agree"), (QUALITY_TASKS_OK, "tasks_ok")):
        found = _share(step.quality, key)
        if found is not None:
            figures[figure] = found
    return figures


def probe_counts(steps: Iterable[StepSummary]) -> Metric:
    """Each finished step's answer probes: compared with their reference, and failed (no answer)."""
    family = GaugeMetricFamily(
        "ramp_step_quality_probes",
        "a finished step's answer probes (--quality), by outcome: compared or failed",
        labels=["step", "outcome"],
    )
    for step in steps:
        for outcome, key in (("compared", "n"), ("failed", "errors")):
            count = step.quality.get(key) if step.quality else None
            if isinstance(count, int) and not isinstance(count, bool):
                family.add_metric([str(step.index + 1), outcome], float(count))
    return family


def margin_families(snap: Snapshot) -> Iterator[Metric]:
    """Every finished step's figures with their intervals (label ``step``: the record's step number), the
    measuring step's so far, and --precision's target and estimated time left."""
    finished = [([str(step.index + 1)], figures) for step in snap.steps if (figures := step_figures(step))]
    yield from _families("ramp_step_figure", "a finished step's figure", ["step"], finished)
    if any(step.quality for step in snap.steps):
        yield probe_counts(snap.steps)
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

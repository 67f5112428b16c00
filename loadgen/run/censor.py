"""A step a key cut, read again with the key's requests censored (issue 32).

A key changes the load at once: the requests the running step had in flight finish under the next load (its
``carried_share``), while the next level settles and warms up. The step's figures stay those of every
request it sent, as a planned step's are (within a few per cent of the same level alone: docs/numbers.md,
"A step set by a key"). To know whether the carried requests could have changed what the step says, it is
read a second time on the requests done *before* the key — their whole life at its level — with the ones in
flight at the key censored there (left out: each is known only to have lasted longer than it had run).
Output tokens per second need no second reading: they count the tokens that arrived inside the window.

When the SLO's verdict on that reading is the verdict on all the step's requests (or there is no SLO and
the reading has requests), the carried ones decided nothing: the step counts as clean, so it may be the
run's best. Its record line keeps the reading under ``before_key``: how many requests were done before the
key and how many it caught, the reading's verdict, whether it agrees, and its main percentiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadgen import measures
from loadgen.config import SLO
from loadgen.metrics import Accumulator, IntervalDelta
from loadgen.slo import evaluate
from loadgen.snapshot import WindowStats

# the percentiles a reading keeps: (metric, point)
SHOWN: tuple[tuple[str, str], ...] = (
    (measures.TTFT_MS, "p50"),
    (measures.TTFT_MS, "p95"),
    (measures.ITL_MS, "p50"),
    (measures.E2E_MS, "p50"),
    (measures.E2E_MS, "p95"),
)


def whole_life(acc: Accumulator, after_cut: Sequence[IntervalDelta]) -> Accumulator:
    """``acc`` less the deltas shipped after the cut: the requests done before the key (and the tokens that
    arrived inside the window, which late deltas never carry)."""
    before = Accumulator()
    before.merge(acc)
    for delta in after_cut:
        before.subtract(delta)
    return before


def agrees(slo: SLO, every: WindowStats, before: WindowStats) -> bool:
    """The carried requests decide nothing: the SLO's point verdict on the requests done before the key is
    its verdict on all of them; without an SLO, the reading holds at least one success."""
    if slo.is_empty():
        return before.ok > 0
    return evaluate(slo, before).met == evaluate(slo, every).met


def before_key(
    slo: SLO,
    acc: Accumulator,
    after_cut: Sequence[IntervalDelta],
    every: WindowStats,
    window_s: float,
    carried: int,
) -> Mapping[str, object]:
    """The reading of a cut step on the requests done before the key (the record's ``before_key``)."""
    before = whole_life(acc, after_cut).stats("step", window_s)
    reading: dict[str, object] = {
        "ok": before.ok,
        "carried": carried,
        "slo_met": evaluate(slo, before).met if not slo.is_empty() else None,
        "agrees": agrees(slo, every, before),
    }
    for metric, point in SHOWN:
        value = before.pct(metric).as_dict()[point]
        reading[f"{metric}_{point}"] = None if value is None else round(float(value), 3)
    return reading

"""Margins of error: intervals for percentiles and rates under correlation, three-valued verdicts, and the
intervals of differences and of repeats combined. A leaf: numpy and the standard library only, nothing of
the run (``loadgen.metrics.slices`` feeds it a step's time slices)."""

from loadgen.stats.combine import combine, difference, difference_bounds
from loadgen.stats.decide import Decision, Verdict, decide, seconds_to_precision
from loadgen.stats.intervals import (
    LEVEL,
    MAX_BATCHES,
    MIN_BATCHES,
    MIN_TAIL,
    Interval,
    batch_sums,
    clustered,
    quantile_interval,
    ratio_interval,
)
from loadgen.stats.tdist import t_quantile, two_sided

__all__ = [
    "LEVEL",
    "MAX_BATCHES",
    "MIN_BATCHES",
    "MIN_TAIL",
    "Decision",
    "Interval",
    "Verdict",
    "batch_sums",
    "clustered",
    "combine",
    "decide",
    "difference",
    "difference_bounds",
    "quantile_interval",
    "ratio_interval",
    "seconds_to_precision",
    "t_quantile",
    "two_sided",
]

"""Intervals for a step's percentiles and rates that stay honest when its requests are correlated.

A closed-loop step's requests share the server's state over time (a slow second slows every request in
it) and a request's tokens share its fate, so no figure may be treated as if its samples were independent.
The method here is batch means over time slices of the step's window:

* the window is cut into slices (``loadgen.metrics.slices``: every value lands in the slice in which its
  request finished, so all the ITL samples of one request lie in one slice: clustered by request, never per
  token);
* slices are grouped into ``batches`` consecutive batches (at most ``MAX_BATCHES``); while the batches'
  residuals are still correlated from one batch to the next (lag-1 autocorrelation above its 5 % critical
  value), neighbours are merged and the number of batches halves, down to ``MIN_MERGED`` (an interval
  merged below ``MIN_BATCHES`` is wider and flagged untrusted: correlation outlasts the step);
* a **rate** (out tok/s, req/s, goodput) is a ratio of sums, Σ amount / Σ seconds: its variance is the
  ratio estimator's, from each batch's residual ``amount_b - R * seconds_b``;
* a **percentile** ``q_p`` is read from the pooled histogram; its interval comes from the variance of the
  pooled CDF at ``q_p`` (each batch's count at or below ``q_p`` against its size, the same ratio
  estimator), mapped back through the pooled quantile function: ``[Q(p - t*se), Q(p + t*se)]``, the lower end
  read at its bucket's lowest value and the upper at its highest (the histogram's resolution is part of the
  interval). A batch's own percentile is never used, so a p99 needs no tail in every batch. When
  ``p + t*se`` lies past the largest value (a p99 of 100 values), the data cannot bound the percentile from
  above: the interval is **open above** (``hi`` None, ``lo`` kept): "p99 >= lo", never the largest value
  seen, which covered a 5-s step's true p99 in about half the steps. ``need`` says about how many values
  would close it;
* the multiplier is Student's t with ``batches - 1`` degrees of freedom.

An interval is **not trusted** (``Interval.trusted`` false, ``why`` says why) with fewer than
``MIN_BATCHES`` batches, a percentile's values crowded into fewer than ``MIN_WORTH`` of that many batches'
worth (Kish's effective count: a window shorter than its requests' life holds them all in its last slice), too
few values beyond the percentile (``MIN_TAIL``), or an open upper end. ``docs/measurement.md`` states the assumptions and where the method fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from loadgen.stats.tdist import two_sided

__all__ = [
    "LEVEL",
    "MAX_BATCHES",
    "MIN_BATCHES",
    "MIN_TAIL",
    "Interval",
    "batch_sums",
    "clustered",
    "quantile_interval",
    "ratio_interval",
]

FloatArray = npt.NDArray[np.float64]

LEVEL = 0.95
MAX_BATCHES = 32
MIN_BATCHES = 8
MIN_CLUSTERS = 8  # a closed loop's streams needed to read a rate's spread across them (``clustered``)
MIN_MERGED = 4  # merging for correlation stops here (such an interval is not trusted)
# values beyond a percentile (on its far side) that its interval needs to be trusted
MIN_TAIL = 8
# a percentile's values spread over at least this share of ``MIN_BATCHES`` batches' worth (Kish's effective
# count of the batches, weighted by their values) for its interval to be trusted
MIN_WORTH = 0.5


@dataclass(frozen=True, slots=True)
class Interval:
    """A figure with its two-sided ``level`` interval; ``lo``/``hi`` None when none could be formed."""

    value: float
    lo: float | None
    hi: float | None
    batches: int = 0
    n: int = 0  # the values (or seconds' worth of slices) behind it
    df: float = 0.0  # degrees of freedom of the multiplier
    trusted: bool = False
    why: str = ""  # why it is not trusted
    level: float = LEVEL
    need: int = 0  # open above: about how many values would bound it from above (0: not open, or unknown)
    top: float | None = None  # open above: the largest value seen (where a verdict far from a limit looks)

    @property
    def open_above(self) -> bool:
        """Bounded below only: the data cannot say how high the figure may be (``hi`` None, ``lo`` known)."""
        return self.lo is not None and self.hi is None

    @property
    def half_width(self) -> float | None:
        if self.lo is None or self.hi is None:
            return None
        return (self.hi - self.lo) / 2

    @property
    def rel_half_width(self) -> float | None:
        """The half-width as a share of the value (0.05 = ±5 %); None without an interval or a value."""
        half = self.half_width
        if half is None or self.value == 0:
            return None
        return half / abs(self.value)

    @property
    def se(self) -> float | None:
        """The standard error the interval implies (its half-width over its multiplier)."""
        half = self.half_width
        if half is None or self.df <= 0:
            return None
        return half / two_sided(self.level, self.df)

    def contains(self, x: float) -> bool:
        """``x`` within the interval (an open upper end holds every value at or above ``lo``)."""
        if self.lo is None:
            return False
        return self.lo <= x if self.hi is None else self.lo <= x <= self.hi


def batch_sums(rows: npt.NDArray[np.float64], batches: int) -> FloatArray:
    """Consecutive slices summed into ``batches`` groups of (nearly) equal numbers of slices."""
    n = rows.shape[0]
    starts = (np.arange(batches) * n) // batches
    return np.add.reduceat(rows, starts, axis=0).astype(np.float64)


def _lag1(e: FloatArray) -> float:
    denom = float(np.dot(e, e))
    if denom <= 0 or e.size < 3:
        return 0.0
    return float(np.dot(e[:-1], e[1:])) / denom


def _choose_batches(residuals: FloatArray, max_batches: int, merge_to: int) -> tuple[int, FloatArray]:
    """The number of batches and their residual sums: merged while neighbours stay correlated."""
    b = min(residuals.size, max_batches)
    if b < 2:
        return b, batch_sums(residuals, max(b, 1))
    e = batch_sums(residuals, b)
    while b >= 2 * merge_to and _lag1(e) > 1.645 / math.sqrt(b):
        b //= 2
        e = batch_sums(residuals, b)
    return b, e


def ratio_interval(
    amounts: npt.ArrayLike,
    seconds: npt.ArrayLike,
    level: float = LEVEL,
    *,
    max_batches: int = MAX_BATCHES,
    min_batches: int = MIN_BATCHES,
    merge_to: int = MIN_MERGED,
) -> Interval:
    """Σ amounts / Σ seconds over time slices (a rate), with its batch-means interval. ``min_batches``: the
    fewest batches an interval is trusted with; ``merge_to``: the fewest that merging for correlation leaves."""
    num = np.asarray(amounts, dtype=np.float64)
    den = np.asarray(seconds, dtype=np.float64)
    total = float(den.sum())
    if num.size == 0 or total <= 0:
        return Interval(math.nan, None, None, why="no window")
    rate = float(num.sum()) / total
    b, e = _choose_batches(num - rate * den, max_batches, merge_to)
    if b < 2:
        return Interval(rate, None, None, batches=b, n=num.size, why="one batch")
    se = math.sqrt(b / (b - 1) * float(np.dot(e, e))) / total
    t = two_sided(level, b - 1)
    why = "" if b >= min_batches else f"{b} batches"
    return Interval(rate, rate - t * se, rate + t * se, b, num.size, b - 1, not why, why, level)


def clustered(
    iv: Interval, amounts: npt.ArrayLike, level: float = LEVEL, min_clusters: int = MIN_CLUSTERS
) -> Interval:
    """``iv`` (a rate's interval, ``Σ amounts / seconds``) widened, never narrowed, to the interval the
    ``amounts`` of independent clusters give: a closed loop's streams, each the total its requests did in the
    window. The streams share the server (a common shock, which the batch means see) but each runs its own
    renewal process: how many requests a stream starts in a window varies by about ``sqrt(W σ²/μ³)`` for
    requests of mean μ and spread σ, a variance spread evenly over the window, which time slices shorter
    than a request's life hide (neighbouring slices share its requests). The spread of the streams' totals
    reads it directly: ``se(Σ) = sqrt(n/(n-1) Σ (a_i - ā)²)``, with Student's t on ``n - 1`` degrees of
    freedom. Fewer than ``min_clusters`` streams, or no interval to widen: ``iv`` as it is."""
    a = np.asarray(amounts, dtype=np.float64)
    n = a.size
    total = float(a.sum())
    half = iv.half_width
    if n < min_clusters or half is None or total <= 0 or iv.value == 0:
        return iv
    se_rel = math.sqrt(n / (n - 1) * float(np.sum((a - a.mean()) ** 2))) / total
    wide = two_sided(level, n - 1) * se_rel * abs(iv.value)
    if wide <= half:
        return iv
    return replace(iv, lo=max(0.0, iv.value - wide), hi=iv.value + wide, df=n - 1)


def _read(cum: npt.NDArray[np.int64], total: int, prob: float) -> int:
    """The bin holding the ``prob`` quantile: the target rule of ``HdrHistogram`` (and ``summarize``)."""
    target = min(max(int(prob * total + 0.5), 1), total)
    return int(np.searchsorted(cum, target, side="left"))


def _largest(c: npt.NDArray[np.int64], cum: npt.NDArray[np.int64], hi_val: FloatArray) -> float:
    """The highest value of the highest bin that holds one."""
    return float(hi_val[-1] if c[:, -1].any() else hi_val[int(np.searchsorted(cum, int(cum[-1])))])


def _upper(
    c: npt.NDArray[np.int64],
    cum: npt.NDArray[np.int64],
    hi_val: FloatArray,
    p: float,
    p_hi: float,
    n_eff: float,
    level: float,
    reasons: list[str],
) -> tuple[float | None, int]:
    """The interval's upper end (None: open above) and, open, about how many values would bound it."""
    total = int(cum[-1])
    if p_hi * total <= total - 0.5:
        return float(hi_val[_read(cum, total, p_hi)]), 0
    if p**n_eff <= (1 - level) / 2:
        # past the normal approximation's reach, but enough values that the largest bounds it: were the true
        # quantile below it, all n_eff (independent-worth) values would lie under it with chance p^n_eff
        reasons.append("upper end at the largest value")
        return _largest(c, cum, hi_val), 0
    # the data cannot bound it from above: how many values would (n_eff grows with the count)
    need = max(math.ceil(math.log((1 - level) / 2) / math.log(p) * total / max(n_eff, 1.0)), total + 1)
    reasons.append(f"open above: {total} values, about {need} would bound it")
    return None, need


def _worth(per_slice: npt.NDArray[np.int64], b: int) -> float:
    """How many batches the values are worth (Kish's effective count, the batches weighted by their values):
    ``b`` when spread evenly, 1 when all lie in one. A held step's requests that finish after its window all
    land in its last slice, so a window shorter than its requests' life holds them all there: the other
    batches' residuals are nothing, their spread nothing, and an interval read from them was as narrow as the
    histogram's bucket (two 4-s probes of 104 streams of 5-s requests read decode p50 63.5 (61.6-66.7) and
    73.6 (73.0-74.6)). A percentile's multiplier and its trust go by this count."""
    sizes = batch_sums(per_slice.astype(np.float64), b)
    return min(float(b), float(sizes.sum()) ** 2 / float(np.dot(sizes, sizes)))


def quantile_interval(
    counts: npt.ArrayLike,
    upper: npt.ArrayLike,
    p: float,
    level: float = LEVEL,
    *,
    lower: npt.ArrayLike | None = None,
    max_batches: int = MAX_BATCHES,
    min_batches: int = MIN_BATCHES,
    min_tail: int = MIN_TAIL,
    merge_to: int = MIN_MERGED,
) -> Interval:
    """The ``p`` quantile (0 < p < 1) of histograms per time slice, with its batch-means interval.

    ``counts``: one row per slice, one column per bin, bins in increasing order of value; ``upper``: each
    bin's highest value (what the quantile reads, as ``loadgen.metrics.hdr.summarize`` does), ``lower``
    its lowest (where the interval's lower end is read; ``upper`` when not given)."""
    c = np.asarray(counts, dtype=np.int64)
    if c.ndim != 2:
        raise ValueError(f"counts must be slices x bins, got shape {c.shape}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile must lie in (0, 1), got {p}")
    hi_val = np.asarray(upper, dtype=np.float64)
    lo_val = hi_val if lower is None else np.asarray(lower, dtype=np.float64)
    per_slice = c.sum(axis=1)
    total = int(per_slice.sum())
    if total == 0:
        return Interval(math.nan, None, None, why="no values")
    cum = np.cumsum(c.sum(axis=0))
    j = _read(cum, total, p)
    value = float(hi_val[j])
    below = c[:, : j + 1].sum(axis=1).astype(np.float64)
    share = float(cum[j]) / total
    b, e = _choose_batches(below - share * per_slice, max_batches, merge_to)
    if b < 2:
        return Interval(value, None, None, batches=b, n=total, why="one batch")
    worth = _worth(per_slice, b)
    if worth < 2:
        return Interval(value, None, None, batches=b, n=total, why=f"values in {worth:.1f} batches' worth")
    se = math.sqrt(b / (b - 1) * float(np.dot(e, e))) / total
    t = two_sided(level, worth - 1)
    # the values' worth as independent ones, from the spread the batches show (never more than there are)
    n_eff = total if se <= 0 else min(float(total), p * (1 - p) / se**2)
    # a histogram's own resolution: the true quantile lies somewhere in the bucket it was read from
    se = max(se, 0.5 / total)
    p_lo, p_hi = p - t * se, p + t * se
    lo = float(lo_val[_read(cum, total, p_lo)]) if p_lo > 0 else float(lo_val[int(np.flatnonzero(cum)[0])])
    reasons: list[str] = []
    hi, need = _upper(c, cum, hi_val, p, p_hi, n_eff, level, reasons)
    top = None if hi is not None else _largest(c, cum, hi_val)
    if b < min_batches:
        reasons.append(f"{b} batches")
    elif worth < min_batches * MIN_WORTH:
        reasons.append(f"values in {worth:.1f} of {b} batches' worth")
    if total * min(p, 1 - p) < min_tail:
        reasons.append(f"{total} values")
    return Interval(value, lo, hi, b, total, worth - 1, not reasons, ", ".join(reasons), level, need, top)

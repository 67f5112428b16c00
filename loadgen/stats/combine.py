"""Intervals of a difference and of repeats combined: what ``ramp compare`` calls a difference on.

A difference ``a - b`` of two independent figures has the standard error ``sqrt(se_a^2 + se_b^2)`` and
Welch-Satterthwaite's degrees of freedom. Repeats of one step combine by a random-effects mean
(DerSimonian-Laird): each repeat weighted by one over its own variance plus the between-repeat variance
``tau^2``, estimated from how far the repeats lie apart beyond their own intervals, so that repeats which
disagree widen the combined interval instead of being averaged into false precision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from loadgen.stats.intervals import LEVEL, Interval
from loadgen.stats.tdist import two_sided

__all__ = ["combine", "difference", "difference_bounds"]


def _se(iv: Interval) -> float | None:
    se = iv.se
    return None if se is None or math.isnan(iv.value) else se


def difference(a: Interval, b: Interval, level: float = LEVEL) -> Interval:
    """``a - b`` with its interval (None ends when either side has none)."""
    value = a.value - b.value
    se_a, se_b = _se(a), _se(b)
    trusted = a.trusted and b.trusted
    why = "; ".join(w for w in (a.why, b.why) if w)
    if se_a is None or se_b is None:
        return Interval(value, None, None, trusted=False, why=why or "no interval", level=level)
    var = se_a**2 + se_b**2
    if var <= 0:
        return Interval(
            value, value, value, min(a.batches, b.batches), a.n + b.n, math.inf, trusted, why, level
        )
    df = var**2 / ((se_a**4 / a.df if se_a else 0.0) + (se_b**4 / b.df if se_b else 0.0))
    half = two_sided(level, df) * math.sqrt(var)
    return Interval(
        value, value - half, value + half, min(a.batches, b.batches), a.n + b.n, df, trusted, why, level
    )


def difference_bounds(a: Interval, b: Interval, level: float = LEVEL) -> tuple[float, float] | None:
    """The interval of ``a - b`` as (lo, hi), what ``ramp compare`` calls a difference on (it excludes 0)
    or not. Where either is open above (a tail too thin to bound from above) no standard error exists: the
    bounds are those of the two intervals themselves, ``a.lo - b.hi`` to ``a.hi - b.lo``, infinite on the
    side an open end leaves unbounded. None when either has no interval at all."""
    if a.lo is None or b.lo is None:
        return None
    if a.open_above or b.open_above:
        lo = -math.inf if b.hi is None else a.lo - b.hi
        hi = math.inf if a.hi is None else a.hi - b.lo
        return lo, hi
    d = difference(a, b, level)
    return None if d.lo is None or d.hi is None else (d.lo, d.hi)


def combine(repeats: Sequence[Interval], level: float = LEVEL) -> Interval:
    """One interval of the same figure measured by several repeats (between-repeat variance included)."""
    if not repeats:
        raise ValueError("nothing to combine")
    if len(repeats) == 1:
        return repeats[0]
    ses = [_se(r) for r in repeats]
    values = [r.value for r in repeats]
    n = sum(r.n for r in repeats)
    trusted = all(r.trusted for r in repeats)
    why = "; ".join(sorted({r.why for r in repeats if r.why}))
    k = len(repeats)
    mean = sum(values) / k
    if any(s is None for s in ses):
        # no interval within a repeat: the repeats' own spread is all there is
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (k - 1))
        half = two_sided(level, k - 1) * sd / math.sqrt(k)
        return Interval(
            mean, mean - half, mean + half, k, n, k - 1, False, why or "no interval within repeats", level
        )
    var = [max(s, 1e-300) ** 2 for s in ses if s is not None]
    w = [1 / v for v in var]
    sw = sum(w)
    fixed = sum(wi * v for wi, v in zip(w, values, strict=True)) / sw
    q = sum(wi * (v - fixed) ** 2 for wi, v in zip(w, values, strict=True))
    tau2 = max(0.0, (q - (k - 1)) / (sw - sum(wi * wi for wi in w) / sw))
    wr = [1 / (v + tau2) for v in var]
    swr = sum(wr)
    value = sum(wi * v for wi, v in zip(wr, values, strict=True)) / swr
    se = math.sqrt(1 / swr)
    # the within-repeat degrees of freedom while the repeats agree; only k - 1 once they disagree
    df = float(k - 1) if tau2 > 0 else sum(r.df for r in repeats)
    half = two_sided(level, df) * se
    return Interval(
        value, value - half, value + half, sum(r.batches for r in repeats), n, df, trusted, why, level
    )

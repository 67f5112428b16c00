"""Three-valued verdicts on an interval, and how much longer a step would need to decide or be precise.

A figure judged against a bound is **met** when its whole interval lies on the good side, **missed** when
its whole interval lies on the bad side, and **undecided** when the interval straddles the bound (or no
interval could be formed and the figure sits within ``NEAR`` of the bound). An interval open above (too few
values to bound a tail percentile from above) can miss an upper bound or meet a lower one, meets an upper
bound only ``FAR_OPEN`` times beyond its largest value, and is otherwise undecided until about
``Interval.need`` values. How much longer would decide it
assumes the half-width shrinks as one over the square root of the measured time (independent batches): a
step of ``elapsed * (half / distance)^2`` seconds in all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from loadgen.stats.intervals import Interval

__all__ = ["FAR_OPEN", "NEAR", "Decision", "Verdict", "decide", "seconds_to_precision"]

Verdict = Literal["met", "missed", "undecided"]
# Without an interval, a figure this close to its bound (relative) is undecided, never met or missed.
NEAR = 0.02
# An interval open above (too few values to bound a tail) meets an upper bound when its largest value seen,
# times this, is within it: the factor the SLA search asks of an interval not trusted (slices.FAR)
FAR_OPEN = 2.0


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    more_s: float | None = None  # undecided: about how many more seconds would decide it (None: unknown)


def decide(interval: Interval, bound: float, good: Literal["le", "ge"], elapsed_s: float = 0.0) -> Decision:
    """``good``: "le" when a figure at or below ``bound`` meets it (latencies), "ge" when at or above (speeds)."""
    value, lo, hi = interval.value, interval.lo, interval.hi
    if math.isnan(value):
        return Decision("undecided")
    if interval.open_above and lo is not None:
        # bounded below only: it misses an upper bound its lower end is past, meets a lower one its lower end
        # clears, and meets an upper bound only FAR_OPEN beyond its largest value (as the SLA search decides
        # on an interval not trusted): not a 95 % statement, a tail that would have to reach twice as far
        if (lo > bound) if good == "le" else (lo >= bound):
            return Decision("missed" if good == "le" else "met")
        if good == "le" and interval.top is not None and interval.top * FAR_OPEN <= bound:
            return Decision("met")
        n, need = interval.n, interval.need
        more = elapsed_s * (need / n - 1) if elapsed_s > 0 and n > 0 and need > n else None
        return Decision("undecided", more)
    if lo is None or hi is None:
        if abs(value - bound) <= NEAR * abs(bound):
            return Decision("undecided")
        ok = value <= bound if good == "le" else value >= bound
        return Decision("met" if ok else "missed")
    if good == "le":
        if hi <= bound:
            return Decision("met")
        if lo > bound:
            return Decision("missed")
    else:
        if lo >= bound:
            return Decision("met")
        if hi < bound:
            return Decision("missed")
    half = (hi - lo) / 2
    distance = abs(value - bound)
    if distance <= 0 or elapsed_s <= 0:
        return Decision("undecided")
    return Decision("undecided", max(0.0, elapsed_s * (half / distance) ** 2 - elapsed_s))


def seconds_to_precision(interval: Interval, rel: float, elapsed_s: float) -> float | None:
    """About how many more seconds until the half-width is within ``rel`` of the value (0 when it is);
    None without an interval."""
    share = interval.rel_half_width
    if share is None or elapsed_s <= 0:
        return None
    if share <= rel:
        return 0.0
    return elapsed_s * (share / rel) ** 2 - elapsed_s

"""The SLA search's answer from every probe: a monotone (isotonic) fit of the SLO margin against the level,
the knee it puts between a level that meets and one that misses, how sure that is, and whether the limit is
a cliff or a slope.

- The **fit** is the pool-adjacent-violators fit of each probe's SLO margin (``loadgen.slo.margin``: the
  tightest objective's room as a share of its limit, at least 0 meets) as a non-increasing function of the
  level: more load never helps a server, so a probe that reads better than a lower level is noise, pooled
  with its neighbours. Each probe weighs the same.
- The **knee** is the highest probed level whose fitted margin is at least 0; the **bracket** is it and the
  lowest probed level above it (fitted below 0); ``crossing`` is where the fit's line between them crosses 0.
- **Confidence**: ``high`` when both sides of the bracket were decided on their intervals (met or missed,
  not undecided), by probes that were not client-bound, and the fit did not pool across the bracket;
  ``medium`` when a side stayed undecided, was client-bound or was judged on its point value alone;
  ``low`` when the fit pooled a side of the bracket with a level whose own probes read the other way (a
  level above the knee met, or one below it missed: out of order).
- **Shape**: a ``cliff`` when the fitted margin falls by at least ``CLIFF_DROP`` of the limit across the
  bracket and at least ``CLIFF_RATIO`` times faster per level there than from the lowest probe up to the
  knee (queueing: a request waits for a slot and TTFT jumps); else a ``slope`` (the figure degrades
  steadily with load).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

CLIFF_DROP = 0.5  # the fitted margin falls by half the limit or more across the bracket
CLIFF_RATIO = 4.0  # ... and at least 4x faster per level than below the knee

Confidence = Literal["high", "medium", "low"]
Shape = Literal["cliff", "slope"]


@dataclass(frozen=True, slots=True)
class Point:
    """One probed level in the fit: its probes' mean margin, their number, and the fitted margin."""

    level: float
    mean: float
    n: int
    fitted: float


def isotonic(levels: Sequence[float], margins: Sequence[float]) -> list[Point]:
    """The non-increasing least-squares fit of ``margins`` against ``levels`` (pool adjacent violators), one
    point per distinct level, ascending."""
    by_level: dict[float, list[float]] = {}
    for level, m in zip(levels, margins, strict=True):
        by_level.setdefault(level, []).append(m)
    xs = sorted(by_level)
    blocks: list[list[float]] = []  # [sum, weight, first index, last index]
    for i, x in enumerate(xs):
        vals = by_level[x]
        blocks.append([sum(vals), float(len(vals)), i, i])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            s, w, _, last = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += w
            blocks[-1][3] = last
    fitted = [0.0] * len(xs)
    for s, w, first, last in blocks:
        for i in range(int(first), int(last) + 1):
            fitted[i] = s / w
    return [
        Point(x, sum(by_level[x]) / len(by_level[x]), len(by_level[x]), fitted[i]) for i, x in enumerate(xs)
    ]


@dataclass(frozen=True, slots=True)
class Knee:
    met: float | None  # the knee: the highest probed level the fit says meets (None: even the lowest misses)
    missed: float | None  # the lowest probed level above it the fit says misses (None: none was probed)
    crossing: float | None  # where the fit's line between the two crosses 0
    confidence: Confidence
    why: tuple[str, ...]  # what lowered the confidence
    shape: Shape | None  # None without both sides
    drop: float | None  # the fitted margin's fall across the bracket (a share of the limit)
    points: tuple[Point, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "knee": self.met,
            "bracket": [self.met, self.missed],
            "crossing": None if self.crossing is None else round(self.crossing, 3),
            "confidence": self.confidence,
            "why": list(self.why),
            "shape": self.shape,
            "drop": None if self.drop is None else round(self.drop, 4),
            "fit": [[p.level, round(p.mean, 4), p.n, round(p.fitted, 4)] for p in self.points],
        }


def knee(
    levels: Sequence[float], margins: Sequence[float], sure: dict[float, tuple[bool, str]] | None = None
) -> Knee:
    """The knee of the fit over every probe. ``sure``: per level, whether its decision stands on its intervals
    (True) or, if not, why ("undecided", "client-bound", "judged on its point value")."""
    points = isotonic(levels, margins)
    sure = sure or {}
    met = [p for p in points if p.fitted >= 0]
    below = met[-1] if met else None
    above = next((p for p in points if p.fitted < 0 and (below is None or p.level > below.level)), None)
    why: list[str] = []
    confidence: Confidence = "high"
    for side in (below, above):
        if side is None:
            continue
        ok, reason = sure.get(side.level, (False, "judged on its point value"))
        if not ok:
            why.append(f"{side.level:g}: {reason}")
            confidence = "medium"
    for side in (
        below,
        above,
    ):  # a level pooled with a side of the bracket whose own probes read the other way
        pooled = [p for p in points if side is not None and p.fitted == side.fitted]
        for p in pooled:
            if (p.mean >= 0) != (p.fitted >= 0):
                why.append(
                    f"{p.level:g} read {'met' if p.mean >= 0 else 'missed'} out of order: the fit pooled it"
                )
                confidence = "low"
    crossing: float | None = None
    shape: Shape | None = None
    drop: float | None = None
    if below is not None and above is not None:
        drop = below.fitted - above.fitted
        span = above.level - below.level
        crossing = below.level + span * below.fitted / drop if drop > 0 else below.level
        first = points[0]
        base = (
            (first.fitted - below.fitted) / (below.level - first.level) if below.level > first.level else 0.0
        )
        steep = drop / span if span > 0 else drop
        shape = "cliff" if drop >= CLIFF_DROP and steep >= CLIFF_RATIO * max(base, 0.0) else "slope"
    return Knee(
        None if below is None else below.level,
        None if above is None else above.level,
        crossing,
        confidence,
        tuple(why),
        shape,
        drop,
        tuple(points),
    )

"""The measuring step's margins of error so far, for the live snapshot: out tok/s and each figure the SLO
judges, with their 95 % intervals from the step's time slices (``loadgen.metrics.slices``), and under
``--precision`` about how long until the least precise of them is within the target.

Reading the intervals costs a few milliseconds, so ``LiveMargins.read`` reads them at most once a
``EVERY_NS`` and returns the last reading in between (the snapshot is built a few times a second). Nothing
here runs per chunk or per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from loadgen import measures
from loadgen.config import SLO
from loadgen.metrics.slices import SliceBook, figure_name
from loadgen.snapshot import Precision
from loadgen.stats import Interval, seconds_to_precision

__all__ = ["EVERY_NS", "LiveMargins", "LiveReading", "judged_points", "precision_eta_s"]

EVERY_NS = 1_000_000_000
RATE = "out_tok_s"


def judged_points(slo: SLO) -> dict[str, tuple[str, ...]]:
    """The percentiles ``slo`` judges, by metric: {"ttft_ms": ("p95",)} (``measures.CLAUSES`` with a limit)."""
    limits = slo.as_dict()
    points: dict[str, tuple[str, ...]] = {}
    for c in measures.CLAUSES:
        if c.metric and limits.get(c.key) is not None:
            points[c.metric] = (*points.get(c.metric, ()), c.point)
    return points


def precision_eta_s(margins: Mapping[str, Interval], pct: float, elapsed_s: float) -> float | None:
    """About how many more seconds until every interval of ``margins`` is within ``pct`` % of its figure
    (0 when all are): the longest of ``loadgen.stats.seconds_to_precision``; None while one has none."""
    left = 0.0
    for iv in margins.values():
        more = seconds_to_precision(iv, pct / 100, elapsed_s)
        if more is None:
            return None
        left = max(left, more)
    return left


@dataclass(frozen=True, slots=True)
class LiveReading:
    margins: Mapping[str, Interval] = field(default_factory=dict)  # out_tok_s and the judged figures
    precision: Precision | None = None  # --precision: its target and about how long until it is reached


@dataclass(slots=True)
class LiveMargins:
    """The last reading, and when it was taken."""

    slo: SLO
    read_ns: int = 0
    since_ns: int | None = None  # the window the last reading was of: a new window reads at once
    last: LiveReading = field(default_factory=LiveReading)

    def read(
        self, book: SliceBook | None, since_ns: int | None, now_ns: int, pct: float | None
    ) -> LiveReading:
        """The margins of the window measuring since ``since_ns`` (None: no window measuring: nothing)."""
        if book is None or since_ns is None:
            self.last, self.read_ns = LiveReading(), 0
            return self.last
        if self.read_ns and since_ns == self.since_ns and now_ns < self.read_ns + EVERY_NS:
            return self.last
        self.read_ns, self.since_ns = now_ns, since_ns
        points = judged_points(self.slo)
        found = book.margins(now_ns, points.items())
        names = [*(figure_name(m, p) for m, ps in points.items() for p in ps), RATE]  # the SLO's first
        margins = {name: found[name] for name in names if name in found}
        elapsed_s = (now_ns - since_ns) / 1e9
        eta = None if pct is None or not margins else precision_eta_s(margins, pct, elapsed_s)
        self.last = LiveReading(margins, None if pct is None else Precision(pct, eta))
        return self.last

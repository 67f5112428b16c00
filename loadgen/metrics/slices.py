"""A step's measurement window cut into time slices, and the margins of error read from them.

The controller folds each worker delta into the slice its interval ended in (``SliceBook.add``): a slice
keeps the delta's counters, its streamed tokens and its sparse histogram counts (whole metrics only, no
class splits). Every value of a request lands in the slice its request finished in, so the ITL samples of
one request stay together (clustered by request). Slices start at ``SLICE_S``; past ``MAX_SLICES`` of them
neighbours merge and the slice length doubles, so a long step stays bounded in memory. ``margins`` reads
a ``loadgen.stats.Interval`` for each percentile a step line carries (``loadgen.measures``'s
``step_points``) and each rate, named as the step line and the SLO name them: ``ttft_p95_ms``,
``decode_p50_tok_s``, ``out_tok_s``. Nothing here runs per chunk or per request: one fold per delta
(~4 a second per worker) and one read per step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from loadgen import measures
from loadgen.config import SLO
from loadgen.format import fmt_duration, fmt_num_trimmed
from loadgen.metrics.hdr import spec_for
from loadgen.metrics.recorder import IntervalDelta
from loadgen.snapshot import SLOVerdict, WindowStats
from loadgen.stats import Interval, clustered, decide, quantile_interval, ratio_interval

__all__ = [
    "MAX_SLICES",
    "RATES",
    "SLICE_S",
    "SliceBook",
    "AT_LIMIT",
    "at_limit",
    "decided",
    "figure_name",
    "judge",
    "precise",
    "step_margins",
]

# the SLA search: an interval not trusted decides a probe only this factor beyond its limit (``decided``)
FAR = 2.0
# a trusted interval straddling its limit within this share of it either way: the figure sits at the limit
# to the precision a knee can be told (``at_limit``)
AT_LIMIT = 0.02
MIN_DECIDE_SLICES = 4  # ... and never before 4 slices of window (2 s): a trusted interval needs 8 anyway
SLICE_S = 0.5  # a worker ships a delta every ~250 ms: a slice holds at least one of each worker's
# a time's interval is widened by this much either way: the client's per-request accuracy against a
# server's own timing (~1 ms: its read delay, a server's scheduling tick), which varies from step to step
# with the machine and which no step's slices can see (docs/measurement.md#margins-of-error)
INSTRUMENT_MS = 1.0
MAX_SLICES = 64
# Rates: (figure, what a slice adds up: a counter, or "live" for the tokens streamed), over seconds.
RATES: tuple[tuple[str, str], ...] = (
    ("out_tok_s", "live"),
    ("req_s", "ok"),
    ("goodput_req_s", "good"),
    ("goodput_tok_s", "good_tokens"),
)
# The rates read per stream too (a closed loop's streams are its clusters: ``loadgen.stats.clustered``):
# the rate's source -> which of a stream's totals (output tokens, requests) it adds up.
PER_STREAM = {"live": 0, "ok": 1}
_POINTS = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def figure_name(metric: str, point: str) -> str:
    """The name of a percentile figure, as an SLO clause has it: ttft_ms + p95 -> ttft_p95_ms."""
    for suffix in ("_ms", "_tok_s"):
        if metric.endswith(suffix):
            return f"{metric.removesuffix(suffix)}_{point}{suffix}"
    return f"{metric}_{point}"


@dataclass(slots=True)
class _Slice:
    counters: dict[str, int] = field(default_factory=dict)
    live: int = 0
    # the deltas' own intervals (all workers), each with its streamed tokens and its counters
    spans: list[tuple[int, int, int, dict[str, int]]] = field(default_factory=list)
    hists: dict[str, list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]] = field(default_factory=dict)

    def add(self, delta: IntervalDelta) -> None:
        for name, value in delta.counters.items():
            self.counters[name] = self.counters.get(name, 0) + value
        self.live += delta.live_tokens
        self.spans.append((delta.t0_ns, delta.t1_ns, delta.live_tokens, dict(delta.counters)))
        for key, (index, count) in delta.hists.items():
            if "|" not in key:
                self.hists.setdefault(key, []).append((index.astype(np.int64), count.astype(np.int64)))

    def covered(self, t0_ns: int, t1_ns: int) -> float:
        """Seconds of [t0, t1) its deltas covered, summed over workers (a closing delta's time after the
        window's end does not count: its tokens belong to the next window)."""
        return sum(max(0, min(b, t1_ns) - max(a, t0_ns)) for a, b, _, _ in self.spans) / 1e9

    def within(self, t0_ns: int, t1_ns: int, source: str) -> float:
        """What its deltas added up of ``source`` ("live": streamed tokens, or a counter) over the part of
        their interval inside [t0, t1): a delta straddling the window's end counts for its share before it,
        one after it (a closing request's) not at all, so the slice's amount matches ``covered``."""
        total = 0.0
        for a, b, live, counters in self.spans:
            amount = live if source == "live" else counters.get(source, 0)
            if not amount:
                continue
            if b <= a:
                total += amount if t0_ns <= a < t1_ns else 0
            else:
                total += amount * max(0, min(b, t1_ns) - max(a, t0_ns)) / (b - a)
        return total

    def merge(self, other: _Slice) -> None:
        for name, value in other.counters.items():
            self.counters[name] = self.counters.get(name, 0) + value
        self.live += other.live
        self.spans.extend(other.spans)
        for key, parts in other.hists.items():
            self.hists.setdefault(key, []).extend(parts)
        for key, parts in self.hists.items():
            if len(parts) > 8:
                index = np.concatenate([p[0] for p in parts])
                count = np.concatenate([p[1] for p in parts])
                keys, where = np.unique(index, return_inverse=True)
                self.hists[key] = [(keys, np.bincount(where, weights=count).astype(np.int64))]


def _widened(iv: Interval, slack: float) -> Interval:
    """``iv`` with ``slack`` more on either end (the lower end not below 0)."""
    if not slack or iv.lo is None:
        return iv
    return replace(iv, lo=max(0.0, iv.lo - slack), hi=None if iv.hi is None else iv.hi + slack)


def _rescaled(iv: Interval, value: float) -> Interval:
    """``iv`` (a rate per worker-second) as the step's own rate ``value``, with the same relative margin."""
    if iv.lo is None or iv.hi is None or iv.value == 0:
        return replace(iv, value=value, lo=None, hi=None)
    factor = value / iv.value
    return replace(iv, value=value, lo=iv.lo * factor, hi=iv.hi * factor)


class SliceBook:
    """The deltas of one measurement window, by the time slice their interval ended in."""

    def __init__(self, t0_ns: int, slice_s: float = SLICE_S, max_slices: int = MAX_SLICES) -> None:
        self.t0_ns = t0_ns
        self.slice_ns = max(1, int(slice_s * 1e9))
        self.max_slices = max_slices
        self.slices: list[_Slice] = []
        # a closed loop's streams, (worker, user) -> [output tokens, requests] of the window's requests done
        self.streams: dict[tuple[int, int], list[int]] = {}

    def add(self, delta: IntervalDelta) -> None:
        for user, (tokens, requests) in delta.users.items():
            done = self.streams.setdefault((delta.worker_id, user), [0, 0])
            done[0] += tokens
            done[1] += requests
        at = max(0, delta.t1_ns - 1 - self.t0_ns) // self.slice_ns
        while at >= self.max_slices:
            self._halve()
            at = max(0, delta.t1_ns - 1 - self.t0_ns) // self.slice_ns
        while len(self.slices) <= at:
            self.slices.append(_Slice())
        self.slices[at].add(delta)

    def _halve(self) -> None:
        merged: list[_Slice] = []
        for i in range(0, len(self.slices), 2):
            pair = self.slices[i]
            if i + 1 < len(self.slices):
                pair.merge(self.slices[i + 1])
            merged.append(pair)
        self.slices = merged
        self.slice_ns *= 2

    def _window(self, t1_ns: int) -> tuple[list[_Slice], npt.NDArray[np.float64]]:
        """The slices of [t0, t1) and their seconds; what came after t1 (a held step's last requests)
        counts in a copy of its last slice (the book's own slices stay as they are: read twice, counted
        once)."""
        n = max(1, -(-(t1_ns - self.t0_ns) // self.slice_ns))
        slices = self.slices[:n] + [_Slice() for _ in range(n - len(self.slices))]
        if len(self.slices) > n:
            last = _Slice()
            for part in (slices[-1], *self.slices[n:]):
                last.merge(part)
            slices[-1] = last
        seconds = np.full(n, self.slice_ns / 1e9)
        seconds[-1] = (t1_ns - self.t0_ns) / 1e9 - (n - 1) * self.slice_ns / 1e9
        return slices, seconds

    def margins(
        self, t1_ns: int, points: Iterable[tuple[str, tuple[str, ...]]], failed_only: bool = False
    ) -> dict[str, Interval]:
        """Each percentile figure of ``points`` (metric, its step points) and each rate, with its interval.
        ``failed_only``: the window claims no throughput (``Accumulator.stats``): no out tok/s interval."""
        slices, seconds = self._window(t1_ns)
        window_s = float(seconds.sum())
        # A rate's spread is read against the time each slice's deltas really covered (worker-seconds): a
        # slice's nominal length holds two or three of a worker's ~250-ms deltas by where their ends fall,
        # which would otherwise read as noise of up to half a slice's amount.
        covered = np.array([s.covered(self.t0_ns, t1_ns) for s in slices])
        if covered.sum() <= 0 or (covered <= 0).any() and covered.sum() < 0.5 * window_s:
            covered = seconds
        out: dict[str, Interval] = {}
        # A rate's figure counts all its window's requests did (a held step's closing requests too), its
        # spread only what they did inside the window, slice by slice against the time covered: the closing
        # tail, all in the last slice, would otherwise read as one outlying slice. The relative margin of the
        # rate inside the window is the figure's (``_rescaled``).
        for name, source in RATES:
            if source == "live":
                if failed_only:
                    continue
                total = float(sum(s.live for s in slices))
            else:
                if not any(source in s.counters for s in slices):
                    continue
                total = float(sum(s.counters.get(source, 0) for s in slices))
            amounts = np.array([s.within(self.t0_ns, t1_ns, source) for s in slices], dtype=np.float64)
            out[name] = _rescaled(ratio_interval(amounts, covered), total / window_s)
            if source in PER_STREAM and self.streams:  # a closed loop: its streams' spread, where wider
                out[name] = clustered(out[name], [done[PER_STREAM[source]] for done in self.streams.values()])
        for metric, metric_points in points:
            wanted = [p for p in metric_points if p in _POINTS]
            counts = self._counts(slices, metric)
            if counts is None or not wanted:
                continue
            grid, upper, lower = counts
            # a time the client read: the instrument's own resolution (its read delay, a server's tick) is
            # part of the interval, as the histogram's is
            slack = INSTRUMENT_MS if measures.metric(metric).kind == "latency" else 0.0
            for point in wanted:
                iv = quantile_interval(grid, upper, _POINTS[point], lower=lower)
                out[figure_name(metric, point)] = _widened(iv, slack)
        return out

    @staticmethod
    def _counts(
        slices: list[_Slice], metric: str
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
        """One metric's counts as slices x the buckets any slice used, with each bucket's highest and lowest
        value in display units."""
        parts = [(i, p) for i, s in enumerate(slices) for p in s.hists.get(metric, ())]
        if not parts:
            return None
        index = np.concatenate([p[0] for _, p in parts])
        keys, where = np.unique(index, return_inverse=True)
        row = np.concatenate([np.full(p[0].size, i, dtype=np.int64) for i, p in parts])
        count = np.concatenate([p[1] for _, p in parts])
        grid = np.zeros((len(slices), keys.size), dtype=np.int64)
        np.add.at(grid, (row, where), count)
        spec = spec_for(metric)
        layout = spec.layout
        return grid, layout.highest_eq[keys] / spec.display_div, layout.lowest_eq[keys] / spec.display_div


def judge(slo: SLO, verdict: SLOVerdict, margins: Mapping[str, Interval], elapsed_s: float) -> SLOVerdict:
    """``verdict`` (judged on the point values) with its clauses judged on their intervals as well: each
    clause whose interval straddles its limit is listed as undecided, with about how much longer a step
    would need to decide it, and the step is met / missed / undecided on the intervals."""
    if verdict.met is None or not margins:
        return verdict
    limits = slo.as_dict()
    undecided: list[str] = []
    missed = False
    for c in measures.CLAUSES:
        limit = limits.get(c.key)
        iv = margins.get(figure_name(c.metric, c.point)) if c.metric else None
        if limit is None or iv is None:
            continue
        scaled = Interval(
            iv.value * c.scale,
            None if iv.lo is None else iv.lo * c.scale,
            None if iv.hi is None else iv.hi * c.scale,
            iv.batches,
            iv.n,
            iv.df,
            iv.trusted,
            iv.why,
            iv.level,
            iv.need,
            None if iv.top is None else iv.top * c.scale,
        )
        decision = decide(scaled, limit, "le" if c.at_most else "ge", elapsed_s)
        if decision.verdict == "missed":
            missed = True
        elif decision.verdict == "undecided":
            more = "" if decision.more_s is None else f", ≈{fmt_duration(decision.more_s)} more"
            span = (
                ""
                if scaled.lo is None
                else f" (≥{fmt_num_trimmed(scaled.lo)}, too few values)"
                if scaled.hi is None
                else f" ({fmt_num_trimmed(scaled.lo)}-{fmt_num_trimmed(scaled.hi)})"
            )
            undecided.append(
                f"{c.label} {fmt_num_trimmed(scaled.value)}{span} {c.unit} vs {fmt_num_trimmed(limit)} {c.unit}{more}"
            )
    if verdict.met is False and not missed and not undecided:
        missed = True  # a clause judged on no interval (the error rate) missed it
    outcome: Literal["met", "missed", "undecided"] = (
        "missed" if missed else "undecided" if undecided else "met"
    )
    if outcome == "met" and verdict.met is False:
        outcome = "missed"
    return replace(verdict, undecided=tuple(undecided), on_intervals=outcome)


def step_margins(book: SliceBook | None, t1_ns: int, stats: WindowStats) -> dict[str, Interval]:
    """A finished window's margins: each step-line percentile (``measures.line_metrics``) and each rate."""
    if book is None:
        return {}
    points = [(m.name, m.step_points) for m in measures.line_metrics()]
    return book.margins(t1_ns, points, failed_only=stats.ok == 0 and not stats.out_tok_s)


def precise(book: SliceBook | None, now_ns: int, pct: float, slo: SLO) -> bool:
    """--precision: a trusted 95 % interval within ``pct`` % of its value, so far, for out tok/s and for every
    figure ``slo`` judges (``measures.CLAUSES`` with a limit set)."""
    if book is None or now_ns <= book.t0_ns:  # a window of 0 s has no rate
        return False
    limits = slo.as_dict()
    judged = [(c.metric, c.point) for c in measures.CLAUSES if c.metric and limits.get(c.key) is not None]
    points: dict[str, tuple[str, ...]] = {}
    for metric, point in judged:
        points[metric] = (*points.get(metric, ()), point)
    margins = book.margins(now_ns, points.items())
    for name in ["out_tok_s", *(figure_name(metric, point) for metric, point in judged)]:
        iv = margins.get(name)
        share = None if iv is None else iv.rel_half_width
        if iv is None or not iv.trusted or share is None or share > pct / 100:
            return False
    return True


def decided(book: SliceBook | None, now_ns: int, slo: SLO) -> Literal["met", "missed", "at_limit"] | None:
    """The SLA search: the step measuring now is decided on its intervals so far — ``missed`` once one judged
    figure's 95 % interval lies wholly past its limit, ``met`` once every judged figure's interval lies wholly
    on the good side, ``at_limit`` once those that straddle their limits lie within ``AT_LIMIT`` of them
    (``at_limit``); None while one straddles its limit more widely. An interval not trusted (``Interval.trusted``)
    decides only ``FAR`` beyond the limit. Never before ``MIN_DECIDE_SLICES`` slices of window. The error-rate
    clause (a count, no interval) is left to the step's verdict."""
    if book is None or now_ns - book.t0_ns < MIN_DECIDE_SLICES * book.slice_ns:
        return None  # too short for any interval (and a window of 0 s has no rate)
    limits = slo.as_dict()
    judged = [c for c in measures.CLAUSES if c.metric and limits.get(c.key) is not None]
    if not judged:
        return None
    points: dict[str, tuple[str, ...]] = {}
    for c in judged:
        points[c.metric] = (*points.get(c.metric, ()), c.point)
    margins = book.margins(now_ns, points.items())
    met = True
    for c in judged:
        iv = margins.get(figure_name(c.metric, c.point))
        limit = limits[c.key]
        if iv is None or iv.lo is None or limit is None:
            met = False
            continue
        # a trusted interval decides on its side of the limit; an untrusted one (a short tail, few batches)
        # only FAR beyond it, a factor of 2 either way; one open above (too few values) only where its
        # lower end decides
        far = 1.0 if iv.trusted else FAR
        lo = iv.lo * c.scale
        # open above: its largest value seen stands for its upper end, which an untrusted interval needs FAR
        # below the limit to meet it (as a step's verdict: stats.decide's FAR_OPEN)
        hi = (math.inf if iv.top is None else iv.top * c.scale) if iv.hi is None else iv.hi * c.scale
        if (lo > limit * far) if c.at_most else (hi < limit / far):
            return "missed"
        if not ((hi <= limit / far) if c.at_most else (lo >= limit * far)):
            met = False
    if met:
        return "met"
    return "at_limit" if at_limit(margins, slo) else None


def at_limit(margins: Mapping[str, Interval], slo: SLO) -> bool:
    """The SLA search: a step whose judged figures are pinned at their limits — no clause's interval lies past
    its limit, at least one straddles it, and every one that straddles it is a trusted two-sided interval
    lying wholly within ``AT_LIMIT`` of the limit. Measuring on would only say on which side of the limit a
    figure sits whose distance from it is already below what the answer can resolve (near a slope's knee
    every level reads within 1-3 % of the limit); the search takes the level as the knee's neighbourhood
    (``loadgen.run.search``)."""
    limits = slo.as_dict()
    pinned = False
    for c in measures.CLAUSES:
        limit = limits.get(c.key)
        if not c.metric or limit is None:
            continue
        iv = margins.get(figure_name(c.metric, c.point))
        if iv is None or iv.lo is None or iv.hi is None or not iv.trusted:
            return False
        lo, hi = iv.lo * c.scale, iv.hi * c.scale
        if (hi <= limit) if c.at_most else (lo >= limit):
            continue  # met on its interval
        if (lo > limit) if c.at_most else (hi < limit):
            return False  # missed on its interval
        if lo < limit * (1 - AT_LIMIT) or hi > limit * (1 + AT_LIMIT):
            return False  # straddles the limit, wider than the answer's resolution
        pinned = True
    return pinned

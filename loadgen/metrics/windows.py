"""The controller side of the metrics: ``Accumulator`` sums worker deltas, ``RollingWindow`` keeps the last N s.

An ``Accumulator`` adds ``IntervalDelta``s from any number of workers into dense HDR histograms (the
step's measurement window, the run) and reads ``WindowStats`` from the sums: counters, rates, every
metric's percentiles and drawing bins, the class splits, and the values that fell outside a histogram.
A ``RollingWindow`` adds each delta and subtracts it again once it is older than its span (windowed
percentiles as sums minus what left the window, never a re-sort).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from loadgen.config import Window
from loadgen.metrics.hdr import DenseHistogram, fixed_buckets, spec_for, summarize
from loadgen.metrics.recorder import IntervalDelta
from loadgen.snapshot import BUCKETS, METRICS, HistogramView, Percentiles, WindowStats

__all__ = ["Accumulator", "RollingWindow"]


class Accumulator:
    """Sums interval deltas (from any number of workers) and reads WindowStats from the sums."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}
        self.live_tokens = 0
        self.sent = 0
        self.intervals = 0
        self.t0_ns: int | None = None
        self.t1_ns: int | None = None
        self._hists: dict[str, DenseHistogram] = {}
        self.recent_errors: deque[str] = deque(maxlen=20)
        # latest gauges per worker: (t1_ns, in_flight, queued, health)
        self.workers: dict[int, tuple[int, int, int, Mapping[str, float]]] = {}

    def _hist(self, key: str) -> DenseHistogram:
        hist = self._hists.get(key)
        if hist is None:
            hist = self._hists[key] = DenseHistogram(key)
        return hist

    def add(self, delta: IntervalDelta) -> None:
        self._apply(delta, 1)
        self.recent_errors.extend(delta.recent_errors)
        known = self.workers.get(delta.worker_id)
        if known is None or known[0] <= delta.t1_ns:
            self.workers[delta.worker_id] = (delta.t1_ns, delta.in_flight, delta.queued, delta.health)
        self.t0_ns = delta.t0_ns if self.t0_ns is None else min(self.t0_ns, delta.t0_ns)
        self.t1_ns = delta.t1_ns if self.t1_ns is None else max(self.t1_ns, delta.t1_ns)

    def subtract(self, delta: IntervalDelta) -> None:
        """Remove a delta added before (rolling windows)."""
        self._apply(delta, -1)

    def _apply(self, delta: IntervalDelta, sign: int) -> None:
        counters = self.counters
        for name, value in delta.counters.items():
            counters[name] = counters.get(name, 0) + sign * value
        for key, (index, count) in delta.hists.items():
            counts = self._hist(key).counts
            if sign > 0:
                counts[index] += count  # indices are unique within a delta
            else:
                counts[index] -= count
        self.live_tokens += sign * delta.live_tokens
        self.sent += sign * delta.sent
        self.intervals += sign

    def merge(self, other: Accumulator) -> None:
        for name, value in other.counters.items():
            self.counters[name] = self.counters.get(name, 0) + value
        for key, hist in other._hists.items():
            self._hist(key).counts += hist.counts
        self.live_tokens += other.live_tokens
        self.sent += other.sent
        self.intervals += other.intervals
        self.recent_errors.extend(other.recent_errors)
        for worker, gauges in other.workers.items():
            known = self.workers.get(worker)
            if known is None or known[0] <= gauges[0]:
                self.workers[worker] = gauges
        if other.t0_ns is not None:
            self.t0_ns = other.t0_ns if self.t0_ns is None else min(self.t0_ns, other.t0_ns)
        if other.t1_ns is not None:
            self.t1_ns = other.t1_ns if self.t1_ns is None else max(self.t1_ns, other.t1_ns)

    @property
    def in_flight(self) -> int:
        return sum(g[1] for g in self.workers.values())

    @property
    def queued(self) -> int:
        return sum(g[2] for g in self.workers.values())

    @property
    def out_of_range(self) -> dict[str, int]:
        """Values that did not fit a histogram, per metric (should stay empty; the console warns of them)."""
        return {k[4:]: v for k, v in sorted(self.counters.items()) if k.startswith("oor:") and v}

    def counts(self, key: str) -> npt.NDArray[np.uint64] | None:
        """The dense counts of one histogram key, read-only (``None`` when nothing was recorded under it)."""
        hist = self._hists.get(key)
        if hist is None:
            return None
        counts = hist.counts.view()
        counts.flags.writeable = False
        return counts

    def view(self, key: str) -> HistogramView:
        spec = spec_for(key)
        hist = self._hists.get(key)
        if hist is None:
            return HistogramView(metric=key, unit=spec.unit, pct=Percentiles())
        pct, bins = summarize(hist.counts, spec.layout, spec.display_div)
        return HistogramView(metric=key, unit=spec.unit, pct=pct, bins=bins)

    def with_buckets(self, stats: WindowStats) -> WindowStats:
        """``stats`` (read from this accumulator) with each view's cumulative counts at its metric's fixed
        ``BUCKETS`` (``HistogramView.le``): what a Prometheus histogram of the window is made of. Asked for
        only by the exporter's runs (--metrics-port): about 70 µs per metric."""
        hist = dict(stats.hist)
        for key, view in stats.hist.items():
            counts = self._hists.get(key)
            if counts is not None and key in BUCKETS:
                hist[key] = replace(view, le=fixed_buckets(key, counts.counts))
        return replace(stats, hist=hist)

    def pct(self, key: str) -> Percentiles:
        hist = self._hists.get(key)
        if hist is None:
            return Percentiles()
        spec = spec_for(key)
        return summarize(hist.counts, spec.layout, spec.display_div, with_bins=False)[0]

    def stats(self, window: Window, duration_s: float) -> WindowStats:
        """The window's figures. Output tokens count as they stream (``live_tokens``: a long generation shows
        its throughput before it ends), those of failed requests taken back again; a window in which requests
        only failed (errors, no success) claims no throughput: its out tok/s is 0, whatever was streamed.
        The prefill rate is unknown (None) when no request's usage told its prompt size."""
        c = self.counters
        ok = c.get("ok", 0)
        input_tokens = c.get("input_tokens", 0)
        rate = duration_s > 0
        failed_only = ok == 0 and any(v for k, v in c.items() if k.startswith("err:"))
        out_tokens = 0 if failed_only else max(0, self.live_tokens)
        by_class: dict[str, dict[str, Percentiles]] = {}
        for key in sorted(self._hists):
            if "|" in key:
                metric, cls = key.split("|", 1)
                pct = self.pct(key)
                if pct.count:
                    by_class.setdefault(cls, {})[metric] = pct
        return WindowStats(
            window=window,
            duration_s=duration_s,
            ok=ok,
            errors={k[4:]: v for k, v in sorted(c.items()) if k.startswith("err:") and v},
            cancelled=c.get("cancelled", 0),
            input_tokens=input_tokens,
            output_tokens=c.get("output_tokens", 0),
            cached_tokens=c.get("cached_tokens", 0),
            out_tok_s=out_tokens / duration_s if rate else None,
            # No request told its prompt size (no usage): unknown, not 0.
            prefill_tok_s=input_tokens / duration_s if rate and c.get("input_reported") else None,
            req_s=ok / duration_s if rate else None,
            goodput_req_s=c.get("good", 0) / duration_s if rate and c.get("judged") else None,
            goodput_tok_s=c.get("good_tokens", 0) / duration_s if rate and c.get("judged") else None,
            approx_tokens=c.get("approx_tokens", 0),
            reasoning_tokens=c.get("reasoning_tokens", 0),
            reasoned=c.get("reasoned", 0),
            tool_calls=c.get("tool_calls", 0),
            tool_tokens=c.get("tool_tokens", 0),
            hist={metric: self.view(metric) for metric in METRICS},
            by_class=by_class,
            out_of_range=self.out_of_range,
        )

    def encoded(self) -> dict[str, str]:
        """Every non-empty histogram as base64 HDR (V2, what hdrh / HdrHistogram tools read)."""
        return {key: hist.encode() for key, hist in sorted(self._hists.items()) if hist.counts.any()}


class RollingWindow:
    """The last ``seconds`` of deltas: added to a running sum, subtracted again once they are too old."""

    def __init__(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError(f"rolling window must be positive, got {seconds}")
        self.seconds = seconds
        self.acc = Accumulator()
        self._ring: deque[IntervalDelta] = deque()

    def add(self, delta: IntervalDelta) -> None:
        self.acc.add(delta)
        self._ring.append(delta)

    def expire(self, now_ns: int) -> None:
        cutoff = now_ns - int(self.seconds * 1e9)
        if any(d.t1_ns <= cutoff for d in self._ring):
            keep: deque[IntervalDelta] = deque()
            for d in self._ring:
                if d.t1_ns <= cutoff:
                    self.acc.subtract(d)
                else:
                    keep.append(d)
            self._ring = keep

    def span_s(self) -> float:
        """Seconds covered by the deltas kept (shorter than ``seconds`` early in a run)."""
        if not self._ring:
            return 0.0
        return (max(d.t1_ns for d in self._ring) - min(d.t0_ns for d in self._ring)) / 1e9

    def stats(self, now_ns: int, duration_s: float | None = None) -> WindowStats:
        """The window's figures; rates over ``duration_s`` if given, else over the span of the kept deltas."""
        self.expire(now_ns)
        return self.acc.stats("rolling", self.span_s() if duration_s is None else duration_s)

"""One poll's worth of server/GPU state (``Reading``) and the arithmetic on successive readings.

Every source turns whatever it scraped into a ``Reading`` with runtime-neutral names (``running``,
``kv_usage``, ``gen_tokens``, ``ttft_s``...), so the hub never needs to know which server it talks to.
Counters and histograms stay cumulative here; rates and per-window histograms are differences of two
readings, with counter resets (a server restart makes a value go down) taken as "the new value is the
delta", as Prometheus' ``rate()`` does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from loadgen.runtimes import RuntimeName
from loadgen.snapshot import EMPTY, GPUSample

# Runtime-neutral names a Reading may carry. Sources fill what their server exposes; the rest is absent.
GAUGES = (
    "running",  # requests being decoded/prefilled
    "waiting",  # requests queued in the server
    "kv_usage",  # 0..1 share of the KV cache in use
    "prefix_hit_rate",  # 0..1, only from servers that publish a gauge instead of counters
    "spec_accept_rate",  # 0..1, only from servers that publish a gauge instead of counters
    "spec_accept_length",  # mean accepted tokens per speculative step (SGLang)
    "gen_throughput",  # server-computed generation tok/s (SGLang)
)
COUNTERS = (
    "preemptions",
    "gen_tokens",
    "prompt_tokens",
    "prefix_queries",  # tokens looked up in the prefix cache
    "prefix_hits",  # tokens found there
    "cached_prompt_tokens",
    "spec_accepted",
    "spec_drafted",
    "requests_finished",  # all finished requests (any reason)
    "requests_aborted",
)
HISTOGRAMS = ("ttft_s", "itl_s", "queue_s", "prefill_s", "e2e_s")

# Which panels a source may feed: a server's counters, GPU samples, or both (a page with both kinds of names).
SourceKind = Literal["server", "gpu", "mixed"]


class SourceError(Exception):
    """A source is n/a for a reason worth showing as is (one line, no traceback)."""


@dataclass(frozen=True, slots=True)
class CumulativeHistogram:
    """A Prometheus histogram as scraped: cumulative counts per upper bound (the last bound is +Inf)."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    sum: float = 0.0

    @property
    def count(self) -> float:
        return self.counts[-1] if self.counts else 0.0

    def quantile(self, q: float) -> float | None:
        return histogram_quantile(q, self.bounds, self.counts)


@dataclass(frozen=True, slots=True)
class Reading:
    """What one successful poll saw. ``t_ns`` is ``time.monotonic_ns()`` when the answer arrived."""

    t_ns: int
    runtime: RuntimeName | None = None  # the runtime whose names were read; None: GPU-only sources
    gauges: Mapping[str, float] = EMPTY
    counters: Mapping[str, float] = EMPTY
    histograms: Mapping[str, CumulativeHistogram] = EMPTY
    gpus: tuple[GPUSample, ...] | None = None  # None: this source says nothing about GPUs
    info: Mapping[str, object] = EMPTY  # conditions learned on the way (driver version, cache config...)

    @property
    def has_server(self) -> bool:
        return bool(self.gauges or self.counters or self.histograms)


def counter_delta(prev: float, cur: float) -> float:
    """Increase of a counter between two scrapes; a decrease means the server restarted."""
    return cur - prev if cur >= prev else cur


def histogram_delta(prev: CumulativeHistogram, cur: CumulativeHistogram) -> CumulativeHistogram | None:
    """Observations made between two scrapes; ``None`` when the buckets changed shape (can't subtract)."""
    if prev.bounds != cur.bounds:
        return None
    if cur.count < prev.count or any(c < p for p, c in zip(prev.counts, cur.counts, strict=True)):
        return cur  # reset: everything now in the histogram arrived after the restart
    return CumulativeHistogram(
        cur.bounds,
        tuple(c - p for p, c in zip(prev.counts, cur.counts, strict=True)),
        cur.sum - prev.sum,
    )


def well_formed(hist: CumulativeHistogram) -> bool:
    """A bound per count, the last +Inf, counts that never fall from one bucket to the next and a sum of
    no less than 0 (durations): else a bucket is missing, or a reset was caught halfway through a scrape,
    and its mean and percentiles would be fiction."""
    bounds, counts = hist.bounds, hist.counts
    return (
        len(bounds) == len(counts) > 0
        and math.isinf(bounds[-1])
        and all(b >= a for a, b in zip(counts, counts[1:], strict=False))
        and hist.sum >= 0
        and not math.isnan(hist.sum)
    )


def add_histograms(a: CumulativeHistogram, b: CumulativeHistogram) -> CumulativeHistogram | None:
    if a.bounds != b.bounds:
        return None
    return CumulativeHistogram(
        a.bounds, tuple(x + y for x, y in zip(a.counts, b.counts, strict=True)), a.sum + b.sum
    )


def histogram_quantile(q: float, bounds: Sequence[float], counts: Sequence[float]) -> float | None:
    """Quantile by linear interpolation inside the bucket, as PromQL's ``histogram_quantile`` does.

    ``counts`` are cumulative. A rank that falls in the +Inf bucket answers the highest finite bound,
    because nothing better is known about those observations.
    """
    if not counts or not bounds or len(bounds) != len(counts):
        return None
    total = counts[-1]
    if total <= 0 or not 0.0 <= q <= 1.0:
        return None
    rank = q * total
    for i, (upper, cum) in enumerate(zip(bounds, counts, strict=True)):
        if cum >= rank and cum > 0:
            if math.isinf(upper):
                finite = [b for b in bounds if not math.isinf(b)]
                return finite[-1] if finite else None
            lower = bounds[i - 1] if i > 0 else 0.0
            below = counts[i - 1] if i > 0 else 0.0
            if i == 0 and upper <= 0:
                return upper
            in_bucket = cum - below
            if in_bucket <= 0:
                return upper
            return lower + (upper - lower) * (rank - below) / in_bucket
    return None

"""The engine's own counters and Prometheus-style histograms, in the engine's time: what the simulator's
``/metrics`` reports. The engines only bump plain integers and call ``Histogram.observe``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# Bucket bounds of vLLM's own histograms (copied from a real /metrics), so dashboards read them alike.
TTFT_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_BUCKETS_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
)  # fmt: skip


class Histogram:
    """Cumulative Prometheus-style histogram: a bisect and two additions per observation."""

    __slots__ = ("bounds", "counts", "total", "n")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.n += 1

    def cumulative(self) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        acc = 0
        for bound, c in zip(self.bounds, self.counts[:-1], strict=True):
            acc += c
            out.append((repr(float(bound)), acc))
        out.append(("+Inf", acc + self.counts[-1]))
        return out


@dataclass
class EngineStats:
    """Counters and histograms in the engine's own time (what vLLM's /metrics reports)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    cached_prompt_tokens: int = 0
    prefix_cache_resets: int = 0  # POST /reset_prefix_cache or /flush_cache
    prefix_blocks_dropped: int = 0  # cached blocks those resets dropped
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0, "abort": 0, "error": 0})
    steps: int = 0
    busy_ns: int = 0  # simulated time the "GPU" spent in steps
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS_S))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS_S))
    queue: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS_S))
    # admitted -> first token (vLLM's request_prefill_time_seconds); queue + prefill = TTFT for each request
    prefill: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS_S))
    e2e: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS_S))

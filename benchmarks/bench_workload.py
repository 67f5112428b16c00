"""Micro-benchmark of prompt generation: text-pool build, per-request cost of ``next_request``, and one
16k-token prompt. Run ``python benchmarks/bench_workload.py [PROFILE ...]`` (default: three built-ins).
"""

from __future__ import annotations

import random
import sys
import time

from loadgen.profile import load_profile
from loadgen.workload import PromptSizer, TextPool, Workload, as_api


def bench(profile_name: str = "rag-prefill-heavy", requests: int = 2000, seed: int = 0) -> dict[str, float]:
    """Time prompt generation: pool build, and per-request cost of ``next_request`` (microseconds)."""
    t0 = time.perf_counter_ns()
    pool = TextPool(seed)  # built afresh: the shared per-seed pool may be cached already
    pool_ms = (time.perf_counter_ns() - t0) / 1e6
    profile = load_profile(profile_name)
    sizer = PromptSizer.estimate(as_api(profile.api))
    workload = Workload(profile, sizer, "bench", seed)
    rng = random.Random(1)
    tokens = 0
    worst = 0
    t0 = time.perf_counter_ns()
    for _ in range(requests):
        s0 = time.perf_counter_ns()
        spec = workload.new_session(rng).next_request()
        worst = max(worst, time.perf_counter_ns() - s0)
        assert spec is not None
        tokens += spec.input_tokens_target
    per_request_us = (time.perf_counter_ns() - t0) / 1e3 / requests
    # One 16k-token prompt, the size the brief asks about.
    s0 = time.perf_counter_ns()
    for _ in range(200):
        workload.unique_text(rng, sizer.words_for(16384))
    text16k_us = (time.perf_counter_ns() - s0) / 1e3 / 200
    return {
        "pool_build_ms": pool_ms,
        "pool_chars": float(len(pool.text)),
        "next_request_us_mean": per_request_us,
        "next_request_us_max": worst / 1e3,
        "mean_input_tokens": tokens / requests,
        "text_16k_tokens_us": text16k_us,
    }


if __name__ == "__main__":
    for name in sys.argv[1:] or ["rag-prefill-heavy", "chat", "agent-long-context"]:
        result = bench(name)
        print(name + ": " + ", ".join(f"{k}={v:,.1f}" for k, v in result.items()))

"""The "fast" simulator engine with latencies drawn per request (``fixed_ttft_sigma``, ``fixed_tpot_sigma``):
a server whose TTFT and time per token are known random variables, what ``benchmarks/bench_coverage.py``
measures intervals against (issue 31). Fixed (sigma 0) it stays exactly as it was."""

from __future__ import annotations

import math

import numpy as np

from loadgen.sim import build_config
from loadgen.sim.fixed import FixedLatencyEngine
from loadgen.sim.sequences import Seq


def served(ttft_sigma: float, tpot_sigma: float, n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Each request's TTFT and time per token in ms, as the engine emits them (4 tokens each)."""
    params = build_config(
        "fast",
        fixed_ttft_ms=80.0,
        fixed_ttft_sigma=ttft_sigma,
        fixed_tpot_ms=20.0,
        fixed_tpot_sigma=tpot_sigma,
    ).engine
    engine = FixedLatencyEngine(params, seed=5)
    seqs = [Seq(rid, 0, 16, 4) for rid in range(n)]
    for seq in seqs:
        engine.add(seq)
    now = 0
    while engine.has_work():
        now = engine.step(now).end_ns
    ttft = np.array([s.first_token_ns for s in seqs]) / 1e6
    tpot = np.array([(s.last_token_ns - s.first_token_ns) / 3 for s in seqs]) / 1e6
    return ttft, tpot


def test_latencies_drawn_per_request_are_lognormal_around_the_fixed_medians() -> None:
    ttft, tpot = served(0.4, 0.3)
    assert abs(np.median(ttft) / 80.0 - 1) < 0.05 and abs(np.std(np.log(ttft)) - 0.4) < 0.03
    # a request's tokens share its time per token (the 1-ms wake-up tick moves each by under a millisecond)
    assert abs(np.median(tpot) / 20.0 - 1) < 0.05 and abs(np.std(np.log(tpot)) - 0.3) < 0.03


def test_without_a_sigma_every_request_gets_the_fixed_latencies() -> None:
    ttft, tpot = served(0.0, 0.0, n=50)
    assert np.all(np.abs(ttft - 80.0) <= 1.0) and np.all(np.abs(tpot - 20.0) <= 1.0)
    assert math.isclose(float(np.median(ttft)), 80.0, abs_tol=1.0)

"""What shapes the simulated engine: ``StepCost`` (the price of one engine step) and ``EngineParams`` (every
setting a preset fills and an override replaces). Pure data, no behaviour beyond pricing a step.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StepCost:
    """Time of one engine step, in milliseconds at speed 1.

    Decode: ``base_ms + per_seq_ms * B + per_kv_token_ms * (cached tokens read by the batch)``: reading the
    weights once, per-sequence compute, reading every sequence's KV cache (the h200 fit gives 29 ns per
    128 KiB token, i.e. ~4.5 TB/s, the H200's HBM bandwidth). Prefill: piecewise-linear in the step's prompt
    tokens through ``prefill_points``; in a mixed step the weights are read once, so ``base_ms`` is not
    counted twice. Speculative decoding adds the verification of ``k`` extra tokens per sequence and ``k``
    draft-model steps.
    """

    base_ms: float
    per_seq_ms: float
    per_kv_token_ms: float
    prefill_points: tuple[tuple[int, float], ...]  # (prompt tokens, ms), ascending, starting at (0, base)
    spec_draft_ms: float = 0.6

    def prefill_ms(self, tokens: int) -> float:
        pts = self.prefill_points
        if tokens <= 0:
            return 0.0
        i = bisect.bisect_left(pts, (tokens, -math.inf))
        if i == 0:
            return pts[0][1]
        if i >= len(pts):
            (t0, m0), (t1, m1) = pts[-2], pts[-1]
        else:
            (t0, m0), (t1, m1) = pts[i - 1], pts[i]
        return m0 + (m1 - m0) * (tokens - t0) / (t1 - t0)

    def step_ms(self, decode_seqs: int, kv_tokens: int, prefill_tokens: int, spec_tokens: int = 0) -> float:
        ms = 0.0
        if decode_seqs:
            ms = (
                self.base_ms
                + self.per_seq_ms * decode_seqs * (1 + spec_tokens)
                + self.per_kv_token_ms * kv_tokens
            )
            ms += self.spec_draft_ms * spec_tokens
        if prefill_tokens:
            pf = self.prefill_ms(prefill_tokens)
            ms += pf - self.base_ms if decode_seqs else pf
        return ms


@dataclass(frozen=True)
class EngineParams:
    """Everything that shapes the engine's behaviour. Presets fill it; overrides replace single fields."""

    kind: str = "gpu"  # "gpu" (continuous batching) | "fixed" (fixed TTFT and time per token)
    cost: StepCost = field(default_factory=lambda: StepCost(5.0, 0.02, 3e-5, ((0, 5.0), (1024, 35.0))))
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    block_size: int = 16
    kv_capacity_tokens: int = 1 << 20
    max_model_len: int = 8192
    enable_prefix_caching: bool = True
    num_speculative_tokens: int = 0
    spec_acceptance: float = 0.7  # probability that each draft token is accepted, given the ones before were
    # Without ignore_eos a request may stop early: after min_output_tokens, each token ends it with eos_prob.
    min_output_tokens: int = 16
    eos_prob: float = 0.004
    # A reasoning model: each reply starts with a reasoning phase of about this many tokens (uniform within
    # ±reasoning_spread of it, at least 1; 0: the model does not reason), streamed in the reasoning field
    # (SimConfig.reasoning_field), then answers. Reasoning counts toward max_tokens, as on a real server.
    reasoning_tokens: int = 0
    reasoning_spread: float = 0.5
    fixed_ttft_ms: float = 50.0
    fixed_tpot_ms: float = 10.0
    # The "fast" engine's latencies drawn per request, lognormal around those medians with these sigmas (0:
    # fixed): a server whose TTFT and time per token are known random variables (benchmarks/bench_coverage.py)
    fixed_ttft_sigma: float = 0.0
    fixed_tpot_sigma: float = 0.0
    speed: float = 1.0  # simulated time runs this many times faster than the real GPU would
    # Simulated GPU (for DCGM-style telemetry).
    gpu_name: str = "NVIDIA H200 (simulated)"
    hbm_bytes: int = 143_771 * 1024 * 1024
    weights_bytes: int = 15_010_000_000
    activation_bytes: int = 2 * 1024**3
    kv_bytes_per_token: int = 131_072
    gpu_memory_utilization: float = 0.9
    idle_power_w: float = 78.0
    max_power_w: float = 700.0

    @property
    def num_blocks(self) -> int:
        return max(1, self.kv_capacity_tokens // self.block_size)

"""Named engine presets: "h200-llama8b" (grounded in real H200 step times), "tiny-cpu" (a small KV cache
like the captured CPU vLLM, so queueing and preemption show at 16 streams) and "fast" (fixed latencies, for
benchmarking the client itself); "tiny-reasoning" and "h200-reasoning" are the same engines serving a
reasoning model (a reasoning phase streamed before each answer, ``EngineParams.reasoning_tokens``).

The H200 numbers are copied from ``tests/fixtures/h200-llama8b-steps/`` (a test checks they still match):
decode steps are fitted with ``base + per_seq * B + per_kv_token * B * L`` by least squares (within 5 % of
every measured point), prefill is interpolated between the measured prompt lengths.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .params import EngineParams, StepCost

# batch, cached context per sequence, one decode step in ms (CUDA graph replay), from decode_step_ms.csv
H200_DECODE_STEPS_MS: tuple[tuple[int, int, float], ...] = (
    (1, 1024, 5.6673), (4, 1024, 6.1717), (16, 1024, 6.8647), (32, 1024, 7.3691), (64, 1024, 8.5482),
    (128, 1024, 12.1445), (256, 1024, 17.2564),
    (1, 4096, 5.799), (4, 4096, 6.5213), (16, 4096, 8.2922), (32, 4096, 10.206), (64, 4096, 14.2076),
    (128, 4096, 23.4168),
    (1, 8192, 5.9152), (4, 8192, 6.9939), (16, 8192, 10.1862), (32, 8192, 13.9525), (64, 8192, 21.7732),
)  # fmt: skip
# prompt tokens, one prefill in ms, from prefill_ms.csv
H200_PREFILL_MS: tuple[tuple[int, float], ...] = (
    (128, 11.977),
    (512, 15.904),
    (2048, 55.708),
    (8192, 247.598),
)
H200_WEIGHTS_BYTES = 15_010_000_000  # meta.json: weights_gb 15.01
H200_KV_BYTES_PER_TOKEN = 131_072  # meta.json
H200_HBM_BYTES = 143_771 * 1024 * 1024  # nvidia-smi memory.total on the H200 fixture


def fit_decode(rows: tuple[tuple[int, int, float], ...]) -> tuple[float, float, float]:
    """Least-squares ``(base_ms, per_seq_ms, per_kv_token_ms)`` for ``ms = base + a*B + c*B*L``."""
    b = np.array([r[0] for r in rows], dtype=float)
    ctx = np.array([r[1] for r in rows], dtype=float)
    y = np.array([r[2] for r in rows], dtype=float)
    x = np.column_stack([np.ones_like(b), b, b * ctx])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(coef[0]), float(coef[1]), float(coef[2])


def kv_capacity_tokens(hbm: int, utilization: float, weights: int, activation: int, per_token: int) -> int:
    """What vLLM's memory profiling leaves for the KV cache: the utilization share of HBM minus weights
    and peak activations."""
    return max(0, int((hbm * utilization - weights - activation) // per_token))


def _h200() -> EngineParams:
    base, per_seq, per_kv = fit_decode(H200_DECODE_STEPS_MS)
    activation = 2 * 1024**3
    return EngineParams(
        kind="gpu",
        cost=StepCost(base, per_seq, per_kv, ((0, base),) + H200_PREFILL_MS, spec_draft_ms=0.6),
        max_num_seqs=256,
        max_num_batched_tokens=8192,
        block_size=16,
        kv_capacity_tokens=kv_capacity_tokens(
            H200_HBM_BYTES, 0.9, H200_WEIGHTS_BYTES, activation, H200_KV_BYTES_PER_TOKEN
        ),
        max_model_len=8192,
        hbm_bytes=H200_HBM_BYTES,
        weights_bytes=H200_WEIGHTS_BYTES,
        activation_bytes=activation,
        kv_bytes_per_token=H200_KV_BYTES_PER_TOKEN,
        gpu_memory_utilization=0.9,
    )


def _tiny_cpu() -> EngineParams:
    # Shaped like the captured CPU vLLM (8 seqs, 4,096 KV tokens, ~5 ms between tokens with 8 running).
    return EngineParams(
        kind="gpu",
        cost=StepCost(
            3.0, 0.2, 5e-5, ((0, 3.0), (16, 8.0), (128, 14.0), (512, 40.0), (2048, 160.0)), spec_draft_ms=0.5
        ),
        max_num_seqs=8,
        max_num_batched_tokens=2048,
        block_size=16,
        kv_capacity_tokens=4096,
        max_model_len=2048,
        hbm_bytes=16 * 1024**3,
        weights_bytes=300_000_000,
        activation_bytes=256 * 1024**2,
        kv_bytes_per_token=262_144,
        gpu_memory_utilization=0.9,
    )


def _fast() -> EngineParams:
    return EngineParams(
        kind="fixed",
        fixed_ttft_ms=50.0,
        fixed_tpot_ms=10.0,
        max_num_seqs=1_000_000,
        kv_capacity_tokens=1 << 40,
        max_model_len=131_072,
        hbm_bytes=H200_HBM_BYTES,
        weights_bytes=H200_WEIGHTS_BYTES,
    )


def _tiny_reasoning() -> EngineParams:
    # tiny-cpu's engine serving a reasoning model: ~96 tokens of thought (48..144) before each answer
    return dataclasses.replace(_tiny_cpu(), reasoning_tokens=96, reasoning_spread=0.5)


def _h200_reasoning() -> EngineParams:
    # the H200 engine serving a reasoning model: ~512 tokens of thought (256..768) before each answer
    return dataclasses.replace(_h200(), reasoning_tokens=512, reasoning_spread=0.5)


PRESETS = {
    "h200-llama8b": _h200,
    "tiny-cpu": _tiny_cpu,
    "fast": _fast,
    "tiny-reasoning": _tiny_reasoning,
    "h200-reasoning": _h200_reasoning,
}


def preset_params(name: str) -> EngineParams:
    try:
        return PRESETS[name]()
    except KeyError:
        raise ValueError(f"unknown simulator preset {name!r}; choose one of: {', '.join(PRESETS)}") from None

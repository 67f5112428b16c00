"""The simulator's configuration: ``SimConfig`` (server), ``FaultConfig`` (injected failures) and
``build_config(preset, **overrides)``, which resolves a preset and applies overrides by field name.

A config round-trips through a plain dict (``to_dict`` / ``from_dict``) so that a subprocess simulator can
receive exactly the same configuration as JSON.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .params import EngineParams, StepCost
from .presets import preset_params

REASONING_FIELDS = ("reasoning_content", "reasoning")
FAULT_KINDS = ("error", "429", "stall", "disconnect", "slow_ttft", "malformed", "empty")


@dataclass(frozen=True)
class FaultConfig:
    """Per-request probabilities of each failure, and their shape. The ``x-sim-fault`` request header
    overrides the draw for one request, e.g. ``x-sim-fault: stall=2.5`` or ``x-sim-fault: disconnect=3``."""

    error_rate: float = 0.0  # HTTP 500
    rate_429: float = 0.0  # HTTP 429
    stall_rate: float = 0.0  # the stream pauses mid-way
    stall_s: float = 2.0
    stall_after_tokens: int = 3
    disconnect_rate: float = 0.0  # the connection closes mid-stream, without [DONE]
    disconnect_after_tokens: int = 3
    slow_ttft_rate: float = 0.0  # extra delay before the request reaches the engine
    slow_ttft_s: float = 1.0
    malformed_rate: float = 0.0  # one SSE event carries broken JSON
    malformed_after_tokens: int = 2
    empty_rate: float = 0.0  # the reply finishes without any output token


@dataclass(frozen=True)
class SimConfig:
    preset: str = "tiny-cpu"
    seed: int = 0
    model: str = "sim-llama-8b"
    engine: EngineParams = field(default_factory=EngineParams)
    faults: FaultConfig = field(default_factory=FaultConfig)
    stream_interval: int = 1  # tokens coalesced per SSE chunk, like vLLM's --stream-interval
    # where a reasoning model streams its thought: "reasoning_content" (vLLM, SGLang, DeepSeek) or
    # "reasoning" (newer vLLM)
    reasoning_field: str = "reasoning_content"
    ground_truth_limit: int = 100_000
    # a request offering tools (tool_choice "auto") is answered with a function call with this probability
    tool_call_rate: float = 1.0
    gpu_telemetry: bool = True
    version: str = "0.32.0-ramp-sim"  # the vLLM API it imitates, marked as the simulator
    # A control for answer-quality tests: replies change (drawn from elsewhere in the output stream) while
    # more than ``answer_change_above`` generations are open (0: never) or from ``answer_change_after_s``
    # seconds after the server started (0: never); ``answer_change_share`` of those requests change.
    answer_change_above: int = 0
    answer_change_after_s: float = 0.0
    answer_change_share: float = 1.0
    # A control for following the knee (issue 32): from ``drift_after_s`` seconds after the server started
    # (0: never) at most ``drift_max_num_seqs`` sequences run at once, as on a server that slowed or took on
    # another tenant (``SimServer.set_max_num_seqs``; ``POST /_sim/slots`` does it at any time).
    drift_after_s: float = 0.0
    drift_max_num_seqs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimConfig:
        data = dict(data)
        engine = dict(data.pop("engine", {}))
        cost = engine.pop("cost", None)
        if cost is not None:
            cost = dict(cost)
            cost["prefill_points"] = tuple((int(t), float(ms)) for t, ms in cost["prefill_points"])
            engine["cost"] = StepCost(**cost)
        faults = FaultConfig(**data.pop("faults", {}))
        return cls(engine=EngineParams(**engine), faults=faults, **data)


_SIM_FIELDS = {f.name for f in dataclasses.fields(SimConfig)} - {"engine", "faults"}
_ENGINE_FIELDS = {f.name for f in dataclasses.fields(EngineParams)}
_FAULT_FIELDS = {f.name for f in dataclasses.fields(FaultConfig)}


def build_config(preset: str = "tiny-cpu", **overrides: Any) -> SimConfig:
    """A config for ``preset`` with ``overrides`` applied by field name: any ``SimConfig`` field, any
    ``EngineParams`` field (``max_num_seqs=16``, ``speed=4.0``, ``num_speculative_tokens=3``...), any
    ``FaultConfig`` field (``error_rate=0.1``; a ``fault_`` prefix is accepted too), or ``faults=FaultConfig``.

    Raises ``ValueError`` naming the bad key.
    """
    engine = preset_params(preset)
    sim: dict[str, Any] = {"preset": preset}
    eng: dict[str, Any] = {}
    flt: dict[str, Any] = {}
    faults = overrides.pop("faults", None)
    for key, value in overrides.items():
        if key in _SIM_FIELDS:
            sim[key] = value
        elif key in _ENGINE_FIELDS:
            eng[key] = value
        elif key in _FAULT_FIELDS:
            flt[key] = value
        elif key.startswith("fault_") and key[6:] in _FAULT_FIELDS:
            flt[key[6:]] = value
        else:
            raise ValueError(f"unknown simulator setting {key!r}")
    engine = dataclasses.replace(engine, **eng)
    faults = dataclasses.replace(faults if faults is not None else FaultConfig(), **flt)
    config = SimConfig(engine=engine, faults=faults, **sim)
    validate(config)
    return config


def validate(config: SimConfig) -> None:
    e = config.engine
    problems = []
    if e.speed <= 0:
        problems.append(f"speed must be > 0 (got {e.speed})")
    if e.max_num_seqs < 1 or e.max_num_batched_tokens < 1 or e.block_size < 1:
        problems.append("max_num_seqs, max_num_batched_tokens and block_size must be >= 1")
    if e.kind == "gpu" and e.max_model_len + e.num_speculative_tokens > e.kv_capacity_tokens:
        problems.append(
            f"max_model_len {e.max_model_len} does not fit the KV cache ({e.kv_capacity_tokens} tokens): "
            "lower max_model_len or raise kv_capacity_tokens"
        )
    if not 0.0 <= e.spec_acceptance <= 1.0:
        problems.append(f"spec_acceptance must be within 0..1 (got {e.spec_acceptance})")
    if e.reasoning_tokens < 0 or not 0.0 <= e.reasoning_spread < 1.0:
        problems.append("reasoning_tokens must be >= 0 and reasoning_spread within 0..1 (1 excluded)")
    if config.reasoning_field not in REASONING_FIELDS:
        problems.append(f"reasoning_field must be one of {', '.join(REASONING_FIELDS)}")
    if not 0.0 <= config.tool_call_rate <= 1.0:
        problems.append(f"tool_call_rate must be within 0..1 (got {config.tool_call_rate})")
    if config.answer_change_above < 0 or config.answer_change_after_s < 0:
        problems.append("answer_change_above and answer_change_after_s must be >= 0 (0: never)")
    if config.drift_after_s < 0 or config.drift_max_num_seqs < 0:
        problems.append("drift_after_s and drift_max_num_seqs must be >= 0 (0: never)")
    if (config.drift_after_s > 0) != (config.drift_max_num_seqs > 0):
        problems.append("drift_after_s and drift_max_num_seqs go together: when, and the batch from then on")
    if not 0.0 <= config.answer_change_share <= 1.0:
        problems.append(f"answer_change_share must be within 0..1 (got {config.answer_change_share})")
    if config.stream_interval < 1:
        problems.append(f"stream_interval must be >= 1 (got {config.stream_interval})")
    f = config.faults
    for name, rate in (
        ("error_rate", f.error_rate),
        ("rate_429", f.rate_429),
        ("stall_rate", f.stall_rate),
        ("disconnect_rate", f.disconnect_rate),
        ("slow_ttft_rate", f.slow_ttft_rate),
        ("malformed_rate", f.malformed_rate),
        ("empty_rate", f.empty_rate),
    ):
        if not 0.0 <= rate <= 1.0:
            problems.append(f"{name} must be within 0..1 (got {rate})")
    if problems:
        raise ValueError("invalid simulator config: " + "; ".join(problems))

"""Scenarios: the simulator made to stop scaling for one known reason, so that each of ramp's diagnoses
(``loadgen.analysis.diagnosis``) can be exercised end to end (``ramp sim --scenario NAME``, the tests,
``benchmarks/bench_diagnosis.py``).

Each is the "h200-llama8b" engine with a few settings changed, the prompt and output lengths that show it,
the diagnosis it should yield and the first level (streams) at which it limits; below that level the
honest answer is ``none``. ``network`` is no scaling limit: a delay before the server, at every level.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from .params import StepCost
from .presets import preset_params

BASE_PRESET = "h200-llama8b"


@dataclass(frozen=True)
class Scenario:
    """One scenario: the overrides of ``build_config``, the profile's lengths, what it should be called."""

    name: str
    what: str
    overrides: Mapping[str, object] = field(default_factory=dict)
    input_tokens: int = 24
    output_tokens: int = 16
    kind: str = "none"  # the diagnosis at and past ``limit_level``
    limit_level: int = 1


def _h200_cost() -> StepCost:
    return preset_params(BASE_PRESET).cost


def _slow_prefill() -> StepCost:
    cost = _h200_cost()
    points = tuple((t, ms if t == 0 else ms * 4.0) for t, ms in cost.prefill_points)
    return dataclasses.replace(cost, prefill_points=points)


def scenarios() -> dict[str, Scenario]:
    """Every scenario by name."""
    return {
        s.name: s
        for s in (
            Scenario("none", "the plain engine: nothing limits a small ramp"),
            Scenario(
                "queue",
                "a batch of 4 (max_num_seqs): past 4 streams requests wait for a slot",
                {"max_num_seqs": 4},
                kind="queueing",
                limit_level=8,
            ),
            Scenario(
                "kv",
                "2,048 KV tokens for 264-token requests: 7 fit, past that they wait or are preempted",
                {"kv_capacity_tokens": 2048, "max_model_len": 512},
                input_tokens=200,
                output_tokens=64,
                kind="kv_cache",
                limit_level=8,
            ),
            Scenario(
                "decode",
                "3 ms per sequence in each decode step: every stream slows as the batch grows",
                {"cost": dataclasses.replace(_h200_cost(), per_seq_ms=3.0, per_kv_token_ms=0.0)},
                kind="decode_bound",
                limit_level=4,
            ),
            Scenario(
                "prefill",
                "prefill 4x slower, 800-token prompts and 4-token answers: prefills stall each other",
                {"cost": _slow_prefill()},
                input_tokens=800,
                output_tokens=4,
                kind="prefill_bound",
                limit_level=2,  # two 94-ms prefills already stall each other's decodes
            ),
            Scenario(
                "network",
                "100 ms before the engine sees each request (a slow hop on the wire)",
                {"slow_ttft_rate": 1.0, "slow_ttft_s": 0.1},
                kind="network",
                limit_level=1,
            ),
        )
    }


def scenario_overrides(name: str) -> dict[str, object]:
    """The ``build_config`` overrides of scenario ``name`` (``ValueError`` naming the choices)."""
    found = scenarios().get(name)
    if found is None:
        raise ValueError(f"unknown simulator scenario {name!r}; choose one of: {', '.join(scenarios())}")
    return dict(found.overrides)

"""What a step cost: per 1M output tokens and per completed task, on two bases kept apart.

* GPU hours (self-hosted): ``gpu_usd_per_hour`` x ``gpus`` for the step's measurement window; per 1M output
  tokens at its aggregate throughput, per task over the tasks finished in that window.
* Token prices (a managed API billing the same requests): uncached prompt tokens at the input rate, prompt
  tokens the server reported as cached (``usage.prompt_tokens_details.cached_tokens``) at the cache-read rate
  (the input rate when none is set), output tokens at the output rate.

A task is a request, or a whole session for a multi-turn profile: the step's successful requests divided by
the profile's mean turns per session (an estimate: a session may end early at ``max_context_tokens``). The
pricing is the record header's ``pricing`` (flags merged with the profile's ``[pricing]`` at the run), else
the profile's own in ``profile_content`` for records written before that key. A figure that cannot be
computed (no throughput, no finished request) is None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from loadgen.format import fmt_setting, fmt_usd
from loadgen.profile import Pricing
from loadgen.snapshot import StepSummary

__all__ = ["Costs", "StepCost", "describe_pricing", "pricing_from", "pricing_of", "step_cost", "task_turns"]


@dataclass(frozen=True, slots=True)
class Costs:
    usd: float | None  # the step's measurement window
    per_1m_output: float | None
    per_task: float | None


@dataclass(frozen=True, slots=True)
class StepCost:
    gpu: Costs | None  # None: no GPU-hour price
    tokens: Costs | None  # None: no token price

    @property
    def primary(self) -> Costs | None:
        """The cost of running it: the hardware's when priced, else the token bill."""
        return self.gpu if self.gpu is not None else self.tokens


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def pricing_from(data: object) -> Pricing | None:
    """A ``Pricing`` from its ``to_dict`` form; None when it holds no price."""
    if not isinstance(data, Mapping):
        return None
    gpus = data.get("gpus")
    pricing = Pricing(
        usd_per_1m_input=_number(data.get("usd_per_1m_input")),
        usd_per_1m_output=_number(data.get("usd_per_1m_output")),
        usd_per_1m_cache_read=_number(data.get("usd_per_1m_cache_read")),
        gpu_usd_per_hour=_number(data.get("gpu_usd_per_hour")),
        gpus=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 1 else 1,
    )
    priced = (pricing.usd_per_1m_input, pricing.usd_per_1m_output, pricing.gpu_usd_per_hour)
    return None if all(p is None for p in (*priced, pricing.usd_per_1m_cache_read)) else pricing


def pricing_of(header: Mapping[str, object]) -> Pricing | None:
    """The run's pricing: the header's, else its profile's."""
    if "pricing" in header:
        return pricing_from(header.get("pricing"))
    content = header.get("profile_content")
    return pricing_from(content.get("pricing")) if isinstance(content, Mapping) else None


def _mean_of(dist: object) -> float | None:
    """The mean of a distribution in its ``to_dict`` form."""
    if not isinstance(dist, Mapping):
        return _number(dist)
    kind = dist.get("dist")
    if kind == "fixed":
        return _number(dist.get("value"))
    if kind == "uniform":
        lo, hi = _number(dist.get("min")), _number(dist.get("max"))
        return None if lo is None or hi is None else (lo + hi) / 2
    if kind == "empirical":
        values, weights = dist.get("values"), dist.get("weights")
        if isinstance(values, list) and isinstance(weights, list) and sum(weights):
            return sum(float(v) * float(w) for v, w in zip(values, weights, strict=True)) / sum(weights)
        return None
    return _number(dist.get("mean"))


def task_turns(header: Mapping[str, object]) -> float | None:
    """Mean turns per session of a multi-turn profile (a task is a session); None: a task is a request."""
    content = header.get("profile_content")
    session = content.get("session") if isinstance(content, Mapping) else None
    if not isinstance(session, Mapping):
        return None
    turns = _mean_of(session.get("turns"))
    return turns if turns is not None and turns >= 1 else None


def _per(usd: float | None, count: float) -> float | None:
    return None if usd is None or count <= 0 else usd / count


def step_cost(step: StepSummary, pricing: Pricing, turns_per_task: float | None = None) -> StepCost:
    """The step's costs on each basis its pricing has."""
    stats = step.stats
    tasks = stats.ok / (turns_per_task or 1.0)
    gpu = None
    if pricing.gpu_usd_per_hour is not None:
        usd = pricing.gpu_usd_per_hour * pricing.gpus / 3600.0 * stats.duration_s
        gpu = Costs(usd, pricing.cost_per_1m_output_tokens(stats.out_tok_s or 0.0), _per(usd, tasks))
    tokens = None
    bill = pricing.cost_usd(stats.input_tokens, stats.output_tokens, stats.cached_tokens)
    if bill is not None:
        tokens = Costs(bill, _per(bill, stats.output_tokens / 1e6), _per(bill, tasks))
    return StepCost(gpu=gpu, tokens=tokens)


def describe_pricing(pricing: Pricing) -> str:
    """'$0.30 / $1.20 / $0.03 per 1M input / output / cache-read tokens · GPU $3.60/h × 2'."""
    parts = []
    rates = (
        ("input", pricing.usd_per_1m_input),
        ("output", pricing.usd_per_1m_output),
        ("cache-read", pricing.usd_per_1m_cache_read),
    )
    known = [(name, usd) for name, usd in rates if usd is not None]
    if known:
        prices = " / ".join(fmt_usd(usd) for _, usd in known)
        parts.append(f"{prices} per 1M {' / '.join(name for name, _ in known)} tokens")
    if pricing.gpu_usd_per_hour is not None:
        gpus = f" × {fmt_setting(pricing.gpus)}" if pricing.gpus != 1 else ""
        parts.append(f"GPU {fmt_usd(pricing.gpu_usd_per_hour)}/h{gpus}")
    return " · ".join(parts)

"""The figures a comparison and a repeats table put side by side: what each is, its unit, which way is
better, how it is read from a step (its typed summary, its raw record line, its cost) and how it reads.

Goodput is read from the step line when the run wrote it (``goodput_req_s`` / ``goodput_tok_s``, or a
``goodput`` object with ``req_s`` / ``tok_s``); speculative-decoding acceptance from the step's server
columns (``spec_acceptance``, 0..1) when the server reported it. A figure no step has is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from loadgen import measures
from loadgen.analysis.cost import StepCost
from loadgen.format import fmt_num_wide, fmt_pct_wide, fmt_points_wide, fmt_usd
from loadgen.snapshot import StepSummary

__all__ = ["FIGURES", "REPEAT_FIGURES", "Figure", "Look", "clause_figure"]

Look = Callable[[float | None], str]
Value = Callable[[StepSummary, Mapping[str, object], StepCost | None], float | None]


@dataclass(frozen=True, slots=True)
class Figure:
    key: str
    label: str  # with its unit, as a row or column reads
    unit: str
    higher_is_better: bool
    value: Value
    look: Look = fmt_num_wide
    delta_look: Look = fmt_num_wide  # a difference of two values


def _pct(metric: str, point: str, scale: float = 1.0) -> Value:
    def value(step: StepSummary, _line: Mapping[str, object], _cost: StepCost | None) -> float | None:
        raw = step.stats.pct(metric).as_dict()[point]
        return None if raw is None else raw * scale

    return value


def _error_rate(step: StepSummary, _line: Mapping[str, object], _cost: StepCost | None) -> float | None:
    done = step.stats.ok + step.stats.error_count
    return None if done == 0 else step.stats.error_count / done


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _reasoned(get: Value) -> Value:
    """A figure of the reasoning phase or the answer alone: only where the step's requests reasoned (the
    answer's decode speed of a model that does not reason is its decode speed, already a row)."""

    def value(step: StepSummary, line: Mapping[str, object], cost: StepCost | None) -> float | None:
        return get(step, line, cost) if step.stats.reasoned else None

    return value


def _reasoning_per_req(
    step: StepSummary, _line: Mapping[str, object], _cost: StepCost | None
) -> float | None:
    reasoned = step.stats.reasoned
    return step.stats.reasoning_tokens / reasoned if reasoned else None


def _tool_share(step: StepSummary, _line: Mapping[str, object], _cost: StepCost | None) -> float | None:
    """The share of successes that called a tool; None for a step where none did (no tools offered)."""
    stats = step.stats
    return stats.tool_calls / stats.ok if stats.tool_calls and stats.ok else None


def _goodput(unit: str) -> Value:
    def value(_step: StepSummary, line: Mapping[str, object], _cost: StepCost | None) -> float | None:
        flat = _number(line.get(f"goodput_{unit}"))
        nested = line.get("goodput")
        return flat if flat is not None or not isinstance(nested, Mapping) else _number(nested.get(unit))

    return value


def _spec(step: StepSummary, _line: Mapping[str, object], _cost: StepCost | None) -> float | None:
    return _number(step.server.get("spec_acceptance")) if step.server else None


def _agreement(step: StepSummary, _line: Mapping[str, object], _cost: StepCost | None) -> float | None:
    """The share of the step's answer probes that matched their reference (``--quality``), else None."""
    return _number(step.quality.get("agree")) if step.quality else None


def _per_1m(_step: StepSummary, _line: Mapping[str, object], cost: StepCost | None) -> float | None:
    primary = None if cost is None else cost.primary
    return None if primary is None else primary.per_1m_output


def _per_task(_step: StepSummary, _line: Mapping[str, object], cost: StepCost | None) -> float | None:
    primary = None if cost is None else cost.primary
    return None if primary is None else primary.per_task


def _metric_figure(metric: measures.Metric, at: measures.Compared) -> Figure:
    """A metric's figure in compare, as the catalogue declares it (``Metric.compared``)."""
    unit, suffix, scale = ("s", "s", 1 / 1000) if at.in_seconds else (metric.unit, metric.suffix, 1.0)
    get = _pct(metric.name, at.point, scale)
    value = _reasoned(get) if at.only_reasoned else get
    label = f"{metric.short} {at.point} {unit}"
    return Figure(f"{metric.stem}_{at.point}_{suffix}", label, unit, metric.higher_is_better, value)


def clause_figure(clause: measures.Clause) -> Figure:
    """The figure an SLO clause is judged on, in its limit's unit: "TTFT p95 ms", "e2e p95 s", the error rate."""
    if clause.step_figure:
        return _AGREEMENT
    if not clause.metric:
        return _ERROR_RATE
    get = _pct(clause.metric, clause.point, clause.scale)
    return Figure(clause.key, f"{clause.label} {clause.unit}", clause.unit, not clause.at_most, get)


_ERROR_RATE = Figure(
    "error_rate", "error rate", "fraction", False, _error_rate, fmt_pct_wide, fmt_points_wide
)
_AGREEMENT = Figure(measures.QUALITY_AGREE, "answer agreement", "fraction", True, _agreement)
# compare's own figures, each with its rank among them all (a metric's declare theirs in the catalogue)
_OWN: tuple[tuple[int, Figure], ...] = (
    (0, Figure("out_tok_s", "out tok/s", "tok/s", True, lambda s, _l, _c: s.stats.out_tok_s)),
    (50, _ERROR_RATE),
    (55, _AGREEMENT),
    (75, Figure("reasoning_tokens_per_req", "reasoning tok/req", "tokens", False, _reasoning_per_req)),
    (
        105,
        Figure(
            "tool_call_share", "tool-call share", "fraction", True, _tool_share, fmt_pct_wide, fmt_points_wide
        ),
    ),
    (110, Figure("goodput_req_s", "goodput req/s", "req/s", True, _goodput("req_s"))),
    (111, Figure("goodput_tok_s", "goodput tok/s", "tok/s", True, _goodput("tok_s"))),
    (120, Figure("spec_acceptance", "spec accept", "fraction", True, _spec, fmt_pct_wide, fmt_points_wide)),
    (130, Figure("usd_per_1m_output", "$/1M out", "USD", False, _per_1m, fmt_usd, fmt_usd)),
    (131, Figure("usd_per_task", "$/req", "USD", False, _per_task, fmt_usd, fmt_usd)),
)


def _figures(metrics: tuple[measures.Metric, ...], _clauses: object) -> tuple[Figure, ...]:
    ranked = [
        *_OWN,
        *((at.rank, _metric_figure(metric, at)) for metric in metrics for at in metric.compared),
    ]
    # a stable sort: a metric's figure ranked alike follows compare's own and the metrics before it
    return tuple(figure for _rank, figure in sorted(ranked, key=lambda pair: pair[0]))


# Every figure, by rank: throughput and the headline latencies, the error rate, reasoning, tool calls,
# goodput, speculative decoding, cost (TTFAT is TTFT's twin with reasoning excluded).
FIGURES: measures.Live[Figure] = measures.Live(_figures)

# The repeats table of ``ramp report``: the figures a step line always has (rank below the error rate's).
REPEAT_FIGURES: measures.Live[Figure] = measures.Live(lambda ms, cs: FIGURES[:7])

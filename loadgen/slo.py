"""Service-level objectives: whether one window of figures meets an SLO, and which step was best under it.

A verdict lists each broken objective as a short human string ("TTFT p95 812 ms > 500 ms"). ``met`` is
``None`` when there is no SLO (no failures listed) or not enough data to judge (one failure line saying so).

A clause over a subset of the requests has nothing to judge when the subset is empty: TTFTC (time to the
first tool-call delta) in a step where no request called a tool. It is then neither met nor missed: it is
listed in ``not_judged`` ("TTFTC p95 n/a (no tool call in the step; limit 500 ms)"), the other clauses
decide ``met``, and ``met`` is ``None`` when no clause was judged at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from loadgen.config import SLO
from loadgen.format import fmt_num_trimmed
from loadgen.measures import CLAUSES, SUBSET_NONE, Clause
from loadgen.snapshot import SLOVerdict, StepSummary, WindowStats

__all__ = ["best_step", "clause_figure", "eligible", "evaluate", "judge_quality", "margin"]


def _above(failures: list[str], label: str, value: float | None, limit: float | None, unit: str) -> None:
    if limit is None:
        return
    if value is None:
        failures.append(f"{label} n/a (limit {fmt_num_trimmed(limit)} {unit})")
    elif value > limit:
        failures.append(f"{label} {fmt_num_trimmed(value)} {unit} > {fmt_num_trimmed(limit)} {unit}")


def _below(failures: list[str], label: str, value: float | None, limit: float, unit: str) -> None:
    if value is None:
        failures.append(f"{label} n/a (at least {fmt_num_trimmed(limit)} {unit})")
    elif value < limit:
        failures.append(f"{label} {fmt_num_trimmed(value)} {unit} < {fmt_num_trimmed(limit)} {unit}")


def clause_figure(clause: Clause, stats: WindowStats) -> float | None:
    """The window's figure a clause reads, in the limit's unit (the error rate as a fraction); None for a
    clause on a figure of the step itself (answer agreement: ``judge_quality``)."""
    if clause.step_figure:
        return None
    if not clause.metric:
        done = stats.ok + stats.error_count
        return stats.error_count / done if done else None
    value = stats.pct(clause.metric).as_dict()[clause.point]
    return None if value is None else value / clause.per if clause.per != 1.0 else value


def _subset_empty(clause: Clause, stats: WindowStats) -> bool:
    """A clause over a subset of the requests (TTFTC: those that called a tool) with none in the window."""
    return bool(clause.subset) and stats.pct(clause.metric).count == 0


def evaluate(slo: SLO, stats: WindowStats, min_requests: int = 1) -> SLOVerdict:
    """Judge one window against ``slo``: every objective is checked, every broken one is listed."""
    if slo.is_empty():
        return SLOVerdict(met=None)
    done = stats.ok + stats.error_count
    if done < min_requests or done == 0:
        return SLOVerdict(
            met=None, failures=(f"not enough data: {done} requests finished, need {max(1, min_requests)}",)
        )
    failures: list[str] = []
    not_judged: list[str] = []
    limits = slo.as_dict()
    # With no success at all there is no latency to judge; the error rate (or this line) says why.
    if stats.ok == 0 and slo.max_error_rate is None:
        failures.append(f"no successful request ({stats.error_count} errors)")
    elif stats.ok > 0:
        for clause in CLAUSES:
            limit = limits[clause.key]
            if limit is None or not clause.metric:
                continue
            value = clause_figure(clause, stats)
            if clause.subset and (_subset_empty(clause, stats) or value is None):
                # nothing to judge: neither met nor missed
                why = SUBSET_NONE[clause.subset]
                not_judged.append(f"{clause.label} n/a ({why}; limit {fmt_num_trimmed(limit)} {clause.unit})")
            elif clause.at_most:
                _above(failures, clause.label, value, limit, clause.unit)
            else:
                _below(failures, clause.label, value, limit, clause.unit)
    for clause in CLAUSES:
        limit = limits[clause.key]
        if not clause.error_rate or limit is None:
            continue
        rate = stats.error_count / done
        if rate > limit:
            failures.append(
                f"{clause.label} {fmt_num_trimmed(rate * 100)} {clause.unit} > {fmt_num_trimmed(limit * 100)} {clause.unit}"
            )
    # answer agreement is judged apart (``judge_quality``), once the step's probes are compared
    set_clauses = sum(limits[c.key] is not None for c in CLAUSES if not c.step_figure)
    met = False if failures else None if len(not_judged) == set_clauses else True
    return SLOVerdict(met=met, failures=tuple(failures), not_judged=tuple(not_judged))


def _room(value: float | None, limit: float, at_most: bool) -> float | None:
    if value is None:
        return None
    if limit <= 0:  # a zero limit (errors at most 0 %) has no scale: met or missed, by all of it
        return 1.0 if (value <= limit if at_most else value >= limit) else -1.0
    return max(-1.0, min(1.0, (limit - value) / limit if at_most else (value - limit) / limit))


def margin(slo: SLO, stats: WindowStats) -> float | None:
    """How far the window is from its SLO's tightest objective, as a share of that objective's limit:
    above 0 it meets the SLO with that much room, below 0 it misses by that much (``evaluate`` says met
    exactly when this is at least 0). None without an SLO or a figure to judge; -1 with no success at all.
    The SLA search (``loadgen.run.search``) treats a window within its noise band of 0 as uncertain."""
    if slo.is_empty() or stats.ok + stats.error_count == 0:
        return None
    if stats.ok == 0 and slo.max_error_rate is None:
        return -1.0
    limits = slo.as_dict()
    rooms: list[float | None] = []
    for clause in CLAUSES:
        limit = limits[clause.key]
        if limit is None or (clause.metric and stats.ok == 0):
            continue
        # a clause over an empty subset (TTFTC without a tool call) is not judged: no room either way; nor
        # is answer agreement here (a step figure, judged once the step's probes are compared)
        if clause.step_figure or _subset_empty(clause, stats):
            continue
        rooms.append(_room(clause_figure(clause, stats), limit, clause.at_most))
    known = [r for r in rooms if r is not None]
    return min(known) if known and len(known) == len(rooms) else None


def judge_quality(slo: SLO, verdict: SLOVerdict, quality: Mapping[str, object] | None) -> SLOVerdict:
    """``verdict`` with the answer-agreement clause (``quality_agree_min``) judged on the step's probes:
    below the limit it is missed ("answer agreement 0.62 < 0.95"); with no probe compared it is not judged
    (n/a). The point value decides (its interval is in the step line's ``quality``)."""
    limit = slo.quality_agree_min
    if limit is None or verdict.met is None and verdict.failures:
        return verdict
    agree = quality.get("agree") if quality else None
    label = next(c.label for c in CLAUSES if c.key == "quality_agree_min")
    if not isinstance(agree, int | float):
        why = f"{label} n/a (no answer probe compared: --quality; at least {fmt_num_trimmed(limit)})"
        return replace(verdict, not_judged=(*verdict.not_judged, why))
    if agree >= limit:
        return verdict if verdict.met is not None else replace(verdict, met=True)
    failure = f"{label} {agree:.2f} < {fmt_num_trimmed(limit)}"
    failures = (*verdict.failures, failure)
    if verdict.on_intervals is None:
        return replace(verdict, met=False, failures=failures)
    return replace(verdict, met=False, failures=failures, on_intervals="missed")


def eligible(step: StepSummary) -> bool:
    """Whether ``step`` may be a run's best: clean, and it met the SLO (or there is none)."""
    # Only a clean step can be best: one measured start to finish under its own load. A step cut by a key
    # (its requests ran into the next load) or stopped part-way (a signal, a stop) says nothing certain.
    if not step.clean or step.ended_by == "stop":
        return False
    verdict = step.verdict
    if verdict.undecided:
        return False  # its interval straddles a limit: not known to meet it
    if verdict.met is None:
        # no SLO: every step counts; not enough data (a failure line says so), or no clause it could be
        # judged on (not_judged): it does not
        return not verdict.failures and not verdict.not_judged
    return verdict.met


def best_step(steps: Sequence[StepSummary]) -> int | None:
    """Position in ``steps`` of the highest aggregate out tok/s among clean steps that met the SLO.

    Ties go to the lighter load (lower concurrency, or lower rate in open loop), then the earlier step.
    """
    best: tuple[float, float, int] | None = None
    best_at: int | None = None
    for at, step in enumerate(steps):
        out = step.stats.out_tok_s
        if out is None or not eligible(step):
            continue
        load = step.rate_rps if step.mode == "open" and step.rate_rps is not None else float(step.level)
        key = (-out, load, at)
        if best is None or key < best:
            best, best_at = key, at
    return best_at

"""A baseline record held against a live run (``ramp URL --baseline RECORD``): what the console's overlay
reads from it.

The conditions check is ``ramp compare``'s (``loadgen.analysis.conditions``) between the baseline's header
and what the live run is known to run under before and while it runs (its planned header; the model and the
runtime once the server has said): a condition the live run does not know yet (the server's own report,
GPUs, revision from ``/v1/models``) is not held against it, and which steps were client-bound is judged
step by step, not up front. A mismatch is a warning, never a refusal.

Each baseline level (mode plus concurrency, or rate in open loop; its clean steps are its repeats) gives
the curve one point (the medians of its out tok/s and TTFT p95) and the histograms their percentile medians.
A live step is judged against the baseline at its level by ``ramp compare``'s rule
(``loadgen.analysis.comparison.figure_delta``): the live run's clean steps at that level so far against the
baseline's repeats, "within noise" when either side has repeats and the ranges overlap, else better or
worse; with one step on each side there is no noise estimate, and the verdict says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loadgen import measures
from loadgen.analysis.comparison import Delta, figure_delta
from loadgen.analysis.conditions import Difference, differences, show
from loadgen.analysis.figures import FIGURES, Figure, clause_figure
from loadgen.analysis.runs import AnalysisError, LevelKey, Run, Spread, counts, level_key, levels_of, load_run
from loadgen.analysis.runs import spread as spread_of
from loadgen.config import SLO
from loadgen.measures import CLAUSES
from loadgen.snapshot import StepSummary

__all__ = [
    "BASELINE_LABEL",
    "GhostPoint",
    "StepVerdict",
    "Verdict",
    "baseline_problem",
    "ghost_points",
    "live_differences",
    "load_baseline",
    "mismatch_warning",
    "percentiles_at",
    "slo_figure",
    "step_verdict",
]

BASELINE_LABEL = "baseline"
LIVE_LABEL = "this run"
PER_STEP = frozenset({"client_bound"})  # conditions of the steps: judged as each step finishes
MAX_SHOWN = 6  # differences named in the warning (the rest counted)
MAX_VALUE = 32

_BY_KEY = {figure.key: figure for figure in FIGURES}
THROUGHPUT = _BY_KEY["out_tok_s"]


def load_baseline(path: str) -> Run:
    """The baseline record; raises ``AnalysisError`` (one line naming the file) when it cannot be used."""
    return load_run(path, BASELINE_LABEL)


def baseline_problem(path: str) -> str | None:
    """Why ``path`` cannot be a baseline (``--baseline``), else None."""
    try:
        load_baseline(path)
    except AnalysisError as exc:
        return f"--baseline {exc}"
    return None


# ---- conditions -----------------------------------------------------------------------------------------


def _condition(diff: Difference) -> str:
    return diff.key.split(".", 1)[0].split("[", 1)[0]


def live_differences(baseline: Run, live_header: Mapping[str, object]) -> list[Difference]:
    """The conditions the live run (its header as known so far) differs from the baseline in."""
    live = Run(LIVE_LABEL, "", dict(live_header), (), ())
    found = []
    for diff in differences([baseline, live], ()):
        condition = _condition(diff)
        if condition in PER_STEP:
            continue
        unknown_yet = diff.values[1] is None and diff.key == condition and not condition.startswith("tag:")
        if not unknown_yet:
            found.append(diff)
    return found


def _cut(text: str) -> str:
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def _pair(diff: Difference) -> str:
    unset = "unset" if diff.key.startswith("profile.") else "unknown"
    base, live = (_cut(show(v, unset)) for v in diff.values)
    return f"{diff.key} {base} vs {live}"


def mismatch_warning(path: str, diffs: Sequence[Difference]) -> str | None:
    """One line naming each difference with both values (the first ``MAX_SHOWN``; a profile that differs
    in many settings as one item naming the first two), None when matched."""
    if not diffs:
        return None
    profile = [d for d in diffs if _condition(d) == "profile"]
    parts = [_pair(d) for d in diffs if _condition(d) != "profile"]
    if len(profile) > 2:
        parts.insert(0, f"profile in {len(profile)} settings ({'; '.join(_pair(d) for d in profile[:2])}; …)")
    else:
        parts[:0] = [_pair(d) for d in profile]
    more = len(parts) - MAX_SHOWN
    tail = f"; and {more} more (ramp compare names them all)" if more > 0 else ""
    return (
        f"baseline {path} was measured under other conditions (baseline vs this run): "
        + "; ".join(parts[:MAX_SHOWN])
        + tail
    )


# ---- what the overlay draws ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GhostPoint:
    """A baseline level on the throughput-latency curve: the medians over its repeats."""

    key: LevelKey
    out_tok_s: float | None
    ttft_p95_ms: float | None
    repeats: int


def ghost_points(baseline: Run) -> tuple[GhostPoint, ...]:
    """One point per level with a clean step, in the order the baseline ran them."""
    points = []
    for key, level in levels_of(baseline.steps).items():
        if not level.repeats:
            continue
        steps = [baseline.steps[i] for i in level.at]
        out = spread_of(s.stats.out_tok_s for s in steps)
        ttft = spread_of(s.stats.pct(measures.TTFT_MS).p95 for s in steps)
        points.append(
            GhostPoint(
                key,
                None if out is None else out.median,
                None if ttft is None else ttft.median,
                level.repeats,
            )
        )
    return tuple(points)


def percentiles_at(baseline: Run, key: LevelKey, metric: str) -> dict[str, float]:
    """The baseline's median p50 / p95 / p99 of ``metric`` at ``key`` (those it knows; {} off its levels)."""
    level = levels_of(baseline.steps).get(key)
    if level is None or not level.repeats:
        return {}
    out = {}
    for point in ("p50", "p95", "p99"):
        found = spread_of(baseline.steps[i].stats.pct(metric).as_dict()[point] for i in level.at)
        if found is not None:
            out[point] = found.median
    return out


# ---- verdicts -------------------------------------------------------------------------------------------


def slo_figure(slo: SLO) -> Figure:
    """The figure a step is judged on besides throughput: the SLO's first clause, else TTFT p95."""
    limits = slo.as_dict()
    return clause_figure(next((c for c in CLAUSES if limits[c.key] is not None), CLAUSES[0]))


@dataclass(frozen=True, slots=True)
class Verdict:
    """One figure of a live level against the baseline's at the same level."""

    figure: Figure
    baseline: Spread
    live: Spread
    delta: Delta

    @property
    def noise_known(self) -> bool:
        """Either side has repeats: a range to tell noise from a difference."""
        return self.baseline.n > 1 or self.live.n > 1

    @property
    def word(self) -> str:
        """The mark: better, worse, within noise, or same."""
        return self.delta.mark or "same"


@dataclass(frozen=True, slots=True)
class StepVerdict:
    """A finished live step against the baseline: its verdicts, or why it has none."""

    key: LevelKey
    verdicts: tuple[Verdict, ...] = ()
    reason: str = ""  # why there is no verdict ("" when there are verdicts)


def _spread(baseline: Run, at: Sequence[int], figure: Figure) -> Spread | None:
    return spread_of(figure.value(baseline.steps[i], baseline.lines[i], None) for i in at)


def step_verdict(
    baseline: Run, steps: Sequence[StepSummary], position: int, figures: Sequence[Figure]
) -> StepVerdict:
    """``steps[position]`` (with the live run's earlier clean steps at its level, its repeats) against the
    baseline at that level, for each of ``figures``."""
    step = steps[position]
    key = level_key(step)
    if not counts(step):
        return StepVerdict(key, reason="cut by a change" if not step.clean else "stopped part-way")
    level = levels_of(baseline.steps).get(key)
    if level is None or not level.repeats:
        return StepVerdict(key, reason=f"baseline has no clean step at {key.label}")
    live_steps = [s for s in steps[: position + 1] if counts(s) and level_key(s) == key]
    verdicts = []
    for figure in figures:
        base = _spread(baseline, level.at, figure)
        live = spread_of(figure.value(s, {}, None) for s in live_steps)
        delta = figure_delta(figure, base, live)
        if base is not None and live is not None and delta is not None:
            verdicts.append(Verdict(figure, base, live, delta))
    if not verdicts:
        return StepVerdict(key, reason="no figure to compare")
    return StepVerdict(key, tuple(verdicts))

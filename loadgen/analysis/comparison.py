"""A comparison of runs as data: runs side by side, only when they were measured under the same conditions
but the ones named as the variable under test (``--vary``).

First the conditions (``loadgen.analysis.conditions``): a difference not covered by ``--vary`` refuses the
comparison (exit 2, every difference named with each run's value) unless ``--force``, and then every table
carries the warning. Then level by level (steps matched by mode and concurrency, or rate in open loop; the
clean steps at one level are its repeats: their median and range), each figure of each run, and of every run
after the first its delta and % against the first. Where both runs' steps carry the figure's margin of error
(``StepSummary.margins``, ``loadgen.stats``), a difference is called only when the interval of the
difference excludes 0: each run's repeats combined into one interval (between-repeat variance included),
the two intervals' difference formed, and otherwise "within noise (±x)". Records written before margins
existed fall back on the older rules: "within noise" when the repeats' ranges overlap, or with no repeats
to estimate the noise from, when the medians differ by less than ``NOISE_FLOOR_PCT``; each run's
knee: its level with the highest median out tok/s over the repeats among the levels whose repeats met the
SLO (the median verdict: more than half of them).

Owns the comparison as data (``Comparison``, ``build``) and its JSON (``as_json``, schema ``SCHEMA``, every
key always present); the terminal text is ``loadgen.analysis.compare_text``'s, the command
``loadgen.analysis.compare``'s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from loadgen.analysis.conditions import Difference, conditions_of, differences
from loadgen.analysis.cost import StepCost, pricing_of, step_cost, task_turns
from loadgen.analysis.figures import FIGURES, Figure
from loadgen.analysis.quality import answers_changed, pooled
from loadgen.analysis.runs import (
    LevelKey,
    LevelSteps,
    Run,
    Spread,
    levels_of,
    spread,
)
from loadgen.slo import eligible
from loadgen.snapshot import StepSummary
from loadgen.stats import Interval, combine, difference_bounds

__all__ = [
    "SCHEMA",
    "Comparison",
    "Delta",
    "Knee",
    "LevelComparison",
    "MetricRow",
    "as_json",
    "build",
    "figure_delta",
    "level_interval",
    "step_interval",
    "warning_line",
]

SCHEMA = 1
# With one step per level there is no noise to measure: a difference this small (in %) is not called better
# or worse. Repeats (--repeat N) measure the noise instead, by their ranges.
NOISE_FLOOR_PCT = 2.0


@dataclass(frozen=True, slots=True)
class Delta:
    delta: float  # against the first run's median
    pct: float | None  # 10.0 = +10 %; None when the first run's value is 0
    mark: str  # "within noise" | "better" | "worse" | "" (the same)
    # why "within noise": "interval" (the difference's 95 % interval holds 0), "open" (a tail too thin to
    # bound from above: its bounds hold 0), "ranges" (the repeats' ranges overlap), "floor" (NOISE_FLOOR_PCT)
    noise: str = ""
    # the difference's 95 % interval (combined repeats of each run), when both runs' steps carry margins
    lo: float | None = None
    hi: float | None = None

    @property
    def half(self) -> float | None:
        """The ± of the difference's interval."""
        return None if self.lo is None or self.hi is None else (self.hi - self.lo) / 2


@dataclass(frozen=True, slots=True)
class MetricRow:
    figure: Figure
    values: tuple[Spread | None, ...]  # per run
    deltas: tuple[Delta | None, ...]  # per run; the first run's is None


@dataclass(frozen=True, slots=True)
class LevelComparison:
    key: LevelKey
    steps: tuple[LevelSteps | None, ...]  # per run; None: that run has no step at this level
    client_bound: tuple[bool, ...]
    rows: tuple[MetricRow, ...]
    # per run: the diagnosis of its steps at this level (``loadgen.analysis.diagnosis``), their kinds joined
    # by " / " where repeats disagree; None: no step here, or none diagnosed (a record from before)
    limits: tuple[str | None, ...] = ()
    # per run: its answer probes at this level, pooled over repeats (``loadgen.analysis.quality.pooled``),
    # and whether they agree less than the first run's (its "better" marks then say so)
    quality: tuple[Mapping[str, object] | None, ...] = ()
    changed: tuple[bool, ...] = ()


@dataclass(frozen=True, slots=True)
class Knee:
    level: LevelKey
    out_tok_s: float | None  # the median over the level's repeats
    repeats: int = 1
    spread: Spread | None = None


@dataclass(frozen=True, slots=True)
class Comparison:
    runs: tuple[Run, ...]
    vary: tuple[str, ...]
    differences: tuple[Difference, ...]
    forced: bool
    levels: tuple[LevelComparison, ...]
    only_in: tuple[tuple[LevelKey, tuple[str, ...]], ...]  # levels run by one run only, and by whom
    knees: tuple[Knee | None, ...]
    task_label: str  # "req", "session" or "task" (mixed)

    @property
    def unmatched(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if not d.varied)

    @property
    def refused(self) -> bool:
        return bool(self.unmatched) and not self.forced


def unmatched_keys(comparison: Comparison) -> list[str]:
    """The conditions the runs differ in beyond the varied ones (a profile's paths named once, as "profile")."""
    return list(dict.fromkeys(d.vary if d.vary == "profile" else d.key for d in comparison.unmatched))


def warning_line(comparison: Comparison) -> str:
    """The warning a forced comparison carries."""
    return (
        "not a matched comparison (--force): the runs differ in "
        + ", ".join(unmatched_keys(comparison))
        + " besides what is varied"
    )


def step_interval(figure: Figure, step: StepSummary) -> Interval | None:
    """The step's interval of ``figure`` (its margins; e2e in s read from its ms), None without one."""
    iv = step.margins.get(figure.key)
    scale = 1.0
    if iv is None and figure.key.endswith("_s") and not figure.key.endswith("tok_s"):
        iv, scale = step.margins.get(figure.key[:-2] + "_ms"), 1 / 1000
    if iv is None or iv.lo is None or (iv.hi is None and not iv.open_above):
        return None
    if scale == 1.0:
        return iv
    hi = None if iv.hi is None else iv.hi * scale
    return dataclasses.replace(iv, value=iv.value * scale, lo=iv.lo * scale, hi=hi)


def level_interval(figure: Figure, steps: Sequence[StepSummary]) -> Interval | None:
    """One interval of ``figure`` over a level's repeats; None when a repeat has none. A repeat open above
    (too few values to bound a tail) leaves the level open above, bounded below by the lowest repeat."""
    known = [step_interval(figure, s) for s in steps]
    if not known or any(iv is None for iv in known):
        return None
    ivs = [iv for iv in known if iv is not None]
    opened = [iv for iv in ivs if iv.open_above]
    if opened:
        low = min(iv.lo for iv in ivs if iv.lo is not None)
        values = sorted(iv.value for iv in ivs)
        return dataclasses.replace(opened[0], value=values[len(values) // 2], lo=low, hi=None)
    return combine(ivs)


def figure_delta(
    figure: Figure,
    base: Spread | None,
    other: Spread | None,
    base_iv: Interval | None = None,
    other_iv: Interval | None = None,
) -> Delta | None:
    """``other`` against ``base``. With both intervals: "within noise" unless the interval of the
    difference excludes 0. Without (older records): "within noise" when either has repeats and their
    ranges overlap, or when neither has repeats and the medians differ by less than ``NOISE_FLOOR_PCT``.
    Else "better" or "worse" by the figure's direction ("" when the medians are equal)."""
    if base is None or other is None:
        return None
    delta = other.median - base.median
    pct = None if base.median == 0 else delta / abs(base.median) * 100.0
    bounds = None if base_iv is None or other_iv is None else difference_bounds(other_iv, base_iv)
    if bounds is not None:
        # an interval open above (a tail too thin to bound) gives bounds without a standard error: a
        # difference is called only where the lower end of one lies past the upper end of the other
        lo, hi = bounds
        low, high = (None if math.isinf(lo) else lo), (None if math.isinf(hi) else hi)
        if lo <= 0 <= hi:
            assert base_iv is not None and other_iv is not None
            how = "open" if base_iv.open_above or other_iv.open_above else "interval"
            return Delta(delta, pct, "within noise", how, low, high)
        better = (lo > 0) == figure.higher_is_better
        return Delta(delta, pct, "better" if better else "worse", "", low, high)
    repeated = base.n > 1 or other.n > 1
    if delta == 0:
        return Delta(delta, pct, "")
    if repeated and base.overlaps(other):
        return Delta(delta, pct, "within noise", "ranges")
    if not repeated and pct is not None and abs(pct) < NOISE_FLOOR_PCT:
        return Delta(delta, pct, "within noise", "floor")
    return Delta(delta, pct, "better" if (delta > 0) == figure.higher_is_better else "worse")


def _costs(run: Run) -> list[StepCost | None]:
    pricing = pricing_of(run.header)
    turns = task_turns(run.header)
    return [None if pricing is None else step_cost(step, pricing, turns) for step in run.steps]


def _level(key: LevelKey, runs: Sequence[Run], costs: Sequence[Sequence[StepCost | None]]) -> LevelComparison:
    steps = tuple(levels_of(run.steps).get(key) for run in runs)
    rows = []
    for figure in FIGURES:
        values = []
        intervals: list[Interval | None] = []
        for run, cost, level in zip(runs, costs, steps, strict=True):
            known = (
                [] if level is None else [figure.value(run.steps[i], run.lines[i], cost[i]) for i in level.at]
            )
            values.append(spread(known))
            intervals.append(
                None if level is None else level_interval(figure, [run.steps[i] for i in level.at])
            )
        if all(v is None for v in values):
            continue  # no run has this figure here (no goodput written, no pricing, no speculation)
        deltas = (
            None,
            *(
                figure_delta(figure, values[0], v, intervals[0], iv)
                for v, iv in zip(values[1:], intervals[1:], strict=True)
            ),
        )
        rows.append(MetricRow(figure, tuple(values), deltas))
    bound = tuple(
        level is not None and any(run.steps[i].client_bound for i in level.at)
        for run, level in zip(runs, steps, strict=True)
    )
    limits = tuple(
        None if level is None else _limit(run, level.at) for run, level in zip(runs, steps, strict=True)
    )
    quality = tuple(
        None if level is None else pooled([run.steps[i].quality for i in level.at])
        for run, level in zip(runs, steps, strict=True)
    )
    changed = tuple(i > 0 and answers_changed(quality[0], q) for i, q in enumerate(quality))
    if any(changed):  # never "better" alone where the answers changed
        rows = [_said_changed(row, changed) for row in rows]
    return LevelComparison(key, steps, bound, tuple(rows), limits, quality, changed)


def _said_changed(row: MetricRow, changed: Sequence[bool]) -> MetricRow:
    deltas = tuple(
        replace(d, mark="better, but answers changed") if d is not None and c and d.mark == "better" else d
        for d, c in zip(row.deltas, changed, strict=True)
    )
    return replace(row, deltas=deltas)


def _limit(run: Run, at: Sequence[int]) -> str | None:
    kinds = [k for i in at if isinstance(k := run.steps[i].diagnosis.get("kind"), str)]
    return " / ".join(dict.fromkeys(kinds)) if kinds else None


def _knee(run: Run) -> Knee | None:
    """The level whose repeats met the SLO (more than half of them) with the highest median out tok/s;
    ties to the lighter load."""
    best: tuple[float, LevelKey, Spread] | None = None
    for key, level in levels_of(run.steps).items():
        met = sum(eligible(run.steps[at]) for at in level.at)
        out = spread(run.steps[at].stats.out_tok_s for at in level.at)
        if out is None or met * 2 <= level.repeats:
            continue
        if best is None or (-out.median, key) < (-best[0], best[1]):
            best = (out.median, key, out)
    return None if best is None else Knee(best[1], best[0], best[2].n, best[2])


def _task_label(runs: Sequence[Run]) -> str:
    sessions = {task_turns(run.header) is not None for run in runs}
    return "task" if len(sessions) > 1 else ("session" if True in sessions else "req")


def build(runs: Sequence[Run], vary: Sequence[str], force: bool) -> Comparison:
    """The comparison of ``runs`` (the first is the baseline); its levels are empty when it is refused."""
    diffs = tuple(differences(runs, vary))
    refused = any(not d.varied for d in diffs) and not force
    per_run = [levels_of(run.steps) for run in runs]
    keys = sorted({k for levels in per_run for k in levels})
    shared = [k for k in keys if sum(k in levels for levels in per_run) >= 2]
    only_in = tuple(
        (k, tuple(run.label for run, levels in zip(runs, per_run, strict=True) if k in levels))
        for k in keys
        if k not in shared
    )
    costs = [_costs(run) for run in runs]
    task = _task_label(runs)
    labels = {"usd_per_task": f"$/{task}"}
    levels = () if refused else tuple(_relabel(_level(k, runs, costs), labels) for k in shared)
    return Comparison(
        runs=tuple(runs),
        vary=tuple(vary),
        differences=diffs,
        forced=force and any(not d.varied for d in diffs),
        levels=levels,
        only_in=only_in,
        knees=tuple(_knee(run) for run in runs),
        task_label=task,
    )


def _relabel(level: LevelComparison, labels: Mapping[str, str]) -> LevelComparison:
    rows = tuple(
        dataclasses.replace(row, figure=dataclasses.replace(row.figure, label=labels[row.figure.key]))
        if row.figure.key in labels
        else row
        for row in level.rows
    )
    return dataclasses.replace(level, rows=rows)


# ---- JSON ---------------------------------------------------------------------------------------------


def _run_json(run: Run, knee: Knee | None) -> dict[str, object]:
    pricing = pricing_of(run.header)
    return {
        "label": run.label,
        "path": run.path,
        "model": run.header.get("model"),
        "runtime": run.header.get("runtime"),
        "knee": None
        if knee is None
        else {
            "mode": knee.level.mode,
            "load": knee.level.load,
            "label": knee.level.label,
            "out_tok_s": knee.out_tok_s,  # the median over its repeats
            "repeats": knee.repeats,
            "range": None if knee.spread is None else [knee.spread.low, knee.spread.high],
        },
        "pricing": None if pricing is None else pricing.to_dict(),
        "conditions": {key: c.value for key, c in conditions_of(run).items()},
    }


def _level_json(level: LevelComparison) -> dict[str, object]:
    key = level.key
    return {
        "mode": key.mode,
        "level": int(key.load) if key.mode == "closed" else None,
        "rate_rps": key.load if key.mode == "open" else None,
        "label": key.label,
        "runs": [
            None
            if steps is None
            else {
                "steps": steps.repeats,
                "left_out": steps.left_out,
                "other_passes": steps.other_passes,
                "client_bound": bound,
                **({"diagnosis": limit} if limit else {}),  # a record from before diagnoses has none
                **({"quality": dict(q), "answers_changed": c} if q else {}),  # runs with --quality only
            }
            for steps, bound, limit, q, c in zip(
                level.steps,
                level.client_bound,
                level.limits or (None,) * len(level.steps),
                level.quality or (None,) * len(level.steps),
                level.changed or (False,) * len(level.steps),
                strict=True,
            )
        ],
        "metrics": [
            {
                "metric": row.figure.key,
                "label": row.figure.label,
                "unit": row.figure.unit,
                "better": "higher" if row.figure.higher_is_better else "lower",
                "values": [None if v is None else v.as_dict() for v in row.values],
                "deltas": [
                    None
                    if d is None
                    else {
                        "delta": d.delta,
                        "pct": d.pct,
                        "mark": d.mark,
                        "noise": d.noise or None,
                        "lo": d.lo,
                        "hi": d.hi,
                    }
                    for d in row.deltas
                ],
            }
            for row in level.rows
        ],
    }


def as_json(comparison: Comparison) -> dict[str, object]:
    """The comparison for scripts (schema ``SCHEMA``; every key always present, null when unknown)."""
    return {
        "schema": SCHEMA,
        "refused": comparison.refused,
        "forced": comparison.forced,
        "vary": list(comparison.vary),
        "runs": [_run_json(run, knee) for run, knee in zip(comparison.runs, comparison.knees, strict=True)],
        "differences": [
            {"key": d.key, "values": list(d.values), "varied": d.varied} for d in comparison.differences
        ],
        "warning": warning_line(comparison) if comparison.forced else None,
        "levels": [_level_json(level) for level in comparison.levels],
    }

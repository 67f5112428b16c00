"""The console's baseline (``ramp URL --baseline RECORD``): the record, read once as the console starts,
held against the live run; and the words the panels say about it.

The live run's conditions are its record header as ``loadgen.run.recording`` writes it, built from the
run's ``RunConfig`` before the first request (``planned_header``), with the model and the runtime taken
from the snapshot once the server has said. Differences are warnings (the errors panel's list, and "⚠" in
the curve's legend); the overlay is drawn anyway. The arithmetic (levels, medians, the noise rule) is
``loadgen.analysis.baseline``'s; this module keeps the state and the text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loadgen.analysis.baseline import (
    THROUGHPUT,
    GhostPoint,
    StepVerdict,
    Verdict,
    ghost_points,
    live_differences,
    load_baseline,
    mismatch_warning,
    percentiles_at,
    slo_figure,
    step_verdict,
)
from loadgen.analysis.runs import AnalysisError, LevelKey, Run
from loadgen.config import SLO, RunConfig
from loadgen.format import fmt_count, fmt_pct, fmt_range, fmt_signed
from loadgen.run.recording import record_header
from loadgen.run.state import Load, RunStatus
from loadgen.snapshot import Snapshot, StepSummary
from tui.view import CurveX

__all__ = [
    "LiveBaseline",
    "current_level",
    "open_baseline",
    "planned_header",
    "verdict_cell",
    "verdict_lines",
]

UNKNOWN_MODEL = ("", "auto")  # what the snapshot's model reads before the server has said
WORDS = {"better": "better", "worse": "worse", "within noise": "noise", "same": "same"}
GLYPHS = {"better": "▲", "worse": "▼", "within noise": "≈", "same": "="}  # the narrowest table's words
NO_NOISE = "?"  # after a word: one step on each side, no noise estimate
NO_VERDICT = "–"

Identity = tuple[str, str | None, str | None]  # model, runtime, runtime version


def planned_header(config: RunConfig) -> dict[str, object]:
    """The record header the run will write, as far as it is known before the server is asked."""
    slo = config.slo if config.slo is not None else config.profile.slo
    status = RunStatus(model=config.target.model)
    return record_header(config, status, Load.of(config), slo, None, {})


def current_level(snapshot: Snapshot) -> LevelKey:
    """The load the run is under now, as a step's level reads."""
    if snapshot.mode == "open" and snapshot.rate_rps is not None:
        return LevelKey("open", float(snapshot.rate_rps))
    return LevelKey(snapshot.mode, float(snapshot.level))


@dataclass(slots=True)
class LiveBaseline:
    """A baseline record and the live run's planned conditions; ``problem`` when it could not be read."""

    path: str
    run: Run | None
    planned: Mapping[str, object] = field(default_factory=dict)
    problem: str = ""
    ghosts: tuple[GhostPoint, ...] = ()
    checked: dict[Identity, tuple[str, ...]] = field(default_factory=dict)  # warnings per server identity

    @classmethod
    def open(cls, path: str, config: RunConfig) -> LiveBaseline:
        try:
            run = load_baseline(path)
        except AnalysisError as exc:
            return cls(path, None, problem=f"baseline not shown: {exc}")
        return cls(path, run, planned_header(config), ghosts=ghost_points(run))

    def live_header(self, snapshot: Snapshot) -> dict[str, object]:
        header = dict(self.planned)
        header["model"] = None if snapshot.model in UNKNOWN_MODEL else snapshot.model
        header["runtime"] = snapshot.runtime
        header["runtime_version"] = snapshot.runtime_version
        return header

    def warnings(self, snapshot: Snapshot) -> tuple[str, ...]:
        """The conditions check against what the live run is known to run under now."""
        if self.run is None:
            return (self.problem,)
        identity = (snapshot.model, snapshot.runtime, snapshot.runtime_version)
        if identity not in self.checked:
            warning = mismatch_warning(self.path, live_differences(self.run, self.live_header(snapshot)))
            self.checked[identity] = () if warning is None else (warning,)
        return self.checked[identity]

    def annotate(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the baseline's warnings after the run's own."""
        extra = self.warnings(snapshot)
        return dataclasses.replace(snapshot, warnings=(*snapshot.warnings, *extra)) if extra else snapshot

    def curve_points(self, x_axis: CurveX) -> list[tuple[float, float]]:
        """(x, TTFT p95) of each baseline level, x its out tok/s or its level."""
        points = []
        for ghost in self.ghosts:
            x = ghost.out_tok_s if x_axis == "out_tok_s" else ghost.key.load
            if x is not None and ghost.ttft_p95_ms is not None:
                points.append((x, ghost.ttft_p95_ms))
        return points

    def percentiles(self, snapshot: Snapshot, metric: str) -> dict[str, float]:
        """The baseline's p50 / p95 / p99 of ``metric`` at the load the run is under now."""
        return {} if self.run is None else percentiles_at(self.run, current_level(snapshot), metric)

    def verdicts(self, steps: Sequence[StepSummary], slo: SLO) -> dict[int, StepVerdict]:
        """Each finished step (by ``StepSummary.index``) against the baseline: out tok/s and the SLO's
        figure."""
        if self.run is None:
            return {}
        figures = (THROUGHPUT, slo_figure(slo))
        return {step.index: step_verdict(self.run, steps, at, figures) for at, step in enumerate(steps)}

    def detail(self, steps: Sequence[StepSummary], position: int, slo: SLO) -> list[str]:
        """``steps[position]`` against the baseline in words, for the step detail view."""
        if self.run is None:
            return [self.problem]
        found = step_verdict(self.run, steps, position, (THROUGHPUT, slo_figure(slo)))
        return verdict_lines(found, self.path)


def open_baseline(config: RunConfig | None) -> LiveBaseline | None:
    """The run's baseline (``RunConfig.baseline``), None without one."""
    if config is None or config.baseline is None:
        return None
    return LiveBaseline.open(config.baseline, config)


# ---- words ------------------------------------------------------------------------------------------------


def _word(verdict: Verdict, glyph: bool = False) -> str:
    word = (GLYPHS if glyph else WORDS).get(verdict.word, verdict.word)
    return word if verdict.noise_known or verdict.word == "same" else word + NO_NOISE


def _pct(verdict: Verdict) -> str:
    pct = verdict.delta.pct
    return "" if pct is None else fmt_signed(pct / 100.0, lambda v: fmt_pct(v, 0)) + " "


def verdict_cell(found: StepVerdict | None, compact: int = 0) -> str:
    """The steps table's cell: '+12% better · -8% noise' (out tok/s, then the SLO's figure); ``compact`` 1
    drops the percentages, 2 writes the words as ▲ ▼ ≈ =. '?' after a word: one step on each side, no noise
    estimate."""
    if found is None or not found.verdicts:
        return NO_VERDICT
    return " · ".join((_pct(v) if compact == 0 else "") + _word(v, compact >= 2) for v in found.verdicts)


def _spread_text(verdict: Verdict, side: str) -> str:
    spread = verdict.baseline if side == "baseline" else verdict.live
    look = verdict.figure.look
    if spread.n == 1:
        return look(spread.median)
    shown = fmt_range(spread.median, spread.low, spread.high, look)
    return f"{shown} over {fmt_count(spread.n)} steps"


def verdict_lines(found: StepVerdict | None, path: str) -> list[str]:
    """The step detail view's lines: each figure, this run against the baseline, the delta and the mark."""
    if found is None:
        return []
    head = f"vs baseline {path} at {found.key.label}"
    if not found.verdicts:
        return [f"{head}: no verdict ({found.reason})"]
    lines = [head + ":"]
    for verdict in found.verdicts:
        delta = fmt_signed(verdict.delta.delta, verdict.figure.delta_look)
        pct = "" if verdict.delta.pct is None else f" ({fmt_signed(verdict.delta.pct / 100.0, fmt_pct)})"
        noise = "" if verdict.noise_known else ", no noise estimate (one step on each side)"
        lines.append(
            f"  {verdict.figure.label}: {_spread_text(verdict, 'live')} vs "
            f"{_spread_text(verdict, 'baseline')}: {delta}{pct} {verdict.word}{noise}"
        )
    return lines

"""The console's baseline (``ramp URL --baseline RECORD``): the record, read once as the console starts,
held against the live run; and the words the panels say about it.

The live run's conditions are its record header as ``loadgen.run.recording`` writes it, built from the
run's ``RunConfig`` before the first request (``planned_header``), with the model and the runtime taken
from the snapshot once the server has said. Differences are warnings (the errors panel's list, and "⚠" in
the curve's legend); the overlay is drawn anyway. The arithmetic (levels, medians, the noise rule) is
``loadgen.analysis.baseline``'s, the words ``loadgen.analysis.baseline_words``' (the headless face says the
same); this module keeps the state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loadgen.analysis.baseline import (
    THROUGHPUT,
    GhostPoint,
    StepVerdict,
    ghost_points,
    live_differences,
    load_baseline,
    mismatch_warning,
    percentiles_at,
    slo_figure,
    step_verdict,
)
from loadgen.analysis.baseline_words import GLYPHS, WORDS, verdict_cell, verdict_lines
from loadgen.analysis.runs import AnalysisError, LevelKey, Run
from loadgen.config import SLO
from loadgen.run.config import RunConfig
from loadgen.run.recording import planned_header
from loadgen.snapshot import Snapshot, StepSummary
from tui.view import CurveX

__all__ = [
    "GLYPHS",
    "WORDS",
    "LiveBaseline",
    "current_level",
    "open_baseline",
    "planned_header",
    "verdict_cell",
    "verdict_lines",
]

UNKNOWN_MODEL = ("", "auto")  # what the snapshot's model reads before the server has said

Identity = tuple[str, str | None, str | None]  # model, runtime, runtime version


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

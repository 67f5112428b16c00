"""A record read for a report: its run (header, typed steps, raw step lines), events, the best step and what
each step cost. Engine-free: built from the JSONL file alone.

Owns ``ReportRun`` and ``load_report_run``. Unlike ``load_run`` (a comparison needs steps), a record with no
finished step is still reported ("no finished step"); a missing file, a line that is not JSON or a damaged
step line is an ``AnalysisError`` naming the file and the line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from loadgen.analysis.cost import StepCost, pricing_of, step_cost, task_turns
from loadgen.analysis.runs import Run, read_steps
from loadgen.record import JsonObject
from loadgen.slo import best_step

__all__ = ["ReportRun", "load_report_run"]


@dataclass(frozen=True, slots=True)
class ReportRun:
    run: Run
    events: tuple[JsonObject, ...]
    truncated: bool  # the last line was cut short (run killed mid-write) and skipped
    best: int | None  # position in ``run.steps`` of the best step under the SLO
    costs: Mapping[int, StepCost]  # by step index; empty without pricing
    task: str  # what one task is: "req", or "session" for a multi-turn profile

    @property
    def end(self) -> JsonObject | None:
        """The run's last ``end`` event; None when it was interrupted before writing one."""
        ends = [e for e in self.events if e.get("kind") == "end"]
        return ends[-1] if ends else None

    @property
    def marks(self) -> list[JsonObject]:
        return [e for e in self.events if e.get("kind") == "mark"]


def load_report_run(path: str, label: str) -> ReportRun:
    """Read ``path`` for a report; ``label`` names it among several ("A", "B", ...)."""
    record, steps = read_steps(path)
    run = Run(label=label, path=path, header=record.header, steps=tuple(steps), lines=tuple(record.steps))
    pricing, turns = pricing_of(record.header), task_turns(record.header)
    costs = {} if pricing is None else {s.index: step_cost(s, pricing, turns) for s in steps}
    return ReportRun(
        run=run,
        events=tuple(record.events),
        truncated=record.truncated,
        best=best_step(steps),
        costs=costs,
        task="req" if turns is None else "session",
    )

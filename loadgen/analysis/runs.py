"""Records as the analysis reads them: a run (its header, its steps typed, its step lines as written), the
levels its steps ran at, and the repeats of each level (the ``--repeat`` steps of one pass at a level, as the
step lines' ``repeat`` says; two visits to a level are two passes, not repeats) as a median and a range.

Owns ``AnalysisError`` (one line naming the file and what to do), ``load_run``, ``LevelKey`` (a step's load:
mode plus concurrency, or plus rate in open loop), ``Spread`` (median, min, max over repeats) and
``levels_of``. Only clean steps count: a step cut by a key (its requests ran into the next load) or stopped
part-way measures nothing certain, so it is left out and counted as such.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from loadgen import strict_json
from loadgen.format import fmt_setting
from loadgen.record import JsonObject, Record, RecordError, read_record, step_from_line
from loadgen.snapshot import StepSummary

__all__ = [
    "AnalysisError",
    "LevelKey",
    "LevelSteps",
    "Run",
    "Spread",
    "level_key",
    "levels_of",
    "passes_of",
    "load_run",
    "read_steps",
    "spread",
]


class AnalysisError(Exception):
    """A record the analysis cannot use; ``str`` is one line naming the file and what to do."""


@dataclass(frozen=True, slots=True)
class Run:
    """One record: ``steps[i]`` is the typed ``lines[i]`` (the raw line keeps keys a StepSummary lacks)."""

    label: str  # "A", "B", ... in the order given
    path: str
    header: JsonObject
    steps: tuple[StepSummary, ...]
    lines: tuple[JsonObject, ...]


def _file_line(path: str, nth_step: int) -> int | str:
    """The line number in the file of its ``nth_step`` step line (0-based), "?" when it cannot be found."""
    seen = -1
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                try:
                    obj = strict_json.loads(line)
                except ValueError:  # strict_json: not JSON, nested too deeply, an integer too long
                    continue
                if isinstance(obj, dict) and obj.get("type") == "step":
                    seen += 1
                    if seen == nth_step:
                        return number
    except OSError:
        pass
    return "?"


def read_steps(path: str) -> tuple[Record, list[StepSummary]]:
    """A record and its step lines as summaries; ``AnalysisError`` for a missing file, a file that is not a
    record, or a damaged step line (named by its line in the file)."""
    try:
        record = read_record(path)
    except RecordError as exc:
        raise AnalysisError(str(exc)) from None
    steps = []
    for n, line in enumerate(record.steps):
        try:
            steps.append(step_from_line(line))
        except (TypeError, ValueError, KeyError) as exc:
            where = _file_line(path, n)
            raise AnalysisError(f"{path} line {where}: step line {n + 1} is damaged: {exc}") from None
    return record, steps


def load_run(path: str, label: str) -> Run:
    """Read a record for analysis; raises ``AnalysisError`` for a missing file, a file that is not a record,
    a damaged step line, or a record with no finished step."""
    record, steps = read_steps(path)
    if not steps:
        raise AnalysisError(
            f"{path}: no finished step in this record, nothing to compare "
            "(the run ended before its first step did: run it again)"
        )
    return Run(label=label, path=path, header=record.header, steps=tuple(steps), lines=tuple(record.steps))


@dataclass(frozen=True, slots=True, order=True)
class LevelKey:
    """Where a step ran: closed loop at a concurrency, or open loop at an arrival rate."""

    mode: str
    load: float  # concurrency (closed) or req/s (open)

    @property
    def label(self) -> str:
        if self.mode == "open":
            return f"{fmt_setting(self.load)} req/s"
        streams = int(self.load)
        return f"{streams} stream{'' if streams == 1 else 's'}"


def level_key(step: StepSummary) -> LevelKey:
    if step.mode == "open" and step.rate_rps is not None:
        return LevelKey("open", float(step.rate_rps))
    return LevelKey(step.mode, float(step.level))


def counts(step: StepSummary) -> bool:
    """A step whose figures may be used: measured start to finish under its own load."""
    return step.clean and step.ended_by != "stop"


@dataclass(frozen=True, slots=True)
class LevelSteps:
    """A run's steps at one level: the clean ones (repeats) and how many were left out."""

    key: LevelKey
    at: tuple[int, ...]  # positions in ``Run.steps`` of the clean steps, in the order run
    left_out: int
    other_passes: int = 0  # steps of other passes at this level (``--steps 4,8,4``): not repeats of it

    @property
    def repeats(self) -> int:
        return len(self.at)


def passes_of(steps: Sequence[StepSummary]) -> dict[LevelKey, list[list[int]]]:
    """Each level's passes, in the order run: a pass is a step and the ``--repeat`` repeats that followed it
    (the step line's ``repeat`` counts them: 0 opens a pass, 1, 2 ... join the level's latest one). Two visits
    to one level in one ramp are two passes, never repeats of each other."""
    found: dict[LevelKey, list[list[int]]] = {}
    for at, step in enumerate(steps):
        passes = found.setdefault(level_key(step), [])
        if step.repeat == 0 or not passes:
            passes.append([])
        passes[-1].append(at)
    return found


def levels_of(steps: Sequence[StepSummary]) -> dict[LevelKey, LevelSteps]:
    """Each level the steps ran at, in the order first run: its first pass with a clean step (its clean
    steps are the level's repeats); the steps of its other passes are counted, not pooled."""
    out: dict[LevelKey, LevelSteps] = {}
    for key, passes in passes_of(steps).items():
        chosen = next((p for p in passes if any(counts(steps[at]) for at in p)), passes[0])
        kept = tuple(at for at in chosen if counts(steps[at]))
        others = sum(len(p) for p in passes if p is not chosen)
        out[key] = LevelSteps(key, kept, len(chosen) - len(kept), others)
    return out


@dataclass(frozen=True, slots=True)
class Spread:
    """A figure over a level's repeats: the median and the range (min–max)."""

    median: float
    low: float
    high: float
    n: int

    def overlaps(self, other: Spread) -> bool:
        return self.low <= other.high and other.low <= self.high

    def as_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.low, "max": self.high, "n": self.n}


def spread(values: Iterable[float | None]) -> Spread | None:
    """Median and range of the known values; None when none is known."""
    known = [float(v) for v in values if v is not None]
    if not known:
        return None
    return Spread(statistics.median(known), min(known), max(known), len(known))

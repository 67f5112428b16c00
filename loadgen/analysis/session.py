"""A recorded session as a script (``ramp run URL --replay-session RECORD``): the steps a run measured, in
order — each one's mode, level or rate, warm-up and length, how it ended (its plan, a key, the SLA search,
a stop) and its SLO verdict — read from a record's step lines; the plan that runs them again against
another server; and the gate that holds the replay to the original's verdicts.

What the record says is what is replayed: a step a key cut after 7.4 s is a step of 7.4 s (its warm-up
as it had it), a probe of the search is a step at the level the search chose, in the order they ran. A
moment a key cut under a second into its window was no step (``loadgen.run.steps.MIN_STEP_S``) and is
not replayed. The operator's commands (``command`` events) and the search's result (``find_max``) are
counted beside the steps; the step lines alone decide what runs.

Refused, as one ``SessionError`` line naming the file (and the line, where one is at fault): a file that
is no record, a record of a schema this ramp does not read, a record cut short (its last line half
written, or no end line: the run was killed), a record with no step, a step line without the figures a
step needs, and a session that switched between closed and open loop (a plan runs one mode).

The gate (``gate``): the replay passes where it met the SLO at every step the original met it at (the same
position in the sequence); it fails at each such step it missed, or never measured. Met is the verdict the
step table shows (``slo_met``, at a point), for a replayed step measured start to finish under its own
load and not missed on its intervals (``passes``); a step whose interval straddles a limit (undecided, as
short steps often are) is said, not failed. An original that met the SLO nowhere holds the replay to
nothing: the ordinary exit of a headless run applies.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from loadgen.config import ARRIVALS, SLO, SLO_KEYS, Arrival, Mode, RampPlan
from loadgen.record import SCHEMA_VERSION, JsonObject, RecordError, read_record, step_from_line
from loadgen.slo import evaluate
from loadgen.snapshot import StepSummary

__all__ = [
    "Session",
    "SessionError",
    "SessionStep",
    "SloSource",
    "gate",
    "passes",
    "read_session",
    "slo_text",
]

SloSource = Literal["record", "profile"]


class SessionError(Exception):
    """A record that cannot be replayed as a session; the message is one line naming the file."""


@dataclass(frozen=True, slots=True)
class SessionStep:
    """One step of the session, as its step line says."""

    step: int  # its number in the record (from 1)
    line: int  # its line in the record file (from 1)
    mode: Mode
    level: int  # closed loop: the streams; open loop: the concurrency cap (0: none)
    rate_rps: float | None  # open loop: the arrival rate
    warmup_s: float
    duration_s: float  # warm-up and window
    window_s: float
    ended_by: str  # plan, level, next, mode, pause, stop, precision, decided
    met: bool | None  # its SLO verdict: met, missed; None: not judged or undecided

    @property
    def value(self) -> float:
        """What the plan's level is: the streams of a closed loop, the rate of an open one."""
        return float(self.rate_rps or 0.0) if self.mode == "open" else float(self.level)

    def label(self) -> str:
        return f"{self.value:g} req/s" if self.mode == "open" else f"{self.level} streams"


@dataclass(frozen=True, slots=True)
class Session:
    path: str
    header: JsonObject
    steps: tuple[SessionStep, ...]
    lines: tuple[JsonObject, ...]  # the step lines, in order (re-judged under another SLO: ``judged``)
    commands: int  # the operator's commands recorded (keys, the Python API)
    searched: bool  # the steps were the SLA search's probes (--find-max)

    @property
    def mode(self) -> Mode:
        return self.steps[0].mode

    def slo(self) -> SLO:
        """The SLO the record's steps were judged against (its header's ``slo``)."""
        return record_slo(self.path, self.header.get("slo"))

    def plan(self) -> RampPlan:
        """The steps again, each at its level or rate for its length and warm-up, none stopping early."""
        first = self.steps[0]
        return RampPlan(
            levels=tuple(s.value for s in self.steps),
            step_s=first.duration_s,
            warmup_s=first.warmup_s,
            mode=first.mode,
            step_seconds=tuple(s.duration_s for s in self.steps),
            warmup_seconds=tuple(s.warmup_s for s in self.steps),
        )

    def arrival(self) -> tuple[Arrival, float]:
        """The open loop's arrival process and gamma shape, as the record's header names it."""
        label = str(self.header.get("arrival") or "poisson")
        if label.startswith("gamma(") and label.endswith(")"):
            try:
                return "gamma", float(label[6:-1])
            except ValueError:
                pass
        for arrival in ARRIVALS:
            if label == arrival:
                return arrival, 1.0
        if self.mode == "open":
            raise SessionError(
                f"{self.path}: its open loop ran on arrivals '{label}' (a trace's or request file's own "
                "times): replay that file with --trace or --requests instead"
            )
        return "poisson", 1.0

    def replay_of(self) -> dict[str, object]:
        """What the replay's record header says it replays (no secret: the header was scrubbed)."""
        return {
            "record": os.path.abspath(self.path),
            "started_at": self.header.get("started_at"),
            "host": self.header.get("host"),
            "profile": self.header.get("profile"),
            "target_url": self.header.get("target_url"),
            "steps": len(self.steps),
        }

    def judged(self, slo: SLO, source: SloSource) -> tuple[bool | None, ...]:
        """Each original step's verdict: as recorded under the record's SLO, else its figures judged again
        under ``slo`` (their percentiles at a point: the record keeps no slices for intervals)."""
        if source == "record":
            return tuple(s.met for s in self.steps)
        return tuple(evaluate(slo, step_from_line(line).stats).met for line in self.lines)


def slo_text(slo: SLO) -> str:
    """``ttft_p95_ms 1000, max_error_rate 0.01``; ``none`` for an empty SLO."""
    clauses = [f"{key} {value:g}" for key, value in slo.as_dict().items() if value is not None]
    return ", ".join(clauses) or "none"


def record_slo(path: str, data: object) -> SLO:
    if data is None:
        return SLO()
    if not isinstance(data, Mapping):
        raise SessionError(f"{path} line 1: 'slo' is {type(data).__name__}, not a table of clauses")
    values: dict[str, float] = {}
    for key, value in data.items():
        if value is None:
            continue
        if key not in SLO_KEYS:
            raise SessionError(f"{path} line 1: SLO clause '{key}' is unknown to this ramp; upgrade llm-ramp")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise SessionError(f"{path} line 1: SLO clause '{key}' is {value!r}, not a number")
        values[key] = float(value)
    return SLO(**values)


def _line_numbers(path: str) -> tuple[list[int], int, bool]:
    """The file line of each step line, in order; the last line's number; whether an end line closes it."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    steps, last, ended = [], 0, False
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        last = number
        try:
            obj = json.loads(text)
        except ValueError:
            continue  # the cut last line: read_record said so already
        kind = obj.get("type") if isinstance(obj, dict) else None
        if kind == "step":
            steps.append(number)
        ended = kind == "event" and obj.get("kind") == "end"
    return steps, last, ended


def _number(path: str, line: int, obj: Mapping[str, object], key: str, *, minimum: float = 0.0) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SessionError(f"{path} line {line}: the step line has no number '{key}' (found {value!r})")
    if value < minimum:
        raise SessionError(f"{path} line {line}: '{key}' is {value:g}, below {minimum:g}")
    return float(value)


def _verdict(obj: Mapping[str, object]) -> bool | None:
    met = obj.get("slo_met")  # the verdict at a point, as the step table shows it
    return met if isinstance(met, bool) else None


def _step(path: str, line: int, obj: Mapping[str, object]) -> SessionStep:
    mode = obj.get("mode")
    if mode not in ("closed", "open"):
        raise SessionError(f"{path} line {line}: the step line's mode is {mode!r}, not closed or open")
    level = _number(path, line, obj, "level")
    rate = _number(path, line, obj, "rate_rps", minimum=1e-9) if mode == "open" else None
    if mode == "closed" and (level < 1 or level != int(level)):
        raise SessionError(f"{path} line {line}: a closed loop's level is {level:g}, not a whole number >= 1")
    duration = _number(path, line, obj, "duration_s", minimum=1e-3)
    warmup = _number(path, line, obj, "warmup_s")
    return SessionStep(
        step=int(_number(path, line, obj, "step", minimum=1)),
        line=line,
        mode=mode,
        level=int(level),
        rate_rps=rate,
        warmup_s=min(warmup, duration),
        duration_s=duration,
        window_s=_number(path, line, obj, "window_s"),
        ended_by=str(obj.get("ended_by") or "plan"),
        met=_verdict(obj),
    )


def read_session(path: str) -> Session:
    """The session the record at ``path`` holds, or a ``SessionError`` saying why it cannot be replayed."""
    try:
        record = read_record(path)
    except RecordError as exc:
        raise SessionError(str(exc)) from None
    schema = record.header.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or not 1 <= schema <= SCHEMA_VERSION:
        raise SessionError(
            f"{path} line 1: record schema {schema!r} is not one this ramp reads (1 to {SCHEMA_VERSION})"
        )
    numbers, last, ended = _line_numbers(path)
    if record.truncated:
        raise SessionError(
            f"{path} line {last}: cut short (the run was killed while writing it): a session cut short is "
            "not replayed"
        )
    if not ended:
        raise SessionError(
            f"{path} line {last}: the last line, and no end line (the run was killed before it ended): a "
            "session cut short is not replayed"
        )
    if not record.steps:
        raise SessionError(f"{path}: no step to replay (the run ended before its first step)")
    steps = tuple(_step(path, line, obj) for line, obj in zip(numbers, record.steps, strict=True))
    other = next((s for s in steps if s.mode != steps[0].mode), None)
    if other is not None:
        raise SessionError(
            f"{path} line {other.line}: step {other.step} ran in {other.mode} loop after "
            f"{steps[0].mode} loop steps: a replay runs one mode (replay each part as its own run)"
        )
    return Session(
        path=path,
        header=record.header,
        steps=steps,
        lines=tuple(record.steps),
        commands=sum(1 for e in record.events if e.get("kind") == "command"),
        searched=any(e.get("kind") == "find_max" for e in record.events),
    )


def passes(step: StepSummary) -> bool:
    """Whether a replayed step met the SLO: judged and met at a point, not missed on its intervals, measured
    start to finish under its own load (clean, not stopped part-way). An interval that straddles a limit
    (undecided) does not fail it: ``gate`` counts such steps in its line."""
    verdict = step.verdict
    if not step.clean or step.ended_by == "stop":
        return False
    return verdict.met is True and verdict.three_valued != "missed"


def gate(original: Sequence[bool | None], replayed: Sequence[StepSummary]) -> tuple[bool | None, str]:
    """Whether the replay met the SLO at every position where the ``original`` met it (True, False), with
    the line that says so; None when the original met it nowhere (nothing to hold the replay to)."""
    held = [i for i, met in enumerate(original) if met]
    if not held:
        return None, "the original met the SLO at no step: the exit is a headless run's own"
    missed = [i for i in held if i >= len(replayed) or not passes(replayed[i])]
    if missed:
        said = ", ".join(str(i + 1) for i in missed)
        return False, f"missed the SLO at step {said} of {len(original)}, where the original met it"
    undecided = sum(1 for i in held if replayed[i].verdict.three_valued == "undecided")
    caveat = f" ({undecided} undecided on their intervals: longer steps decide)" if undecided else ""
    return True, f"met the SLO at each of the {len(held)} steps where the original met it{caveat}"

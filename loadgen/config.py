"""The settings every layer shares, owned once: the ramp plan, the SLO, a run's fresh seed (``fresh_seed``),
``SetupError``, and the closed sets (mode, arrival, state, ...) as ``Literal`` types. One run's whole
configuration and outcome (``RunConfig``, ``RunOutcome``) live in ``loadgen.run.config``.

A leaf: it imports nothing from the project but the catalogue of measures (``loadgen.measures``, which the
SLO's clauses come from, itself importing nothing at run time), so every layer can depend on it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, fields
from typing import Literal, get_args

from loadgen import measures

Mode = Literal["closed", "open"]  # closed loop: levels are concurrencies; open loop: arrival rates (req/s)
Arrival = Literal["constant", "poisson", "gamma"]
RunState = Literal["starting", "running", "paused", "finished", "stopped", "failed"]
EndedBy = Literal["plan", "next", "level", "mode", "pause", "stop", "slo", "error", "precision", "decided"]
Window = Literal["step", "rolling", "run"]
# Where the current step stands: warming up, measuring, closing (its window ended: the load holds until its
# counted requests are done), settling (after a lowering: in flight comes down to the new level before the
# next warm-up), idle (no load: paused, or a finished plan in the console waiting for a key).
StepPhase = Literal["warmup", "measure", "closing", "settling", "idle"]
AfterPlan = Literal["finish", "idle"]  # a finished plan ends the run (headless) or waits for keys (console)
Phase = Literal["warmup", "measure"]
Api = Literal["chat", "completions", "responses"]  # responses: the OpenAI Responses API (/v1/responses)
Transport = Literal["h1", "aiohttp"]  # the hot path's HTTP client (loadgen.transports)
CacheResets = Literal["never", "step", "run"]  # prefix-cache resets: none, before each step, once per run

MODES: tuple[Mode, ...] = get_args(Mode)
ARRIVALS: tuple[Arrival, ...] = get_args(Arrival)
APIS: tuple[Api, ...] = get_args(Api)


def chat_like(api: str) -> bool:
    """Whether ``api`` sends messages (chat, responses), not a prompt string (completions)."""
    return api != "completions"


TRANSPORTS: tuple[Transport, ...] = get_args(Transport)
WINDOWS: tuple[Window, ...] = get_args(Window)
FINAL_STATES: tuple[RunState, ...] = ("finished", "stopped", "failed")


@dataclass(frozen=True, slots=True)
class SLO:
    """The service-level objective a step is judged against; ``None`` clauses are not checked."""

    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    ttfat_p95_ms: float | None = None  # time to first answer token (reasoning excluded)
    # time to the first tool-call delta, over the requests that called a tool: not judged (n/a, neither
    # met nor missed) in a step where none did
    ttftc_p50_ms: float | None = None
    ttftc_p95_ms: float | None = None
    decode_p50_tok_s: float | None = None  # at least
    itl_p99_ms: float | None = None
    e2e_p95_s: float | None = None
    max_error_rate: float | None = None  # 0.01 = 1 %
    quality_agree_min: float | None = None  # at least, 0..1: the answer probes' agreement (--quality)

    def is_empty(self) -> bool:
        return all(value is None for value in self.as_dict().values())

    def as_dict(self) -> dict[str, float | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def good(self, **values: float | None) -> bool:
        """Whether one successful request met the SLO's limits read per request (goodput): ``values`` are
        its metrics by name, in display units (``ttft_ms=812.0``; a metric it lacks: None or left out).

        Each clause judged per request (``measures.Clause.per_request``) holds it to its limit, unless the
        clause it yields to is set too (TTFT: p95's limit, else p99's; TTFTC: p95's, else p50's). A request
        lacking the figure misses a ceiling (no first token: never good) but is not held to a floor (no
        decode speed) nor to a clause over a subset it is not in (no tool call: TTFTC). ITL and the error
        rate are step-level figures, not judged per request."""
        for metric, bound, at_most, misses in self.per_request_limits():
            value = values.get(metric)
            if value is None:
                if misses:
                    return False
            elif value > bound if at_most else value < bound:
                return False
        return True

    def per_request_limits(self) -> tuple[tuple[str, float, bool, bool], ...]:
        """What ``good`` holds a request to: (metric, limit in the metric's display unit, whether it is a
        ceiling, whether a request lacking the figure misses it), for each clause that applies per request.
        A worker reads it once (``Recorder``), not per request."""
        limits = {f.name: getattr(self, f.name) for f in fields(self)}
        out = []
        for clause in measures.per_request_clauses():
            limit = limits[clause.key]
            if limit is None or (clause.yields_to and limits[clause.yields_to] is not None):
                continue
            bound = limit * clause.per if clause.per != 1.0 else limit
            out.append((clause.metric, bound, clause.at_most, clause.at_most and not clause.subset))
        return tuple(out)


# The SLO's clauses in catalogue order (``measures.CLAUSES``); a unit test holds them equal to SLO's fields.
SLO_KEYS: tuple[str, ...] = tuple(c.key for c in measures.CLAUSES)


# Every step's warm-up unless told otherwise: a plan's, and a step set by hand (a key, the Python API's
# set_level) alike, so a level's figures do not depend on how it was reached.
DEFAULT_WARMUP_S = 5.0


@dataclass(frozen=True, slots=True)
class RampPlan:
    """Levels are concurrencies in closed loop and arrival rates (req/s) in open loop (``mode``)."""

    levels: tuple[float, ...]
    step_s: float = 30.0
    warmup_s: float = DEFAULT_WARMUP_S
    early_stop: bool = False  # stop the plan at the first step that breaks the SLO
    mode: Mode = "closed"
    repeat: int = 1  # each level runs this many times in a row (each repeat its own step line)
    # One step length per level, overriding step_s (a trace's steps over time scales: each pass of its
    # window lasts window / scale); empty: every step lasts step_s.
    step_seconds: tuple[float, ...] = ()
    # One warm-up per level, overriding warmup_s (a replayed session's steps, each with the warm-up it had:
    # ``loadgen.analysis.session``); empty: every step warms up for warmup_s.
    warmup_seconds: tuple[float, ...] = ()
    # --precision PCT: a step's window ends once out tok/s and every figure the SLO judges have a trusted 95 %
    # interval within this many % of their value (``ended_by: "precision"``), or at its length at the latest
    precision_pct: float | None = None

    @property
    def positions(self) -> int:
        """Steps in the plan: every level times its repeats."""
        return len(self.levels) * max(1, self.repeat)

    def level_at(self, position: int) -> float:
        return self.levels[position // max(1, self.repeat)]

    def step_s_at(self, position: int) -> float:
        """How long the step at ``position`` lasts."""
        if not self.step_seconds:
            return self.step_s
        return self.step_seconds[min(position // max(1, self.repeat), len(self.step_seconds) - 1)]

    def warmup_s_at(self, position: int) -> float:
        """How long the step at ``position`` warms up."""
        if not self.warmup_seconds:
            return self.warmup_s
        return self.warmup_seconds[min(position // max(1, self.repeat), len(self.warmup_seconds) - 1)]

    def repeat_at(self, position: int) -> int:
        return position % max(1, self.repeat)

    def as_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "levels": list(self.levels),
            "step_s": self.step_s,
            "warmup_s": self.warmup_s,
            "early_stop": self.early_stop,
            "repeat": self.repeat,
            **({"step_seconds": list(self.step_seconds)} if self.step_seconds else {}),
            **({"warmup_seconds": list(self.warmup_seconds)} if self.warmup_seconds else {}),
            **({"precision_pct": self.precision_pct} if self.precision_pct is not None else {}),
        }


class SetupError(Exception):
    """The run could not start (target unreachable, no model...). The message is for the operator."""


def fresh_seed() -> int:
    """A seed no earlier run used (with overwhelming odds): 32 random bits, short enough to retype."""
    return secrets.randbits(32)

"""The SLA search (``--find-max LO:HI``): the highest level — concurrency in closed loop, rate in open loop —
whose step meets the SLO, found by probing the bounds and then bisecting between the highest level that met
and the lowest that did not. Each probe is a full step, held until its requests are done, so every verdict
stands on requests measured under their own load.

One noisy probe must not decide a level, so a level is decided on the *median* of its probes' SLO margins
(``loadgen.slo.margin``: how far the tightest objective is from its limit, as a share of it; at least 0
meets):

- each level is probed ``repeat`` times (``--repeat N``);
- a level whose median margin lies within ``NOISE`` of the limit is uncertain: it is probed again, up to
  ``confirm_trials`` probes; once the bisection has closed, each side of the bracket decided on fewer probes
  is probed again when it lies within ``CONFIRM`` of the limit (the knee is where margins are small) or out
  of order with the levels around it (a miss reading worse than a higher level: one probe was unlucky);
- a client-bound probe (the load generator may have limited it) decides nothing while a clean one can be
  had: the level is probed again, ``BOUND_RETRIES`` times; a level decided on client-bound probes anyway
  makes the answer say so.

The answer is a bracket — the highest level that met and the lowest above it that missed — in the summary
and in the record's ``find_max`` event, with whether either side stayed uncertain.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from loadgen.config import SLO
from loadgen.format import fmt_si
from loadgen.slo import margin
from loadgen.snapshot import StepSummary

RATE_RESOLUTION = 1.05  # open loop: stop once the failing rate is within 5 % of the passing one
NOISE = 0.05  # a median margin within 5 % of the limit is uncertain: probed again
CONFIRM = 0.10  # the bracket's sides within 10 % of the limit are probed again before the answer
BOUND_RETRIES = 1  # client-bound probes re-run per level before one is used
MAX_PROBES = 60  # a bound on the whole search, whatever the noise


@dataclass(frozen=True, slots=True)
class Probe:
    level: float
    met: bool
    out_tok_s: float | None
    step: int  # the step's number (from 1, as the record's); -1: not from a run
    margin: float | None = None  # ``loadgen.slo.margin``; None: not known (then ``met`` says ±1)
    client_bound: bool = False

    @property
    def room(self) -> float:
        return self.margin if self.margin is not None else (1.0 if self.met else -1.0)


@dataclass(frozen=True, slots=True)
class Decision:
    """A level decided: on the median margin of the probes it used."""

    level: float
    met: bool
    margin: float
    probes: int  # probes at the level so far (client-bound ones included)
    uncertain: bool  # still within NOISE of the limit after every re-probe
    client_bound: bool  # decided on client-bound probes
    out_tok_s: float | None  # the median of the probes it used

    def as_dict(self) -> dict[str, object]:
        return {
            "level": self.level,
            "met": self.met,
            "margin": round(self.margin, 4),
            "probes": self.probes,
            "uncertain": self.uncertain,
            "client_bound": self.client_bound,
            "out_tok_s": self.out_tok_s,
        }


@dataclass(slots=True)
class Search:
    lo: float
    hi: float
    integer: bool  # closed loop: levels are whole streams
    repeat: int = 1  # probes per level (``--repeat``)
    slo: SLO = field(default_factory=SLO)
    probes: list[Probe] = field(default_factory=list)
    decided: dict[float, Decision] = field(default_factory=dict)

    def first(self) -> float:
        return self.lo

    @property
    def confirm_trials(self) -> int:
        return max(3, 2 * self.repeat)

    @property
    def passed(self) -> float | None:
        """The highest level decided as meeting the SLO."""
        met = [d.level for d in self.decided.values() if d.met]
        return max(met) if met else None

    @property
    def failed(self) -> float | None:
        """The lowest level above ``passed`` decided as missing it."""
        floor = self.passed
        missed = [d.level for d in self.decided.values() if not d.met and (floor is None or d.level > floor)]
        return min(missed) if missed else None

    def trials_at(self, level: float) -> int:
        return sum(p.level == level for p in self.probes)

    def after(self, step: StepSummary) -> float | None:
        """The level to probe next after ``step``, or None when the search is over."""
        level = float(step.level) if self.integer else float(step.rate_rps or 0.0)
        usable = step.clean and step.ended_by != "stop"
        room = margin(self.slo, step.stats) if usable else None
        met = usable and step.verdict.met is True
        if room is not None and (room >= 0) != met:
            room = (
                None  # the verdict is the judge; a margin that disagrees with it (not normally) says nothing
            )
        return self.probe_result(level, met, step.stats.out_tok_s, step.index + 1, room, step.client_bound)

    def probe_result(
        self,
        level: float,
        met: bool,
        out_tok_s: float | None = None,
        step: int = -1,
        margin: float | None = None,
        client_bound: bool = False,
    ) -> float | None:
        self.probes.append(Probe(level, met, out_tok_s, step, margin, client_bound))
        if len(self.probes) >= MAX_PROBES:
            return None
        again = self._decide(level)
        return level if again else self._next_level()

    def _decide(self, level: float) -> bool:
        """Decide ``level`` from its probes; True when it needs another probe first."""
        trials = [p for p in self.probes if p.level == level]
        clean = [p for p in trials if not p.client_bound]
        if len(clean) < self.repeat and len(trials) - len(clean) <= BOUND_RETRIES:
            return True
        basis = clean if len(clean) >= self.repeat else trials
        room = float(statistics.median(p.room for p in basis))
        uncertain = abs(room) < NOISE
        if uncertain and len(trials) < self.confirm_trials:
            return True
        tok = [p.out_tok_s for p in basis if p.out_tok_s is not None]
        self.decided[level] = Decision(
            level,
            room >= 0,
            room,
            len(trials),
            uncertain,
            any(p.client_bound for p in basis),
            float(statistics.median(tok)) if tok else None,
        )
        return False

    def _converged(self, passed: float, failed: float) -> bool:
        if self.integer:
            return failed - passed <= 1
        return failed <= passed * RATE_RESOLUTION

    def _next_level(self) -> float | None:
        passed, failed = self.passed, self.failed
        if passed is None:
            return None  # the lowest bound already misses: nothing below it is probed
        if failed is None:
            return self.hi if passed < self.hi and self.hi not in self.decided else None
        if not self._converged(passed, failed):
            if self.integer:
                return float((int(passed) + int(failed)) // 2)
            return round((passed + failed) / 2, 3)
        for side in (failed, passed):  # the knee: probe a side decided close to the limit or out of order
            d = self.decided[side]
            if d.probes < self.confirm_trials and (abs(d.margin) < CONFIRM or self._out_of_order(d)):
                del self.decided[side]  # decided afresh on all its probes, the new one included
                return side
        return None

    def _out_of_order(self, d: Decision) -> bool:
        """A miss that reads worse than a higher level, or a pass better than a lower one: more load does not
        help a server, so one of the two probes was unlucky."""
        if d.met:
            return any(o.level < d.level and o.margin < d.margin for o in self.decided.values())
        return any(o.level > d.level and o.margin > d.margin for o in self.decided.values())

    def answer(self) -> Decision | None:
        passed = self.passed
        return None if passed is None else self.decided[passed]

    def steps_at(self, level: float) -> list[int]:
        return [p.step for p in self.probes if p.level == level]

    def summary(self) -> str:
        best = self.answer()
        unit = "streams" if self.integer else "req/s"
        n = len(self.probes)
        if best is None:
            return f"find-max: even {self.lo:g} {unit} misses the SLO ({n} probe{'' if n == 1 else 's'})"
        failed = self.failed
        if failed is None:
            bracket = f" (the upper bound {self.hi:g} met it too)"
        else:
            bracket = f": the knee lies between {best.level:g} (met) and {failed:g} (missed)"
        doubts = [
            f"{d.level:g} stayed within {NOISE * 100:g} % of the SLO" for d in self.edges() if d.uncertain
        ]
        doubts += [
            f"{d.level:g} was decided on client-bound probes: rerun, or add --workers"
            for d in self.edges()
            if d.client_bound
        ]
        per_level = f", {self.repeat} per level" if self.repeat > 1 else ""
        return (
            f"max {best.level:g} {unit}, {fmt_si(best.out_tok_s)} out tok/s under SLO{bracket} "
            f"({n} probes{per_level})" + "".join(f"; {d}" for d in doubts)
        )

    def edges(self) -> list[Decision]:
        """The decisions either side of the knee (the answer, the lowest level above it that missed)."""
        return [self.decided[x] for x in (self.passed, self.failed) if x is not None]

    def event(self) -> dict[str, object]:
        best, failed = self.answer(), self.failed
        return {
            "bounds": [self.lo, self.hi],
            "repeat": self.repeat,
            "noise": NOISE,
            "max_level": None if best is None else best.level,
            "out_tok_s": None if best is None else best.out_tok_s,
            "step": None if best is None else self.steps_at(best.level)[-1],
            "bracket": {
                "met": None if best is None else best.level,
                "missed": failed,
                "uncertain": any(d.uncertain for d in self.edges()),
                "client_bound": any(d.client_bound for d in self.edges()),
            },
            "levels": [d.as_dict() for _, d in sorted(self.decided.items())],
            "probes": [
                {
                    "level": p.level,
                    "met": p.met,
                    "step": p.step,
                    "margin": None if p.margin is None else round(p.margin, 4),
                    "client_bound": p.client_bound,
                }
                for p in self.probes
            ],
            "summary": self.summary(),
        }

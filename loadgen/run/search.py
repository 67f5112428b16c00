"""The SLA search (``--find-max LO:HI``): the highest level — concurrency in closed loop, rate in open loop —
whose step meets the SLO, found by bisection between the highest level that met and the lowest that did not:
in closed loop from the middle of the range (a bound is probed only when the bisection reaches it), in open
loop from the low bound, then the high one. Each probe is a step held until its requests are done, so every verdict stands
on requests measured under their own load.

A probe ends as soon as it is decided: the controller reads the intervals of the SLO's figures once a second
(``loadgen.metrics.slices.decided``) and ends the window (``ended_by: "decided"``) once one lies wholly past
its limit (missed) or all lie wholly within (met); an undecided probe runs on to its maximum, the step's
length. A level is decided on its probes' verdicts (met / missed / undecided on the intervals, the median
margin — ``loadgen.slo.margin`` — breaking a tie), and probed again only when its outcome could flip, each
re-probe with its reason in the record:

- ``repeat``: each level is probed ``repeat`` times (``--repeat N``);
- ``undecided``: a probe that reached its maximum with its interval across the limit, or one judged on its
  point value alone within ``NOISE`` of the limit, up to ``confirm_trials`` probes. A probe whose intervals
  pin its figures at their limits (trusted, within ``AT_LIMIT`` either way: ``slices.at_limit``) ends there
  and is not probed again: near a slope's knee every level reads within a few % of the limit, and measuring
  on would only tell on which side of it a figure lies that is closer to it than the knee can be told; two
  such sides within ``RATE_RESOLUTION`` of each other close the bisection;
- ``client-bound``: a client-bound probe (the load generator may have slowed it) that missed by less than
  ``WIDE`` of the limit, ``BOUND_RETRIES`` times. One that met, or missed by more, stands: a slow client
  only makes figures worse, so a pass cannot flip and a wide miss does not. A level still client-bound and
  missed by less than ``WIDE`` after its re-probes, because a load worker used up its CPU (not a shared
  machine's loop lag: then it is decided on them, with a doubt), ends the search (``client_limit``): the
  client is too weak for the range, its misses not the server's (``failure``: "add --workers", exit 2);
- ``near the knee``: once the bisection closed, a side of the bracket judged on its point value alone within
  ``CONFIRM`` of the limit (a side decided on its intervals is not probed again);
- ``out of order``: a side the monotone fit over every probe (``loadgen.run.knee``) contradicts.

The answer is the knee of the monotone fit (``loadgen.run.knee``): the highest level that meets, the bracket,
the confidence and whether the limit is a cliff or a slope — in the summary and in the record's ``find_max``
event. With ``hold_s`` (``--hold S``) the answer's level is then held for one more step of that length, not
ended early (``holding``): it confirms the knee when it meets the SLO on its intervals (``hold`` in the event,
the summary's last words); it is no probe, so the answer stands either way.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from loadgen.config import SLO
from loadgen.format import fmt_si
from loadgen.measures import E2E_MS, TTFT_MS
from loadgen.metrics.slices import AT_LIMIT, at_limit
from loadgen.run.health import cpu_saturated
from loadgen.run.knee import Knee, knee
from loadgen.run.search_ends import held_outcome, held_text, search_failure
from loadgen.slo import margin
from loadgen.snapshot import StepSummary, WindowStats

RATE_RESOLUTION = 1.05  # open loop: stop once the failing rate is within 5 % of the passing one
NOISE = 0.05  # a median margin within 5 % of the limit is uncertain: probed again
CONFIRM = 0.10  # the bracket's sides within 10 % of the limit are probed again before the answer
BOUND_RETRIES = 1  # client-bound probes re-run per level before one is used
MAX_PROBES = 60  # a bound on the whole search, whatever the noise
PROBE_WARMUP_REQUESTS = 2.0  # a probe warms up for two requests' time in the server (e2e - TTFT, p50) ...
MIN_PROBE_WARMUP_S = 1.0  # ... at least this, and never longer than the run's warm-up
WIDE = 0.5  # a client-bound probe that missed by half the limit or more still misses with a faster client


@dataclass(frozen=True, slots=True)
class Probe:
    level: float
    met: bool
    out_tok_s: float | None
    step: int  # the step's number (from 1, as the record's); -1: not from a run
    margin: float | None = None  # ``loadgen.slo.margin``; None: not known (then ``met`` says ±1)
    client_bound: bool = False
    verdict: str | None = None  # met / missed / undecided on the intervals; None: judged on the point value
    why: str = ""  # why the level was probed again ("" for its first probe)
    errors_only: bool = False  # no request of the step succeeded
    judged: bool = True  # the SLO judged something (a clause with nothing to judge is n/a)
    failures: str = ""  # what missed ("TTFT p95 812 ms > 100 ms")
    bound_reason: str = ""  # why it was client-bound (the step's ``bound_reason``)
    at_limit: bool = (
        False  # undecided, its figures' intervals within AT_LIMIT of their limits (``slices.at_limit``)
    )

    @property
    def saturated(self) -> bool:
        """Client-bound because a load worker used up its core (not a shared machine's loop lag)."""
        return self.client_bound and cpu_saturated(self.bound_reason)

    @property
    def room(self) -> float:
        return self.margin if self.margin is not None else (1.0 if self.met else -1.0)


@dataclass(frozen=True, slots=True)
class Decision:
    """A level decided: on its probes' verdicts (the median margin breaking a tie)."""

    level: float
    met: bool
    margin: float  # the median margin of the probes it used
    probes: int  # probes at the level so far (client-bound ones included)
    uncertain: bool  # still undecided (or within NOISE of the limit on its point value) after every re-probe
    client_bound: bool  # decided on client-bound probes
    out_tok_s: float | None  # the median of the probes it used
    sure: bool = False  # decided on its intervals (met or missed, not undecided): it is not probed again
    at_limit: bool = False  # read at the limit (within AT_LIMIT) on its intervals: not probed again either

    def as_dict(self) -> dict[str, object]:
        return {
            "level": self.level,
            "met": self.met,
            "margin": round(self.margin, 4),
            "probes": self.probes,
            "uncertain": self.uncertain,
            "client_bound": self.client_bound,
            "sure": self.sure,
            "at_limit": self.at_limit,
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
    pending: dict[float, str] = field(default_factory=dict)  # a level to probe again: why
    client_limit: Probe | None = None  # the probe that showed the client too weak for the range (the end)
    hold_s: float | None = None  # --hold S: the answer's level held for a confirmation step of S seconds
    holding: bool = False  # the confirmation step is the one running (the controller does not end it early)
    held: dict[str, object] | None = None  # the confirmation step's outcome (``confirm``)

    def first(self) -> float:
        """Closed loop: the middle of the range (a bound is probed only when the bisection reaches it: a level
        that met says every level below it meets, one that missed that every level above it misses); open
        loop: the low bound, then the high one."""
        return float((int(self.lo) + int(self.hi)) // 2) if self.integer else self.lo

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
        """The level to probe next after ``step`` (``hold_s``: then the answer's), or None when it is over."""
        if self.holding:
            self.holding, self.held = False, held_outcome(step, self.hold_s, self.integer)
            return None
        nxt = self._after(step)
        best = self.answer() if nxt is None and self.hold_s and self.failure() is None else None
        if best is not None:
            self.holding = True
            return best.level
        return nxt

    def _after(self, step: StepSummary) -> float | None:
        level = float(step.level) if self.integer else float(step.rate_rps or 0.0)
        usable = step.clean and step.ended_by != "stop"
        room = margin(self.slo, step.stats) if usable else None
        met = usable and step.verdict.met is True
        if room is not None and (room >= 0) != met:
            room = (
                None  # the verdict is the judge; a margin that disagrees with it (not normally) says nothing
            )
        verdict = step.verdict.on_intervals if usable else None
        if verdict is not None and verdict != "undecided" and (verdict == "met") != met:
            verdict = "undecided"  # the point verdict and the intervals disagree (an error-rate clause)
        nxt = self.probe_result(
            level,
            met,
            step.stats.out_tok_s,
            step.index + 1,
            room,
            step.client_bound,
            verdict,
            step.bound_reason,
            pinned=verdict == "undecided" and at_limit(step.margins, self.slo),
        )
        last = self.probes[-1]
        self.probes[-1] = replace(
            last,
            errors_only=step.stats.ok == 0,
            judged=step.verdict.met is not None,
            failures="; ".join(step.verdict.failures[:2])[:200],
        )
        return nxt

    def probe_result(
        self,
        level: float,
        met: bool,
        out_tok_s: float | None = None,
        step: int = -1,
        margin: float | None = None,
        client_bound: bool = False,
        verdict: str | None = None,
        bound_reason: str = "",
        *,
        pinned: bool = False,
    ) -> float | None:
        why = self.pending.pop(level, "")
        self.probes.append(
            Probe(
                level,
                met,
                out_tok_s,
                step,
                margin,
                client_bound,
                verdict,
                why,
                bound_reason=bound_reason[:200],
                at_limit=pinned,
            )
        )
        if len(self.probes) >= MAX_PROBES:
            return None
        again = self._decide(level)
        if self.client_limit is not None:
            return None  # the client is the limit: no level past it can be told from the client's slowness
        if again:
            self.pending[level] = again
            return level
        return self._next_level()

    @staticmethod
    def warmup_after(stats: WindowStats, configured: float) -> float:
        """The next probe's warm-up: long enough for each stream to run two requests at the new level — twice
        the last probe's time from first token to end (e2e p50 - TTFT p50: its queueing belongs to its own
        level; the held close left the server empty) — at least ``MIN_PROBE_WARMUP_S``, never more than the
        run's own."""
        e2e, ttft = stats.hist.get(E2E_MS), stats.hist.get(TTFT_MS)
        total = None if e2e is None else e2e.pct.p50
        first = None if ttft is None else ttft.pct.p50
        if total is None or total <= 0:
            return configured
        held = total - (first or 0.0) if first is not None and first < total else total
        return min(configured, max(MIN_PROBE_WARMUP_S, PROBE_WARMUP_REQUESTS * held / 1000))

    @staticmethod
    def stands(p: Probe) -> bool:
        """A probe whose outcome a faster client could not flip: not client-bound, or client-bound and met
        (a slow client only makes figures worse), or missed by ``WIDE`` of the limit or more."""
        return not p.client_bound or p.met or (p.margin is not None and p.margin <= -WIDE)

    def _decide(self, level: float) -> str:
        """Decide ``level`` from its probes; when it needs another probe first, why ("" once decided)."""
        trials = [p for p in self.probes if p.level == level]
        usable = [p for p in trials if self.stands(p)]
        last = trials[-1]
        if len(usable) < self.repeat and len(trials) - len(usable) <= BOUND_RETRIES:
            if not self.stands(last):
                return (
                    f"client-bound, missed by {-last.room * 100:.0f} % of the limit (under {WIDE * 100:g} %): "
                    "a faster client could flip it"
                )
            return f"repeat {len(usable) + 1} of {self.repeat}"
        if len(usable) < self.repeat and last.saturated:  # a worker's CPU used up, still, at a narrow miss
            self.client_limit = last
            return ""
        basis = usable if len(usable) >= self.repeat else trials
        room = float(statistics.median(p.room for p in basis))
        met_votes = sum(p.verdict == "met" or (p.verdict is None and p.room >= 0) for p in basis)
        missed_votes = sum(p.verdict == "missed" or (p.verdict is None and p.room < 0) for p in basis)
        met = met_votes > missed_votes or (met_votes == missed_votes and room >= 0)
        on_intervals = [p.verdict for p in basis if p.verdict in ("met", "missed")]
        sure = bool(on_intervals) and all(v == ("met" if met else "missed") for v in on_intervals)
        undecided = not on_intervals and any(p.verdict == "undecided" for p in basis)
        # read at the limit on its intervals: another probe would only say on which side of it a figure
        # sits that is nearer to it than the knee can be told (``slices.at_limit``)
        pinned = (
            not sure
            and any(p.at_limit for p in basis)
            and not any(p.verdict == "undecided" and not p.at_limit for p in basis)
        )
        uncertain = not sure and not pinned and (undecided or abs(room) < NOISE)
        if uncertain and len(trials) < self.confirm_trials:
            if last.verdict == "undecided":
                return "undecided at its maximum length: its interval still straddles the limit"
            return f"within {NOISE * 100:g} % of the limit on its point value (no interval decided it)"
        tok = [p.out_tok_s for p in basis if p.out_tok_s is not None]
        self.decided[level] = Decision(
            level,
            met,
            room,
            len(trials),
            uncertain,
            any(p.client_bound for p in basis),
            float(statistics.median(tok)) if tok else None,
            sure,
            pinned,
        )
        return ""

    def _converged(self, passed: float, failed: float) -> bool:
        """Whole streams apart (closed loop), ``RATE_RESOLUTION`` apart (open loop); or, with both sides read
        at the limit (a slope: every level between reads within ``AT_LIMIT`` of it), within
        ``RATE_RESOLUTION`` of each other in closed loop too: the levels between them are all the knee to
        the precision the figures can tell."""
        pinned = self.decided[passed].at_limit and self.decided[failed].at_limit
        if self.integer:
            return failed - passed <= 1 or (pinned and failed <= passed * RATE_RESOLUTION)
        return failed <= passed * RATE_RESOLUTION

    def _next_level(self) -> float | None:
        passed, failed = self.passed, self.failed
        if self.integer:  # bisect between the bounds as if LO - 1 met and HI + 1 missed
            low = int(passed) if passed is not None else int(self.lo) - 1
            high = int(failed) if failed is not None else int(self.hi) + 1
            if high - low > 1:
                return float((low + high) // 2)
        if (
            passed is None
        ):  # the lowest bound already misses (nothing below it is probed), else is still to probe:
            return (
                None if self.lo in self.decided else self.lo
            )  # a higher level missed first (a knee that moved)
        if failed is None:
            return self.hi if passed < self.hi and self.hi not in self.decided else None
        if not self._converged(passed, failed):
            return round((passed + failed) / 2, 3)
        for side in (failed, passed):  # the knee: a side that could flip is probed again, with why
            d = self.decided[side]
            if d.sure or d.at_limit or d.probes >= self.confirm_trials:
                continue  # decided on its intervals, or read at the limit on them (or probed enough): it stands
            if abs(d.margin) < CONFIRM:
                why = f"near the knee: {d.margin * 100:+.0f} % of the limit on its point value"
            elif self._out_of_order(d):
                why = "out of order with the levels around it"
            else:
                continue
            del self.decided[side]  # decided afresh on all its probes, the new one included
            self.pending[side] = why
            return side
        return None

    def _out_of_order(self, d: Decision) -> bool:
        """A miss that reads worse than a higher level, or a pass better than a lower one: more load does not
        help a server, so one of the two probes was unlucky."""
        if d.met:
            return any(o.level < d.level and o.margin < d.margin for o in self.decided.values())
        return any(o.level > d.level and o.margin > d.margin for o in self.decided.values())

    def fit(self) -> Knee:
        """The knee of the monotone fit over every probe that stands (``loadgen.run.knee``)."""
        levels = sorted({p.level for p in self.probes})
        used: list[Probe] = []
        for level in levels:
            at = [p for p in self.probes if p.level == level]
            used += [p for p in at if self.stands(p)] or at
        sure: dict[float, tuple[bool, str]] = {}
        for d in self.decided.values():
            why = (
                f"at the limit: its intervals lie within {AT_LIMIT * 100:g} % of it"
                if d.at_limit
                else "undecided on its intervals"
                if d.uncertain
                else "decided on client-bound probes"
                if d.client_bound and not d.sure
                else "judged on its point value"
            )
            sure[d.level] = (d.sure, why)
        return knee([p.level for p in used], [p.room for p in used], sure)

    def failure(self) -> tuple[str, bool] | None:
        """Why the search has no answer as it was asked, in one line, and whether the target is unusable
        (exit 3) rather than the range or the SLO (exit 2); None when it has an answer."""
        return search_failure(self)

    def answer(self) -> Decision | None:
        """The decision at the fit's knee (the highest level the monotone fit says meets)."""
        at = self.fit().met if self.probes else None
        return None if at is None else self.decided.get(at)

    def steps_at(self, level: float) -> list[int]:
        return [p.step for p in self.probes if p.level == level]

    def summary(self) -> str:
        """The answer in one line: the level, its out tok/s, the bracket and what lowers the confidence."""
        return search_summary(self)

    def edges(self) -> list[Decision]:
        """The decisions either side of the knee (the answer, the lowest level above it that missed)."""
        fit = self.fit()
        return [self.decided[x] for x in (fit.met, fit.missed) if x is not None and x in self.decided]

    def event(self) -> dict[str, object]:
        """The record's ``find_max`` event: the answer, the fit, every level and probe, the summary."""
        return search_event(self)


def search_summary(search: Search) -> str:
    """``Search.summary``."""
    best, fit = search.answer(), search.fit()
    unit = "streams" if search.integer else "req/s"
    n = len(search.probes)
    if best is None or fit.met is None:
        return f"find-max: even {search.lo:g} {unit} misses the SLO ({n} probe{'' if n == 1 else 's'})"
    if fit.missed is None:
        bracket = f" (the upper bound {search.hi:g} met it too)"
    else:
        bracket = (
            f": the knee lies between {fit.met:g} (met) and {fit.missed:g} (missed), "
            f"a {fit.shape}, {fit.confidence} confidence"
        )
    doubts = [f"{d.level:g} stayed undecided" for d in search.edges() if d.uncertain]
    doubts += [
        f"{d.level:g} read within {AT_LIMIT * 100:g} % of the limit" for d in search.edges() if d.at_limit
    ]
    doubts += [
        f"{d.level:g} was decided on client-bound probes: rerun, or add --workers"
        for d in search.edges()
        if d.client_bound and not d.sure
    ]
    doubts += [w for w in fit.why if "out of order" in w]
    per_level = f", {search.repeat} per level" if search.repeat > 1 else ""
    again = sum(bool(p.why) for p in search.probes)
    repeated = f", {again} repeated" if again else ""
    return (
        f"max {best.level:g} {unit}, {fmt_si(best.out_tok_s)} out tok/s under SLO{bracket} "
        f"({n} probes{per_level}{repeated})" + "".join(f"; {d}" for d in doubts) + held_text(search.held)
    )


def search_event(search: Search) -> dict[str, object]:
    """``Search.event``."""
    best, fit = search.answer(), search.fit()
    return {
        "bounds": [search.lo, search.hi],
        "repeat": search.repeat,
        "noise": NOISE,
        "max_level": None if best is None else best.level,
        "out_tok_s": None if best is None else best.out_tok_s,
        "step": None if best is None else search.steps_at(best.level)[-1],
        "bracket": {
            "met": None if best is None else best.level,
            "missed": fit.missed,
            "uncertain": any(d.uncertain for d in search.edges()),
            "client_bound": any(d.client_bound for d in search.edges()),
        },
        "knee": fit.as_dict(),
        "levels": [d.as_dict() for _, d in sorted(search.decided.items())],
        "probes": [
            {
                "level": p.level,
                "met": p.met,
                "verdict": p.verdict,
                "step": p.step,
                "margin": None if p.margin is None else round(p.margin, 4),
                "client_bound": p.client_bound,
                "at_limit": p.at_limit,
                "why": p.why,
            }
            for p in search.probes
        ],
        "summary": search.summary(),
        "hold": search.held,
        "client_limit": None
        if search.client_limit is None
        else {
            "level": search.client_limit.level,
            "step": search.client_limit.step,
            "margin": None if search.client_limit.margin is None else round(search.client_limit.margin, 4),
            "reason": search.client_limit.bound_reason,
        },
    }

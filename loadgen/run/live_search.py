"""The SLA search steered live: the console starts and stops it (``f``), the operator takes over at any time,
and the snapshot carries it as it forms (``SearchView``: probes, fit, bracket). The bisection and the
answer are ``loadgen.run.search``'s and ``loadgen.run.knee``'s; here is who drives the load, and when.

- ``StartSearch(lo, hi)``: a search between the bounds from the level running now (its probes as
  ``--find-max``'s: a step of the plan's length, or the auto-ramp's, ended as soon as its intervals decide).
- A level key during a search (``SetLevel``, ``ChangeLevel``, ``SetRate``): the search stops driving
  ("search paused: operator took over"); the step at the operator's level is a probe like any other — held
  to the same length and ended the same way — and its verdict counts. The load then holds at that level.
- ``ResumeSearch``: the search drives again from every probe so far (the operator's included).
- ``StopSearch``, or a mode switch: the search ends where it is; the load holds.

The record gets a ``search`` event at each of these (``action``: start, paused, probe, resumed, stopped,
done, above, moved; each with ``elapsed_s`` on the run's clock) and, once the search has its answer, the
``find_max`` event ``--find-max`` writes. A run's own ``--find-max`` ends the run with its answer, as
headless; a search started by a key leaves the console live, holding the knee's level and **following** it
(``loadgen.run.follow``): the load holds the knee in steps of a probe's length, each measured as any step
(its own warm-up, load and requests) and ended early once its intervals decide a miss; a held step that
missed is the limit moving ("moved", with the evidence), and the knee is searched for again below it at
once, its new answer followed in turn; a held step that met is followed by one probe of the level above
("above"), and that probe meeting is the limit moving up ("moved", ``direction`` up), searched for again
above. ``f`` (``StopSearch``), a level key or a mode switch stops following:
the load then holds with no set length, as a key's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from loadgen.config import RampPlan
from loadgen.run.follow import evidence_text, moved, refind_bounds, rose
from loadgen.run.protocol import (
    ChangeLevel,
    NextStep,
    ResumeSearch,
    SetLevel,
    SetMode,
    SetRate,
    StartSearch,
    Steering,
    StopSearch,
)
from loadgen.run.search import Search
from loadgen.snapshot import SearchProbe, SearchState, SearchView, StepSummary

if TYPE_CHECKING:
    from loadgen.run.wheel import Wheel

Write = Callable[[str, dict[str, object]], None]


def steer(wheel: Wheel, cmd: Steering) -> None:
    """The operator's load keys, with the search in mind (``Controller.command`` hands them here)."""
    searching, load = wheel.searching, wheel.load
    match cmd:
        case StartSearch(lo=lo, hi=hi):
            searching.start(lo, hi)
        case ResumeSearch():
            searching.resume()
        case StopSearch():
            searching.stop("stopped by the operator")
        case SetLevel(level=level):
            searching.manual(level=level)
        case ChangeLevel(delta=delta):
            searching.manual(level=load.level + delta)
        case SetRate(rate_rps=rate):
            searching.manual(rate=rate)
        case SetMode(mode=mode):
            if mode != load.mode:
                searching.stop("the loop changed: the search's levels were the other loop's", begin=False)
            wheel.switch_mode(mode)
        case NextStep():
            if (wheel.search is not None and not searching.held) or searching.following is not None:
                wheel.notify("the search chooses the levels: f stops it, or set a level (l, ↑ ↓)")
            else:
                wheel.next_step()


class LiveSearch:
    """The search the wheel drives (``Wheel.search``), as the operator steers it."""

    def __init__(self, wheel: Wheel) -> None:
        self.wheel = wheel
        self.write: Write = lambda kind, data: None  # the record's events (the controller sets it)
        self.by_key = False  # started by a key: its end leaves the console live
        self.held = False  # the operator took over: the search no longer drives
        self.operator = False  # the step running now is the operator's probe
        self.next: float | None = None  # the level the search probes when it drives again
        self.last: Search | None = wheel.search  # the search shown (under way, or the last one)
        self.stopped = False  # the last one was stopped before its answer
        self.ended = ""  # why it ended without an answer ("" while under way, or with one)
        self.plan: RampPlan | None = wheel.config.plan  # the probes' length and warm-up
        self.by_hand: set[int] = set()  # the steps (from 1) of the operator's probes
        self.following: float | None = None  # the knee's level held and judged (the search has its answer)
        self.bounds: tuple[float, float] = (1.0, 1.0)  # the range the operator asked for
        self.was: float | None = None  # the knee before it moved (the re-found answer's ``done`` says it)
        self.upper: float | None = None  # followed: the bracket's side that missed (probed for room above)
        self.above: float | None = None  # followed: the level above the knee being probed now

    # ---- the keys ---------------------------------------------------------------------------------------
    def start(self, lo: float, hi: float) -> None:
        wheel = self.wheel
        load, status, config = wheel.load, wheel.status, wheel.config
        slo = config.slo or config.profile.slo
        if wheel.search is not None:
            wheel.notify("a search is under way: f stops it (or resumes it once you took over)")
            return
        if slo.is_empty():
            wheel.notify("the search needs an SLO to meet: the profile's [slo] (or --slo) has none")
            return
        if status.state not in ("running", "paused") and not wheel.idle_after_plan:
            return
        search = Search(lo, hi, integer=load.mode == "closed", repeat=1, slo=slo)
        base = config.plan
        self.plan = RampPlan(
            (search.first(),),
            step_s=base.step_s if base is not None else config.auto_step_s,
            warmup_s=base.warmup_s if base is not None else config.warmup_s,
            mode=load.mode,
        )
        wheel.search, self.last, self.by_key, self.ended = search, search, True, ""
        self.held, self.operator, self.stopped, self.by_hand = False, False, False, set()
        self.following, self.bounds, self.was, self.above, self.upper = None, (lo, hi), None, None, None
        self.drive(search.first())
        unit = "streams" if search.integer else "req/s"
        wheel.notify(f"search {lo:g}:{hi:g} {unit}: probing {search.first():g}")
        self.event("start", bounds=[lo, hi], level=search.first())

    def resume(self) -> None:
        wheel = self.wheel
        if wheel.search is None or not self.held or self.next is None:
            wheel.notify("no search to resume: f starts one")
            return
        self.held = False
        self.drive(self.next)
        wheel.notify(f"search resumed: probing {self.next:g}")
        self.event("resumed", level=self.next)

    def stop(self, why: str, *, begin: bool = True) -> None:
        """The search ends where it is; ``begin``: a step of no set length begins at the level (the probe
        it cuts counts for nothing), unless the operator's step already runs there."""
        wheel = self.wheel
        search, driving = wheel.search, not self.held
        if search is None:
            self.unfollow(why)
            return
        wheel.search, self.held, self.operator, self.ended, self.stopped = None, False, False, why, True
        wheel.load.hold()
        wheel.notify(f"search stopped ({why}): the load holds at {self.level_now():g}")
        summary = search.summary() if search.probes else ""
        self.event("stopped", why=why, probes=len(search.probes), summary=summary)
        if begin and driving and wheel.status.state == "running":
            wheel.cut("level")
            wheel.start()
        else:
            wheel.steps.restart_timer()  # the operator's step runs on, with no set length

    def manual(self, level: int | None = None, rate: float | None = None) -> None:
        """A level key: the operator's level is a probe (the search stops driving), else a key as ever."""
        wheel = self.wheel
        search, load = wheel.search, wheel.load
        if search is None or self.plan is None or wheel.status.state not in ("running", "paused"):
            self.unfollow("operator took over")
            wheel.manual(level, rate)
            return
        if not self.held:
            self.next = self.level_now()  # the probe it cuts is probed again when the search resumes
            wheel.notify("search paused: operator took over (f resumes it)")
            self.event("paused", why="operator took over", level=self.level_now())
        self.held, self.operator = True, True
        load.by_hand(level, rate)
        load.probe_at(self.plan, search.trials_at(self.level_now()))
        if wheel.status.state == "running":
            wheel.cut("level")
            wheel.start()

    # ---- the wheel's hooks ------------------------------------------------------------------------------
    def drive(self, level: float) -> None:
        """The search drives the load to ``level`` (a probe begins now)."""
        wheel = self.wheel
        assert wheel.search is not None and self.plan is not None
        wheel.load.probe_at(self.plan, wheel.search.trials_at(level))
        wheel.load.set_target(level)
        self.operator = False
        if wheel.idle_after_plan:
            wheel.status.run()
        if wheel.status.state == "running":
            wheel.cut("level")
            wheel.start()

    def after(self, summary: StepSummary | None) -> bool | None:
        """A probe closed: the operator's is counted and the load holds at its level (True: a step begins
        there); None when the search drives (``Wheel.search_next`` moves it)."""
        wheel = self.wheel
        search = wheel.search
        if not self.operator or search is None or summary is None:
            return None
        self.operator = False
        nxt = search.after(summary)
        probe = search.probes[-1]
        self.by_hand.add(probe.step)
        verdict = probe.verdict or ("met" if probe.met else "missed")
        wheel.notify(f"your probe at {probe.level:g}: {verdict}, counted (f resumes the search)")
        self.event(
            "probe", by="operator", level=probe.level, verdict=verdict, probe_step=probe.step, next=nxt
        )
        wheel.load.hold()
        self.next = nxt
        return True if nxt is not None else self.finished(search, summary)

    def finished(self, search: Search, summary: StepSummary | None = None) -> bool:
        """The search has its answer (or none as asked): the record's ``find_max`` event; a run's own
        ``--find-max`` ends the run with it (False), a key's holds the knee's level and follows it (True: a
        step begins)."""
        wheel = self.wheel
        wheel.finished_search, wheel.search, self.held, self.stopped = search, None, False, False
        failure = search.failure()
        self.ended = "" if failure is None else failure[0]
        if not self.by_key:
            if failure is None:
                wheel.status.say(search.summary())
            else:  # one line, and the exit: 3 for a server that failed every request, else 2
                wheel.status.fail(failure[0], unreachable=failure[1], usage=not failure[1])
            return False
        answer = search.answer()
        wheel.load.hold()
        if answer is not None and failure is None:
            self.upper = search.fit().missed
            self.follow(answer.level, summary)
        elif answer is not None:
            wheel.load.set_target(answer.level)
        said = search.summary() if failure is None else failure[0]
        was = {} if self.was is None else {"was": self.was}
        wheel.notify(said if self.was is None else f"the knee re-found ({self.was:g} before): {said}")
        self.event("done", summary=said, **was)
        self.was = None
        return True

    # ---- following the knee (``loadgen.run.follow``) ----------------------------------------------------
    def follow(self, level: float, summary: StepSummary | None) -> None:
        """The load holds ``level`` in steps of a probe's length (its warm-up as the next probe's)."""
        assert self.plan is not None
        self.following = level
        warmup = None if summary is None else Search.warmup_after(summary.stats, self.plan.warmup_s)
        self.wheel.load.probe_at(self.plan, 0, warmup)
        self.wheel.load.set_target(level)

    def held_step(self, summary: StepSummary | None) -> bool:
        """A held step closed (True: a step begins): another at the knee; or — it missed on its intervals —
        the limit moved: said, with its evidence, and the knee searched for again below it, the held step
        as the new search's first probe; or — it met on its intervals — one probe of the level above
        (``above_step`` reads it)."""
        wheel, level = self.wheel, self.following
        assert level is not None
        if self.above is not None:
            return self.above_step(summary)
        integer = wheel.load.mode == "closed"
        slo = wheel.config.slo or wheel.config.profile.slo
        evidence = None if summary is None else moved(summary, slo, integer)
        if summary is not None and evidence is not None:
            return self.refind(summary, evidence, refind_bounds(level, self.bounds[0], integer))
        upper = self.upper
        if summary is None or summary.verdict.on_intervals != "met" or upper is None or upper <= level:
            self.follow(level, summary)
            return True
        self.above = upper  # is there room above the knee now? one probe of the bracket's side that missed
        self.event("above", level=upper, following=level, held_step=summary.index + 1)
        assert self.plan is not None
        wheel.load.probe_at(self.plan, 0, Search.warmup_after(summary.stats, self.plan.warmup_s))
        wheel.load.set_target(upper)
        return True

    def above_step(self, summary: StepSummary | None) -> bool:
        """The probe above the knee closed: met on its intervals, the limit moved up (said, with its evidence,
        and the knee searched for again from it up to the first search's high end); else the knee is held
        again."""
        above, level, self.above = self.above, self.following, None
        assert above is not None and level is not None
        integer = self.wheel.load.mode == "closed"
        slo = self.wheel.config.slo or self.wheel.config.profile.slo
        evidence = None if summary is None else rose(summary, slo, integer)
        if summary is None or evidence is None:
            self.follow(level, summary)
            return True
        return self.refind(summary, evidence, (above, max(above, self.bounds[1])))

    def refind(self, summary: StepSummary, evidence: dict[str, object], bounds: tuple[float, float]) -> bool:
        """The limit moved: said, with ``evidence``, and the knee searched for again within ``bounds``, the
        step that showed it as the new search's first probe."""
        wheel, level = self.wheel, self.following
        integer = wheel.load.mode == "closed"
        slo = wheel.config.slo or wheel.config.profile.slo
        lo, hi = bounds
        unit = "streams" if integer else "req/s"
        wheel.notify(f"{evidence_text(evidence, unit)}: re-finding it in {lo:g}:{hi:g}")
        self.event("moved", **evidence, bounds=[lo, hi])
        search = Search(lo, hi, integer=integer, repeat=1, slo=slo)
        wheel.search, self.last, self.ended, self.following, self.was = search, search, "", None, level
        self.held, self.operator, self.stopped, self.by_hand, self.upper = False, False, False, set(), None
        nxt = search.after(summary)
        if nxt is None:
            return self.finished(search, summary)
        assert self.plan is not None
        wheel.load.probe_at(
            self.plan, search.trials_at(nxt), search.warmup_after(summary.stats, self.plan.warmup_s)
        )
        wheel.load.set_target(nxt)
        return True

    def unfollow(self, why: str) -> None:
        """Following ends (``f``, a level key, a mode switch): the held step (or the probe above the knee)
        runs on with no set length."""
        if self.following is None:
            return
        level, self.following, self.above, self.upper = self.following, None, None, None
        self.wheel.load.hold()
        self.wheel.steps.restart_timer()
        self.wheel.notify(f"the knee is no longer followed ({why}): the load holds at {self.level_now():g}")
        self.event("stopped", why=why, following=level)

    # ---- what the snapshot shows ------------------------------------------------------------------------
    def level_now(self) -> float:
        load = self.wheel.load
        return float(load.level) if load.mode == "closed" else load.rate

    def view(self) -> SearchView | None:
        wheel = self.wheel
        search = wheel.search if wheel.search is not None else self.last
        if search is None:
            return None
        state: SearchState
        if self.held:
            state, why = "held", "operator took over"
        elif wheel.search is not None:
            state, why = "probing", search.pending.get(self.level_now(), "")
        elif self.following is not None:
            state, why = "following", "" if self.above is None else "room above"
        else:
            state, why = ("stopped" if self.stopped else "done"), self.ended
        probes = tuple(
            SearchProbe(p.level, p.room, p.met, p.verdict, p.step, p.step in self.by_hand)
            for p in search.probes
        )
        if not probes:
            return SearchView(search.lo, search.hi, state, self.level_now(), why)
        fit = search.fit()
        return SearchView(
            search.lo,
            search.hi,
            state,
            self.level_now() if state in ("probing", "held", "following") else None,
            why,
            probes,
            tuple((p.level, p.fitted) for p in fit.points),
            fit.met,
            fit.missed,
            fit.confidence if fit.met is not None and fit.missed is not None else "",
            fit.shape or "",
            search.summary() if state in ("done", "following") else "",
        )

    def event(self, action: str, **data: object) -> None:
        wheel = self.wheel
        step = wheel.steps.shown_index() + 1
        elapsed = round(wheel.status.elapsed_s(wheel.steps.clock()), 3)
        by = "key" if self.by_key else "--find-max"
        self.write("search", {"action": action, "by": by, "step": step, "elapsed_s": elapsed} | data)

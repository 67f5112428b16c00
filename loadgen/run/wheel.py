"""Who changes the load, and when: the plan (and auto-ramp) at a step's end, the operator's keys at once,
and the settling in between — so that every step is measured under its own load.

- A planned step's window ends → the step *closes*: the load holds at its level until every request it
  counted is done, the step is reported (verdict, early stop, best step), and only then the next level is
  applied. The last step holds too.
- After a lowering the next warm-up waits until in flight has come down to the new level (*settling*).
- A key acts at once: the step it cuts is reported with the share of its requests that ran into the next
  load, and auto-ramp is turned off (the operator took the wheel).
- A mode switch keeps the ending step's own mode and level; the new mode starts from what the old one
  achieved, never at 0 unasked.

It reads time only through the controller's clock (``Steps.clock``), the seam a unit test fakes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine

from loadgen.config import EndedBy, Mode, RampPlan, StepPhase
from loadgen.run.config import RunConfig
from loadgen.run.fleet import Fleet
from loadgen.run.live import LiveFigures
from loadgen.run.live_search import LiveSearch
from loadgen.run.search import Search
from loadgen.run.state import Load, RunStatus
from loadgen.run.steps import Steps
from loadgen.snapshot import SLOVerdict, StepSummary
from loadgen.target.cache import CacheReset
from loadgen.telemetry.headroom import level_warning

ResetCache = Callable[[], Coroutine[object, object, CacheReset]]

NOTICES_KEPT = 8
WAITING_POLL_NS = 10_000_000  # closing or settling: how soon a worker's "done" is seen (not a snapshot tick)
MIN_OPEN_RATE = 0.1  # req/s: a closed loop that achieved nothing still opens at a rate that sends
# The auto-ramp without a plan doubles up to this many streams (closed) or req/s (open), the scale the
# load generator is measured at; a step that missed the SLO stops it sooner
AUTO_CEILING = 1024


class Wheel:
    def __init__(
        self, config: RunConfig, status: RunStatus, load: Load, steps: Steps, fleet: Fleet, live: LiveFigures
    ) -> None:
        self.config, self.status, self.load, self.steps, self.fleet, self.live = (
            config,
            status,
            load,
            steps,
            fleet,
            live,
        )
        self.next_after_close = False  # the closing step was planned: its report applies the next level
        self.settling = False
        self.settling_since_ns = 0  # when the settling under way began (its step line says how long it took)
        self.notices: list[tuple[int, str]] = []
        self.notice_id = 0
        self.headroom_warned = 0  # the level last told it is above the KV headroom (told once per level)
        self.reset_cache: ResetCache | None = None  # --reset-prefix-cache step: before every warm-up
        self.resetting: asyncio.Task[CacheReset] | None = None
        self.search: Search | None = None
        self.finished_search: Search | None = None  # set once the search is over: the record gets its event
        if config.find_max is not None:
            lo, hi = config.find_max
            repeat, slo = config.plan.repeat if config.plan else 1, config.slo or config.profile.slo
            integer = config.mode == "closed"
            self.search = Search(lo, hi, integer=integer, repeat=repeat, slo=slo, hold_s=config.hold_s)
            load.first_probe = self.search.first()
        self.searching = LiveSearch(self)  # the search as the operator steers it (f, a level key)

    # ---- what the snapshot shows ------------------------------------------------------------------------
    def phase(self) -> StepPhase:
        steps = self.steps
        if steps.current is not None:
            return steps.current.phase
        if self.status.state == "running" and steps.closing is not None:
            return "closing"
        if self.status.state == "running" and (self.settling or self.resetting is not None):
            return "settling"
        return "idle"

    def next_timer_ns(self) -> int:
        """When the controller must look next: the step's own timers, and while a step closes or a lowering
        settles every ``WAITING_POLL_NS``, so the next step begins as soon as the last is done (the load is
        held for exactly the time needed, not up to the next snapshot tick)."""
        due = self.steps.next_timer_ns()
        if self.phase() in ("closing", "settling"):
            due = min(due, self.steps.clock() + WAITING_POLL_NS)
        return due

    def surplus(self) -> int:
        return max(0, self.live.in_flight - self.load.level) if self.settling else 0

    def notify(self, text: str) -> None:
        self.notice_id += 1
        self.notices.append((self.notice_id, text))
        del self.notices[:-NOTICES_KEPT]

    @property
    def idle_after_plan(self) -> bool:
        """A finished plan in the console: the run stays live, waiting for a key."""
        return self.status.state == "finished" and self.config.after_plan == "idle"

    # ---- starting a step --------------------------------------------------------------------------------
    def start(self) -> None:
        """Apply the load asked for now and begin a step under it, settling first after a lowering."""
        load = self.load
        if self.status.state != "running":
            return
        if (load.mode == "closed" and load.level <= 0) or (load.mode == "open" and load.rate <= 0):
            self.settling = False
            self.fleet.apply_load(load)  # no load: nothing to measure until a key asks for some
            return
        if load.mode == "closed" and self.live.in_flight > load.level:
            if not self.settling:
                self.settling_since_ns = self.steps.clock()
            self.settling = True
            self.fleet.apply_load(load)
            return
        if load.mode == "open" and self.search is not None and self.live.in_flight > 0:
            # An open-loop probe starts on an empty server: what the last probe's close sent (at a rate past
            # the server's, a queue of seconds) is served with no arrivals first, else it would read as this one's.
            if not self.settling:
                self.settling_since_ns = self.steps.clock()
            self.settling = True
            self.fleet.apply_load(dataclasses.replace(load, rate=0.0))
            return
        self.settling = False
        self.warn_headroom()
        self.begin()

    def warn_headroom(self) -> None:
        """A notice when a closed loop's level is more than the server's KV cache holds of this profile."""
        load = self.load
        text = level_warning(self.steps.link.kv_headroom(), load.level) if load.mode == "closed" else None
        if text is not None and load.level != self.headroom_warned:
            self.headroom_warned = load.level
            self.notify(text)

    def begin(self) -> None:
        """The step begins now — after the server's prefix cache was reset, when each step asks for it."""
        if self.reset_cache is None:
            self.steps.begin()
            return
        if self.resetting is None:
            self.resetting = asyncio.get_running_loop().create_task(self.reset_cache())
            self.resetting.add_done_callback(self.reset_done)

    def reset_done(self, task: asyncio.Task[CacheReset]) -> None:
        if task is not self.resetting:
            return  # the load changed while the reset was under way: a newer one is coming
        self.resetting = None
        result = task.result() if not task.cancelled() and task.exception() is None else None
        if result is None:
            return
        self.steps.cache = ("reset", result.how) if result.done else ("kept", result.how)
        self.cache_not_reset(result)
        if self.status.state == "running" and not self.settling and self.steps.current is None:
            self.steps.begin()

    def cache_not_reset(self, reset: CacheReset) -> None:
        """A failed ``--reset-prefix-cache`` is said on the terminal too (a warning, once), not only in the
        record's step lines: the steps then run on whatever the cache holds."""
        text = (
            f"--reset-prefix-cache: the prefix cache was not reset ({reset.how}); steps run on what it holds"
        )
        if not reset.done and text not in self.status.warnings:
            self.status.warnings.append(text)

    def check_settled(self) -> None:
        load = self.load
        settled_at = 0 if load.mode == "open" else load.level  # open: drained (``start``)
        if self.settling and self.status.state == "running" and self.live.in_flight <= settled_at:
            self.settling = False
            self.steps.settled_s = (self.steps.clock() - self.settling_since_ns) / 1e9
            self.begin()

    # ---- the plan ---------------------------------------------------------------------------------------
    def window_due(self, ended_by: EndedBy = "plan") -> None:
        """The step's window ends on its timer (or once precise enough): it closes under its own load."""
        seg = self.steps.end(ended_by, hold=True)
        self.next_after_close = True
        if seg is None:  # nothing was measured (cannot normally happen): move on at once
            self.after_close()

    def reported(self, summary: StepSummary, held: bool) -> None:
        """A step was reported; if it was the planned step closing, the next level applies now."""
        if held and self.next_after_close and self.steps.closing is None:
            self.after_close(summary)

    def early_stop(self, summary: StepSummary) -> None:
        """A plan with early stop ends at its first step that broke the SLO (ended by the plan or by
        --precision, not by a key)."""
        plan, verdict = self.load.plan, summary.verdict
        if (
            plan is not None
            and plan.early_stop
            and verdict.met is False
            and summary.ended_by in ("plan", "precision", "decided")
            and self.status.state == "running"
        ):
            self.status.say(
                f"stopped early: step {summary.index + 1} broke the SLO ({'; '.join(verdict.failures)})"
            )
            self.next_after_close = False
            self.finish_plan()

    def after_close(self, summary: StepSummary | None = None) -> None:
        self.next_after_close = False
        if self.status.state != "running":
            return  # stopped early (SLO), paused or stopping: nothing more begins
        if self.search is not None:
            moved = self.search_next(summary)
        elif self.searching.following is not None:
            moved = self.searching.held_step(summary)  # another at the knee, or the knee moved: re-found
        else:
            moved = not self.ceiling_reached(summary) and self.step_plan_level()
        if not moved:
            if self.status.state == "running":  # a search with no answer as asked failed instead
                self.finish_plan()
            return
        self.start()

    def search_next(self, summary: StepSummary | None) -> bool:
        search = self.search
        assert search is not None
        if (held := self.searching.after(summary)) is not None:
            return held  # the operator's probe: counted, and the load holds at its level
        nxt = search.after(summary) if summary is not None else None
        if nxt is None:
            return self.searching.finished(search, summary)
        self.load.set_target(nxt)
        self.load.probe_repeat = search.trials_at(nxt)  # the step line's ``repeat``: its probe at the level
        assert summary is not None  # a next level is only ever found after a step
        self.load.probe_warmup_s = None
        self.load.probe_warmup_s = search.warmup_after(summary.stats, self.load.warmup_s())
        if search.holding and search.hold_s:  # --hold S: the answer's level, for S seconds
            self.load.hold_for(search.hold_s)
        return True

    def step_plan_level(self) -> bool:
        """Move the load to the next level (``next_load``). False when there is none."""
        target = self.next_load()
        if target is None:
            return False
        load = self.load
        position, value = target
        if position is not None:
            plan = load.plan if load.plan is not None else self.config.plan
            assert plan is not None  # a position is only ever one of a plan's
            load.at_plan_position(plan, position)
        else:
            load.set_target(value)
        return True

    def next_load(self) -> tuple[int | None, float] | None:
        return next_load(self.load, self.config.plan)

    def ceiling_reached(self, summary: StepSummary | None) -> bool:
        planned = self.load.plan is not None or self.config.plan is not None
        return summary is not None and self.ceiling_reached_by(summary.verdict, planned=planned)

    @staticmethod
    def ceiling_reached_by(verdict: SLOVerdict, *, planned: bool) -> bool:
        """The auto-ramp without a plan stops at the first step that missed the SLO: no level above it is
        worth measuring (it also stops at ``AUTO_CEILING``). Missed on its intervals where it has them: a
        step whose interval straddles a limit is undecided, not met (never the best) and not missed, so the
        ramp goes on to a level that decides. A plan stops at its end or its early stop."""
        return not planned and verdict.three_valued == "missed"

    def finish_plan(self) -> None:
        self.status.finish()
        if self.config.after_plan == "idle":
            self.load.idle()
            self.fleet.apply_load(self.load)
            self.notify("plan finished: ↑ or l starts a step at a level of your choice")

    # ---- the operator's keys ----------------------------------------------------------------------------
    def cut(self, ended_by: EndedBy) -> None:
        """The load changes now: the current step ends (carrying its requests in flight into the next
        load) and a closing step stops waiting."""
        self.steps.end(ended_by)
        self.steps.cut_closing()
        self.next_after_close = False
        if self.resetting is not None:  # a reset under way for a step that will not begin
            self.resetting.cancel()
            self.resetting = None

    def take_wheel(self) -> None:
        if self.load.auto:
            self.load.set_auto(False)
            self.notify("auto-ramp off — a to resume")

    def manual(self, level: int | None = None, rate: float | None = None) -> None:
        load = self.load
        if self.status.state == "running" and self.steps.current is not None and unchanged(load, level, rate):
            self.notify("already at that load: the step goes on")  # l⏎ on the value shown cuts nothing
            return
        load.by_hand(level, rate)
        if self.status.state == "starting":
            return
        self.take_wheel()
        load.leave_plan()  # a manual level leaves the plan
        if self.status.state == "paused":
            return  # resuming begins a step at the new level
        if self.idle_after_plan:
            self.status.run()
        self.cut("level")
        self.start()

    def next_step(self) -> None:
        if self.status.state != "running":
            return
        if self.next_load() is None:
            self.notify("no next step (the plan's end, or the auto-ramp's ceiling): ↑/↓ or l set a level")
            return
        self.cut("next")
        self.step_plan_level()
        self.start()

    def switch_mode(self, mode: Mode) -> None:
        load = self.load
        if mode == load.mode or not (self.status.state == "running" or self.idle_after_plan):
            return
        if mode == "open":
            span = self.live.rolling.span_s()
            achieved = self.live.rolling.acc.sent / span if span > 0 else 0.0
            cap = self.config.level if self.config.mode == "open" else 0
            load.open_at(max(MIN_OPEN_RATE, round(achieved, 2)), cap)
            capped = f"cap {cap}" if cap else "no cap"
            self.notify(f"open loop at {load.rate:g} req/s (what the closed loop achieved), {capped}")
        else:
            load.closed_at(max(1, self.live.in_flight))
            self.notify(f"closed loop at {load.level} streams (the open loop's requests in flight)")
        self.take_wheel()
        if self.idle_after_plan:
            self.status.run()
        self.cut("mode")
        load.switch_to(mode)
        self.start()


def next_load(load: Load, plan: RampPlan | None) -> tuple[int | None, float] | None:
    """Where ``n`` and the auto-ramp go next: (plan position or None, level or rate); None: nowhere.

    In the plan (``load.plan``): its next position. After a manual change left the run's ``plan``: its first
    level above the current load (17 -> the plan's 32, never 34). Without a plan: double, up to
    ``AUTO_CEILING`` (an SLO stops the auto-ramp sooner: ``Wheel.ceiling_reached``)."""
    closed = load.mode == "closed"
    current = float(load.level if closed else load.rate)
    if load.plan is not None:
        if load.plan_index + 1 >= load.plan.positions:
            return None
        return load.plan_index + 1, load.plan.level_at(load.plan_index + 1)
    if plan is not None and plan.mode == load.mode:
        above = [p for p in range(plan.positions) if plan.level_at(p) > current]
        return (above[0], plan.level_at(above[0])) if above else None
    if current >= AUTO_CEILING:
        return None
    doubled = max(1.0, current * 2) if closed else max(MIN_OPEN_RATE, current * 2)
    return None, min(float(AUTO_CEILING), doubled)


def next_value(target: tuple[int | None, float] | None) -> float | None:
    """The level or rate of a ``next_load`` answer (None: nowhere)."""
    return None if target is None else target[1]


def unchanged(load: Load, level: int | None, rate: float | None) -> bool:
    """A key that asks for the load already running, with no plan or auto-ramp to take over from: nothing
    to change, so no step is cut for it."""
    if load.auto or load.plan is not None:
        return False
    if load.mode == "closed":
        return rate is None and level is not None and level == load.level
    return level is None and rate is not None and rate == load.rate

"""Step bookkeeping: the windows (``Segment``) that deltas are folded into, where steps begin and end, and
the ``StepSummary`` each finished step becomes.

Windows are cut exactly: at a boundary (warm-up end, step end) every worker is asked to flush, and each
worker's deltas before its flush reply belong to the old window, the ones after to the new. A step's
measurement window is reported once every worker says none of its requests is still in flight (or it is
too late to wait), and once the server has been sampled after its end; steps are reported in order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from loadgen.config import SLO, EndedBy, Mode, Phase
from loadgen.metrics import Accumulator, IntervalDelta
from loadgen.run.fleet import Fleet
from loadgen.run.health import BoundJudge, first_reason
from loadgen.run.protocol import Flush
from loadgen.run.state import Load
from loadgen.run.telemetry_link import TelemetryLink
from loadgen.slo import best_step, evaluate
from loadgen.snapshot import SLOVerdict, StepSummary

LATE_RESULTS_S = 600.0  # how long a finished step waits for the results of requests it sent
TELEMETRY_WAIT_S = 6.0  # how long a step's record waits for the server sample taken at its end
MIN_STEP_S = 1.0  # a step ended by a key press sooner than this (or with nothing done) is not a step
NO_TIMER_NS = 1 << 62
# How a step ended that says nothing about the load: such a step is kept only when it measured something.
MANUAL_ENDS: tuple[EndedBy, ...] = ("level", "mode", "pause", "stop")


@dataclass(frozen=True, slots=True)
class StepEnd:
    """What a step was, fixed when it ended."""

    ended_by: EndedBy
    mode: Mode
    level: int
    rate_rps: float | None
    arrival: str
    marks: tuple[str, ...]
    warmup_s: float
    duration_s: float
    close_deadline_ns: int  # report it by then even if some of its requests never came back


@dataclass(eq=False, slots=True)
class Segment:
    """A window that deltas are folded into: one step's warm-up or its measurement."""

    seg_id: int
    step: int
    phase: Phase
    t0_ns: int
    acc: Accumulator
    pending: set[int]  # workers whose last delta for this window (nothing in flight) has not come yet
    t1_ns: int | None = None
    judges: dict[int, BoundJudge] = field(default_factory=dict)  # per worker: its health over the window
    end: StepEnd | None = None  # set when the step ended: the window is then reported once complete

    def fold(self, wid: int, delta: IntervalDelta, closed: bool, current: bool) -> None:
        self.acc.add(delta)
        if current and delta.health:
            self.judges.setdefault(wid, BoundJudge()).add(delta.health)
        if closed:
            self.pending.discard(wid)

    def bound_reason(self) -> str | None:
        """Why this window's timings may read high (the client-bound flag), or None."""
        return first_reason(self.judges)


class Steps:
    """The current step, the windows still waiting to be reported, and the steps reported so far."""

    def __init__(self, load: Load, fleet: Fleet, link: TelemetryLink, t0_ns: int) -> None:
        self.load, self.fleet, self.link, self.t0_ns = load, fleet, link, t0_ns
        self.segments: dict[int, Segment] = {}
        self.next_seg = 0
        self.current: Segment | None = None
        self.run_acc = Accumulator()
        self.run_measured_s = 0.0
        self.index = -1
        self.t0_step_ns = 0
        self.warm_end_ns = 0
        self.end_ns: int | None = None
        self.level = 0
        self.rate: float | None = None
        self.marks: list[str] = []
        self.summaries: list[StepSummary] = []
        self.starts_s: list[float] = []
        self.best: int | None = None

    # ---- deltas -----------------------------------------------------------------------------------------
    def fold(self, wid: int, window: int, delta: IntervalDelta, closed: bool, current: bool) -> None:
        seg = self.segments.get(window)
        if seg is None:
            return
        seg.fold(wid, delta, closed, current)
        if seg.phase == "measure":
            self.run_acc.add(delta)

    @property
    def warming_up(self) -> bool:
        return self.current is not None and self.current.phase == "warmup"

    def measuring_since_ns(self) -> int | None:
        """The current measurement window's start, or None (warm-up, paused, between steps)."""
        cur = self.current
        return cur.t0_ns if cur is not None and cur.phase == "measure" else None

    # ---- boundaries -------------------------------------------------------------------------------------
    def _new_segment(self, phase: Phase, now: int) -> Segment:
        seg = Segment(self.next_seg, self.index, phase, now, Accumulator(), pending=set(self.fleet.alive))
        self.next_seg += 1
        self.segments[seg.seg_id] = seg
        self.fleet.send_all(Flush(seg.seg_id, now))
        if phase == "measure":
            self.link.poke()
        return seg

    def begin(self) -> None:
        now = time.monotonic_ns()
        load = self.load
        self.index += 1
        self.t0_step_ns = now
        self.level = load.level
        self.rate = load.rate if load.mode == "open" else None
        self.marks = []
        self.starts_s.append((now - self.t0_ns) / 1e9)
        warm = load.warmup_s()
        self.warm_end_ns = now + int(warm * 1e9)
        # The flush that opens the new window goes out before the new load: a worker applies its commands in
        # order, so whatever the change causes (streams cancelled by lowering, new users) lands in the new step.
        self.current = self._new_segment("warmup" if warm > 0 else "measure", now)
        self.fleet.apply_load(load)
        self.end_ns = load.step_end_ns(now)

    def end(self, ended_by: EndedBy) -> None:
        seg = self.current
        if seg is None:
            return
        now = time.monotonic_ns()
        seg.t1_ns = now
        self.current = None
        # Until the next step begins (pause, stop) requests go to a window nobody reports.
        self.fleet.send_all(Flush(self.next_seg, now))
        self.next_seg += 1
        if seg.phase != "measure":
            self.segments.pop(seg.seg_id, None)  # warm-up is never reported
            return
        self.link.poke()
        self.run_measured_s += (now - seg.t0_ns) / 1e9
        # Reported once every worker says none of the window's requests is still in flight.
        seg.end = StepEnd(
            ended_by=ended_by,
            mode=self.load.mode,
            level=self.level,
            rate_rps=self.rate,
            arrival=self.load.arrival_label(),
            marks=tuple(self.marks),
            warmup_s=(self.warm_end_ns - self.t0_step_ns) / 1e9,
            duration_s=(now - self.t0_step_ns) / 1e9,
            close_deadline_ns=now + int(LATE_RESULTS_S * 1e9),
        )

    def advance(self, ended_by: EndedBy) -> bool:
        """End the step and begin the next: the plan's next level, or (no plan) double the load. False when
        the plan has no next level: the step is ended and nothing begins."""
        load = self.load
        if load.plan is not None:
            if load.plan_index + 1 >= len(load.plan.levels):
                self.end(ended_by)
                return False
            load.plan_index += 1
            load.apply_plan_level(load.plan_index)
        elif load.mode == "closed":
            load.level = max(1, load.level * 2)
        else:
            load.rate = max(0.1, load.rate * 2)
        self.end(ended_by)
        self.begin()
        return True

    def restart_timer(self) -> None:
        """Auto-ramp switched: the current step ends when the new setting says."""
        self.end_ns = self.load.step_end_ns(self.t0_step_ns)

    def next_timer_ns(self) -> int:
        """When the next warm-up end or step end is due (far in the future when none is)."""
        due = NO_TIMER_NS
        if self.warming_up:
            due = min(due, self.warm_end_ns)
        if self.end_ns is not None:
            due = min(due, self.end_ns)
        return due

    def end_warmup(self, now: int) -> None:
        """Past the warm-up's end: the measurement window opens (the warm-up is never reported)."""
        cur = self.current
        if cur is not None and cur.phase == "warmup" and now >= self.warm_end_ns:
            self.current = self._new_segment("measure", now)
            self.segments.pop(cur.seg_id, None)

    def step_due(self, now: int) -> bool:
        return self.end_ns is not None and now >= self.end_ns

    # ---- reporting --------------------------------------------------------------------------------------
    def _settled(self, seg: Segment, now: int) -> bool:
        """The server has been sampled after the window closed (the poke at its end answered), or it is
        too late to wait for it; a slow or failing source never holds a step back for long."""
        if not self.link.active or seg.t1_ns is None or now >= seg.t1_ns + int(TELEMETRY_WAIT_S * 1e9):
            return True
        return self.link.settled(seg.t1_ns)

    def unsettled(self) -> bool:
        """Some ended window still waits for the server's sample at its end."""
        now = time.monotonic_ns()
        return any(not self._settled(seg, now) for seg in self.segments.values())

    def complete(self, force: bool = False) -> list[Segment]:
        """The ended windows ready to report, in order (all of them with ``force``), taken off the book."""
        now = time.monotonic_ns()
        ready: list[Segment] = []
        for seg_id in sorted(self.segments):
            seg = self.segments[seg_id]
            if seg.end is None:
                continue
            pending = seg.pending & self.fleet.alive
            if pending and not force and now < seg.end.close_deadline_ns:
                break  # steps are reported in order: a later one waits for this one
            if not force and not self._settled(seg, now):
                break
            del self.segments[seg_id]
            ready.append(seg)
        return ready

    def summarize(self, seg: Segment, slo: SLO) -> StepSummary | None:
        """The window's step line, added to the steps reported; None for a moment between two key presses."""
        end = seg.end
        assert end is not None, "only an ended window is summarized"
        t1_ns = seg.t1_ns or time.monotonic_ns()
        window_s = max(1e-9, (t1_ns - seg.t0_ns) / 1e9)
        stats = seg.acc.stats("step", window_s)
        done = stats.ok + stats.error_count + stats.cancelled
        if end.ended_by in MANUAL_ENDS and (window_s < MIN_STEP_S or done == 0):
            return None
        verdict = evaluate(slo, stats) if not slo.is_empty() else SLOVerdict(None)
        bound = seg.bound_reason()
        summary = StepSummary(
            index=len(self.summaries),
            mode=end.mode,
            level=int(end.level),
            rate_rps=end.rate_rps,
            arrival=end.arrival,
            warmup_s=round(end.warmup_s, 3),
            window_s=round(window_s, 3),
            window_t0_ns=seg.t0_ns,
            window_t1_ns=t1_ns,
            duration_s=round(end.duration_s, 3),
            stats=stats,
            verdict=verdict,
            client_bound=bound is not None,
            bound_reason=bound or "",
            ended_by=end.ended_by,
            server=self.link.window_summary(seg.t0_ns, t1_ns),
            marks=end.marks,
        )
        self.summaries.append(summary)
        self.best = best_step(self.summaries)
        return summary

"""Step bookkeeping: the windows (``Segment``) that deltas are folded into, where steps begin and end, and
the ``StepSummary`` each finished step becomes.

Windows are cut exactly: at a boundary (warm-up end, step end) every worker is asked to flush, and each
worker's deltas before its flush reply belong to the old window, the ones after to the new. A step's
measurement window is reported once every worker says none of its requests is still in flight (or it is
too late to wait), and once the server has been sampled after its end; steps are reported in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from loadgen import measures
from loadgen.analysis.diagnosis import StepFigures, diagnose, with_answers
from loadgen.analysis.quality import ProbeAnswer, QualityBook
from loadgen.analysis.ttft_split import ttft_split
from loadgen.config import SLO, EndedBy, Mode, Phase
from loadgen.metrics import Accumulator, IntervalDelta
from loadgen.metrics.replicas import idle_replicas
from loadgen.metrics.slices import SliceBook, judge, step_margins
from loadgen.run.censor import before_key
from loadgen.run.fleet import Fleet
from loadgen.run.health import BoundJudge, first_reason
from loadgen.run.live import latest_by_kind
from loadgen.run.protocol import Flush
from loadgen.run.replicas import replica_figures
from loadgen.run.state import Load
from loadgen.run.telemetry_link import TelemetryLink
from loadgen.slo import best_step, evaluate, judge_quality
from loadgen.snapshot import EMPTY, STEP_FLAGS, SLOVerdict, StepFlag, StepSummary, WindowStats
from loadgen.target.ratelimit import read_ratelimit
from loadgen.types import Target

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
    held: bool = False  # a planned end: the load holds at the step's level until its requests are done
    repeat: int = 0
    cache: tuple[str, str] = ("kept", "")  # the prefix cache before the step, and how it was reset
    settling_s: float = 0.0  # how long its warm-up waited for a lowering's surplus streams


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
    in_flight: dict[int, int] = field(default_factory=dict)  # per worker: its requests still in flight
    cut_ns: int | None = None  # when its load was changed under its requests (they ran into the next load)
    carried: dict[int, int] = field(default_factory=dict)  # per worker: its requests in flight at the cut
    after_cut: list[IntervalDelta] = field(default_factory=list)  # shipped after the cut (run.censor)
    closed_ns: int | None = None  # when its last request was done
    latest_errors: dict[str, str] = field(default_factory=dict)  # error kind -> its latest message
    ratelimit: dict[str, str] = field(default_factory=dict)  # the latest x-ratelimit-* values seen
    flags: set[StepFlag] = field(default_factory=set)  # what makes it not clean besides a cut
    lost_requests: int = 0  # its requests in flight on workers lost before they shipped them
    clock: Callable[[], int] = time.monotonic_ns  # the controller's (a fake one in unit tests)
    slices: SliceBook | None = None  # a measurement window's deltas by time slice: its margins of error
    probes: list[ProbeAnswer] = field(default_factory=list)  # answer probes' texts (loadgen.analysis.quality)

    def fold(self, wid: int, delta: IntervalDelta, closed: bool, current: bool, in_flight: int = 0) -> None:
        self.acc.add(delta)
        if self.slices is not None:
            self.slices.add(delta)
        if delta.recent_errors:
            self.latest_errors.update(latest_by_kind(delta.recent_errors))
        if delta.ratelimit:
            self.ratelimit.update(read_ratelimit(delta.ratelimit))
        if delta.probes:
            self.probes.extend(delta.probes)
        if current and delta.health:
            self.judges.setdefault(wid, BoundJudge()).add(delta.health)
        self.in_flight[wid] = 0 if closed else in_flight
        # The first figures shipped after the cut say how many of its requests the cut caught in flight.
        if self.cut_ns is not None and wid not in self.carried and delta.t1_ns >= self.cut_ns:
            self.carried[wid] = self.in_flight[wid]
        elif self.cut_ns is not None and not current and delta.t0_ns >= self.cut_ns:  # those the key caught
            self.after_cut.append(delta)
        if closed:
            self.pending.discard(wid)
            if not self.pending and self.closed_ns is None:
                self.closed_ns = self.clock()

    @property
    def left(self) -> int:
        """Its requests still in flight (as last shipped)."""
        return sum(self.in_flight.values())

    def carried_share(self, done: int) -> float:
        if self.cut_ns is None or done <= 0:
            return 0.0
        return round(min(1.0, sum(self.carried.values()) / done), 4)

    def lose(self, wid: int) -> None:
        """Worker ``wid`` died while this window still waited for it: what it had in flight vanished."""
        self.flags.add("worker_lost")
        if wid in self.pending:
            self.lost_requests += self.in_flight.get(wid, 0)
            self.pending.discard(wid)
            if not self.pending and self.closed_ns is None:
                self.closed_ns = self.clock()

    def bound_reason(self) -> str | None:
        """Why this window's timings may read high (the client-bound flag), or None."""
        return first_reason(self.judges)

    def summary(
        self, slo: SLO, link: TelemetryLink, target: Target, quality: dict[str, object] | None
    ) -> StepSummary:
        """The step line of this ended window: its figures, the SLO's verdict with their margins of error (and
        the answer probes' ``quality``, which ``Steps`` reads off its book), the server's side over it
        (``link``) and the replicas of ``target`` it reached; ``Steps.summarize`` adds the diagnosis."""
        end = self.end
        assert end is not None, "only an ended window is summarized"
        t1_ns = self.t1_ns or self.clock()
        window_s = max(1e-9, (t1_ns - self.t0_ns) / 1e9)
        stats = self.acc.stats("step", window_s)
        done = stats.ok + stats.error_count + stats.cancelled
        closed_ns = self.closed_ns if self.closed_ns is not None else self.clock()
        verdict = evaluate(slo, stats) if not slo.is_empty() else SLOVerdict(None)
        margins = step_margins(self.slices, t1_ns, stats)
        verdict = judge(slo, verdict, margins, window_s)
        bound = self.bound_reason()
        replicas = replica_figures(target, self.acc, window_s, link.replica_kv(self.t0_ns, t1_ns))
        return StepSummary(
            index=self.step,
            mode=end.mode,
            level=int(end.level),
            rate_rps=end.rate_rps,
            arrival=end.arrival,
            warmup_s=round(end.warmup_s, 3),
            window_s=round(window_s, 3),
            window_t0_ns=self.t0_ns,
            window_t1_ns=t1_ns,
            duration_s=round(end.duration_s, 3),
            stats=stats,
            verdict=judge_quality(slo, verdict, quality),
            client_bound=bound is not None,
            bound_reason=bound or "",
            ended_by=end.ended_by,
            server=link.window_summary(self.t0_ns, t1_ns),
            marks=end.marks,
            carried_share=self.carried_share(done),
            latest_errors=dict(self.latest_errors),
            ratelimit=dict(self.ratelimit),
            repeat=end.repeat,
            cache=end.cache[0],
            cache_how=end.cache[1],
            closing_s=round(max(0.0, (closed_ns - t1_ns) / 1e9), 3) if end.held else 0.0,
            replicas=replicas,
            idle_replicas=idle_replicas(replicas),
            flags=tuple(f for f in STEP_FLAGS if f in self.flags),
            lost_requests=self.lost_requests,
            settling_s=round(end.settling_s, 3),
            margins=margins,
            ttft_split=ttft_split(stats.pct(measures.TTFT_MS), link.ttft_histograms(self.t0_ns, t1_ns)),
            quality=quality or EMPTY,
            before_key=EMPTY if self.cut_ns is None else self.censored(slo, stats, window_s),
        )

    def censored(self, slo: SLO, stats: WindowStats, window_s: float) -> Mapping[str, object]:
        """A cut window read on its requests done before the key (``loadgen.run.censor``)."""
        return before_key(slo, self.acc, self.after_cut, stats, window_s, sum(self.carried.values()))


class Steps:
    """The current step, the windows still waiting to be reported, and the steps reported so far."""

    def __init__(
        self,
        load: Load,
        fleet: Fleet,
        link: TelemetryLink,
        t0_ns: int,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.load, self.fleet, self.link, self.t0_ns, self.clock = load, fleet, link, t0_ns, clock
        self.segments: dict[int, Segment] = {}
        self.next_seg = 0
        self.current: Segment | None = None
        self.run_acc = Accumulator()
        self.run_measured_s = 0.0
        self.index = 0  # the current step's index (or the next one's, between steps): header, chart, record
        self.closing: Segment | None = None  # a planned step whose window ended: its load holds until done
        self.mode: Mode = load.mode
        self.arrival = load.arrival_label()
        self.repeat = 0
        self.cache: tuple[str, str] = ("kept", "")  # set before a step begins (see Wheel), then kept
        self.step_cache: tuple[str, str] = ("kept", "")  # the current step's
        self.t0_step_ns = 0
        self.warm_end_ns = 0
        self.end_ns: int | None = None
        self.level = 0
        self.rate: float | None = None
        self.marks: list[str] = []
        self.summaries: list[StepSummary] = []
        self.starts_s: list[float] = []
        self.best: int | None = None
        self.settled_s = 0.0  # how long the next step's warm-up waited for surplus streams (Wheel sets it)
        self.step_settled_s = 0.0  # the current step's
        # A worker was lost since the load was last spread over the workers: its share is not sent, so every
        # window measured until the next step begins is flagged (``Segment.flags``).
        self.short_of_load = False
        # Steps a key cut under MIN_STEP_S into their window, dropped by design: said (a toast and a record
        # warning, ``RunController.say_dropped``) so that a step the operator saw never vanishes unsaid
        self.dropped: list[str] = []
        self.quality = QualityBook.of(fleet.config.profile.quality)  # --quality: references, agreement

    # ---- deltas -----------------------------------------------------------------------------------------
    def fold(
        self, wid: int, window: int, delta: IntervalDelta, closed: bool, current: bool, in_flight: int = 0
    ) -> None:
        seg = self.segments.get(window)
        if seg is None:
            return
        seg.fold(wid, delta, closed, current, in_flight)
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
        seg = Segment(
            self.next_seg,
            self.index,
            phase,
            now,
            Accumulator(),
            pending=set(self.fleet.alive),
            clock=self.clock,
            slices=SliceBook(now) if phase == "measure" else None,
        )
        if self.short_of_load:
            seg.flags.add("worker_lost")
        self.next_seg += 1
        self.segments[seg.seg_id] = seg
        self.fleet.send_all(Flush(seg.seg_id, now, self.index + 1, phase, self.level))
        if phase == "measure":
            self.link.poke()
        return seg

    def begin(self) -> None:
        """A step begins at the load asked for now: its warm-up (or its measurement, without one)."""
        now = self.clock()
        load = self.load
        self.t0_step_ns = now
        self.level = load.level
        self.rate = load.rate if load.mode == "open" else None
        self.mode, self.arrival = load.mode, load.arrival_label()
        self.repeat = load.repeat_now()
        self.step_cache, self.cache = self.cache, ("kept", "")  # a reset counts for the step right after it
        self.step_settled_s, self.settled_s = self.settled_s, 0.0
        self.short_of_load = False  # apply_load below spreads the level over the workers left
        self.marks = []
        self.starts_s.append((now - self.t0_ns) / 1e9)
        warm = load.warmup_s()
        self.warm_end_ns = now + int(warm * 1e9)
        # The flush that opens the new window goes out before the new load: a worker applies its commands in
        # order, so whatever the change causes (streams cancelled by lowering, new users) lands in the new step.
        self.current = self._new_segment("warmup" if warm > 0 else "measure", now)
        self.fleet.apply_load(load)
        self.end_ns = load.step_end_ns(now)

    def _between(self, now: int) -> None:
        """Requests sent from now until the next step begins go to a window nobody reports."""
        self.fleet.send_all(Flush(self.next_seg, now))
        self.next_seg += 1

    def _forget(self, seg: Segment) -> None:
        """The step never measured anything: it takes no index and leaves no chart boundary."""
        self.segments.pop(seg.seg_id, None)
        if self.starts_s:
            self.starts_s.pop()

    def end(self, ended_by: EndedBy, *, hold: bool = False) -> Segment | None:
        """The current step's window ends now. ``hold``: a planned end — the load stays at its level until
        every request it counted is done (``closing``); otherwise the load changes at once and the requests
        still in flight are carried into the next load (their share is reported). Returns the step's window,
        None when it is not a step (a warm-up, a moment between two key presses, nothing sent)."""
        seg = self.current
        if seg is None:
            return None
        now = self.clock()
        seg.t1_ns = now
        self.current = None
        self.end_ns = None
        self._between(now)
        nothing = seg.acc.sent == 0 and seg.left == 0 and not seg.acc.counters
        # A key pressed within a second of the last is no step; a stop keeps whatever the step measured
        # (a partial step, recorded as such and never the best one).
        brief = (now - seg.t0_ns) / 1e9 < MIN_STEP_S and ended_by != "stop"
        if seg.phase != "measure" or (ended_by in MANUAL_ENDS and (brief or nothing)):
            if seg.phase == "measure" and ended_by in MANUAL_ENDS and brief:
                held = (now - seg.t0_ns) / 1e9
                self.dropped.append(
                    f"step {self.index + 1} dropped: a key cut it {held:.1f} s into its window "
                    f"(under {MIN_STEP_S:g} s is no step)"
                )
            self._forget(seg)
            return None
        self.index += 1
        self.link.poke()
        self.run_measured_s += (now - seg.t0_ns) / 1e9
        if not hold and ended_by != "stop":
            seg.cut_ns = now
        seg.end = StepEnd(
            ended_by=ended_by,
            mode=self.mode,
            level=self.level,
            rate_rps=self.rate,
            arrival=self.arrival,
            marks=tuple(self.marks),
            warmup_s=(self.warm_end_ns - self.t0_step_ns) / 1e9,
            duration_s=(now - self.t0_step_ns) / 1e9,
            close_deadline_ns=now + int(LATE_RESULTS_S * 1e9),
            held=hold,
            repeat=self.repeat,
            cache=self.step_cache,
            settling_s=self.step_settled_s,
        )
        if hold:
            self.closing = seg
        return seg

    def cut_closing(self) -> bool:
        """The load changes while a planned step still holds for its requests: they are carried into the
        next load. False when no step was closing."""
        seg = self.closing
        if seg is None:
            return False
        seg.cut_ns = self.clock()
        self.closing = None
        return True

    def worker_lost(self, wid: int) -> None:
        """Worker ``wid`` died: every window that still waited for it (the step measuring, one closing, one
        waiting for late results) is flagged, with what it had in flight; so is each window until the next
        step spreads the load over the workers left."""
        self.short_of_load = True
        for seg in self.segments.values():
            if seg.phase == "measure" and (wid in seg.pending or seg is self.current):
                seg.lose(wid)

    def stopping(self) -> None:
        """The run stops: the current step ends (a partial step); a planned step still holding for its
        requests is flagged ``closing_cut`` (they are cancelled or finish under no load, not its own)."""
        if self.current is not None:
            self.end("stop")
        if self.closing is not None and self.closing.closed_ns is None:
            self.closing.flags.add("closing_cut")

    def shown_index(self) -> int:
        """The step the header names: the closing one while it holds, else the current (or next) one."""
        if self.current is None and self.closing is not None:
            return self.closing.step
        if self.current is None and self.summaries and self.summaries[-1].index == self.index - 1:
            return self.index - 1  # between steps (idle, finished): the last one, until the next begins
        return self.index

    def closing_left(self) -> int:
        return self.closing.left if self.closing is not None else 0

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
        now = self.clock()
        return any(not self._settled(seg, now) for seg in self.segments.values())

    def complete(self, force: bool = False) -> list[Segment]:
        """The ended windows ready to report, in order (all of them with ``force``), taken off the book."""
        now = self.clock()
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
        if self.closing is seg:
            self.closing = None
        quality = None
        if self.quality is not None and seg.end is not None:  # answer probes, and the load they were under
            end = seg.end
            level = end.rate_rps if end.mode == "open" else end.level
            quality = self.quality.step(seg.probes, {"reference_level": level, "reference_mode": end.mode})
        summary = seg.summary(slo, self.link, self.fleet.config.target, quality)
        before = [StepFigures.of(s) for s in self.summaries]
        doubt = self.link.window_doubt(summary.window_t0_ns, summary.window_t1_ns)
        diagnosis = diagnose(StepFigures.of(summary, doubt=doubt), before)
        # an answer change (--quality) named beside the limit: the agreement's interval below the clause or 1
        diagnosis = with_answers(diagnosis, summary.quality, slo.quality_agree_min)
        summary = replace(summary, diagnosis=diagnosis)
        self.summaries.append(summary)
        self.best = best_step(self.summaries)
        return summary

"""The controller: one run's orchestration on its own asyncio loop — setup, the operator's commands, the
main loop (messages, timers, health, snapshots) and shutdown.

It owns the run's parts and wires them: ``Fleet`` (the worker processes), ``Steps`` (windows and step
lines), ``LiveFigures`` (what the deltas say about now), ``TelemetryLink`` (the server's side),
``SnapshotBuilder``, ``Vitals`` (whether the run can go on) and the record. ``loadgen.run.engine.Engine``
runs it in a thread of its own.

``Controller(config, publish, fleet=, clock=)``: the workers (by default processes, or Ray actors with
``--ray``) and the monotonic clock in ns that times the steps are given to it; unit tests give fakes of both
and turn its main loop by hand (``start_load``, then ``pump`` and ``check_timers``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from loadgen.analysis.quality import reference_note
from loadgen.config import FINAL_STATES, EndedBy, SetupError
from loadgen.metrics.slices import decided, precise
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.fleet import Fleet, ProcessFleet
from loadgen.run.live import LiveFigures
from loadgen.run.live_search import steer
from loadgen.run.protocol import (
    ChangeLevel,
    ControlCommand,
    Mark,
    NextStep,
    Pause,
    PauseLoad,
    Resume,
    ResumeLoad,
    ResumeSearch,
    SetAuto,
    SetLevel,
    SetMode,
    SetRate,
    StartSearch,
    Stop,
    StopSearch,
    WorkerDelta,
    WorkerFatal,
    WorkerMessage,
    WorkerReady,
)
from loadgen.run.ray_fleet import RayFleet
from loadgen.run.recording import RunRecord, cost_keys, timeline
from loadgen.run.setup import prepare
from loadgen.run.snapshots import SnapshotBuilder
from loadgen.run.state import Load, RunStatus
from loadgen.run.steps import NO_TIMER_NS, TELEMETRY_WAIT_S, Segment, Steps
from loadgen.run.telemetry_link import TelemetryLink
from loadgen.run.vitals import Vitals
from loadgen.run.wheel import Wheel
from loadgen.snapshot import Snapshot
from loadgen.target.cache import reset_prefix_cache

PRECISION_CHECK_NS = 1_000_000_000  # --precision: how often a step's intervals are read while it measures
Clock = Callable[[], int]
MONOTONIC: Clock = time.monotonic_ns
Publish = Callable[[Snapshot], None]


def default_fleet(config: RunConfig) -> Fleet:
    return RayFleet(config) if config.ray is not None else ProcessFleet(config)


class Controller:
    """One run: ``run()`` on the controller's loop; ``command()`` on that loop too (the engine hands them
    over); ``publish`` receives each snapshot."""

    def __init__(
        self, config: RunConfig, publish: Publish, *, fleet: Fleet | None = None, clock: Clock = MONOTONIC
    ) -> None:
        self.config, self.publish, self.clock = config, publish, clock
        self.slo = config.slo if config.slo is not None else config.profile.slo
        self.status, self.load = RunStatus(model=config.target.model, t0_ns=clock()), Load.of(config)
        self.fleet = fleet if fleet is not None else default_fleet(config)
        self.link = TelemetryLink()
        self.steps = Steps(self.load, self.fleet, self.link, self.status.t0_ns, clock)
        self.live = LiveFigures(config.rolling_s, self.status.t0_ns)
        self.snapshots = SnapshotBuilder(config, self.slo)
        self.wheel = Wheel(config, self.status, self.load, self.steps, self.fleet, self.live)
        self.wheel.searching.write = lambda kind, data: self.record.event(kind, data)
        self.vitals = Vitals(
            config, self.status, self.fleet, self.live, lambda note: self.command(Mark(note))
        )
        self.precision_checked_ns = 0
        self.record = RunRecord()  # none until setup opens one (--out)
        self.stop_requested: bool | None = None  # None, or the cancel flag of the stop asked for
        self.wake = asyncio.Event()
        self.answer_due = False  # a command was applied: the next turn publishes it, not the next tick

    def worker_pids(self) -> list[int]:
        return self.fleet.pids()

    # ---- commands ---------------------------------------------------------------------------------------
    def command(self, cmd: ControlCommand) -> None:
        load = self.load
        match cmd:
            case Stop(cancel=cancel):
                if self.stop_requested is None:
                    self.stop_requested = cancel
            case _ if not (self.status.live or self.wheel.idle_after_plan):
                return
            case Mark(note=note):
                self._mark(note)
            case SetAuto(on=on):
                load.set_auto(on)
                if self.status.state == "running":
                    self.steps.restart_timer()
            case Pause():
                self._pause()
            case Resume():
                self._resume()
            case SetLevel() | ChangeLevel() | SetRate() | SetMode() | NextStep():
                steer(self.wheel, cmd)  # a level key during a search is the operator's probe
            case StartSearch() | ResumeSearch() | StopSearch():
                steer(self.wheel, cmd)
        self.record.command(cmd, load, self.status.elapsed_s(self.clock()), self.steps.shown_index() + 1)
        self.say_dropped()
        self.answer_due = True
        self.wake.set()

    def _mark(self, note: str) -> None:
        t = self.status.elapsed_s(self.clock())
        self.status.marks.append((t, note))
        self.steps.marks.append(note)
        step = self.steps.shown_index() + 1  # the step the header names (records count from 1)
        self.record.event("mark", {"elapsed_s": round(t, 3), "note": note, "step": step})

    def _pause(self) -> None:
        if self.status.pause():
            self.fleet.send_all(PauseLoad())
            self.load.set_paused(True)
            self.wheel.cut("pause")
            self.wheel.settling = False

    def _resume(self) -> None:
        if self.status.resume():
            self.load.set_paused(False)
            self.fleet.send_all(ResumeLoad())
            self.wheel.start()

    # ---- setup ------------------------------------------------------------------------------------------
    async def _setup(self) -> None:
        self.status.fleet = await self.fleet.place()  # where the workers run: the record's header says
        sizer, self.record = await prepare(self.config, self.status, self.load, self.slo, self.link)
        await self._cache_policy()
        self.fleet.spawn(self.status.model, sizer)
        await self.fleet.wait_ready(self._on_message, lambda: self.stop_requested is not None)

    async def _cache_policy(self) -> None:
        """--reset-prefix-cache: once now (run), or before every step's warm-up (step)."""
        config, runtime = self.config, self.status.runtime
        if config.reset_prefix_cache == "run":
            reset = await reset_prefix_cache(config.target, runtime)
            self.record.event("cache_reset", {"done": reset.done, "how": reset.how})
            self.steps.cache = ("reset", reset.how) if reset.done else ("kept", reset.how)
            self.wheel.cache_not_reset(reset)
        elif config.reset_prefix_cache == "step":
            self.wheel.reset_cache = lambda: reset_prefix_cache(config.target, runtime)

    # ---- main loop --------------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        status = self.status
        self._publish_snapshot()
        try:
            await self._setup()
        except Exception as exc:
            status.fail(str(exc) if isinstance(exc, SetupError) else f"{type(exc).__name__}: {exc}")
            await self._shutdown(cancel=True)
            return self.outcome()
        self.start_load()
        await self._loop()
        # A finished plan's last step closed under its own load before the plan finished: what is still in
        # flight was sent after it and counts nowhere. A stop asked for says whether to cancel.
        cancel = self.stop_requested if self.stop_requested is not None else True
        if status.state in ("running", "paused") and self.stop_requested is not None:
            status.stop()
        await self._shutdown(cancel=cancel)
        return self.outcome()

    def start_load(self) -> None:
        self.status.run()
        self.load.start_plan()
        self.wheel.start()

    async def _loop(self) -> None:
        period_ns = int(1e9 / max(0.5, self.config.snapshot_hz))
        deadline = self.clock() + period_ns
        while self.stop_requested is None and (
            self.status.state in ("running", "paused") or self.wheel.idle_after_plan
        ):
            # Wake at the next boundary too, not only at the next snapshot: a warm-up or step end checked
            # only on snapshot ticks would land up to a tick late and shorten or stretch the windows.
            wake_ns = min(deadline, self._next_timer_ns())
            timeout = max(0.0, (wake_ns - self.clock()) / 1e9)
            try:
                await asyncio.wait_for(self.wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self.wake.clear()
            self.pump()
            now = self.clock()
            self.check_timers(now)
            if now >= deadline:
                deadline += period_ns * max(1, (now - deadline) // period_ns + 1)
                self.vitals.check(now)
                self.say_telemetry()
                self._publish_snapshot()
            elif self.answer_due:  # the operator sees a key's effect now, not up to a tick later
                self._publish_snapshot()

    def _next_timer_ns(self) -> int:
        return self.wheel.next_timer_ns() if self.status.state == "running" else NO_TIMER_NS

    def check_timers(self, now: int) -> None:
        if self.status.state != "running":
            return
        self.steps.end_warmup(now)
        if self.steps.step_due(now) and self.steps.current is not None:
            self.wheel.window_due()
        elif (early := self._ends_early(now)) is not None:
            self.wheel.window_due(early)
        self.wheel.check_settled()

    def _ends_early(self, now: int) -> EndedBy | None:
        """A planned step measuring now ends before its length (checked once a second: reading the intervals
        costs a few ms): --precision once its figures are precise enough ("precision"); a probe of the SLA
        search (or the probe above a followed knee) once its intervals decide the SLO, met or missed, or pin
        its figures at their limits, and a step holding the knee it follows once they decide a miss."""
        search, plan, seg = self.wheel.search, self.load.plan, self.steps.current
        searching = search is not None and not search.holding  # --hold's step runs its length
        following = search is None and self.wheel.searching.following is not None
        judged, above = searching or following, following and self.wheel.searching.above is not None
        if plan is None or self.steps.end_ns is None or (plan.precision_pct is None and not judged):
            return None
        if now < self.precision_checked_ns + PRECISION_CHECK_NS:
            return None
        self.precision_checked_ns = now  # during the warm-up too: the first read is 0-1 s into the window
        if seg is None or seg.phase != "measure":
            return None
        verdict = decided(seg.slices, now, self.slo) if judged else None
        if verdict == "missed" or ((searching or above) and verdict in ("met", "at_limit")):
            return "decided"
        if plan.precision_pct is not None and precise(seg.slices, now, plan.precision_pct, self.slo):
            return "precision"
        return None

    def pump(self) -> None:
        for msg in self.fleet.drain():
            self._on_message(msg)
        self._report_complete()

    def _on_message(self, msg: WorkerMessage) -> None:
        match msg:
            case WorkerReady(worker_id=wid):
                self.fleet.alive.add(wid)
            case WorkerFatal(worker_id=wid, message=text):
                self.fleet.fatal.append(text)
                self.steps.worker_lost(wid)
                if (lost := self.fleet.loss_event(wid)) is not None and self.status.live:
                    self.record.event("worker_lost", lost)
                    self.status.warnings.append(f"worker {wid} lost: {text}")  # headless says it at once
                    self._mark(f"worker {wid} lost ({lost['carried']} lost)")
                self.live.lose(wid, text)
            case WorkerDelta(worker_id=wid, window=window, closed=closed, current=current, delta=delta):
                self.steps.fold(wid, window, delta, closed, current, msg.in_flight)
                self.live.add(wid, delta, current, msg.first_waits, self.clock())
                self.record.detail.add(window, msg.rows)  # --save-requests-detail

    def _report_complete(self, force: bool = False) -> None:
        for seg in self.steps.complete(force):
            self._report(seg)

    def _report(self, seg: Segment) -> None:
        summary = self.steps.summarize(seg, self.slo)
        if summary is None:
            return
        extra = timeline(summary, self.status.t0_ns, self.snapshots) | cost_keys(summary, self.config)
        extra |= self.fleet.step_keys(seg.judges)  # Ray: each host's health, the flushes' round trips
        self.record.step(summary, seg.acc.encoded(), extra, seg.seg_id)  # and the per-request rows, if asked
        say_after_step(self, summary.index + 1, summary.quality)  # telemetry lost, references above 1 stream
        self.wheel.early_stop(summary)
        self.wheel.reported(summary, seg.end is not None and seg.end.held)
        if self.wheel.finished_search is not None:
            self.record.event("find_max", self.wheel.finished_search.event())
            self.wheel.finished_search = None

    def say_telemetry(self, step: int | None = None) -> None:
        """Telemetry lost mid-run (a /metrics dropped, or gone slow, trickling or junk after good answers),
        said once per source: a toast, a snapshot warning (headless stderr) and an event of ``step`` (by
        default the step the header names) in the record."""
        for text in self.link.new_drops():
            self.wheel.notify(text)
            self.status.warnings.append(text)
            self.record.event("warning", {"note": text, "step": step or self.steps.shown_index() + 1})

    def say_dropped(self) -> None:
        """A step a key cut under a second into its window is no step (``Steps.end``): said, not silent."""
        for text in self.steps.dropped:
            self.wheel.notify(text)
            self.record.event("warning", {"note": text, "step": self.steps.shown_index() + 1})
        self.steps.dropped.clear()

    # ---- snapshot ---------------------------------------------------------------------------------------
    def _publish_snapshot(self) -> None:
        snap = self.snapshots.build(
            self.clock(),
            self.status,
            self.load,
            self.steps,
            self.live,
            self.link,
            self.record.path,
            self.wheel,
        )
        self.answer_due = False
        self.publish(snap)

    # ---- shutdown ---------------------------------------------------------------------------------------
    async def _shutdown(self, cancel: bool) -> None:
        # Without cancel the streams in flight finish, and their results land in the step that sent them.
        self.steps.stopping()
        await self.fleet.stop(cancel, self._on_message)
        if not cancel:  # a finished plan: let the poke at its last window's end answer (bounded)
            until = time.monotonic() + TELEMETRY_WAIT_S
            while time.monotonic() < until and self.steps.unsettled():
                if not await self.link.wait_changed(max(0.0, until - time.monotonic())):
                    break
        self._report_complete(force=True)
        self.fleet.join()
        await self.link.stop()
        self._close_record()
        self.status.stop()
        self._publish_snapshot()

    def _close_record(self) -> None:
        state = self.status.state
        self.record.close(
            {
                "state": state if state != "running" else "stopped",
                "message": self.status.message,
                "steps": len(self.steps.summaries),
                "best_step": None if self.steps.best is None else self.steps.best + 1,  # counted from 1
                "elapsed_s": round(self.status.elapsed_s(self.clock()), 3),
                "series": self.snapshots.take_series(),  # the points after the last step line's
            }
        )

    def outcome(self) -> RunOutcome:
        state = self.status.state
        return RunOutcome(
            state=state if state in FINAL_STATES else "stopped",
            steps=tuple(self.steps.summaries),
            best_step=self.steps.best,
            record_path=self.record.path,
            message=self.status.message,
            unreachable=self.status.unreachable,
            usage=self.status.usage,
        )

    def crashed(self, exc: BaseException) -> RunOutcome:
        """The outcome when the controller itself broke (a bug): failed, with what was finished."""
        return RunOutcome("failed", tuple(self.steps.summaries), None, self.config.out, repr(exc))


def say_after_step(ctl: Controller, step: int, quality: Mapping[str, object]) -> None:
    """What a reported step says beside its line: telemetry lost during it and not said yet (as its own),
    and answer references it took above one stream (a search's first probe, a plan that starts higher),
    said once: a toast, headless stderr and the record's event."""
    ctl.say_telemetry(step)
    text = reference_note(quality)
    if text is not None:
        ctl.wheel.notify(text)
        ctl.status.warnings.append(text)
        ctl.record.event("warning", {"note": text, "step": step})

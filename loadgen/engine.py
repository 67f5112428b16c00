"""The controller: owns the worker processes, the ramp plan, steps and warm-up, the SLO watch and the record.

One engine, three faces: the Textual console, the headless CLI and Python code all drive it through the
same thread-safe commands and receive the same immutable ``Snapshot`` objects. Nothing here knows which
face is attached.

    engine = Engine(config, on_snapshot=print)
    engine.start()
    engine.set_level(8)
    outcome = engine.wait()

The controller runs in a thread of its own with its own asyncio loop (so a UI's event loop is never
blocked by it); the streams run in worker processes (``loadgen.worker``). Windows are cut exactly: at a
boundary (warm-up end, step end) the controller asks every worker to flush, and each worker's deltas before
its flush reply belong to the old window, the ones after to the new.
"""

from __future__ import annotations

import asyncio
import collections
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from loadgen.config import SLO, RampPlan, RunConfig, RunOutcome, SetupError
from loadgen.snapshot import (
    ClientHealth,
    SeriesPoint,
    ServerTelemetry,
    SLOVerdict,
    Snapshot,
    StepSummary,
    WindowStats,
)
from loadgen.worker import CLIENT_BOUND_LAG_MS

__all__ = ["Engine", "RampPlan", "RunConfig", "RunOutcome", "SetupError"]  # until the callers import config

CLIENT_BOUND_CPU_PCT = 90.0
CLIENT_BOUND_WAIT_PCT = 10.0  # of wall time spent ready to run but not given a core (Linux schedstat)
UNREACHABLE_AFTER_S = 10.0
LATE_RESULTS_S = 600.0  # how long a finished step waits for the results of requests it sent
DRAIN_S = 60.0  # how long a graceful stop lets the streams in flight finish
RECENT_HEALTH = 12  # health reports (about 3 s) behind the live client-bound flag
TELEMETRY_WAIT_S = 6.0  # how long a step's record waits for the server sample taken at its end


class _BoundJudge:
    """Whether one worker's health over a span (a step, the last seconds) says its timings may suffer.

    Loop lag is judged on all of the span's 50 ms samples: over ``CLIENT_BOUND_LAG_MS`` in more than 1 %
    of them (and at least twice), i.e. the span's p99 — one hiccup of a shared machine is not a client-
    bound step. CPU shares arrive already taken over spans of at least a second.
    """

    __slots__ = ("n", "over", "lag_max", "cpu_max", "wait_max")

    def __init__(self) -> None:
        self.n = self.over = 0
        self.lag_max = self.cpu_max = self.wait_max = 0.0

    @classmethod
    def of(cls, healths: Iterable[Mapping[str, float]]) -> _BoundJudge:
        judge = cls()
        for health in healths:
            judge.add(health)
        return judge

    def add(self, health: Mapping[str, float]) -> None:
        n = int(health.get("lag_n", 0))
        self.n += n
        self.over += int(health.get("lag_over", 0))
        if n:
            self.lag_max = max(self.lag_max, float(health.get("loop_lag_ms_max", 0.0)))
        self.cpu_max = max(self.cpu_max, float(health.get("cpu_pct", 0.0)))
        self.wait_max = max(self.wait_max, float(health.get("runq_wait_pct", 0.0)))

    def reason(self) -> str | None:
        if self.cpu_max > CLIENT_BOUND_CPU_PCT:
            return f"load worker at {self.cpu_max:.0f}% CPU: add --workers"
        if self.over >= 2 and self.over > 0.01 * self.n:
            share = 100.0 * self.over / self.n
            lag = f"loop lag over {CLIENT_BOUND_LAG_MS:g} ms in {share:.0f}% of samples, max {self.lag_max:.0f} ms"
            if self.wait_max > CLIENT_BOUND_WAIT_PCT:
                return (
                    f"load worker waited for a CPU {self.wait_max:.0f}% of the time ({lag}): other processes "
                    "hold this machine's cores; run ramp on another host"
                )
            return f"worker event {lag}: timings may read high"
        return None


@dataclass
class _Segment:
    """A window that deltas are folded into: one step's warm-up or its measurement."""

    seg_id: int
    step: int
    phase: str  # "warmup" | "measure"
    t0_ns: int
    acc: Any
    t1_ns: int | None = None
    judges: dict[int, _BoundJudge] = field(default_factory=dict)  # per worker: its health over the window
    pending: set[int] = field(default_factory=set)  # workers whose flush reply has not come yet

    def bound_reason(self) -> str | None:
        """Why this window's timings may read high (the client-bound flag), or None."""
        for wid in sorted(self.judges):
            reason = self.judges[wid].reason()
            if reason:
                return reason
        return None


class Engine:
    def __init__(self, config: RunConfig, on_snapshot: Callable[[Snapshot], None] | None = None) -> None:
        self.config = config
        self.on_snapshot = on_snapshot
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ctl: _Controller | None = None
        self._thread: threading.Thread | None = None
        self._early: list[tuple[str, tuple[Any, ...]]] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._outcome: RunOutcome | None = None
        self._latest: Snapshot | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        # Start multiprocessing's resource tracker now, while this process's stderr is still a real file:
        # under a running Textual app sys.stderr has no file descriptor, and spawning it then fails.
        try:
            from multiprocessing import resource_tracker

            resource_tracker.ensure_running()
        except Exception:
            pass
        self._thread = threading.Thread(target=self._thread_main, name="ramp-controller", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> RunOutcome | None:
        self._done.wait(timeout)
        return self._outcome

    def stop(self, cancel: bool = True) -> None:
        self._command("stop", cancel)

    def latest(self) -> Snapshot | None:
        return self._latest

    def worker_pids(self) -> list[int]:
        ctl = self._ctl
        return [p.pid for p in ctl.procs if p.pid is not None] if ctl is not None else []

    @property
    def done(self) -> bool:
        return self._done.is_set()

    # ---- commands (thread-safe, return at once) -------------------------------------------------
    def set_level(self, level: int) -> None:
        self._command("set_level", int(level))

    def change_level(self, delta: int) -> None:
        self._command("change_level", int(delta))

    def set_rate(self, rate_rps: float) -> None:
        self._command("set_rate", float(rate_rps))

    def set_mode(self, mode: str) -> None:
        if mode not in ("closed", "open"):
            raise ValueError(f"mode must be 'closed' or 'open', not {mode!r}")
        self._command("set_mode", mode)

    def pause(self) -> None:
        self._command("pause")

    def resume(self) -> None:
        self._command("resume")

    def next_step(self) -> None:
        self._command("next_step")

    def set_auto(self, on: bool) -> None:
        self._command("set_auto", bool(on))

    def mark(self, note: str) -> None:
        self._command("mark", str(note))

    def _command(self, name: str, *args: Any) -> None:
        with self._lock:
            if self._loop is None or self._ctl is None:
                self._early.append((name, args))
                return
            loop, ctl = self._loop, self._ctl
        if not loop.is_closed():
            loop.call_soon_threadsafe(ctl.command, name, args)

    # ---- the controller thread ------------------------------------------------------------------
    def _publish(self, snap: Snapshot) -> None:
        self._latest = snap
        if self.on_snapshot is not None:
            try:
                self.on_snapshot(snap)
            except Exception:  # a face's bug must not kill the measurement
                pass

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        ctl = _Controller(self.config, self._publish)
        with self._lock:
            self._loop, self._ctl = loop, ctl
            early, self._early = self._early, []
        for name, args in early:
            loop.call_soon(ctl.command, name, args)
        try:
            self._outcome = loop.run_until_complete(ctl.run())
        except BaseException as exc:  # pragma: no cover - last resort, keeps the face informed
            self._outcome = RunOutcome("failed", tuple(ctl.steps), None, ctl.record_path, repr(exc))
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
            self._done.set()


class _Controller:
    def __init__(self, config: RunConfig, publish: Callable[[Snapshot], None]) -> None:
        from loadgen.metrics import Accumulator, RollingWindow

        self.config = config
        self.publish = publish
        self._Accumulator = Accumulator
        self.profile = config.profile
        self.slo: SLO = config.slo or getattr(config.profile, "slo", None) or SLO()
        self.plan = config.plan
        self.mode = config.mode
        self.level = int(config.level)
        self.rate = float(config.rate_rps)
        self.paused = False
        self.auto = config.plan is not None
        self.state = "starting"
        self.message = ""
        self.unreachable = False
        self.model = config.target.model
        self.runtime: str | None = None
        self.runtime_version: str | None = None
        self.t0_ns = time.monotonic_ns()
        self.seq = 0
        self.stop_requested: bool | None = None  # None, or the cancel flag of the stop asked for
        self.wake = asyncio.Event()
        self.procs: list[Any] = []
        self.cmd_queues: list[Any] = []
        self.delta_q: Any = None
        self.alive: set[int] = set()
        self.fatal: list[str] = []
        # windows
        self.segments: dict[int, _Segment] = {}
        self.next_seg = 0
        self.current: _Segment | None = None
        self.run_acc = Accumulator()
        self.run_measured_s = 0.0
        self.rolling = RollingWindow(config.rolling_s)
        self.step_index = -1
        self.plan_index = 0
        self.step_t0_ns = 0
        self.step_warm_end_ns = 0
        self.step_end_ns: int | None = None
        self.step_level = 0
        self.step_rate: float | None = None
        self.step_marks: list[str] = []
        self.steps: list[StepSummary] = []
        self.step_starts_s: list[float] = []
        self.best: int | None = None
        self.marks: list[tuple[float, str]] = []
        self.recent_errors: collections.deque[str] = collections.deque(maxlen=8)
        self.warnings: list[str] = []
        self.gauges: dict[int, tuple[int, int]] = {}  # worker -> (in_flight, queued)
        self.health: dict[int, dict[str, float]] = {}
        self.recent_health: dict[int, collections.deque[dict[str, float]]] = {}  # the live flag judges these
        self.timeline: collections.deque[tuple[int, int, int, int, int]] = collections.deque()
        self.series: collections.deque[SeriesPoint] = collections.deque(maxlen=900)
        self.last_series_ns = 0
        self.last_ok_ns = time.monotonic_ns()
        self.record: Any = None
        self.record_path: str | None = config.out
        self.hub: Any = None
        self.server: ServerTelemetry | None = None
        self.conditions: dict[str, Any] = {}

    # ---- commands -------------------------------------------------------------------------------
    def command(self, name: str, args: tuple[Any, ...]) -> None:
        if name == "stop":
            if self.stop_requested is None:
                self.stop_requested = bool(args[0])
            self.wake.set()
            return
        if self.state not in ("running", "paused", "starting"):
            return
        if name == "mark":
            t = (time.monotonic_ns() - self.t0_ns) / 1e9
            self.marks.append((t, args[0]))
            self.step_marks.append(args[0])
            if self.record is not None:
                self.record.write_event(
                    "mark", {"elapsed_s": round(t, 3), "note": args[0], "step": self.step_index}
                )
        elif name == "set_auto":
            self.auto = bool(args[0])
            if self.state == "running":
                self.step_end_ns = self._auto_end(self.step_t0_ns)
        elif name == "pause":
            if self.state == "running":
                self._send_all(("pause",))
                self.paused = True
                self.state = "paused"
                self._end_step("pause")
        elif name == "resume":
            if self.state == "paused":
                self.paused = False
                self.state = "running"
                self._send_all(("resume",))
                self._begin_step()
        elif name == "set_level":
            self._change(level=max(0, int(args[0])))
        elif name == "change_level":
            base = self.level if self.mode == "closed" else self.level
            self._change(level=max(0, base + int(args[0])))
        elif name == "set_rate":
            self._change(rate=max(0.0, float(args[0])))
        elif name == "set_mode":
            if args[0] != self.mode:
                if args[0] == "open" and self.rate <= 0:
                    self.rate = 1.0
                self.mode = args[0]
                self._change(mode_switch=True)
        elif name == "next_step":
            self._advance(ended_by="next")
        self.wake.set()

    def _change(self, level: int | None = None, rate: float | None = None, mode_switch: bool = False) -> None:
        if level is not None:
            self.level = level
        if rate is not None:
            self.rate = rate
        if self.state == "starting":
            return
        # A manual change ends the current step and starts a new one at the new level; a plan is left.
        self.plan = None if (level is not None or rate is not None) else self.plan
        if self.state == "paused":
            return
        self._end_step("level" if not mode_switch else "mode")
        self._begin_step()

    # ---- setup ----------------------------------------------------------------------------------
    async def _setup(self) -> None:
        from loadgen.probe import probe
        from loadgen.workload import calibrate_sizer

        target = self.config.target
        info = await probe(target)
        if not info.reachable:
            self.unreachable = True
            raise SetupError(info.error)
        if not self.model or self.model == "auto":
            profile_model = getattr(self.profile, "model", "") or ""
            self.model = profile_model if profile_model not in ("", "auto") else (info.model or "")
        if not self.model:
            raise SetupError(f"{target.base_url}/v1/models lists no model: pass --model NAME")
        self.runtime, self.runtime_version = info.runtime, info.runtime_version
        # The resolved API (flags over profile, merged once into the target) is what the workers speak.
        sizer = await calibrate_sizer(target, self.model, self.config.api)
        if self.config.telemetry or self.config.gpu_cmd or self.config.nvml or self.config.dcgm_url:
            await self._start_telemetry()
        self._check_context(getattr(info, "max_model_len", None))
        self._open_record(info)
        for text in self.warnings:
            if self.record is not None:
                self.record.write_event("warning", {"note": text})
        self._spawn_workers(sizer)
        await self._wait_ready()

    def _check_context(self, max_model_len: int | None) -> None:
        """Warn before the load starts when the profile asks for more context than the server serves."""
        from loadgen.profile import Profile, context_overflow

        if not isinstance(max_model_len, int) or not isinstance(self.profile, Profile):
            return
        found = context_overflow(self.profile, max_model_len)
        if found is None:
            return
        share, largest = found
        text = (
            f"profile '{self.profile.name}': about {share:.1%} of requests ask for more than the server's "
            f"max_model_len {max_model_len:,} (prompt + max_tokens up to {largest:,}); the server will reject "
            "them as errors. Use a profile that fits, or serve a longer context."
        )
        self.warnings.append(text)

    async def _start_telemetry(self) -> None:
        try:
            from loadgen.telemetry import TelemetryHub, build_sources
        except ImportError:
            return
        env = self.config.target.api_key_env
        api_key = os.environ.get(env) if env else None  # never stored: handed to the pollers only
        sources = build_sources(
            self.config.target.base_url if self.config.telemetry else None,
            metrics=self.config.telemetry,
            gpu_cmd=self.config.gpu_cmd,
            nvml=self.config.nvml,
            dcgm_url=self.config.dcgm_url,
            api_key=api_key,
        )
        if not sources:
            return
        from loadgen.telemetry import discover

        conditions: dict[str, Any] = {}
        if self.config.telemetry:
            try:
                conditions = dict(await discover(self.config.target.base_url, api_key=api_key))
            except Exception:  # discovery is best effort: the run does not depend on it
                conditions = {}
            conditions.pop("reachable", None)
            conditions.pop("error", None)
        # The server's "last N s" figures cover the client's rolling window.
        self.hub = TelemetryHub(sources, conditions=conditions, hist_window_s=self.config.rolling_s)
        await self.hub.start()
        # A moment for the first scrape, so the record's header has the GPU and server conditions.
        await self.hub.ready(3.0)
        tags = dict(self.config.tags)
        if tags:
            self.hub.update_conditions(tags)

    def _open_record(self, info: Any) -> None:
        if not self.config.out:
            return
        import platform

        from loadgen.record import RecordWriter

        tags = dict(self.config.tags)
        conditions: dict[str, Any] = {}
        if self.hub is not None:
            try:
                conditions = dict(self.hub.conditions())
            except Exception:
                conditions = {}
        profile = self.profile
        plan = self.plan
        header = {
            "model": self.model,
            "model_revision": tags.get("revision") or tags.get("model_revision"),
            "runtime": self.runtime,
            "runtime_version": self.runtime_version,
            "max_model_len": getattr(info, "max_model_len", None),
            "tags": tags,
            "server_conditions": conditions,
            "profile": getattr(profile, "name", None),
            "profile_hash": getattr(profile, "content_hash", None),
            "profile_content": profile.to_dict() if hasattr(profile, "to_dict") else None,
            "target_url": self.config.target.base_url,
            "api": self.config.api,
            "mode": self.mode,
            "arrival": self._arrival_label(),
            "workers": self.config.workers,
            "transport": self.config.transport,
            "plan": None
            if plan is None
            else {
                "levels": list(plan.levels),
                "step_s": plan.step_s,
                "warmup_s": plan.warmup_s,
                "early_stop": plan.early_stop,
            },
            "slo": {k: getattr(self.slo, k) for k in self.slo.__slots__},  # type: ignore[attr-defined]
            "cold_start": self.config.cold,
            "host": platform.node(),
        }
        self.conditions = header
        os.makedirs(os.path.dirname(os.path.abspath(self.config.out)), exist_ok=True)
        self.record = RecordWriter(self.config.out)
        self.record.write_header(header)
        for kind, data in self.config.record_events:
            self.record.write_event(kind, data)

    def _spawn_workers(self, sizer: Any) -> None:
        from loadgen.worker import WorkerSpec, worker_main

        ctx = mp.get_context("spawn")
        self.delta_q = ctx.Queue()
        n = max(1, int(self.config.workers))
        max_conn = self.config.max_connections or 4096
        for wid in range(n):
            spec = WorkerSpec(
                worker_id=wid,
                target=replace(self.config.target, model=self.model),
                profile=self.profile,
                sizer=sizer,
                model=self.model,
                seed=self.config.seed,
                transport=self.config.transport,
                max_connections=max_conn,
            )
            cq = ctx.Queue()
            proc = ctx.Process(
                target=worker_main, args=(spec, cq, self.delta_q), name=f"ramp-worker-{wid}", daemon=True
            )
            proc.start()
            self.procs.append(proc)
            self.cmd_queues.append(cq)

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60.0
        want = set(range(len(self.procs)))
        while self.alive != want:
            for item in await asyncio.to_thread(self._drain_blocking, 0.2):
                self._on_item(item)
            if self.fatal:
                raise SetupError("load worker failed: " + self.fatal[0])
            if time.monotonic() > deadline:
                raise SetupError("load workers did not start within 60 s")
            if self.stop_requested is not None:
                raise SetupError("stopped before the load started")
            for proc in self.procs:
                if not proc.is_alive() and proc.exitcode not in (None, 0):
                    raise SetupError(f"load worker exited with code {proc.exitcode}")

    def _drain_blocking(self, timeout: float) -> list[Any]:
        import queue

        items = []
        try:
            items.append(self.delta_q.get(timeout=timeout))
        except queue.Empty:
            return items
        from loadgen.worker import drain

        items.extend(drain(self.delta_q))
        return items

    # ---- main loop ------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        self._publish_snapshot()
        try:
            await self._setup()
        except SetupError as exc:
            self.state, self.message = "failed", str(exc)
            await self._shutdown(cancel=True)
            return self._outcome()
        except Exception as exc:
            self.state, self.message = "failed", f"{type(exc).__name__}: {exc}"
            await self._shutdown(cancel=True)
            return self._outcome()
        self.state = "running"
        self.plan_index = 0
        if self.plan is not None and self.plan.levels:
            self._apply_plan_level(0)
        self._begin_step()
        period_ns = int(1e9 / max(0.5, self.config.snapshot_hz))
        deadline = time.monotonic_ns() + period_ns
        while self.stop_requested is None and self.state in ("running", "paused"):
            # Wake at the next boundary too, not only at the next snapshot: a warm-up or step end checked
            # only on snapshot ticks would land up to a tick late and shorten or stretch the windows.
            wake_ns = min(deadline, self._next_timer_ns())
            timeout = max(0.0, (wake_ns - time.monotonic_ns()) / 1e9)
            try:
                await asyncio.wait_for(self.wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self.wake.clear()
            self._pump()
            now = time.monotonic_ns()
            self._check_timers(now)
            if now >= deadline:
                deadline += period_ns * max(1, (now - deadline) // period_ns + 1)
                self._check_health(now)
                self._publish_snapshot()
        # A finished plan drains: its last step's requests complete and count. A stop asked for says itself.
        cancel = self.stop_requested if self.stop_requested is not None else self.state != "finished"
        if self.state in ("running", "paused"):
            self.state = "stopped" if self.stop_requested is not None else self.state
        await self._shutdown(cancel=cancel)
        return self._outcome()

    def _outcome(self) -> RunOutcome:
        return RunOutcome(
            state=self.state if self.state in ("finished", "stopped", "failed") else "stopped",
            steps=tuple(self.steps),
            best_step=self.best,
            record_path=self.record_path if self.record is not None else None,
            message=self.message,
            unreachable=self.unreachable,
        )

    def _pump(self) -> None:
        from loadgen.worker import drain

        if self.delta_q is None:
            return
        for item in drain(self.delta_q):
            self._on_item(item)
        self._try_finalize()

    def _on_item(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "ready":
            self.alive.add(item[1])
        elif kind == "fatal":
            self.fatal.append(str(item[2]))
            self.recent_errors.append(f"worker {item[1]} died: {item[2]}")
        elif kind == "delta":
            self._on_delta(int(item[1]), int(item[2]), bool(item[3]), bool(item[4]), item[5])

    def _on_delta(self, wid: int, window: int, closed: bool, current: bool, delta: Any) -> None:
        """A worker's figures for the requests it sent in ``window``; ``closed``: none of them is left in
        flight; ``current``: the window the worker sends in now (the delta carries its live gauges)."""
        seg = self.segments.get(window)
        if seg is not None:
            seg.acc.add(delta)
            if seg.phase == "measure":
                self.run_acc.add(delta)
            if current and delta.health:
                seg.judges.setdefault(wid, _BoundJudge()).add(delta.health)
        self.rolling.add(delta)
        if closed and seg is not None:
            seg.pending.discard(wid)
        if current:
            self.gauges[wid] = (int(delta.in_flight), int(delta.queued))
            self.health[wid] = dict(delta.health or {})
            self.recent_health.setdefault(wid, collections.deque(maxlen=RECENT_HEALTH)).append(
                self.health[wid]
            )
        ok = int(delta.ok)
        if ok:
            self.last_ok_ns = delta.t1_ns
        self.timeline.append(
            (delta.t1_ns, int(delta.live_tokens), int(delta.input_tokens), ok, int(delta.sent))
        )
        for err in delta.recent_errors:
            self.recent_errors.append(str(err))

    # ---- steps ----------------------------------------------------------------------------------
    def _arrival_label(self) -> str:
        if self.mode == "closed":
            return "closed"
        if self.config.arrival == "gamma":
            return f"gamma({self.config.burstiness:g})"
        return self.config.arrival

    def _warmup_s(self) -> float:
        return self.plan.warmup_s if self.plan is not None else self.config.warmup_s

    def _auto_end(self, t0_ns: int) -> int | None:
        if not self.auto:
            return None
        step_s = self.plan.step_s if self.plan is not None else self.config.auto_step_s
        return t0_ns + int(step_s * 1e9)

    def _apply_plan_level(self, index: int) -> None:
        assert self.plan is not None
        value = self.plan.levels[index]
        if self.mode == "closed":
            self.level = int(value)
        else:
            self.rate = float(value)

    def _new_segment(self, phase: str, now: int) -> _Segment:
        seg = _Segment(
            self.next_seg, self.step_index, phase, now, self._Accumulator(), pending=set(self.alive)
        )
        self.next_seg += 1
        self.segments[seg.seg_id] = seg
        self._send_all(("flush", seg.seg_id, now))
        if phase == "measure":
            self._poke_telemetry()
        return seg

    def _poke_telemetry(self) -> None:
        """Sample the server at a window's edge, so its counters cover the same seconds as the window."""
        if self.hub is not None:
            try:
                self.hub.poke()
            except Exception:
                pass

    def _send_all(self, cmd: tuple[Any, ...]) -> None:
        for q in self.cmd_queues:
            try:
                q.put(cmd)
            except (OSError, ValueError):
                pass

    def _apply_load(self) -> None:
        n = max(1, len(self.cmd_queues))
        for wid, q in enumerate(self.cmd_queues):
            if self.mode == "closed":
                share = self.level // n + (1 if wid < self.level % n else 0)
                q.put(("closed", share, self.config.cancel_on_lower))
            else:
                cap = self.level // n + (1 if wid < self.level % n else 0) if self.level else 0
                q.put(("open", self.rate / n, self.config.arrival, self.config.burstiness, cap))

    def _begin_step(self) -> None:
        now = time.monotonic_ns()
        self.step_index += 1
        self.step_t0_ns = now
        self.step_level = self.level
        self.step_rate = self.rate if self.mode == "open" else None
        self.step_marks = []
        self.step_starts_s.append((now - self.t0_ns) / 1e9)
        warm = self._warmup_s()
        self.step_warm_end_ns = now + int(warm * 1e9)
        # The flush that opens the new window goes out before the new load: a worker applies its commands in
        # order, so whatever the change causes (streams cancelled by lowering, new users) lands in the new step.
        self.current = self._new_segment("warmup" if warm > 0 else "measure", now)
        self._apply_load()
        self.step_end_ns = self._auto_end(now)

    def _end_step(self, ended_by: str) -> None:
        seg = self.current
        if seg is None:
            return
        now = time.monotonic_ns()
        seg.t1_ns = now
        # The flush that opens the next window closes this one; a placeholder segment receives deltas
        # until the next step begins (pause) and is never reported.
        self.current = None
        # Until the next step begins (pause, stop) requests go to a window nobody reports.
        self._send_all(("flush", self.next_seg, now))
        self.next_seg += 1
        seg.ended_by = ended_by  # type: ignore[attr-defined]
        seg.level, seg.rate, seg.mode = self.step_level, self.step_rate, self.mode  # type: ignore[attr-defined]
        seg.marks = tuple(self.step_marks)  # type: ignore[attr-defined]
        seg.warmup_s = (self.step_warm_end_ns - self.step_t0_ns) / 1e9  # type: ignore[attr-defined]
        seg.duration_s = (now - self.step_t0_ns) / 1e9  # type: ignore[attr-defined]
        seg.arrival = self._arrival_label()  # type: ignore[attr-defined]
        if seg.phase == "measure":
            self._poke_telemetry()
            self.run_measured_s += (now - seg.t0_ns) / 1e9
            # Reported once every worker says none of the window's requests is still in flight.
            seg.closing = True  # type: ignore[attr-defined]
            seg.close_deadline = now + int(LATE_RESULTS_S * 1e9)  # type: ignore[attr-defined]
        else:
            self.segments.pop(seg.seg_id, None)

    def _try_finalize(self, force: bool = False) -> None:
        now = time.monotonic_ns()
        for seg_id in sorted(self.segments):
            seg = self.segments[seg_id]
            if not getattr(seg, "closing", False):
                continue
            pending = seg.pending & self.alive
            if pending and not force and now < seg.close_deadline:  # type: ignore[attr-defined]
                break  # steps are reported in order: a later one waits for this one
            if not force and not self._telemetry_settled(seg, now):
                break
            del self.segments[seg_id]
            self._finalize(seg)

    def _telemetry_settled(self, seg: _Segment, now: int) -> bool:
        """The server has been sampled after the window closed (the poke at its end answered), or it is
        too late to wait for it; a slow or failing source never holds a step back for long."""
        if self.hub is None or seg.t1_ns is None or now >= seg.t1_ns + int(TELEMETRY_WAIT_S * 1e9):
            return True
        try:
            return bool(self.hub.settled(seg.t1_ns))
        except Exception:
            return True

    def _finalize(self, seg: _Segment) -> None:
        from loadgen.slo import best_step, evaluate

        window_s = max(1e-9, ((seg.t1_ns or time.monotonic_ns()) - seg.t0_ns) / 1e9)
        stats = seg.acc.stats("step", window_s)
        done = stats.ok + stats.error_count + stats.cancelled
        if seg.ended_by in ("level", "mode", "pause", "stop") and (window_s < 1.0 or done == 0):  # type: ignore[attr-defined]
            return  # a moment between two key presses is not a step
        verdict = evaluate(self.slo, stats) if not self.slo.is_empty() else SLOVerdict(None)
        server: dict[str, float | None] = {}
        if self.hub is not None:
            try:
                server = dict(self.hub.window_summary(seg.t0_ns, seg.t1_ns or time.monotonic_ns()))
            except Exception:
                server = {}
        bound = seg.bound_reason()
        summary = StepSummary(
            index=len(self.steps),
            mode=seg.mode,  # type: ignore[attr-defined]
            level=int(seg.level),  # type: ignore[attr-defined]
            rate_rps=seg.rate,  # type: ignore[attr-defined]
            arrival=seg.arrival,  # type: ignore[attr-defined]
            warmup_s=round(seg.warmup_s, 3),  # type: ignore[attr-defined]
            window_s=round(window_s, 3),
            window_t0_ns=seg.t0_ns,
            window_t1_ns=seg.t1_ns or time.monotonic_ns(),
            duration_s=round(seg.duration_s, 3),  # type: ignore[attr-defined]
            stats=stats,
            verdict=verdict,
            client_bound=bound is not None,
            bound_reason=bound or "",
            ended_by=seg.ended_by,  # type: ignore[attr-defined]
            server=server,
            marks=seg.marks,  # type: ignore[attr-defined]
        )
        self.steps.append(summary)
        self.best = best_step(self.steps)
        if self.record is not None:
            self.record.write_step(summary, seg.acc.encoded())
        if (
            self.plan is not None
            and self.plan.early_stop
            and verdict.met is False
            and seg.ended_by == "plan"  # type: ignore[attr-defined]
            and self.state == "running"
        ):
            self.message = (
                f"stopped early: step {summary.index + 1} broke the SLO ({'; '.join(verdict.failures)})"
            )
            self.state = "finished"

    def _advance(self, ended_by: str) -> None:
        if self.state != "running":
            return
        if self.plan is not None:
            if self.plan_index + 1 >= len(self.plan.levels):
                self._end_step(ended_by)
                self.state = "finished"
                return
            self.plan_index += 1
            self._apply_plan_level(self.plan_index)
        elif self.mode == "closed":
            self.level = max(1, self.level * 2)
        else:
            self.rate = max(0.1, self.rate * 2)
        self._end_step(ended_by)
        self._begin_step()

    def _next_timer_ns(self) -> int:
        """When the next warm-up end or step end is due (far in the future when none is)."""
        due = 1 << 62
        if self.state != "running":
            return due
        if self.current is not None and self.current.phase == "warmup":
            due = min(due, self.step_warm_end_ns)
        if self.step_end_ns is not None:
            due = min(due, self.step_end_ns)
        return due

    def _check_timers(self, now: int) -> None:
        if self.state != "running":
            return
        cur = self.current
        if cur is not None and cur.phase == "warmup" and now >= self.step_warm_end_ns:
            self.current = self._new_segment("measure", now)
            self.segments.pop(cur.seg_id, None)  # warm-up is never reported
        if self.step_end_ns is not None and now >= self.step_end_ns:
            self._advance("plan")

    def _check_health(self, now: int) -> None:
        if self.config.server_exit is not None and self.state in ("running", "paused"):
            try:
                died = self.config.server_exit()
            except Exception:
                died = None
            if died:
                self.command("mark", (died,))
                self.state, self.message, self.unreachable = "failed", died, True
                return
        if self.fatal and not any(p.is_alive() for p in self.procs):
            self.state, self.message = "failed", "all load workers died: " + self.fatal[0]
            return
        if self.state != "running":
            return
        in_flight = sum(g[0] for g in self.gauges.values())
        recent = self.rolling_errors_connect()
        if recent and now - self.last_ok_ns > UNREACHABLE_AFTER_S * 1e9 and (in_flight or recent):
            self.state = "failed"
            self.unreachable = True
            self.message = (
                f"target {self.config.target.base_url} stopped answering: no successful request for "
                f"{UNREACHABLE_AFTER_S:.0f} s ({recent} connection errors); finished steps are in the record"
            )

    def rolling_errors_connect(self) -> int:
        stats = self._rolling_stats
        return int(stats.errors.get("connect", 0)) if stats is not None else 0

    _rolling_stats: WindowStats | None = None

    # ---- snapshot -------------------------------------------------------------------------------
    def _rates(self, now: int) -> tuple[float, float, float, float]:
        horizon = now - int(2e9)
        while self.timeline and self.timeline[0][0] < now - int(self.config.rolling_s * 1e9):
            self.timeline.popleft()
        out = inp = ok = sent = 0
        for t1, lt, it, o, s in self.timeline:
            if t1 >= horizon:
                out += lt
                inp += it
                ok += o
                sent += s
        span = min(2.0, max(1e-3, (now - self.t0_ns) / 1e9))
        return out / span, inp / span, ok / span, sent / span

    def _publish_snapshot(self) -> None:
        now = time.monotonic_ns()
        elapsed = (now - self.t0_ns) / 1e9
        windows: dict[str, WindowStats] = {}
        if self.current is not None:
            windows["step"] = self.current.acc.stats("step", max(1e-3, (now - self.current.t0_ns) / 1e9))
        else:
            windows["step"] = WindowStats(window="step")
        roll_s = min(self.config.rolling_s, max(1e-3, elapsed))
        windows["rolling"] = (
            self.rolling.stats(now, roll_s) if self.state != "starting" else WindowStats("rolling")
        )
        self._rolling_stats = windows["rolling"]
        run_s = self.run_measured_s + (
            (now - self.current.t0_ns) / 1e9
            if self.current is not None and self.current.phase == "measure"
            else 0.0
        )
        run_acc = self.run_acc
        if self.current is not None and self.current.phase == "measure":
            windows["run"] = run_acc.stats("run", max(1e-3, run_s))
        else:
            windows["run"] = run_acc.stats("run", max(1e-3, run_s))
        out_s, in_s, ok_s, sent_s = self._rates(now)
        in_flight = sum(g[0] for g in self.gauges.values())
        queued = sum(g[1] for g in self.gauges.values())
        if now - self.last_series_ns >= int(1e9) and self.state in ("running", "paused"):
            self.last_series_ns = now
            self.series.append(SeriesPoint(elapsed, out_s, in_s, ok_s, in_flight, self.level))
        if self.hub is not None:
            try:
                self.server = self.hub.latest()
                cur = self.current
                if self.server is not None and cur is not None and cur.phase == "measure":
                    p50, p95 = self.hub.ttft_since(cur.t0_ns)
                    self.server = replace(self.server, step_ttft_ms_p50=p50, step_ttft_ms_p95=p95)
            except Exception:
                self.server = None
        step_count = len(self.plan.levels) if self.plan is not None else None
        remaining = (
            None
            if self.step_end_ns is None or self.state != "running"
            else max(0.0, (self.step_end_ns - now) / 1e9)
        )
        self.seq += 1
        snap = Snapshot(
            seq=self.seq,
            elapsed_s=elapsed,
            state=self.state,
            url=self.config.target.base_url,
            model=self.model,
            runtime=self.runtime,
            runtime_version=self.runtime_version,
            profile=getattr(self.profile, "name", "?"),
            mode=self.mode,
            level=self.level,
            rate_rps=self.rate if self.mode == "open" else None,
            achieved_rps=sent_s if self.mode == "open" else None,
            arrival=self._arrival_label(),
            paused=self.paused,
            auto_ramp=self.auto,
            step_index=max(0, self.step_index),
            step_count=step_count,
            step_elapsed_s=(now - self.step_t0_ns) / 1e9 if self.step_index >= 0 else 0.0,
            step_remaining_s=remaining,
            warming_up=self.current is not None and self.current.phase == "warmup",
            in_flight=in_flight,
            queued=queued,
            windows=windows,
            rolling_s=self.config.rolling_s,
            series=tuple(self.series),
            step_starts_s=tuple(self.step_starts_s),
            steps=tuple(self.steps),
            best_step=self.best,
            slo=self.slo,
            health=self._client_health(),
            recent_errors=tuple(self.recent_errors),
            warnings=tuple(self.warnings),
            server=self.server,
            record_path=self.record_path if self.record is not None else None,
            marks=tuple(self.marks),
            message=self.message,
            server_log=self._server_log(),
        )
        self.publish(snap)

    def _server_log(self) -> tuple[str, ...]:
        if self.config.server_log is None:
            return ()
        try:
            return tuple(self.config.server_log())
        except Exception:
            return ()

    def _client_health(self) -> ClientHealth:
        if not self.health:
            return ClientHealth()
        cpus = tuple(round(self.health[w].get("cpu_pct", 0.0), 1) for w in sorted(self.health))
        lag99 = max(h.get("loop_lag_ms_p99", 0.0) for h in self.health.values())
        lagmax = max(h.get("loop_lag_ms_max", 0.0) for h in self.health.values())
        verdicts = (_BoundJudge.of(self.recent_health[wid]).reason() for wid in sorted(self.recent_health))
        reasons = [r for r in verdicts if r]
        return ClientHealth(lag99, lagmax, cpus, bool(reasons), reasons[-1] if reasons else "")

    # ---- shutdown -------------------------------------------------------------------------------
    async def _shutdown(self, cancel: bool) -> None:
        # Without cancel the streams in flight finish, and their results land in the step that sent them.
        if self.current is not None:
            self._end_step("stop")
        self._send_all(("stop", cancel))
        deadline = time.monotonic() + (2.0 if cancel else DRAIN_S)
        forced = cancel
        while self.procs:
            if time.monotonic() >= deadline:
                if forced:
                    break
                forced = True  # the drain took too long: cancel what is left, counted as cancelled
                self._send_all(("stop", True))
                deadline = time.monotonic() + 2.0
            if self.delta_q is not None:
                # In a thread: the loop stays free for telemetry (the sample at the last window's end).
                for item in await asyncio.to_thread(self._drain_blocking, 0.05):
                    self._on_item(item)
            if not any(p.is_alive() for p in self.procs):
                break
        if self.delta_q is not None:
            from loadgen.worker import drain

            for item in drain(self.delta_q):
                self._on_item(item)
        if not cancel:  # a finished plan: let the poke at its last window's end answer (bounded)
            until = time.monotonic() + TELEMETRY_WAIT_S
            while time.monotonic() < until and any(
                not self._telemetry_settled(seg, time.monotonic_ns()) for seg in self.segments.values()
            ):
                if self.hub is None or not await self.hub.wait_changed(max(0.0, until - time.monotonic())):
                    break
        self._try_finalize(force=True)
        for proc in self.procs:
            proc.join(timeout=0.2)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=1.0)
        if self.hub is not None:
            try:
                await asyncio.wait_for(self.hub.stop(), 10.0)
            except Exception:
                pass
        if self.record is not None:
            self.record.write_event(
                "end",
                {
                    "state": self.state if self.state != "running" else "stopped",
                    "message": self.message,
                    "steps": len(self.steps),
                    "best_step": self.best,
                    "elapsed_s": round((time.monotonic_ns() - self.t0_ns) / 1e9, 3),
                },
            )
            self.record.close()
        if self.state in ("running", "paused", "starting"):
            self.state = "stopped"
        self._publish_snapshot()

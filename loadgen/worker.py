"""A load worker: one process, one asyncio loop, a share of the virtual users, interval deltas out.

The streams never share an interpreter with a UI: the controller (``loadgen.engine``) starts one or more of
these processes, sends them commands over a queue (set level, set rate, pause, flush, stop) and receives an
``IntervalDelta`` (encoded HDR histograms + counters) from each about four times a second, plus one at once
whenever it asks for a flush (step and warm-up boundaries).

Closed loop: ``level`` virtual users, each sending its next request as soon as the last one finished
(after the session's think time). Lowering the level lets the surplus finish their current request and stop,
or cancels them (counted as cancelled, never as errors or successes).

Open loop: sessions arrive on a schedule (constant, Poisson or gamma inter-arrival times) computed as
absolute target times from a seeded generator; each request's latency is measured from that intended time,
and the gap to the real send is the schedule lag. With a concurrency cap, arrivals beyond it wait in a
client-side queue, and their wait counts in their latency (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import json
import os
import queue
import random
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from loadgen.metrics import Recorder
from loadgen.types import ErrorKind, Outcome, RequestResult, Target

CONNECT_BACKOFF_MIN_S = 0.01  # a closed-loop user's pause after a refused connection, doubling ...
CONNECT_BACKOFF_MAX_S = 1.0  # ... up to this, until a request connects again


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    worker_id: int
    target: Target
    profile: Any  # loadgen.profile.Profile (picklable)
    sizer: Any  # loadgen.workload.PromptSizer (picklable)
    model: str
    seed: int
    transport: str = "h1"
    max_connections: int = 1024
    tick_s: float = 0.25


# Commands sent to a worker (plain tuples: cheap to pickle):
#   ("closed", level, cancel)              closed loop with `level` users (this worker's share)
#   ("open", rate_rps, arrival, k, cap)    open loop at rate_rps (share), concurrency cap (share, 0 = none)
#   ("pause",) / ("resume",)
#   ("flush", window, t0_ns)               ship now; requests sent from here on belong to `window`
#   ("stop", cancel)                       stop everything, ship a final delta, exit


def worker_main(spec: WorkerSpec, commands: Any, deltas: Any) -> None:
    """Process entry point. SIGINT is ignored: the controller decides when workers stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    log_path = _quiet_output(spec.worker_id)
    cpus = os.environ.get("RAMP_WORKER_CPUS")  # e.g. "0" or "0,1": pin workers (the selftest does)
    if cpus and hasattr(os, "sched_setaffinity"):
        allowed = [int(c) for c in cpus.split(",") if c.strip()]
        if allowed:
            os.sched_setaffinity(0, {allowed[spec.worker_id % len(allowed)]})
    try:
        _quiet_gc()
        _run_loop(_Worker(spec, commands, deltas).run)
        if log_path != "stderr" and os.path.getsize(log_path) == 0:
            os.unlink(log_path)  # nothing was said: leave no litter
    except Exception as exc:  # never a silent death: the controller shows this
        import traceback

        traceback.print_exc()
        deltas.put(("fatal", spec.worker_id, f"{type(exc).__name__}: {exc} (details: {log_path})"))


def _quiet_output(worker_id: int) -> str:
    """Point the worker's stdout/stderr at a log file: a library warning printed into the operator's
    terminal would tear the console's screen. Returns the log's path (named in fatal errors)."""
    import tempfile

    path = os.path.join(tempfile.gettempdir(), f"ramp-worker-{worker_id}-{os.getpid()}.log")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError:
        return "stderr"
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return path


def _quiet_gc() -> None:
    """Fewer, later garbage collections: a gen-2 pass over a busy worker's heap stalls every stream's
    timestamps for milliseconds. Startup objects are frozen out of the collector's sight."""
    if os.environ.get("RAMP_GC", "tuned") == "tuned":
        gc.collect()
        gc.freeze()
        gc.set_threshold(50_000, 50, 1000)


def _run_loop(main: Any) -> None:
    """Run on uvloop where it is installed: its per-wakeup cost is a fraction of asyncio's, and a load
    worker wakes once per streamed chunk. RAMP_LOOP=asyncio forces the standard loop (for comparisons)."""
    if os.environ.get("RAMP_LOOP", "uvloop") == "uvloop":
        try:
            import uvloop

            uvloop.run(main())
            return
        except ImportError:
            pass
    asyncio.run(main())


CLIENT_BOUND_LAG_MS = 5.0  # a loop lag sample over this counts against the client (engine: > 1 % of them)


class _Health:
    """Event-loop lag, process CPU and time spent waiting for a CPU, sampled on the worker's own loop.

    CPU shares are taken over spans of at least ``SPAN_S`` (a delta shipped a millisecond after the last
    one would otherwise read 100 % from one busy millisecond). The run-queue wait (Linux schedstat) tells
    a worker that is busy from one that is ready but not given a core by the OS.
    """

    SPAN_S = 1.0

    def __init__(self) -> None:
        self.lags_ms: list[float] = []
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()
        self._wait0 = _runqueue_wait_ns()
        self._cpu_pct = 0.0
        self._wait_pct: float | None = None

    async def watch(self, period_s: float = 0.05) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(period_s)
            self.lags_ms.append(max(0.0, (time.perf_counter() - t0 - period_s) * 1000.0))

    def take(self) -> dict[str, float]:
        cpu, wall = time.process_time(), time.monotonic()
        span = wall - self._wall0
        if span >= self.SPAN_S:
            self._cpu_pct = 100.0 * (cpu - self._cpu0) / span
            wait = _runqueue_wait_ns()
            if wait is not None and self._wait0 is not None:
                self._wait_pct = 100.0 * (wait - self._wait0) / 1e9 / span
            self._cpu0, self._wall0, self._wait0 = cpu, wall, wait
        out = {"cpu_pct": self._cpu_pct}
        if self._wait_pct is not None:
            out["runq_wait_pct"] = self._wait_pct
        lags = sorted(self.lags_ms)
        self.lags_ms = []
        # The samples' count and how many passed the client-bound threshold: the engine judges a whole
        # step's samples (its p99), not the few of one report.
        out["lag_n"] = float(len(lags))
        out["lag_over"] = float(sum(1 for v in lags if v > CLIENT_BOUND_LAG_MS))
        if not lags:
            return {**out, "loop_lag_ms_p99": 0.0, "loop_lag_ms_max": 0.0}
        p99 = lags[min(len(lags) - 1, int(0.99 * len(lags)))]
        return {**out, "loop_lag_ms_p99": p99, "loop_lag_ms_max": lags[-1]}


def _runqueue_wait_ns() -> int | None:
    """Nanoseconds this thread has spent ready to run but waiting for a CPU (Linux), else None."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


class _Worker:
    def __init__(self, spec: WorkerSpec, commands: Any, deltas: Any) -> None:
        from loadgen.client import Client, LiveCounter
        from loadgen.workload import Workload

        self.spec = spec
        self.commands = commands
        self.deltas = deltas
        self.client = Client(spec.target, max_connections=spec.max_connections, transport=spec.transport)
        # The same seed in every worker: shared prefixes must be identical across processes (cache hits).
        self.workload = Workload(spec.profile, spec.sizer, spec.model, spec.seed, api=spec.target.api)
        # One recorder per window (the controller's segment) a request was sent in: a request belongs to
        # the window it was sent in, even when it completes during the next one, so a step's latencies hold
        # every request it sent — none carried in from warm-up or an earlier level, none lost for being slow.
        self.window: int = -1
        self.recorders: dict[int, Recorder] = {-1: Recorder(worker_id=spec.worker_id)}
        self.window_inflight: dict[int, int] = {}
        self.live = LiveCounter()
        self.tokens_per_unit = 1.0
        self.ratio_tokens = 0.0
        self.ratio_units = 0.0
        self.live_carry = 0.0
        self.health = _Health()
        self.mode = "closed"
        self.level = 0
        self.paused = False
        self.resumed = asyncio.Event()
        self.resumed.set()
        self.stopping = False
        self.users: dict[int, asyncio.Task[None]] = {}
        self.retiring: set[int] = set()  # users that stop after their current request
        self.next_uid = 0
        self.sessions = 0
        self.in_flight = 0
        self.sent = 0
        self.open_tasks: set[asyncio.Task[None]] = set()
        self.backlog: collections.deque[float] = collections.deque()  # intended start (ns) waiting for a slot
        self.arrivals: asyncio.Task[None] | None = None
        self.rate_rps = 0.0
        self.arrival = "poisson"
        self.burstiness = 1.0
        self.cap = 0
        self.t_last_ns = time.monotonic_ns()
        self.done = asyncio.Event()
        trace_dir = os.environ.get("RAMP_TRACE_DIR")
        self.trace_chunks = os.environ.get("RAMP_TRACE_CHUNKS") == "1"  # every chunk's arrival, too
        self.trace = (
            open(os.path.join(trace_dir, f"trace-{spec.worker_id}.jsonl"), "a", encoding="utf-8")  # noqa: SIM115
            if trace_dir
            else None
        )
        self.rng = random.Random(spec.seed * 7919 + spec.worker_id)

    def _session_id(self) -> int:
        # Unique across workers: the worker id in the high digits.
        self.sessions += 1
        return self.spec.worker_id * 1_000_000_000 + self.sessions

    # ---- plumbing -------------------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._read_commands, args=(loop,), daemon=True).start()
        watch = asyncio.create_task(self.health.watch())
        ticker = asyncio.create_task(self._tick())
        self.deltas.put(("ready", self.spec.worker_id, os.getpid()))
        await self.done.wait()
        ticker.cancel()
        watch.cancel()
        await self.client.aclose()
        if self.trace is not None:
            self.trace.close()

    def _read_commands(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            try:
                cmd = self.commands.get()
            except (EOFError, OSError):
                loop.call_soon_threadsafe(self._handle, ("stop", True))
                return
            loop.call_soon_threadsafe(self._handle, cmd)

    def _handle(self, cmd: tuple[Any, ...]) -> None:
        kind = cmd[0]
        if kind == "closed":
            self._set_closed(int(cmd[1]), bool(cmd[2]))
        elif kind == "open":
            self._set_open(float(cmd[1]), str(cmd[2]), float(cmd[3]), int(cmd[4]))
        elif kind == "pause":
            self.paused = True
            self.resumed.clear()
            # Arrivals queued behind the concurrency cap are dropped like the schedule's later ones: a freed
            # slot must not send them while paused.
            self.backlog.clear()
        elif kind == "resume":
            self.paused = False
            self.resumed.set()
            if self.mode == "open":
                self._restart_arrivals()
        elif kind == "flush":
            self._ship()
            self.window = int(cmd[1])
            self.recorders.setdefault(self.window, Recorder(worker_id=self.spec.worker_id))
            self._ship_closed()
        elif kind == "stop":
            if self.stopping:
                if cmd[1]:  # a drain that takes too long: now cancel what is left
                    for task in list(self.users.values()) + list(self.open_tasks):
                        task.cancel()
                return
            asyncio.get_running_loop().create_task(self._stop(bool(cmd[1])))

    async def _tick(self) -> None:
        # Deadlines, not sleeps in a row: ticks do not drift with the work done in them.
        period = int(self.spec.tick_s * 1e9)
        deadline = time.monotonic_ns() + period
        while True:
            await asyncio.sleep(max(0.0, (deadline - time.monotonic_ns()) / 1e9))
            deadline += period
            self._ship()

    def _ship(self) -> None:
        """Ship every open window's delta: the current one with the live gauges, earlier ones (requests
        still in flight from them) with their late results, closed once nothing of theirs is in flight."""
        now = time.monotonic_ns()
        # Streamed units (chunks, or token_ids counts) become tokens at the ratio usage showed so far, so the
        # live rate — and a window's aggregate tok/s — follows tokens as they arrive even when a server packs
        # several tokens into one chunk; completions then correct the small remainder (see _account).
        self.live_carry += self.live.tokens * self.tokens_per_unit
        self.live.tokens = 0
        live_tokens = int(self.live_carry)
        self.live_carry -= live_tokens
        wid = self.spec.worker_id
        for window in list(self.recorders):
            recorder = self.recorders[window]
            if window == self.window:
                delta = recorder.take(
                    self.t_last_ns,
                    now,
                    live_tokens=live_tokens,
                    in_flight=self.in_flight,
                    queued=len(self.backlog),
                    sent=self.sent,
                    health=self.health.take(),
                )
                self.deltas.put(("delta", wid, window, False, True, delta))
            else:
                closed = self.window_inflight.get(window, 0) == 0
                self.deltas.put(("delta", wid, window, closed, False, recorder.take(self.t_last_ns, now)))
                if closed:
                    del self.recorders[window]
                    self.window_inflight.pop(window, None)
        self.sent = 0
        self.t_last_ns = now

    def _ship_closed(self) -> None:
        """Close at once the earlier windows with nothing in flight (the controller can report them)."""
        now = time.monotonic_ns()
        wid = self.spec.worker_id
        for window in [w for w in self.recorders if w != self.window and not self.window_inflight.get(w)]:
            self.deltas.put(("delta", wid, window, True, False, self.recorders.pop(window).take(now, now)))
            self.window_inflight.pop(window, None)

    async def _stop(self, cancel: bool) -> None:
        self.stopping = True
        if self.arrivals is not None:
            self.arrivals.cancel()
        self.backlog.clear()
        tasks = list(self.users.values()) + list(self.open_tasks)
        if cancel:
            for task in tasks:
                task.cancel()
        self.resumed.set()
        if tasks:
            await asyncio.wait(tasks, timeout=None if not cancel else 5.0)
        self._ship()
        self.window = -2  # no current window: every earlier one closes now (nothing is in flight)
        self._ship_closed()
        self.done.set()

    # ---- one request ----------------------------------------------------------------------------
    async def _send(self, spec: Any, intended_ns: int) -> RequestResult:
        window = self.window
        self.in_flight += 1
        self.sent += 1
        self.window_inflight[window] = self.window_inflight.get(window, 0) + 1
        try:
            result = await self.client.send(spec, intended_ns, self.live)
        finally:
            self.in_flight -= 1
            self.window_inflight[window] -= 1
        recorder = self.recorders.get(window)
        if recorder is None:  # only if the window was closed under us (cannot happen while counted in flight)
            recorder = self.recorders.setdefault(window, Recorder(worker_id=self.spec.worker_id))
        recorder.record(result)
        if window != self.window and self.window_inflight[window] == 0:
            self._ship_closed()
        self._account(result)
        if self.trace is not None:
            self._trace(result, window)
        return result

    def _account(self, result: RequestResult) -> None:
        """Settle one finished request against the live token count: usage's exact count for a success,
        nothing for a failure (the live count covers successful output tokens only)."""
        units = (result.output_tokens if result.outcome is Outcome.OK else 0) - Recorder.live_correction(
            result
        )
        # Convert the streamed units still sitting in the live counter at the current ratio first, so this
        # request's correction uses the same ratio its units were (or will be) converted at.
        self.live_carry += self.live.tokens * self.tokens_per_unit
        self.live.tokens = 0
        counted = units * self.tokens_per_unit
        if result.outcome is Outcome.OK:
            self.live_carry += result.output_tokens - counted
            if units > 0:
                # Usage tokens per streamed unit over recent successes (exact after the first one).
                self.ratio_tokens = 0.98 * self.ratio_tokens + result.output_tokens
                self.ratio_units = 0.98 * self.ratio_units + units
                self.tokens_per_unit = self.ratio_tokens / self.ratio_units
        else:
            self.live_carry -= counted

    def _trace(self, r: RequestResult, window: int) -> None:
        """One line per request (RAMP_TRACE_DIR): for joining against a server's own logs or ground truth.
        A debugging aid, off the measured path unless asked for."""
        assert self.trace is not None
        line: dict[str, Any] = {
            "request_id": r.request_id,
            "window": window,
            "outcome": r.outcome.value,
            "intended_ns": r.intended_ns,
            "sent_ns": r.sent_ns,
            "first_token_ns": r.first_token_ns,
            "last_token_ns": r.last_token_ns,
            "end_ns": r.end_ns,
            "output_tokens": r.output_tokens,
            "chunks": len(r.chunk_times_ns),
        }
        if self.trace_chunks:
            line["chunk_times_ns"] = list(r.chunk_times_ns)
            line["chunk_tokens"] = list(r.chunk_tokens) if r.chunk_tokens else None
        self.trace.write(json.dumps(line) + "\n")

    async def _think(self, seconds: float) -> bool:
        """Wait out a session's think time; False when the user should stop instead."""
        if seconds > 0:
            await asyncio.sleep(seconds)
        return not self.stopping

    # ---- closed loop ----------------------------------------------------------------------------
    def _set_closed(self, level: int, cancel: bool) -> None:
        if self.mode == "open":
            self._stop_open(cancel)
        self.mode = "closed"
        self.level = max(0, level)
        active = [uid for uid in self.users if uid not in self.retiring]
        # Raise: start new users at once; reuse retiring ones first (they have not left yet).
        while len(active) < self.level and self.retiring:
            uid = max(self.retiring)
            self.retiring.discard(uid)
            active.append(uid)
        while len(active) < self.level:
            uid = self.next_uid
            self.next_uid += 1
            self.users[uid] = asyncio.get_running_loop().create_task(self._user(uid))
            active.append(uid)
        # Lower: the newest users leave first.
        for uid in sorted(active, reverse=True)[: max(0, len(active) - self.level)]:
            self.retiring.add(uid)
            if cancel:
                self.users[uid].cancel()

    async def _user(self, uid: int) -> None:
        rng = random.Random(self.spec.seed * 1_000_003 + self.spec.worker_id * 10_007 + uid)
        session = self.workload.new_session(rng, session_id=self._session_id())
        backoff_s = 0.0
        try:
            while not self.stopping and uid not in self.retiring:
                if self.paused:
                    await self.resumed.wait()
                    continue
                spec = session.next_request()
                if spec is None:
                    session = self.workload.new_session(rng, session_id=self._session_id())
                    continue
                result = await self._send(spec, time.monotonic_ns())
                if result.outcome is Outcome.CANCELLED:
                    break
                session.on_result(result)
                think = session.think_time_s
                if result.error_kind is ErrorKind.CONNECT:
                    # A refused connection fails in microseconds: without a pause the user would spin, pinning
                    # the worker's CPU and burying the step under thousands of identical errors a second.
                    backoff_s = min(CONNECT_BACKOFF_MAX_S, max(CONNECT_BACKOFF_MIN_S, backoff_s * 2))
                    think = max(think, backoff_s)
                else:
                    backoff_s = 0.0
                if think > 0 and not await self._think(think):
                    break
        except asyncio.CancelledError:
            pass  # cancelled while thinking or paused: nothing was in flight
        finally:
            self.users.pop(uid, None)
            self.retiring.discard(uid)

    # ---- open loop ------------------------------------------------------------------------------
    def _set_open(self, rate_rps: float, arrival: str, burstiness: float, cap: int) -> None:
        if self.mode == "closed":
            self._set_closed(0, cancel=False)
        self.mode = "open"
        self.rate_rps, self.arrival, self.burstiness, self.cap = rate_rps, arrival, burstiness, cap
        self._restart_arrivals()
        self._drain_backlog()

    def _stop_open(self, cancel: bool) -> None:
        if self.arrivals is not None:
            self.arrivals.cancel()
            self.arrivals = None
        self.backlog.clear()
        if cancel:
            for task in list(self.open_tasks):
                task.cancel()

    def _restart_arrivals(self) -> None:
        if self.arrivals is not None:
            self.arrivals.cancel()
        self.arrivals = None
        if self.rate_rps > 0 and not self.paused and not self.stopping:
            self.arrivals = asyncio.get_running_loop().create_task(self._arrive())

    def _gap_s(self) -> float:
        mean = 1.0 / self.rate_rps
        if self.arrival == "constant":
            return mean
        if self.arrival == "gamma":
            k = max(1e-3, self.burstiness)
            return self.rng.gammavariate(k, mean / k)
        return self.rng.expovariate(self.rate_rps)

    async def _arrive(self) -> None:
        # Absolute target times from a seeded generator: a late wake-up sends the overdue arrivals at once
        # and their lateness shows as schedule lag, instead of silently stretching the schedule.
        next_ns = time.monotonic_ns() + int(self._gap_s() * 1e9)
        while True:
            now = time.monotonic_ns()
            # Until the target time, not just one sleep: asyncio may wake a little early, and an arrival sent
            # before its intended time would have a negative schedule lag (dropped from the histogram).
            while next_ns > now:
                await asyncio.sleep((next_ns - now) / 1e9)
                now = time.monotonic_ns()
            if self.paused or self.stopping:
                return
            self._admit(next_ns)
            next_ns += int(self._gap_s() * 1e9)

    def _admit(self, intended_ns: int) -> None:
        if self.cap and len(self.open_tasks) >= self.cap:
            self.backlog.append(intended_ns)
            return
        task = asyncio.get_running_loop().create_task(self._session(intended_ns))
        self.open_tasks.add(task)
        task.add_done_callback(self._open_done)

    def _open_done(self, task: asyncio.Task[None]) -> None:
        self.open_tasks.discard(task)
        self._drain_backlog()

    def _drain_backlog(self) -> None:
        while (
            self.backlog
            and not self.stopping
            and not self.paused
            and (not self.cap or len(self.open_tasks) < self.cap)
        ):
            self._admit(int(self.backlog.popleft()))

    async def _session(self, intended_ns: int) -> None:
        session = self.workload.new_session(
            random.Random(self.rng.getrandbits(64)), session_id=self._session_id()
        )
        with contextlib.suppress(asyncio.CancelledError):
            while not self.stopping:
                spec = session.next_request()
                if spec is None:
                    return
                result = await self._send(spec, intended_ns)
                if result.outcome is Outcome.CANCELLED:
                    return
                session.on_result(result)
                think = session.think_time_s
                if not await self._think(think):
                    return
                intended_ns = time.monotonic_ns()


def drain(q: Any, limit: int = 10_000) -> list[Any]:
    """Everything waiting on a multiprocessing queue, without blocking."""
    items = []
    for _ in range(limit):
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            break
    return items

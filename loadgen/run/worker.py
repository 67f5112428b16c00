"""A load worker: one process, one asyncio loop, a share of the virtual users, interval deltas out.

The streams never share an interpreter with a UI: the controller (``loadgen.run.controller``) starts one
or more of these processes, sends them ``WorkerCommand`` messages over a queue (load, pause, flush, stop)
and receives a ``WorkerDelta`` (encoded HDR histograms + counters) from each about four times a second,
plus one at once whenever it asks for a flush (step and warm-up boundaries). How the load is offered lives
in ``loadgen.run.loops``; what is shipped, in ``loadgen.run.shipping``.

A worker never outlives its controller: it ends itself the moment the controller's process is gone,
whatever killed it (``loadgen.childproc.exit_with_parent``: the kernel's parent-death signal, and
multiprocessing's parent sentinel). The terminal's signals (SIGINT, SIGHUP) are the controller's to act
on; SIGTERM stops this worker's load (its streams cancelled, a last delta shipped) and ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import os
import random
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from loadgen.arrivals import stream_seed
from loadgen.childproc import exit_with_parent
from loadgen.client import Client
from loadgen.config import SLO, Mode, Transport
from loadgen.metrics.replicas import ReplicaKeys
from loadgen.run.health import HealthSampler
from loadgen.run.loops import ClosedLoop, Gate, OpenLoop, Send
from loadgen.run.protocol import (
    ClosedLoad,
    Flush,
    OpenLoad,
    PauseLoad,
    ResumeLoad,
    StopLoad,
    WorkerCommand,
    WorkerFatal,
    WorkerMessage,
    WorkerReady,
)
from loadgen.run.readtrace import ReadTrace
from loadgen.run.shipping import RequestTrace, WindowBook
from loadgen.sources import RequestLog
from loadgen.types import RequestResult, RequestSpec, Target, replica_name
from loadgen.workload import Workload

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

    from loadgen.profile import Profile
    from loadgen.run.otel import RequestSpans
    from loadgen.workload import PromptSizer


SESSION_BLOCK = 1_000_000_000  # session ids are unique across workers: the worker id in the high digits


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What a worker process is started with (pickled to it)."""

    worker_id: int
    target: Target
    profile: Profile
    sizer: PromptSizer
    model: str
    seed: int
    transport: Transport = "h1"
    max_connections: int = 1024
    tick_s: float = 0.25
    slo: SLO | None = None  # the run's SLO (the profile's or the flags'), for goodput
    detail: bool = False  # --save-requests-detail: ship a row per finished request
    save_requests: str | None = None  # --save-requests FILE: every request as sent (loadgen.sources.requests)
    log_dir: str | None = None  # the run's private folder (mode 0700) for the workers' logs (ProcessFleet)
    otel: bool = False  # --otel: a traceparent on every request and a span for it (loadgen.run.otel)


class Inbox(Protocol):
    """Where a worker reads its commands from, in order (a process queue, or a Ray actor's queue)."""

    def get(self) -> WorkerCommand: ...


class Outbox(Protocol):
    """Where a worker sends its messages."""

    def put(self, msg: WorkerMessage, /) -> None: ...


def serve(spec: WorkerSpec, commands: Inbox, deltas: Outbox) -> None:
    """Run one worker on the calling thread until it stops — a Ray actor's thread
    (``loadgen.run.ray_fleet``): none of ``worker_main``'s process-wide setup (signals, output, pinning)."""
    try:
        _quiet_gc()
        _run_loop(Worker(spec, commands, deltas).run)
    except Exception as exc:  # never a silent death: the controller shows this
        deltas.put(WorkerFatal(spec.worker_id, f"{type(exc).__name__}: {exc}"))


def worker_main(spec: WorkerSpec, commands: Queue[WorkerCommand], deltas: Queue[WorkerMessage]) -> None:
    """Process entry point. SIGINT and SIGHUP are ignored: the controller decides when workers stop."""
    _die_with_controller()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    log_path = _quiet_output(spec.worker_id, spec.log_dir)
    cpus = os.environ.get("RAMP_WORKER_CPUS")  # e.g. "0" or "0,1": pin workers (the selftest does)
    if cpus and hasattr(os, "sched_setaffinity"):
        allowed = [int(c) for c in cpus.split(",") if c.strip()]
        if allowed:
            os.sched_setaffinity(0, {allowed[spec.worker_id % len(allowed)]})
    try:
        _quiet_gc()
        _run_loop(Worker(spec, commands, deltas).run)
        if log_path != "stderr" and os.path.getsize(log_path) == 0:
            os.unlink(log_path)  # nothing was said: leave no litter
    except Exception as exc:  # never a silent death: the controller shows this
        traceback.print_exc()
        deltas.put(WorkerFatal(spec.worker_id, f"{type(exc).__name__}: {exc} (details: {log_path})"))


def _die_with_controller() -> None:
    """End this worker as soon as the controller's process is gone (kill -9 of ramp included).
    RAMP_PDEATHSIG=0 leaves the kernel's signal out, so that a test can prove the sentinel alone works."""
    parent = multiprocessing.parent_process()
    if parent is None or parent.pid is None:  # not started by multiprocessing: nothing to watch
        return
    kernel = os.environ.get("RAMP_PDEATHSIG", "1") != "0"
    exit_with_parent(parent.pid, parent.sentinel, kernel=kernel)


def _quiet_output(worker_id: int, log_dir: str | None) -> str:
    """Point the worker's stdout/stderr at a log file: a library warning printed into the operator's
    terminal would tear the console's screen. Returns the log's path (named in fatal errors).

    The file is created, never opened if it exists (O_EXCL, no symlink followed), in the run's private
    folder; without one (a worker started alone) under a random name in the temp dir: a predictable name
    in a shared /tmp lets another user plant a symlink there."""
    import sys

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        if log_dir is not None:
            path = os.path.join(log_dir, f"worker-{worker_id}.log")
            fd = os.open(path, flags, 0o600)
        else:
            fd, path = tempfile.mkstemp(prefix=f"ramp-worker-{worker_id}-", suffix=".log")
    except OSError:
        return "stderr"
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


def _run_loop(main: Callable[[], Coroutine[object, object, None]]) -> None:
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


class Worker:
    """One worker's loop: reads commands, runs the closed or open loop, ships deltas on a tick."""

    def __init__(self, spec: WorkerSpec, commands: Inbox, deltas: Outbox) -> None:
        self.spec = spec
        self.commands = commands
        self.deltas = deltas
        # One pool per replica (``--url A --url B``); one replica: one client, as before.
        self.clients = tuple(
            Client(t, max_connections=spec.max_connections, transport=spec.transport)
            for t in spec.target.replica_targets()
        )
        self.client = self.clients[0]
        self.replica_keys = (
            tuple(ReplicaKeys.of(replica_name(i)) for i in range(len(self.clients)))
            if len(self.clients) > 1
            else ()
        )
        # Round robin by session: this worker's k-th session goes to replica (k + worker id) mod n (its
        # session ids are worker_id * SESSION_BLOCK + k), and all its turns stay there (its prefix cache).
        self.replica_shift = spec.worker_id - spec.worker_id * SESSION_BLOCK
        # The same seed in every worker: shared prefixes must be identical across processes (cache hits).
        workload = Workload(
            spec.profile, spec.sizer, spec.model, spec.seed, api=spec.target.api, worker=spec.worker_id
        )
        self.requests_log = RequestLog(spec.save_requests, spec.worker_id)
        # Shipments are encoded a histogram per loop turn (``_encode``), between socket reads.
        self.book = WindowBook(
            spec.worker_id, deltas.put, spec.slo, detail=spec.detail, wake=self._encode_soon
        )
        self.encoder: asyncio.Task[None] | None = None
        self.health = HealthSampler()
        self.trace = RequestTrace(spec.worker_id)
        self.reads = ReadTrace.from_env(spec.worker_id)  # benchmarks/bench_tail.py: None unless asked for
        self.gate = Gate()
        self.mode: Mode = "closed"
        self.sessions = 0
        # --otel: the loops send through send_traced; without it nothing of OpenTelemetry is imported and
        # the loops call send itself (no branch per request for it).
        self.spans: RequestSpans | None = None
        send: Send = self.send
        if spec.otel:
            from loadgen.run.otel import RequestSpans

            self.spans = RequestSpans(spec.worker_id, spec.target)
            send = self.send_traced
        self.closed = ClosedLoop(workload, send, self.gate, self._session_id, spec.seed, spec.worker_id)
        rng = random.Random(stream_seed(spec.seed, spec.worker_id))
        self.open = OpenLoop(workload, send, self.gate, self._session_id, rng, self.book)
        self.done = asyncio.Event()

    def _session_id(self) -> int:
        # Unique across workers: the worker id in the high digits.
        self.sessions += 1
        return self.spec.worker_id * SESSION_BLOCK + self.sessions

    # ---- plumbing ---------------------------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        # No such signal here, or not the main thread (a Ray actor's worker: the actor is killed instead).
        with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, self.handle, StopLoad(True))
        if self.reads is not None:
            self.reads.start(loop)
        threading.Thread(target=self._read_commands, args=(loop,), daemon=True).start()
        watch = asyncio.create_task(self.health.watch())
        ticker = asyncio.create_task(self._tick())
        self.deltas.put(WorkerReady(self.spec.worker_id, os.getpid()))
        await self.done.wait()
        ticker.cancel()
        watch.cancel()
        if self.encoder is not None:
            self.encoder.cancel()  # its outbox is empty: the stop drained it
        for client in self.clients:
            await client.aclose()
        self.trace.close()
        if self.reads is not None:
            self.reads.close(loop)
        self.requests_log.close()
        if self.spans is not None:
            self.spans.close()

    def _read_commands(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            try:
                cmd = self.commands.get()
            except (EOFError, OSError):
                loop.call_soon_threadsafe(self.handle, StopLoad(True))
                return
            loop.call_soon_threadsafe(self.handle, cmd)

    def handle(self, cmd: WorkerCommand) -> None:
        match cmd:
            case ClosedLoad(level=level, cancel=cancel):
                if self.mode == "open":
                    self.open.halt(cancel)
                self.mode = "closed"
                self.closed.set_level(level, cancel)
            case OpenLoad(arrivals=arrivals, cap=cap):
                if self.mode == "closed":
                    self.closed.set_level(0, cancel=False)
                self.mode = "open"
                self.open.set(arrivals, cap)
            case PauseLoad():
                self.gate.paused = True
                self.gate.resumed.clear()
                # Arrivals queued behind the concurrency cap are dropped like the schedule's later ones: a
                # freed slot must not send them while paused.
                self.open.drop_backlog()
            case ResumeLoad():
                self.gate.paused = False
                self.gate.resumed.set()
                if self.mode == "open":
                    self.open.restart()
            case Flush(window=window):
                if self.spans is not None:
                    self.spans.flushed(cmd)
                self.trace.cut(window, time.monotonic_ns())
                self._ship()
                self.book.open(window)
                self.book.ship_closed()
            case StopLoad(cancel=cancel):
                self.trace.cut(-1, time.monotonic_ns())
                self._on_stop(cancel)

    def _on_stop(self, cancel: bool) -> None:
        if self.gate.stopping:
            if cancel:  # a drain that takes too long: now cancel what is left
                for task in self.closed.tasks() + self.open.tasks():
                    task.cancel()
            return
        asyncio.get_running_loop().create_task(self._stop(cancel))

    async def _tick(self) -> None:
        # Deadlines, not sleeps in a row: ticks do not drift with the work done in them.
        period = int(self.spec.tick_s * 1e9)
        deadline = time.monotonic_ns() + period
        while True:
            await asyncio.sleep(max(0.0, (deadline - time.monotonic_ns()) / 1e9))
            deadline += period
            self._ship()

    def _ship(self) -> None:
        start_ns = time.monotonic_ns()
        count, longest_ns = 0, 0
        for client in self.clients:
            waiting, wait_ns = client.first_token_waits(start_ns)
            count, longest_ns = count + waiting, max(longest_ns, wait_ns)
        backlog, backing_off = len(self.open.backlog), len(self.closed.backing_off)
        self.book.ship(backlog, self.health.take, backing_off, (count, longest_ns / 1e9))
        if self.reads is not None:
            self.reads.shipped(start_ns)

    def _encode_soon(self) -> None:
        if self.encoder is None:
            self.encoder = asyncio.get_running_loop().create_task(self._encode())

    async def _encode(self) -> None:
        """The outbox's deltas, one histogram per loop turn: a read that becomes ready meanwhile waits for
        one histogram's encoding (tens of µs), not a whole shipment's (about a millisecond)."""
        book, reads = self.book, self.reads
        try:
            while True:
                start_ns = time.monotonic_ns()
                more = book.encode_step()
                if reads is not None:
                    reads.encoded(start_ns)
                if not more:
                    return
                await asyncio.sleep(0)
        finally:
            self.encoder = None

    async def _stop(self, cancel: bool) -> None:
        self.gate.stopping = True
        self.open.halt(cancel)
        tasks = self.closed.tasks() + self.open.tasks()
        if cancel:
            for task in tasks:
                task.cancel()
        self.gate.resumed.set()
        if tasks:
            await asyncio.wait(tasks, timeout=None if not cancel else 5.0)
        self._ship()
        self.book.close_all()  # nothing is in flight: every window closes now
        self.book.drain()
        self.done.set()

    # ---- one request ------------------------------------------------------------------------------------
    async def send(
        self, spec: RequestSpec, intended_ns: int, reserved: int | None = None, traceparent: str | None = None
    ) -> RequestResult:
        book = self.book
        keys = self.replica_keys
        at = (spec.session_id + self.replica_shift) % len(keys) if keys else 0  # O(1): no lock, no scan
        self.requests_log.write(spec, intended_ns)
        window = book.sending(reserved)
        try:
            result = await self.clients[at].send(spec, intended_ns, book.live, traceparent)
        finally:
            book.landed(window)
        book.record(window, result, keys[at] if keys else None)
        self.trace.write(result, window)
        return result

    async def send_traced(
        self, spec: RequestSpec, intended_ns: int, reserved: int | None = None
    ) -> RequestResult:
        """``send`` with ``--otel``: the request carries its span's trace context, and its span is made
        once it has ended, in the window it was counted in (the one ``send`` picks: see ``WindowBook.sending``)."""
        spans = self.spans
        assert spans is not None, "send_traced without --otel"
        window = self.book.window if reserved is None else reserved
        trace_id, span_id, header = spans.new_ids()
        result = await self.send(spec, intended_ns, reserved, header)
        spans.record(trace_id, span_id, window, spec, result)
        return result

"""Where a worker's time goes between a server's write and the client's stamp of it: a timeline of every
socket read's callback, task step, interval shipment and garbage collection, for ``benchmarks/bench_tail.py``.

On only with ``RAMP_TRACE_READS=1`` beside ``RAMP_TRACE_DIR`` (read once, as the worker starts); written at
the worker's end as ``reads-<worker>.npz`` there, on the host's monotonic clock (the simulator's clock too),
so each request's first-token read joins its server-side write time through ``X-Request-Id``. Off, none of
it runs: no branch is added per read (the pool's connection class is swapped only when on), one per tick.

What is kept (int64 nanoseconds, at most ``LIMIT`` values a series, then ``full`` says so):

* ``reads``: (entry, stamp, exit, CPU) of each ``buffer_updated``: the callback's start, the stamp the
  client records for those bytes, its end (the bytes kept for ``parses``), and the thread's CPU time it
  took (less than exit - entry when the OS ran something else meanwhile);
* ``parses``: (start, end, CPU) of each ``Pool.parse_reads``: the reads of a loop turn parsed and sunk;
* ``steps``: (start, end, CPU) of each task step (a coroutine's run between two awaits) of the tasks created
  after the start: requests finishing and new ones being sent, the tick;
* ``ships``: (start, end) of each interval shipment (ending the windows' intervals, queueing their deltas);
* ``encodes``: (start, end) of each piece of a queued delta's encoding (a histogram, ``Worker._encode``);
* ``gcs``: (start, end, generation) of each garbage collection;
* ``cpu``: (time, CPU used, time spent runnable but waiting for a core) of the loop's thread at each
  shipment: how much of the ``idle`` the OS took (Linux schedstat; -1 elsewhere).
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from array import array
from collections.abc import Coroutine, Generator
from typing import Any, ClassVar

from loadgen.h1 import Connection, Pool
from loadgen.run.health import runqueue_wait_ns

LIMIT = 6_000_000  # values kept per series: 48 MB at most each, ~2M reads

_monotonic_ns = time.monotonic_ns
_thread_ns = time.thread_time_ns


class TimedConnection(Connection):
    """A ``Connection`` that logs each read callback's entry, stamp and exit."""

    __slots__ = ()
    reads: ClassVar[array[int]] = array("q")

    def buffer_updated(self, nbytes: int) -> None:
        cpu = _thread_ns()
        entry = _monotonic_ns()
        super().buffer_updated(nbytes)
        reads = TimedConnection.reads
        if len(reads) < LIMIT:
            pending = self.pool.pending  # empty when this read made a flood be parsed at once
            stamp = pending[-1][2] if pending else self.t_ns
            reads.extend((entry, stamp, _monotonic_ns(), _thread_ns() - cpu))


class TimedCoroutine(Coroutine[Any, Any, Any]):
    """Wraps a task's coroutine: logs (start, end) of each step the task runs."""

    __slots__ = ("coro", "steps")

    def __init__(self, coro: Coroutine[Any, Any, Any], steps: array[int]) -> None:
        self.coro = coro
        self.steps = steps

    def send(self, value: Any) -> Any:
        cpu = _thread_ns()
        start = _monotonic_ns()
        try:
            return self.coro.send(value)
        finally:
            if len(self.steps) < LIMIT:
                self.steps.extend((start, _monotonic_ns(), _thread_ns() - cpu))

    def throw(self, *args: Any) -> Any:
        cpu = _thread_ns()
        start = _monotonic_ns()
        try:
            return self.coro.throw(*args)
        finally:
            if len(self.steps) < LIMIT:
                self.steps.extend((start, _monotonic_ns(), _thread_ns() - cpu))

    def close(self) -> None:
        self.coro.close()

    def __await__(self) -> Generator[Any, None, Any]:
        return self.coro.__await__()


class ReadTrace:
    """One worker's timeline; ``start`` in its loop, ``shipped`` after each shipment, ``close`` at its end."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.steps: array[int] = array("q")
        self.ships: array[int] = array("q")
        self.encodes: array[int] = array("q")
        self.parses: array[int] = array("q")
        self.gcs: array[int] = array("q")
        self.cpu: array[int] = array("q")
        self.gc_start = 0

    @classmethod
    def from_env(cls, worker_id: int) -> ReadTrace | None:
        trace_dir = os.environ.get("RAMP_TRACE_DIR")
        if not trace_dir or os.environ.get("RAMP_TRACE_READS") != "1":
            return None
        return cls(os.path.join(trace_dir, f"reads-{worker_id}.npz"))

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """From now on: new connections time their reads, new tasks their steps, the collector its passes."""
        Pool.connection_class = TimedConnection
        Pool.parse_log = self.parses
        steps = self.steps

        def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
            return asyncio.Task(TimedCoroutine(coro, steps), loop=loop, **kwargs)

        loop.set_task_factory(factory)
        gc.callbacks.append(self.on_gc)

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        now = _monotonic_ns()
        if phase == "start":
            self.gc_start = now
        elif len(self.gcs) < LIMIT:
            self.gcs.extend((self.gc_start, now, info.get("generation", -1)))

    def shipped(self, start_ns: int) -> None:
        if len(self.ships) < LIMIT:
            now = _monotonic_ns()
            wait = runqueue_wait_ns()
            self.ships.extend((start_ns, now))
            self.cpu.extend((now, time.thread_time_ns(), -1 if wait is None else wait))

    def encoded(self, start_ns: int) -> None:
        if len(self.encodes) < LIMIT:
            self.encodes.extend((start_ns, _monotonic_ns()))

    def close(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Write the timeline; stop timing (new connections, and ``loop``'s new tasks, are plain again)."""
        import numpy as np

        Pool.connection_class = Connection
        Pool.parse_log = None
        if loop is not None:
            loop.set_task_factory(None)
        if self.on_gc in gc.callbacks:
            gc.callbacks.remove(self.on_gc)
        reads, TimedConnection.reads = TimedConnection.reads, array("q")
        series = (reads, self.steps, self.ships, self.gcs, self.cpu, self.encodes, self.parses)

        def values(s: array[int]) -> np.ndarray:
            return np.frombuffer(s, dtype=np.int64) if len(s) else np.zeros(0, np.int64)

        np.savez(
            self.path,
            full=np.asarray([len(s) >= LIMIT for s in series]),
            reads=values(reads),
            steps=values(self.steps),
            ships=values(self.ships),
            gcs=values(self.gcs),
            cpu=values(self.cpu),
            encodes=values(self.encodes),
            parses=values(self.parses),
        )

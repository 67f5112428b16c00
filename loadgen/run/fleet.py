"""The worker processes as the controller sees them: spawned, given their share of the load, drained of
their messages, and joined (or terminated) at the end.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import queue
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from loadgen.config import RunConfig, SetupError
from loadgen.run.protocol import ClosedLoad, OpenLoad, StopLoad, WorkerCommand, WorkerMessage
from loadgen.run.worker import WorkerSpec, worker_main

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess
    from multiprocessing.queues import Queue

    from loadgen.run.state import Load
    from loadgen.workload import PromptSizer

DEFAULT_MAX_CONNECTIONS = 4096
DRAIN_LIMIT = 10_000
READY_S = 60.0  # how long the workers get to start
DRAIN_S = 60.0  # how long a graceful stop lets the streams in flight finish
CANCEL_S = 2.0  # how long cancelled streams get to wind down
JOIN_TERM_S = 2.0  # how long a worker sent SIGTERM at the end gets to exit before SIGKILL

OnMessage = Callable[[WorkerMessage], None]


def drain(q: Queue[WorkerMessage], limit: int = DRAIN_LIMIT) -> list[WorkerMessage]:
    """Everything waiting on a multiprocessing queue, without blocking."""
    items = []
    for _ in range(limit):
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            break
    return items


class Fleet:
    """The run's worker processes; every message they send is handed to the controller's ``on_message``."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.procs: list[BaseProcess] = []
        self.cmd_queues: list[Queue[WorkerCommand]] = []
        self.messages: Queue[WorkerMessage] | None = None  # one queue from every worker
        self.alive: set[int] = set()  # workers that said they are ready
        self.fatal: list[str] = []  # what the workers that died said

    def spawn(self, model: str, sizer: PromptSizer) -> None:
        config = self.config
        ctx = mp.get_context("spawn")
        self.messages = ctx.Queue()
        for wid in range(max(1, int(config.workers))):
            spec = WorkerSpec(
                worker_id=wid,
                target=replace(config.target, model=model),
                profile=config.profile,
                sizer=sizer,
                model=model,
                seed=config.seed,
                transport=config.transport,
                max_connections=config.max_connections or DEFAULT_MAX_CONNECTIONS,
                slo=config.slo if config.slo is not None else config.profile.slo,
            )
            commands: Queue[WorkerCommand] = ctx.Queue()
            proc = ctx.Process(
                target=worker_main,
                args=(spec, commands, self.messages),
                name=f"ramp-worker-{wid}",
                daemon=True,
            )
            proc.start()
            self.procs.append(proc)
            self.cmd_queues.append(commands)

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p.pid is not None]

    def any_alive(self) -> bool:
        return any(p.is_alive() for p in self.procs)

    async def wait_ready(self, on_message: OnMessage, stop_asked: Callable[[], bool]) -> None:
        """Until every worker said it is ready; ``SetupError`` when one fails, exits or takes too long, or
        when a stop is asked for first."""
        deadline = time.monotonic() + READY_S
        want = set(range(len(self.procs)))
        while self.alive != want:
            for msg in await asyncio.to_thread(self.drain_blocking, 0.2):
                on_message(msg)
            if self.fatal:
                raise SetupError("load worker failed: " + self.fatal[0])
            if time.monotonic() > deadline:
                raise SetupError(f"load workers did not start within {READY_S:.0f} s")
            if stop_asked():
                raise SetupError("stopped before the load started")
            for proc in self.procs:
                if not proc.is_alive() and proc.exitcode not in (None, 0):
                    raise SetupError(f"load worker exited with code {proc.exitcode}")

    # ---- commands ---------------------------------------------------------------------------------------
    def send_all(self, cmd: WorkerCommand) -> None:
        for q in self.cmd_queues:
            try:
                q.put(cmd)
            except (OSError, ValueError):
                pass

    def apply_load(self, load: Load) -> None:
        """Each worker's share of the level (closed) or of the rate and the cap (open)."""
        config = self.config
        n = max(1, len(self.cmd_queues))
        for wid, q in enumerate(self.cmd_queues):
            share = load.level // n + (1 if wid < load.level % n else 0)
            if load.mode == "closed":
                q.put(ClosedLoad(share, config.cancel_on_lower))
            else:
                q.put(OpenLoad(load.rate / n, config.arrival, config.burstiness, share if load.level else 0))

    # ---- messages ---------------------------------------------------------------------------------------
    def drain(self) -> list[WorkerMessage]:
        return drain(self.messages) if self.messages is not None else []

    def drain_blocking(self, timeout_s: float) -> list[WorkerMessage]:
        """What the workers sent, waiting up to ``timeout_s`` for the first message (call in a thread)."""
        if self.messages is None:
            return []
        try:
            first = self.messages.get(timeout=timeout_s)
        except queue.Empty:
            return []
        return [first, *drain(self.messages)]

    async def stop(self, cancel: bool, on_message: OnMessage) -> None:
        """Stop every worker and take what they send on the way out. Without ``cancel`` the streams in
        flight finish (for up to ``DRAIN_S``, then they are cancelled, counted as cancelled)."""
        self.send_all(StopLoad(cancel))
        deadline = time.monotonic() + (CANCEL_S if cancel else DRAIN_S)
        forced = cancel
        while self.procs:
            if time.monotonic() >= deadline:
                if forced:
                    break
                forced = True  # the drain took too long: cancel what is left
                self.send_all(StopLoad(True))
                deadline = time.monotonic() + CANCEL_S
            # In a thread: the controller's loop stays free for telemetry (the sample at the last window's end).
            for msg in await asyncio.to_thread(self.drain_blocking, 0.05):
                on_message(msg)
            if not self.any_alive():
                break
        for msg in self.drain():
            on_message(msg)

    def join(self) -> None:
        """Wait for the workers to exit; one that does not is sent SIGTERM (it cancels its streams and
        exits), then SIGKILL. None is left running: a worker's load outliving its run loads a server for
        nobody."""
        for proc in self.procs:
            proc.join(timeout=0.2)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=JOIN_TERM_S)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1.0)

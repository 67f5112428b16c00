"""The load workers as the controller sees them: placed, started with their share of the load, commanded,
drained of their messages, and ended at the end — one interface (``Fleet``), two implementations: local
processes (``ProcessFleet``, ``--workers N``) and Ray actors across a cluster's nodes
(``loadgen.run.ray_fleet.RayFleet``, ``--ray``). Both run the same worker (``loadgen.run.worker``).

A worker that dies under load (its process exits, its actor or node dies) is never a silent drop in load:
it is taken off the workers every window waits for, the run says so (``WorkerFatal``, naming the host and
the load it carried, which is lost until the next load change spreads the level over the workers left),
and the run fails only when none is left.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import platform
import queue
import shutil
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from loadgen.arrivals import ArrivalSpec, stream_seed
from loadgen.childproc import main_left_alone
from loadgen.config import SetupError
from loadgen.run.config import RunConfig
from loadgen.run.protocol import (
    ClosedLoad,
    OpenLoad,
    StopLoad,
    WorkerCommand,
    WorkerFatal,
    WorkerMessage,
)
from loadgen.run.worker import WorkerSpec, worker_main

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess
    from multiprocessing.queues import Queue

    from loadgen.run.health import BoundJudge
    from loadgen.run.state import Load
    from loadgen.workload import PromptSizer

DEFAULT_MAX_CONNECTIONS = 4096
DRAIN_LIMIT = 10_000
READY_S = 60.0  # how long the workers get to start
DRAIN_S = 60.0  # how long a graceful stop lets the streams in flight finish
CANCEL_S = 2.0  # how long cancelled streams get to wind down
JOIN_TERM_S = 2.0  # how long a worker sent SIGTERM at the end gets to exit before SIGKILL

OnMessage = Callable[[WorkerMessage], None]


def drain(
    q: Queue[WorkerMessage] | queue.Queue[WorkerMessage], limit: int = DRAIN_LIMIT
) -> list[WorkerMessage]:
    """Everything waiting on a queue, without blocking."""
    items = []
    for _ in range(limit):
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            break
    return items


def worker_specs(config: RunConfig, model: str, sizer: PromptSizer) -> list[WorkerSpec]:
    """What each worker is started with: the same for every worker but its id."""
    return [
        WorkerSpec(
            worker_id=wid,
            target=replace(config.target, model=model),
            profile=config.profile,
            sizer=sizer,
            model=model,
            seed=config.seed,
            transport=config.transport,
            max_connections=config.max_connections or DEFAULT_MAX_CONNECTIONS,
            slo=config.slo if config.slo is not None else config.profile.slo,
            detail=config.save_requests_detail,
            save_requests=config.save_requests,
            otel=config.otel,
        )
        for wid in range(max(1, int(config.workers)))
    ]


def shares(total: int, workers: Iterable[int]) -> dict[int, int]:
    """``total`` (streams, a cap) split over ``workers`` as evenly as whole numbers allow, lowest ids first."""
    order = sorted(workers)
    n = max(1, len(order))
    return {wid: total // n + (1 if at < total % n else 0) for at, wid in enumerate(order)}


def host_table(hosts: Mapping[int, str], size: int) -> list[dict[str, object]]:
    """The record header's ``fleet.hosts``: each host, its workers and their share of every level and rate."""
    by_host: dict[str, list[int]] = {}
    for wid in range(size):
        by_host.setdefault(hosts.get(wid, "?"), []).append(wid)
    return [
        {"host": host, "workers": wids, "share": round(len(wids) / max(1, size), 4)}
        for host, wids in sorted(by_host.items())
    ]


class Fleet(ABC):
    """The run's workers; every message they send is handed to the controller's ``on_message``.

    ``alive``: the workers that said they are ready and are not lost — the ones a window waits for.
    ``fatal``: what the workers that died said (the controller adds to it). Subclasses start, command and
    drain the workers; the waiting, the load's split and the stop are the same for every kind.
    """

    kind = "local"

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.size = max(1, int(config.workers))
        self.alive: set[int] = set()
        self.fatal: list[str] = []
        self.lost: dict[int, dict[str, object]] = {}  # worker -> the record's worker_lost event
        self.hosts: dict[int, str] = {}  # worker -> the host it runs on
        self.carried: dict[int, str] = {}  # worker -> the load it was given last, in words
        self.stopping = False

    # ---- what each kind does ----------------------------------------------------------------------------
    async def place(self) -> dict[str, object]:
        """Before the record's header is written: where the workers will run (its ``fleet`` key)."""
        self.hosts = {wid: platform.node() for wid in range(self.size)}
        return {"kind": self.kind, "workers": self.size, "hosts": host_table(self.hosts, self.size)}

    @abstractmethod
    def spawn(self, model: str, sizer: PromptSizer) -> None: ...

    @abstractmethod
    def send(self, wid: int, cmd: WorkerCommand) -> None: ...

    @abstractmethod
    def drain(self) -> list[WorkerMessage]: ...

    @abstractmethod
    def drain_blocking(self, timeout_s: float) -> list[WorkerMessage]:
        """What the workers sent, waiting up to ``timeout_s`` for the first message (call in a thread)."""

    @abstractmethod
    def any_alive(self) -> bool: ...

    @abstractmethod
    def join(self) -> None:
        """End every worker: none is left running (a worker's load outliving its run loads a server for
        nobody)."""

    def pids(self) -> list[int]:
        """The workers' process ids on this host (for CPU accounting); empty where they run elsewhere."""
        return []

    def setup_problem(self) -> str | None:
        """Why the workers cannot start (one exited), while they are starting; None when none is known."""
        return None

    def step_keys(self, judges: Mapping[int, BoundJudge]) -> dict[str, object]:
        """A step line's extra keys about the fleet (Ray: per host health, the flushes' round trips)."""
        return {}

    # ---- shared -----------------------------------------------------------------------------------------
    def working(self) -> list[int]:
        """The workers not lost: the ones the load is spread over."""
        return [wid for wid in range(self.size) if wid not in self.lost]

    def send_all(self, cmd: WorkerCommand) -> None:
        for wid in self.working():
            self.send(wid, cmd)

    def apply_load(self, load: Load) -> None:
        """Each working worker's share of the level (closed) or of the rate and the cap (open)."""
        config = self.config
        working = self.working()
        split = shares(load.level, working)
        n = max(1, len(working))
        for wid in working:
            if load.mode == "closed":
                self.carried[wid] = f"{split[wid]} of {load.level} streams"
                self.send(wid, ClosedLoad(split[wid], config.cancel_on_lower))
            else:
                self.carried[wid] = f"{load.rate / n:g} of {load.rate:g} req/s"
                cap = split[wid] if load.level else 0
                arrivals = ArrivalSpec(
                    config.arrival, load.rate / n, config.burstiness, stream_seed(config.seed, wid)
                )
                self.send(wid, OpenLoad(arrivals, cap))

    def lose(self, wid: int, why: str) -> WorkerFatal:
        """Worker ``wid`` is gone (``why``): off the workers a window waits for, its lost load stated."""
        carried = self.carried.get(wid, "no load yet")
        left = len(self.working()) - (0 if wid in self.lost else 1)
        host = self.hosts.get(wid, "?")
        self.lost[wid] = {"worker": wid, "host": host, "why": why, "carried": carried, "workers_left": left}
        self.alive.discard(wid)
        return WorkerFatal(
            wid,
            f"{why} (host {host}); the load it carried ({carried}) is lost until the next load change "
            f"spreads the level over the {left} worker{'s' if left != 1 else ''} left",
        )

    def screen(self, msgs: list[WorkerMessage]) -> list[WorkerMessage]:
        """A worker's own ``WorkerFatal`` marks it lost (once), with the load it carried named."""
        out: list[WorkerMessage] = []
        for msg in msgs:
            if isinstance(msg, WorkerFatal):
                if msg.worker_id in self.lost:
                    continue
                msg = self.lose(msg.worker_id, msg.message)
            out.append(msg)
        return out

    def loss_event(self, wid: int) -> dict[str, object] | None:
        """The record's ``worker_lost`` event for a lost worker, else None."""
        return self.lost.get(wid)

    async def wait_ready(self, on_message: OnMessage, stop_asked: Callable[[], bool]) -> None:
        """Until every worker said it is ready; ``SetupError`` when one fails, exits or takes too long, or
        when a stop is asked for first."""
        deadline = time.monotonic() + READY_S
        want = set(range(self.size))
        while self.alive != want:
            for msg in await asyncio.to_thread(self.drain_blocking, 0.2):
                on_message(msg)
            if self.fatal:
                raise SetupError("load worker failed: " + self.fatal[0])
            if time.monotonic() > deadline:
                raise SetupError(f"load workers did not start within {READY_S:.0f} s")
            if stop_asked():
                raise SetupError("stopped before the load started")
            problem = self.setup_problem()
            if problem is not None:
                raise SetupError(problem)

    async def stop(self, cancel: bool, on_message: OnMessage) -> None:
        """Stop every worker and take what they send on the way out. Without ``cancel`` the streams in
        flight finish (for up to ``DRAIN_S``, then they are cancelled, counted as cancelled)."""
        self.stopping = True
        self.send_all(StopLoad(cancel))
        deadline = time.monotonic() + (CANCEL_S if cancel else DRAIN_S)
        forced = cancel
        while self.any_alive():
            if time.monotonic() >= deadline:
                if forced:
                    break
                forced = True  # the drain took too long: cancel what is left
                self.send_all(StopLoad(True))
                deadline = time.monotonic() + CANCEL_S
            # In a thread: the controller's loop stays free for telemetry (the sample at the last window's end).
            for msg in await asyncio.to_thread(self.drain_blocking, 0.05):
                on_message(msg)
        for msg in self.drain():
            on_message(msg)


class ProcessFleet(Fleet):
    """The workers as local processes (``--workers N``), one command queue each, one message queue back."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.procs: list[BaseProcess] = []
        self.cmd_queues: list[Queue[WorkerCommand]] = []
        self.messages: Queue[WorkerMessage] | None = None  # one queue from every worker
        self.log_dir: str | None = None  # the workers' logs: private, kept only when the run failed

    def spawn(self, model: str, sizer: PromptSizer) -> None:
        ctx = mp.get_context("spawn")
        self.messages = ctx.Queue()
        self.log_dir = tempfile.mkdtemp(prefix="ramp-run-")  # mode 0700, a name nobody can guess
        for spec in worker_specs(self.config, model, sizer):
            spec = replace(spec, log_dir=self.log_dir)
            commands: Queue[WorkerCommand] = ctx.Queue()
            proc = ctx.Process(
                target=worker_main,
                args=(spec, commands, self.messages),
                name=f"ramp-worker-{spec.worker_id}",
                daemon=True,
            )
            with main_left_alone():  # a script without the __main__ guard works too (the README's)
                proc.start()
            self.procs.append(proc)
            self.cmd_queues.append(commands)

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p.pid is not None]

    def any_alive(self) -> bool:
        return any(p.is_alive() for p in self.procs)

    def setup_problem(self) -> str | None:
        for proc in self.procs:
            if not proc.is_alive() and proc.exitcode not in (None, 0):
                return f"load worker exited with code {proc.exitcode}"
        return None

    def send(self, wid: int, cmd: WorkerCommand) -> None:
        if wid >= len(self.cmd_queues):  # never spawned (a test's fleet): commands go nowhere
            return
        try:
            self.cmd_queues[wid].put(cmd)
        except (OSError, ValueError):
            pass

    def exits(self) -> list[WorkerMessage]:
        """A worker process that exited while the run still wanted its load (killed, crashed)."""
        if self.stopping:
            return []  # told to stop: exiting is what it should do
        return [
            self.lose(
                wid, f"worker {wid} (pid {proc.pid}) exited with code {proc.exitcode}{self.log_of(wid)}"
            )
            for wid, proc in enumerate(self.procs)
            if wid not in self.lost and wid in self.alive and proc.exitcode is not None
        ]

    def log_of(self, wid: int) -> str:
        """`` (its log: PATH)`` for worker ``wid``, named in the error (the folder is kept when it failed)."""
        return f" (its log: {self.log_dir}/worker-{wid}.log)" if self.log_dir is not None else ""

    def drain(self) -> list[WorkerMessage]:
        msgs = drain(self.messages) if self.messages is not None else []
        return self.screen(msgs) + self.exits()

    def drain_blocking(self, timeout_s: float) -> list[WorkerMessage]:
        if self.messages is None:
            return []
        try:
            first = self.messages.get(timeout=timeout_s)
        except queue.Empty:
            return self.exits()
        return self.screen([first, *drain(self.messages)]) + self.exits()

    def join(self) -> None:
        """Wait for the workers to exit; one that does not is sent SIGTERM (it cancels its streams and
        exits), then SIGKILL."""
        for proc in self.procs:
            proc.join(timeout=0.2)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=JOIN_TERM_S)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1.0)
        if self.log_dir is not None and not self.fatal and not self.lost:
            shutil.rmtree(self.log_dir, ignore_errors=True)  # a run that did not fail leaves nothing behind

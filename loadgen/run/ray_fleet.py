"""``--ray [ADDRESS]``: the same load worker (``loadgen.run.worker.serve``) as Ray actors spread over a
cluster's nodes — one implementation of ``loadgen.run.fleet.Fleet``, the controller unchanged.

Placement: one placement group of ``--workers`` bundles of one CPU each, spread over the nodes (SPREAD), so
the hosts and their share of the load are known before the record's header is written. Each actor runs the
worker's own loop (uvloop) on a thread of its own; only the commands (in order: each carries a sequence
number, since a threaded actor may run two calls at once) and the interval deltas (a long poll per actor,
answered about four times a second) travel over Ray — nothing per request or chunk.

Window edges: each worker cuts its window on its own clock when the flush arrives. The round trip of every
flush (sent → the actor queued it for the worker) is measured; a window edge on any worker lies within that
time of the controller's cut, so its p50/p99 is the edge's stated skew (the record's ``fleet`` header has
the round trip measured at setup, each step line's ``fleet`` the flushes since the previous step line).

A dead actor or node (its long poll fails) is a lost worker (``Fleet.lose``), never a silent drop in load.
Every actor is killed at the end of the run, whatever ended it; a driver that dies takes its actors with it
(Ray's owner fate-sharing: none is detached).

Which Ray (``init_ray``): the address given (``auto``: a cluster started on this machine), else
``RAY_ADDRESS``, else a new local Ray that listens on 127.0.0.1 only. Every address ramp shows (messages, the
record) goes through ``shown_address``: no password, with or without a scheme.
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import queue
import secrets
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from loadgen.config import SetupError
from loadgen.run.config import RunConfig
from loadgen.run.fleet import READY_S, Fleet, host_table, worker_specs
from loadgen.run.protocol import Flush, StopLoad, WorkerCommand, WorkerMessage
from loadgen.run.worker import WorkerSpec, serve
from loadgen.target.http import scrub, url_secrets

if TYPE_CHECKING:
    from loadgen.run.health import BoundJudge
    from loadgen.workload import PromptSizer

INSTALL_HINT = "--ray needs Ray: pip install 'llm-ramp[ray]'"
TAKE_S = 0.5  # an actor's long poll: it answers at once when it has messages, else after this
PINGS = 5  # round trips per actor measured at setup
ACTOR_CONCURRENCY = 4  # a long poll and the commands at the same time
ORPHAN_S = 15.0  # an actor whose driver has not polled it for this long stops its load and exits


LOOPBACK = "127.0.0.1"
# Read by Ray when it is imported: on Linux Ray turns a node address of 127.0.0.1 into the machine's
# routable one (a cluster's nodes must reach it) and its servers then listen on every interface. "0" tells
# it this Ray is local: its GCS, raylet, agents and workers listen on 127.0.0.1.
RAY_LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def ramp_starts_ray(address: str | None) -> bool:
    """``--ray`` without an address and without ``RAY_ADDRESS``: a Ray that ramp starts itself."""
    return not address and not os.environ.get("RAY_ADDRESS")


def shown_address(text: str, address: str | None) -> str:
    """``text`` (a message, an address) with the Ray ``address``'s password masked, also where the address
    has no scheme (``user:pw@host:6379``, which ``scrub`` alone cannot tell from other text)."""
    if not address:
        return scrub(text)
    as_url = address if "://" in address else "ray://" + address
    return scrub(text, url_secrets(as_url))


def init_ray(address: str | None) -> ModuleType:
    """``ray.init`` for ``--ray [ADDRESS]`` (which Ray: the module docstring); the ``ray`` module.
    ``SetupError`` (secrets masked) when the cluster cannot be reached."""
    local = ramp_starts_ray(address)
    before = os.environ.get(RAY_LOCAL_ONLY_ENV)
    if local:  # before the import, and in the environment its processes start with
        os.environ[RAY_LOCAL_ONLY_ENV] = "0"
    try:
        ray = import_ray()
        where: dict[str, Any] = (
            {"address": "local", "_node_ip_address": LOOPBACK} if local else {"address": address or None}
        )
        ray.init(
            **where,
            include_dashboard=False,
            log_to_driver=False,  # the workers' output must not tear the console's screen
            logging_level=logging.ERROR,  # its notices would tear the console too
        )
    except SetupError:
        raise
    except Exception as exc:
        said = shown_address(str(exc), address)
        raise SetupError(f"--ray: cannot reach the Ray cluster ({said})") from None
    finally:
        if local and before is None:
            os.environ.pop(RAY_LOCAL_ONLY_ENV, None)
        elif local and before is not None:
            os.environ[RAY_LOCAL_ONLY_ENV] = before
    return ray


def import_ray() -> ModuleType:
    """The ``ray`` module; ``SetupError`` with the install line when it is not installed."""
    try:
        import ray
    except ImportError:
        raise SetupError(INSTALL_HINT) from None
    return ray


def percentiles_ms(values_ns: list[int]) -> dict[str, float | int | None]:
    """p50/p99 (ms) and the count of a list of durations (ns); None figures when there is none."""
    if not values_ns:
        return {"p50": None, "p99": None, "n": 0}
    ordered = sorted(values_ns)
    pick = lambda q: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6, 3)  # noqa: E731
    return {"p50": pick(0.5), "p99": pick(0.99), "n": len(ordered)}


class WorkerActor:
    """One load worker inside a Ray actor (made remote in ``RayFleet``): the worker's loop on a thread of
    its own, fed by an ordered command queue, read by the driver's long poll (``take``)."""

    def __init__(self) -> None:
        self.commands: queue.Queue[WorkerCommand] = queue.Queue()
        self.outbox: queue.Queue[WorkerMessage] = queue.Queue()
        self.finished = threading.Event()
        self.lock = threading.Lock()
        self.next_seq = 0
        self.early: dict[int, WorkerCommand] = {}  # commands that overtook an earlier one
        self.polled = time.monotonic()  # the driver's last long poll

    def where(self) -> tuple[str, int]:
        return platform.node(), os.getpid()

    def ping(self) -> None:
        return None

    def start(self, spec: WorkerSpec, cpus: str = "") -> None:
        """Start the worker; ``cpus`` ("0,1"): pin its loop's thread to one of them (the selftest does)."""
        self.polled = time.monotonic()
        threading.Thread(target=self.serve, args=(spec, cpus), name="ramp-worker", daemon=True).start()
        threading.Thread(target=self.watch_driver, name="ramp-orphan-watch", daemon=True).start()

    def watch_driver(self) -> None:
        """Ray ends a dead driver's actors; should it not (a partitioned node), the silence does: no long
        poll for ``ORPHAN_S`` means nobody measures this load, so it stops and the actor exits."""
        while not self.finished.wait(1.0):
            if time.monotonic() - self.polled > ORPHAN_S:
                self.commands.put(StopLoad(True))
                self.finished.wait(10.0)
                os._exit(0)

    def serve(self, spec: WorkerSpec, cpus: str) -> None:
        allowed = [int(c) for c in cpus.split(",") if c.strip()]
        if allowed and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {allowed[spec.worker_id % len(allowed)]})  # this thread only (Linux)
        try:
            serve(spec, self.commands, self.outbox)
        finally:
            self.finished.set()

    def command(self, seq: int, cmd: WorkerCommand) -> None:
        """Queue ``cmd`` for the worker in the order the driver sent them."""
        with self.lock:
            self.early[seq] = cmd
            while self.next_seq in self.early:
                self.commands.put(self.early.pop(self.next_seq))
                self.next_seq += 1

    def take(self, timeout_s: float) -> tuple[list[WorkerMessage], bool]:
        """The worker's messages (waiting up to ``timeout_s`` for the first) and whether it has ended."""
        self.polled = time.monotonic()
        items: list[WorkerMessage] = []
        try:
            items.append(self.outbox.get(timeout=timeout_s))
            while True:
                items.append(self.outbox.get_nowait())
        except queue.Empty:
            pass
        # Every message is queued before ``finished`` is set: once it is, an empty outbox is the end.
        return items, self.finished.is_set() and self.outbox.empty()


@dataclass(frozen=True, slots=True)
class Gone:
    """The poller's word that an actor's call failed (the actor or its node died): lost in ``drain``."""

    worker_id: int
    why: str


class RayFleet(Fleet):
    """The workers as Ray actors; ``config.ray``: the cluster's address ("" — Ray's own choice: RAY_ADDRESS,
    else a cluster started on this machine, else a new local one)."""

    kind = "ray"

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.address = config.ray or None
        self.ray: ModuleType | None = None
        self.started_ray = False
        self.group: Any = None  # the placement group
        self.actors: list[Any] = []  # Ray actor handles
        self.names: list[str] = []
        self.seqs: list[int] = []
        self.local_pids: list[int] = []
        self.inbox: queue.Queue[WorkerMessage | Gone] = queue.Queue()
        self.finished: set[int] = set()
        self.spawned = False
        self.closing = threading.Event()
        self.poller: threading.Thread | None = None
        self.rtt_lock = threading.Lock()
        self.flush_rtts_ns: list[int] = []  # since the last step report

    # ---- placement --------------------------------------------------------------------------------------
    async def place(self) -> dict[str, object]:
        return await asyncio.to_thread(self.place_blocking)

    def place_blocking(self) -> dict[str, object]:
        # Imported only here when no Ray runs yet: init_ray must set the environment before the import.
        running = "ray" in sys.modules and import_ray().is_initialized()
        ray = self.ray = import_ray() if running else init_ray(self.address)
        self.started_ray = not running
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        total = ray.cluster_resources().get("CPU", 0)
        if total < self.size:
            raise SetupError(
                f"--ray: the cluster has {total:g} CPUs for {self.size} workers of 1 CPU each: "
                "lower --workers or add nodes"
            )
        self.group = group = placement_group([{"CPU": 1}] * self.size, strategy="SPREAD")
        try:
            ray.get(group.ready(), timeout=READY_S)
        except ray.exceptions.GetTimeoutError:
            free = ray.available_resources().get("CPU", 0)
            raise SetupError(
                f"--ray: the cluster has no room for {self.size} workers of 1 CPU each "
                f"({free:g} CPUs free): lower --workers or add nodes"
            ) from None
        remote = ray.remote(num_cpus=1, max_concurrency=ACTOR_CONCURRENCY, max_restarts=0)(WorkerActor)
        token = f"{os.getpid()}-{secrets.token_hex(3)}"
        for wid in range(self.size):
            strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=wid)
            name = f"ramp-worker-{token}-{wid}"
            self.actors.append(remote.options(name=name, scheduling_strategy=strategy).remote())
            self.names.append(name)
            self.seqs.append(0)
        try:
            rtts = self.locate(ray)
        except ray.exceptions.RayError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            said = shown_address(first, self.address)
            raise SetupError(f"--ray: the workers' actors did not start: {said}") from None
        return {
            "kind": self.kind,
            # the cluster joined (never a password in a record)
            "address": shown_address(self.address or ray.get_runtime_context().gcs_address, self.address),
            "workers": self.size,
            "hosts": host_table(self.hosts, self.size),
            "actors": list(self.names),
            # A window edge on any worker lies within one flush's round trip of the controller's cut.
            "command_rtt_ms": percentiles_ms(rtts),
        }

    def locate(self, ray: ModuleType) -> list[int]:
        """Where each actor runs, and the command round trips measured at setup (ns)."""
        where = ray.get([a.where.remote() for a in self.actors], timeout=READY_S)
        here = platform.node()
        self.hosts = {wid: host for wid, (host, _pid) in enumerate(where)}
        self.local_pids = [pid for host, pid in where if host == here]
        rtts: list[int] = []
        for actor in self.actors:
            for _ in range(PINGS):
                t0 = time.monotonic_ns()
                ray.get(actor.ping.remote(), timeout=READY_S)
                rtts.append(time.monotonic_ns() - t0)
        return rtts

    # ---- start, commands --------------------------------------------------------------------------------
    def spawn(self, model: str, sizer: PromptSizer) -> None:
        if self.ray is None:
            raise SetupError("--ray: the workers were not placed")
        # RAMP_WORKER_CPUS pins the workers on this host (the selftest's layout), never another host's.
        cpus = os.environ.get("RAMP_WORKER_CPUS", "")
        here = platform.node()
        for spec, actor in zip(worker_specs(self.config, model, sizer), self.actors, strict=True):
            actor.start.remote(spec, cpus if self.hosts.get(spec.worker_id) == here else "")
        self.spawned = True
        self.poller = threading.Thread(target=self.poll, name="ramp-ray-poller", daemon=True)
        self.poller.start()

    def send(self, wid: int, cmd: WorkerCommand) -> None:
        if wid >= len(self.actors):
            return
        seq = self.seqs[wid]
        self.seqs[wid] = seq + 1
        t0 = time.monotonic_ns()
        ref = self.actors[wid].command.remote(seq, cmd)
        if isinstance(cmd, Flush):
            ref.future().add_done_callback(lambda done, t0=t0: self.flushed(t0, done.exception() is None))

    def flushed(self, t0_ns: int, ok: bool) -> None:
        if ok:
            with self.rtt_lock:
                self.flush_rtts_ns.append(time.monotonic_ns() - t0_ns)

    # ---- messages ---------------------------------------------------------------------------------------
    def poll(self) -> None:
        """The poller thread: one long poll per actor outstanding; what comes back goes to ``inbox``."""
        ray = self.ray
        assert ray is not None
        pending = {self.actors[wid].take.remote(TAKE_S): wid for wid in range(self.size)}
        while pending and not self.closing.is_set():
            try:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
            except BaseException as exc:  # Ray itself went away (shut down, the cluster lost): say so, once
                if not self.closing.is_set():
                    for wid in pending.values():
                        self.inbox.put(
                            Gone(wid, f"worker {wid}: lost the Ray cluster ({type(exc).__name__})")
                        )
                        self.finished.add(wid)
                return
            for ref in ready:
                wid = pending.pop(ref)
                try:
                    msgs, ended = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    if not self.closing.is_set():
                        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                        self.inbox.put(Gone(wid, f"worker {wid}'s Ray actor died: {first}"))
                    self.finished.add(wid)
                    continue
                for msg in msgs:
                    self.inbox.put(msg)
                if ended:
                    self.finished.add(wid)
                else:
                    pending[self.actors[wid].take.remote(TAKE_S)] = wid

    def settle(self, items: list[WorkerMessage | Gone]) -> list[WorkerMessage]:
        """The poller's items as messages: a worker's own, then a ``WorkerFatal`` for each actor gone."""
        out = self.screen([item for item in items if not isinstance(item, Gone)])
        for item in items:
            if isinstance(item, Gone) and item.worker_id not in self.lost:
                out.append(self.lose(item.worker_id, item.why))
        return out

    def take_all(self) -> list[WorkerMessage | Gone]:
        items: list[WorkerMessage | Gone] = []
        while True:
            try:
                items.append(self.inbox.get_nowait())
            except queue.Empty:
                return items

    def drain(self) -> list[WorkerMessage]:
        return self.settle(self.take_all())

    def drain_blocking(self, timeout_s: float) -> list[WorkerMessage]:
        try:
            first = self.inbox.get(timeout=timeout_s)
        except queue.Empty:
            return []
        return self.settle([first, *self.take_all()])

    def any_alive(self) -> bool:
        return self.spawned and any(w not in self.finished and w not in self.lost for w in range(self.size))

    def pids(self) -> list[int]:
        return list(self.local_pids)

    # ---- the record -------------------------------------------------------------------------------------
    def step_keys(self, judges: Mapping[int, BoundJudge]) -> dict[str, object]:
        with self.rtt_lock:
            rtts, self.flush_rtts_ns = self.flush_rtts_ns, []
        hosts: dict[str, dict[str, float | int]] = {}
        for wid, judge in sorted(judges.items()):
            host = hosts.setdefault(
                self.hosts.get(wid, "?"),
                {"workers": 0, "cpu_pct_max": 0.0, "loop_lag_ms_max": 0.0, "lag_samples": 0, "lag_over": 0},
            )
            host["workers"] = int(host["workers"]) + 1
            host["cpu_pct_max"] = round(max(float(host["cpu_pct_max"]), judge.cpu_max), 1)
            host["loop_lag_ms_max"] = round(max(float(host["loop_lag_ms_max"]), judge.lag_max), 2)
            host["lag_samples"] = int(host["lag_samples"]) + judge.n
            host["lag_over"] = int(host["lag_over"]) + judge.over
            host["runq_wait_pct_max"] = round(
                max(float(host.get("runq_wait_pct_max", 0.0)), judge.wait_max), 1
            )
        fleet = {
            "flush_rtt_ms": percentiles_ms(rtts),  # this step's window edges: their skew is within these
            "hosts": hosts,
            "lost_workers": sorted(self.lost),
        }
        return {"fleet": fleet}

    # ---- the end ----------------------------------------------------------------------------------------
    def join(self) -> None:
        """Kill every actor and free the placement; a Ray started for this run is shut down."""
        self.closing.set()
        ray = self.ray
        if ray is None:
            return
        for actor in self.actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass  # already gone
        if self.poller is not None:
            self.poller.join(timeout=2.0)
        if self.group is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(self.group)
            except Exception:
                pass
        if self.started_ray:
            ray.shutdown()

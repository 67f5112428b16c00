"""The two ways a worker offers load: closed loop (virtual users) and open loop (scheduled arrivals).

Closed loop: ``level`` virtual users, each sending its next request as soon as the last one finished
(after the session's think time). Lowering the level lets the surplus finish their current request and
stop, or cancels them (counted as cancelled, never as errors or successes).

Open loop: sessions arrive on a schedule (constant, Poisson or gamma inter-arrival times) computed as
absolute target times from a seeded generator (``loadgen.arrivals``); each request's latency is measured from that intended time,
and the gap to the real send is the schedule lag. With a concurrency cap, arrivals beyond it wait in a
client-side queue, and their wait counts in their latency (no coordinated omission). A replayed trace or
request file brings its own times instead (``Workload.schedule``): each of the worker's items is sent at
its offset divided by the time scale the rate stands for, from the (re)start of the load.

Backoff (``Backoff``) is a closed-loop user's: after a refused connection or a refusal (429, 5xx, 401/403)
it pauses before its next request, and a ``Retry-After`` is honoured. Open-loop arrivals keep their
schedule: the rate is the experiment, and it already bounds how fast refusals can come.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

from loadgen.arrivals import Arrivals, ArrivalSpec, arrivals
from loadgen.target.refusals import is_refusal
from loadgen.types import ErrorKind, Outcome, RequestResult, RequestSpec
from loadgen.workload import Workload

CONNECT_BACKOFF_MIN_S = 0.01  # a closed-loop user's pause after a refused connection, doubling ...
CONNECT_BACKOFF_MAX_S = 1.0  # ... up to this, until a request connects again
REFUSAL_BACKOFF_MIN_S = 0.1  # after a refusal (429, 5xx, 401/403: loadgen.target.refusals), doubling ...
REFUSAL_BACKOFF_MAX_S = 5.0  # ... up to this, each pause drawn between half and all of it (jitter)
RETRY_AFTER_MAX_S = 30.0  # a Retry-After is honoured up to this (plus up to 20 % jitter, never less)


class Send(Protocol):
    """Send one request intended to start at ``intended_ns``; ``reserved``: the window that scheduled it
    (an arrival that waited for a slot belongs to the step that scheduled it, not to the one it is sent in)."""

    def __call__(
        self, spec: RequestSpec, intended_ns: int, reserved: int | None = None, /
    ) -> Awaitable[RequestResult]: ...


class Reservations(Protocol):
    """The worker's windows as open loop sees them: an arrival queued for a slot reserves its place in the
    window that scheduled it, and releases it if it is never sent."""

    def reserve(self) -> int: ...

    def release(self, window: int, /) -> None: ...


class Gate:
    """Whether the worker's load may send: paused (users wait for ``resumed``) or stopping (they leave)."""

    def __init__(self) -> None:
        self.paused = False
        self.stopped = asyncio.Event()  # set once stopping: a user in a pause leaves at once
        self.resumed = asyncio.Event()
        self.resumed.set()

    @property
    def stopping(self) -> bool:
        return self.stopped.is_set()

    @stopping.setter
    def stopping(self, value: bool) -> None:
        if value:
            self.stopped.set()
        else:
            self.stopped.clear()

    async def think(self, seconds: float) -> bool:
        """Wait out a session's think time (or a backoff); False when the user should stop instead. A stop
        ends the wait at once: a drain must not wait out a 30 s Retry-After."""
        if seconds > 0 and not self.stopping:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopped.wait(), seconds)
        return not self.stopping


class Backoff:
    """One virtual user's pause before its next request, after an answer that says "not now".

    A refused connection: 10 ms doubling to 1 s (the server is down or restarting; come back soon). A
    refusal (``loadgen.target.refusals.is_refusal``: 429, 5xx, 401/403), or any other error the same as
    the one before it (a 400 or 404 on every request: a permanent rejection would otherwise be hammered
    thousands of times a second): 100 ms doubling to 5 s, each pause drawn between half and all of it so
    that the users do not come back in step; a ``Retry-After`` is honoured (up to 30 s, plus up to 20 %,
    never earlier). A success or a different error ends the backoff (a one-off 400 earns no pause).
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.base_s = 0.0
        self.last: tuple[ErrorKind | None, int | None] | None = None  # the last error, (kind, status)

    def after(self, result: RequestResult) -> float:
        """Seconds to pause after ``result`` (0.0: none)."""
        if result.error_kind is ErrorKind.CONNECT:
            self.base_s = min(CONNECT_BACKOFF_MAX_S, max(CONNECT_BACKOFF_MIN_S, self.base_s * 2))
            return self.base_s
        error = (result.error_kind, result.http_status) if result.outcome is Outcome.ERROR else None
        repeated, self.last = error is not None and error == self.last, error
        if error is None or not (repeated or is_refusal(result.http_status)):
            self.base_s = 0.0
            return 0.0
        self.base_s = min(REFUSAL_BACKOFF_MAX_S, max(REFUSAL_BACKOFF_MIN_S, self.base_s * 2))
        pause = self.base_s * (0.5 + 0.5 * self.rng.random())
        if result.retry_after_s is not None:
            pause = max(pause, min(RETRY_AFTER_MAX_S, result.retry_after_s) * (1.0 + 0.2 * self.rng.random()))
        return pause


class ClosedLoop:
    """``level`` virtual users, each a task that sends one request after the other."""

    def __init__(
        self,
        workload: Workload,
        send: Send,
        gate: Gate,
        session_id: Callable[[], int],
        seed: int,
        worker_id: int,
    ) -> None:
        self.workload, self.send, self.gate, self.session_id = workload, send, gate, session_id
        self.seed, self.worker_id = seed, worker_id
        self.level = 0
        self.users: dict[int, asyncio.Task[None]] = {}
        self.retiring: set[int] = set()  # users that stop after their current request
        self.backing_off: set[int] = set()  # users pausing after a refusal (nothing of theirs in flight)
        self.next_uid = 0

    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self.users.values())

    def set_level(self, level: int, cancel: bool) -> None:
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
        # Lower: the newest users leave first; one in a backoff pause has nothing in flight and leaves now.
        for uid in sorted(active, reverse=True)[: max(0, len(active) - self.level)]:
            self.retiring.add(uid)
            if cancel or uid in self.backing_off:
                self.users[uid].cancel()

    async def _user(self, uid: int) -> None:
        rng = random.Random(f"{self.seed}:{self.worker_id}:{uid}")  # unique per (run, worker, user)
        session = self.workload.new_session(rng, session_id=self.session_id())
        gate = self.gate
        # A refused connection or a refusal comes back in microseconds: without a pause the user would spin,
        # pinning the worker's CPU and burying the step under thousands of identical errors a second. Its own
        # generator: the prompts drawn from ``rng`` stay the same whatever the server answers.
        backoff = Backoff(random.Random(f"{self.seed}:{self.worker_id}:{uid}:backoff"))
        try:
            while not gate.stopping and uid not in self.retiring:
                if gate.paused:
                    await gate.resumed.wait()
                    continue
                spec = session.next_request()
                if spec is None:
                    session = self.workload.new_session(rng, session_id=self.session_id())
                    continue
                result = await self.send(replace(spec, user=uid), time.monotonic_ns())  # per stream: slices
                if result.outcome is Outcome.CANCELLED:
                    break
                session.on_result(result)
                pause = backoff.after(result)
                think = max(session.think_time_s, pause)
                if pause > 0:
                    self.backing_off.add(uid)
                try:
                    if think > 0 and not await gate.think(think):
                        break
                finally:
                    self.backing_off.discard(uid)
        except asyncio.CancelledError:
            pass  # cancelled while thinking, pausing or paused: nothing was in flight
        finally:
            self.users.pop(uid, None)
            self.retiring.discard(uid)
            self.backing_off.discard(uid)


class OpenLoop:
    """Sessions started on a seeded schedule of absolute times, behind an optional concurrency cap."""

    def __init__(
        self,
        workload: Workload,
        send: Send,
        gate: Gate,
        session_id: Callable[[], int],
        rng: random.Random,
        windows: Reservations,
    ) -> None:
        self.workload, self.send, self.gate, self.session_id, self.rng = workload, send, gate, session_id, rng
        self.windows = windows
        self.sessions: set[asyncio.Task[None]] = set()
        # (intended start ns, the window that scheduled it, the scheduled item or None): arrivals waiting for
        # a slot under the cap
        self.backlog: collections.deque[tuple[int, int, int | None]] = collections.deque()
        self.unsent: dict[asyncio.Task[None], int] = {}  # sessions started from the backlog, not sent yet
        self.arriving: asyncio.Task[None] | None = None
        self.spec = ArrivalSpec(rate_rps=0.0)
        self.stream: Arrivals | None = None  # kept across restarts: a rate change continues its draws
        self.cap = 0

    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self.sessions)

    def set(self, spec: ArrivalSpec, cap: int) -> None:
        self.spec, self.cap = spec, cap
        self.restart()
        self._drain_backlog()

    def halt(self, cancel: bool) -> None:
        """No more arrivals; ``cancel``: cut the sessions in flight too."""
        if self.arriving is not None:
            self.arriving.cancel()
            self.arriving = None
        self.drop_backlog()
        if cancel:
            for task in list(self.sessions):
                task.cancel()

    def drop_backlog(self) -> None:
        """Queued arrivals that will not be sent (paused, stopped, load changed): their windows may close."""
        while self.backlog:
            self.windows.release(self.backlog.popleft()[1])

    def restart(self) -> None:
        """(Re)start the arrivals from now: a set load, a rate change, a resume. A trace or a request file
        starts over from its first item, at the time scale the rate stands for."""
        if self.arriving is not None:
            self.arriving.cancel()
        self.arriving = None
        spec = self.spec
        if spec.rate_rps > 0 and not self.gate.paused and not self.gate.stopping:
            schedule = self.workload.schedule()
            items: tuple[int | None, ...] = ()
            if schedule is not None:
                items = tuple(item for _, item in schedule)
                times_s = tuple(offset_s for offset_s, _ in schedule)
                spec = replace(
                    spec, kind="schedule", times_s=times_s, time_scale=self.workload.time_scale(spec.rate_rps)
                )
            self.stream = arrivals(spec, time.monotonic_ns(), self.stream)
            self.arriving = asyncio.get_running_loop().create_task(self._arrive(self.stream, items))

    async def _arrive(self, stream: Arrivals, items: tuple[int | None, ...]) -> None:
        # Absolute target times (loadgen.arrivals): a late wake-up (or a server slow enough to fill the cap)
        # sends the overdue arrivals at once and their lateness shows as schedule lag, instead of silently
        # stretching the schedule. ``items``: a schedule's items, in the order of its times.
        count = 0
        while (intended_ns := stream.next_ns()) is not None:
            now = time.monotonic_ns()
            # Until the target time, not just one sleep: asyncio may wake a little early, and an arrival sent
            # before its intended time would have a negative schedule lag (dropped from the histogram).
            while intended_ns > now:
                await asyncio.sleep((intended_ns - now) / 1e9)
                now = time.monotonic_ns()
            if self.gate.paused or self.gate.stopping:
                return
            self._admit(intended_ns, item=items[count] if items else None)
            count += 1

    def _admit(self, intended_ns: int, reserved: int | None = None, item: int | None = None) -> None:
        if self.cap and len(self.sessions) >= self.cap:
            window = self.windows.reserve() if reserved is None else reserved
            self.backlog.append((intended_ns, window, item))
            return
        task = asyncio.get_running_loop().create_task(self._session(intended_ns, reserved, item))
        if reserved is not None:
            self.unsent[task] = reserved
        self.sessions.add(task)
        task.add_done_callback(self._session_done)

    def _session_done(self, task: asyncio.Task[None]) -> None:
        self.sessions.discard(task)
        window = self.unsent.pop(task, None)
        if window is not None:  # ended (cancelled, no request) before sending the arrival it reserved
            self.windows.release(window)
        self._drain_backlog()

    def _drain_backlog(self) -> None:
        gate = self.gate
        while (
            self.backlog
            and not gate.stopping
            and not gate.paused
            and (not self.cap or len(self.sessions) < self.cap)
        ):
            self._admit(*self.backlog.popleft())

    async def _session(self, intended_ns: int, reserved: int | None = None, item: int | None = None) -> None:
        rng, sid = random.Random(self.rng.getrandbits(64)), self.session_id()
        session = (
            self.workload.new_session(rng, session_id=sid)
            if item is None
            else self.workload.scheduled_session(item, rng, sid)
        )
        task = asyncio.current_task()
        with contextlib.suppress(asyncio.CancelledError):
            while not self.gate.stopping:
                spec = session.next_request()
                if spec is None:
                    return
                sending = self.send(spec, intended_ns, reserved)
                if task is not None:
                    self.unsent.pop(task, None)  # the send below takes the reservation over
                reserved = None  # a session's later turns belong to the window they are sent in
                result = await sending
                if result.outcome is Outcome.CANCELLED:
                    return
                session.on_result(result)
                think = session.think_time_s
                if not await self.gate.think(think):
                    return
                intended_ns = time.monotonic_ns()

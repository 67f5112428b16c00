"""The load client's own health, and whether it makes a step client-bound.

Sampled in each worker (``HealthSampler``: event-loop lag, process CPU, time spent waiting for a CPU) and
shipped in every delta as a ``{name: value}`` report; judged in the controller (``BoundJudge``: over a
step's reports, or the last few seconds' for the live flag). The thresholds that decide it live here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping

from loadgen.snapshot import ClientHealth

CLIENT_BOUND_LAG_MS = 5.0  # a loop lag sample over this counts against the client (> 1 % of them: bound)
CLIENT_BOUND_CPU_PCT = 90.0
SATURATED = "% CPU: add --workers"  # the end of the reason a load worker's own CPU gives (``cpu_saturated``)
CLIENT_BOUND_WAIT_PCT = 10.0  # of wall time spent ready to run but not given a core (Linux schedstat)
RECENT_HEALTH = 12  # health reports (about 3 s) behind the live client-bound flag
HEALTH_SPAN_S = 1.0  # CPU shares are taken over at least this long


class HealthSampler:
    """Event-loop lag, process CPU and time spent waiting for a CPU, sampled on the worker's own loop.

    CPU shares are taken over spans of at least ``span_s`` (a delta shipped a millisecond after the last
    one would otherwise read 100 % from one busy millisecond). The run-queue wait (Linux schedstat) tells
    a worker that is busy from one that is ready but not given a core by the OS.
    """

    def __init__(
        self,
        span_s: float = HEALTH_SPAN_S,
        *,
        cpu_clock: Callable[[], float] = time.process_time,
        wall_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.span_s = span_s
        self.cpu_clock, self.wall_clock = cpu_clock, wall_clock
        self.lags_ms: list[float] = []
        self._cpu0 = cpu_clock()
        self._wall0 = wall_clock()
        self._wait0 = runqueue_wait_ns()
        self._cpu_pct = 0.0
        self._wait_pct: float | None = None

    async def watch(self, period_s: float = 0.05) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(period_s)
            self.lags_ms.append(max(0.0, (time.perf_counter() - t0 - period_s) * 1000.0))

    def take(self) -> dict[str, float]:
        cpu, wall = self.cpu_clock(), self.wall_clock()
        span = wall - self._wall0
        if span >= self.span_s:
            self._cpu_pct = 100.0 * (cpu - self._cpu0) / span
            wait = runqueue_wait_ns()
            if wait is not None and self._wait0 is not None:
                self._wait_pct = 100.0 * (wait - self._wait0) / 1e9 / span
            self._cpu0, self._wall0, self._wait0 = cpu, wall, wait
        out = {"cpu_pct": self._cpu_pct}
        if self._wait_pct is not None:
            out["runq_wait_pct"] = self._wait_pct
        lags = sorted(self.lags_ms)
        self.lags_ms = []
        # The samples' count and how many passed the client-bound threshold: the controller judges a whole
        # step's samples (its p99), not the few of one report.
        out["lag_n"] = float(len(lags))
        out["lag_over"] = float(sum(1 for v in lags if v > CLIENT_BOUND_LAG_MS))
        if not lags:
            return {**out, "loop_lag_ms_p99": 0.0, "loop_lag_ms_max": 0.0}
        p99 = lags[min(len(lags) - 1, int(0.99 * len(lags)))]
        return {**out, "loop_lag_ms_p99": p99, "loop_lag_ms_max": lags[-1]}


def runqueue_wait_ns() -> int | None:
    """Nanoseconds this thread has spent ready to run but waiting for a CPU (Linux), else None."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


class BoundJudge:
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
    def of(cls, healths: Iterable[Mapping[str, float]]) -> BoundJudge:
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
            return f"load worker at {self.cpu_max:.0f}{SATURATED}"
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


def cpu_saturated(reason: str) -> bool:
    """A client-bound reason that says a load worker used up its core (the load generator is too weak for
    the level: more workers), not the loop lag of a shared machine."""
    return reason.endswith(SATURATED)


def first_reason(judges: Mapping[int, BoundJudge]) -> str | None:
    """The lowest-numbered worker's reason to call a span client-bound, or None."""
    for wid in sorted(judges):
        reason = judges[wid].reason()
        if reason:
            return reason
    return None


def client_health(
    latest: Mapping[int, Mapping[str, float]], recent: Mapping[int, Iterable[Mapping[str, float]]]
) -> ClientHealth:
    """The live health line: the workers' latest reports, flagged client-bound on their recent ones."""
    if not latest:
        return ClientHealth()
    cpus = tuple(round(latest[w].get("cpu_pct", 0.0), 1) for w in sorted(latest))
    lag99 = max(h.get("loop_lag_ms_p99", 0.0) for h in latest.values())
    lagmax = max(h.get("loop_lag_ms_max", 0.0) for h in latest.values())
    verdicts = (BoundJudge.of(recent[wid]).reason() for wid in sorted(recent))
    reasons = [r for r in verdicts if r]
    return ClientHealth(lag99, lagmax, cpus, bool(reasons), reasons[-1] if reasons else "")

"""What the workers' deltas say about now: the rolling window, each worker's gauges and health, the token
and request rates of the last seconds, the last success and the last errors.

The snapshot reads these figures, and so does the health check (whether the target still answers); each
computes what it needs from them, neither leaves anything behind for the other.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable
from typing import TypedDict

from loadgen.metrics import IntervalDelta, RollingWindow
from loadgen.run.health import RECENT_HEALTH, client_health
from loadgen.run.rejections import RejectionStreak
from loadgen.snapshot import ClientHealth
from loadgen.target.http import scrub
from loadgen.types import ErrorKind

RATE_HORIZON_S = 2.0  # the live rates are taken over the last this many seconds
RECENT_ERRORS = 8
CONNECT_ERRORS_KEY = "err:" + ErrorKind.CONNECT.value  # the rolling window's counter of refused connections


class LiveGauges(TypedDict):
    """The load gauges a snapshot takes from ``LiveFigures`` (``Snapshot``'s fields of these names)."""

    in_flight: int
    queued: int
    backing_off: int
    waiting_first: int
    first_wait_s: float


class LiveFigures:
    def __init__(self, rolling_s: float, t0_ns: int) -> None:
        self.rolling_s = rolling_s
        self.t0_ns = t0_ns
        self.rolling = RollingWindow(rolling_s)
        self.gauges: dict[int, tuple[int, int, int]] = {}  # worker -> (in_flight, queued, backing_off)
        self.health: dict[int, dict[str, float]] = {}  # worker -> its latest report
        self.recent_health: dict[int, collections.deque[dict[str, float]]] = {}  # the live flag judges these
        # (t1_ns, live output tokens, input tokens, successes, sent, errors) per delta
        self.timeline: collections.deque[tuple[int, int, int, int, int, int]] = collections.deque()
        self.last_ok_ns = time.monotonic_ns()
        self.recent_errors: collections.deque[str] = collections.deque(maxlen=RECENT_ERRORS)
        self.latest_errors: dict[str, str] = {}  # error kind -> its latest message, whole and scrubbed
        self.rejections = RejectionStreak()  # every answer since the last success one permanent 4xx?
        # worker -> (its requests with no token yet, the longest wait in s when shipped, received at ns)
        self.first_waits: dict[int, tuple[int, float, int]] = {}

    def add(
        self,
        wid: int,
        delta: IntervalDelta,
        current: bool,
        first_waits: tuple[int, float] = (0, 0.0),
        now_ns: int = 0,
    ) -> None:
        """A worker's delta; ``current``: its live gauges too (``first_waits`` as ``waits`` takes them)."""
        self.rolling.add(delta)
        if current:
            self.waits(wid, first_waits, now_ns)
            self.gauges[wid] = (int(delta.in_flight), int(delta.queued), int(delta.backing_off))
            self.health[wid] = dict(delta.health or {})
            self.recent_health.setdefault(wid, collections.deque(maxlen=RECENT_HEALTH)).append(
                self.health[wid]
            )
        ok = int(delta.ok)
        if ok:
            self.last_ok_ns = delta.t1_ns
        self.rejections.add(delta)
        self.timeline.append(
            (
                delta.t1_ns,
                int(delta.live_tokens),
                int(delta.input_tokens),
                ok,
                int(delta.sent),
                delta.error_count,
            )
        )
        for err in delta.recent_errors:
            self.recent_errors.append(str(err))
        self.latest_errors.update(latest_by_kind(delta.recent_errors))

    def waits(self, wid: int, first_waits: tuple[int, float], now_ns: int) -> None:
        """Worker ``wid``'s requests waiting for a first token, as its current delta said at ``now_ns``."""
        count, wait_s = first_waits
        self.first_waits[wid] = (int(count), float(wait_s), now_ns)

    def waiting_first(self, now_ns: int) -> tuple[int, float]:
        """(requests in flight with no token yet, the longest of their waits in s, grown since shipped)."""
        live = [(n, s + (now_ns - at) / 1e9) for n, s, at in self.first_waits.values() if n]
        return sum(n for n, _ in live), max((s for _, s in live), default=0.0)

    def gauges_now(self, now_ns: int) -> LiveGauges:
        """The snapshot's load gauges, summed over the workers."""
        waiting, longest = self.waiting_first(now_ns)
        return LiveGauges(
            in_flight=self.in_flight,
            queued=self.queued,
            backing_off=self.backing_off,
            waiting_first=waiting,
            first_wait_s=longest,
        )

    def lose(self, wid: int, why: str) -> None:
        """Worker ``wid`` died (``why``): said among the recent errors; its last gauges no longer count (a
        dead worker's streams in flight would hold a lowering's settling for ever)."""
        self.recent_errors.append(f"worker {wid} died: {why}")
        self.gauges.pop(wid, None)
        self.first_waits.pop(wid, None)
        self.health.pop(wid, None)
        self.recent_health.pop(wid, None)

    @property
    def in_flight(self) -> int:
        return sum(g[0] for g in self.gauges.values())

    @property
    def queued(self) -> int:
        return sum(g[1] for g in self.gauges.values())

    @property
    def backing_off(self) -> int:
        return sum(g[2] for g in self.gauges.values())

    def rates(self, now: int) -> tuple[float, float, float, float]:
        """Output tok/s, input tok/s, successes/s and sends/s over the last ``RATE_HORIZON_S``. Requests that
        only failed in it claim no output throughput (``loadgen.metrics.windows.Accumulator.stats``)."""
        horizon = now - int(RATE_HORIZON_S * 1e9)
        while self.timeline and self.timeline[0][0] < now - int(self.rolling_s * 1e9):
            self.timeline.popleft()
        out = inp = ok = sent = errors = 0
        for t1, lt, it, o, s, e in self.timeline:
            if t1 >= horizon:
                out += lt
                inp += it
                ok += o
                sent += s
                errors += e
        if errors and not ok:
            out = 0
        span = min(RATE_HORIZON_S, max(1e-3, (now - self.t0_ns) / 1e9))
        return out / span, inp / span, ok / span, sent / span

    def connect_errors(self, now: int) -> int:
        """Refused connections in the rolling window (read from its counters: no percentiles computed)."""
        self.rolling.expire(now)
        return int(self.rolling.acc.counters.get(CONNECT_ERRORS_KEY, 0))

    def refused_while_silent(self, now: int, silent_s: float) -> int:
        """The rolling window's refused connections when no request succeeded for ``silent_s``, else 0:
        the target stopped answering."""
        refused = self.connect_errors(now)
        return refused if refused and now - self.last_ok_ns > silent_s * 1e9 else 0

    def gone(self, now: int, url: str, silent_s: float) -> str | None:
        """Why the run cannot go on, or None: no request succeeded for ``silent_s`` and connections were
        refused (the target stopped answering), or every answer was the same permanent rejection."""
        refused = self.refused_while_silent(now, silent_s)
        if refused:
            return (
                f"target {url} stopped answering: no successful request for {silent_s:.0f} s "
                f"({refused} connection errors); finished steps are in the record"
            )
        return self.rejections.verdict(now, url)

    def client_health(self) -> ClientHealth:
        return client_health(self.health, self.recent_health)


def latest_by_kind(errors: Iterable[str]) -> dict[str, str]:
    """The last message of each error kind among ``errors`` ("kind: message" lines), secrets scrubbed."""
    latest: dict[str, str] = {}
    for line in errors:
        kind, _, message = str(line).partition(": ")
        latest[kind] = scrub(message or kind)
    return latest

"""The telemetry hub: polls every source on its own timer and keeps a bounded time series per source.
What the series mean (now, over a step, the run's conditions) is window.py's arithmetic; the hub copies the
series under its lock and hands them there.

It runs inside the engine controller's event loop, never in the load workers' processes, so a slow or
hung source can only delay its own next poll. A failing source is marked with the reason and retried
with backoff; its numbers disappear (``None``, shown as "n/a") rather than freezing or turning to zero.
``latest()``, ``window_summary()`` and ``conditions()`` may be called from another thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loadgen.snapshot import KVHeadroom, ServerTelemetry
from loadgen.telemetry import doubts, headroom, window
from loadgen.telemetry.reading import CumulativeHistogram, Reading, SourceError
from loadgen.telemetry.sources import Source

log = logging.getLogger(__name__)

NS = window.NS
POLITE_FACTOR = 10.0
POLITE_MAX_S = 4.0
# A poke (a step boundary) polls at once, but never sooner than this, or twice the time the server took to
# answer the last scrape, after the source's last poll began.
POKE_MIN_GAP_S = 0.1
# The source's own timeouts should fire first; this much more only catches a poll that hangs.
HANG_MARGIN_S = 3.0
# The server panel's short history of running / waiting / preemptions.
HISTORY_S = 120.0


@dataclass
class _State:
    source: Source
    readings: deque[Reading]
    status: str = "starting"
    failures: int = 0
    polls: int = 0
    answered: bool = False  # a good reading came once: a failure now is telemetry lost mid-run
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    poked: asyncio.Event | None = field(default=None, repr=False)

    @property
    def edge_sampled(self) -> bool:
        return window.edge_sampled(self.source.kind)


class TelemetryHub:
    """Polls sources and summarises what they saw. Sources earlier in the list win for the server panel;
    for the GPU panel dedicated GPU sources (DCGM, NVML, command) win over GPU names on a server's page.
    """

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        conditions: Mapping[str, object] | None = None,
        history_s: float = 3600.0,
        rate_window_s: float = 5.0,
        hist_window_s: float = 10.0,
        max_backoff_s: float = 10.0,
    ) -> None:
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            raise ValueError(f"telemetry source names must be unique: {names}")
        self.history_s = history_s
        self.rate_window_s = rate_window_s
        self.hist_window_s = hist_window_s
        self.max_backoff_s = max_backoff_s
        self._lock = threading.Lock()
        self._states: dict[str, _State] = {}
        for s in sources:
            cap = int(history_s / max(s.interval_s, 0.05)) + 16
            self._states[s.name] = _State(s, deque(maxlen=min(cap, 100_000)))
        self._known: dict[str, object] = dict(conditions or {})
        self._latest = ServerTelemetry(sources=self._statuses())
        self._running = False
        self._changed: asyncio.Event | None = None
        self._ttft_cache: tuple[tuple[int, int], tuple[float | None, float | None]] | None = None
        self._context: tuple[float | None, int | None] = (None, None)  # the profile's mean / p95 context

    # --- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._running:
            return
        self._running = True
        self._changed = asyncio.Event()
        for st in self._states.values():
            st.poked = asyncio.Event()
            st.task = asyncio.create_task(self._run(st), name=f"telemetry:{st.source.name}")

    def poke(self) -> None:
        """Sample every server source now (see ``POKE_MIN_GAP_S``): the engine calls this at each step boundary,
        so counters and histograms are read at the window's edges instead of up to a polite interval away.
        Must be called from the loop the hub runs in."""
        for st in self._states.values():
            # Only a server's counters need the window's edges; GPU gauges are read inside it, and an
            # nvidia-smi over ssh keeps its once-a-second pace.
            if st.poked is not None and st.edge_sampled:
                st.poked.set()

    def poke_pending(self, name: str) -> bool:
        """Whether source ``name`` has a poke it has not acted on yet."""
        poked = self._states[name].poked
        return poked is not None and poked.is_set()

    def settled(self, t_ns: int) -> bool:
        """Whether every healthy server source has a reading taken after ``t_ns`` (its end sampled)."""
        if not self._running:
            return True
        with self._lock:
            return all(
                st.status != "ok" or st.task is None or (bool(st.readings) and st.readings[-1].t_ns >= t_ns)
                for st in self._states.values()
                if st.edge_sampled
            )

    async def stop(self) -> None:
        self._running = False
        tasks = [st.task for st in self._states.values() if st.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            # Bounded: on Python < 3.12 asyncio.wait_for can swallow a cancel that races its inner poll's
            # completion, leaving a poller running; _run's loop also checks _running, so it ends anyway.
            await asyncio.wait(tasks, timeout=3.0)
        for st in self._states.values():
            st.task = None
            with contextlib.suppress(Exception):
                await st.source.aclose()

    # --- polling -----------------------------------------------------------------------------------

    async def _run(self, st: _State) -> None:
        deadline = st.source.timeout_s + HANG_MARGIN_S
        while self._running:
            started = time.monotonic()
            if st.poked is not None:
                st.poked.clear()
            await self._poll_once(st.source, deadline)
            await self._pause(st, started)

    async def _poll_once(self, src: Source, deadline: float) -> None:
        try:
            reading = await asyncio.wait_for(src.poll(), deadline)
        except asyncio.CancelledError:
            raise
        except SourceError as exc:
            self.fail(src.name, str(exc))
        except asyncio.TimeoutError:
            self.fail(src.name, f"no answer within {deadline:g} s")
        except Exception as exc:  # one broken source must never take the hub (or the run) down
            text = str(exc).splitlines()[0][:120] if str(exc) else ""
            self.fail(src.name, f"{type(exc).__name__}: {text}".rstrip(": "))
        else:
            self.record(src.name, reading)

    async def _pause(self, st: _State, started: float) -> None:
        """Wait until the source's next poll: its interval (backed off while failing), politely spaced,
        or a poke at a step boundary, whichever comes first."""
        src = st.source
        if st.failures:
            delay = min(self.max_backoff_s, src.interval_s * 2 ** min(st.failures - 1, 16))
        else:
            delay = src.interval_s
        # Polite polling: a scrape the server was slow to answer (a busy API server rendering a big
        # /metrics page) is not repeated before POLITE_FACTOR times that, so our telemetry takes at most
        # ~10 % of the time of the process it watches. (Added when a starved CPU vLLM read 300-500 ms TTFT
        # in CI; most of that turned out to be session scheduling, see launch.own_process_group, but a
        # 50 KB page rendered every second by a busy API server is still load we should not add.)
        # Capped, so a step of a few seconds still gets a sample; step edges are sampled apart (poke).
        busy = src.last_fetch_s
        polite = POLITE_FACTOR * (busy if busy is not None else time.monotonic() - started)
        delay = max(delay, min(polite, POLITE_MAX_S))
        remaining = max(0.0, delay - (time.monotonic() - started))
        if st.poked is None:
            await asyncio.sleep(remaining)
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(st.poked.wait(), remaining)
        if st.poked.is_set() and not st.failures:  # a step boundary: sample it (a failing source waits)
            gap = max(POKE_MIN_GAP_S, 2.0 * (busy if busy is not None else 0.0))
            await asyncio.sleep(max(0.0, gap - (time.monotonic() - started)))
        elif st.poked.is_set():
            await asyncio.sleep(max(0.0, delay - (time.monotonic() - started)))

    # --- feeding -----------------------------------------------------------------------------------

    def record(self, name: str, reading: Reading) -> None:
        """Add a good reading from source ``name`` (the pollers call this; so can tests and replays)."""
        st = self._states[name]
        with self._lock:
            st.readings.append(reading)
            horizon = reading.t_ns - int(self.history_s * NS)
            while st.readings and st.readings[0].t_ns < horizon:
                st.readings.popleft()
            if st.status != "ok":
                log.debug("telemetry source %s ok", name)
            st.status = "ok"
            st.failures = 0
            st.answered = True
            st.polls += 1
        self._refresh()

    def fail(self, name: str, reason: str) -> None:
        """Mark source ``name`` n/a for ``reason`` until its next good reading."""
        st = self._states[name]
        with self._lock:
            if st.status != reason:
                log.debug("telemetry source %s n/a: %s", name, reason)
            st.status = reason
            st.failures += 1
            st.polls += 1
        self._refresh()

    def update_conditions(self, known: Mapping[str, object]) -> None:
        """Merge conditions found elsewhere (``discover()``, ``--tag``); they win over what sources saw."""
        with self._lock:
            self._known.update({k: v for k, v in known.items() if v is not None})
        self._refresh()

    def set_context(self, mean: float | None, p95: int | None) -> None:
        """The profile's mean and p95 context (prompt + output tokens): the KV headroom's unit."""
        with self._lock:
            self._context = (mean, p95)
        self._refresh()

    def _refresh(self) -> None:
        entries = self._series(
            ok_only=True, tail_s=max(self.rate_window_s, self.hist_window_s, HISTORY_S) + 1.0
        )
        with self._lock:
            known = dict(self._known)
            context = self._context
        room = headroom.headroom(headroom.capacity(window.conditions(entries, known)), *context)
        self._latest = window.latest(
            entries,
            runtime=self._known.get("runtime"),
            statuses=self._statuses(),
            rate_window_s=self.rate_window_s,
            hist_window_s=self.hist_window_s,
            kv_headroom=room,
            history_s=HISTORY_S,
        )
        if self._changed is not None:
            self._changed.set()

    async def ready(self, timeout_s: float = 3.0) -> bool:
        """Wait until every source has answered or failed once (so ``conditions()`` knows the GPUs)."""
        if self._changed is None:  # not started: nothing will ever answer
            return False
        deadline = time.monotonic() + timeout_s
        while any(st.polls == 0 for st in self._states.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await self.wait_changed(min(left, 0.5))
        return True

    async def wait_changed(self, timeout: float) -> bool:
        """Wait (in the hub's loop) until any source reports, or ``timeout`` seconds pass."""
        if self._changed is None:
            return False
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    # --- reading -----------------------------------------------------------------------------------

    def statuses(self) -> dict[str, str]:
        return dict(self._statuses())

    def _statuses(self) -> Mapping[str, str]:
        # a fresh plain dict each time (never mutated afterwards): JSON-friendly for records and replays
        return {name: st.status for name, st in self._states.items()}

    def failing(self) -> dict[str, tuple[str, int, bool]]:
        """Each source failing now: (its reason, its failed polls in a row, whether it had answered before)."""
        with self._lock:
            return {n: (st.status, st.failures, st.answered) for n, st in self._states.items() if st.failures}

    def readings(self, name: str) -> list[Reading]:
        with self._lock:
            return list(self._states[name].readings)

    def _series(self, ok_only: bool, tail_s: float | None = None) -> list[window.Series]:
        """Copies of the series (under the lock); ``tail_s``: only the last seconds of each."""
        out = []
        with self._lock:
            for st in self._states.values():
                if ok_only and st.status != "ok":
                    continue
                if tail_s is None or not st.readings:
                    out.append(window.Series(st.source.kind, st.status, list(st.readings)))
                    continue
                horizon = st.readings[-1].t_ns - int(tail_s * NS)
                tail: list[Reading] = []
                for r in reversed(st.readings):
                    if r.t_ns < horizon:
                        break
                    tail.append(r)
                tail.reverse()
                out.append(window.Series(st.source.kind, st.status, tail))
        return out

    def latest(self) -> ServerTelemetry:
        """Current gauges, rates over the last few seconds, per-GPU samples, and each source's status."""
        return self._latest

    def kv_headroom(self) -> KVHeadroom | None:
        """The KV cache as sequences of this profile (``set_context``); None until the server says its size."""
        return self._latest.kv_headroom

    def ttft_since(self, t0_ns: int) -> tuple[float | None, float | None]:
        """The server's own TTFT p50/p95 (ms) from the sample nearest ``t0_ns`` to the latest one, for the
        console, beside the client's; one histogram difference, cached until a new sample arrives."""
        with self._lock:
            last_t = max((st.readings[-1].t_ns for st in self._states.values() if st.readings), default=0)
        key = (t0_ns, last_t)
        if self._ttft_cache is not None and self._ttft_cache[0] == key:
            return self._ttft_cache[1]
        tail_s = max(0.0, (last_t - t0_ns) / NS) + 10.0
        out = window.ttft_between(self._series(ok_only=True, tail_s=tail_s), t0_ns)
        self._ttft_cache = (key, out)
        return out

    def window_summary(self, t0_ns: int, t1_ns: int) -> dict[str, float | None]:
        """Figures for a step record line over ``[t0_ns, t1_ns]`` (see ``window.window_summary``)."""
        return window.window_summary(self._series(ok_only=False), t0_ns, t1_ns)

    def ttft_histograms(self, t0_ns: int, t1_ns: int) -> dict[str, CumulativeHistogram]:
        """The server's TTFT, queue and prefill histograms over a window (``window.ttft_histograms``)."""
        return window.ttft_histograms(self._series(ok_only=False), t0_ns, t1_ns)

    def window_doubt(self, t0_ns: int, t1_ns: int) -> str | None:  # doubts.window_doubt: why not read it
        return doubts.window_doubt(self._series(ok_only=False), t0_ns, t1_ns)

    def conditions(self) -> dict[str, object | None]:
        """The run's conditions for the record header; ``None`` where unknown (fill with ``--tag``)."""
        entries = self._series(ok_only=False)
        with self._lock:
            known = dict(self._known)
        return window.conditions(entries, known)

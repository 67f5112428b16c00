"""The telemetry hub: polls every source on its own timer, keeps a bounded time series per source, and
answers three questions: what is the server doing now (``latest``), what did it do during a step
(``window_summary``), and under which conditions is it running (``conditions``).

It runs inside the engine controller's event loop, never in the load workers' processes, so a slow or
hung source can only delay its own next poll. A failing source is marked with the reason and retried
with backoff; its numbers disappear (``None``, shown as "n/a") rather than freezing or turning to zero.
``latest()``, ``window_summary()`` and ``conditions()`` may be called from another thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from loadgen.snapshot import GPUSample, ServerTelemetry
from loadgen.telemetry.discover import SERVER_KEYS
from loadgen.telemetry.reading import (
    CumulativeHistogram,
    Reading,
    SourceError,
    add_histograms,
    counter_delta,
    histogram_delta,
)
from loadgen.telemetry.sources import Source

log = logging.getLogger(__name__)

NS = 1_000_000_000
POLITE_FACTOR = 10.0
POLITE_MAX_S = 4.0

# What the server says about itself (discover.SERVER_KEYS) plus what the GPU sources see.
CONDITION_KEYS = (*SERVER_KEYS, "gpu_name", "gpu_count", "gpu_mem_total_mib", "driver_version")
_INT_KEYS = {
    "max_model_len",
    "tp_size",
    "pp_size",
    "dp_size",
    "ep_size",
    "block_size",
    "kv_cache_tokens",
    "speculative_num_draft_tokens",
    "gpu_count",
}

WINDOW_KEYS = (
    "kv_usage_max",
    "kv_usage_mean",
    "running_max",
    "running_mean",
    "waiting_max",
    "preemptions",
    "prefix_cache_hit_rate",
    "gpu_mem_used_max_mib",
    "gpu_util_mean",
    "power_mean_w",
    "spec_acceptance",
    "server_ttft_p50_ms",
    "server_ttft_p95_ms",
    "server_itl_p50_ms",
    "server_itl_p95_ms",
    "server_queue_p95_ms",
    "server_requests",
    "gen_tok_s",
    "prompt_tok_s",
    "server_span_s",
    "server_edge_s",
)
# A poke (a step boundary) polls at once, but never sooner than this, or twice the time the server took to
# answer the last scrape, after the source's last poll began.
POKE_MIN_GAP_S = 0.1


@dataclass
class _State:
    source: Source
    readings: deque[Reading]
    status: str = "starting"
    failures: int = 0
    polls: int = 0
    task: asyncio.Task | None = field(default=None, repr=False)
    poked: asyncio.Event | None = field(default=None, repr=False)


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
            if st.poked is not None and _edge_sampled(st.source):
                st.poked.set()

    def settled(self, t_ns: int) -> bool:
        """Whether every healthy server source has a reading taken after ``t_ns`` (a window's end is
        sampled)."""
        if not self._running:
            return True
        with self._lock:
            return all(
                st.status != "ok" or st.task is None or (bool(st.readings) and st.readings[-1].t_ns >= t_ns)
                for st in self._states.values()
                if _edge_sampled(st.source)
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

    async def __aenter__(self) -> TelemetryHub:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _run(self, st: _State) -> None:
        src = st.source
        # The source's own timeouts should fire first; this outer one only catches a poll that hangs.
        deadline = float(getattr(src, "timeout_s", 2.0)) + 3.0
        while self._running:
            started = time.monotonic()
            if st.poked is not None:
                st.poked.clear()
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
            busy = getattr(src, "last_fetch_s", None)
            polite = POLITE_FACTOR * (busy if busy is not None else time.monotonic() - started)
            delay = max(delay, min(polite, POLITE_MAX_S))
            remaining = max(0.0, delay - (time.monotonic() - started))
            if st.poked is None:
                await asyncio.sleep(remaining)
                continue
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

    def _refresh(self) -> None:
        self._latest = self._compute_latest()
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

    def readings(self, name: str) -> list[Reading]:
        with self._lock:
            return list(self._states[name].readings)

    def latest(self) -> ServerTelemetry:
        """Current gauges, rates over the last few seconds, per-GPU samples, and each source's status."""
        return self._latest

    def _snapshot(
        self, ok_only: bool, tail_s: float | None = None
    ) -> list[tuple[Source, str, list[Reading]]]:
        """Copies of the series (under the lock); ``tail_s``: only the last seconds of each."""
        out = []
        with self._lock:
            for st in self._states.values():
                if ok_only and st.status != "ok":
                    continue
                if tail_s is None or not st.readings:
                    out.append((st.source, st.status, list(st.readings)))
                    continue
                horizon = st.readings[-1].t_ns - int(tail_s * NS)
                tail: list[Reading] = []
                for r in reversed(st.readings):
                    if r.t_ns < horizon:
                        break
                    tail.append(r)
                tail.reverse()
                out.append((st.source, st.status, tail))
        return out

    def _ordered(self, entries: list[tuple[Source, str, list[Reading]]], want: str) -> list[list[Reading]]:
        """Reading lists of the sources that may feed ``want`` ("server" | "gpu"), preferred first."""
        if want == "server":
            return [r for s, _, r in entries if _kind(s) in ("server", "mixed")]
        gpu = [r for s, _, r in entries if _kind(s) == "gpu"]
        mixed = [r for s, _, r in entries if _kind(s) in ("mixed", "server")]
        return gpu + mixed

    def _compute_latest(self) -> ServerTelemetry:
        entries = self._snapshot(ok_only=True, tail_s=max(self.rate_window_s, self.hist_window_s) + 1.0)
        statuses = self._statuses()
        server = _first([r for r in rs if r.has_server] for rs in self._ordered(entries, "server"))
        gpus_series = _first([r for r in rs if r.gpus is not None] for rs in self._ordered(entries, "gpu"))
        runtime = self._known.get("runtime")
        if server is None:
            return ServerTelemetry(
                runtime=str(runtime) if runtime else None,
                gpus=gpus_series[-1].gpus or () if gpus_series else (),
                sources=statuses,
            )
        now = server[-1]
        recent = [r for r in server if r.t_ns >= now.t_ns - int(self.rate_window_s * NS)]
        recent_h = [r for r in server if r.t_ns >= now.t_ns - int(self.hist_window_s * NS)]
        ttft = _hist_window(recent_h, "ttft_s")
        itl = _hist_window(recent_h, "itl_s")
        return ServerTelemetry(
            runtime=str(runtime) if runtime else now.runtime,
            kv_cache_usage=now.gauges.get("kv_usage"),
            running=now.gauges.get("running"),
            waiting=now.gauges.get("waiting"),
            preemptions_per_s=_rate(recent, "preemptions"),
            preemptions_total=now.counters.get("preemptions"),
            prefix_cache_hit_rate=_ratio(recent, "prefix_hits", "prefix_queries", "prefix_hit_rate"),
            spec_acceptance=_ratio(recent, "spec_accepted", "spec_drafted", "spec_accept_rate"),
            server_ttft_ms_p50=_ms(ttft, 0.50),
            server_ttft_ms_p95=_ms(ttft, 0.95),
            server_itl_ms_p50=_ms(itl, 0.50),
            gen_tok_s=_rate(recent, "gen_tokens"),
            prompt_tok_s=_rate(recent, "prompt_tokens"),
            gpus=gpus_series[-1].gpus or () if gpus_series else (),
            sources=statuses,
        )

    def ttft_since(self, t0_ns: int) -> tuple[float | None, float | None]:
        """The server's own TTFT p50/p95 (ms) from the sample nearest ``t0_ns`` to the latest one: the
        console puts it beside the client's figures for the same step. Cheap enough for every snapshot:
        one histogram difference, cached until a new sample arrives."""
        with self._lock:
            last_t = max((st.readings[-1].t_ns for st in self._states.values() if st.readings), default=0)
        key = (t0_ns, last_t)
        if self._ttft_cache is not None and self._ttft_cache[0] == key:
            return self._ttft_cache[1]
        tail_s = max(0.0, (last_t - t0_ns) / NS) + 10.0
        entries = self._snapshot(ok_only=True, tail_s=tail_s)
        out: tuple[float | None, float | None] = (None, None)
        server = _first(
            [r for r in rs if "ttft_s" in r.histograms] for rs in self._ordered(entries, "server")
        )
        if server is not None:
            first = min(server, key=lambda r: abs(r.t_ns - t0_ns))
            last = server[-1]
            if last.t_ns > first.t_ns and last.t_ns > t0_ns:
                hist = _hist_window([first, last], "ttft_s")
                out = (_ms(hist, 0.50), _ms(hist, 0.95))
        self._ttft_cache = (key, out)
        return out

    def window_summary(self, t0_ns: int, t1_ns: int) -> dict[str, float | None]:
        """Figures for a step record line over ``[t0_ns, t1_ns]`` (monotonic ns); ``None`` = n/a.

        Gauges are taken from samples inside the window; counters and histograms from the differences
        between the last sample at or shortly before ``t0_ns`` and the last one inside the window.
        ``gpu_mem_used_max_mib`` is the fullest single GPU; ``power_mean_w`` is summed over GPUs.
        """
        out: dict[str, float | None] = dict.fromkeys(WINDOW_KEYS)
        entries = self._snapshot(ok_only=False)
        server_all = _first(
            rs
            for rs in ([r for r in rs if r.has_server] for rs in self._ordered(entries, "server"))
            if any(t0_ns <= r.t_ns <= t1_ns for r in rs)
        )
        if server_all is not None:
            inside = [r for r in server_all if t0_ns <= r.t_ns <= t1_ns]
            slack = int(max(5.0, 3 * self._interval_of(server_all)) * NS)
            # Counters and histograms: the difference between the samples nearest the window's edges (the
            # engine pokes the hub at each boundary, so these are usually within a scrape's time of them).
            first = min(
                (r for r in server_all if t0_ns - slack <= r.t_ns <= t1_ns), key=lambda r: abs(r.t_ns - t0_ns)
            )
            last = min(
                (r for r in server_all if first.t_ns < r.t_ns <= t1_ns + slack),
                key=lambda r: abs(r.t_ns - t1_ns),
                default=first,
            )
            span = [r for r in server_all if first.t_ns <= r.t_ns <= last.t_ns]
            if last is not first:
                out["server_span_s"] = (last.t_ns - first.t_ns) / NS
                out["server_edge_s"] = max(abs(first.t_ns - t0_ns), abs(last.t_ns - t1_ns)) / NS
            out["kv_usage_max"], out["kv_usage_mean"] = _max_mean(inside, "kv_usage")
            out["running_max"], out["running_mean"] = _max_mean(inside, "running")
            out["waiting_max"], _ = _max_mean(inside, "waiting")
            out["preemptions"] = _delta(span, "preemptions")
            out["server_requests"] = _delta(span, "requests_finished")
            out["prefix_cache_hit_rate"] = _ratio(span, "prefix_hits", "prefix_queries", "prefix_hit_rate")
            out["spec_acceptance"] = _ratio(span, "spec_accepted", "spec_drafted", "spec_accept_rate")
            ttft, itl, queue = (_hist_window(span, k) for k in ("ttft_s", "itl_s", "queue_s"))
            out["server_ttft_p50_ms"] = _ms(ttft, 0.50)
            out["server_ttft_p95_ms"] = _ms(ttft, 0.95)
            out["server_itl_p50_ms"] = _ms(itl, 0.50)
            out["server_itl_p95_ms"] = _ms(itl, 0.95)
            out["server_queue_p95_ms"] = _ms(queue, 0.95)
            out["gen_tok_s"] = _rate(span, "gen_tokens")
            out["prompt_tok_s"] = _rate(span, "prompt_tokens")
        gpu_all = _first(
            rs
            for rs in ([r for r in rs if r.gpus] for rs in self._ordered(entries, "gpu"))
            if any(t0_ns <= r.t_ns <= t1_ns for r in rs)
        )
        if gpu_all is not None:
            inside = [r for r in gpu_all if t0_ns <= r.t_ns <= t1_ns]
            used = [g.mem_used_mib for r in inside for g in r.gpus or () if g.mem_used_mib is not None]
            out["gpu_mem_used_max_mib"] = max(used) if used else None
            utils = [_mean([g.util_pct for g in r.gpus or () if g.util_pct is not None]) for r in inside]
            out["gpu_util_mean"] = _mean([u for u in utils if u is not None])
            powers = [
                sum(g.power_w for g in r.gpus or () if g.power_w is not None)
                for r in inside
                if any(g.power_w is not None for g in r.gpus or ())
            ]
            out["power_mean_w"] = _mean(powers)
        return out

    def _interval_of(self, readings: list[Reading]) -> float:
        if len(readings) < 2:
            return 1.0
        return (readings[-1].t_ns - readings[0].t_ns) / NS / (len(readings) - 1)

    def conditions(self) -> dict[str, object | None]:
        """The run's conditions for the record header; ``None`` where unknown (fill with ``--tag``)."""
        out: dict[str, object | None] = dict.fromkeys(CONDITION_KEYS)
        entries = self._snapshot(ok_only=False)
        learned: dict[str, object] = {}
        for _, _, readings in entries:
            for r in reversed(readings):
                for k, v in r.info.items():
                    learned.setdefault(k, v)
                if r.runtime:
                    learned.setdefault("runtime", r.runtime)
        gpus_series = _first([r for r in rs if r.gpus] or None for rs in self._ordered(entries, "gpu"))
        if gpus_series:
            gpus = gpus_series[-1].gpus or ()
            names = sorted({g.name for g in gpus if g.name})
            learned["gpu_name"] = ", ".join(names) if names else None
            learned["gpu_count"] = len(gpus)
            totals = [g.mem_total_mib for g in gpus if g.mem_total_mib is not None]
            learned["gpu_mem_total_mib"] = max(totals) if totals else None
        with self._lock:
            known = dict(self._known)
        for source in (learned, known):
            for k, v in source.items():
                if v is not None:
                    out[k] = _normalise(k, v)
        return out


# --- window arithmetic ---------------------------------------------------------------------------


def _kind(source: Source) -> str:
    return str(getattr(source, "kind", "mixed"))


def _edge_sampled(source: Source) -> bool:
    """Sampled at step edges (poke) and awaited at a window's end: the sources with server counters."""
    return _kind(source) != "gpu"


def _first(groups: Iterable[list[Reading] | None]) -> list[Reading] | None:
    for g in groups:
        if g:
            return g
    return None


def _delta(readings: list[Reading], key: str) -> float | None:
    """Counter increase across consecutive readings (resets handled pairwise); None with < 2 points."""
    points = [r for r in readings if key in r.counters]
    if len(points) < 2:
        return None
    return sum(
        counter_delta(a.counters[key], b.counters[key]) for a, b in zip(points, points[1:], strict=False)
    )


def _rate(readings: list[Reading], key: str) -> float | None:
    points = [r for r in readings if key in r.counters]
    if len(points) < 2:
        return None
    dt = (points[-1].t_ns - points[0].t_ns) / NS
    if dt <= 0:
        return None
    delta = _delta(points, key)
    return None if delta is None else delta / dt


def _ratio(readings: list[Reading], num: str, den: str, gauge: str) -> float | None:
    """Counter ratio over the window (hits/queries); falls back to a server-computed gauge's mean."""
    points = [r for r in readings if num in r.counters and den in r.counters]
    if len(points) >= 2:
        d = sum(
            counter_delta(a.counters[den], b.counters[den]) for a, b in zip(points, points[1:], strict=False)
        )
        n = sum(
            counter_delta(a.counters[num], b.counters[num]) for a, b in zip(points, points[1:], strict=False)
        )
        return n / d if d > 0 else None
    if points:
        return None
    return _mean([r.gauges[gauge] for r in readings if gauge in r.gauges])


def _hist_window(readings: list[Reading], key: str) -> CumulativeHistogram | None:
    """Observations between the first and last readings that carry histogram ``key``."""
    points = [r.histograms[key] for r in readings if key in r.histograms]
    total: CumulativeHistogram | None = None
    for a, b in zip(points, points[1:], strict=False):
        d = histogram_delta(a, b)
        if d is None:  # buckets changed (server restarted with other settings): start afresh
            total = None
            continue
        total = d if total is None else (add_histograms(total, d) or d)
    return total


def _ms(hist: CumulativeHistogram | None, q: float) -> float | None:
    if hist is None:
        return None
    v = hist.quantile(q)
    return None if v is None else v * 1000.0


def _max_mean(readings: list[Reading], key: str) -> tuple[float | None, float | None]:
    values = [r.gauges[key] for r in readings if key in r.gauges]
    if not values:
        return None, None
    return max(values), sum(values) / len(values)


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else None


def _normalise(key: str, value: object) -> object:
    if key in _INT_KEYS and isinstance(value, (str, float)):
        try:
            return int(float(value))
        except ValueError:
            return value
    if key == "prefix_caching" and isinstance(value, str):
        return {"true": True, "false": False}.get(value.lower(), value)
    return value


def gpu_summary(gpus: Sequence[GPUSample]) -> dict[str, float | None]:
    """Totals across GPUs for a one-line display (used memory, total memory, mean util, total power)."""
    used = [g.mem_used_mib for g in gpus if g.mem_used_mib is not None]
    total = [g.mem_total_mib for g in gpus if g.mem_total_mib is not None]
    util = [g.util_pct for g in gpus if g.util_pct is not None]
    power = [g.power_w for g in gpus if g.power_w is not None]
    return {
        "mem_used_mib": sum(used) if used else None,
        "mem_total_mib": sum(total) if total else None,
        "util_pct": _mean(util),
        "power_w": sum(power) if power else None,
    }

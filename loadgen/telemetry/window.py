"""Pure arithmetic over copied readings: what the server is doing now, what it did during a window, and
under which conditions it runs. No timers, locks or I/O: the hub copies each source's series (``Series``)
under its lock and hands them here.

Counters and histograms over a window are differences between the readings nearest the window's edges
(resets handled pairwise, as ``rate()`` does); gauges are taken from readings inside it. A figure that
cannot be computed is ``None`` (shown as n/a), never zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from loadgen.snapshot import GPUSample, KVHeadroom, ServerPoint, ServerTelemetry
from loadgen.telemetry.discover import SERVER_KEYS
from loadgen.telemetry.reading import (
    CumulativeHistogram,
    Reading,
    SourceKind,
    add_histograms,
    counter_delta,
    histogram_delta,
)

NS = 1_000_000_000

# What the server says about itself (discover.SERVER_KEYS) plus what the GPU sources see.
CONDITION_KEYS = (*SERVER_KEYS, "gpu_name", "gpu_count", "gpu_mem_total_mib", "driver_version")
INT_KEYS = frozenset(
    {
        "max_model_len",
        "tp_size",
        "pp_size",
        "dp_size",
        "ep_size",
        "block_size",
        "kv_cache_tokens",
        "num_gpu_blocks",
        "speculative_num_draft_tokens",
        "gpu_count",
    }
)

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


@dataclass(frozen=True, slots=True)
class Series:
    """One source's readings as copied out of the hub: which panels it may feed, its status, its readings."""

    kind: SourceKind
    status: str
    readings: list[Reading]


def edge_sampled(kind: SourceKind) -> bool:
    """Sampled at step edges (poke) and awaited at a window's end: the sources with server counters."""
    return kind != "gpu"


def preferred(entries: Sequence[Series], want: str) -> list[list[Reading]]:
    """Reading lists of the sources that may feed ``want`` ("server" | "gpu"), preferred first: for the GPU
    panel dedicated GPU sources win over GPU names on a server's page."""
    if want == "server":
        return [e.readings for e in entries if e.kind in ("server", "mixed")]
    gpu = [e.readings for e in entries if e.kind == "gpu"]
    mixed = [e.readings for e in entries if e.kind in ("mixed", "server")]
    return gpu + mixed


def first(groups: Iterable[list[Reading] | None]) -> list[Reading] | None:
    for g in groups:
        if g:
            return g
    return None


# --- now -------------------------------------------------------------------------------------------


def latest(
    entries: Sequence[Series],
    *,
    runtime: object,
    statuses: Mapping[str, str],
    rate_window_s: float,
    hist_window_s: float,
    kv_headroom: KVHeadroom | None = None,
    history_s: float = 0.0,
) -> ServerTelemetry:
    """Current gauges, rates over the last ``rate_window_s``, server latencies over ``hist_window_s``, and
    running / waiting / preemptions per sample over the last ``history_s``."""
    server = first([r for r in rs if r.has_server] for rs in preferred(entries, "server"))
    gpus_series = first([r for r in rs if r.gpus is not None] for rs in preferred(entries, "gpu"))
    gpus = gpus_series[-1].gpus or () if gpus_series else ()
    if server is None:
        return ServerTelemetry(
            runtime=str(runtime) if runtime else None, gpus=gpus, sources=statuses, kv_headroom=kv_headroom
        )
    now = server[-1]
    recent = [r for r in server if r.t_ns >= now.t_ns - int(rate_window_s * NS)]
    recent_h = [r for r in server if r.t_ns >= now.t_ns - int(hist_window_s * NS)]
    ttft = hist_window(recent_h, "ttft_s")
    itl = hist_window(recent_h, "itl_s")
    return ServerTelemetry(
        runtime=str(runtime) if runtime else now.runtime,
        kv_cache_usage=now.gauges.get("kv_usage"),
        running=now.gauges.get("running"),
        waiting=now.gauges.get("waiting"),
        preemptions_per_s=rate(recent, "preemptions"),
        preemptions_total=now.counters.get("preemptions"),
        prefix_cache_hit_rate=ratio(recent, "prefix_hits", "prefix_queries", "prefix_hit_rate"),
        spec_acceptance=ratio(recent, "spec_accepted", "spec_drafted", "spec_accept_rate"),
        server_ttft_ms_p50=ms(ttft, 0.50),
        server_ttft_ms_p95=ms(ttft, 0.95),
        server_itl_ms_p50=ms(itl, 0.50),
        gen_tok_s=rate(recent, "gen_tokens"),
        prompt_tok_s=rate(recent, "prompt_tokens"),
        gpus=gpus,
        sources=statuses,
        kv_headroom=kv_headroom,
        history=history(server, history_s),
    )


def history(server: Sequence[Reading], history_s: float) -> tuple[ServerPoint, ...]:
    """Running, waiting and preemptions (the counter's increase since the sample before) per sample over
    the last ``history_s``, timed in seconds before the newest sample."""
    if not server or history_s <= 0:
        return ()
    newest = server[-1].t_ns
    horizon = newest - int(history_s * NS)
    points = []
    prev: Reading | None = None
    for r in server:
        if r.t_ns >= horizon:
            pre = r.counters.get("preemptions")
            before = prev.counters.get("preemptions") if prev is not None else None
            points.append(
                ServerPoint(
                    t_s=(r.t_ns - newest) / NS,
                    running=r.gauges.get("running"),
                    waiting=r.gauges.get("waiting"),
                    preemptions=None if pre is None or before is None else counter_delta(before, pre),
                )
            )
        prev = r
    return tuple(points)


def ttft_between(entries: Sequence[Series], t0_ns: int) -> tuple[float | None, float | None]:
    """The server's TTFT p50/p95 (ms) from the sample nearest ``t0_ns`` to the latest one."""
    server = first([r for r in rs if "ttft_s" in r.histograms] for rs in preferred(entries, "server"))
    if server is None:
        return None, None
    start = min(server, key=lambda r: abs(r.t_ns - t0_ns))
    last = server[-1]
    if last.t_ns > start.t_ns and last.t_ns > t0_ns:
        hist = hist_window([start, last], "ttft_s")
        return ms(hist, 0.50), ms(hist, 0.95)
    return None, None


# --- a window --------------------------------------------------------------------------------------


def window_summary(entries: Sequence[Series], t0_ns: int, t1_ns: int) -> dict[str, float | None]:
    """Figures for a step record line over ``[t0_ns, t1_ns]`` (monotonic ns); ``None`` = n/a.

    Gauges are taken from samples inside the window; counters and histograms from the differences
    between the last sample at or shortly before ``t0_ns`` and the last one inside the window.
    ``gpu_mem_used_max_mib`` is the fullest single GPU; ``power_mean_w`` is summed over GPUs.
    """
    out: dict[str, float | None] = dict.fromkeys(WINDOW_KEYS)
    server_all = first(
        rs
        for rs in ([r for r in rs if r.has_server] for rs in preferred(entries, "server"))
        if any(t0_ns <= r.t_ns <= t1_ns for r in rs)
    )
    if server_all is not None:
        out.update(_server_window(server_all, t0_ns, t1_ns))
    gpu_all = first(
        rs
        for rs in ([r for r in rs if r.gpus] for rs in preferred(entries, "gpu"))
        if any(t0_ns <= r.t_ns <= t1_ns for r in rs)
    )
    if gpu_all is not None:
        out.update(_gpu_window([r for r in gpu_all if t0_ns <= r.t_ns <= t1_ns]))
    return out


def edges(server_all: list[Reading], t0_ns: int, t1_ns: int) -> tuple[Reading, Reading] | None:
    """The samples nearest the window's edges (the engine pokes the hub at each boundary, so these are
    usually within a scrape's time of them): counters and histograms are their differences."""
    slack = int(max(5.0, 3 * interval_of(server_all)) * NS)
    start = min(
        (r for r in server_all if t0_ns - slack <= r.t_ns <= t1_ns),
        key=lambda r: abs(r.t_ns - t0_ns),
        default=None,
    )
    if start is None:
        return None
    last = min(
        (r for r in server_all if start.t_ns < r.t_ns <= t1_ns + slack),
        key=lambda r: abs(r.t_ns - t1_ns),
        default=start,
    )
    return start, last


def _server_window(server_all: list[Reading], t0_ns: int, t1_ns: int) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    inside = [r for r in server_all if t0_ns <= r.t_ns <= t1_ns]
    found = edges(server_all, t0_ns, t1_ns)
    if found is None:
        return out
    start, last = found
    span = [r for r in server_all if start.t_ns <= r.t_ns <= last.t_ns]
    if last is not start:
        out["server_span_s"] = (last.t_ns - start.t_ns) / NS
        out["server_edge_s"] = max(abs(start.t_ns - t0_ns), abs(last.t_ns - t1_ns)) / NS
    out["kv_usage_max"], out["kv_usage_mean"] = max_mean(inside, "kv_usage")
    out["running_max"], out["running_mean"] = max_mean(inside, "running")
    out["waiting_max"], _ = max_mean(inside, "waiting")
    out["preemptions"] = delta(span, "preemptions")
    out["server_requests"] = delta(span, "requests_finished")
    out["prefix_cache_hit_rate"] = ratio(span, "prefix_hits", "prefix_queries", "prefix_hit_rate")
    out["spec_acceptance"] = ratio(span, "spec_accepted", "spec_drafted", "spec_accept_rate")
    ttft, itl, queue = (hist_window(span, k) for k in ("ttft_s", "itl_s", "queue_s"))
    out["server_ttft_p50_ms"] = ms(ttft, 0.50)
    out["server_ttft_p95_ms"] = ms(ttft, 0.95)
    out["server_itl_p50_ms"] = ms(itl, 0.50)
    out["server_itl_p95_ms"] = ms(itl, 0.95)
    out["server_queue_p95_ms"] = ms(queue, 0.95)
    out["gen_tok_s"] = rate(span, "gen_tokens")
    out["prompt_tok_s"] = rate(span, "prompt_tokens")
    return out


# The parts of the server's TTFT, by their Reading names: the TTFT split (``loadgen.analysis.ttft_split``).
TTFT_PARTS = (("server", "ttft_s"), ("queue", "queue_s"), ("prefill", "prefill_s"))


def ttft_histograms(entries: Sequence[Series], t0_ns: int, t1_ns: int) -> dict[str, CumulativeHistogram]:
    """The server's TTFT, queue-time and prefill-time histograms over ``[t0_ns, t1_ns]``: the differences
    between the samples nearest the window's edges, as ``window_summary`` takes them ("server", "queue",
    "prefill"; a part the server does not export, or that a restart or a change of buckets broke, is
    absent)."""
    server_all = first(
        rs
        for rs in ([r for r in rs if r.has_server] for rs in preferred(entries, "server"))
        if any(t0_ns <= r.t_ns <= t1_ns for r in rs)
    )
    found = edges(server_all, t0_ns, t1_ns) if server_all is not None else None
    if server_all is None or found is None or found[0] is found[1]:
        return {}
    span = [r for r in server_all if found[0].t_ns <= r.t_ns <= found[1].t_ns]
    out = {}
    for part, key in TTFT_PARTS:
        hist = hist_window(span, key)
        if hist is not None:
            out[part] = hist
    return out


def _gpu_window(inside: list[Reading]) -> dict[str, float | None]:
    used = [g.mem_used_mib for r in inside for g in r.gpus or () if g.mem_used_mib is not None]
    utils = [mean([g.util_pct for g in r.gpus or () if g.util_pct is not None]) for r in inside]
    powers = [
        sum(g.power_w for g in r.gpus or () if g.power_w is not None)
        for r in inside
        if any(g.power_w is not None for g in r.gpus or ())
    ]
    return {
        "gpu_mem_used_max_mib": max(used) if used else None,
        "gpu_util_mean": mean([u for u in utils if u is not None]),
        "power_mean_w": mean(powers),
    }


def interval_of(readings: list[Reading]) -> float:
    """Mean seconds between readings (1 s with fewer than two)."""
    if len(readings) < 2:
        return 1.0
    return (readings[-1].t_ns - readings[0].t_ns) / NS / (len(readings) - 1)


# --- conditions ------------------------------------------------------------------------------------


def conditions(entries: Sequence[Series], known: Mapping[str, object]) -> dict[str, object | None]:
    """The run's conditions for the record header; ``known`` (``discover()``, ``--tag``) wins over what
    the sources saw; ``None`` where unknown."""
    out: dict[str, object | None] = dict.fromkeys(CONDITION_KEYS)
    learned: dict[str, object] = {}
    for entry in entries:
        for r in reversed(entry.readings):
            for k, v in r.info.items():
                learned.setdefault(k, v)
            if r.runtime:
                learned.setdefault("runtime", r.runtime)
    gpus_series = first([r for r in rs if r.gpus] or None for rs in preferred(entries, "gpu"))
    if gpus_series:
        gpus = gpus_series[-1].gpus or ()
        names = sorted({g.name for g in gpus if g.name})
        learned["gpu_name"] = ", ".join(names) if names else None
        learned["gpu_count"] = len(gpus)
        totals = [g.mem_total_mib for g in gpus if g.mem_total_mib is not None]
        learned["gpu_mem_total_mib"] = max(totals) if totals else None
    for source in (learned, known):
        for k, v in source.items():
            if v is not None:
                out[k] = normalise(k, v)
    return out


def normalise(key: str, value: object) -> object:
    if key in INT_KEYS and isinstance(value, (str, float)):
        try:
            return int(float(value))
        except ValueError:
            return value
    if key == "prefix_caching" and isinstance(value, str):
        return {"true": True, "false": False}.get(value.lower(), value)
    return value


# --- arithmetic on a series ------------------------------------------------------------------------


def delta(readings: list[Reading], key: str) -> float | None:
    """Counter increase across consecutive readings (resets handled pairwise); None with < 2 points."""
    points = [r for r in readings if key in r.counters]
    if len(points) < 2:
        return None
    return sum(
        counter_delta(a.counters[key], b.counters[key]) for a, b in zip(points, points[1:], strict=False)
    )


def rate(readings: list[Reading], key: str) -> float | None:
    points = [r for r in readings if key in r.counters]
    if len(points) < 2:
        return None
    dt = (points[-1].t_ns - points[0].t_ns) / NS
    if dt <= 0:
        return None
    d = delta(points, key)
    return None if d is None else d / dt


def ratio(readings: list[Reading], num: str, den: str, gauge: str) -> float | None:
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
    return mean([r.gauges[gauge] for r in readings if gauge in r.gauges])


def hist_window(readings: list[Reading], key: str) -> CumulativeHistogram | None:
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


def ms(hist: CumulativeHistogram | None, q: float) -> float | None:
    if hist is None:
        return None
    v = hist.quantile(q)
    return None if v is None else v * 1000.0


def max_mean(readings: list[Reading], key: str) -> tuple[float | None, float | None]:
    values = [r.gauges[key] for r in readings if key in r.gauges]
    if not values:
        return None, None
    return max(values), sum(values) / len(values)


def mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else None


def gpu_summary(gpus: Sequence[GPUSample]) -> dict[str, float | None]:
    """Totals across GPUs for a one-line display (used memory, total memory, mean util, total power)."""
    used = [g.mem_used_mib for g in gpus if g.mem_used_mib is not None]
    total = [g.mem_total_mib for g in gpus if g.mem_total_mib is not None]
    util = [g.util_pct for g in gpus if g.util_pct is not None]
    power = [g.power_w for g in gpus if g.power_w is not None]
    return {
        "mem_used_mib": sum(used) if used else None,
        "mem_total_mib": sum(total) if total else None,
        "util_pct": mean(util),
        "power_w": sum(power) if power else None,
    }

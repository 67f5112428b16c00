"""ramp's own live metrics in Prometheus' exposition format (``--metrics-port``), for every face alike.

The exporter is handed each ``Snapshot`` the engine publishes (``RunConfig.snapshot_sink``) and keeps only
the latest one; a scrape turns that one into metric families (``SnapshotCollector``). Nothing here touches
the hot path: a run without ``--metrics-port`` has no exporter at all, and one with it pays a reference
assignment per snapshot plus the work of each scrape.

Counters (requests, tokens) and histograms are the run's measured windows (warm-up excluded): the same
totals the record's steps add up to. The histograms' buckets are exact counts at fixed bounds
(``loadgen.snapshot.BUCKETS``), read from the HDR histograms; the quantile gauges are the HDR percentiles
themselves, per window (``step``, ``rolling``, ``run``), exact where any bucket interpolation is not.
``/healthz`` answers while the exporter serves; ``/readyz`` once a snapshot shows the load running.
"""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, get_args
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from loadgen import measures
from loadgen.config import WINDOWS, RunState, StepPhase
from loadgen.observe.margin_families import margin_families
from loadgen.observe.share import SHARE_PATH, SnapshotShare, target_secrets
from loadgen.run.config import RunConfig
from loadgen.snapshot import HistogramView, Snapshot, WindowStats

WSGIEnvironment = dict[str, Any]  # wsgiref.types has these from Python 3.11 only
StartResponse = Callable[..., Any]

# Snapshot metric key -> (Prometheus base name, factor from the display unit to the base unit, unit)
HISTOGRAMS: dict[str, tuple[str, float, str]] = {
    measures.TTFT_MS: ("ramp_ttft", 1e-3, "seconds"),
    measures.ITL_MS: ("ramp_itl", 1e-3, "seconds"),
    measures.E2E_MS: ("ramp_e2e", 1e-3, "seconds"),
    measures.DECODE_TOK_S: ("ramp_decode", 1.0, "tokens_per_second"),
}
QUANTILES: tuple[tuple[str, str], ...] = (
    ("0.5", "p50"),
    ("0.9", "p90"),
    ("0.95", "p95"),
    ("0.99", "p99"),
    ("0.999", "p999"),
)
RUN_STATES: tuple[str, ...] = get_args(RunState)
PHASES: tuple[str, ...] = get_args(StepPhase)
READY_STATES = ("running", "paused")


def gauge(name: str, doc: str, value: float | None) -> Iterator[Metric]:
    """One unlabelled gauge; without a sample (never a fake zero) when the snapshot does not know it."""
    family = GaugeMetricFamily(name, doc)
    if value is not None:
        family.add_metric([], float(value))
    yield family


def one_hot(name: str, doc: str, label: str, values: Iterable[str], current: str) -> Metric:
    """A closed set as a gauge per member, 1 for the current one (Prometheus' "state set" idiom)."""
    family = GaugeMetricFamily(name, doc, labels=[label])
    for value in values:
        family.add_metric([value], 1.0 if value == current else 0.0)
    return family


def load_families(snap: Snapshot, t0_unix: float | None = None) -> Iterator[Metric]:
    """What the load is: its level, rate, what is in flight, the step and its phase. ``t0_unix``: when
    the run began, in Unix time (by default, the snapshot's elapsed time back from now)."""
    yield InfoMetricFamily(
        "ramp_run",
        "the run: model, runtime, profile, mode, arrival",
        value={
            "model": snap.model,
            "runtime": snap.runtime or "",
            "profile": snap.profile,
            "mode": snap.mode,
            "arrival": snap.arrival,
        },
    )
    yield one_hot("ramp_state", "the run's state (1 = current)", "state", RUN_STATES, snap.state)
    yield one_hot("ramp_phase", "the current step's phase (1 = current)", "phase", PHASES, snap.phase)
    yield from gauge(
        "ramp_level", "target concurrency (closed) or concurrency cap (open, 0 = none)", snap.level
    )
    yield from gauge("ramp_rate_rps", "asked arrival rate, requests/s (open loop)", snap.rate_rps)
    yield from gauge(
        "ramp_achieved_rps", "achieved send rate over the rolling window (open)", snap.achieved_rps
    )
    yield from gauge("ramp_in_flight", "requests in flight", snap.in_flight)
    yield from gauge("ramp_queued", "open loop: arrivals waiting for a free slot", snap.queued)
    yield from gauge("ramp_backing_off", "virtual users pausing after a refusal", snap.backing_off)
    yield from gauge("ramp_paused", "1 while the load is paused", 1.0 if snap.paused else 0.0)
    yield from gauge("ramp_step", "the current step, 1-based (the record's step number)", snap.step_index + 1)
    yield from gauge("ramp_plan_steps", "steps in the plan", snap.step_count)
    yield from gauge("ramp_steps_finished", "steps finished so far", len(snap.steps))
    yield from gauge("ramp_step_elapsed_seconds", "seconds since the current step began", snap.step_elapsed_s)
    yield from gauge("ramp_step_remaining_seconds", "seconds left in the current step", snap.step_remaining_s)
    yield from gauge("ramp_elapsed_seconds", "seconds since the run began", snap.elapsed_s)
    yield from gauge("ramp_snapshot_seq", "the number of the snapshot these figures come from", snap.seq)
    yield step_starts(snap, time.time() - snap.elapsed_s if t0_unix is None else t0_unix)


def step_starts(snap: Snapshot, t0_unix: float) -> Metric:
    """When each step of the run began (its warm-up), in Unix time, one series per step kept for the whole
    run: a dashboard's step boundaries. A gauge of the current step's start alone changed between two
    scrapes and was missed (at a 15 s scrape, none of 3 step changes showed); these stay to be read."""
    family = GaugeMetricFamily(
        "ramp_step_start_timestamp_seconds", "Unix time at which each step began", labels=["step"]
    )
    for index, start_s in enumerate(snap.step_starts_s):
        family.add_metric([str(index + 1)], round(t0_unix + start_s, 3))  # the record's step number
    return family


def client_families(snap: Snapshot) -> Iterator[Metric]:
    """Whether ramp itself is the bottleneck, and each worker process's CPU."""
    health = snap.health
    yield from gauge(
        "ramp_client_bound", "1 when the client may be the bottleneck", float(health.client_bound)
    )
    yield from gauge(
        "ramp_loop_lag_p99_seconds", "workers' event-loop lag p99", _scaled(health.loop_lag_ms_p99)
    )
    # cpu_pct is by worker id when every worker reported: only then is each one's host known
    hosts = snap.worker_hosts if len(snap.worker_hosts) == len(health.cpu_pct) else ()
    cpu = GaugeMetricFamily(
        "ramp_worker_cpu_percent", "each load worker's CPU, 100 = one core", labels=["worker", "host"]
    )
    for worker, pct in enumerate(health.cpu_pct):
        cpu.add_metric([str(worker), hosts[worker] if hosts else ""], pct)
    yield cpu
    per_host = GaugeMetricFamily(
        "ramp_workers", "load workers per host (processes or Ray actors)", labels=["host"]
    )
    for host in sorted(set(snap.worker_hosts)):
        per_host.add_metric([host], snap.worker_hosts.count(host))
    yield per_host


def _scaled(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def total_families(run: WindowStats) -> Iterator[Metric]:
    """The run's measured windows: requests by outcome and error kind, tokens in and out."""
    requests = CounterMetricFamily(
        "ramp_requests", "requests answered in measured windows", labels=["status"]
    )
    requests.add_metric(["ok"], run.ok)
    requests.add_metric(["error"], run.error_count)
    requests.add_metric(["cancelled"], run.cancelled)
    yield requests
    errors = CounterMetricFamily("ramp_errors", "errors in measured windows, by kind", labels=["kind"])
    for kind, count in sorted(run.errors.items()):
        errors.add_metric([kind], count)
    yield errors
    tokens = CounterMetricFamily("ramp_tokens", "tokens in measured windows (usage)", labels=["direction"])
    tokens.add_metric(["input"], run.input_tokens)
    tokens.add_metric(["output"], run.output_tokens)
    tokens.add_metric(["cached"], run.cached_tokens)
    yield tokens


def rate_families(windows: Mapping[str, WindowStats]) -> Iterator[Metric]:
    """Throughput and request rate per window (step, rolling, run)."""
    specs = (
        ("ramp_output_tokens_per_second", "aggregate output tokens/s", lambda w: w.out_tok_s),
        ("ramp_input_tokens_per_second", "prompt tokens/s", lambda w: w.prefill_tok_s),
        ("ramp_requests_per_second", "successful requests/s", lambda w: w.req_s),
        ("ramp_goodput_requests_per_second", "requests/s that met the SLO", lambda w: w.goodput_req_s),
    )
    for name, doc, read in specs:
        family = GaugeMetricFamily(name, doc, labels=["window"])
        for window, stats in windows.items():
            value = read(stats)
            if value is not None:
                family.add_metric([window], value)
        yield family


def histogram_family(metric: str, view: HistogramView | None) -> Metric:
    """The run's distribution of one metric as a Prometheus histogram (base units; ``_sum`` is HDR's mean
    times the count, to HDR's 0.1 % resolution). Declared without samples until the window has values."""
    base, factor, unit = HISTOGRAMS[metric]
    name, doc = f"{base}_{unit}", f"{metric} over the run's measured windows"
    if view is None or not view.le:
        return HistogramMetricFamily(name, doc)
    buckets = [(_bound(le * factor), count) for le, count in view.le]
    buckets.append(("+Inf", view.pct.count))
    total = (view.pct.mean or 0.0) * view.pct.count * factor
    family = HistogramMetricFamily(name, doc)
    family.add_metric([], buckets=buckets, sum_value=total)
    return family


def _bound(value: float) -> str:
    return f"{value:.6g}"


def quantile_families(windows: Mapping[str, WindowStats]) -> Iterator[Metric]:
    """Exact HDR percentiles of each metric per window: what histogram_quantile can only approximate. A
    summary per window (quantiles, count, sum), Prometheus' type for precomputed quantiles: a gauge with a
    ``quantile`` label is what ``promtool check metrics`` refuses."""
    for metric, (base, factor, unit) in HISTOGRAMS.items():
        name = f"{base}_quantile_{unit}"
        family = SummaryMetricFamily(name, f"{metric} percentiles (HDR, exact)", labels=["window"])
        for window, stats in windows.items():
            pct = stats.pct(metric)
            if not pct.count:
                continue
            family.add_metric([window], pct.count, (pct.mean or 0.0) * pct.count * factor)
            for quantile, field in QUANTILES:
                value = pct.as_dict()[field]
                if value is not None:
                    family.add_sample(name, {"window": window, "quantile": quantile}, value * factor)
        yield family


def replica_families(snap: Snapshot) -> Iterator[Metric]:
    """Several replicas as one target: each one's share of the rolling window."""
    if not snap.replicas:
        return
    labels = ["replica", "url"]
    specs = (
        ("ramp_replica_requests", "requests answered in the rolling window", lambda r: r.requests),
        ("ramp_replica_errors", "errors in the rolling window", lambda r: r.errors),
        ("ramp_replica_output_tokens_per_second", "output tokens/s", lambda r: r.out_tok_s),
        ("ramp_replica_ttft_p95_seconds", "TTFT p95", lambda r: _scaled(r.ttft_ms_p95)),
        ("ramp_replica_kv_cache_usage", "KV cache usage 0..1 from its /metrics", lambda r: r.kv_usage),
    )
    for name, doc, read in specs:
        family = GaugeMetricFamily(name, doc, labels=labels)
        for replica in snap.replicas:
            value = read(replica)
            if value is not None:
                family.add_metric([replica.name, replica.url], float(value))
        yield family


def snapshot_families(snap: Snapshot, t0_unix: float | None = None) -> Iterator[Metric]:
    """Every family a scrape shows for one snapshot (``t0_unix``: the run's start, as ``load_families``)."""
    windows: dict[str, WindowStats] = {w: snap.windows[w] for w in WINDOWS if w in snap.windows}
    yield from load_families(snap, t0_unix)
    yield from client_families(snap)
    run = windows.get("run")
    if run is not None:
        yield from total_families(run)
        for metric in HISTOGRAMS:
            yield histogram_family(metric, run.hist.get(metric))
    yield from rate_families(windows)
    yield from quantile_families(windows)
    yield from replica_families(snap)
    yield from margin_families(snap)  # each step's figures with their 95 % intervals


class SnapshotCollector(Collector):
    """A Prometheus collector over the latest snapshot it was handed (none yet: only ``ramp_up``)."""

    def __init__(self) -> None:
        self.latest: Snapshot | None = None
        self.t0_unix: float | None = None  # the run's start in Unix time, taken once: steady step starts

    def feed(self, snap: Snapshot) -> None:
        """The engine's snapshot sink: a reference assignment, atomic under the GIL (and, once, the run's
        start in Unix time, read as the first snapshot is handed over)."""
        if self.t0_unix is None:
            self.t0_unix = time.time() - snap.elapsed_s
        self.latest = snap

    def collect(self) -> Iterator[Metric]:
        snap = self.latest
        yield GaugeMetricFamily(
            "ramp_up", "1 once the run has published a snapshot", value=float(snap is not None)
        )
        if snap is not None:
            yield from snapshot_families(snap, self.t0_unix)


class _Quiet(WSGIRequestHandler):
    timeout = 10  # a scraper that stalls mid-request gives its thread back

    def log_message(self, format: str, *args: object) -> None:  # scrapes are not the operator's business
        pass


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6  # --metrics-host ::, ::1


@dataclass
class MetricsServer:
    """The HTTP side: ``/metrics``, ``/healthz``, ``/readyz`` and ``/snapshot`` (``ramp attach``'s view,
    ``loadgen.observe.share``) on a thread of its own until ``close``."""

    collector: SnapshotCollector
    registry: CollectorRegistry
    server: WSGIServer
    thread: threading.Thread
    share: SnapshotShare

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}/metrics"

    def app(self, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path in ("/metrics", "/"):
            body = generate_latest(self.registry)
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
            return [body]
        if path == SHARE_PATH:
            body, etag = self.share.reply(self.collector.latest)
            headers = [("ETag", etag), ("Cache-Control", "no-store")]
            if environ.get("HTTP_IF_NONE_MATCH") == etag:
                start_response("304 Not Modified", headers)
                return []
            start_response("200 OK", [("Content-Type", "application/json"), *headers])
            return [body]
        if path == "/healthz":
            return _text(start_response, "200 OK", "ok\n")
        if path == "/readyz":
            snap = self.collector.latest
            state = "starting" if snap is None else snap.state
            status = "200 OK" if state in READY_STATES else "503 Service Unavailable"
            return _text(start_response, status, f"{state}\n")
        return _text(start_response, "404 Not Found", "not found: /metrics, /healthz, /readyz, /snapshot\n")

    def close(self) -> None:
        self.share.linger(self.collector.latest)  # attached consoles read how the run ended first
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def _text(start_response: StartResponse, status: str, body: str) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [body.encode()]


def serve(host: str, port: int) -> MetricsServer:
    """Bind ``host:port`` (0: a free port) and serve on a daemon thread. Raises OSError when it cannot bind."""
    collector = SnapshotCollector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    holder: list[MetricsServer] = []

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        return holder[0].app(environ, start_response)

    server_class = _ThreadingServer6 if ":" in host else _ThreadingServer
    server = make_server(host.strip("[]"), port, app, server_class=server_class, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="ramp-metrics", daemon=True)
    metrics = MetricsServer(collector, registry, server, thread, SnapshotShare())
    holder.append(metrics)
    thread.start()
    return metrics


def with_exporter(
    config: RunConfig, host: str, port: int | None, say: Callable[[str], None] | None = None
) -> tuple[RunConfig, MetricsServer | None]:
    """``--metrics-port``: the config with the exporter as its snapshot sink and its URL for the record
    header, and the exporter (to ``close``); with no port, the config as it was and None. ValueError, with
    a message for the operator, when it cannot listen there."""
    if port is None:
        return config, None
    if not 0 <= port <= 65535:
        raise ValueError(f"--metrics-port {port}: a port is 0 (any free one) to 65535")
    try:
        metrics = serve(host, port)
    except (OSError, UnicodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"--metrics-port {port}: cannot listen on {host}:{port}: {why}") from None
    metrics.share.secrets = target_secrets(config.target)  # never in what /snapshot shares
    (say or _stderr)(f"ramp: metrics on {metrics.url}\n")
    return replace(config, snapshot_sink=metrics.collector.feed, metrics_url=metrics.url), metrics


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()

"""The immutable picture of a run that the engine publishes a few times a second.

Every face (the Textual console, the headless reporter, Python callers) renders only these objects; none
of them ever sees a single request or token. Units are in the field names (``_ms``, ``_s``, ``_tok_s``).
Missing values are ``None`` (shown as "n/a"), never a fake zero.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NoReturn

from loadgen.config import SLO, WINDOWS, EndedBy, Mode, RunState, StepPhase, Window
from loadgen.measures import LiveMap
from loadgen.stats import Interval


class _EmptyMapping(Mapping[Any, Any]):
    """An immutable, hashable empty mapping: Python >= 3.11 dataclasses refuse unhashable defaults
    (a ``MappingProxyType`` default raises "mutable default ... is not allowed")."""

    __slots__ = ()

    def __getitem__(self, key: object) -> NoReturn:
        raise KeyError(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "{}"


# Typed Any on purpose: the one empty default of every Mapping field, whatever its key and value types.
EMPTY: Mapping[Any, Any] = _EmptyMapping()

# What makes a step not clean besides a cut: a load worker died while the step was measured or closed
# (its load was not held, its requests in flight vanished: ``lost_requests``); the run stopped while the
# step closed (its requests still in flight were cancelled, not counted).
StepFlag = Literal["worker_lost", "closing_cut"]
STEP_FLAGS: tuple[StepFlag, ...] = ("worker_lost", "closing_cut")

# Histogram metric names, with the unit their values are displayed in: every metric drawn as a distribution,
# in the catalogue's order (what each measures: ``loadgen.measures``).
METRICS: Mapping[str, str] = LiveMap(
    lambda metrics, _clauses: {m.name: m.unit for m in metrics if m.kind != "tokens"}
)

# Fixed bucket upper bounds (display units) of each metric exported as a Prometheus histogram
# (``loadgen.observe.exporter``): ``Metric.buckets`` in the catalogue; ``HistogramView.le`` counts at them.
BUCKETS: Mapping[str, tuple[float, ...]] = LiveMap(
    lambda metrics, _clauses: {m.name: m.buckets for m in metrics if m.buckets}
)

__all__ = ["SLO", "WINDOWS"]  # re-exported for the faces: both belong to config


@dataclass(frozen=True, slots=True)
class Percentiles:
    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None
    min: float | None = None

    def as_dict(self) -> dict[str, float | None]:
        """Every field by name, in field order (how a record line stores them)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class HistogramView:
    """A histogram ready to draw: log-spaced bins with counts, plus its percentiles (display units)."""

    metric: str
    unit: str
    pct: Percentiles
    bins: tuple[tuple[float, float, int], ...] = ()  # (low, high, count), ascending, log-spaced
    # (upper bound, values at or below it), cumulative, at the metric's fixed ``BUCKETS``; empty unless asked
    # for (``Accumulator.with_buckets``: the run window of a run with --metrics-port)
    le: tuple[tuple[float, int], ...] = ()


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Figures over one window: the current step's measurement window, the last N seconds, or the run."""

    window: Window
    duration_s: float = 0.0
    ok: int = 0
    errors: Mapping[str, int] = EMPTY  # ErrorKind value -> count
    cancelled: int = 0
    input_tokens: int = 0
    output_tokens: int = 0  # successful output tokens, from usage
    cached_tokens: int = 0
    out_tok_s: float | None = None  # aggregate output tokens/s (capacity)
    prefill_tok_s: float | None = None  # input tokens/s
    req_s: float | None = None
    approx_tokens: int = 0  # requests whose token count was not from usage
    reasoning_tokens: int = 0  # successful requests' reasoning tokens (usage's, else counted chunks)
    reasoned: int = 0  # successful requests that reasoned (reasoning text before the answer)
    tool_calls: int = 0  # successful requests that called a tool (streamed a tool-call delta)
    tool_tokens: int = 0  # their tool-call arguments' tokens
    hist: Mapping[str, HistogramView] = EMPTY  # metric name -> view (see METRICS)
    by_class: Mapping[str, Mapping[str, Percentiles]] = EMPTY  # "cache:hit" -> {"ttft_ms": ...}
    # metric -> values that fell outside its histogram (negative, or past its top): not in its percentiles
    out_of_range: Mapping[str, int] = EMPTY
    # Goodput: requests (and their output tokens) per second that met the SLO's per-request limits
    # (SLO.good); None without an SLO.
    goodput_req_s: float | None = None
    goodput_tok_s: float | None = None

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def success_rate(self) -> float | None:
        done = self.ok + self.error_count
        return None if done == 0 else self.ok / done

    def pct(self, metric: str) -> Percentiles:
        view = self.hist.get(metric)
        return view.pct if view is not None else Percentiles()


@dataclass(frozen=True, slots=True)
class ClientHealth:
    loop_lag_ms_p99: float | None = None
    loop_lag_ms_max: float | None = None
    cpu_pct: tuple[float, ...] = ()  # per worker process, 100 = one core
    client_bound: bool = False
    reason: str = ""  # why the client is (or may be) the bottleneck


@dataclass(frozen=True, slots=True)
class SLOVerdict:
    met: bool | None  # None = no SLO, not enough data, or no clause could be judged
    failures: tuple[str, ...] = ()  # e.g. "ttft p95 812 ms > 500 ms"
    # clauses with nothing to judge, neither met nor missed: "TTFTC p95 n/a (no tool call ...)"
    not_judged: tuple[str, ...] = ()
    # clauses whose figure's interval straddles the limit (``loadgen.stats.decide``): neither met nor missed
    # yet, "TTFT p95 99 ms (93-105) vs 100 ms, ≈40 s more"; a step with one is never the best
    undecided: tuple[str, ...] = ()
    # met / missed / undecided on the intervals: missed when one clause's whole interval is past its limit,
    # undecided when none is but one straddles its limit; None: not judged on intervals (``met`` stands)
    on_intervals: Literal["met", "missed", "undecided"] | None = None

    @property
    def three_valued(self) -> Literal["met", "missed", "undecided"] | None:
        """The verdict in three values; None without an SLO or a judged clause."""
        if self.on_intervals is not None:
            return self.on_intervals
        if self.met is None:
            return None
        return "met" if self.met else "missed"


@dataclass(frozen=True, slots=True)
class ReplicaStats:
    """One replica's share of a window when several replicas make one target (``loadgen.metrics.replicas``).
    ``out_tok_s`` counts the output tokens of its successful requests (usage), over the window."""

    name: str  # "A", "B", ... in the order the URLs were given
    url: str = ""  # scrubbed: no credentials
    requests: int = 0  # answered: ok + errors
    ok: int = 0
    errors: int = 0
    cancelled: int = 0
    output_tokens: int = 0
    out_tok_s: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p95: float | None = None
    kv_usage: float | None = None  # 0..1 from its /metrics (the step's mean in a step line), None: n/a


@dataclass(frozen=True, slots=True)
class StepSummary:
    """One finished step: exactly what goes into a record line (plus the serialized histograms there)."""

    index: int
    mode: Mode
    level: int  # target concurrency (closed) or max concurrency cap (open, 0 = none)
    rate_rps: float | None  # open loop arrival rate
    arrival: str  # "closed" | "constant" | "poisson" | "gamma(k)"
    warmup_s: float
    window_s: float
    duration_s: float
    stats: WindowStats
    verdict: SLOVerdict
    client_bound: bool
    ended_by: EndedBy = "plan"
    server: Mapping[str, float | None] = EMPTY  # telemetry summary for the step (kv max, waiting max...)
    marks: tuple[str, ...] = ()
    # The measurement window on the host's monotonic clock (time.monotonic_ns): joins with traces, server
    # logs or a simulator's ground truth taken on the same host.
    window_t0_ns: int = 0
    window_t1_ns: int = 0
    bound_reason: str = ""  # why client_bound (which worker symptom), "" when not
    # Share of the step's counted requests still in flight when its load was changed by hand (they finished
    # under the next load): 0.0 for a step closed under its own load. Only clean steps can be best.
    carried_share: float = 0.0
    closing_s: float = 0.0  # from the window's end until its last counted request was done (load held)
    latest_errors: Mapping[str, str] = EMPTY  # error kind -> the step's latest message of it (scrubbed)
    repeat: int = 0  # which repeat of its level this step is (0-based; --repeat N)
    # The server's prefix cache before the step: "reset" (--reset-prefix-cache did it; ``cache_how`` says
    # how), "kept" (whatever earlier steps and runs left in it), "" (not known: an old record).
    cache: str = ""
    cache_how: str = ""
    replicas: tuple[ReplicaStats, ...] = ()  # several replicas as one target: each one's share of the step
    idle_replicas: tuple[str, ...] = ()  # "replica B served 0 requests": each replica that served none
    # A managed endpoint's latest x-ratelimit-* values in the step ("remaining-tokens" -> "9990"); empty
    # when the server sent none
    ratelimit: Mapping[str, str] = EMPTY
    flags: tuple[StepFlag, ...] = ()  # see STEP_FLAGS: a flagged step is never clean
    lost_requests: int = 0  # worker_lost: its requests in flight on the lost worker (at least these vanished)
    settling_s: float = 0.0  # before its warm-up: waiting for the surplus streams of a lowering to finish
    # each step-line percentile and rate with its 95 % interval (``loadgen.metrics.slices``): ttft_p95_ms,
    # out_tok_s ...; empty for a record written before margins existed
    margins: Mapping[str, Interval] = EMPTY
    # the client's TTFT beside the server's own TTFT, queue and prefill time (``loadgen.analysis.ttft_split``)
    ttft_split: Mapping[str, object] = EMPTY
    # the limiting mechanism: kind, confidence, evidence, first_checks (``loadgen.analysis.diagnosis``)
    diagnosis: Mapping[str, object] = EMPTY
    # answer probes (--quality): n, agree with its interval, the median common prefix, tasks_ok, errors
    # (``loadgen.analysis.quality``); empty without probes
    quality: Mapping[str, object] = EMPTY
    # A step a key cut, read again on its requests done before the key (``loadgen.run.censor``): ok, carried,
    # slo_met, agrees (the carried requests decide nothing), its TTFT / ITL / e2e percentiles; empty when
    # no key cut it
    before_key: Mapping[str, object] = EMPTY

    @property
    def clean(self) -> bool:
        """Measured under its own load: closed under it, or cut by a key whose carried requests decide
        nothing (the SLO reads the same on the requests done before the key); and no flag."""
        return (self.carried_share == 0.0 or self.before_key.get("agrees") is True) and not self.flags


@dataclass(frozen=True, slots=True)
class GPUSample:
    index: int
    name: str = ""
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    util_pct: float | None = None
    power_w: float | None = None


@dataclass(frozen=True, slots=True)
class KVHeadroom:
    """The server's KV cache as concurrent sequences of this profile (``loadgen.telemetry.headroom``).

    ``capacity_tokens`` is what the server says it holds (vLLM: num_gpu_blocks x block_size; SGLang:
    max_total_num_tokens); ``seqs_at_mean`` / ``seqs_at_p95`` how many sequences of the profile's mean / p95
    context (prompt + output, whole blocks each) fit at once. None where the profile or server does not say.
    """

    capacity_tokens: int
    source: str  # where the capacity was read: "num_gpu_blocks x block_size", "kv_cache_size_tokens"...
    block_size: int | None = None
    num_blocks: int | None = None
    context_mean: float | None = None  # tokens: prompt + max_tokens, a session's history included
    context_p95: int | None = None
    seqs_at_mean: int | None = None
    seqs_at_p95: int | None = None


@dataclass(frozen=True, slots=True)
class ServerPoint:
    """One server sample for the panel's short history: ``t_s`` seconds before the newest sample (<= 0)."""

    t_s: float
    running: float | None = None
    waiting: float | None = None
    preemptions: float | None = None  # preemptions since the sample before (None: counter not published)


@dataclass(frozen=True, slots=True)
class ServerTelemetry:
    """Server and GPU state beside the client's numbers. ``None`` fields are n/a; ``sources`` says why."""

    runtime: str | None = None
    kv_cache_usage: float | None = None  # 0..1
    running: float | None = None
    waiting: float | None = None
    preemptions_per_s: float | None = None
    preemptions_total: float | None = None
    prefix_cache_hit_rate: float | None = None  # 0..1 over the window
    spec_acceptance: float | None = None  # 0..1
    server_ttft_ms_p50: float | None = None  # over the last ``hist_window_s`` (the rolling window)
    server_ttft_ms_p95: float | None = None
    step_ttft_ms_p50: float | None = None  # over the current step's measurement window (engine fills it)
    step_ttft_ms_p95: float | None = None
    server_itl_ms_p50: float | None = None
    gen_tok_s: float | None = None
    prompt_tok_s: float | None = None
    gpus: tuple[GPUSample, ...] = ()
    sources: Mapping[str, str] = EMPTY  # source name -> "ok" or the reason it is n/a
    kv_headroom: KVHeadroom | None = None  # the KV cache in sequences of this profile; None: not known
    history: tuple[ServerPoint, ...] = ()  # running / waiting / preemptions, last minutes, oldest first


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    t_s: float  # seconds since run start
    out_tok_s: float
    prefill_tok_s: float
    req_s: float
    in_flight: int
    level: int


@dataclass(frozen=True, slots=True)
class Precision:
    """--precision PCT while a step measures: the target, and about how many more seconds until every live
    margin is within it (0: reached; None: no estimate yet)."""

    pct: float
    eta_s: float | None = None


SearchState = Literal["probing", "held", "done", "stopped", "following"]


@dataclass(frozen=True, slots=True)
class SearchProbe:
    """One probe of the SLA search as the console draws it: its level, its SLO margin (``loadgen.slo.margin``:
    the tightest objective's room as a share of its limit, at least 0 meets) and its verdict."""

    level: float
    margin: float
    met: bool
    verdict: str | None  # met / missed / undecided on its intervals; None: judged on its point value
    step: int  # the step's number (from 1, as the record's)
    by_operator: bool = False  # a level the operator set during the search


@dataclass(frozen=True, slots=True)
class SearchView:
    """The SLA search (``--find-max``, or ``f`` in the console) as it forms (``loadgen.run.live_search``)."""

    lo: float
    hi: float
    state: SearchState  # held: the operator took over; following: done, the knee held and judged
    level: float | None = None  # the level probed now (probing), or held (following; or, following with
    # why "room above", the level above the knee probed now)
    why: str = ""  # why this level is probed again ("" for its first probe), or why the search ended
    probes: tuple[SearchProbe, ...] = ()
    fit: tuple[tuple[float, float], ...] = ()  # (level, fitted margin): the monotone fit, ascending
    met: float | None = None  # the bracket: the highest level the fit says meets ...
    missed: float | None = None  # ... and the lowest above it that misses
    confidence: str = ""  # high / medium / low ("" before a bracket)
    shape: str = ""  # cliff / slope ("" before a bracket)
    summary: str = ""  # the answer in one line, once done


@dataclass(frozen=True, slots=True)
class Snapshot:
    seq: int
    elapsed_s: float
    state: RunState
    url: str
    model: str
    runtime: str | None
    runtime_version: str | None
    profile: str
    mode: Mode
    level: int  # target concurrency (closed) / concurrency cap (open, 0 = none)
    rate_rps: float | None  # asked arrival rate (open)
    achieved_rps: float | None  # achieved send rate over the rolling window (open)
    arrival: str
    paused: bool
    auto_ramp: bool
    step_index: int  # 0-based index of the current step
    step_count: int | None  # steps in the plan (None = no plan, manual)
    step_elapsed_s: float
    step_remaining_s: float | None
    warming_up: bool
    in_flight: int
    queued: int  # open loop: arrivals waiting for a free slot under the cap
    windows: Mapping[str, WindowStats]  # keyed by Window: "step" | "rolling" | "run"
    rolling_s: float
    series: tuple[SeriesPoint, ...] = ()
    step_starts_s: tuple[float, ...] = ()  # elapsed seconds at which each step began
    steps: tuple[StepSummary, ...] = ()  # finished steps
    best_step: int | None = None  # index into steps of the best step under the SLO
    slo: SLO = field(default_factory=SLO)
    health: ClientHealth = field(default_factory=ClientHealth)
    recent_errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # found before the load started (e.g. the profile overflows the context)
    server: ServerTelemetry | None = None
    record_path: str | None = None
    marks: tuple[tuple[float, str], ...] = ()
    message: str = ""  # e.g. why the run failed
    server_log: tuple[str, ...] = ()  # the last lines a server ramp launched printed
    phase: StepPhase = "measure"
    closing_left: int = 0  # closing: the step's counted requests still in flight
    surplus: int = 0  # settling: requests in flight above the new level
    notices: tuple[tuple[int, str], ...] = ()  # (id, text): what the engine chose for the operator (toasts)
    latest_errors: Mapping[str, str] = EMPTY  # ErrorKind value -> the latest full (scrubbed) message of it
    backing_off: int = 0  # virtual users pausing after a refusal or a refused connection (a gauge)
    # Requests in flight with no token yet, and the longest such wait (s): a server stuck before the first
    # token says so ("2 streams waiting for a first token for 5 s"), where the figures have no data.
    waiting_first: int = 0
    first_wait_s: float = 0.0
    replicas: tuple[ReplicaStats, ...] = ()  # several replicas as one target: each one's last N s (rolling)
    selected: int | None = None  # ramp replay: the step looked at (a position in ``steps``); None live
    # Where ``n`` and the auto-ramp go next (level, or rate in open loop); None: nowhere (the plan's end,
    # the auto-ramp's ceiling), a --find-max search, or a replay
    next_load: float | None = None
    worker_hosts: tuple[
        str, ...
    ] = ()  # each load worker's host, by worker id (the header's fleet); () unknown
    # The measuring step's margins of error so far (``loadgen.metrics.live_margins``, read once a second):
    # out_tok_s and each figure the SLO judges, with its 95 % interval; empty between windows
    live_margins: Mapping[str, Interval] = EMPTY
    precision: Precision | None = None  # --precision: its target and the time left to it; None without
    # The measuring step's diagnosis so far (``loadgen.run.live_diagnosis``, read once a second): the step
    # line's ``diagnosis`` shape with "provisional": true; empty between windows and while too few requests
    live_diagnosis: Mapping[str, object] = EMPTY
    search: SearchView | None = None  # the SLA search under way or last run; None: none was

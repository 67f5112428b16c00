"""One run's settings and how it ended: ``RunConfig`` (flags and profile merged once, in
``loadgen.cli.resolve``; what ``Engine`` is built with) and ``RunOutcome`` (what ``Engine.wait`` returns).

Here, not in the leaf ``loadgen.config``: they name the profile, the target and the step summaries, which
themselves import the closed sets, ``RampPlan`` and ``SLO`` from the leaf; kept there, the leaf named them
back for type checking and tied 18 modules into one import loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from loadgen.config import (
    DEFAULT_WARMUP_S,
    SLO,
    AfterPlan,
    Api,
    Arrival,
    CacheResets,
    Mode,
    RampPlan,
    RunState,
    Transport,
)
from loadgen.profile import Pricing, Profile
from loadgen.snapshot import Snapshot, StepSummary
from loadgen.types import Target


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything a run needs, resolved once: ``target.api`` is the API the workers speak, the sizer is
    fitted to and the record states; ``mode`` is what the plan's levels mean."""

    target: Target
    profile: Profile
    plan: RampPlan | None = None  # None: manual steering (console), one open-ended step at a time
    mode: Mode = "closed"
    level: int = 1  # initial concurrency (closed) / concurrency cap (open, 0 = none)
    rate_rps: float = 1.0  # initial arrival rate (open)
    arrival: Arrival = "poisson"
    burstiness: float = 1.0  # gamma shape k (< 1 burstier, > 1 smoother)
    workers: int = 1
    out: str | None = None  # JSONL record path
    tags: tuple[tuple[str, str], ...] = ()
    cancel_on_lower: bool = False
    rolling_s: float = 10.0
    snapshot_hz: float = 4.0
    seed: int = 0
    transport: Transport = "h1"  # hot streaming path: h1 (httptools protocol) or aiohttp
    # Warm-up of the steps set by hand without a plan (with one, the plan's): the plan's default, so a
    # level set by engine.set_level measures as that level run alone does (the CLI resolves the same).
    warmup_s: float = DEFAULT_WARMUP_S
    auto_step_s: float = 30.0  # auto-ramp without a plan: double the level this often
    telemetry: bool = True  # poll the target's /metrics
    gpu_cmd: str | None = None
    nvml: bool = False
    dcgm_url: str | None = None
    slo: SLO | None = None  # overrides the profile's SLO
    max_connections: int = 0  # 0 = sized to the load
    cold: bool = False  # the server was just started: the first step is a cold step
    record_events: tuple[tuple[str, dict[str, object]], ...] = ()  # events written right after the header
    # A server ramp launched: its last log lines (the console shows them) and, once its process has exited,
    # a description of how (the run then fails at once, its finished steps kept).
    server_log: Callable[[], Sequence[str]] | None = None
    server_exit: Callable[[], str | None] | None = None
    after_plan: AfterPlan = "finish"
    # --find-max: bisect the level between these bounds to the highest one whose held step meets the SLO
    find_max: tuple[float, float] | None = None
    hold_s: float | None = None  # --hold S: the search's answer held for a confirmation step of S seconds
    seed_source: Literal["fresh", "given"] = "given"  # "fresh": drawn for this run (the record says which)
    # Requests that cannot fit the server's max_model_len are clamped (max_tokens first, then the prompt)
    # instead of being sent to be rejected (--fit-context; the record header says so).
    fit_context: bool = False
    # --reset-prefix-cache: reset the server's prefix cache before every step's warm-up, or once at setup
    reset_prefix_cache: CacheResets = "never"
    # What the run costs: the profile's [pricing] with the price flags over it field by field (the record
    # header states it); None: no price known.
    pricing: Pricing | None = None
    baseline: str | None = None  # --baseline RECORD: a record the console holds this run against
    # --save-requests-detail: one row per request of each step's window, in a file beside the record
    # (``loadgen.run.detail``); off, the workers build no row at all.
    save_requests_detail: bool = False
    # --tokenizer PATH: a local tokenizer.json sizes the prompts when the server has no /tokenize
    # (``loadgen.run.sizing``; the record header's ``tokenizer`` says which sized them)
    tokenizer: str | None = None
    # --ray [ADDRESS]: the workers as Ray actors over the cluster's nodes (loadgen.run.ray_fleet); "":
    # RAY_ADDRESS, else a new local Ray on 127.0.0.1 ("auto": one started here); None: local processes
    ray: str | None = None
    # --save-requests FILE: every request as sent, one JSON line each (loadgen.sources.requests), for
    # --requests FILE to replay against another server; None: not saved
    save_requests: str | None = None
    # --metrics-port: the exporter (loadgen.observe.exporter) is handed every snapshot the engine publishes, and
    # its URL goes into the record header; None: no exporter
    snapshot_sink: Callable[[Snapshot], None] | None = None
    metrics_url: str | None = None
    # --otel: every request carries a W3C traceparent and leaves an OpenTelemetry span (loadgen.run.otel)
    otel: bool = False
    # --replay-session RECORD: which session this run replays (the record's path, start and host; the
    # record header's ``replay_of``); None: not a replay
    replay_of: Mapping[str, object] | None = None

    @property
    def api(self) -> Api:
        return self.target.api


@dataclass(frozen=True, slots=True)
class RunOutcome:
    state: RunState
    steps: tuple[StepSummary, ...]
    best_step: int | None
    record_path: str | None
    message: str = ""
    unreachable: bool = False
    signum: int | None = None  # the signal that stopped the run (SIGINT, SIGTERM, SIGHUP), if one did
    usage: bool = False  # failed because what was asked cannot be answered as given (exit 2)

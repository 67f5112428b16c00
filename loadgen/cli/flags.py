"""The run's flags, defined once: ``RunFlags`` (the flags, typed: ``None`` means "not given"), the flag
definitions shared by ``ramp run``, ``ramp demo`` and ``ramp launch`` (``add_run_flags``, in the argument
groups of ``RUN_GROUPS`` that ``--help`` shows apart; their defaults are ``RunFlags``' own) and the small
value parsers. ``loadgen.cli.resolve`` merges these flags with the profile into a ``RunConfig``; the usage
error and the exit codes are ``loadgen.exits``'.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Any, Protocol

from loadgen.config import APIS, ARRIVALS, TRANSPORTS, Api, Arrival, CacheResets, Transport


@dataclass(frozen=True, slots=True)
class RunFlags:
    """The run flags as parsed, before the profile is consulted: ``None`` means "not given"."""

    profile: str = "chat"
    model: str = ""
    api: Api | None = None
    steps: tuple[float, ...] | None = None
    step_seconds: float | None = None
    warmup: float | None = None
    early_stop: bool = False
    repeat: int = 1
    find_max: tuple[float, float] | None = None
    level: int | None = None
    open_loop: bool = False
    rate: float | None = None
    arrival: Arrival = "poisson"
    burstiness: float | None = None  # None: not given (1.0, for gamma arrivals)
    max_concurrency: int = 0
    cancel_on_lower: bool = False
    workers: int = 1
    out: str | None = None
    tag: tuple[tuple[str, str], ...] = ()
    api_key_env: str = "OPENAI_API_KEY"
    ca_cert: str | None = None
    insecure: bool = False
    proxy: str | None = None
    no_proxy: bool = False
    transport: Transport = "h1"
    seed: int | None = None  # None: a fresh seed for this run
    fit_context: bool = False
    reset_prefix_cache: CacheResets = "never"
    revision: str | None = None
    baseline: str | None = None
    usd_per_1m_input: float | None = None
    usd_per_1m_output: float | None = None
    usd_per_1m_cache_read: float | None = None
    gpu_usd_per_hour: float | None = None
    gpus: int | None = None
    ttft_timeout: float = 300.0
    idle_timeout: float = 120.0
    total_timeout: float = 1800.0
    max_event_bytes: int = 1 << 20
    no_metrics: bool = False
    gpu_cmd: str | None = None
    nvml: bool = False
    dcgm_url: str | None = None
    refresh: float | None = None
    rolling: float = 10.0
    headless: bool = False
    urls: tuple[str, ...] = ()  # --url, repeated: several replicas as one target (with the positional URL)
    save_requests_detail: bool = False
    tokenizer: str | None = None  # --tokenizer PATH: a local tokenizer.json for prompt sizing
    ray: str | None = None  # --ray [ADDRESS]: "" without an address; None: local worker processes
    # Replayed request sources (loadgen.sources): a dataset, a timestamped trace, a saved request file
    dataset: str | None = None
    dataset_format: str | None = None
    trace: str | None = None
    trace_time_unit: str | None = None
    trace_window: tuple[float, float | None] | None = None
    time_scale: float | None = None
    requests: str | None = None
    save_requests: str | None = None
    metrics_port: int | None = None  # --metrics-port: ramp's own Prometheus metrics (loadgen.observe.exporter)
    metrics_host: str = "127.0.0.1"
    otel: bool = False  # --otel: a traceparent and an OpenTelemetry span per request (loadgen.run.otel)

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> RunFlags:
        """The run flags out of a parsed command line (other subcommands' flags are left out)."""
        given = vars(args)  # argparse has checked each flag's type and choices
        values = {f.name: given[f.name] for f in fields(cls) if f.name in given}
        if "tag" in values:
            values["tag"] = tuple(values["tag"])  # argparse appends to a list
        if "urls" in values:
            values["urls"] = tuple(values["urls"] or ())
        return cls(**values)


_DEFAULT = RunFlags()


def parse_levels(text: str) -> tuple[float, ...]:
    """``--steps 1,2,4,8``: positive numbers separated by commas."""
    try:
        parts = text.replace(" ", "").split(",")
        values = tuple(float(v) for v in parts if v)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas, like 1,2,4,8 — got {text!r}"
        ) from None
    if values and "" in parts:  # "4,,8" or "4,8,": a level left out is a typo, not a plan of two
        raise argparse.ArgumentTypeError(f"a level is missing between commas, like 1,2,4,8 — got {text!r}")
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"levels must be positive numbers, like 1,2,4,8 — got {text!r}")
    return values


def parse_bounds(text: str) -> tuple[float, float]:
    """``--find-max LO:HI``: two positive numbers, the lower first."""
    lo, colon, hi = text.partition(":")
    try:
        bounds = (float(lo), float(hi)) if colon else (1.0, float(lo))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--find-max wants LO:HI, like 1:256 — got {text!r}") from None
    if bounds[0] <= 0 or bounds[1] <= bounds[0]:
        raise argparse.ArgumentTypeError(f"--find-max wants 0 < LO < HI, like 1:256 — got {text!r}")
    return bounds


def parse_tag(text: str) -> tuple[str, str]:
    """``--tag key=value``."""
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"--tag wants key=value (e.g. gpu=H200), got {text!r}")
    return key.strip(), value.strip()


def parse_window(text: str) -> tuple[float, float | None]:
    """``--trace-window START:END`` (seconds on the trace's clock; END may be left out)."""
    start, colon, end = text.partition(":")
    try:
        window = (float(start or 0), float(end) if end else None)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--trace-window wants START:END seconds, like 0:600 — got {text!r}"
        ) from None
    if not colon or window[0] < 0 or (window[1] is not None and window[1] <= window[0]):
        raise argparse.ArgumentTypeError(f"--trace-window wants 0 <= START < END, like 0:600 — got {text!r}")
    return window


class Flags(Protocol):
    """Where flags are added: a parser or one of its argument groups (``--help`` shows each group apart)."""

    def add_argument(self, *names: str, **options: Any) -> argparse.Action: ...


RUN_GROUPS = ("target", "load shape", "steps", "workload", "SLO", "telemetry", "output", "client", "pricing")


def add_run_flags(p: argparse.ArgumentParser, url: bool = True) -> dict[str, Flags]:
    """The flags of a run (``url``: with the positional URL), in the argument groups of ``RUN_GROUPS`` (returned
    by title, for a command's own flags); their defaults are ``RunFlags``' own."""
    groups: dict[str, Flags] = {title: p.add_argument_group(title) for title in RUN_GROUPS}
    _add_target_flags(groups["target"], url)
    _add_shape_flags(groups["load shape"])
    _add_step_flags(groups["steps"])
    _add_workload_flags(groups["workload"])
    _add_source_flags(groups["workload"])
    _add_slo_flags(groups["SLO"])
    _add_telemetry_flags(groups["telemetry"])
    _add_output_flags(groups["output"])
    _add_client_flags(groups["client"])
    _add_price_flags(groups["pricing"])
    return groups


def _add_target_flags(p: Flags, url: bool) -> None:
    """The server: its URL (several replicas: ``loadgen.run.replicas``), the model and API, how it is reached
    (TLS verification and the proxy: ``loadgen.target.connect``'s rule) and the key."""
    d = _DEFAULT
    if url:
        p.add_argument(
            "url",
            nargs="?",
            default="",
            help="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000 (several replicas: A,B; "
            "default: $OPENAI_BASE_URL)",
        )
        p.add_argument(
            "--url",
            dest="urls",
            action="append",
            default=None,
            metavar="URL",
            help="a replica of the target (repeat for each; streams are spread round robin by session)",
        )
    p.add_argument(
        "--model", default=d.model, help="model name (default: the profile's, else the server's first)"
    )
    p.add_argument("--api", choices=APIS, default=d.api, help="override the profile's API")
    p.add_argument(
        "--revision", default=d.revision, help="the model's revision (commit or tag), recorded for compare"
    )
    p.add_argument("--api-key-env", default=d.api_key_env, help="env var holding the API key")
    p.add_argument("--ca-cert", metavar="FILE", help="CA bundle (PEM) to verify an https server with")
    p.add_argument("--insecure", action="store_true", help="do not verify the server's TLS certificate")
    p.add_argument("--proxy", metavar="URL", help="HTTP proxy for every call (default: the environment's)")
    p.add_argument("--no-proxy", action="store_true", help="no proxy, whatever the environment says")


def _add_shape_flags(p: Flags) -> None:
    """What the load is: closed-loop streams or open-loop arrivals, and how they arrive."""
    d = _DEFAULT
    p.add_argument(
        "--level",
        type=int,
        default=d.level,
        help="concurrency when no plan is given (headless: one step of --step-seconds at it)",
    )
    p.add_argument("--open-loop", action="store_true", help="arrival-rate load instead of fixed concurrency")
    p.add_argument(
        "--rate",
        type=float,
        default=d.rate,
        help="open loop arrival rate, req/s (without --steps, headless: one step of --step-seconds at it)",
    )
    p.add_argument(
        "--arrival",
        choices=ARRIVALS,
        default=d.arrival,
        help="open loop arrival times: constant, poisson (the default) or gamma (--burstiness)",
    )
    p.add_argument(
        "--burstiness", type=float, default=d.burstiness, help="gamma shape k (<1 bursty; --arrival gamma)"
    )
    p.add_argument(
        "--max-concurrency", type=int, default=d.max_concurrency, help="open loop concurrency cap (0 = none)"
    )
    p.add_argument(
        "--cancel-on-lower",
        action="store_true",
        help="closed loop: cancel the surplus streams when the level is lowered (their tokens count nowhere) "
        "instead of settling; refused in open loop, which has none",
    )


def _add_step_flags(p: Flags) -> None:
    """The plan: its levels, how long each step is measured, and what happens between steps."""
    d = _DEFAULT
    p.add_argument(
        "--steps",
        type=parse_levels,
        default=d.steps,
        help="ramp levels, e.g. 1,2,4,8,16 (rates in open loop)",
    )
    p.add_argument(
        "--step-seconds", type=float, default=d.step_seconds, help="seconds per step (default: profile or 30)"
    )
    p.add_argument(
        "--warmup", type=float, default=d.warmup, help="warm-up seconds per step, excluded (default 5)"
    )
    p.add_argument(
        "--repeat", type=int, default=d.repeat, help="run each level N times in a row (median and range)"
    )
    p.add_argument(
        "--reset-prefix-cache",
        nargs="?",
        choices=("step", "run"),
        const="step",
        default=d.reset_prefix_cache,
        help="reset the server's prefix cache before each step (step, the default) or once (run)",
    )


def _add_workload_flags(p: Flags) -> None:
    """What each request is: the profile, its seed, its fit to the server's context, its sizing."""
    d = _DEFAULT
    p.add_argument(
        "--profile", default=d.profile, help="built-in profile name or a .toml file (default: chat)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=d.seed,
        help="replay a run's prompts (default: a fresh seed per run; the record states it)",
    )
    p.add_argument(
        "--fit-context",
        action="store_true",
        help="clamp requests that cannot fit the server's max_model_len (max_tokens first, then the prompt)",
    )
    p.add_argument(
        "--tokenizer",
        metavar="PATH",
        default=None,
        help="a local tokenizer.json that sizes prompts when the server has no /tokenize (extra: tokenizer)",
    )


def _add_source_flags(p: Flags) -> None:
    """Replay real requests instead of synthetic ones (``loadgen.sources``, ``loadgen.workload.replay``)."""
    p.add_argument(
        "--dataset", metavar="FILE", help="replay a dataset: ShareGPT, OpenAI-style JSONL or text lines"
    )
    p.add_argument("--dataset-format", choices=("sharegpt", "openai", "text"), help="default: detected")
    p.add_argument(
        "--trace", metavar="FILE", help="replay a timestamped trace (JSONL or CSV, Mooncake fields)"
    )
    p.add_argument(
        "--trace-time-unit", choices=("s", "ms"), help="the trace's timestamps (default: detected)"
    )
    p.add_argument(
        "--trace-window", type=parse_window, metavar="START:END", help="replay this part of the trace"
    )
    p.add_argument(
        "--time-scale", type=float, help="replay a trace or request file this much faster (2 = twice as fast)"
    )
    p.add_argument("--requests", metavar="FILE", help="replay a --save-requests file: the same requests")


def _add_slo_flags(p: Flags) -> None:
    """What the profile's [slo] is used for: stopping, searching, holding the run against another."""
    d = _DEFAULT
    p.add_argument("--early-stop", action="store_true", help="stop at the first step that breaks the SLO")
    p.add_argument(
        "--find-max",
        type=parse_bounds,
        nargs="?",
        const=(1.0, 512.0),
        default=d.find_max,
        metavar="LO:HI",
        help="bisect to the highest level that meets the SLO (default bounds 1:512)",
    )
    p.add_argument(
        "--baseline", default=d.baseline, metavar="RECORD", help="a record to hold this run against, live"
    )


def _add_telemetry_flags(p: Flags) -> None:
    """The server's side of each step: its /metrics and the GPUs."""
    d = _DEFAULT
    p.add_argument("--no-metrics", action="store_true", help="do not poll the server's /metrics")
    p.add_argument(
        "--gpu-cmd", default=d.gpu_cmd, help='command printing nvidia-smi CSV, e.g. "ssh gpu1 nvidia-smi ..."'
    )
    p.add_argument("--nvml", action="store_true", help="read local GPUs through NVML (extra: gpu)")
    p.add_argument("--dcgm-url", default=d.dcgm_url, help="DCGM exporter metrics URL")
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        default=d.metrics_port,
        help="serve ramp's own live metrics (Prometheus /metrics, /healthz, /readyz) and the console's "
        "snapshots (/snapshot, for ramp attach); 0: a free port",
    )
    p.add_argument("--metrics-host", default=d.metrics_host, help="address --metrics-port listens on")
    p.add_argument(
        "--otel",
        action="store_true",
        help="a W3C traceparent on every request and a span for it, over OTLP/HTTP to "
        "OTEL_EXPORTER_OTLP_ENDPOINT (default localhost:4318; extra: otel)",
    )


def _add_output_flags(p: Flags) -> None:
    """Where the run is shown and kept: the face, the record and what goes beside it."""
    d = _DEFAULT
    p.add_argument(
        "--headless",
        action="store_true",
        help="no console: progress, step table, exit code (the default without a terminal)",
    )
    p.add_argument(
        "--allow-web",
        action="store_true",
        help="start the load under Textual's web driver (textual-serve) anyway: each browser tab starts one",
    )
    p.add_argument(
        "--out",
        default=d.out,
        help="JSONL record path (default <time>-<profile>.jsonl in $RAMP_RUNS_DIR, else runs/ here if writable, "
        "else $XDG_STATE_HOME/llm-ramp/runs)",
    )
    p.add_argument(
        "--tag", type=parse_tag, action="append", default=[], help="condition key=value, repeatable"
    )
    p.add_argument("--save-requests", metavar="FILE", help="write every request as sent, one JSON line each")
    p.add_argument(
        "--save-requests-detail",
        action="store_true",
        help="also write one CSV row per request beside the record (RECORD.requests.csv)",
    )
    p.add_argument(
        "--refresh",
        type=float,
        default=d.refresh,
        help="snapshot/console refresh rate, Hz (console 4, headless 1)",
    )
    p.add_argument("--rolling", type=float, default=d.rolling, help="rolling window, seconds")


def _add_client_flags(p: Flags) -> None:
    """How the load is sent: the workers (local processes or Ray actors), the HTTP client, its timeouts."""
    d = _DEFAULT
    p.add_argument(
        "--workers", type=int, default=d.workers, help="load worker processes (one per core at most)"
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the --workers as Ray actors over a cluster's nodes (ADDRESS, or auto: a cluster started on "
        "this machine; none: RAY_ADDRESS, else a new local Ray on 127.0.0.1 only; extra: ray)",
    )
    p.add_argument("--transport", choices=TRANSPORTS, default=d.transport, help="streaming HTTP client")
    p.add_argument(
        "--ttft-timeout",
        type=float,
        default=d.ttft_timeout,
        help=f"seconds a request may wait for its first token (default {d.ttft_timeout:g})",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=d.idle_timeout,
        help=f"seconds a stream may stay silent between tokens (default {d.idle_timeout:g})",
    )
    p.add_argument(
        "--total-timeout",
        type=float,
        default=d.total_timeout,
        help=f"seconds a request may take in all (default {d.total_timeout:g})",
    )
    p.add_argument(
        "--max-event-bytes",
        type=int,
        default=d.max_event_bytes,
        help=f"a longer SSE event is a malformed error (default {d.max_event_bytes})",
    )


def _add_price_flags(p: Flags) -> None:
    """What the run costs (over the profile's [pricing]): token prices, or GPU hours."""
    for name, what in (("input", "prompt"), ("output", "output"), ("cache-read", "cached prompt")):
        p.add_argument(
            f"--usd-per-1m-{name}", type=float, default=None, help=f"price of 1M {what} tokens, USD"
        )
    p.add_argument("--gpu-usd-per-hour", type=float, default=None, help="price of one GPU hour, USD")
    p.add_argument("--gpus", type=int, default=None, help="GPUs the server uses (with --gpu-usd-per-hour)")

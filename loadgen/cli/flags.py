"""The run's flags, each declared once: a ``RunFlags`` field (``flag(...)``) carries its default, its group in
``--help``, its help and how argparse reads it (type, choices, ...); ``add_run_flags`` builds the flags of
``ramp run``, ``ramp demo`` and ``ramp launch`` from those fields, in the argument groups of ``RUN_GROUPS`` that
``--help`` shows apart. Also the small value parsers. ``loadgen.cli.resolve`` merges these flags with the
profile into a ``RunConfig``; the usage error and the exit codes are ``loadgen.exits``'.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from loadgen.config import APIS, ARRIVALS, TRANSPORTS, Api, Arrival, CacheResets, Transport

RUN_GROUPS = ("target", "load shape", "steps", "workload", "SLO", "telemetry", "output", "client", "pricing")
# The positional URL of ``ramp run`` (not a RunFlags field: ``resolve`` takes it beside the flags).
URL_HELP = (
    "base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000 (several replicas: A,B; "
    "default: $OPENAI_BASE_URL)"
)


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


@dataclass(frozen=True, slots=True)
class Flag:
    """How a ``RunFlags`` field is given on the command line: ``group`` (one of ``RUN_GROUPS``), ``help``
    (argparse's ``%(default)g`` names the field's default), ``name`` when the option is not ``--field-name``,
    ``with_url`` for a flag that only the commands with the positional URL have, and argparse's ``options``
    (type, choices, nargs, const, metavar, action). The default is always the field's: a bool that defaults
    to False is a switch (``store_true``); an ``append`` flag gathers a tuple."""

    group: str
    help: str
    name: str = ""
    with_url: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    def option(self, dest: str) -> str:
        return self.name or "--" + dest.replace("_", "-")


def flag(
    default: Any, group: str, help: str, *, name: str = "", with_url: bool = False, **options: Any
) -> Any:
    """A ``RunFlags`` field and its command-line flag, declared together."""
    assert group in RUN_GROUPS, group
    return field(default=default, metadata={"flag": Flag(group, help, name, with_url, options)})


def flag_of(dest: str) -> Flag:
    """The declaration of the ``RunFlags`` field ``dest``."""
    (found,) = (f.metadata["flag"] for f in fields(RunFlags) if f.name == dest)
    return found


@dataclass(frozen=True, slots=True)
class RunFlags:
    """The run flags as parsed, before the profile is consulted: ``None`` means "not given". In the order
    ``--help`` shows them, group by group."""

    # ---- target: the server, its URL (several replicas: ``loadgen.run.replicas``), the model and API, how it
    # is reached (TLS verification and the proxy: ``loadgen.target.connect``'s rule) and the key
    urls: tuple[str, ...] = flag(
        (),
        "target",
        "a replica of the target (repeat for each; streams are spread round robin by session)",
        name="--url",
        with_url=True,
        action="append",
        metavar="URL",
    )
    model: str = flag("", "target", "model name (default: the profile's, else the server's first)")
    api: Api | None = flag(None, "target", "override the profile's API", choices=APIS)
    revision: str | None = flag(None, "target", "the model's revision (commit or tag), recorded for compare")
    api_key_env: str = flag("OPENAI_API_KEY", "target", "env var holding the API key")
    ca_cert: str | None = flag(
        None, "target", "CA bundle (PEM) to verify an https server with", metavar="FILE"
    )
    insecure: bool = flag(False, "target", "do not verify the server's TLS certificate")
    proxy: str | None = flag(
        None, "target", "HTTP proxy for every call (default: the environment's)", metavar="URL"
    )
    no_proxy: bool = flag(False, "target", "no proxy, whatever the environment says")
    # ---- load shape: closed-loop streams or open-loop arrivals, and how they arrive
    level: int | None = flag(
        None,
        "load shape",
        "concurrency when no plan is given (headless: one step of --step-seconds at it)",
        type=int,
    )
    open_loop: bool = flag(False, "load shape", "arrival-rate load instead of fixed concurrency")
    rate: float | None = flag(
        None,
        "load shape",
        "open loop arrival rate, req/s (without --steps, headless: one step of --step-seconds at it)",
        type=float,
    )
    arrival: Arrival = flag(
        "poisson",
        "load shape",
        "open loop arrival times: constant, poisson (the default) or gamma (--burstiness)",
        choices=ARRIVALS,
    )
    burstiness: float | None = flag(  # None: not given (1.0, for gamma arrivals)
        None, "load shape", "gamma shape k (<1 bursty; --arrival gamma)", type=float
    )
    max_concurrency: int = flag(0, "load shape", "open loop concurrency cap (0 = none)", type=int)
    cancel_on_lower: bool = flag(
        False,
        "load shape",
        "closed loop: cancel the surplus streams when the level is lowered (their tokens count nowhere) "
        "instead of settling; refused in open loop, which has none",
    )
    # ---- steps: the plan's levels, how long each step is measured, and what happens between steps
    steps: tuple[float, ...] | None = flag(
        None, "steps", "ramp levels, e.g. 1,2,4,8,16 (rates in open loop)", type=parse_levels
    )
    step_seconds: float | None = flag(None, "steps", "seconds per step (default: profile or 30)", type=float)
    warmup: float | None = flag(None, "steps", "warm-up seconds per step, excluded (default 5)", type=float)
    repeat: int = flag(1, "steps", "run each level N times in a row (median and range)", type=int)
    precision: float | None = flag(
        None,
        "steps",
        "end a step once out tok/s and every figure the SLO judges are known within PCT %% (95 %% interval), "
        "or at --step-seconds at the latest",
        type=float,
        metavar="PCT",
    )
    replay_session: str | None = flag(
        None,
        "steps",
        "replay a recorded session's steps (levels or rates, warm-ups, lengths, in order) against this URL; "
        "exit 0 when it meets the SLO at every step the original met it at, else 1",
        with_url=True,
        metavar="RECORD",
    )
    reset_prefix_cache: CacheResets = flag(
        "never",
        "steps",
        "reset the server's prefix cache before each step (step, the default) or once (run)",
        nargs="?",
        choices=("step", "run"),
        const="step",
    )
    # ---- workload: what each request is (the profile, its seed, its fit to the server's context, its
    # sizing), or real requests replayed instead (``loadgen.sources``, ``loadgen.workload.replay``)
    profile: str = flag("chat", "workload", "built-in profile name or a .toml file (default: chat)")
    seed: int | None = flag(  # None: a fresh seed for this run
        None,
        "workload",
        "replay a run's prompts (default: a fresh seed per run; the record states it)",
        type=int,
    )
    fit_context: bool = flag(
        False,
        "workload",
        "clamp requests that cannot fit the server's max_model_len (max_tokens first, then the prompt)",
    )
    tokenizer: str | None = flag(
        None,
        "workload",
        "a local tokenizer.json that sizes prompts when the server has no /tokenize (extra: tokenizer)",
        metavar="PATH",
    )
    dataset: str | None = flag(
        None, "workload", "replay a dataset: ShareGPT, OpenAI-style JSONL or text lines", metavar="FILE"
    )
    dataset_format: str | None = flag(
        None, "workload", "default: detected", choices=("sharegpt", "openai", "text")
    )
    trace: str | None = flag(
        None, "workload", "replay a timestamped trace (JSONL or CSV, Mooncake fields)", metavar="FILE"
    )
    trace_time_unit: str | None = flag(
        None, "workload", "the trace's timestamps (default: detected)", choices=("s", "ms")
    )
    trace_window: tuple[float, float | None] | None = flag(
        None, "workload", "replay this part of the trace", type=parse_window, metavar="START:END"
    )
    time_scale: float | None = flag(
        None, "workload", "replay a trace or request file this much faster (2 = twice as fast)", type=float
    )
    requests: str | None = flag(
        None, "workload", "replay a --save-requests file: the same requests", metavar="FILE"
    )
    quality: bool = flag(
        False,
        "workload",
        "mix answer probes into the load (a 5 percent share, [quality]): each step's agreement with level 1's",
    )
    quality_reference: str | None = flag(
        None, "workload", "--quality's reference answers: a record or a reference JSON file", metavar="FILE"
    )
    quality_tasks: bool = flag(
        False,
        "workload",
        "--quality with verifiable tasks too (arithmetic, copy, JSON, a tool call): each step's share passed",
    )
    # ---- SLO: what the profile's [slo] is used for: stopping, searching, holding the run against another
    early_stop: bool = flag(False, "SLO", "stop at the first step that breaks the SLO")
    find_max: tuple[float, float] | None = flag(
        None,
        "SLO",
        "bisect to the highest level that meets the SLO (default bounds 1:512)",
        type=parse_bounds,
        nargs="?",
        const=(1.0, 512.0),
        metavar="LO:HI",
    )
    hold: float | None = flag(
        None,
        "SLO",
        "--find-max: then hold the knee's level for one step of S seconds, confirmed if met on its intervals",
        type=float,
        metavar="S",
    )
    replay_slo: str = flag(
        "record",
        "SLO",
        "--replay-session judges by the record's SLO (record, the default) or the profile's [slo] (profile)",
        with_url=True,
        choices=("record", "profile"),
    )
    baseline: str | None = flag(None, "SLO", "a record to hold this run against, live", metavar="RECORD")
    # ---- telemetry: the server's side of each step (its /metrics, the GPUs), and ramp's own
    no_metrics: bool = flag(False, "telemetry", "do not poll the server's /metrics")
    gpu_cmd: str | None = flag(
        None, "telemetry", 'command printing nvidia-smi CSV, e.g. "ssh gpu1 nvidia-smi ..."'
    )
    nvml: bool = flag(False, "telemetry", "read local GPUs through NVML (extra: gpu)")
    dcgm_url: str | None = flag(None, "telemetry", "DCGM exporter metrics URL")
    metrics_port: int | None = flag(  # ramp's own Prometheus metrics (loadgen.observe.exporter)
        None,
        "telemetry",
        "serve ramp's own live metrics (Prometheus /metrics, /healthz, /readyz) and the console's "
        "snapshots (/snapshot, for ramp attach); 0: a free port",
        type=int,
        metavar="PORT",
    )
    metrics_host: str = flag("127.0.0.1", "telemetry", "address --metrics-port listens on")
    otel: bool = flag(  # a traceparent and an OpenTelemetry span per request (loadgen.run.otel)
        False,
        "telemetry",
        "a W3C traceparent on every request and a span for it, over OTLP/HTTP to "
        "OTEL_EXPORTER_OTLP_ENDPOINT (default localhost:4318; extra: otel)",
    )
    # ---- output: where the run is shown and kept (the face, the record and what goes beside it)
    headless: bool = flag(
        False, "output", "no console: progress, step table, exit code (the default without a terminal)"
    )
    allow_web: bool = flag(
        False,
        "output",
        "start the load under Textual's web driver (textual-serve) anyway: each browser tab starts one",
    )
    out: str | None = flag(
        None,
        "output",
        "JSONL record path (default <time>-<profile>.jsonl in $RAMP_RUNS_DIR, else runs/ here if writable, "
        "else $XDG_STATE_HOME/llm-ramp/runs)",
    )
    tag: tuple[tuple[str, str], ...] = flag(
        (), "output", "condition key=value, repeatable", type=parse_tag, action="append"
    )
    save_requests: str | None = flag(
        None, "output", "write every request as sent, one JSON line each", metavar="FILE"
    )
    save_requests_detail: bool = flag(
        False, "output", "also write one CSV row per request beside the record (RECORD.requests.csv)"
    )
    refresh: float | None = flag(
        None, "output", "snapshot/console refresh rate, Hz (console 4, headless 1)", type=float
    )
    rolling: float = flag(10.0, "output", "rolling window, seconds", type=float)
    # ---- client: how the load is sent (the workers, local processes or Ray actors; the HTTP client and its
    # timeouts)
    workers: int = flag(1, "client", "load worker processes (one per core at most)", type=int)
    ray: str | None = flag(  # "" without an address; None: local worker processes
        None,
        "client",
        "run the --workers as Ray actors over a cluster's nodes (ADDRESS, or auto: a cluster started on "
        "this machine; none: RAY_ADDRESS, else a new local Ray on 127.0.0.1 only; extra: ray)",
        nargs="?",
        const="",
        metavar="ADDRESS",
    )
    transport: Transport = flag("h1", "client", "streaming HTTP client", choices=TRANSPORTS)
    ttft_timeout: float = flag(
        300.0, "client", "seconds a request may wait for its first token (default %(default)g)", type=float
    )
    idle_timeout: float = flag(
        120.0, "client", "seconds a stream may stay silent between tokens (default %(default)g)", type=float
    )
    total_timeout: float = flag(
        1800.0, "client", "seconds a request may take in all (default %(default)g)", type=float
    )
    max_event_bytes: int = flag(
        1 << 20, "client", "a longer SSE event is a malformed error (default %(default)d)", type=int
    )
    # ---- pricing: what the run costs (over the profile's [pricing]): token prices, or GPU hours
    usd_per_1m_input: float | None = flag(None, "pricing", "price of 1M prompt tokens, USD", type=float)
    usd_per_1m_output: float | None = flag(None, "pricing", "price of 1M output tokens, USD", type=float)
    usd_per_1m_cache_read: float | None = flag(
        None, "pricing", "price of 1M cached prompt tokens, USD", type=float
    )
    gpu_usd_per_hour: float | None = flag(None, "pricing", "price of one GPU hour, USD", type=float)
    gpus: int | None = flag(None, "pricing", "GPUs the server uses (with --gpu-usd-per-hour)", type=int)

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> RunFlags:
        """The run flags out of a parsed command line (other subcommands' flags are left out)."""
        given = vars(args)  # argparse has checked each flag's type and choices
        values = {f.name: given[f.name] for f in fields(cls) if f.name in given}
        for name, value in values.items():
            if flag_of(name).options.get("action") == "append":  # argparse appends to a list
                values[name] = tuple(value or ())
        return cls(**values)


class Flags(Protocol):
    """Where flags are added: a parser or one of its argument groups (``--help`` shows each group apart)."""

    def add_argument(self, *names: str, **options: Any) -> argparse.Action: ...


def add_run_flags(p: argparse.ArgumentParser, url: bool = True) -> dict[str, Flags]:
    """The flags of a run (``url``: with the positional URL and ``--url``), built from ``RunFlags``' fields in
    the argument groups of ``RUN_GROUPS`` (returned by title, for a command's own flags)."""
    groups: dict[str, Flags] = {title: p.add_argument_group(title) for title in RUN_GROUPS}
    if url:
        groups["target"].add_argument("url", nargs="?", default="", help=URL_HELP)
    for f in fields(RunFlags):
        spec: Flag = f.metadata["flag"]
        if spec.with_url and not url:
            continue
        options = dict(spec.options)
        if options.get("action") == "append":
            options["default"] = (
                None  # argparse appends to a list of its own; ``from_namespace`` makes a tuple
            )
        elif f.default is False and "action" not in options:
            options["action"] = "store_true"
        else:
            options["default"] = f.default
        groups[spec.group].add_argument(spec.option(f.name), dest=f.name, help=spec.help, **options)
    return groups

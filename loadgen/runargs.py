"""The run's command line, owned once: the run flags (one definition shared by ``ramp run``, ``ramp demo``
and ``ramp launch``), ``RunFlags`` (those flags, typed), and ``resolve``, the only place where flags and the
profile merge into a ``RunConfig``. Also the usage error and the exit codes every face returns.

Precedence, resolved here and nowhere else: a flag beats the profile, the profile beats the default.
The API (``--api``) becomes ``Target.api``: what the workers send, the sizer is fitted to and the record
states. The mode travels with the levels: the profile's ``[ramp]`` levels run in the profile's mode,
levels given with ``--steps`` in the flags' mode (closed loop unless ``--open-loop``). An explicit
``--level`` or ``--rate`` without ``--steps`` is manual steering: the profile's plan is not used.
Without ``--seed`` every run draws a fresh seed (so run after run sends new prompts and a server's prefix
cache cannot warm across runs); ``--seed N`` replays run N's prompts. The record states which.
The price flags override the profile's ``[pricing]`` one field at a time (``RunConfig.pricing``, stated in
the record header). ``--revision R`` is the model revision, recorded as the tag ``revision`` (the two must
agree when both are given); ``ramp launch`` takes it from the server's own ``--revision`` too.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

from loadgen.analysis.baseline import baseline_problem
from loadgen.config import (
    APIS,
    ARRIVALS,
    TRANSPORTS,
    Api,
    Arrival,
    CacheResets,
    Mode,
    RampPlan,
    RunConfig,
    Transport,
)
from loadgen.profile import Pricing, Profile, ProfileError, load_profile
from loadgen.runchecks import check_url, flag_problem, out_problem, plan_problem
from loadgen.types import Target

EXIT_OK, EXIT_SLO, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SLO",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "LoadShape",
    "RunFlags",
    "UsageError",
    "add_run_flags",
    "build_config",
    "fresh_seed",
    "load_shape",
    "parse_levels",
    "parse_tag",
    "resolve",
    "resolve_pricing",
    "revision_from_server_args",
    "with_server_revision",
]


class UsageError(Exception):
    """The command line cannot be run as given. The message says what to write instead."""


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
    no_metrics: bool = False
    gpu_cmd: str | None = None
    nvml: bool = False
    dcgm_url: str | None = None
    refresh: float | None = None
    rolling: float = 10.0
    headless: bool = False

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> RunFlags:
        """The run flags out of a parsed command line (other subcommands' flags are left out)."""
        given = vars(args)  # argparse has checked each flag's type and choices
        values = {f.name: given[f.name] for f in fields(cls) if f.name in given}
        if "tag" in values:
            values["tag"] = tuple(values["tag"])  # argparse appends to a list
        return cls(**values)


_DEFAULT = RunFlags()


def parse_levels(text: str) -> tuple[float, ...]:
    """``--steps 1,2,4,8``: positive numbers separated by commas."""
    try:
        values = tuple(float(v) for v in text.replace(" ", "").split(",") if v)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas, like 1,2,4,8 — got {text!r}"
        ) from None
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


def add_run_flags(p: argparse.ArgumentParser, url: bool = True) -> None:
    """The flags of a run (``url``: with the positional URL); their defaults are ``RunFlags``' own."""
    d = _DEFAULT
    if url:
        p.add_argument("url", help="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    p.add_argument(
        "--profile", default=d.profile, help="built-in profile name or a .toml file (default: chat)"
    )
    p.add_argument(
        "--model", default=d.model, help="model name (default: the profile's, else the server's first)"
    )
    p.add_argument("--api", choices=APIS, default=d.api, help="override the profile's API")
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
    p.add_argument("--early-stop", action="store_true", help="stop at the first step that breaks the SLO")
    p.add_argument(
        "--repeat", type=int, default=d.repeat, help="run each level N times in a row (median and range)"
    )
    p.add_argument(
        "--find-max",
        type=parse_bounds,
        nargs="?",
        const=(1.0, 512.0),
        default=d.find_max,
        metavar="LO:HI",
        help="bisect to the highest level that meets the SLO (default bounds 1:512)",
    )
    p.add_argument("--level", type=int, default=d.level, help="starting concurrency when no plan is given")
    p.add_argument("--open-loop", action="store_true", help="arrival-rate load instead of fixed concurrency")
    p.add_argument("--rate", type=float, default=d.rate, help="open loop arrival rate, req/s")
    p.add_argument("--arrival", choices=ARRIVALS, default=d.arrival)
    p.add_argument(
        "--burstiness", type=float, default=d.burstiness, help="gamma shape k (<1 bursty; --arrival gamma)"
    )
    p.add_argument(
        "--max-concurrency", type=int, default=d.max_concurrency, help="open loop concurrency cap (0 = none)"
    )
    p.add_argument("--cancel-on-lower", action="store_true", help="cancel surplus streams when lowering")
    p.add_argument(
        "--workers", type=int, default=d.workers, help="load worker processes (one per core at most)"
    )
    _add_client_flags(p)


def _add_client_flags(p: argparse.ArgumentParser) -> None:
    """How the load is sent, recorded and watched."""
    d = _DEFAULT
    p.add_argument("--out", default=d.out, help="JSONL record path (default runs/<time>-<profile>.jsonl)")
    p.add_argument(
        "--tag", type=parse_tag, action="append", default=[], help="condition key=value, repeatable"
    )
    p.add_argument("--api-key-env", default=d.api_key_env, help="env var holding the API key")
    _add_connection_flags(p)
    p.add_argument("--transport", choices=TRANSPORTS, default=d.transport, help="streaming HTTP client")
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
        "--reset-prefix-cache",
        nargs="?",
        choices=("step", "run"),
        const="step",
        default=d.reset_prefix_cache,
        help="reset the server's prefix cache before each step (step, the default) or once (run)",
    )
    p.add_argument(
        "--revision", default=d.revision, help="the model's revision (commit or tag), recorded for compare"
    )
    p.add_argument(
        "--baseline", default=d.baseline, metavar="RECORD", help="a record to hold this run against, live"
    )
    _add_price_flags(p)
    p.add_argument("--ttft-timeout", type=float, default=d.ttft_timeout)
    p.add_argument("--idle-timeout", type=float, default=d.idle_timeout)
    p.add_argument("--total-timeout", type=float, default=d.total_timeout)
    p.add_argument("--no-metrics", action="store_true", help="do not poll the server's /metrics")
    p.add_argument(
        "--gpu-cmd", default=d.gpu_cmd, help='command printing nvidia-smi CSV, e.g. "ssh gpu1 nvidia-smi ..."'
    )
    p.add_argument("--nvml", action="store_true", help="read local GPUs through NVML (extra: gpu)")
    p.add_argument("--dcgm-url", default=d.dcgm_url, help="DCGM exporter metrics URL")
    p.add_argument(
        "--refresh",
        type=float,
        default=d.refresh,
        help="snapshot/console refresh rate, Hz (console 4, headless 1)",
    )
    p.add_argument("--rolling", type=float, default=d.rolling, help="rolling window, seconds")


def _add_price_flags(p: argparse.ArgumentParser) -> None:
    """What the run costs (over the profile's [pricing]): token prices, or GPU hours."""
    for name, what in (("input", "prompt"), ("output", "output"), ("cache-read", "cached prompt")):
        p.add_argument(
            f"--usd-per-1m-{name}", type=float, default=None, help=f"price of 1M {what} tokens, USD"
        )
    p.add_argument("--gpu-usd-per-hour", type=float, default=None, help="price of one GPU hour, USD")
    p.add_argument("--gpus", type=int, default=None, help="GPUs the server uses (with --gpu-usd-per-hour)")


def _add_connection_flags(p: argparse.ArgumentParser) -> None:
    """How the target is reached: TLS verification and the proxy (``loadgen.target.connect``'s rule)."""
    p.add_argument("--ca-cert", metavar="FILE", help="CA bundle (PEM) to verify an https server with")
    p.add_argument("--insecure", action="store_true", help="do not verify the server's TLS certificate")
    p.add_argument("--proxy", metavar="URL", help="HTTP proxy for every call (default: the environment's)")
    p.add_argument("--no-proxy", action="store_true", help="no proxy, whatever the environment says")


@dataclass(frozen=True, slots=True)
class LoadShape:
    """What the load looks like: the plan (None = manual steering), what its levels mean, where it starts."""

    plan: RampPlan | None
    mode: Mode
    level: int  # initial concurrency (closed) / concurrency cap (open, 0 = none)
    rate_rps: float  # initial arrival rate (open)


def load_shape(flags: RunFlags, base: RampPlan | None) -> LoadShape:
    """The plan and mode from the flags and the profile's plan ``base`` (precedence: module docstring)."""
    manual = flags.steps is None and (flags.level is not None or flags.rate is not None)
    profile_levels = base if base is not None and not manual and flags.steps is None else None
    flag_open = flags.open_loop or flags.rate is not None
    mode: Mode = "open" if flag_open else (profile_levels.mode if profile_levels is not None else "closed")
    if mode == "open" and flags.steps is None and flags.rate is None:
        if profile_levels is None or profile_levels.mode != "open":
            raise UsageError("open loop needs --rate R or --steps R1,R2,... (req/s)")
    levels = flags.steps or (profile_levels.levels if profile_levels is not None else None)
    if flags.find_max is not None:
        if flags.steps is not None:
            raise UsageError("--find-max searches the levels itself: drop --steps (bounds: --find-max LO:HI)")
        levels = (flags.find_max[0],)
    if flags.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {flags.repeat}")
    fractional = [v for v in levels or () if mode == "closed" and v != int(v)]
    if fractional:
        raise UsageError(
            f"closed-loop levels are concurrencies (whole numbers), got {fractional[0]:g}; "
            "add --open-loop to ramp arrival rates (req/s)"
        )
    plan = None
    if levels:
        plan = RampPlan(
            levels=tuple(levels),
            step_s=flags.step_seconds if flags.step_seconds is not None else (base.step_s if base else 30.0),
            warmup_s=flags.warmup if flags.warmup is not None else (base.warmup_s if base else 5.0),
            early_stop=flags.find_max is None and (flags.early_stop or (base.early_stop if base else False)),
            mode=mode,
            repeat=flags.repeat,
        )
    return LoadShape(
        plan=plan,
        mode=mode,
        level=flags.level if flags.level is not None else (flags.max_concurrency if mode == "open" else 1),
        rate_rps=flags.rate if flags.rate is not None else (levels[0] if levels else 1.0),
    )


def _profile(name: str) -> Profile:
    try:
        return load_profile(name)
    except ProfileError as exc:
        raise UsageError(str(exc)) from None


def _target(flags: RunFlags, url: str, profile: Profile) -> Target:
    return Target(
        url=url,
        api=flags.api or profile.api,
        model=flags.model or ("" if profile.model in ("", "auto") else profile.model),
        api_key_env=flags.api_key_env,
        ca_cert=flags.ca_cert,
        insecure=flags.insecure,
        proxy="" if flags.no_proxy else flags.proxy,  # None: the environment's rule (loadgen.target.connect)
        ttft_timeout_s=flags.ttft_timeout,
        idle_timeout_s=flags.idle_timeout,
        total_timeout_s=flags.total_timeout,
    )


def _record_path(flags: RunFlags, profile: Profile) -> str:
    if flags.out:
        return flags.out
    return os.path.join("runs", f"{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{profile.name}.jsonl")


def _given(flag: float | None, profile: float | None) -> float | None:
    return profile if flag is None else flag


def resolve_pricing(flags: RunFlags, profile: Pricing | None) -> Pricing | None:
    """The profile's pricing with each price flag given over it; None when no price is known."""
    base = profile or Pricing()
    given = {
        "usd_per_1m_input": flags.usd_per_1m_input,
        "usd_per_1m_output": flags.usd_per_1m_output,
        "usd_per_1m_cache_read": flags.usd_per_1m_cache_read,
        "gpu_usd_per_hour": flags.gpu_usd_per_hour,
    }
    for name, value in given.items():
        if value is not None and value < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {value:g}")
    merged = Pricing(
        usd_per_1m_input=_given(flags.usd_per_1m_input, base.usd_per_1m_input),
        usd_per_1m_output=_given(flags.usd_per_1m_output, base.usd_per_1m_output),
        usd_per_1m_cache_read=_given(flags.usd_per_1m_cache_read, base.usd_per_1m_cache_read),
        gpu_usd_per_hour=_given(flags.gpu_usd_per_hour, base.gpu_usd_per_hour),
        gpus=base.gpus,
    )
    if flags.gpus is not None:
        if flags.gpus < 1:
            raise UsageError(f"--gpus must be at least 1, got {flags.gpus}")
        if merged.gpu_usd_per_hour is None:
            raise UsageError(
                "--gpus needs a GPU price: add --gpu-usd-per-hour X (or gpu_usd_per_hour in [pricing])"
            )
        merged = replace(merged, gpus=flags.gpus)
    return None if merged == Pricing() else merged


def revision_from_server_args(server_args: Sequence[str]) -> str | None:
    """The model revision a launched server was given (``--revision R`` or ``--revision=R``), if any."""
    for at, arg in enumerate(server_args):
        if arg == "--revision" and at + 1 < len(server_args):
            return server_args[at + 1]
        if arg.startswith("--revision="):
            return arg.partition("=")[2]
    return None


def with_server_revision(flags: RunFlags, server_args: Sequence[str]) -> RunFlags:
    """``flags`` with the launched server's ``--revision`` as the run's (refused when ``--revision`` differs)."""
    revision = revision_from_server_args(server_args)
    if revision is None or flags.revision == revision:
        return flags
    if flags.revision:
        raise UsageError(
            f"--revision {flags.revision} but the server is given --revision {revision}: give it once"
        )
    return replace(flags, revision=revision)


def _tags(flags: RunFlags) -> tuple[tuple[str, str], ...]:
    """The tags, with ``--revision`` as the tag ``revision`` (refused when a tag says otherwise)."""
    if not flags.revision:
        return flags.tag
    tagged = [v for k, v in flags.tag if k in ("revision", "model_revision")]
    other = next((v for v in tagged if v != flags.revision), None)
    if other is not None:
        raise UsageError(
            f"--revision {flags.revision} and --tag revision={other} disagree: give the revision once"
        )
    return flags.tag if tagged else (*flags.tag, ("revision", flags.revision))


def fresh_seed() -> int:
    """A seed no earlier run used (with overwhelming odds): 32 random bits, short enough to retype."""
    return secrets.randbits(32)


def resolve(flags: RunFlags, url: str) -> RunConfig:
    """Flags + profile → ``RunConfig``, validated at the edge with messages that say what to do."""
    url, problem = check_url(url)
    if problem is not None:
        raise UsageError(problem)
    profile = _profile(flags.profile)
    problem = flag_problem(flags, profile.ramp.mode if profile.ramp is not None else None)
    if problem is not None:
        raise UsageError(problem)
    shape = load_shape(flags, profile.ramp)
    out = _record_path(flags, profile)
    problem = plan_problem(shape.plan, flags) or out_problem(out)
    problem = problem or (baseline_problem(flags.baseline) if flags.baseline is not None else None)
    if problem is not None:
        raise UsageError(problem)
    if flags.find_max is not None and profile.slo.is_empty():
        raise UsageError(f"--find-max needs an SLO to meet: profile '{profile.name}' has no [slo] table")
    return RunConfig(
        target=_target(flags, url, profile),
        profile=profile,
        plan=shape.plan,
        mode=shape.mode,
        level=shape.level,
        rate_rps=shape.rate_rps,
        arrival=flags.arrival,
        burstiness=flags.burstiness if flags.burstiness is not None else 1.0,
        workers=flags.workers,
        out=out,
        tags=_tags(flags),
        cancel_on_lower=flags.cancel_on_lower,
        rolling_s=flags.rolling,
        # Headless needs no 4 Hz picture: fewer snapshots leave more CPU to the streams (and, on a small
        # box, to the server under test).
        snapshot_hz=flags.refresh or (1.0 if flags.headless else 4.0),
        seed=flags.seed if flags.seed is not None else fresh_seed(),
        seed_source="given" if flags.seed is not None else "fresh",
        # The console keeps a finished plan's run open: a key starts another step; headless ends with it.
        after_plan="finish" if flags.headless else "idle",
        find_max=flags.find_max,
        fit_context=flags.fit_context,
        reset_prefix_cache=flags.reset_prefix_cache,
        pricing=resolve_pricing(flags, profile.pricing),
        baseline=flags.baseline,
        transport=flags.transport,
        warmup_s=flags.warmup if flags.warmup is not None else 0.0,
        telemetry=not flags.no_metrics,
        gpu_cmd=flags.gpu_cmd,
        nvml=flags.nvml,
        dcgm_url=flags.dcgm_url,
    )


def build_config(args: argparse.Namespace, url: str) -> RunConfig:
    """``resolve`` for a parsed command line (``build_parser().parse_args([...])``)."""
    return resolve(RunFlags.from_namespace(args), url)

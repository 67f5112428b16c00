"""``resolve``, the only place where the run flags (``loadgen.cli.flags``) and the profile merge into a
``RunConfig``, with the load's shape, the pricing and the model revision it decides on the way.

Precedence, resolved here and nowhere else: a flag beats the profile, the profile beats the default.
The API (``--api``) becomes ``Target.api``: what the workers send, the sizer is fitted to and the record
states. The mode travels with the levels: the profile's ``[ramp]`` levels run in the profile's mode,
levels given with ``--steps`` in the flags' mode (closed loop unless ``--open-loop``). An explicit
``--level`` or ``--rate`` without ``--steps`` is manual steering: the profile's plan is not used; headless,
where no one steers, it is one step of ``--step-seconds`` at that level or rate, then the usual end.
Without ``--seed`` every run draws a fresh seed (so run after run sends new prompts and a server's prefix
cache cannot warm across runs); ``--seed N`` replays run N's prompts. The record states which.
The price flags override the profile's ``[pricing]`` one field at a time (``RunConfig.pricing``, stated in
the record header). ``--revision R`` is the model revision, recorded as the tag ``revision`` (the two must
agree when both are given); ``ramp launch`` takes it from the server's own ``--revision`` too.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from loadgen.analysis.baseline import baseline_problem
from loadgen.cli.checks import flag_problem, folder_writable, out_problem, plan_problem, quality_slo_problem
from loadgen.cli.flags import RunFlags
from loadgen.cli.sources import replay_plan, replay_profile, save_requests_problem
from loadgen.config import DEFAULT_WARMUP_S, Mode, RampPlan, fresh_seed
from loadgen.exits import UsageError
from loadgen.profile import Pricing, Profile, ProfileError, Quality, load_profile
from loadgen.profile.quality import load_reference
from loadgen.run.config import RunConfig
from loadgen.run.detail import detail_path
from loadgen.target.tokenizer_file import tokenizer_problem
from loadgen.target.urls import check_urls
from loadgen.types import Target

# What --otel imports (loadgen.run.otel): the otel extra's packages
OTEL_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")

__all__ = [
    "DEFAULT_WARMUP_S",
    "LoadShape",
    "build_config",
    "load_shape",
    "resolve",
    "resolve_pricing",
    "run_warmup_s",
    "revision_from_server_args",
    "runs_folder",
    "with_server_revision",
]


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
    if mode == "open" and flags.steps is None and flags.rate is None and flags.find_max is None:
        if profile_levels is None or profile_levels.mode != "open":
            raise UsageError("open loop needs --rate R or --steps R1,R2,... (req/s)")
    levels = flags.steps or (profile_levels.levels if profile_levels is not None else None)
    if manual and flags.headless:  # no one steers a headless run: the level given, held for one step
        levels = (_held_level(flags, mode),)
    if flags.find_max is not None:
        if flags.steps is not None:
            raise UsageError("--find-max searches the levels itself: drop --steps (bounds: --find-max LO:HI)")
        levels = (flags.find_max[0],)
    if flags.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {flags.repeat}")
    if flags.precision is not None and not 0 < flags.precision < 100:
        raise UsageError(f"--precision is a percentage between 0 and 100, got {flags.precision:g}")
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
            warmup_s=flags.warmup
            if flags.warmup is not None
            else (base.warmup_s if base else DEFAULT_WARMUP_S),
            early_stop=flags.find_max is None and (flags.early_stop or (base.early_stop if base else False)),
            mode=mode,
            repeat=flags.repeat,
            precision_pct=flags.precision
            if flags.precision is not None
            else (base.precision_pct if base else None),
        )
    return LoadShape(
        plan=plan,
        mode=mode,
        level=flags.level if flags.level is not None else (flags.max_concurrency if mode == "open" else 1),
        rate_rps=flags.rate if flags.rate is not None else (levels[0] if levels else 1.0),
    )


def _held_level(flags: RunFlags, mode: Mode) -> float:
    """The one level of a headless ``--rate R`` (open loop) or ``--level N`` (closed loop)."""
    if mode == "open":
        assert flags.rate is not None  # open loop without --rate or --steps was refused above
        return flags.rate
    if flags.level is None or flags.level < 1:
        raise UsageError(f"--level {flags.level} runs no stream: give --level 1 or more with --headless")
    return float(flags.level)


def _profile(name: str) -> Profile:
    try:
        return load_profile(name)
    except ProfileError as exc:
        raise UsageError(str(exc)) from None


def _quality(flags: RunFlags, profile: Profile) -> Profile:
    """``--quality`` turns the answer probes on ([quality]'s settings, else the defaults);
    ``--quality-reference`` (which implies it) loads their reference answers, refused with one line when
    they were asked differently (another probe set, API or tasks) or of another model (a model discovered
    from the server is checked once known, ``loadgen.run.setup``); ``--quality-tasks`` (which implies it too)
    adds the verifiable tasks, as ``[quality] tasks = true`` does."""
    q = profile.quality
    if q is None and not (flags.quality or flags.quality_reference or flags.quality_tasks):
        return profile
    q = q or Quality()
    if flags.quality_tasks:
        q = replace(q, tasks=True)
    if flags.quality_reference:
        model = flags.model or ("" if profile.model in ("", "auto") else profile.model)
        try:
            q = load_reference(flags.quality_reference, q, model, flags.api or profile.api)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return replace(profile, quality=q)


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
        max_event_bytes=flags.max_event_bytes,
    )


def runs_folder() -> str:
    """Where records go without ``--out``: ``$RAMP_RUNS_DIR``; else ``runs/`` here when it can be written
    (a container's read-only root cannot); else ``$XDG_STATE_HOME/llm-ramp/runs`` (~/.local/state/...).
    A folder that cannot be written is a usage error naming both ways out."""
    given = os.environ.get("RAMP_RUNS_DIR", "").strip()
    if given:
        folder, why = os.path.expanduser(given), "RAMP_RUNS_DIR"
    elif folder_writable("runs"):
        return "runs"
    else:
        state = os.environ.get("XDG_STATE_HOME", "").strip() or os.path.expanduser("~/.local/state")
        folder, why = os.path.join(state, "llm-ramp", "runs"), "XDG_STATE_HOME, as runs/ here is not writable"
    if not folder_writable(folder):
        raise UsageError(
            f"records cannot be written to {folder!r} ({why}): give --out FILE, "
            "or set RAMP_RUNS_DIR to a writable folder"
        )
    return folder


def _record_path(flags: RunFlags, profile: Profile) -> str:
    if flags.out:
        return flags.out
    name = f"{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{profile.name}.jsonl"
    return os.path.join(runs_folder(), name)


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


def _ray(address: str | None) -> str | None:
    """``--ray [ADDRESS]``, refused at once (exit 2) when Ray is not installed."""
    if address is not None and importlib.util.find_spec("ray") is None:
        raise UsageError("--ray needs Ray: pip install 'llm-ramp[ray]'")
    return address


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported (its parent packages are, to find it; none is run)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


def _otel(wanted: bool) -> bool:
    """``--otel``, refused at once (exit 2) without the otel extra, or with an OTLP protocol it does not
    speak (the exporter is OTLP over HTTP, protobuf)."""
    if not wanted:
        return False
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = os.environ.get(name, "").strip()
        if protocol and protocol != "http/protobuf":
            raise UsageError(f"--otel exports OTLP over HTTP: {name}={protocol!r} is not http/protobuf")
    if not all(_installed(m) for m in OTEL_MODULES):
        raise UsageError("--otel needs OpenTelemetry: pip install 'llm-ramp[otel]'")
    return True


def _tokenizer(path: str | None) -> str | None:
    """``--tokenizer PATH``, checked here: a file that cannot be loaded is a usage error, not a run failure."""
    if path is None:
        return None
    problem = tokenizer_problem(path)
    if problem is not None:
        raise UsageError(problem)
    return os.path.abspath(os.path.expanduser(path))


def _urls(url: str, flags: RunFlags) -> tuple[str, ...]:
    """The target's URLs: ``url`` (``A,B`` for several replicas) and each ``--url``, checked."""
    urls, problem = check_urls(url, flags.urls)
    if problem is not None:
        raise UsageError(problem)
    return urls


def _shape(flags: RunFlags, profile: Profile) -> LoadShape:
    """The load's shape: a replayed trace's or request file's own times (open loop), else the plan."""
    replayed = replay_plan(flags, profile.replay)
    shape = (
        load_shape(flags, profile.ramp)
        if replayed is None
        else LoadShape(replayed, "open", flags.max_concurrency, replayed.levels[0])
    )
    if flags.cancel_on_lower and shape.mode == "open":
        raise UsageError(
            "--cancel-on-lower cancels a closed loop's surplus streams when its level is lowered; an open "
            "loop has none (a lower rate sends fewer arrivals, each request runs to its end): drop the flag"
        )
    return shape


def resolve(flags: RunFlags, url: str, server_args: Sequence[str] = ()) -> RunConfig:
    """Flags + profile → ``RunConfig``, validated at the edge with messages that say what to do.
    ``server_args``: what ``ramp launch`` passes to the server it starts (its ``--revision`` is the run's)."""
    flags = with_server_revision(flags, server_args)
    urls = _urls(url, flags)
    profile = replay_profile(flags, _profile(flags.profile))  # --dataset, --trace, --requests (sourceargs)
    profile = _quality(flags, profile)  # --quality, --quality-reference
    problem = flag_problem(flags, profile.ramp.mode if profile.ramp is not None else None)
    if problem is not None:
        raise UsageError(problem)
    shape = _shape(flags, profile)
    out = _record_path(flags, profile)
    _refuse_what_cannot_run(flags, profile, shape, out)
    return RunConfig(
        target=replace(_target(flags, urls[0], profile), replicas=urls if len(urls) > 1 else ()),
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
        hold_s=flags.hold,
        fit_context=flags.fit_context,
        reset_prefix_cache=flags.reset_prefix_cache,
        pricing=resolve_pricing(flags, profile.pricing),
        baseline=flags.baseline,
        save_requests_detail=flags.save_requests_detail,
        tokenizer=_tokenizer(flags.tokenizer),
        ray=_ray(flags.ray),
        otel=_otel(flags.otel),
        save_requests=flags.save_requests,
        transport=flags.transport,
        warmup_s=run_warmup_s(flags, profile, shape.plan),
        telemetry=not flags.no_metrics,
        gpu_cmd=flags.gpu_cmd,
        nvml=flags.nvml,
        dcgm_url=flags.dcgm_url,
    )


def _refuse_what_cannot_run(flags: RunFlags, profile: Profile, shape: LoadShape, out: str) -> None:
    """The combinations of flags, plan, record path and profile that cannot run: a UsageError naming each."""
    problem = plan_problem(shape.plan, flags) or out_problem(out) or save_requests_problem(flags)
    if problem is None and flags.save_requests_detail and os.path.exists(detail_path(out)):
        problem = f"--save-requests-detail: {detail_path(out)} already exists; choose another --out"
    problem = problem or (baseline_problem(flags.baseline) if flags.baseline is not None else None)
    problem = problem or quality_slo_problem(profile.slo, profile.quality, profile.name)
    if problem is not None:
        raise UsageError(problem)
    if flags.find_max is not None and profile.slo.is_empty():
        raise UsageError(f"--find-max needs an SLO to meet: profile '{profile.name}' has no [slo] table")
    if flags.hold is not None and (flags.find_max is None or not flags.hold > 0):
        raise UsageError(
            f"--hold S holds the answer of --find-max for S seconds (more than 0), got --hold {flags.hold:g}"
            + ("" if flags.find_max is not None else " without --find-max")
        )


def run_warmup_s(flags: RunFlags, profile: Profile, plan: RampPlan | None) -> float:
    """The run's one warm-up, for planned and key-driven steps alike: ``--warmup``, else the plan's (a
    replayed trace's own), else the profile's ``[ramp] warmup_seconds``, else 5 s (what ``--help`` says)."""
    if flags.warmup is not None:
        return flags.warmup
    if plan is not None:
        return plan.warmup_s
    return profile.ramp.warmup_s if profile.ramp is not None else DEFAULT_WARMUP_S


def build_config(args: argparse.Namespace, url: str) -> RunConfig:
    """``resolve`` for a parsed command line (``build_parser().parse_args([...])``)."""
    return resolve(RunFlags.from_namespace(args), url)

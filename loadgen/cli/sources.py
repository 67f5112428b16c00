"""The replay flags (``--dataset``, ``--trace``, ``--requests``, ``--time-scale``, ``--trace-window``,
``--trace-time-unit``, ``--save-requests``) merged with the profile's ``[dataset]`` / ``[trace]`` table into
the profile's ``replay`` source, and the plan a scheduled source runs (``loadgen.cli.resolve.resolve`` calls
both). A flag beats the table; a bad file is a ``UsageError`` naming its file, line and field.

A trace or a request file runs in open loop at its own times: one step, one pass of the schedule (a
``--trace-window`` of it) at ``--time-scale``, or, with ``--steps X1,X2,...``, one pass per time scale. Each
step's level is the arrival rate that pass offers (the schedule's mean rate times the scale), so the console
and the record show req/s; the record's ``profile_content.replay`` names the file, its content hash and its
rate at scale 1 (level / that rate = the scale). A step lasts its pass (window / scale) plus a half second for
the last arrivals. A pause ends the step; the resumed step replays the schedule from its start, as does a
level set by hand (at the scale that rate stands for). With ``--level N`` (and no ``--open-loop``) the
requests go out in order from N closed-loop users instead, the times ignored.
"""

from __future__ import annotations

import os
from dataclasses import replace

from loadgen.cli.flags import RunFlags
from loadgen.config import Api, RampPlan
from loadgen.exits import UsageError
from loadgen.profile import Profile
from loadgen.sources import (
    DATASET_FORMATS,
    TIME_UNITS,
    DatasetOptions,
    Source,
    SourceError,
    TraceOptions,
    load_dataset,
    load_requests,
    load_trace,
)


def _given(flags: RunFlags) -> list[str]:
    named = (("--dataset", flags.dataset), ("--trace", flags.trace), ("--requests", flags.requests))
    return [name for name, value in named if value]


def _trace_flags(flags: RunFlags) -> list[str]:
    named = (("--trace-window", flags.trace_window), ("--trace-time-unit", flags.trace_time_unit))
    return [name for name, value in named if value is not None]


def _dataset(flags: RunFlags, base: Source | None) -> Source:
    assert flags.dataset is not None
    options = base.dataset if base is not None and base.dataset is not None else DatasetOptions(flags.dataset)
    fmt = next((f for f in DATASET_FORMATS if f == flags.dataset_format), None)
    return load_dataset(replace(options, path=flags.dataset, format=fmt))


def _trace(flags: RunFlags, path: str, base: TraceOptions | None) -> Source:
    options = base if base is not None else TraceOptions(path)
    unit = next((u for u in TIME_UNITS if u == flags.trace_time_unit), options.time_unit)
    window = flags.trace_window if flags.trace_window is not None else options.window
    return load_trace(replace(options, path=path, time_unit=unit, window=window))


def _load(flags: RunFlags, profile: Profile) -> Source | None:
    base = profile.replay
    if flags.dataset:
        return _dataset(flags, base)
    if flags.requests:
        return load_requests(flags.requests)
    table = base.trace if base is not None else None
    if flags.trace:
        return _trace(flags, flags.trace, table)
    if table is not None and _trace_flags(flags):
        return _trace(flags, table.path, table)
    return base


def replay_profile(flags: RunFlags, profile: Profile) -> Profile:
    """``profile`` with the source the flags and its tables name (unchanged without one)."""
    given = _given(flags)
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: replay one source per run")
    if flags.dataset_format is not None and not flags.dataset:
        raise UsageError("--dataset-format names the format of --dataset FILE: add --dataset")
    try:
        source = _load(flags, profile)
    except SourceError as exc:
        raise UsageError(str(exc)) from None
    if source is None or source.kind != "trace":
        stray = _trace_flags(flags)
        if stray:
            raise UsageError(f"{stray[0]} shapes a trace: add --trace FILE")
    if flags.time_scale is not None and (source is None or not source.scheduled):
        raise UsageError(
            "--time-scale speeds up a trace or a request file: add --trace FILE or --requests FILE"
        )
    if flags.time_scale is not None and not flags.time_scale > 0:
        raise UsageError(f"--time-scale must be positive (2 = twice as fast), got {flags.time_scale:g}")
    if source is None:
        return profile
    source = replace(source, workers=max(1, flags.workers))
    if source.kind == "requests":
        if flags.api is not None and flags.api != source.format:
            raise UsageError(f"--api {flags.api}: {source.path} holds {source.format} requests; drop --api")
        api: Api = "completions" if source.format == "completions" else "chat"
        return replace(profile, replay=source, api=api)
    return replace(profile, replay=source)


def replay_plan(flags: RunFlags, source: Source | None) -> RampPlan | None:
    """The open-loop plan of a scheduled source (module docstring); None: the usual load shape applies."""
    if source is None or not source.scheduled:
        return None
    if flags.level is not None and not flags.open_loop:
        return None  # closed loop: the users take the requests in order
    what = "--trace" if source.kind == "trace" else "--requests"
    if flags.rate is not None:
        raise UsageError(
            f"{what} arrivals follow the file's times: speed them with --time-scale X, not --rate"
        )
    if flags.find_max is not None:
        raise UsageError(f"--find-max searches rates; {what} replays the file's own times: drop one")
    if flags.steps is not None and flags.time_scale is not None:
        raise UsageError(
            "--steps are time scales with --trace/--requests: give --steps X1,X2 or --time-scale X"
        )
    table = source.trace.time_scale if source.trace is not None else 1.0
    scales = flags.steps or ((flags.time_scale if flags.time_scale is not None else table),)
    base = source.base_rate_rps
    seconds = tuple(source.step_seconds(scale) for scale in scales)
    return RampPlan(
        levels=tuple(scale * base for scale in scales),
        step_s=seconds[0],
        warmup_s=flags.warmup if flags.warmup is not None else 0.0,
        early_stop=flags.early_stop,
        mode="open",
        repeat=flags.repeat,
        step_seconds=seconds,
    )


def save_requests_problem(flags: RunFlags) -> str | None:
    """A ``--save-requests`` path that cannot be written, or exists (the workers create it as they send)."""
    path = flags.save_requests
    if path is None:
        return None
    if flags.requests and os.path.abspath(path) == os.path.abspath(flags.requests):
        return f"--save-requests {path} is the file --requests replays: save to another file"
    if os.path.exists(path):
        return f"--save-requests {path}: already exists; choose another path (saved requests are never overwritten)"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"--save-requests {path}: no folder {folder}; create it or choose another path"
    return None

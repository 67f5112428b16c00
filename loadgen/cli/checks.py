"""Run flags that cannot work, found before anything starts: each one is told as one line that names the flag
and says what to write instead (``loadgen.cli.resolve`` raises it as a ``UsageError``: exit 2).

Owns the checks of single flags (``flag_problem``: positive durations and timeouts, a rate only in open loop,
a burstiness only for gamma arrivals, counts not negative, a usable ``--ca-cert`` and ``--proxy``), of the
resolved plan (``plan_problem``: a warm-up shorter than its step), of the record's path (``out_problem``) and
of an SLO clause nothing would measure (``quality_slo_problem``: ``quality_agree_min`` without answer probes).
The target URL, the CA bundle and the proxy are checked by ``loadgen.target.urls`` (``ramp check`` takes them
too).

``--rate`` without ``--open-loop`` is refused rather than silently switching to open loop, unless the
profile's own plan is an open-loop one (then ``--rate`` steers that mode by hand).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from loadgen.target.urls import ca_problem, proxy_problem

if TYPE_CHECKING:
    from loadgen.cli.flags import RunFlags
    from loadgen.config import SLO, Mode, RampPlan
    from loadgen.profile import Quality

__all__ = ["flag_problem", "folder_writable", "out_problem", "plan_problem", "quality_slo_problem"]


def _positive(flags: RunFlags) -> str | None:
    given: list[tuple[str, float | None, str]] = [
        ("--rolling", flags.rolling, "seconds of the rolling window, e.g. --rolling 10"),
        ("--step-seconds", flags.step_seconds, "seconds per step, e.g. --step-seconds 30"),
        ("--ttft-timeout", flags.ttft_timeout, "seconds to wait for a first token, e.g. --ttft-timeout 300"),
        ("--idle-timeout", flags.idle_timeout, "seconds a stream may stay silent, e.g. --idle-timeout 120"),
        ("--total-timeout", flags.total_timeout, "seconds a request may take, e.g. --total-timeout 1800"),
        ("--refresh", flags.refresh, "snapshots per second, e.g. --refresh 1"),
        ("--rate", flags.rate, "arrivals per second, e.g. --rate 4"),
        ("--max-event-bytes", flags.max_event_bytes, "the largest SSE event, e.g. --max-event-bytes 1048576"),
    ]
    for flag, value, meaning in given:
        if value is not None and not value > 0:
            return f"{flag} must be positive ({meaning}), got {value:g}"
    return None


def flag_problem(flags: RunFlags, profile_mode: Mode | None) -> str | None:
    """The first flag that cannot work as given, told as what to do; None when all can.
    ``profile_mode``: the mode of the profile's own plan (None when it has none)."""
    problem = _positive(flags)
    if problem is not None:
        return problem
    if flags.workers < 1:
        return "--workers must be at least 1"
    if flags.warmup is not None and flags.warmup < 0:
        return f"--warmup must be 0 or more seconds, got {flags.warmup:g}"
    for flag, count in (("--level", flags.level), ("--max-concurrency", flags.max_concurrency)):
        if count is not None and count < 0:
            return f"{flag} must be 0 or more, got {count}"
    if flags.rate is not None and not flags.open_loop and profile_mode != "open":
        return (
            f"--rate {flags.rate:g} is an open-loop arrival rate (req/s): add --open-loop, "
            "or use --level N for N closed-loop streams"
        )
    if flags.ca_cert is not None:
        problem = ca_problem(flags.ca_cert, flags.insecure)
        if problem is not None:
            return problem
    if flags.proxy is not None:
        problem = proxy_problem(flags.proxy, flags.no_proxy)
        if problem is not None:
            return problem
    if flags.burstiness is not None:
        if flags.arrival != "gamma":
            return (
                f"--burstiness shapes gamma arrivals only (--arrival is {flags.arrival}): "
                "add --arrival gamma, or drop --burstiness"
            )
        if not flags.burstiness > 0:
            return f"--burstiness must be positive (gamma shape k: < 1 burstier, > 1 smoother), got {flags.burstiness:g}"
    return None


def plan_problem(plan: RampPlan | None, flags: RunFlags) -> str | None:
    """A plan whose warm-up fills its step would measure nothing."""
    if plan is None or plan.warmup_s < plan.step_s:
        return None
    warm = "--warmup" if flags.warmup is not None else "the profile's warmup_seconds"
    step = "--step-seconds" if flags.step_seconds is not None else "the profile's step_seconds (or 30 s)"
    return (
        f"a {plan.warmup_s:g} s warm-up ({warm}) leaves nothing to measure in a {plan.step_s:g} s step ({step}): "
        "make the warm-up shorter than the step"
    )


def _nearest(folder: str) -> str:
    """``folder``, or the nearest of its parents that exists (a missing folder is made when written to)."""
    folder = os.path.abspath(folder)
    while not os.path.exists(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def folder_writable(folder: str) -> bool:
    """Whether files can be written in ``folder`` (made, with its missing parents, when it is missing)."""
    nearest = _nearest(folder)
    return os.path.isdir(nearest) and os.access(nearest, os.W_OK | os.X_OK)


def out_problem(path: str) -> str | None:
    """Why a record cannot be written at ``path`` (its folder is made when missing), or None."""
    if os.path.isdir(path):
        return f"--out {path!r} is a folder: name a file, e.g. --out {os.path.join(path, 'run.jsonl')}"
    folder = _nearest(os.path.dirname(os.path.abspath(path)))
    if not os.path.isdir(folder):
        return f"--out {path!r}: {folder!r} is a file, not a folder: choose another path"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--out {path!r}: the folder {folder!r} is not writable: choose another path"
    return None


def quality_slo_problem(slo: SLO, quality: Quality | None, profile: str) -> str | None:
    """An SLO clause on the answers' agreement where no answer is probed: every step would read n/a against
    it, silently; refused before the run instead."""
    if slo.quality_agree_min is None or quality is not None:
        return None
    return (
        "quality_agree_min needs --quality (answer probes): add --quality, or a [quality] table to profile "
        f"'{profile}'"
    )

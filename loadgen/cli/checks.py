"""Run flags that cannot work, found before anything starts: each one is told as one line that names the flag
and says what to write instead (``loadgen.runargs`` raises it as a ``UsageError``: exit 2).

Owns the checks of single flags (``flag_problem``: positive durations and timeouts, a rate only in open loop,
a burstiness only for gamma arrivals, counts not negative), of the target URL (``check_url``: http or https
in any case, a host, a port within 1-65535; returns the URL with its scheme in lower case), of the resolved
plan (``plan_problem``: a warm-up shorter than its step) and of the record's path (``out_problem``).
Messages never repeat a URL's credentials (``loadgen.target.http.scrub``).

``--rate`` without ``--open-loop`` is refused rather than silently switching to open loop, unless the
profile's own plan is an open-loop one (then ``--rate`` steers that mode by hand).
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from loadgen.target.http import scrub
from loadgen.types import server_root

if TYPE_CHECKING:
    from loadgen.cli.flags import RunFlags
    from loadgen.config import Mode, RampPlan

__all__ = [
    "ca_problem",
    "check_url",
    "check_urls",
    "flag_problem",
    "folder_writable",
    "out_problem",
    "plan_problem",
    "proxy_problem",
]


def check_url(url: str) -> tuple[str, str | None]:
    """(the URL with a lower-case scheme, what is wrong with it or None)."""
    text = url.strip()
    parts = urlsplit(text)
    shown = scrub(text)
    if parts.scheme.lower() not in ("http", "https") or "://" not in text:
        return text, f"URL must start with http:// or https:// — got {shown!r}"
    if not parts.hostname:
        return text, f"URL {shown!r} names no host: use http://HOST:PORT"
    try:
        port = parts.port
    except ValueError:  # "Port out of range 0-65535", or not a number
        port = -1
    if port is not None and not 1 <= port <= 65535:
        given = parts.netloc.rsplit(":", 1)[-1]
        return text, f"URL {shown!r}: port {given} is not a TCP port (1-65535)"
    return urlunsplit(parts._replace(scheme=parts.scheme.lower())), None


# A comma starts another replica only before a URL's scheme: a comma inside a query string stays.
_NEXT_URL = re.compile(r",\s*(?=[a-z][a-z0-9+.-]*://)", re.IGNORECASE)


def check_urls(url: str, more: Sequence[str] = ()) -> tuple[tuple[str, ...], str | None]:
    """Several replicas as one target: the URL given (``A,B`` for several) and each ``--url``, checked
    (``check_url``) and in order; (the URLs, what is wrong or None). One URL: exactly ``check_url``'s."""
    given = [u for text in (url, *more) for u in _NEXT_URL.split(text.strip()) if u.strip()]
    if not given:
        return (), (
            "no target URL: ramp run URL, or set OPENAI_BASE_URL (several replicas: ramp run --url A --url B, "
            "or A,B)"
        )
    urls = []
    for text in given:
        checked, problem = check_url(text)
        if problem is not None:
            return (), problem
        urls.append(checked)
    seen = {server_root(u) for u in urls}
    if len(seen) < len(urls):
        twice = next(u for at, u in enumerate(urls) if server_root(u) in map(server_root, urls[:at]))
        return (), f"replica {scrub(twice)!r} is given twice: give each replica once"
    return tuple(urls), None


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


def ca_problem(path: str, insecure: bool) -> str | None:
    """A ``--ca-cert`` that cannot be used: missing, not PEM certificates, or contradicted by --insecure."""
    if insecure:
        return "--insecure skips verification and --ca-cert verifies: give one of them"
    if not os.path.isfile(path):
        return f"--ca-cert {path!r}: no such file (a PEM bundle of the CA certificates to trust)"
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError, ValueError):
        return f"--ca-cert {path!r} holds no certificate that loads: give a PEM bundle of CA certificates"
    return None


def proxy_problem(url: str, no_proxy: bool) -> str | None:
    """A ``--proxy`` that cannot be used: not http://HOST:PORT, or contradicted by --no-proxy."""
    if no_proxy:
        return "--proxy sends every call through a proxy and --no-proxy through none: give one of them"
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme.lower() != "http" or not parts.hostname or (port is not None and not 1 <= port <= 65535):
        return f"--proxy {scrub(url)!r}: give an HTTP proxy as http://HOST:PORT (https targets are tunnelled)"
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

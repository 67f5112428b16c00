"""``ramp check URL``: its flags (``add_check_flags``), the order the checks run in (``run_checks``) and the
command (``check_main``: the report as text or JSON on stdout, exit 0 when every required check passed,
1 otherwise, 2 for a usage error, 3 when the target cannot be reached or has no model to check — as ``ramp
run`` exits).

The target is reached as ``ramp run`` reaches it: the key from ``--api-key-env`` (never shown), TLS by
``--ca-cert`` / ``--insecure``, the proxy by ``--proxy`` / ``--no-proxy`` or the environment
(``loadgen.target.connect``). The probe (``loadgen.target.probe``) comes first: when ``/v1/models`` cannot
be read the report says why and the other checks are not run.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from loadgen.check import api_checks, edge_checks, responses_check, run_body, speed, tools_check
from loadgen.check.results import CheckReport, CheckResult
from loadgen.check.session import Session, open_session
from loadgen.config import Api
from loadgen.exits import EXIT_OK, EXIT_SLO, EXIT_UNREACHABLE, UsageError
from loadgen.profile import Profile, ProfileError, load_profile
from loadgen.target.connect import connection_warnings
from loadgen.target.http import target_root
from loadgen.target.probe import ServerInfo, probe
from loadgen.target.urls import ca_problem, check_url, proxy_problem
from loadgen.types import Target

__all__ = ["check_main", "run_checks"]


def _target(args: argparse.Namespace) -> Target:
    url, problem = check_url(args.url)
    problem = problem or (ca_problem(args.ca_cert, args.insecure) if args.ca_cert else None)
    problem = problem or (proxy_problem(args.proxy, args.no_proxy) if args.proxy else None)
    if problem is None and args.ramp_seconds < 0:
        problem = f"--ramp-seconds must be 0 (no ramp) or more, got {args.ramp_seconds:g}"
    if problem is None and args.streams < 1:
        problem = f"--streams must be at least 1, got {args.streams}"
    if problem is None and args.timeout <= 0:
        problem = f"--timeout must be more than 0, got {args.timeout:g}"
    if problem is not None:
        raise UsageError(problem)
    return Target(
        url=url,
        model=args.model,
        api_key_env=args.api_key_env,
        ca_cert=args.ca_cert,
        insecure=args.insecure,
        proxy="" if args.no_proxy else args.proxy,
        connect_timeout_s=min(10.0, args.timeout),
        ttft_timeout_s=args.timeout,
        idle_timeout_s=args.timeout,
        total_timeout_s=args.timeout * 2,
    )


async def _models(session: Session, info: ServerInfo) -> CheckResult:
    """What the SDK's ``models.list()`` reads, against what the probe found (a server without a model list
    but a ``--model`` given: n/a, the model is asked for as given, as ``ramp run`` does)."""
    if info.note:
        return CheckResult("models", "n/a", info.note, True)
    try:
        page = await session.sdk.models.list()
    except Exception as exc:
        return CheckResult(
            "models", "fail", f"SDK models.list(): {api_checks.failure_text(session, exc)}", True
        )
    ids = [m.id for m in page.data]
    if session.model not in ids:
        return CheckResult(
            "models", "fail", f"the SDK lists {', '.join(ids) or 'no model'}, not {session.model!r}", True
        )
    return CheckResult(
        "models", "pass", f"/v1/models lists {len(ids)}: {', '.join(ids)[:120]}", True, {"models": ids}
    )


def _context(info: ServerInfo) -> CheckResult:
    if info.max_model_len is None:
        return CheckResult(
            "max_model_len", "n/a", "not stated in /v1/models: context overflow is not checked"
        )
    return CheckResult(
        "max_model_len", "pass", f"{info.max_model_len:,} tokens", data={"max_model_len": info.max_model_len}
    )


@dataclass(frozen=True, slots=True)
class RunShape:
    """What ``ramp run`` would send: its profile (``--profile``, default chat) and ``--api``."""

    profile: Profile
    api: Api | None = None


async def _guarded(
    session: Session, name: str, required: bool, check: Callable[[], Awaitable[CheckResult] | CheckResult]
) -> CheckResult:
    """One check, its answer-reading failures turned into its failed row (never a traceback): each check
    says what it can of a bad answer; this catches what none foresaw (a field of the wrong type)."""
    try:
        done = check()
        return await done if inspect.isawaitable(done) else done
    except Exception as exc:
        return api_checks.unreadable(session, name, required, exc)


def _at_once(session: Session, name: str, required: bool, check: Callable[[], CheckResult]) -> CheckResult:
    """``_guarded`` for the checks run outside the SDK's loop (the ramp, the rate limits)."""
    try:
        return check()
    except Exception as exc:
        return api_checks.unreadable(session, name, required, exc)


async def _sdk_checks(session: Session, report: CheckReport, info: ServerInfo, run: RunShape) -> None:
    gen = api_checks.GenerationChecks(session)
    checks: list[tuple[str, bool, Callable[[], Awaitable[CheckResult] | CheckResult]]] = [
        ("models", True, lambda: _models(session, info)),
        ("max_model_len", False, lambda: _context(info)),
        ("chat", True, gen.chat),
        ("chat stream", True, gen.chat_streamed),
        (
            run_body.NAME,
            True,
            lambda: run_body.run_request(session, run.profile, run.api, session_timeout(session)),
        ),
        ("completions", False, lambda: gen.completions(stream=False)),
        ("completions stream", False, lambda: gen.completions(stream=True)),
        (
            responses_check.NAME,
            run.api == "responses",
            lambda: responses_check.responses_stream(session, required=run.api == "responses"),
        ),
        (tools_check.NAME, False, lambda: tools_check.tool_calls(session)),
        ("usage chunk", True, gen.usage_chunk),
        ("max_tokens", True, gen.max_tokens),
        ("stop", False, gen.stop),
        ("role chunk", False, gen.role_chunk),
        ("reasoning", False, gen.reasoning),
        ("error shape", True, lambda: edge_checks.bad_request(session)),
        ("context overflow", False, lambda: edge_checks.context_overflow(session)),
        ("/metrics", False, lambda: edge_checks.metrics(session)),
        ("/tokenize", False, lambda: edge_checks.tokenize(session)),
        ("baseline", False, lambda: speed.baseline(session)),
    ]
    for name, required, check in checks:
        report.add(await _guarded(session, name, required, check))


def session_timeout(session: Session) -> float:
    return session.target.ttft_timeout_s or 60.0


async def _probe_and_check(
    target: Target, report: CheckReport, timeout_s: float, run: RunShape
) -> Session | None:
    info = await probe(target, timeout_s=min(timeout_s, 10.0))
    if not info.ok or info.model is None:
        report.add(CheckResult("models", "fail", info.error or "no model to check: pass --model NAME", True))
        report.unreachable = True  # ramp run would stop here too (exit 3)
        return None
    report.model, report.runtime, report.runtime_version = info.model, info.runtime, info.runtime_version
    session = open_session(target, info.model, timeout_s)
    session.max_model_len = info.max_model_len
    try:
        await _sdk_checks(session, report, info, run)
    finally:
        await session.aclose()
    return session


def run_checks(
    target: Target,
    *,
    ramp_seconds: float = 10.0,
    streams: int = 8,
    timeout_s: float = 60.0,
    run: RunShape | None = None,
) -> CheckReport:
    """Every check against ``target``, in order; never raises for what the server does. ``run``: what
    ``ramp run`` would send (default: the chat profile, as ``ramp run``'s default)."""
    started = time.perf_counter()
    report = CheckReport(url=target_root(target))  # shown: without user:password@ or the query
    shape = run if run is not None else RunShape(load_profile("chat"))
    session = asyncio.run(_probe_and_check(target, report, timeout_s, shape))
    if session is not None:
        if ramp_seconds > 0:
            report.add(
                _at_once(
                    session, "ramp", True, lambda: speed.ramp(target, session.model, ramp_seconds, streams)
                )
            )
        else:
            report.add(CheckResult("ramp", "n/a", "skipped (--ramp-seconds 0)", True))
        report.ratelimit = dict(session.ratelimit)
        report.add(_at_once(session, "rate limits", False, lambda: edge_checks.rate_limits(session)))
    report.elapsed_s = time.perf_counter() - started
    return report


def _run_shape(args: argparse.Namespace) -> RunShape:
    try:
        return RunShape(load_profile(args.profile), args.api)
    except ProfileError as exc:
        raise UsageError(str(exc)) from None


def check_main(args: argparse.Namespace) -> int:
    """``ramp check``: the report on stdout; 0 when every required check passed, 1 otherwise, 3 when the
    target cannot be reached (or serves no model to check), as ``ramp run``."""
    target = _target(args)
    run = _run_shape(args)
    for warning in connection_warnings(target):  # --insecure, a proxy: said before anything is sent
        print(f"ramp: warning: {warning}", file=sys.stderr)
    report = run_checks(
        target, ramp_seconds=args.ramp_seconds, streams=args.streams, timeout_s=args.timeout, run=run
    )
    sys.stdout.write((report.json() if args.format == "json" else report.text()) + "\n")
    if report.unreachable:
        return EXIT_UNREACHABLE
    return EXIT_OK if report.ok else EXIT_SLO

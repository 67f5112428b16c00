"""The check of what ``ramp run`` will send (``run request``): the first request of the run's profile (as
``--profile`` and ``--api`` choose it, the same defaults as ``ramp run``), built by the run's own workload and
sent through ramp's own client, so the body is byte for byte the run's (``loadgen.client.build_body``:
``max_tokens``, ``stream``, ``stream_options.include_usage`` and the profile's ``[sampling]`` keys such as
``ignore_eos``). The stream is cancelled at its first token: the server has taken the body by then.

A refusal names the field the server would not take — the one its message names, else the one whose removal
gets the request through — and what to do about it (the profile key, or the ``ramp run`` flag, that drops it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import time

from loadgen import strict_json
from loadgen.check.results import CheckResult
from loadgen.check.session import SEED, Session
from loadgen.client import Client, build_body
from loadgen.config import Api
from loadgen.profile import Profile
from loadgen.stream import LiveCounter
from loadgen.types import RequestResult, RequestSpec
from loadgen.workload import Workload
from loadgen.workload.sizing import PromptSizer, as_api

__all__ = ["NAME", "first_request", "run_request"]

NAME = "run request"
SAMPLING = ("ignore_eos", "temperature", "top_p", "stop")  # the profile's [sampling] keys, dropped to retry
_TOLD = {
    "ignore_eos": "set ignore_eos = false (or drop the line) under [sampling] in a copy of the profile, and "
    "run with --profile FILE: OpenAI and most managed APIs refuse this extension of the open servers' (without it, "
    "replies may end before max_tokens)",
    "temperature": "drop temperature from [sampling] in a copy of the profile (--profile FILE)",
    "top_p": "drop top_p from [sampling] in a copy of the profile (--profile FILE)",
    "stop": "drop stop from [sampling] in a copy of the profile (--profile FILE)",
    "max_tokens": "lower the profile's [[bucket]] output (it is sent as max_tokens), or run with --fit-context",
    "stream_options": "ramp run always asks stream_options.include_usage (the tokens are counted from the "
    "usage): this server cannot be load-tested as it is",
}


def first_request(profile: Profile, model: str, api: Api | None) -> RequestSpec:
    """The first request a run of ``profile`` sends (its first session's first turn), for ``model``."""
    workload = Workload(profile, PromptSizer.estimate(api or as_api(profile.api)), model, SEED, api=api)
    session = workload.new_session(random.Random(SEED))
    spec = session.next_request()
    if spec is None:  # cannot happen for a valid profile: every session has a first turn
        raise ValueError(f"profile {profile.name!r} makes no request")
    return spec


async def _send(client: Client, spec: RequestSpec, timeout_s: float) -> RequestResult:
    """``spec`` through ramp's client, cancelled at its first token (or at ``timeout_s``)."""
    live = LiveCounter()
    task = asyncio.ensure_future(client.send(spec, time.monotonic_ns(), live))
    deadline = time.monotonic() + timeout_s
    while not task.done() and live.tokens == 0 and time.monotonic() < deadline:
        await asyncio.wait({task}, timeout=0.02)
    if not task.done():
        task.cancel()
    return await task


def _without(spec: RequestSpec, key: str) -> RequestSpec:
    return dataclasses.replace(spec, extra_body=tuple((k, v) for k, v in spec.extra_body if k != key))


def _named(message: str, keys: list[str]) -> str | None:
    """The body field the server's message names (a longer name first: ``stream_options`` before ``stream``)."""
    text = message.lower()
    return next((k for k in sorted(keys, key=len, reverse=True) if k in text), None)


def _sent(spec: RequestSpec) -> list[str]:
    body = build_body(spec).decode()
    return [k for k in ("max_tokens", "stream_options", *SAMPLING) if f'"{k}"' in body]


async def _culprit(client: Client, spec: RequestSpec, message: str, timeout_s: float) -> str | None:
    sent = _sent(spec)
    named = _named(message, sent)
    if named is not None:
        return named
    for key in (k for k, _ in spec.extra_body if k in SAMPLING):
        status = (await _send(client, _without(spec, key), timeout_s)).http_status
        if status is None or status < 400:
            return key  # without it the request goes through
    return None


def _said(message: str) -> str:
    """``HTTP 400: {"error": {"message": "..."}}`` as ``HTTP 400: ...`` (OpenAI's error JSON unwrapped)."""
    head, _, rest = message.partition(": ")
    try:
        doc = strict_json.loads(rest)
        inner = doc.get("error", doc) if isinstance(doc, dict) else None
        text = inner.get("message") if isinstance(inner, dict) else None
    except ValueError:
        text = None
    return f"{head}: {text}" if isinstance(text, str) else message


def _refusal(session: Session, result: RequestResult, culprit: str | None, spec: RequestSpec) -> CheckResult:
    said = session.scrub(_said(result.error_message))[:240]
    data: dict[str, object] = {"status": result.http_status, "field": culprit, "sent": _sent(spec)}
    if culprit is None:
        why = f"the server refused the request ramp run sends ({said}); it sent {', '.join(_sent(spec))}"
        return CheckResult(NAME, "fail", why, True, data)
    value = dict(spec.extra_body).get(culprit)
    shown = culprit if value is None else f"{culprit} = {json.dumps(value)}"
    why = f"the server refuses {shown}, which ramp run sends ({said}): {_TOLD[culprit]}"
    return CheckResult(NAME, "fail", why, True, data)


async def run_request(session: Session, profile: Profile, api: Api | None, timeout_s: float) -> CheckResult:
    """Send the run's first request as the run would; pass when the server takes its body."""
    spec = dataclasses.replace(first_request(profile, session.model, api), model=session.model)
    async with Client(session.target, max_connections=1, transport="h1") as client:
        result = await _send(client, spec, timeout_s)
        status = result.http_status
        if status is not None and 400 <= status < 500 and status not in (401, 403, 404, 429):
            return _refusal(
                session, result, await _culprit(client, spec, result.error_message, timeout_s), spec
            )
    sent = ", ".join(_sent(spec))
    if result.first_token_ns is None and result.error_kind is not None:
        said = session.scrub(f"{result.error_kind.value}: {result.error_message}")[:240]
        return CheckResult(NAME, "fail", f"ramp run's first request failed ({said})", True)
    ttft = "" if result.ttft_ns is None else f", first token after {result.ttft_ns / 1e6:,.0f} ms"
    why = f"profile {profile.name} ({spec.api}) as ramp run sends it: {sent} taken{ttft}"
    return CheckResult(NAME, "pass", why, True, {"sent": _sent(spec), "max_tokens": spec.max_tokens})

"""The speed checks of ``ramp check``: a one-request baseline (the same prompt through the SDK and through
ramp's own streaming client, TTFT and decode side by side: the gap is the SDK's overhead, or ramp's) and a
short closed-loop ramp to a few streams through ramp's engine (``loadgen.run.engine``: worker processes, the
same hot path as ``ramp run``), bounded by ``--ramp-seconds``.
"""

from __future__ import annotations

import dataclasses
import time

from loadgen import measures
from loadgen.check.api_checks import PROMPT, failure_text
from loadgen.check.results import CheckResult
from loadgen.check.session import SEED, Session
from loadgen.client import Client
from loadgen.config import RampPlan
from loadgen.format import fmt_ms, fmt_num_wide
from loadgen.profile import Profile, parse_profile
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.snapshot import StepSummary
from loadgen.types import RequestResult, RequestSpec, Target

__all__ = ["BASELINE_TOKENS", "baseline", "ramp", "ramp_levels", "ramp_profile"]

BASELINE_TOKENS = 64
RAMP_PROFILE = """
name = "check-ramp"
description = "ramp check: short prompts, short replies"
[[bucket]]
input = 64
output = 32
"""


def ramp_profile() -> Profile:
    return parse_profile(RAMP_PROFILE, source="<ramp check>")


def ramp_levels(streams: int) -> tuple[float, ...]:
    """1, 2, 4 ... up to ``streams`` (which is always the last level)."""
    levels: list[float] = []
    level = 1
    while level < streams:
        levels.append(float(level))
        level *= 2
    return (*levels, float(streams))


def _spec(model: str, max_tokens: int) -> RequestSpec:
    return RequestSpec(
        api="chat",
        model=model,
        max_tokens=max_tokens,
        messages=(("user", PROMPT),),
        extra_body=(("temperature", 0), ("seed", SEED)),
    )


async def _ramp_client_once(target: Target, model: str) -> RequestResult:
    """The prompt through ramp's client, after a one-token request that opens its connection (the SDK's is
    open by now: the comparison is of two warm connections)."""
    async with Client(target, max_connections=1, transport="h1") as client:
        await client.send(_spec(model, 1), time.monotonic_ns())
        return await client.send(_spec(model, BASELINE_TOKENS), time.monotonic_ns())


async def baseline(session: Session) -> CheckResult:
    name = "baseline"
    try:
        sdk = await session.generate("chat", PROMPT, BASELINE_TOKENS, stream=True)
    except Exception as exc:
        return CheckResult(name, "fail", f"SDK: {failure_text(session, exc)}")
    ours = await _ramp_client_once(session.target, session.model)
    if ours.error_kind is not None:
        return CheckResult(
            name, "fail", session.scrub(f"ramp's client: {ours.error_kind.value}: {ours.error_message}")
        )
    ramp_ttft = ours.ttft_ns / 1e6 if ours.ttft_ns is not None else None
    tokens = sdk.usage.completion_tokens if sdk.usage is not None else None
    data: dict[str, object] = {
        "sdk_ttft_ms": sdk.ttft_ms,
        "ramp_ttft_ms": ramp_ttft,
        "sdk_decode_tok_s": sdk.decode_tok_s(),
        "ramp_decode_tok_s": ours.decode_tok_s,
        "output_tokens": tokens,
    }
    why = (
        f"TTFT SDK {fmt_ms(sdk.ttft_ms)} · ramp {fmt_ms(ramp_ttft)}; decode SDK "
        f"{fmt_num_wide(sdk.decode_tok_s())} · ramp {fmt_num_wide(ours.decode_tok_s)} tok/s "
        f"({f'{tokens} tokens' if tokens is not None else 'no usage'}, same prompt)"
    )
    return CheckResult(name, "pass", why, data=data)


def _row(step: StepSummary) -> dict[str, object]:
    stats = step.stats
    return {
        "level": step.level,
        "ok": stats.ok,
        "errors": stats.error_count,
        "out_tok_s": stats.out_tok_s,
        "ttft_p50_ms": stats.pct(measures.TTFT_MS).p50,
        "ttft_p95_ms": stats.pct(measures.TTFT_MS).p95,
        "decode_p50_tok_s": stats.pct(measures.DECODE_TOK_S).p50,
    }


def _verdict(outcome: RunOutcome | None, seconds: float, streams: int) -> CheckResult:
    name = "ramp"
    if outcome is None:
        return CheckResult(name, "fail", "the ramp did not finish in time", True)
    if outcome.state == "failed" or not outcome.steps:
        said = " ".join((outcome.message or "no step finished").split())  # one line, whatever the engine said
        return CheckResult(name, "fail", said[:300], True)
    rows = [_row(s) for s in outcome.steps]
    errors = sum(s.stats.error_count for s in outcome.steps)
    levels = "/".join(str(s.level) for s in outcome.steps)

    def series(key: str, look: str) -> str:
        values = [r[key] for r in rows]
        return "/".join(fmt_num_wide(v if isinstance(v, float) else None) for v in values) + look

    why = (
        f"1→{streams} streams in {seconds:g} s, levels {levels}: out {series('out_tok_s', ' tok/s')}, TTFT p50 "
        f"{series('ttft_p50_ms', ' ms')}, decode p50 {series('decode_p50_tok_s', ' tok/s')}"
    )
    if errors:
        latest = next((m for s in reversed(outcome.steps) for m in s.latest_errors.values()), "")
        return CheckResult(name, "fail", f"{errors} errors: {latest[:160]}", True, {"steps": rows})
    return CheckResult(name, "pass", why + ", 0 errors", True, {"steps": rows})


def ramp(target: Target, model: str, seconds: float, streams: int) -> CheckResult:
    """A closed-loop ramp 1 → ``streams`` over about ``seconds`` through ramp's engine; no record, no
    telemetry (the /metrics check covers that), a fixed seed."""
    from loadgen.run.engine import Engine

    levels = ramp_levels(streams)
    per_step = seconds / len(levels)
    warmup = min(0.5, per_step * 0.2)
    config = RunConfig(
        target=dataclasses.replace(target, model=model),
        profile=ramp_profile(),
        plan=RampPlan(levels, step_s=per_step - warmup, warmup_s=warmup),
        telemetry=False,
        out=None,
        seed=SEED,
        snapshot_hz=2.0,
    )
    engine = Engine(config)
    engine.start()
    outcome = engine.wait(timeout=seconds * 3 + 60)
    if outcome is None:
        engine.stop()
        engine.wait(15)
    return _verdict(outcome, seconds, streams)

"""Before the load: what the target serves (model, runtime, context length), the prompt sizer fitted to
the API the workers speak, the telemetry, the record's header, and the warnings worth knowing before the
first request is sent. With ``fit_context`` the sizer the workers receive carries the server's
max_model_len, and every request is clamped to it (``loadgen.workload``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from loadgen.config import SLO, SetupError
from loadgen.format import fmt_count, fmt_pct
from loadgen.profile import Profile, context_overflow
from loadgen.run.collector import collector_warning
from loadgen.run.config import RunConfig
from loadgen.run.recording import RunRecord, record_header
from loadgen.run.sizing import fit_sizer
from loadgen.run.state import Load, RunStatus
from loadgen.run.telemetry_link import TelemetryLink
from loadgen.sources.model import first_overflow
from loadgen.target.connect import connection_warnings
from loadgen.target.probe import ServerInfo, probe
from loadgen.telemetry.headroom import headroom_record, plan_warning
from loadgen.workload.probes import probe_overflow

if TYPE_CHECKING:
    from loadgen.workload import PromptSizer


def resolve_model(config: RunConfig, info: ServerInfo) -> str:
    """The model to ask for: the flag's, else the profile's, else the first the server lists."""
    model = config.target.model
    if not model or model == "auto":
        named = config.profile.model or ""
        model = named if named not in ("", "auto") else (info.model or "")
    if not model:
        raise SetupError(f"{config.target.base_url}/v1/models lists no model: pass --model NAME")
    return model


def reference_mismatch(profile: Profile, model: str) -> str | None:
    """Why ``--quality-reference``'s answers cannot be this run's reference: another model gave them (one
    line naming both); None when they can, or when there are none. ``loadgen.cli.resolve`` checks a model
    named on the command line or in the profile; this checks the one the server was asked for."""
    quality = profile.quality
    if quality is None or not quality.reference or not quality.reference_model:
        return None
    if quality.reference_model == model:
        return None
    return (
        f"--quality-reference: its answers are {quality.reference_model!r}'s, this run's model is {model!r} "
        "(the server's): give a reference of this model"
    )


def context_warning(
    profile: Profile, max_model_len: int | None, *, fit: bool, sizer: PromptSizer | None = None
) -> str | None:
    """A warning when the profile can ask for more context than the server serves, else None; ``fit``:
    those requests are clamped (``--fit-context``), else they are sent and rejected."""
    if not isinstance(max_model_len, int):
        unknown = "--fit-context: the server does not state its max_model_len; requests are sent as drawn"
        return unknown if fit else None
    if profile.replay is not None:
        return None  # a dataset's or trace's own lengths are sent, not the buckets': nothing to say of those
    found = context_overflow(profile, max_model_len, turn_overhead=sizer.per_turn_tokens if sizer else 0)
    if found is None:
        return None
    share = (
        f"about {fmt_pct(found.share)} of requests"
        if found.share > 0
        else f"fewer than 1 in {fmt_count(found.draws)} requests"
    )
    asks = f"up to {fmt_count(found.largest)}" if found.bounded else f"{fmt_count(found.largest)} or more"
    head = (
        f"profile '{profile.name}' asks {asks} tokens (prompt + max_tokens) against the server's "
        f"max_model_len {fmt_count(max_model_len)}: {share}"
    )
    if not fit:
        return f"{head} will be rejected as errors; use --fit-context to clamp them (or a profile that fits)."
    estimate = "" if sizer is None or sizer.exact else f" (prompt lengths are estimated: {sizer.note})"
    return (
        f"{head} are clamped to fit (--fit-context): max_tokens lowered first, the prompt shortened when "
        f"it alone does not fit{estimate}."
    )


def planned_levels(load: Load) -> list[int]:
    """The concurrencies a closed-loop plan will ask for (none for an open loop: its level is a cap)."""
    if load.mode != "closed":
        return []
    return [load.level] if load.plan is None else [int(level) for level in load.plan.levels]


async def prepare(
    config: RunConfig, status: RunStatus, load: Load, slo: SLO, link: TelemetryLink
) -> tuple[PromptSizer, RunRecord]:
    """Probe the target (its identity lands in ``status``), fit the sizer, start the telemetry, open the
    record. Raises ``SetupError`` with a message for the operator when the run cannot start."""
    info = await probe(config.target)
    if not info.reachable:
        status.unreachable = True
        raise SetupError(info.error)
    status.warnings.extend(connection_warnings(config.target))  # --insecure: on screen and in the record
    if config.otel:  # said once, before the load: with no collector there every span is lost
        lost_spans = await asyncio.to_thread(collector_warning)
        if lost_spans is not None:
            status.warnings.append(lost_spans)
    status.model = resolve_model(config, info)
    refused = reference_mismatch(config.profile, status.model)  # the model is known only now without --model
    if refused is not None:
        raise SetupError(refused)
    status.runtime, status.runtime_version = info.runtime, info.runtime_version
    # The resolved API (flags over profile, merged once into the target) is what the workers speak.
    sizer, sized_by = await fit_sizer(config, status.model)  # /tokenize, else --tokenizer, else estimated
    await link.start(config)
    status.warnings.extend(link.new_drops())  # on screen and in the record's events
    source = config.profile.replay
    if source is not None and isinstance(info.max_model_len, int) and not config.fit_context:
        overflow = first_overflow(source, info.max_model_len)  # before any prompt is built
        if overflow is not None:
            raise SetupError(overflow)
    quality = config.profile.quality
    if quality is not None and isinstance(info.max_model_len, int):
        too_long = probe_overflow(quality, sizer, info.max_model_len)  # refused like other prompts
        if too_long is not None:
            raise SetupError(too_long)
    warning = context_warning(config.profile, info.max_model_len, fit=config.fit_context, sizer=sizer)
    if warning is not None:
        status.warnings.append(warning)
    link.plan_headroom(config.profile, sizer.per_turn_tokens)
    kv_warning = plan_warning(link.kv_headroom(), planned_levels(load))
    if kv_warning is not None:
        status.warnings.append(kv_warning)
    if config.fit_context and isinstance(info.max_model_len, int):
        sizer = dataclasses.replace(sizer, fit_context=info.max_model_len)
    if not config.out:
        return sizer, RunRecord()
    header = record_header(config, status, load, slo, info.max_model_len, link.conditions())
    header["kv_headroom"] = headroom_record(link.kv_headroom())  # the KV cache in sequences of this profile
    header["tokenizer"] = sized_by.as_dict()  # which tokenizer sized the prompts (file: path and sha256)
    detail_t0_ns = status.t0_ns if config.save_requests_detail else None  # --save-requests-detail
    record = RunRecord.open(config.out, header, config.record_events, detail_t0_ns)
    for text in status.warnings:
        record.event("warning", {"note": text})
    return sizer, record

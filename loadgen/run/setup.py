"""Before the load: what the target serves (model, runtime, context length), the prompt sizer fitted to
the API the workers speak, the telemetry, the record's header, and the warnings worth knowing before the
first request is sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadgen.config import SLO, RunConfig, SetupError
from loadgen.profile import Profile, context_overflow
from loadgen.run.recording import RunRecord, record_header
from loadgen.run.state import Load, RunStatus
from loadgen.run.telemetry_link import TelemetryLink
from loadgen.target.probe import ServerInfo, probe
from loadgen.workload import calibrate_sizer

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


def context_warning(profile: Profile, max_model_len: int | None) -> str | None:
    """A warning when the profile asks for more context than the server serves, else None."""
    if not isinstance(max_model_len, int):
        return None
    found = context_overflow(profile, max_model_len)
    if found is None:
        return None
    share, largest = found
    return (
        f"profile '{profile.name}': about {share:.1%} of requests ask for more than the server's "
        f"max_model_len {max_model_len:,} (prompt + max_tokens up to {largest:,}); the server will reject "
        "them as errors. Use a profile that fits, or serve a longer context."
    )


async def prepare(
    config: RunConfig, status: RunStatus, load: Load, slo: SLO, link: TelemetryLink
) -> tuple[PromptSizer, RunRecord]:
    """Probe the target (its identity lands in ``status``), fit the sizer, start the telemetry, open the
    record. Raises ``SetupError`` with a message for the operator when the run cannot start."""
    info = await probe(config.target)
    if not info.reachable:
        status.unreachable = True
        raise SetupError(info.error)
    status.model = resolve_model(config, info)
    status.runtime, status.runtime_version = info.runtime, info.runtime_version
    # The resolved API (flags over profile, merged once into the target) is what the workers speak.
    sizer = await calibrate_sizer(config.target, status.model, config.api)
    await link.start(config)
    warning = context_warning(config.profile, info.max_model_len)
    if warning is not None:
        status.warnings.append(warning)
    if not config.out:
        return sizer, RunRecord()
    header = record_header(config, status, load, slo, info.max_model_len, link.conditions())
    record = RunRecord.open(config.out, header, config.record_events)
    for text in status.warnings:
        record.event("warning", {"note": text})
    return sizer, record

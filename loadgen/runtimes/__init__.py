"""Every server runtime ramp knows, one adapter each (``base.Runtime``), and the lookup by name.

To add a backend: a module here with its ``Runtime`` (metric names, KV-capacity key, cache reset, how it
is identified and the info paths it is identified by, launch command), then its name in ``RuntimeName``
and its value in ``RUNTIMES`` below. The telemetry, target and launch modules ask these values (which
runtime a server is: ``identify``); none of them names a runtime itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from loadgen.runtimes.base import (
    EVIDENCE,
    CacheResetRoute,
    LaunchCommand,
    MetricIndex,
    MetricNames,
    Runtime,
    RuntimeDocs,
)
from loadgen.runtimes.generic import GENERIC
from loadgen.runtimes.sglang import SGLANG
from loadgen.runtimes.sim import SIM
from loadgen.runtimes.vllm import VLLM

__all__ = [
    "GENERIC",
    "LAUNCHABLE",
    "METRIC_RUNTIMES",
    "RUNTIMES",
    "SGLANG",
    "SIM",
    "VLLM",
    "CacheResetRoute",
    "LaunchCommand",
    "MetricIndex",
    "MetricNames",
    "Runtime",
    "RuntimeDocs",
    "RuntimeName",
    "identify",
    "lookup",
    "named",
]

# The closed set of runtimes ramp names: the two servers it reads, its simulator, and anything else that
# serves the OpenAI API.
RuntimeName = Literal["vllm", "sglang", "ramp-sim", "openai-compatible"]
# In order of preference: a /metrics page with two runtimes' names (a proxy) reads as the first.
RUNTIMES: tuple[Runtime, ...] = (VLLM, SGLANG, SIM, GENERIC)
METRIC_RUNTIMES: tuple[Runtime, ...] = tuple(r for r in RUNTIMES if r.metrics is not None)
LAUNCHABLE: dict[RuntimeName, Runtime] = {r.name: r for r in RUNTIMES if r.launch is not None}
_BY_NAME: dict[str, Runtime] = {r.name: r for r in RUNTIMES}


def lookup(name: object) -> Runtime | None:
    """The runtime named ``name`` (any case), None for anything else (None, a name ramp does not know)."""
    return _BY_NAME.get(name.lower()) if isinstance(name, str) else None


def named(name: object) -> Runtime:
    """The runtime named ``name``, or the generic OpenAI-compatible one."""
    return lookup(name) or GENERIC


def identify(
    docs: RuntimeDocs, runtimes: Sequence[Runtime] = RUNTIMES
) -> tuple[RuntimeName | None, str | None]:
    """(runtime, version) of the server that answered ``docs``: the runtime that claims it on the earliest
    rung of ``EVIDENCE`` (``Runtime.identify``; on one rung, the first of ``runtimes``); a runtime whose info
    document names the runtime it imitates (``claim_key``) gives that name, when ramp knows it. (None, None)
    when nothing identifies the server."""
    claims = [
        (EVIDENCE.index(c[0]), at, c[1])
        for at, r in enumerate(runtimes)
        if (c := r.identify(docs)) is not None
    ]
    if not claims:
        return None, None
    _, at, version = min(claims)
    runtime = runtimes[at]
    if runtime.claim_key is not None:
        runtime = lookup(docs.info[runtime.name].get(runtime.claim_key)) or runtime
    return runtime.name, version

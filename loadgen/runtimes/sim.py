"""ramp's simulator (``loadgen.sim``): how it is recognised, and the cache resets it serves.

It answers ``/_sim/info`` (its conditions, taken as they are by ``loadgen.telemetry.discover``), imitates
vLLM's API and ``/metrics`` names (so its scrape reads as vLLM's) and serves both runtimes' cache resets.
"""

from __future__ import annotations

from loadgen.runtimes.base import Runtime
from loadgen.runtimes.sglang import FLUSH
from loadgen.runtimes.vllm import RESET

SIM = Runtime(
    name="ramp-sim",
    label="ramp's simulator",
    owned_by="ramp-sim",
    info_paths=("/_sim/info",),
    identified_by=("own_info",),  # it imitates a runtime: its own document comes before any other sign
    claim_key="runtime",
    cache_resets=(RESET, FLUSH),
)

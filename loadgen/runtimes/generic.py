"""Any other server that serves the OpenAI API (``/v1/models``): nothing known about it beyond that.

A runtime ramp cannot name is asked every known cache reset in turn (vLLM's, then SGLang's when the first
is absent); its KV capacity, if any, comes from ``--tag``.
"""

from __future__ import annotations

from loadgen.runtimes.base import Runtime
from loadgen.runtimes.sglang import FLUSH
from loadgen.runtimes.vllm import RESET

GENERIC = Runtime(
    name="openai-compatible",
    label="an OpenAI-compatible server",
    cache_resets=(RESET, FLUSH),
    identified_by=("models",),  # anything else that serves /v1/models
)

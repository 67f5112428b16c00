"""The workload: turns a ``Profile`` into a stream of ``RequestSpec`` — synthetic prompts of the asked token
lengths (``synthetic``: shared or unique prefixes, multi-turn sessions with a growing history), or a
replayed dataset, trace or request file (``replay``).

The package: ``text`` (the vocabulary and the seeded text pool prompts are sliced from), ``sizing`` (words
per token and the template's overhead, fitted to the server's ``/tokenize``), ``synthetic`` (``Workload``
and its ``Session``), ``replay`` (sessions from a ``loadgen.sources.Source``).
"""

from __future__ import annotations

from loadgen.workload.replay import DialogSession, OneShot, Replay, RequestSession
from loadgen.workload.sizing import (
    CALIBRATION_PASSES,
    FALLBACK_OVERHEAD,
    FALLBACK_WORDS_PER_TOKEN,
    TRANSCRIPT_LABEL_TOKENS,
    PromptSizer,
    as_api,
    calibrate_sizer,
)
from loadgen.workload.synthetic import Session, Workload
from loadgen.workload.text import FRESH_WORDS, POOL_WORDS, VOCABULARY, TextPool, stable_offset, text_pool

__all__ = [
    "CALIBRATION_PASSES",
    "FALLBACK_OVERHEAD",
    "FALLBACK_WORDS_PER_TOKEN",
    "FRESH_WORDS",
    "POOL_WORDS",
    "TRANSCRIPT_LABEL_TOKENS",
    "VOCABULARY",
    "DialogSession",
    "OneShot",
    "PromptSizer",
    "Replay",
    "RequestSession",
    "Session",
    "TextPool",
    "Workload",
    "as_api",
    "calibrate_sizer",
    "stable_offset",
    "text_pool",
]

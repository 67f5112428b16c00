"""Workload profiles: the TOML schema (below), its validation (``load``) and the typed ``Profile`` (``model``).

A profile is read and validated once, at the edge; everything after that works on frozen, picklable
dataclasses. Any problem in the file becomes a ``ProfileError`` whose ``str`` is one line naming the file,
the line, the key and what to do, e.g.::

    profiles/x.toml:12: [[bucket]] #2 "long" key 'input': expected a positive integer or a distribution table, got "abc"

Schema (every key below is the complete list; any other key is an error)::

    name = "chat"                      # optional, default: the file name without .toml
    description = "..."                # optional

    [target]
    api = "chat"                       # "chat" (/v1/chat/completions) | "completions" (/v1/completions)
                                       #   | "responses" (/v1/responses, the OpenAI Responses API)
    model = "auto"                     # "auto" = discover from /v1/models, or a served model name
    prefix_role = "system"             # chat: the shared prefix is a system message, or "user": it opens the
                                       #   first user message (for chat templates without a system role)

    [[prefix_group]]                   # zero or more
    name = "docs"
    prefix_tokens = 2048               # length of each shared prefix
    count = 4                          # distinct prefixes in the group (a hit request picks one at random)

    [[bucket]]                         # one or more; each session/request draws one bucket by weight
    name = "short"                     # optional, default "bucket<N>"; unique
    weight = 1.0                       # >= 0, default 1; the weights must not all be 0
    input = 512                        # prompt tokens beyond the shared prefix (and, in sessions, beyond the
                                       #   history): a distribution (see loadgen.distributions)
    output = { min = 128, max = 512 }  # max_tokens: a distribution
    prefix_group = "docs"              # optional: a [[prefix_group]] name
    cache = "hit"                      # optional, needs prefix_group, default "hit": "hit" reuses one of the
                                       #   group's prefixes; "miss" sends a unique prefix of the same length

    [session]                          # optional: multi-turn sessions (the history is resent each turn)
    turns = { min = 3, max = 8 }       # turns per session: a distribution (>= 1)
    think_time_s = { median = 2.0, sigma = 0.5 }   # pause before each next turn: a distribution (>= 0)
    max_context_tokens = 32768         # optional: end the session before a turn would exceed this

    [sampling]                         # optional; sent in the request body
    temperature = 0.7
    top_p = 0.95
    ignore_eos = true                  # vLLM / SGLang extension: generate exactly max_tokens
    stop = ["\\n\\n"]                  # a string or a list of strings

    [slo]                              # optional; maps 1:1 to loadgen.config.SLO
    ttft_p95_ms = 1000
    ttft_p99_ms = 2000
    decode_p50_tok_s = 20              # at least
    itl_p99_ms = 150
    e2e_p95_s = 30
    max_error_rate = 0.01              # 0..1
    quality_agree_min = 0.95           # 0..1, at least: the answer probes' agreement ([quality])

    [quality]                          # optional, or --quality: answer probes (loadgen.profile.quality)
    share = 0.05                       # of each worker's sessions; probes, max_tokens, seed
    tasks = false                      # or --quality-tasks: verifiable tasks too (loadgen.analysis.tasks)

    [ramp]                             # optional; maps to loadgen.config.RampPlan (mode included)
    mode = "closed"                    # "closed" (levels = concurrency) | "open" (levels = req/s)
    levels = [1, 2, 4, 8]              # either explicit levels ...
    start = 1                          # ... or start/stop with factor (geometric) and/or step (linear):
    stop = 256                         #   next = max(level * factor, level + step), up to stop inclusive
                                       #   (closed: rounded half up, at least +1)
    factor = 2.0
    step = 4
    step_seconds = 30                  # default 30
    warmup_seconds = 5                 # default 5, < step_seconds
    early_stop = true                  # default false: stop at the first step that breaks the SLO
    precision = 5                      # optional, or --precision: a step ends once its figures are ±5 %

    [pricing]                          # optional
    usd_per_1m_input = 0.2
    usd_per_1m_output = 0.6
    usd_per_1m_cache_read = 0.05
    gpu_usd_per_hour = 3.5             # or price the hardware: cost per 1M output tokens from throughput
    gpus = 1

    [tools]                            # optional (chat, responses): function tools sent with every request
    choice = "auto"                    #   tool_choice: "auto" | "none" | "required" | a function's name
    result = '{"ok": true}'            #   a session answers each tool call with this (role "tool")
    max_rounds = 3                     #   tool rounds in a row a session answers (loadgen.profile.tools)
    [[tools.function]]                 #   one or more: name, description, parameters (JSON Schema)
    name = "get_weather"
    parameters = { type = "object", properties = { city = { type = "string" } } }

    [dataset]                          # optional: replay a dataset instead of the buckets' prompts
    path = "conversations.jsonl"       #   (keys: loadgen.profile.source; formats: loadgen.sources.dataset)
    [trace]                            # optional: replay a timestamped trace (loadgen.sources.trace)
    path = "mooncake.jsonl"

The package: ``model`` (the frozen records and ``ProfileError``), ``load`` (finding, decoding and validating
a file), ``fields`` (typed getters and the key-line locator), ``ramp`` (the ``[ramp]`` table), ``source``
(the ``[dataset]`` and ``[trace]`` tables). Built-in profiles live in ``profiles/*.toml``, installed as the
package ``loadgen.builtin_profiles``.
"""

from __future__ import annotations

from loadgen.profile.context import (
    ContextFit,
    ContextSpread,
    context_overflow,
    context_spread,
    largest_ask,
    largest_tokens,
)
from loadgen.profile.load import (
    builtin_profile_names,
    builtin_profile_path,
    builtin_profile_text,
    load_profile,
    parse_profile,
)
from loadgen.profile.model import (
    APIS,
    CACHE_CLASSES,
    MAX_RAMP_LEVELS,
    PREFIX_ROLES,
    RAMP_MODES,
    Bucket,
    CacheClass,
    PrefixGroup,
    PrefixRole,
    Pricing,
    Profile,
    ProfileError,
    Quality,
    Sampling,
    SessionSpec,
    ToolFunction,
    Tools,
)

__all__ = [
    "APIS",
    "CACHE_CLASSES",
    "MAX_RAMP_LEVELS",
    "PREFIX_ROLES",
    "RAMP_MODES",
    "Bucket",
    "CacheClass",
    "ContextFit",
    "ContextSpread",
    "PrefixGroup",
    "PrefixRole",
    "Pricing",
    "Profile",
    "ProfileError",
    "Sampling",
    "SessionSpec",
    "ToolFunction",
    "Tools",
    "Quality",
    "builtin_profile_names",
    "builtin_profile_path",
    "builtin_profile_text",
    "context_overflow",
    "context_spread",
    "largest_ask",
    "largest_tokens",
    "load_profile",
    "parse_profile",
]

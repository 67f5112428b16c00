"""The typed profile: the frozen, picklable records a validated profile becomes (``Profile`` and its parts)
and ``ProfileError``.

Everything after ``loadgen.profile.load`` works on these; workers receive a ``Profile`` pickled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal, get_args

from loadgen.config import APIS, MODES, SLO, Api, RampPlan
from loadgen.distributions import Distribution
from loadgen.sources import Source

CacheClass = Literal["hit", "miss"]
PrefixRole = Literal["system", "user"]
CACHE_CLASSES: tuple[CacheClass, ...] = get_args(CacheClass)
PREFIX_ROLES: tuple[PrefixRole, ...] = get_args(PrefixRole)
RAMP_MODES = MODES
MAX_RAMP_LEVELS = 1000

__all__ = [
    "APIS",
    "CACHE_CLASSES",
    "MAX_RAMP_LEVELS",
    "PREFIX_ROLES",
    "RAMP_MODES",
    "Bucket",
    "CacheClass",
    "Pricing",
    "PrefixGroup",
    "PrefixRole",
    "Profile",
    "ProfileError",
    "Sampling",
    "SessionSpec",
    "ToolFunction",
    "Tools",
]


class ProfileError(Exception):
    """A profile that cannot be used. ``str(err)`` is one line: ``file:line: where key 'k': what to do``."""

    def __init__(
        self, message: str, *, path: str = "", line: int | None = None, key: str | None = None
    ) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.key = key


@dataclass(frozen=True, slots=True)
class PrefixGroup:
    name: str
    prefix_tokens: int
    count: int = 1


@dataclass(frozen=True, slots=True)
class Bucket:
    name: str
    weight: float
    input: Distribution  # prompt tokens beyond the prefix (and the session history)
    output: Distribution  # max_tokens
    prefix_group: str | None = None
    cache: CacheClass | None = None  # None: no prefix group

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "weight": self.weight,
            "input": self.input.to_dict(),
            "output": self.output.to_dict(),
            "prefix_group": self.prefix_group,
            "cache": self.cache,
        }


@dataclass(frozen=True, slots=True)
class SessionSpec:
    turns: Distribution
    think_time_s: Distribution
    max_context_tokens: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "turns": self.turns.to_dict(),
            "think_time_s": self.think_time_s.to_dict(),
            "max_context_tokens": self.max_context_tokens,
        }


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float | None = None
    top_p: float | None = None
    ignore_eos: bool | None = None
    stop: tuple[str, ...] = ()

    def extra_body(self) -> tuple[tuple[str, object], ...]:
        """Pairs merged into the request JSON (``RequestSpec.extra_body``); unset keys are left out."""
        pairs: list[tuple[str, object]] = []
        if self.temperature is not None:
            pairs.append(("temperature", self.temperature))
        if self.top_p is not None:
            pairs.append(("top_p", self.top_p))
        if self.ignore_eos is not None:
            pairs.append(("ignore_eos", self.ignore_eos))
        if self.stop:
            pairs.append(("stop", self.stop))
        return tuple(pairs)

    def to_dict(self) -> dict[str, object]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "ignore_eos": self.ignore_eos,
            "stop": list(self.stop),
        }


@dataclass(frozen=True, slots=True)
class ToolFunction:
    """One function tool a request offers the model: its name, description and JSON-Schema parameters
    (kept as JSON text, so the profile stays frozen and hashable)."""

    name: str
    description: str
    parameters_json: str

    def definition(self, api: Api) -> dict[str, object]:
        """The tool's definition in ``api``'s shape: chat nests the function, the Responses API is flat."""
        function: dict[str, object] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = json.loads(self.parameters_json)
        if api == "responses":
            return {"type": "function", **function}
        return {"type": "function", "function": function}


@dataclass(frozen=True, slots=True)
class Tools:
    """``[tools]``: function tools sent with every request, the ``tool_choice``, and how a multi-turn
    session answers a reply's tool calls (a canned ``result`` per call, at most ``max_rounds`` tool rounds
    in a row before it goes on to a new user turn)."""

    functions: tuple[ToolFunction, ...]
    choice: str = "auto"  # "auto" | "none" | "required" | one function's name
    result: str = '{"ok": true}'
    max_rounds: int = 3

    def extra_body(self, api: Api) -> tuple[tuple[str, object], ...]:
        """``tools`` and ``tool_choice`` for the request body, in ``api``'s shape."""
        choice: object = self.choice
        if self.choice not in TOOL_CHOICES:  # a function's name: force that one
            choice = (
                {"type": "function", "name": self.choice}
                if api == "responses"
                else {"type": "function", "function": {"name": self.choice}}
            )
        return (("tools", [f.definition(api) for f in self.functions]), ("tool_choice", choice))

    def to_dict(self) -> dict[str, object]:
        return {
            "functions": [
                {"name": f.name, "description": f.description, "parameters": json.loads(f.parameters_json)}
                for f in self.functions
            ],
            "choice": self.choice,
            "result": self.result,
            "max_rounds": self.max_rounds,
        }


TOOL_CHOICES = ("auto", "none", "required")


@dataclass(frozen=True, slots=True)
class Quality:
    """``[quality]`` (or ``--quality``): probe requests mixed into the load to check the answers under load
    (``loadgen.workload.probes``, ``loadgen.analysis.quality``): ``share`` of each user's requests are probes,
    drawn in turn from ``probes`` fixed prompts, sent at temperature 0 with ``seed``, ``max_tokens`` each; only
    a probe keeps its answer (``loadgen.metrics.recorder.PROBE_TEXT_LIMIT`` characters at most)."""

    share: float = 0.05
    probes: int = 8
    max_tokens: int = 32
    seed: int = 1234
    # answers loaded with --quality-reference (probe index, text); empty: level 1's answers are the reference
    reference: tuple[tuple[int, str], ...] = ()
    # the model that gave them: a run whose model is discovered from the server is checked against it then
    reference_model: str = ""
    # verifiable tasks (``tasks = true``, --quality-tasks): every other probe is a task a rule checks
    # (loadgen.analysis.tasks), its share passed the step's ``tasks_ok``
    tasks: bool = False

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "share": self.share, "probes": self.probes, "max_tokens": self.max_tokens, "seed": self.seed,
        }  # fmt: skip
        if self.tasks:
            out["tasks"] = True
        if self.reference:
            out["reference"] = {str(i): text for i, text in self.reference}
            out["reference_model"] = self.reference_model
        return out


@dataclass(frozen=True, slots=True)
class Pricing:
    usd_per_1m_input: float | None = None
    usd_per_1m_output: float | None = None
    usd_per_1m_cache_read: float | None = None
    gpu_usd_per_hour: float | None = None  # per GPU
    gpus: int = 1

    def cost_per_1m_output_tokens(self, out_tok_s: float) -> float | None:
        """Hardware cost of 1M output tokens at an aggregate throughput; None without a GPU-hour price."""
        if self.gpu_usd_per_hour is None or not out_tok_s or out_tok_s <= 0:
            return None
        usd_per_s = self.gpu_usd_per_hour * self.gpus / 3600.0
        return usd_per_s / out_tok_s * 1e6

    def cost_usd(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float | None:
        """Per-token price of a workload; cached input is billed at the cache-read price when one is set."""
        if self.usd_per_1m_input is None and self.usd_per_1m_output is None:
            return None
        in_price = self.usd_per_1m_input or 0.0
        cache_price = in_price if self.usd_per_1m_cache_read is None else self.usd_per_1m_cache_read
        uncached = max(0, input_tokens - cached_tokens)
        total = (
            uncached * in_price
            + cached_tokens * cache_price
            + output_tokens * (self.usd_per_1m_output or 0.0)
        )
        return total / 1e6

    def to_dict(self) -> dict[str, object]:
        return {
            "usd_per_1m_input": self.usd_per_1m_input,
            "usd_per_1m_output": self.usd_per_1m_output,
            "usd_per_1m_cache_read": self.usd_per_1m_cache_read,
            "gpu_usd_per_hour": self.gpu_usd_per_hour,
            "gpus": self.gpus,
        }


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    description: str
    source: str  # path of the file it was read from
    content_hash: str  # sha256 hex of the file's bytes: two records with the same hash ran the same workload
    api: Api
    model: str  # "auto" = discover
    buckets: tuple[Bucket, ...]
    prefix_groups: tuple[PrefixGroup, ...] = ()
    session: SessionSpec | None = None
    sampling: Sampling = field(default_factory=Sampling)
    slo: SLO = field(default_factory=SLO)
    ramp: RampPlan | None = None  # its mode says what the levels mean: concurrency or req/s
    pricing: Pricing | None = None
    prefix_role: PrefixRole = (
        "system"  # chat API: the prefix is a "system" message or opens the first "user" one
    )
    # A dataset, trace or request file replayed instead of the buckets' synthetic prompts ([dataset],
    # [trace], --dataset, --trace, --requests): loadgen.workload.replay. None: synthetic.
    replay: Source | None = None
    tools: Tools | None = None  # [tools]: function tools offered with each request (chat, responses)
    quality: Quality | None = None  # [quality] or --quality: answer probes in the load (None: off)

    def prefix_group(self, name: str) -> PrefixGroup:
        for group in self.prefix_groups:
            if group.name == name:
                return group
        raise KeyError(name)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description for run records."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "content_hash": self.content_hash,
            "api": self.api,
            "model": self.model,
            "prefix_role": self.prefix_role,
            "buckets": [b.to_dict() for b in self.buckets],
            "prefix_groups": [
                {"name": g.name, "prefix_tokens": g.prefix_tokens, "count": g.count}
                for g in self.prefix_groups
            ],
            "session": None if self.session is None else self.session.to_dict(),
            "sampling": self.sampling.to_dict(),
            "slo": self.slo.as_dict(),
            "ramp": None if self.ramp is None else self.ramp.as_dict(),
            "pricing": None if self.pricing is None else self.pricing.to_dict(),
            **({} if self.replay is None else {"replay": self.replay.to_dict()}),
            **({} if self.tools is None else {"tools": self.tools.to_dict()}),
            **({} if self.quality is None else {"quality": self.quality.to_dict()}),
        }

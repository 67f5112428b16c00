"""A request as the engine sees it (``Seq``), what one engine step hands back (``Step`` of ``Emit`` s), the
``Engine`` protocol both engines follow, and how many tokens a request will produce.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Protocol

from .params import EngineParams
from .stats import EngineStats


class Seq:
    """One request inside the engine. ``stream`` is an opaque handle for whoever consumes the emits."""

    __slots__ = (
        "rid", "arrival_ns", "prompt_len", "block_hashes", "max_tokens", "target_out", "out", "computed",
        "num_blocks", "held_hashes", "admitted_ns", "first_token_ns", "last_token_ns", "cached_tokens",
        "preemptions", "finish_reason", "state", "due_ns", "stream",
    )  # fmt: skip

    def __init__(
        self,
        rid: int,
        arrival_ns: int,
        prompt_len: int,
        max_tokens: int,
        target_out: int | None = None,
        block_hashes: tuple[int, ...] = (),
        stream: object = None,
    ) -> None:
        self.rid = rid
        self.arrival_ns = arrival_ns
        self.prompt_len = prompt_len
        self.block_hashes = block_hashes
        self.max_tokens = max_tokens
        self.target_out = max_tokens if target_out is None else max(0, min(target_out, max_tokens))
        self.out = 0
        self.computed = 0
        self.num_blocks = 0
        self.held_hashes: list[int] = []
        self.admitted_ns: int | None = None
        self.first_token_ns: int | None = None
        self.last_token_ns: int | None = None
        self.cached_tokens: int | None = None
        self.preemptions = 0
        self.finish_reason: str | None = None
        self.state = "new"  # new | waiting | running | finished | aborted
        self.due_ns = 0
        self.stream = stream


@dataclass(frozen=True, slots=True)
class Emit:
    seq: Seq
    tokens: int
    finished: bool


@dataclass(frozen=True, slots=True)
class Step:
    start_ns: int
    end_ns: int
    emits: list[Emit]
    decode_seqs: int = 0
    prefill_tokens: int = 0


class Engine(Protocol):
    params: EngineParams
    stats: EngineStats

    def add(self, seq: Seq) -> None: ...
    def abort(self, seq: Seq) -> None: ...
    def has_work(self) -> bool: ...
    def step(self, start_ns: int) -> Step: ...
    @property
    def num_running(self) -> int: ...
    @property
    def num_waiting(self) -> int: ...
    def kv_usage(self) -> float: ...
    def kv_used_tokens(self) -> int: ...
    def reset_prefix_cache(self) -> int: ...


def sample_output_len(rng: random.Random, params: EngineParams, max_tokens: int, ignore_eos: bool) -> int:
    """How many tokens a request will produce: ``max_tokens`` with ignore_eos, else an EOS may come first."""
    if ignore_eos or params.eos_prob <= 0 or max_tokens <= params.min_output_tokens:
        return max_tokens
    extra = int(math.log(1.0 - rng.random()) / math.log(1.0 - params.eos_prob))
    return min(max_tokens, params.min_output_tokens + extra)


def finish_reason(seq: Seq) -> str:
    return "length" if seq.out >= seq.max_tokens else "stop"

"""Whether a profile's requests fit a server's context (``max_model_len``): the largest prompt + max_tokens
the profile can ask, from its distributions' own maxima (a rare overflow is found, not missed by a few
thousand draws), and the share of requests over the limit, estimated by drawing requests the way the
workload does (sessions turn by turn, their history growing).

The counts are the workload's targets: the sizer fits each prompt's words to its target, so the real
prompt is the target give or take the tokenizer's rounding (``--fit-context`` keeps a margin for that).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from loadgen.distributions import Distribution, Empirical, Fixed, LogNormal, Normal, Uniform, sample_tokens
from loadgen.profile.model import Profile

__all__ = [
    "ContextFit",
    "ContextSpread",
    "context_overflow",
    "context_spread",
    "largest_ask",
    "largest_tokens",
]


@dataclass(frozen=True, slots=True)
class ContextFit:
    """A profile that can ask for more than ``limit`` tokens: how much at most and how often."""

    limit: int  # the server's max_model_len
    largest: int  # the largest prompt + max_tokens the profile can ask (the largest drawn when unbounded)
    share: float  # share of requests over ``limit`` among ``draws`` drawn (0: rarer than 1 in ``draws``)
    draws: int
    bounded: bool = True  # False: a distribution without a max, ``largest`` is only the largest drawn


def largest_tokens(dist: Distribution) -> int | None:
    """The largest token count ``dist`` can give (as ``sample_tokens`` rounds it); None when unbounded."""
    if isinstance(dist, Fixed):
        top: float | None = dist.value
    elif isinstance(dist, Uniform):
        top = dist.max
    elif isinstance(dist, Normal | LogNormal):
        top = dist.max
    elif isinstance(dist, Empirical):
        top = max(dist.values)
    else:
        top = None
    return None if top is None else max(1, int(round(top)))


def largest_ask(profile: Profile, turn_overhead: int = 0) -> int | None:
    """The largest prompt + max_tokens any request of ``profile`` can ask; None when unbounded.

    A session's first turn asks prefix + input + output; a later one resends the history (each turn adds
    its input, its reply and ``turn_overhead`` template tokens), and never more than ``max_context_tokens``
    (the workload ends the session before such a turn).
    """
    prefixes = {g.name: g.prefix_tokens for g in profile.prefix_groups}
    session = profile.session
    turns = 1 if session is None else largest_tokens(session.turns)
    limit = None if session is None else session.max_context_tokens
    largest = 0
    for bucket in profile.buckets:  # a session keeps the bucket it drew for all its turns
        new, out = largest_tokens(bucket.input), largest_tokens(bucket.output)
        if new is None or out is None:
            return None
        first = prefixes.get(bucket.prefix_group or "", 0) + new + out
        if turns is None:  # no most turns: only max_context_tokens bounds the history
            grown = None if limit is None else max(first, limit)
        else:
            grown = first + (turns - 1) * (new + out + turn_overhead)
            if limit is not None:
                grown = max(first, min(grown, limit))
        if grown is None:
            return None
        largest = max(largest, grown)
    return largest


def _asks(profile: Profile, rng: random.Random, turn_overhead: int) -> Iterator[int]:
    """Prompt + max_tokens of one request after the other, drawn as the workload draws them."""
    prefixes = {g.name: g.prefix_tokens for g in profile.prefix_groups}
    weights = [b.weight for b in profile.buckets]
    session = profile.session
    while True:
        bucket = rng.choices(profile.buckets, weights=weights)[0]
        prefix = prefixes.get(bucket.prefix_group or "", 0)
        if session is None:
            yield prefix + sample_tokens(bucket.input, rng) + sample_tokens(bucket.output, rng)
            continue
        context = prefix
        for turn in range(sample_tokens(session.turns, rng)):
            ask = context + sample_tokens(bucket.input, rng) + sample_tokens(bucket.output, rng)
            limit = session.max_context_tokens
            if turn > 0 and limit is not None and ask > limit:
                break
            yield ask
            context = ask + turn_overhead


def context_overflow(
    profile: Profile, max_model_len: int, turn_overhead: int = 0, draws: int = 20_000, seed: int = 0
) -> ContextFit | None:
    """How ``profile``'s requests overflow ``max_model_len`` (a server rejects them, vLLM with HTTP 400);
    None when none can. ``turn_overhead``: the template tokens each session turn adds (the sizer's)."""
    if max_model_len <= 0 or not profile.buckets:
        return None
    largest = largest_ask(profile, turn_overhead)
    if largest is not None and largest <= max_model_len:
        return None
    asks = _asks(profile, random.Random(seed), turn_overhead)
    over = seen = 0
    for _ in range(draws):
        ask = next(asks)
        seen = max(seen, ask)
        over += ask > max_model_len
    if largest is None and not over:
        return None  # unbounded, but nothing drawn overflows: no evidence of a problem
    return ContextFit(
        limit=max_model_len,
        largest=seen if largest is None else largest,
        share=over / draws,
        draws=draws,
        bounded=largest is not None,
    )


@dataclass(frozen=True, slots=True)
class ContextSpread:
    """How much context (prompt + max_tokens, a session's history included) the profile's requests hold:
    the mean and the 95th percentile over ``draws`` requests drawn as the workload draws them."""

    mean: float
    p95: int
    draws: int


def context_spread(
    profile: Profile, turn_overhead: int = 0, draws: int = 20_000, seed: int = 0
) -> ContextSpread | None:
    """Mean and p95 context of ``profile``'s requests (None without buckets): what one sequence holds in a
    server's KV cache at its end, so the cache's capacity in tokens reads as concurrent sequences."""
    if not profile.buckets or draws <= 0:
        return None
    asks = _asks(profile, random.Random(seed), turn_overhead)
    drawn = sorted(next(asks) for _ in range(draws))
    rank = max(0, min(draws - 1, math.ceil(0.95 * draws) - 1))  # nearest rank, as the HDR percentiles are
    return ContextSpread(mean=sum(drawn) / draws, p95=drawn[rank], draws=draws)

"""KV headroom: the server's KV cache, read from its cache config, as concurrent sequences of this profile.

vLLM publishes ``vllm:cache_config_info`` (labels ``num_gpu_blocks``, ``block_size``, in 0.32 also
``kv_cache_size_tokens``); SGLang publishes ``sglang:max_total_num_tokens`` and answers it in
``/get_server_info``. Either lands in the run's conditions (``window.conditions``); here it becomes a
capacity in tokens and, with the profile's context (prompt + output, ``loadgen.profile.context_spread``),
in sequences: a sequence holds whole blocks, so at ``C`` tokens of context it takes ``ceil(C / block_size)``
of the ``num_gpu_blocks``. Past that many sequences a server queues new requests or preempts running ones.

The figure is per engine (a vLLM data-parallel deployment publishes one cache config per engine) and an
upper bound for a profile whose requests share a cached prefix (shared blocks are held once).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from loadgen.format import fmt_count, fmt_si
from loadgen.runtimes import named
from loadgen.snapshot import KVHeadroom

__all__ = ["capacity", "headroom", "headroom_record", "level_warning", "plan_warning"]


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = int(float(str(value)))
    except ValueError:
        return None
    return number if number > 0 else None


def capacity(conditions: Mapping[str, object | None]) -> KVHeadroom | None:
    """The KV cache's capacity from the run's conditions; None when the server states none.

    ``num_gpu_blocks x block_size`` wins (the cache as vLLM allocated it); else ``kv_cache_tokens``
    (vLLM's ``kv_cache_size_tokens`` label, SGLang's ``max_total_num_tokens``, or ``--tag``)."""
    blocks = _positive_int(conditions.get("num_gpu_blocks"))
    block_size = _positive_int(conditions.get("block_size"))
    if blocks is not None and block_size is not None:
        return KVHeadroom(blocks * block_size, "num_gpu_blocks x block_size", block_size, blocks)
    tokens = _positive_int(conditions.get("kv_cache_tokens"))
    if tokens is None:
        return None
    source = named(conditions.get("runtime")).kv_capacity_key
    blocks = tokens // block_size if block_size is not None else None
    return KVHeadroom(tokens, source, block_size, blocks)


def sequences(cap: KVHeadroom, context: float) -> int | None:
    """How many sequences of ``context`` tokens the cache holds at once (whole blocks each)."""
    if context <= 0:
        return None
    if cap.block_size is not None and cap.num_blocks is not None:
        return cap.num_blocks // max(1, math.ceil(context / cap.block_size))
    return int(cap.capacity_tokens // math.ceil(context))


def headroom(
    cap: KVHeadroom | None, context_mean: float | None, context_p95: int | None
) -> KVHeadroom | None:
    """``cap`` with the profile's context and the sequences that fit at its mean and p95."""
    if cap is None:
        return None
    return KVHeadroom(
        capacity_tokens=cap.capacity_tokens,
        source=cap.source,
        block_size=cap.block_size,
        num_blocks=cap.num_blocks,
        context_mean=context_mean,
        context_p95=context_p95,
        seqs_at_mean=sequences(cap, context_mean) if context_mean is not None else None,
        seqs_at_p95=sequences(cap, context_p95) if context_p95 is not None else None,
    )


def headroom_record(room: KVHeadroom | None) -> dict[str, object] | None:
    """The record header's ``kv_headroom``: every figure under its own name (None: not known)."""
    if room is None:
        return None
    return {
        "capacity_tokens": room.capacity_tokens,
        "source": room.source,
        "block_size": room.block_size,
        "num_gpu_blocks": room.num_blocks,
        "context_mean_tokens": None if room.context_mean is None else round(room.context_mean, 1),
        "context_p95_tokens": room.context_p95,
        "seqs_at_mean": room.seqs_at_mean,
        "seqs_at_p95": room.seqs_at_p95,
    }


def exceeds(room: KVHeadroom | None, level: int) -> bool:
    """Whether ``level`` concurrent requests are more than the cache holds at the profile's mean context."""
    return room is not None and room.seqs_at_mean is not None and level > room.seqs_at_mean


def level_warning(room: KVHeadroom | None, level: int) -> str | None:
    """The warning for a load of ``level`` concurrent requests, or None while it fits."""
    if room is None or room.context_mean is None or not exceeds(room, level):
        return None
    return (
        f"level {fmt_count(level)} is above ~{fmt_count(room.seqs_at_mean or 0)} sequences at this profile's "
        f"{fmt_si(room.context_mean)} context (KV cache {fmt_si(room.capacity_tokens)} tokens): "
        "expect queueing or preemption"
    )


def plan_warning(room: KVHeadroom | None, levels: Sequence[int]) -> str | None:
    """One warning, before the run, naming the planned levels the cache cannot hold; None when all fit."""
    over = [level for level in levels if exceeds(room, level)]
    if room is None or room.context_mean is None or not over:
        return None
    named = ", ".join(fmt_count(level) for level in sorted(set(over)))
    return (
        f"planned level{'s' if len(set(over)) > 1 else ''} {named} above ~{fmt_count(room.seqs_at_mean or 0)} "
        f"sequences at this profile's {fmt_si(room.context_mean)} context (KV cache "
        f"{fmt_si(room.capacity_tokens)} tokens, p95 context {fmt_si(room.context_p95)}: "
        f"~{fmt_count(room.seqs_at_p95 or 0)}): expect queueing or preemption there"
    )

"""Several replicas as one target, as the run sees them: their names and shown URLs, each one's figures
over a window (the workers' per-replica counters, ``loadgen.metrics.replicas``, with each replica's KV-cache
usage from its own telemetry), and what the record's header says about them.

How the streams are spread is the worker's (``loadgen.run.worker``: round robin by session); this module
only reads what they measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.metrics import Accumulator
from loadgen.metrics.replicas import replica_stats
from loadgen.snapshot import ReplicaStats
from loadgen.target.http import scrub
from loadgen.types import REPLICA_POLICY, Target, replica_name

__all__ = ["replica_figures", "replica_header", "replica_names", "shown_urls"]


def replica_names(target: Target) -> tuple[str, ...]:
    """A, B, ... for each replica; () for a target of one server."""
    return tuple(replica_name(i) for i in range(len(target.replicas))) if len(target.replicas) > 1 else ()


def shown_urls(target: Target) -> tuple[str, ...]:
    """Each replica's URL as it may be shown and saved: no credentials, no query."""
    return tuple(scrub(t.base_url) for t in target.replica_targets()) if replica_names(target) else ()


def replica_figures(
    target: Target, acc: Accumulator, duration_s: float, kv_usage: Sequence[float | None] = ()
) -> tuple[ReplicaStats, ...]:
    """Each replica's share of the window summed in ``acc``; () for a target of one server."""
    names = replica_names(target)
    if not names:
        return ()
    return replica_stats(names, shown_urls(target), acc.counters, acc.pct, duration_s, kv_usage)


def replica_header(target: Target) -> dict[str, object]:
    """The record header's keys: the replicas (name and URL) and how the streams were spread over them."""
    names = replica_names(target)
    if not names:
        return {}
    urls = shown_urls(target)
    return {
        "replicas": [{"name": n, "url": u} for n, u in zip(names, urls, strict=True)],
        "replica_policy": REPLICA_POLICY,
    }

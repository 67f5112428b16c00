"""Per-replica figures of a window when several replicas make one target (``--url A --url B``).

A worker counts each finished request under its replica's keys as well (a few counters and one TTFT
histogram per replica, ``ReplicaKeys``), so the interval deltas carry the breakdown at the cost of a
handful of dictionary updates per request; the controller reads ``ReplicaStats`` back from any window's
sums (``replica_stats``). The keys ride in the same counters and histograms as the overall figures, so
they merge, roll and subtract with them, and the TTFT histograms land in the record with the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from loadgen import measures
from loadgen.snapshot import Percentiles, ReplicaStats

__all__ = ["REPLICA_CLASS", "ReplicaKeys", "idle_replicas", "replica_stats"]

REPLICA_CLASS = "replica:"  # the class of a replica's TTFT histogram: ``ttft_ms|replica:A``


@dataclass(frozen=True, slots=True)
class ReplicaKeys:
    """The counter and histogram keys of one replica, built once (not per request)."""

    ok: str
    errors: str
    cancelled: str
    output_tokens: str
    ttft: str

    @classmethod
    def of(cls, name: str) -> ReplicaKeys:
        prefix = REPLICA_CLASS + name + ":"
        return cls(
            ok=prefix + "ok",
            errors=prefix + "errors",
            cancelled=prefix + "cancelled",
            output_tokens=prefix + "output_tokens",
            ttft=measures.TTFT_MS + "|" + REPLICA_CLASS + name,
        )


def replica_stats(
    names: Sequence[str],
    urls: Sequence[str],
    counters: Mapping[str, int],
    pct: Callable[[str], Percentiles],
    duration_s: float,
    kv_usage: Sequence[float | None] = (),
) -> tuple[ReplicaStats, ...]:
    """Each replica's figures over a window of ``duration_s`` from its sums (``counters``, ``pct`` of a
    histogram key); ``kv_usage``: each replica's KV-cache usage from its telemetry (None: n/a)."""
    out = []
    for at, name in enumerate(names):
        keys = ReplicaKeys.of(name)
        ok, errors = counters.get(keys.ok, 0), counters.get(keys.errors, 0)
        tokens = counters.get(keys.output_tokens, 0)
        ttft = pct(keys.ttft)
        out.append(
            ReplicaStats(
                name=name,
                url=urls[at] if at < len(urls) else "",
                requests=ok + errors,
                ok=ok,
                errors=errors,
                cancelled=counters.get(keys.cancelled, 0),
                output_tokens=tokens,
                out_tok_s=tokens / duration_s if duration_s > 0 else None,
                ttft_ms_p50=ttft.p50,
                ttft_ms_p95=ttft.p95,
                kv_usage=kv_usage[at] if at < len(kv_usage) else None,
            )
        )
    return tuple(out)


def idle_replicas(replicas: Sequence[ReplicaStats]) -> tuple[str, ...]:
    """What to say about each replica that served no request in the window (none succeeded):
    ``replica B served 0 requests (12 errors)``. Nothing with one replica (the step's own figures say it)."""
    if len(replicas) < 2:
        return ()
    return tuple(
        f"replica {r.name} served 0 requests" + (f" ({r.errors} errors)" if r.errors else "")
        for r in replicas
        if r.ok == 0
    )

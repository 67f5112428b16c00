"""The per-replica table of a run against several replicas as one target: each step's share of each
replica (requests, errors, output tok/s, TTFT p50/p95, KV-cache usage) and each replica that served
nothing, as the step lines say (``replicas``, ``idle_replicas``). Reads ``StepSummary``s only: the
headless face prints it after the step table, and any reader of a record can.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.format import fmt_count, fmt_ms, fmt_pct, fmt_si
from loadgen.snapshot import StepSummary
from loadgen.types import REPLICA_POLICY

__all__ = ["replica_table"]

HEADINGS = ("step", "replica", "url", "requests", "errors", "out tok/s", "TTFT p50", "TTFT p95", "KV")


def replica_table(steps: Sequence[StepSummary]) -> str:
    """The table (and a line per replica that served nothing in a step); "" when no step had replicas."""
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for step in steps:
        for r in step.replicas:
            rows.append(
                (
                    str(step.index + 1),
                    r.name,
                    r.url.removeprefix("http://"),
                    fmt_count(r.requests),
                    fmt_count(r.errors),
                    fmt_si(r.out_tok_s) if r.out_tok_s is not None else "n/a",
                    fmt_ms(r.ttft_ms_p50),
                    fmt_ms(r.ttft_ms_p95),
                    fmt_pct(r.kv_usage) if r.kv_usage is not None else "n/a",
                )
            )
        notes.extend(f"step {step.index + 1}: {note}" for note in step.idle_replicas)
    if not rows:
        return ""
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(HEADINGS)]
    left = {1, 2}  # names and URLs read from the left; numbers line up on the right

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [f"replicas ({REPLICA_POLICY}):", line(HEADINGS), *(line(row) for row in rows)]
    out.extend(f"warning: {note}" for note in notes)
    return "\n".join(out)

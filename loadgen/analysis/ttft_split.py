"""The TTFT split: a step's client TTFT beside the server's own TTFT, queue time and prefill time, and the
rest, "outside the server" (network, proxy, HTTP, the client).

The server's parts come from its /metrics histograms differenced over the step's window
(``loadgen.telemetry.window.ttft_histograms``; vLLM: ``vllm:time_to_first_token_seconds``,
``vllm:request_queue_time_seconds``, ``vllm:request_prefill_time_seconds``; SGLang: TTFT and queue time,
no prefill histogram under a plain name). A mean is exact (the histogram's sum over its count); a
percentile is interpolated inside the server's bucket and no finer than it: each one comes with the
bucket's bounds. "Outside" is the client's mean TTFT minus the server's: both exact, so the difference is
too, up to the window's edges (a scrape's time). vLLM observes queue and prefill time when a request
finishes, TTFT when its first token leaves: over a window the parts may count different requests, so
each part says its ``n``. Pure arithmetic: the engine calls ``ttft_split`` when a step closes;
``split_line`` is its one sentence, the same in the step detail (``d``) and the Markdown and HTML reports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from loadgen.format import fmt_ms
from loadgen.snapshot import Percentiles
from loadgen.telemetry.reading import CumulativeHistogram, well_formed

JsonValue = float | int | str | list[float | None] | None
Part = dict[str, JsonValue]

METHOD = (
    "server parts from its /metrics histograms over the step's window: means exact (sum/count), "
    "percentiles interpolated inside the server's buckets (the bucket's bounds given); "
    "outside = client mean TTFT - server mean TTFT"
)
PARTS = ("server", "queue", "prefill")
# what a report's list of split lines is headed with
SPLIT_HEADING = (
    "TTFT split (the client's TTFT beside the server's own: means exact, percentiles to its buckets)"
)


def bucket_of(hist: CumulativeHistogram, q: float) -> tuple[float, float] | None:
    """The bounds (seconds) of the bucket the ``q`` quantile falls in: the percentile's resolution. The +Inf
    bucket answers (highest finite bound, inf)."""
    total = hist.count
    if total <= 0:
        return None
    rank = q * total
    for i, (upper, cum) in enumerate(zip(hist.bounds, hist.counts, strict=True)):
        if cum >= rank and cum > 0:
            lower = hist.bounds[i - 1] if i > 0 else 0.0
            return lower, upper
    return None


def _ms(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else round(v * 1000.0, 3)


def part(hist: CumulativeHistogram) -> Part | None:
    """One server part's figures in ms: ``n``, ``mean_ms`` (exact), ``p50_ms`` / ``p95_ms`` and the bucket
    each lies in (``p50_bucket_ms``: [lower, upper], upper ``None`` for +Inf); None with no observation, or
    for a histogram that is not one (``well_formed``)."""
    if hist.count <= 0 or not well_formed(hist):
        return None
    out: Part = {"n": int(hist.count), "mean_ms": _ms(hist.sum / hist.count)}
    for name, q in (("p50", 0.50), ("p95", 0.95)):
        out[f"{name}_ms"] = _ms(hist.quantile(q))
        bounds = bucket_of(hist, q)
        if bounds is not None:
            lo, hi = bounds
            out[f"{name}_bucket_ms"] = [_ms(lo) or 0.0, None if math.isinf(hi) else _ms(hi)]
    return out


def ttft_split(client: Percentiles, server: Mapping[str, CumulativeHistogram]) -> dict[str, object]:
    """The step line's ``ttft_split``: ``client`` (its TTFT in ms: n, mean, p50, p95), the server's parts
    that it exports (``server``, ``queue``, ``prefill``), ``outside`` and ``method``; empty when the server
    exports no TTFT histogram or saw no request in the window (nothing to split)."""
    parts = {name: p for name in PARTS if name in server and (p := part(server[name])) is not None}
    if "server" not in parts:
        return {}
    out: dict[str, object] = {
        "client": {"n": client.count, "mean_ms": client.mean, "p50_ms": client.p50, "p95_ms": client.p95}
    }
    out.update(parts)
    server_mean = parts["server"]["mean_ms"]
    outside: Part = {}
    if client.mean is not None and isinstance(server_mean, float):
        outside["mean_ms"] = round(client.mean - server_mean, 3)
    p50_bucket = parts["server"].get("p50_bucket_ms")
    if client.p50 is not None and isinstance(p50_bucket, list):
        lo, hi = p50_bucket
        if lo is not None and hi is not None:
            # a difference of medians, not the median of differences: its range from the server's bucket
            outside["p50_range_ms"] = [round(client.p50 - hi, 3), round(client.p50 - lo, 3)]
    if outside:
        out["outside"] = outside
    if "queue" in parts and "prefill" in parts:
        q_mean, p_mean = parts["queue"]["mean_ms"], parts["prefill"]["mean_ms"]
        if isinstance(q_mean, float) and isinstance(p_mean, float) and isinstance(server_mean, float):
            # queue + prefill against the server's TTFT: what the server's own parts leave unexplained
            out["server_rest_mean_ms"] = round(server_mean - q_mean - p_mean, 3)
    out["method"] = METHOD
    return out


def outside_share(split: Mapping[str, object]) -> float | None:
    """The share of the client's mean TTFT spent outside the server (0..1), None where not known."""
    client, outside = split.get("client"), split.get("outside")
    if not isinstance(client, Mapping) or not isinstance(outside, Mapping):
        return None
    total, rest = client.get("mean_ms"), outside.get("mean_ms")
    if not isinstance(total, (int, float)) or not isinstance(rest, (int, float)) or total <= 0:
        return None
    return max(0.0, min(1.0, rest / total))


def _mean(split: Mapping[str, object], part: str) -> float | None:
    found = split.get(part)
    value = found.get("mean_ms") if isinstance(found, Mapping) else None
    return float(value) if isinstance(value, (int, float)) else None


def split_line(split: Mapping[str, object]) -> str:
    """The split in one sentence, as the console's step detail and the reports say it: 'client 299 ms =
    server 296 ms (queue 288 ms + prefill 7.06 ms) + outside 3.00 ms · means, exact; server TTFT p95 in its
    bucket 250 ms–500 ms' (the bucket: the percentile's resolution, the server's own bounds)."""
    inner = [
        f"{name} {fmt_ms(_mean(split, name))}"
        for name in ("queue", "prefill")
        if _mean(split, name) is not None
    ]
    server = f"server {fmt_ms(_mean(split, 'server'))}" + (f" ({' + '.join(inner)})" if inner else "")
    said = f"client {fmt_ms(_mean(split, 'client'))} = {server} + outside {fmt_ms(_mean(split, 'outside'))}"
    said += " · means, exact"
    found = split.get("server")
    bucket = found.get("p95_bucket_ms") if isinstance(found, Mapping) else None
    if isinstance(bucket, list) and len(bucket) == 2 and isinstance(bucket[0], (int, float)):
        lo, hi = bucket
        top = "∞" if not isinstance(hi, (int, float)) else fmt_ms(float(hi))
        said += f"; server TTFT p95 in its bucket {fmt_ms(float(lo))}–{top}"
    return said

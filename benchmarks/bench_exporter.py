"""What ``--metrics-port`` costs: CPU per scrape, per snapshot handed to the exporter, and the fixed-bucket
counts of the run window's histograms each snapshot then carries (``Accumulator.with_buckets``; none
without the exporter) — and from them the added CPU per 1M output tokens at a given throughput and scrape
interval. None of it is on the hot path: it is the controller's and the exporter thread's.

Run: ``python benchmarks/bench_exporter.py [--requests 20000] [--tok-s 10000] [--scrape-s 1,15] [--hz 4]``

The snapshot is realistic: its three windows' histograms hold ``--requests`` requests' TTFT, ITL, e2e and
decode values drawn from LLM-like distributions through the real ``Accumulator``, with a class split and two
replicas, and each scrape is ``generate_latest`` of the exporter's real registry. CPU is
``time.process_time()``, so the numbers hold on a busy machine. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# after the path, for a checkout without install
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from loadgen.metrics.hdr import DenseHistogram  # noqa: E402
from loadgen.metrics.recorder import IntervalDelta  # noqa: E402
from loadgen.metrics.windows import Accumulator  # noqa: E402
from loadgen.observe.exporter import SnapshotCollector  # noqa: E402
from loadgen.snapshot import ClientHealth, ReplicaStats, Snapshot  # noqa: E402


def accumulator(requests: int, seed: int = 1) -> Accumulator:
    """``requests`` requests' values (raw HDR units: µs, centi-tok/s) in one Accumulator."""
    rng = np.random.default_rng(seed)
    values = {
        "ttft_ms": rng.lognormal(np.log(180_000), 0.6, requests),
        "itl_ms": rng.lognormal(np.log(12_000), 0.4, requests * 20),
        "e2e_ms": rng.lognormal(np.log(4_000_000), 0.5, requests),
        "decode_tok_s": rng.lognormal(np.log(8_000), 0.3, requests),
    }
    hists = {}
    for key, raw in values.items():
        hist = DenseHistogram(key)
        idx, counts = np.unique(np.clip(raw.astype(np.int64), 1, None), return_counts=True)
        for value, count in zip(idx.tolist(), counts.tolist(), strict=True):
            hist.hdr.record_value(value, count)
        where = np.flatnonzero(hist.counts)
        hists[key] = (where, hist.counts[where])
    acc = Accumulator()
    acc.add(IntervalDelta(0, 1, 0, {"ok": requests, "output_tokens": requests * 256}, hists))
    return acc


def snapshot(acc: Accumulator) -> Snapshot:
    stats = acc.stats("run", 60.0)
    windows = {w: dataclasses.replace(stats, window=w) for w in ("step", "rolling")}
    windows["run"] = acc.with_buckets(stats)  # as SnapshotBuilder does with --metrics-port
    return Snapshot(
        seq=1, elapsed_s=60.0, state="running", url="http://127.0.0.1:8000/v1", model="m", runtime="vllm",
        runtime_version="0.32", profile="chat", mode="closed", level=64, rate_rps=None, achieved_rps=None,
        arrival="closed", paused=False, auto_ramp=False, step_index=3, step_count=8, step_elapsed_s=12.0,
        step_remaining_s=18.0, warming_up=False, in_flight=64, queued=0, windows=windows, rolling_s=10.0,
        health=ClientHealth(loop_lag_ms_p99=1.2, cpu_pct=(60.0, 58.0)),
        replicas=(ReplicaStats("A", "http://a/v1", 10, 10, out_tok_s=900.0), ReplicaStats("B", "http://b/v1")),
    )  # fmt: skip


def cpu_per_call(fn: Callable[[], object], seconds: float = 1.0) -> float:
    """CPU seconds per call, over at least ``seconds`` of CPU."""
    fn()  # warm
    calls, t0 = 0, time.process_time()
    while time.process_time() - t0 < seconds:
        fn()
        calls += 1
    return (time.process_time() - t0) / calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--tok-s", type=float, default=10_000.0, help="aggregate output tokens/s to price at")
    parser.add_argument("--scrape-s", default="1,15", help="scrape intervals, seconds")
    parser.add_argument("--hz", type=float, default=4.0, help="snapshots per second (--refresh)")
    args = parser.parse_args()
    acc = accumulator(args.requests)
    snap = snapshot(acc)
    collector = SnapshotCollector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    collector.feed(snap)
    body = generate_latest(registry)
    scrape = cpu_per_call(lambda: generate_latest(registry))
    feed = cpu_per_call(lambda: collector.feed(snap), 0.2)
    run = acc.stats("run", 60.0)
    buckets = cpu_per_call(lambda: acc.with_buckets(run))
    print(f"snapshot with {args.requests:,} requests per window; scrape body {len(body):,} bytes")
    print(f"  per scrape (generate_latest):            {scrape * 1e6:9.1f} µs CPU")
    print(f"  per snapshot handed to the exporter:     {feed * 1e6:9.3f} µs CPU")
    print(
        f"  per snapshot, the run window bucketed:   {buckets * 1e6:9.1f} µs CPU (only with --metrics-port)"
    )
    s_per_1m = 1e6 / args.tok_s
    for interval in (float(v) for v in args.scrape_s.split(",")):
        added = s_per_1m * (scrape / interval + (feed + buckets) * args.hz)
        print(
            f"  --metrics-port on, scraped every {interval:g} s at {args.tok_s:,.0f} tok/s: "
            f"+{added * 1e3:.2f} ms CPU per 1M output tokens"
        )


if __name__ == "__main__":
    main()
